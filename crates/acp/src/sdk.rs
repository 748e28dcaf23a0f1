//! The only module that touches the ACP SDK (`agent-client-protocol`, stable v1): the
//! stdio connection, one handler per method, and the conversions between the SDK's wire
//! types and the agent's own. Handlers return at once; the work runs on its own task and
//! answers through its responder, so a long prompt never holds up a `session/cancel`.
//!
//! A line that is not JSON or is too long is answered here, as every front end answers
//! it ([`interpreter_transport::jsonrpc::Unservable`]). The SDK answers the rest of what
//! never reaches a handler: `-32600` for a malformed envelope, `-32601` for an unknown method, `-32602` for params
//! that do not parse.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    self as wire, AgentCapabilities, CancelNotification, ClientCapabilities, CloseSessionRequest,
    CloseSessionResponse, ContentBlock, ContentChunk, DeleteSessionRequest, DeleteSessionResponse,
    FileSystemCapabilities, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PermissionOption,
    PermissionOptionKind, PromptCapabilities, PromptRequest, PromptResponse, ReadTextFileRequest,
    RequestPermissionOutcome, RequestPermissionRequest, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionDeleteCapabilities, SessionInfo,
    SessionListCapabilities, SessionMode, SessionModeState, SessionNotification,
    SessionResumeCapabilities, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, TextContent, WriteTextFileRequest,
};
use agent_client_protocol::{Client, Error, ErrorCode, JsonRpcResponse, Lines};
use futures::StreamExt as _;
use interpreter_core::ErrorKind;
use interpreter_core::config::McpServerConfig;
use interpreter_core::store::RUNS_ELSEWHERE_CODE;
use interpreter_core::workspace_files::{FileFuture, LocalFiles, Target, WorkspaceFiles};
use interpreter_protocol::ThreadId;
use interpreter_protocol::UserInput;
use interpreter_transport::jsonrpc::Unservable;
use interpreter_transport::lines::{BoundedLines, Line};
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, Settings};
use crate::error::AcpError;
use crate::turn;
use crate::update::{
    DEFAULT_EFFORT, EFFORTS, Mode, Permission, PlanStatus, SessionOption, SessionState, StopReason,
    ToolCall, ToolCallUpdate, ToolContent, ToolKind, ToolStatus, Update,
};

/// How long the editor may take to read or save a file for a patch.
const FILE_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

type Connection = agent_client_protocol::v1::ConnectionTo<Client>;
type Responder<T> = agent_client_protocol::v1::Responder<T>;

/// The editor on the other end: where updates go and whom permission is asked of.
#[derive(Clone)]
pub(crate) struct Editor {
    connection: Connection,
}

impl Editor {
    /// Send one `session/update`. A failure means the editor is gone; the turn then ends
    /// when the connection does.
    pub(crate) fn update(&self, session_id: &str, update: Update) {
        let notification = SessionNotification::new(session_id.to_string(), session_update(update));
        if let Err(e) = self.connection.send_notification(notification) {
            tracing::debug!("session/update not sent: {e}");
        }
    }

    /// `session/request_permission` about an announced tool call. `None` (deny) when the
    /// question is cancelled, fails, is answered with anything unknown, or gets no answer
    /// within `deadline`; the pending request is then withdrawn with `$/cancel_request`.
    pub(crate) async fn ask_permission(
        &self,
        session_id: &str,
        call: ToolCall,
        cancel: &CancellationToken,
        expired: &CancellationToken,
    ) -> Option<Permission> {
        let options = vec![
            PermissionOption::new("allow_once", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "allow_always",
                "Always allow in this session",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let request =
            RequestPermissionRequest::new(session_id.to_string(), tool_call_fields(call), options);
        let sent = self.connection.send_request(request);
        let withdraw = sent.cancellation_handle();
        let answer = tokio::select! {
            answer = sent.block_task() => answer,
            () = cancel.cancelled() => {
                let _ = withdraw.cancel();
                return None;
            }
            () = expired.cancelled() => {
                tracing::info!("permission request got no answer before the engine's deadline (approval_timeout_sec); timed out and withdrawn");
                let _ = withdraw.cancel();
                return None;
            }
        };
        match answer {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    "allow_once" => Some(Permission::AllowOnce),
                    "allow_always" => Some(Permission::AllowAlways),
                    "reject_once" => Some(Permission::Reject),
                    other => {
                        tracing::warn!("unknown permission option `{other}`; denied");
                        None
                    }
                },
                _ => None,
            },
            Err(e) => {
                tracing::info!("permission request failed ({e}); denied");
                None
            }
        }
    }
}

