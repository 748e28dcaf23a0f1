//! One client connection as the processor sees it: a sink for outgoing messages, the
//! connection's handshake state, and the server→client requests waiting for answers.
//!
//! Transports (stdio, WebSocket, Unix socket, the MCP connection) only move messages: they
//! give the processor a [`MessageSink`] and feed it what the client sends.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::protocol::{JsonRpcError, RequestId, now_ms};

/// Where a connection's outgoing messages go. `send` must not block: transports queue.
pub trait MessageSink: Send + Sync + 'static {
    /// Queue one message for the client; `false` once the connection is gone.
    fn send(&self, message: Value) -> bool;
}

impl MessageSink for tokio::sync::mpsc::UnboundedSender<Value> {
    fn send(&self, message: Value) -> bool {
        tokio::sync::mpsc::UnboundedSender::send(self, message).is_ok()
    }
}

/// Requests one client may have in progress at once, as the reference's bounded queue;
/// past it a request is refused with `-32001` ("Server overloaded; retry later.").
pub const MAX_IN_FLIGHT: usize = 128;

/// A client's answer to a server request.
pub type ClientAnswer = Result<Value, JsonRpcError>;

/// One connected client.
pub struct Connection {
    pub id: u64,
    sink: Arc<dyn MessageSink>,
    initialized: AtomicBool,
    /// v1 approval requests instead of v2 ones (decided by `initialize`).
    legacy_approvals: AtomicBool,
    /// The client asked for `capabilities.experimentalApi`: experimental methods are open.
    experimental_api: AtomicBool,
    opt_out: std::sync::Mutex<HashSet<String>>,
    pending: std::sync::Mutex<HashMap<RequestId, oneshot::Sender<ClientAnswer>>>,
    next_request_id: AtomicI64,
    /// Requests of this client being handled right now (see [`MAX_IN_FLIGHT`]).
    in_flight: AtomicUsize,
    /// Fires when the transport closes: waits on this client's behalf end.
    pub closed: CancellationToken,
}

impl Connection {
    pub(crate) fn new(id: u64, sink: Arc<dyn MessageSink>) -> Self {
        Self {
            id,
            sink,
            initialized: AtomicBool::new(false),
            legacy_approvals: AtomicBool::new(false),
            experimental_api: AtomicBool::new(false),
            opt_out: std::sync::Mutex::default(),
            pending: std::sync::Mutex::default(),
            next_request_id: AtomicI64::new(0),
            in_flight: AtomicUsize::new(0),
            closed: CancellationToken::new(),
        }
    }

    /// Count a request in; `None` when the client already has [`MAX_IN_FLIGHT`] running.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<InFlight> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(InFlight(self.clone()))
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Marks the handshake done; `false` if it already was.
    pub(crate) fn mark_initialized(&self, legacy_approvals: bool, opt_out: Vec<String>) -> bool {
        if self.initialized.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.legacy_approvals
            .store(legacy_approvals, Ordering::Release);
        if let Ok(mut set) = self.opt_out.lock() {
            set.extend(opt_out);
        }
        true
    }

    /// Open the experimental methods to this client.
    pub(crate) fn allow_experimental(&self) {
        self.experimental_api.store(true, Ordering::Release);
    }

    pub fn experimental_api(&self) -> bool {
        self.experimental_api.load(Ordering::Acquire)
    }

    pub fn legacy_approvals(&self) -> bool {
        self.legacy_approvals.load(Ordering::Acquire)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    fn send(&self, message: Value) {
        if !self.sink.send(message) {
            self.closed.cancel();
        }
    }

    pub fn respond(&self, id: RequestId, result: Value) {
        self.send(serde_json::json!({"id": id, "result": result}));
    }

    pub fn respond_error(&self, id: Option<RequestId>, error: JsonRpcError) {
        self.send(serde_json::json!({"id": id, "error": error}));
    }

    /// Send a notification unless this connection opted out of `method`.
    pub fn notify<T: Serialize>(&self, method: &str, params: &T) {
        if self
            .opt_out
            .lock()
            .map(|set| set.contains(method))
            .unwrap_or(false)
        {
            return;
        }
        let params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(err) => {
                tracing::error!("cannot serialize {method} params: {err}");
                return;
            }
        };
        self.send(serde_json::json!({"method": method, "params": params, "emittedAtMs": now_ms()}));
    }

    /// Send a server→client request; the receiver yields the client's answer. Dropped
    /// unanswered (sender gone) when the connection closes.
    pub fn request<T: Serialize>(
        &self,
        method: &str,
        params: &T,
    ) -> (RequestId, oneshot::Receiver<ClientAnswer>) {
        let n = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        // Strings so they cannot collide with a client's own integer ids in its logs.
        let id = RequestId::String(format!("srv-{n}"));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id.clone(), tx);
        }
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(serde_json::json!({"id": id, "method": method, "params": params}));
        (id, rx)
    }

    /// Forget a request nobody waits for any more (its deadline passed).
    pub fn forget_request(&self, id: &RequestId) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(id);
        }
    }

    /// Route a client's response to the request waiting for it. `false` for an id we
    /// did not send (or already answered).
    pub(crate) fn resolve(&self, id: &RequestId, answer: ClientAnswer) -> bool {
        let waiter = self.pending.lock().ok().and_then(|mut p| p.remove(id));
        waiter.is_some_and(|w| w.send(answer).is_ok())
    }

    /// The transport ended: wake everything waiting on this client.
    pub fn close(&self) {
        self.closed.cancel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.clear();
        }
    }
}

/// One admitted request; counts out when dropped, however the request ends.
pub(crate) struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
