//! The JSON-RPC dispatcher: reads frames, enforces the lifecycle rules, answers the
//! cheap methods inline, and spawns one task per `tools/call`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::framing::{Frame, LineReader, MAX_LINE_BYTES};
use crate::outgoing::{Outgoing, RpcError, run_writer};
use crate::rmcp_glue::{self, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use crate::runner::{self, CallContext, Shared};
use crate::tools::{CODEX_REPLY_TOOL, CODEX_TOOL, tools_list};

/// Frames waiting for the dispatcher; a full queue slows the reader, not memory.
const INCOMING_QUEUE: usize = 128;
/// Total time budget for stopping after stdin closes.
const SHUTDOWN_BUDGET: Duration = Duration::from_millis(1500);

/// Key of a client request id that keeps `7` and `"7"` apart.
fn id_key(id: &Value) -> String {
    id.to_string()
}

type InFlight = Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>;

struct Dispatcher {
    shared: Arc<Shared>,
    outgoing: Outgoing,
    initialized: bool,
    client_can_elicit: bool,
    in_flight: InFlight,
    shutdown: CancellationToken,
    calls: JoinSet<()>,
}

/// Serve one MCP connection over `input`/`output` until `input` ends.
pub async fn serve_connection<R, W>(input: R, output: W, shared: Arc<Shared>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outgoing, outgoing_rx) = Outgoing::new();
    let writer = tokio::spawn(run_writer(output, outgoing_rx));
    let (frames_tx, mut frames_rx) = mpsc::channel(INCOMING_QUEUE);
    let reader = tokio::spawn(async move {
        let mut lines = LineReader::new(BufReader::new(input), MAX_LINE_BYTES);
        loop {
            let frame = lines.next_frame().await;
            let eof = frame == Frame::Eof;
            if frames_tx.send(frame).await.is_err() || eof {
                return;
            }
        }
    });

    let mut dispatcher = Dispatcher {
        shared: shared.clone(),
        outgoing: outgoing.clone(),
        initialized: false,
        client_can_elicit: false,
        in_flight: Arc::default(),
        shutdown: CancellationToken::new(),
        calls: JoinSet::new(),
    };
    while let Some(frame) = frames_rx.recv().await {
        while dispatcher.calls.try_join_next().is_some() {}
        match frame {
            Frame::Eof => break,
            Frame::TooLong => outgoing.respond_error(
                &Value::Null,
                &RpcError::new(
                    INVALID_REQUEST,
                    format!("message exceeds the maximum line length of {MAX_LINE_BYTES} bytes"),
                ),
            ),
            Frame::Line(bytes) => dispatcher.handle_line(&bytes),
        }
    }
    reader.abort();

    // stdin closed: interrupt every running turn, give the engine a bounded moment to
    // record it, then stop.
    tracing::info!(
        "input closed; stopping {} running call(s)",
        dispatcher.calls.len()
    );
    dispatcher.shutdown.cancel();
    let deadline = tokio::time::Instant::now() + SHUTDOWN_BUDGET;
    let _ = tokio::time::timeout_at(deadline, async {
        while dispatcher.calls.join_next().await.is_some() {}
    })
    .await;
    dispatcher.calls.abort_all();
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    shared
        .thread_manager
        .shutdown_all(remaining.max(Duration::from_millis(200)))
        .await;
    drop(dispatcher);
    drop(outgoing);
    // The writer ends once every sender is gone; do not wait on a stuck stdout.
    let _ = tokio::time::timeout(Duration::from_millis(200), writer).await;
}

