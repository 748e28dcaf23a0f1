//! The metric instruments. Labels are bounded by construction: outcomes and kinds from
//! fixed sets, tool names only for tools the thread offered (else `other`), the model and
//! provider the operator configured; never a thread id, a path or a command.
//!
//! Instruments are made on first use from the global meter provider, so the binary must
//! install its provider before the first turn (it does, before any front end starts).
//!
//! The model label is the one value a server's client can choose (an app-server client
//! names a thread's model): the first [`MAX_MODEL_LABELS`] models a process sees are
//! labelled by name, any later one as `other`, so no client can grow the label set.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};
use opentelemetry::{InstrumentationScope, KeyValue, global};

use crate::genai;
use crate::spans::{TurnOutcome, Usage};

pub struct Instruments {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    turns: Counter<u64>,
    tool_calls: Counter<u64>,
    approvals: Counter<u64>,
    approval_wait: Histogram<f64>,
    running_threads: UpDownCounter<i64>,
    sandbox_denials: Counter<u64>,
    model_errors: Counter<u64>,
    compactions: Counter<u64>,
}

/// Bucket boundaries the GenAI conventions advise for `gen_ai.client.token.usage`.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// ... and for `gen_ai.client.operation.duration` (seconds).
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// Approval waits: from an instant answer to the longest timeout anyone configures.
const WAIT_BUCKETS: [f64; 10] = [0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0];

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// How many distinct model names one process labels metrics with.
pub const MAX_MODEL_LABELS: usize = 32;

static MODELS_SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// `model` as a metric label: itself while the process has seen fewer than
/// [`MAX_MODEL_LABELS`] models, else `other`.
pub fn model_label(model: &str) -> String {
    let Ok(mut seen) = MODELS_SEEN.lock() else {
        return "other".to_string();
    };
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.contains(model) || (seen.len() < MAX_MODEL_LABELS && seen.insert(model.to_string())) {
        model.to_string()
    } else {
        "other".to_string()
    }
}

/// The process's instruments (no-ops until the binary installs a meter provider).
pub fn instruments() -> &'static Instruments {
    INSTRUMENTS.get_or_init(|| {
        let scope = InstrumentationScope::builder(crate::SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let meter = global::meter_with_scope(scope);
        Instruments {
            token_usage: meter
                .u64_histogram(genai::GEN_AI_CLIENT_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens used per model request, by token type")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram(genai::GEN_AI_CLIENT_OPERATION_DURATION)
                .with_unit("s")
                .with_description("Duration of model requests and agent turns")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            turns: meter
                .u64_counter("interpreter.turns")
                .with_unit("{turn}")
                .with_description("Turns ended, by outcome")
                .build(),
            tool_calls: meter
                .u64_counter("interpreter.tool.calls")
                .with_unit("{call}")
                .with_description("Tool calls ended, by tool and outcome")
                .build(),
            approvals: meter
                .u64_counter("interpreter.approvals")
                .with_unit("{request}")
                .with_description("Approval requests answered, by kind and outcome")
                .build(),
            approval_wait: meter
                .f64_histogram("interpreter.approval.wait")
                .with_unit("s")
                .with_description("Time an approval request waited for its answer")
                .with_boundaries(WAIT_BUCKETS.to_vec())
                .build(),
            running_threads: meter
                .i64_up_down_counter("interpreter.threads.running")
                .with_unit("{thread}")
                .with_description("Threads loaded in this process")
                .build(),
            sandbox_denials: meter
                .u64_counter("interpreter.sandbox.denials")
                .with_unit("{denial}")
                .with_description("Commands the sandbox stopped from doing something")
                .build(),
            model_errors: meter
                .u64_counter("interpreter.model.errors")
                .with_unit("{error}")
                .with_description("Failed model requests, by error class")
                .build(),
            compactions: meter
                .u64_counter("interpreter.compactions")
                .with_unit("{compaction}")
                .with_description("Conversation compactions, by trigger")
                .build(),
        }
    })
}

impl Instruments {
    /// One model request: its tokens by type and its duration.
    pub fn record_chat(
        &self,
        provider: &str,
        model: &str,
        usage: &Usage,
        duration: Duration,
        error_type: Option<&str>,
    ) {
        let base = [
            KeyValue::new(genai::GEN_AI_OPERATION_NAME, "chat"),
            KeyValue::new(genai::GEN_AI_PROVIDER_NAME, provider.to_string()),
            KeyValue::new(genai::GEN_AI_REQUEST_MODEL, model_label(model)),
        ];
        if error_type.is_none() {
            for (kind, count) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
            ] {
                let mut labels = base.to_vec();
                labels.push(KeyValue::new(genai::GEN_AI_TOKEN_TYPE, kind));
                self.token_usage.record(count, &labels);
            }
        }
        let mut labels = base.to_vec();
        if let Some(error_type) = error_type {
            labels.push(KeyValue::new("error.type", error_type.to_string()));
            self.model_errors
                .add(1, &[KeyValue::new("error.type", error_type.to_string())]);
        }
        self.operation_duration
            .record(duration.as_secs_f64(), &labels);
    }

    /// One turn ended.
    pub fn record_turn(
        &self,
        provider: &str,
        model: &str,
        outcome: TurnOutcome,
        duration: Duration,
    ) {
        self.turns
            .add(1, &[KeyValue::new("outcome", outcome.as_str())]);
        let mut labels = vec![
            KeyValue::new(genai::GEN_AI_OPERATION_NAME, "invoke_agent"),
            KeyValue::new(genai::GEN_AI_PROVIDER_NAME, provider.to_string()),
            KeyValue::new(genai::GEN_AI_REQUEST_MODEL, model_label(model)),
        ];
        if outcome == TurnOutcome::Failed {
            labels.push(KeyValue::new("error.type", "turn_failed"));
        }
        self.operation_duration
            .record(duration.as_secs_f64(), &labels);
    }

    /// One tool call ended; `tool` must be a name the thread offered (or `other`).
    pub fn record_tool_call(&self, tool: &str, outcome: &str) {
        self.tool_calls.add(
            1,
            &[
                KeyValue::new(genai::GEN_AI_TOOL_NAME, tool.to_string()),
                KeyValue::new("outcome", outcome.to_string()),
            ],
        );
    }

    /// One approval request answered (`kind`: `command`, `patch`, `permissions`, ...;
    /// `outcome`: `approved`, `denied`, `timed_out`, `abort`).
    pub fn record_approval(&self, kind: &'static str, outcome: &'static str, wait: Duration) {
        let labels = [
            KeyValue::new("kind", kind),
            KeyValue::new("outcome", outcome),
        ];
        self.approvals.add(1, &labels);
        self.approval_wait.record(wait.as_secs_f64(), &labels);
    }

    pub fn thread_loaded(&self) {
        self.running_threads.add(1, &[]);
    }

    pub fn thread_unloaded(&self) {
        self.running_threads.add(-1, &[]);
    }

    pub fn record_sandbox_denial(&self) {
        self.sandbox_denials.add(1, &[]);
    }

    /// `trigger`: `auto` (the context filled up or overflowed) or `manual`.
    pub fn record_compaction(&self, trigger: &'static str) {
        self.compactions
            .add(1, &[KeyValue::new("trigger", trigger)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_cannot_grow_the_model_labels() {
        let labels: HashSet<String> = (0..1000)
            .map(|n| model_label(&format!("model-{n}")))
            .collect();
        assert!(labels.len() <= MAX_MODEL_LABELS + 1, "{}", labels.len());
        assert!(labels.contains("other"));
    }
}
