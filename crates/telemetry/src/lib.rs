//! OpenTelemetry for the operators who run this agent as a sub-agent.
//!
//! This crate is what the engine and the front ends see of telemetry, on the OpenTelemetry
//! API only: the caller's W3C trace context in and out ([`context`]), the spans of a turn
//! in the GenAI semantic conventions ([`spans`]), the metric instruments ([`metrics`]),
//! the `[otel]` table and `OTEL_*` variables resolved into what to export ([`settings`]),
//! and the hook through which a listener serves `GET /metrics` ([`scrape`]). Exporting
//! (OTLP over HTTP or gRPC, the Prometheus registry, logs) is installed by the binary:
//! nothing here opens a connection, and with nothing installed every call is a no-op.

pub mod context;
pub mod genai;
pub mod metrics;
pub mod scrape;
pub mod settings;
pub mod spans;

pub use context::W3cTraceContext;

use std::sync::atomic::{AtomicBool, Ordering};

/// The instrumentation scope every span and instrument of ours belongs to.
pub const SCOPE: &str = "interpreter";

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Prompts, answers and tool input/output go into spans only when the operator asked
/// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` or `otel.log_user_prompt`).
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Set once by the binary when it installs export.
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}