/// Patch reads and writes through the editor (`fs/read_text_file`,
/// `fs/write_text_file`), each only when the editor offered it in `initialize` and only
/// for files in the session's writable roots (the workspace the editor has open); the
/// local disk otherwise. Reads then see the editor's unsaved buffers, and saves go
/// through its buffers, so an open file is never overwritten behind its back. A file
/// outside the roots (one a person approves writing, or a symlink's target) is never
/// asked of the editor: the engine reads and writes it itself, by descriptor.
#[derive(Default)]
pub(crate) struct EditorFiles {
    peer: OnceLock<(Connection, FileSystemCapabilities)>,
}

impl EditorFiles {
    fn connect(&self, connection: Connection, capabilities: FileSystemCapabilities) {
        let _ = self.peer.set((connection, capabilities));
    }
}

impl WorkspaceFiles for EditorFiles {
    fn read_text<'a>(&'a self, thread: ThreadId, target: &'a Target) -> FileFuture<'a, String> {
        Box::pin(async move {
            let editor = self.peer.get().filter(|(_, fs)| fs.read_text_file);
            let Some((connection, _)) = editor.filter(|_| target.root().is_some()) else {
                return LocalFiles.read_text(thread, target).await;
            };
            // The editor is asked for where the path leads (the engine checked that), not
            // for a name a symlink could turn into another file.
            let request = ReadTextFileRequest::new(thread.to_string(), target.resolved.clone());
            let content = editor_file_request(connection.send_request(request).block_task())
                .await?
                .content;
            let cap = interpreter_tools::apply_patch::MAX_FILE_BYTES;
            if content.len() as u64 > cap {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "the editor's buffer is over the {} MiB limit for a file apply_patch edits",
                        cap / (1024 * 1024)
                    ),
                ));
            }
            Ok(content)
        })
    }

    fn write_text<'a>(
        &'a self,
        thread: ThreadId,
        target: &'a Target,
        contents: &'a str,
    ) -> FileFuture<'a, ()> {
        Box::pin(async move {
            let editor = self.peer.get().filter(|(_, fs)| fs.write_text_file);
            let Some((connection, _)) = editor.filter(|_| target.root().is_some()) else {
                return LocalFiles.write_text(thread, target, contents).await;
            };
            // The resolved target is what the approval named.
            let request =
                WriteTextFileRequest::new(thread.to_string(), target.resolved.clone(), contents);
            editor_file_request(connection.send_request(request).block_task()).await?;
            Ok(())
        })
    }
}

/// An `fs/*` request to the editor, bounded; its errors as I/O errors (the SDK's
/// resource-not-found as `NotFound`).
async fn editor_file_request<T>(
    answer: impl Future<Output = Result<T, Error>>,
) -> std::io::Result<T> {
    match tokio::time::timeout(FILE_REQUEST_TIMEOUT, answer).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) if e.code == ErrorCode::RESOURCE_NOT_FOUND => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the editor says: {}", e.message),
        )),
        Ok(Err(e)) => Err(std::io::Error::other(format!(
            "the editor says: {}",
            e.message
        ))),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the editor did not answer within {}s",
                FILE_REQUEST_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// The most a message that follows `initialize` waits for the answer to it.
const INITIALIZE_ANSWER_WAIT: Duration = Duration::from_secs(30);

/// What the gate reads of a line: enough to tell `initialize` and its answer.
#[derive(Default, serde::Deserialize)]
struct Envelope {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<serde_json::Value>,
}

/// Holds the messages that arrive after `initialize` until its answer has been written.
///
/// The SDK refuses any request it receives before it has answered `initialize` (-32600),
/// but editors send `session/new` right behind `initialize` without waiting
/// (CodeCompanion.nvim does, and loses the first message). Queued here instead, such a
/// request reaches the SDK once the answer is out, in the order it came. A request before
/// any `initialize` is still the SDK's to refuse.
#[derive(Default)]
struct InitializeGate {
    /// The id of the `initialize` request whose answer has not been written yet.
    pending: std::sync::Mutex<Option<serde_json::Value>>,
    answered: tokio::sync::Notify,
}

impl InitializeGate {
    fn pending(&self) -> Option<serde_json::Value> {
        self.pending.lock().ok().and_then(|pending| pending.clone())
    }

