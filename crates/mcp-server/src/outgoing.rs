//! Everything the server writes to the client, and the bookkeeping of the requests it
//! sends (`elicitation/create`).
//!
//! One writer task owns stdout; every other task sends it typed messages over a channel,
//! so lines never interleave and no task ever blocks on a slow client while holding
//! state. Server→client requests get numeric ids from one counter; their answers are
//! routed back by id to a oneshot the caller awaits with its own deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// A JSON-RPC id as the client sent it (number or string, kept verbatim).
pub type RequestId = Value;

#[derive(Debug, Serialize)]
struct ResponseLine<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a Value,
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

#[derive(Debug, Serialize)]
struct ErrorLine<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

#[derive(Debug, Serialize)]
struct MessageLine<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    method: &'a str,
    params: &'a Value,
}

/// What a server→client request came back with.
pub type ClientAnswer = Result<Value, RpcError>;

/// Cloneable handle for sending to the client.
#[derive(Clone)]
pub struct Outgoing {
    tx: mpsc::UnboundedSender<String>,
    next_request_id: Arc<AtomicI64>,
    pending: Arc<std::sync::Mutex<HashMap<i64, oneshot::Sender<ClientAnswer>>>>,
}

impl Outgoing {
    /// A handle plus the receiving end for [`run_writer`].
    pub fn new() -> (Self, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx,
                next_request_id: Arc::new(AtomicI64::new(0)),
                pending: Arc::new(std::sync::Mutex::new(HashMap::new())),
            },
            rx,
        )
    }

    fn push<T: Serialize>(&self, message: &T) {
        match serde_json::to_string(message) {
            Ok(line) => {
                // A closed writer means the client is gone; nothing left to tell it.
                let _ = self.tx.send(line);
            }
            Err(err) => tracing::error!("failed to serialize an outgoing message: {err}"),
        }
    }

    pub fn respond(&self, id: &RequestId, result: &Value) {
        self.push(&ResponseLine {
            jsonrpc: "2.0",
            id,
            result,
        });
    }

    pub fn respond_error(&self, id: &RequestId, error: &RpcError) {
        self.push(&ErrorLine {
            jsonrpc: "2.0",
            id,
            error,
        });
    }

    pub fn notify(&self, method: &str, params: &Value) {
        self.push(&MessageLine {
            jsonrpc: "2.0",
            id: None,
            method,
            params,
        });
    }

    /// Send a request; the answer arrives on the returned receiver. The caller must
    /// bound the wait and call [`Outgoing::forget_request`] when it gives up.
    pub fn request(&self, method: &str, params: &Value) -> (i64, oneshot::Receiver<ClientAnswer>) {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        self.push(&MessageLine {
            jsonrpc: "2.0",
            id: Some(id),
            method,
            params,
        });
        (id, rx)
    }

    pub fn forget_request(&self, id: i64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&id);
        }
    }

    /// Route a client's response or error to the request that awaits it.
    pub fn deliver_answer(&self, id: &Value, answer: ClientAnswer) {
        let Some(numeric) = id.as_i64() else {
            tracing::warn!("response with an id we never used: {id}");
            return;
        };
        let waiter = self
            .pending
            .lock()
            .ok()
            .and_then(|mut pending| pending.remove(&numeric));
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(answer);
            }
            None => tracing::warn!("response for unknown or expired request {numeric}"),
        }
    }
}

/// Write queued lines to `output` until every [`Outgoing`] handle is dropped.
pub async fn run_writer<W: AsyncWrite + Unpin>(
    mut output: W,
    mut rx: mpsc::UnboundedReceiver<String>,
) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if let Err(err) = output.write_all(line.as_bytes()).await {
            tracing::warn!("stdout write failed, stopping output: {err}");
            return;
        }
        // Flush only when the queue is momentarily empty, so bursts are batched.
        if rx.is_empty()
            && let Err(err) = output.flush().await
        {
            tracing::warn!("stdout flush failed, stopping output: {err}");
            return;
        }
    }
    let _ = output.flush().await;
}
