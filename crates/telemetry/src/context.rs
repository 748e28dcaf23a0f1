//! The caller's W3C trace context, in and out.
//!
//! In: `traceparent`/`tracestate` from wherever a front end finds them (`_meta` of an MCP
//! or ACP request, the `trace` object of an app-server request, the `traceparent` HTTP
//! header, `TRACEPARENT` for `exec`) become the parent of the turn's span. Out: the
//! current span's context as the same two strings, for a model request's headers or an
//! MCP call's `_meta`. Values from outside are bounded and parsed by the SDK's
//! propagator; anything it does not accept is no parent at all, never an error for the
//! caller (a trace is advice, not a part of the request).

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde::{Deserialize, Serialize};

/// `traceparent` is 55 characters in version 00; later versions may append fields.
const MAX_TRACEPARENT: usize = 256;
/// W3C: at most 32 list members; 512 characters is the size vendors must accept.
const MAX_TRACESTATE: usize = 512;

/// A W3C trace context as it travels in JSON (Codex's `W3cTraceContext`: the app-server's
/// `trace` object has exactly these two keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct W3cTraceContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl W3cTraceContext {
    /// From a JSON object carrying `traceparent` (and maybe `tracestate`) as strings: an
    /// MCP or ACP `_meta`, or an app-server `trace` object. `None` without a traceparent.
    pub fn from_json(object: &serde_json::Value) -> Option<Self> {
        let text = |key: &str| object.get(key).and_then(|v| v.as_str()).map(str::to_string);
        Self::from_parts(text("traceparent"), text("tracestate"))
    }

    /// From `TRACEPARENT`/`TRACESTATE` (how a parent process hands a trace to `exec`).
    pub fn from_env(env: &HashMap<String, String>) -> Option<Self> {
        Self::from_parts(
            env.get("TRACEPARENT").cloned(),
            env.get("TRACESTATE").cloned(),
        )
    }

    /// From HTTP header values (`traceparent`, `tracestate`).
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Self> {
        Self::from_parts(
            traceparent.map(str::to_string),
            tracestate.map(str::to_string),
        )
    }

    fn from_parts(traceparent: Option<String>, tracestate: Option<String>) -> Option<Self> {
        let traceparent = traceparent?.trim().to_string();
        if traceparent.is_empty() || traceparent.len() > MAX_TRACEPARENT {
            return None;
        }
        let tracestate = tracestate
            .map(|state| state.trim().to_string())
            .filter(|state| !state.is_empty() && state.len() <= MAX_TRACESTATE);
        Some(Self {
            traceparent: Some(traceparent),
            tracestate,
        })
    }

    /// This context if it is within the size bounds (a deserialized one was not checked).
    pub fn checked(self) -> Option<Self> {
        Self::from_parts(self.traceparent, self.tracestate)
    }

    /// The context of the current span, if there is a valid one (export installed and a
    /// span running, or a caller's context carried through).
    pub fn current() -> Option<Self> {
        Self::of(&Context::current())
    }

    /// The context of `cx`'s span, if valid.
    pub fn of(cx: &Context) -> Option<Self> {
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier: HashMap<String, String> = HashMap::new();
        TraceContextPropagator::new().inject_context(cx, &mut carrier);
        Self::from_parts(carrier.remove("traceparent"), carrier.remove("tracestate"))
    }

    /// The remote span this names, as a parent context; `None` when the propagator does
    /// not accept it (malformed, all-zero ids, unknown version layout).
    pub fn to_context(&self) -> Option<Context> {
        let mut carrier: HashMap<String, String> = HashMap::new();
        carrier.insert("traceparent".into(), self.traceparent.clone()?);
        if let Some(state) = &self.tracestate {
            carrier.insert("tracestate".into(), state.clone());
        }
        let cx = TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier);
        cx.span().span_context().is_valid().then_some(cx)
    }

    /// As a JSON object (`{"traceparent": …, "tracestate": …}`), for `_meta`.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        if let Some(parent) = &self.traceparent {
            map.insert("traceparent".into(), parent.clone().into());
        }
        if let Some(state) = &self.tracestate {
            map.insert("tracestate".into(), state.clone().into());
        }
        map
    }
}

/// The context a turn's span starts under: the caller's, when it sent a valid one, else
/// a fresh root (never whatever happens to be current in the task that starts it).
pub fn parent_context(trace: Option<&W3cTraceContext>) -> Context {
    trace
        .and_then(W3cTraceContext::to_context)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_valid_traceparent_becomes_a_remote_parent() {
        let trace = W3cTraceContext::from_json(&serde_json::json!({
            "traceparent": PARENT, "tracestate": "vendor=1"
        }))
        .unwrap();
        let cx = trace.to_context().unwrap();
        let span = cx.span();
        let span_context = span.span_context();
        assert!(span_context.is_remote());
        assert_eq!(
            span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(W3cTraceContext::of(&cx), Some(trace));
    }

    #[test]
    fn malformed_or_oversized_contexts_are_no_parent() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            let parent =
                W3cTraceContext::from_headers(Some(bad), None).and_then(|trace| trace.to_context());
            assert!(parent.is_none(), "{bad:?} was accepted");
        }
        let huge = "0".repeat(MAX_TRACEPARENT + 1);
        assert_eq!(W3cTraceContext::from_headers(Some(&huge), None), None);
        let trace = W3cTraceContext::from_headers(Some(PARENT), Some(&"a".repeat(600))).unwrap();
        assert_eq!(trace.tracestate, None);
    }

    #[test]
    fn no_span_no_context_out() {
        assert_eq!(W3cTraceContext::of(&Context::new()), None);
        assert!(!parent_context(None).span().span_context().is_valid());
    }
}