    /// Waits (bounded) while an `initialize` is unanswered, then lets `envelope` through,
    /// remembering it when it is an `initialize` request.
    async fn pass(&self, envelope: &Envelope) {
        let deadline = tokio::time::Instant::now() + INITIALIZE_ANSWER_WAIT;
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.pending().is_none() {
                break;
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                tracing::warn!(
                    "no answer to initialize within {INITIALIZE_ANSWER_WAIT:?}; passing on the next message"
                );
                break;
            }
        }
        if envelope.method.as_deref() == Some("initialize")
            && let (Some(id), Ok(mut pending)) = (&envelope.id, self.pending.lock())
        {
            *pending = Some(id.clone());
        }
    }

    /// The envelope of a line that is JSON; `Err` when it is not. Only an object with a
    /// string `method` (or none) has one (serde would read a struct from an array too):
    /// any other JSON goes on to the SDK with an empty envelope, to be answered there as
    /// it was before the gate.
    fn read(line: &[u8]) -> Result<Envelope, serde_json::Error> {
        if line.trim_ascii_start().first() == Some(&b'{')
            && let Ok(envelope) = serde_json::from_slice::<Envelope>(line)
        {
            return Ok(envelope);
        }
        serde_json::from_slice::<serde::de::IgnoredAny>(line).map(|_| Envelope::default())
    }

    /// A line went out: the answer to the pending `initialize` opens the gate.
    fn written(&self, line: &str) {
        let Some(pending) = self.pending() else {
            return;
        };
        let Ok(envelope) = serde_json::from_str::<Envelope>(line) else {
            return;
        };
        if envelope.method.is_none() && envelope.id.as_ref() == Some(&pending) {
            if let Ok(mut slot) = self.pending.lock() {
                *slot = None;
            }
            self.answered.notify_waiters();
        }
    }
}

/// State the handlers share.
struct Shared {
    agent: Arc<Agent>,
    files: Arc<EditorFiles>,
    /// What the editor declared in `initialize`.
    client: OnceLock<ClientCapabilities>,
}