impl Dispatcher {
    fn handle_line(&mut self, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let message: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                self.outgoing.respond_error(
                    &Value::Null,
                    &RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
                );
                return;
            }
        };
        let Value::Object(message) = message else {
            let text = if message.is_array() {
                "batch requests are not supported; send one JSON-RPC message per line"
            } else {
                "a JSON-RPC message must be an object"
            };
            self.outgoing
                .respond_error(&Value::Null, &RpcError::new(INVALID_REQUEST, text));
            return;
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str);
        let valid_id = id
            .as_ref()
            .is_some_and(|id| id.is_string() || id.is_i64() || id.is_u64());
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            if let Some(id) = id.as_ref().filter(|_| method.is_some()) {
                self.outgoing.respond_error(
                    id,
                    &RpcError::new(INVALID_REQUEST, "jsonrpc must be \"2.0\""),
                );
            } else if method.is_some() || id.is_none() {
                self.outgoing.respond_error(
                    &Value::Null,
                    &RpcError::new(INVALID_REQUEST, "jsonrpc must be \"2.0\""),
                );
            }
            return;
        }
        match (method, id) {
            (Some(method), Some(id)) if valid_id => {
                let method = method.to_string();
                let params = message.get("params").cloned();
                self.handle_request(id, &method, params);
            }
            (Some(_), Some(id)) => self.outgoing.respond_error(
                &Value::Null,
                &RpcError::new(INVALID_REQUEST, format!("invalid request id {id}")),
            ),
            (Some(method), None) => {
                let params = message.get("params").cloned();
                self.handle_notification(method, params.as_ref());
            }
            (None, Some(id)) => {
                if let Some(result) = message.get("result") {
                    self.outgoing.deliver_answer(&id, Ok(result.clone()));
                } else if let Some(error) = message.get("error") {
                    let error = RpcError::new(
                        error.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
                        error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    );
                    self.outgoing.deliver_answer(&id, Err(error));
                } else {
                    self.outgoing.respond_error(
                        &id,
                        &RpcError::new(INVALID_REQUEST, "message has neither method nor result"),
                    );
                }
            }
            (None, None) => self.outgoing.respond_error(
                &Value::Null,
                &RpcError::new(INVALID_REQUEST, "message has neither method nor id"),
            ),
        }
    }

    fn handle_notification(&mut self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/initialized" => tracing::debug!("client initialized"),
            "notifications/cancelled" => {
                let Some(request_id) = params.and_then(|p| p.get("requestId")) else {
                    tracing::warn!("notifications/cancelled without requestId");
                    return;
                };
                let token = self
                    .in_flight
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&id_key(request_id)).cloned());
                match token {
                    Some(token) => token.cancel(),
                    None => tracing::debug!("cancel for unknown or finished request {request_id}"),
                }
            }
            other => tracing::debug!("ignoring notification {other}"),
        }
    }

    fn handle_request(&mut self, id: Value, method: &str, params: Option<Value>) {
        let meta = params.as_ref().and_then(|p| p.get("_meta"));
        // 2026-07-28: the version travels on each request.
        let request_version = meta
            .and_then(|m| m.get(rmcp_glue::META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        if let Some(version) = request_version
            && !rmcp_glue::is_supported_version(version)
        {
            self.outgoing.respond_error(
                &id,
                &RpcError::new(
                    rmcp_glue::UNSUPPORTED_PROTOCOL_VERSION,
                    format!("unsupported protocol version {version}"),
                )
                .with_data(
                    json!({"supported": rmcp_glue::supported_versions(), "requested": version}),
                ),
            );
            return;
        }
        let stateless = request_version.is_some_and(rmcp_glue::is_stateless_era);
        let result = match method {
            "initialize" => {
                if self.initialized {
                    Err(RpcError::new(
                        INVALID_REQUEST,
                        "initialize called more than once",
                    ))
                } else {
                    self.initialized = true;
                    Ok(self.initialize(params.as_ref()))
                }
            }
            "ping" => Ok(json!({})),
            "server/discover" => Ok(rmcp_glue::discover_result()),
            "tools/list" => Ok(tools_list()),
            "resources/list" => Ok(json!({"resources": []})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
            "prompts/list" => Ok(json!({"prompts": []})),
            "resources/read" => Err(RpcError::new(
                INVALID_PARAMS,
                "resource not found: this server has no resources",
            )),
            "prompts/get" => Err(RpcError::new(
                INVALID_PARAMS,
                "prompt not found: this server has no prompts",
            )),
            "completion/complete" => Ok(json!({"completion": {"values": [], "hasMore": false}})),
            "logging/setLevel" => Ok(json!({})),
            "tools/call" => {
                self.start_call(id, params, stateless);
                return;
            }
            other => Err(
                RpcError::new(METHOD_NOT_FOUND, format!("method not found: {other}"))
                    .with_data(json!({"method": other})),
            ),
        };
        match result {
            Ok(mut result) => {
                if stateless && let Value::Object(map) = &mut result {
                    map.entry("resultType").or_insert(json!("complete"));
                }
                self.outgoing.respond(&id, &result);
            }
            Err(error) => self.outgoing.respond_error(&id, &error),
        }
    }

    fn initialize(&mut self, params: Option<&Value>) -> Value {
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.client_can_elicit = params
            .and_then(|p| p.pointer("/capabilities/elicitation"))
            .is_some_and(Value::is_object);
        json!({
            "protocolVersion": rmcp_glue::negotiate_initialize_version(requested),
            "capabilities": rmcp_glue::server_capabilities(),
            "serverInfo": rmcp_glue::server_info(),
            "instructions": "Use the `codex` tool to run the coding agent on a task and `codex-reply` with the returned threadId to continue it.",
        })
    }

    fn start_call(&mut self, id: Value, params: Option<Value>, stateless: bool) {
        let name = params
            .as_ref()
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let is_reply = match name.as_deref() {
            Some(CODEX_TOOL) => false,
            Some(CODEX_REPLY_TOOL) => true,
            Some(other) => {
                self.outgoing.respond_error(
                    &id,
                    &RpcError::new(
                        INVALID_PARAMS,
                        format!(
                            "Unknown tool '{other}'; this server has `codex` and `codex-reply`"
                        ),
                    ),
                );
                return;
            }
            None => {
                self.outgoing.respond_error(
                    &id,
                    &RpcError::new(INVALID_PARAMS, "tools/call needs a tool `name`"),
                );
                return;
            }
        };
        let arguments = params.as_ref().and_then(|p| p.get("arguments")).cloned();
        let progress_token = params
            .as_ref()
            .and_then(|p| p.pointer("/_meta/progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        let key = id_key(&id);
        let cancel = self.shutdown.child_token();
        if let Ok(mut m) = self.in_flight.lock() {
            m.insert(key.clone(), cancel.clone());
        }
        let ctx = CallContext {
            request_id: id.clone(),
            progress_token,
            cancel: cancel.clone(),
            outgoing: self.outgoing.clone(),
            // 2026-07-28 forbids server→client requests; its clients get the fallback.
            can_elicit: self.client_can_elicit && !stateless,
        };
        let shared = self.shared.clone();
        let in_flight = self.in_flight.clone();
        let outgoing = self.outgoing.clone();
        self.calls.spawn(async move {
            let result = if is_reply {
                runner::run_codex_reply(shared, ctx, arguments).await
            } else {
                runner::run_codex(shared, ctx, arguments).await
            };
            if let Ok(mut m) = in_flight.lock() {
                m.remove(&key);
            }
            // A cancelled request gets no response, even if it finished meanwhile.
            if let Some(mut result) = result
                && !cancel.is_cancelled()
            {
                if stateless && let Value::Object(map) = &mut result {
                    map.insert("resultType".to_string(), json!("complete"));
                }
                outgoing.respond(&id, &result);
            }
        });
    }
}
