//! What goes into a thread's submission queue: an [`Op`] with the id its events will
//! carry. Below both the thread manager that sends it and the op loop that takes it.

use interpreter_protocol::Op;
use interpreter_telemetry::W3cTraceContext;

/// An [`Op`] with the id its events will carry.
#[derive(Debug, Clone)]
pub struct Submission {
    pub id: String,
    pub op: Op,
    /// The caller's trace context: a turn this op starts is a child of it.
    pub trace: Option<W3cTraceContext>,
}