/// Serve ACP on stdin/stdout until the editor closes stdin or `stop` fires.
pub(crate) async fn serve_stdio(
    agent: Arc<Agent>,
    files: Arc<EditorFiles>,
    stop: CancellationToken,
) -> Result<(), AcpError> {
    let shared = Arc::new(Shared {
        agent,
        files,
        client: OnceLock::new(),
    });
    // The SDK's messages and our answers to lines it never sees share stdout, a whole
    // line at a time.
    let stdout = Arc::new(tokio::sync::Mutex::new(tokio::io::stdout()));
    let gate = Arc::new(InitializeGate::default());
    let outgoing = futures::sink::unfold(
        (stdout.clone(), gate.clone()),
        async |(out, gate), line: String| {
            write_line(&out, &line).await?;
            gate.written(&line);
            Ok::<_, std::io::Error>((out, gate))
        },
    );
    // Lines are read bounded (a huge one is dropped as it arrives and answered here), and
    // a line that is not JSON is answered here too, as on every front end; the rest go to
    // the SDK, decoded lossily (a line that is not UTF-8 is then unparsable, not the end
    // of the connection).
    let stdin = BoundedLines::new(tokio::io::BufReader::new(tokio::io::stdin()));
    let incoming =
        futures::stream::unfold((stdin, stdout, gate), async |(mut input, out, gate)| {
            loop {
                let refused = match input.next().await {
                    Ok(Some(Line::Message(line))) => match InitializeGate::read(&line) {
                        Ok(envelope) => {
                            gate.pass(&envelope).await;
                            let line = String::from_utf8_lossy(&line).into_owned();
                            return Some((Ok(line), (input, out, gate)));
                        }
                        Err(error) => Unservable::NotJson(error.to_string()),
                    },
                    Ok(Some(Line::TooLong)) => {
                        tracing::warn!("refusing a message longer than the line bound");
                        Unservable::TooLong
                    }
                    Ok(None) => return None,
                    Err(e) => return Some((Err(e), (input, out, gate))),
                };
                let answer = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": null,
                    "error": refused.error_object(),
                });
                if let Err(e) = write_line(&out, &answer.to_string()).await {
                    return Some((Err(e), (input, out, gate)));
                }
            }
        })
        .take_until(stop.cancelled_owned());
    let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));

    let s1 = shared.clone();
    let s2 = shared.clone();
    let s3 = shared.clone();
    let s4 = shared.clone();
    let s5 = shared.clone();
    let s6 = shared.clone();
    let s7 = shared.clone();
    let s8 = shared.clone();
    let s9 = shared.clone();
    let s10 = shared.clone();
    let s11 = shared.clone();
    agent_client_protocol::Agent
        .v1()
        .name("interpreter")
        .on_receive_request(
            async move |request: InitializeRequest, responder, cx| {
                // Answered from what is known now: no config is read and no model or MCP
                // server is contacted, so editors see the agent start at once.
                s1.files.connect(cx, request.client_capabilities.fs.clone());
                let _ = s1.client.set(request.client_capabilities);
                responder.respond(initialize_response())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let agent = s2.agent.clone();
                let editor = Editor { connection: cx };
                serve_then_offer_commands(responder, editor, async move {
                    let settings = settings(request.cwd, request.mcp_servers)?;
                    let state = Box::pin(agent.new_session(settings)).await?;
                    let response = NewSessionResponse::new(state.id.clone())
                        .modes(modes(state.mode))
                        .config_options(config_options(&state));
                    Ok((state, response))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let agent = s3.agent.clone();
                let editor = Editor { connection: cx };
                serve_then_offer_commands(responder, editor.clone(), async move {
                    let settings = settings(request.cwd, request.mcp_servers)?;
                    // Boxed: opening a session holds a whole `Config`.
                    let state = Box::pin(agent.open_session(
                        &request.session_id.0,
                        settings,
                        Some(&editor),
                    ))
                    .await?;
                    let response = LoadSessionResponse::new()
                        .modes(modes(state.mode))
                        .config_options(config_options(&state));
                    Ok((state, response))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest, responder, cx| {
                let agent = s4.agent.clone();
                let editor = Editor { connection: cx };
                serve_then_offer_commands(responder, editor, async move {
                    let settings = settings(request.cwd, request.mcp_servers)?;
                    let state =
                        Box::pin(agent.open_session(&request.session_id.0, settings, None)).await?;
                    let response = ResumeSessionResponse::new()
                        .modes(modes(state.mode))
                        .config_options(config_options(&state));
                    Ok((state, response))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                let agent = s5.agent.clone();
                serve(responder, async move {
                    let (sessions, next) = agent.list(request.cwd, request.cursor).await?;
                    let sessions = sessions
                        .into_iter()
                        .map(|s| {
                            SessionInfo::new(s.id, s.cwd)
                                .title(s.title)
                                .updated_at(s.updated_at)
                        })
                        .collect();
                    Ok(ListSessionsResponse::new(sessions).next_cursor(next))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, _cx| {
                let agent = s6.agent.clone();
                serve(responder, async move {
                    agent.close(&request.session_id.0).await?;
                    Ok(CloseSessionResponse::new())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest, responder, _cx| {
                let agent = s11.agent.clone();
                serve(responder, async move {
                    agent.delete(&request.session_id.0).await?;
                    Ok(DeleteSessionResponse::new())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, cx| {
                let session = request.session_id.0.to_string();
                let changed =
                    s7.agent
                        .set_option(&session, SessionOption::Mode, &request.mode_id.0);
                match changed {
                    Ok(state) => {
                        let agent = s7.agent.clone();
                        tokio::spawn(async move {
                            // On record before the answer: the editor may stop this
                            // process as soon as it has it.
                            let state = agent.apply_choices(&session, state).await;
                            if let Err(e) = responder.respond(SetSessionModeResponse::new()) {
                                tracing::debug!("answer not sent: {e}");
                                return;
                            }
                            // The mode is also a config option: editors that follow
                            // those hear of it.
                            Editor { connection: cx }
                                .update(&session, Update::ConfigOptions(state));
                        });
                        Ok(())
                    }
                    Err(e) => responder.respond_with_result(Err(wire_error(e))),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest, responder, cx| {
                let session = request.session_id.0.to_string();
                let changed = set_config_option(&s8.agent, &request);
                match changed {
                    Ok((option, state)) => {
                        let agent = s8.agent.clone();
                        tokio::spawn(async move {
                            // On record before the answer, as for a mode.
                            let state = agent.apply_choices(&session, state).await;
                            let answer =
                                SetSessionConfigOptionResponse::new(config_options(&state));
                            if let Err(e) = responder.respond(answer) {
                                tracing::debug!("answer not sent: {e}");
                                return;
                            }
                            // Editors that follow the older `modes` hear of a mode set as
                            // an option.
                            if option == SessionOption::Mode {
                                Editor { connection: cx }
                                    .update(&session, Update::CurrentMode(state.mode));
                            }
                        });
                        Ok(())
                    }
                    Err(e) => responder.respond_with_result(Err(wire_error(e))),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let agent = s9.agent.clone();
                let editor = Editor { connection: cx };
                serve(responder, async move {
                    // The editor's trace (`_meta.traceparent`, ACP's meta-propagation RFD).
                    let trace = request.meta.as_ref().and_then(|meta| {
                        interpreter_telemetry::W3cTraceContext::from_json(
                            &serde_json::Value::Object(meta.clone()),
                        )
                    });
                    let input = user_input(request.prompt)?;
                    let stop = Box::pin(turn::prompt(
                        &agent,
                        &request.session_id.0,
                        input,
                        trace,
                        editor,
                    ))
                    .await?;
                    Ok(PromptResponse::new(stop_reason(stop)))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                s10.agent.cancel(&notification.session_id.0);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
        .map_err(|e| AcpError::Connection(e.to_string()))
}

/// One message and its newline, flushed, with nothing else written in between.
async fn write_line(
    out: &tokio::sync::Mutex<tokio::io::Stdout>,
    line: &str,
) -> std::io::Result<()> {
    let mut out = out.lock().await;
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}

/// Run a request's work on its own task and answer with its result.
fn serve<T>(
    responder: Responder<T>,
    work: impl Future<Output = Result<T, AcpError>> + Send + 'static,
) -> Result<(), Error>
where
    T: JsonRpcResponse + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = responder.respond_with_result(work.await.map_err(wire_error)) {
            tracing::debug!("answer not sent: {e}");
        }
    });
    Ok(())
}

/// [`serve`] for a request that opens a session: once it is answered (the editor then
/// knows the session), the slash commands are offered for it.
fn serve_then_offer_commands<T>(
    responder: Responder<T>,
    editor: Editor,
    work: impl Future<Output = Result<(SessionState, T), AcpError>> + Send + 'static,
) -> Result<(), Error>
where
    T: JsonRpcResponse + Send + 'static,
{
    tokio::spawn(async move {
        let (session, result) = match work.await {
            Ok((session, response)) => (Some(session), Ok(response)),
            Err(e) => (None, Err(wire_error(e))),
        };
        if let Err(e) = responder.respond_with_result(result) {
            tracing::debug!("answer not sent: {e}");
            return;
        }
        if let Some(session) = session {
            editor.update(&session.id, Update::Commands(session.commands));
        }
    });
    Ok(())
}

fn initialize_response() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .close(SessionCloseCapabilities::new())
                        .delete(SessionDeleteCapabilities::new()),
                ),
        )
        .agent_info(
            Implementation::new("interpreter", env!("CARGO_PKG_VERSION")).title("Interpreter"),
        )
}

fn wire_error(error: AcpError) -> Error {
    let message = error.to_string();
    match error {
        AcpError::InvalidParams(_) => error_of_kind(ErrorKind::InvalidParams, message),
        AcpError::InvalidRequest(_) | AcpError::Config(_) => {
            error_of_kind(ErrorKind::InvalidRequest, message)
        }
        AcpError::SessionNotFound(id) => session_not_found(&id, message),
        AcpError::Core(error) => error_of_kind(error.kind(), message),
        AcpError::Store(error) => error_of_kind(error.kind(), message),
        // What the turn did before it failed, for an agent driving the editor protocol
        // (the same recap the MCP tools and the app-server give).
        AcpError::TurnFailed { recap, .. } => {
            let error = Error::new(ErrorCode::INTERNAL_ERROR, message);
            match serde_json::to_value(&*recap) {
                Ok(recap) => error.data(serde_json::json!({"recap": recap})),
                Err(_) => error,
            }
        }
        AcpError::Internal(_) | AcpError::Connection(_) => {
            Error::new(ErrorCode::INTERNAL_ERROR, message)
        }
    }
}

/// The one table from the engine's kind of failure to an ACP error.
fn error_of_kind(kind: ErrorKind, message: String) -> Error {
    match kind {
        ErrorKind::NotFound => Error::new(ErrorCode::RESOURCE_NOT_FOUND, message),
        ErrorKind::InvalidParams => Error::new(ErrorCode::INVALID_PARAMS, message),
        ErrorKind::InvalidRequest | ErrorKind::Busy => {
            Error::new(ErrorCode::INVALID_REQUEST, message)
        }
        // The code and retry data app-server and mcp-server answer with.
        ErrorKind::RunsElsewhere(data) => {
            let error = Error::new(RUNS_ELSEWHERE_CODE, message);
            match serde_json::to_value(data) {
                Ok(data) => error.data(data),
                Err(_) => error,
            }
        }
        ErrorKind::Unavailable | ErrorKind::Internal => {
            Error::new(ErrorCode::INTERNAL_ERROR, message)
        }
    }
}

/// ACP's own "session not found" (`-32002`, with the session in its data).
fn session_not_found(id: &str, message: String) -> Error {
    let mut wire_error = Error::from(wire::Error::session_not_found(id.to_string()));
    wire_error.message = message;
    wire_error
}

fn settings(cwd: PathBuf, servers: Vec<McpServer>) -> Result<Settings, AcpError> {
    Ok(Settings {
        cwd,
        mode: Mode::default(),
        model: None,
        effort: None,
        mcp_servers: servers
            .into_iter()
            .map(mcp_server)
            .collect::<Result<_, _>>()?,
    })
}

/// An editor's MCP server as a `[mcp_servers.NAME]` entry of the session.
fn mcp_server(server: McpServer) -> Result<(String, McpServerConfig), AcpError> {
    match server {
        McpServer::Stdio(stdio) => Ok((
            stdio.name,
            McpServerConfig {
                command: Some(stdio.command.to_string_lossy().into_owned()),
                args: stdio.args,
                env: Some(stdio.env.into_iter().map(|v| (v.name, v.value)).collect()),
                enabled: true,
                ..McpServerConfig::default()
            },
        )),
        McpServer::Http(http) => Ok((
            http.name,
            McpServerConfig {
                url: Some(http.url),
                http_headers: Some(
                    http.headers
                        .into_iter()
                        .map(|h| (h.name, h.value))
                        .collect::<BTreeMap<_, _>>(),
                ),
                enabled: true,
                ..McpServerConfig::default()
            },
        )),
        McpServer::Sse(sse) => Err(AcpError::InvalidParams(format!(
            "MCP server `{}`: SSE is not supported (mcpCapabilities.sse is false)",
            sse.name
        ))),
        _ => Err(AcpError::InvalidParams(
            "unsupported MCP server transport".into(),
        )),
    }
}

/// Prompt blocks as the engine's input: text as is, links and embedded resources as
/// text naming them, images as data URLs.
fn user_input(blocks: Vec<ContentBlock>) -> Result<Vec<UserInput>, AcpError> {
    blocks
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Ok(UserInput::Text { text: text.text }),
            ContentBlock::ResourceLink(link) => Ok(UserInput::Text {
                text: format!("[@{}]({})", link.name, link.uri),
            }),
            ContentBlock::Resource(resource) => Ok(UserInput::Text {
                text: match resource.resource {
                    wire::EmbeddedResourceResource::TextResourceContents(text) => {
                        format!("<context ref=\"{}\">\n{}\n</context>", text.uri, text.text)
                    }
                    wire::EmbeddedResourceResource::BlobResourceContents(blob) => {
                        format!("[binary resource {} not included]", blob.uri)
                    }
                    _ => "[resource of an unknown kind not included]".to_string(),
                },
            }),
            ContentBlock::Image(image) => {
                if !image.mime_type.starts_with("image/") {
                    return Err(AcpError::InvalidParams(format!(
                        "image block with mimeType `{}`",
                        image.mime_type
                    )));
                }
                Ok(UserInput::Image {
                    image_url: format!("data:{};base64,{}", image.mime_type, image.data),
                })
            }
            ContentBlock::Audio(_) => Err(AcpError::InvalidParams(
                "audio prompts are not supported (promptCapabilities.audio is false)".into(),
            )),
            _ => Err(AcpError::InvalidParams(
                "unsupported prompt content block".into(),
            )),
        })
        .collect()
}

/// `session/set_config_option`: which option was set, and the session's choices after.
fn set_config_option(
    agent: &Agent,
    request: &SetSessionConfigOptionRequest,
) -> Result<(SessionOption, SessionState), AcpError> {
    let option = SessionOption::from_id(&request.config_id.0).ok_or_else(|| {
        AcpError::InvalidParams(format!(
            "unknown config option `{}`; the options are mode, model and reasoning_effort",
            request.config_id.0
        ))
    })?;
    let value = request.value.as_value_id().ok_or_else(|| {
        AcpError::InvalidParams(format!(
            "the {} option takes one of its values",
            option.id()
        ))
    })?;
    let state = agent.set_option(&request.session_id.0, option, &value.0)?;
    Ok((option, state))
}

fn modes(current: Mode) -> SessionModeState {
    SessionModeState::new(
        current.id(),
        Mode::ALL
            .into_iter()
            .map(|mode| SessionMode::new(mode.id(), mode.name()).description(mode.description()))
            .collect(),
    )
}

/// The session's config options: mode, model and reasoning effort, each with its
/// current value.
fn config_options(state: &SessionState) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = Mode::ALL
        .into_iter()
        .map(|mode| {
            SessionConfigSelectOption::new(mode.id(), mode.name()).description(mode.description())
        })
        .collect();
    let models: Vec<SessionConfigSelectOption> = state
        .model
        .available
        .iter()
        .map(|id| SessionConfigSelectOption::new(id.clone(), id.clone()))
        .collect();
    let efforts: Vec<SessionConfigSelectOption> = std::iter::once(SessionConfigSelectOption::new(
        DEFAULT_EFFORT,
        "Provider default",
    ))
    .chain(
        EFFORTS
            .into_iter()
            .map(|(effort, name)| SessionConfigSelectOption::new(effort.as_str(), name)),
    )
    .collect();
    vec![
        SessionConfigOption::select(SessionOption::Mode.id(), "Mode", state.mode.id(), modes)
            .category(SessionConfigOptionCategory::Mode),
        SessionConfigOption::select(
            SessionOption::Model.id(),
            "Model",
            state.model.current.clone(),
            models,
        )
        .category(SessionConfigOptionCategory::Model),
        SessionConfigOption::select(
            SessionOption::ReasoningEffort.id(),
            "Reasoning effort",
            state
                .effort
                .map_or(DEFAULT_EFFORT, |effort| effort.as_str()),
            efforts,
        )
        .category(SessionConfigOptionCategory::ThoughtLevel),
    ]
}

fn stop_reason(stop: StopReason) -> wire::StopReason {
    match stop {
        StopReason::EndTurn => wire::StopReason::EndTurn,
        StopReason::MaxTokens => wire::StopReason::MaxTokens,
        StopReason::Cancelled => wire::StopReason::Cancelled,
    }
}

fn text_block(text: String) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

fn session_update(update: Update) -> wire::SessionUpdate {
    use wire::SessionUpdate as U;
    match update {
        Update::UserText(text) => U::UserMessageChunk(ContentChunk::new(text_block(text))),
        Update::AgentText(text) => U::AgentMessageChunk(ContentChunk::new(text_block(text))),
        Update::Thought(text) => U::AgentThoughtChunk(ContentChunk::new(text_block(text))),
        Update::ToolCall(call) => U::ToolCall(tool_call(call)),
        Update::ToolCallUpdate(update) => U::ToolCallUpdate(tool_call_update(update)),
        Update::CurrentMode(mode) => U::CurrentModeUpdate(wire::CurrentModeUpdate::new(mode.id())),
        Update::ConfigOptions(state) => {
            U::ConfigOptionUpdate(wire::ConfigOptionUpdate::new(config_options(&state)))
        }
        Update::Commands(commands) => {
            U::AvailableCommandsUpdate(wire::AvailableCommandsUpdate::new(
                commands
                    .into_iter()
                    .map(|c| {
                        let command = wire::AvailableCommand::new(c.name, c.description);
                        match c.input_hint {
                            Some(hint) => command.input(wire::AvailableCommandInput::Unstructured(
                                wire::UnstructuredCommandInput::new(hint),
                            )),
                            None => command,
                        }
                    })
                    .collect(),
            ))
        }
        Update::Plan(entries) => U::Plan(wire::Plan::new(
            entries
                .into_iter()
                .map(|entry| {
                    wire::PlanEntry::new(
                        entry.content,
                        wire::PlanEntryPriority::Medium,
                        match entry.status {
                            PlanStatus::Pending => wire::PlanEntryStatus::Pending,
                            PlanStatus::InProgress => wire::PlanEntryStatus::InProgress,
                            PlanStatus::Completed => wire::PlanEntryStatus::Completed,
                        },
                    )
                })
                .collect(),
        )),
    }
}

fn tool_call(call: ToolCall) -> wire::ToolCall {
    wire::ToolCall::new(call.id, call.title)
        .kind(tool_kind(call.kind))
        .status(tool_status(call.status))
        .content(call.content.into_iter().map(tool_content).collect())
        .locations(
            call.locations
                .into_iter()
                .map(wire::ToolCallLocation::new)
                .collect(),
        )
        .raw_input(call.raw_input)
        .raw_output(call.raw_output)
}

/// The permission request's `toolCall`: the announced call's id with its title, kind
/// and content (the command or the diff), so the editor attaches it to the card.
fn tool_call_fields(call: ToolCall) -> wire::ToolCallUpdate {
    wire::ToolCallUpdate::new(
        call.id,
        wire::ToolCallUpdateFields::new()
            .title(call.title)
            .kind(tool_kind(call.kind))
            .status(tool_status(call.status))
            .content(
                call.content
                    .into_iter()
                    .map(tool_content)
                    .collect::<Vec<_>>(),
            )
            .locations(
                call.locations
                    .into_iter()
                    .map(wire::ToolCallLocation::new)
                    .collect::<Vec<_>>(),
            )
            .raw_input(call.raw_input),
    )
}

fn tool_call_update(update: ToolCallUpdate) -> wire::ToolCallUpdate {
    wire::ToolCallUpdate::new(
        update.id,
        wire::ToolCallUpdateFields::new()
            .status(update.status.map(tool_status))
            .content(
                update
                    .content
                    .map(|content| content.into_iter().map(tool_content).collect::<Vec<_>>()),
            )
            .raw_output(update.raw_output),
    )
}

fn tool_kind(kind: ToolKind) -> wire::ToolKind {
    match kind {
        ToolKind::Read => wire::ToolKind::Read,
        ToolKind::Search => wire::ToolKind::Search,
        ToolKind::Edit => wire::ToolKind::Edit,
        ToolKind::Execute => wire::ToolKind::Execute,
        ToolKind::Fetch => wire::ToolKind::Fetch,
    }
}

fn tool_status(status: ToolStatus) -> wire::ToolCallStatus {
    match status {
        ToolStatus::Pending => wire::ToolCallStatus::Pending,
        ToolStatus::InProgress => wire::ToolCallStatus::InProgress,
        ToolStatus::Completed => wire::ToolCallStatus::Completed,
        ToolStatus::Failed => wire::ToolCallStatus::Failed,
    }
}

fn tool_content(content: ToolContent) -> wire::ToolCallContent {
    match content {
        ToolContent::Text(text) => wire::ToolCallContent::from(text_block(text)),
        ToolContent::Diff {
            path,
            old_text,
            new_text,
        } => wire::ToolCallContent::Diff(wire::Diff::new(path, new_text).old_text(old_text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_table() {
        let id = ThreadId::new();
        let code = |kind| error_of_kind(kind, String::new()).code.value();
        assert_eq!(code(ErrorKind::NotFound), -32002);
        assert_eq!(code(ErrorKind::InvalidParams), -32602);
        assert_eq!(code(ErrorKind::InvalidRequest), -32600);
        assert_eq!(code(ErrorKind::Busy), -32600);
        assert_eq!(code(ErrorKind::Unavailable), -32603);
        assert_eq!(code(ErrorKind::Internal), -32603);
        // A fleet thread running elsewhere: the code and retry data of every front end
        // (it was -32603 here).
        let elsewhere = error_of_kind(
            ErrorKind::RunsElsewhere(interpreter_core::store::RunsElsewhere::new(id, "r2")),
            "runs elsewhere".into(),
        );
        assert_eq!(elsewhere.code.value(), RUNS_ELSEWHERE_CODE);
        let data = elsewhere.data.unwrap_or_default();
        assert_eq!(data["retryable"], true);
        assert_eq!(data["owner"], "r2");
        let wrapped = wire_error(AcpError::from(interpreter_core::CoreError::from(
            interpreter_core::store::StoreError::OwnedElsewhere {
                thread_id: id,
                owner: "r2".into(),
                internal_url: None,
            },
        )));
        assert_eq!(wrapped.code.value(), RUNS_ELSEWHERE_CODE);
    }
}
