//! The app-server's v2 methods (`thread/*`, `turn/*`, `account/*`, `config/*`,
//! `model/list`, …) on the MCP connection, beside the MCP methods: a thin adapter from
//! rmcp's custom requests and notifications to the app-server's `MessageProcessor`, which
//! shares this server's thread manager (so `codex` tool threads and v2 threads are the
//! same threads, one turn at a time each).
//!
//! * Requests: `ServerHandler::on_custom_request` → `MessageProcessor::handle_request`.
//!   The app-server's own `initialize` is not needed (the MCP handshake is the handshake).
//! * Notifications (`turn/started`, `item/*`, …) go out as custom notifications.
//! * Approval requests (`item/commandExecution/requestApproval`, …) go out as custom
//!   server→client requests in the legacy era only. The 2026-07-28 era forbids server
//!   requests, so there the request is answered at once with "method not found" and the
//!   configured fallback (`[app_server] approval_fallback`, default deny) applies.

use std::sync::Arc;
use std::time::Duration;

use interpreter_app_server::{Connection, MessageProcessor};
use rmcp::RoleServer;
use rmcp::model::{
    CustomNotification, CustomRequest, ErrorCode, ErrorData, ServerNotification, ServerRequest,
};
use rmcp::service::{Peer, ServiceError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Upper bound on waiting for a client's answer to a server request; the turn's own
/// approval deadline normally ends the wait much earlier.
const CLIENT_ANSWER_CAP: Duration = Duration::from_secs(3600);

/// The app-server connection of one MCP connection, created on its first v2 request.
pub(crate) struct AppBridge {
    processor: MessageProcessor,
    connection: std::sync::OnceLock<Arc<Connection>>,
}

impl AppBridge {
    pub(crate) fn new(processor: MessageProcessor) -> Self {
        Self {
            processor,
            connection: std::sync::OnceLock::new(),
        }
    }

    /// Whether `method` is an app-server method this adapter answers.
    pub(crate) fn handles(method: &str) -> bool {
        method != "initialize" && MessageProcessor::handles(method)
    }

    /// Run one v2 request for the client behind `peer`.
    pub(crate) async fn request(
        &self,
        request: CustomRequest,
        peer: &Peer<RoleServer>,
        modern: bool,
    ) -> Result<Value, ErrorData> {
        let connection = self.connection(peer, modern);
        self.processor
            .handle_request(&connection, &request.method, request.params)
            .await
            .map_err(|e| {
                let code = i32::try_from(e.code).unwrap_or(ErrorCode::INTERNAL_ERROR.0);
                ErrorData::new(ErrorCode(code), e.message, e.data)
            })
    }

    fn connection(&self, peer: &Peer<RoleServer>, modern: bool) -> Arc<Connection> {
        self.connection
            .get_or_init(|| {
                let (tx, rx) = mpsc::unbounded_channel::<Value>();
                let connection = self.processor.connect_initialized(Arc::new(tx), false);
                tokio::spawn(pump(
                    self.processor.clone(),
                    connection.clone(),
                    peer.clone(),
                    modern,
                    rx,
                ));
                connection
            })
            .clone()
    }
}

impl Drop for AppBridge {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.get() {
            self.processor.disconnect(connection);
        }
    }
}

/// Carry the processor's outgoing messages to the MCP peer.
async fn pump(
    processor: MessageProcessor,
    connection: Arc<Connection>,
    peer: Peer<RoleServer>,
    modern: bool,
    mut rx: mpsc::UnboundedReceiver<Value>,
) {
    while let Some(message) = rx.recv().await {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let params = message.get("params").cloned();
        let id = message.get("id").cloned();
        match (method, id) {
            (Some(method), None) => {
                let notification =
                    ServerNotification::CustomNotification(CustomNotification::new(method, params));
                if peer.send_notification(notification).await.is_err() {
                    break;
                }
            }
            (Some(method), Some(id)) if modern => {
                tracing::debug!("{method}: server requests are not allowed in this MCP era");
                processor.handle_incoming(
                    &connection,
                    json!({"id": id, "error": {"code": -32601, "message": "server requests are not available in the 2026-07-28 MCP era"}}),
                );
            }
            (Some(method), Some(id)) => {
                let peer = peer.clone();
                let processor = processor.clone();
                let connection = connection.clone();
                tokio::spawn(async move {
                    let request = ServerRequest::CustomRequest(CustomRequest::new(method, params));
                    let answer = tokio::select! {
                        answer = peer.send_request(request) => answer,
                        () = connection.closed.cancelled() => return,
                        () = tokio::time::sleep(CLIENT_ANSWER_CAP) => return,
                    };
                    let reply = match answer {
                        Ok(result) => {
                            json!({"id": id, "result": serde_json::to_value(result).unwrap_or(Value::Null)})
                        }
                        Err(ServiceError::McpError(error)) => {
                            json!({"id": id, "error": {"code": error.code.0, "message": error.message}})
                        }
                        Err(other) => {
                            json!({"id": id, "error": {"code": -32603, "message": other.to_string()}})
                        }
                    };
                    processor.handle_incoming(&connection, reply);
                });
            }
            // Responses go back through `handle_request`'s return value, never here.
            (None, _) => {}
        }
    }
}
