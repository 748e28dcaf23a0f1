//! The MCP handler: rmcp's [`ServerHandler`] for our tools, one instance per connection
//! (a stdio process, a legacy HTTP session, or one stateless 2026-07-28 HTTP request),
//! all sharing one [`Registry`] of threads and turns.
//!
//! rmcp's runtime owns the protocol: both eras, `server/discover`, per-request `_meta`
//! validation, caching hints, cancellation tokens. This module owns what is ours: which
//! tools exist, how a call becomes a turn, and how approvals reach the client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use interpreter_core::ErrorKind;
use interpreter_core::config::McpServerSettings;
use interpreter_protocol::{EventMsg, ReviewDecision, SessionSource, ThreadId};
use interpreter_telemetry::W3cTraceContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::app::AppBridge;
use crate::fleet;
use crate::follow::{Asker, FollowEnd, Follower};
use crate::mrtr::{APPROVAL_INPUT_KEY, RequestStates};
use crate::result::{self, TurnStatus};
use crate::tasks;
use crate::tools::{
    CODEX_REPLY_TOOL, CODEX_STATUS_TOOL, CODEX_TOOL, CODEX_WAIT_TOOL, CodexArgs, CodexReplyArgs,
    CodexStatusArgs, CodexWaitArgs, build_session_config, parse_thread_id, routed_tool_definitions,
    tool_definitions,
};
use crate::turns::{Answer, Registry, RunState, TurnRun};

/// Name our server reports in `serverInfo`.
pub(crate) const SERVER_NAME: &str = "interpreter";
/// Human title reported in `serverInfo`.
pub(crate) const SERVER_TITLE: &str = "Interpreter";

// Hosts rename tools (Codex CLI shows `codex-reply` as `codex_reply`), so both spellings are
// named where the model reads them.
const INSTRUCTIONS: &str = "Use the `codex` tool to run the coding agent on a task and the reply \
tool (`codex-reply`, or `codex_reply` where the host renames tools) with the threadId its result \
carries to continue it. For long tasks pass `background: true` and follow the thread with \
`codex-status` and `codex-wait` (`codex_status`, `codex_wait`).";

/// How a call that starts a turn relates to it.
#[derive(Debug, Clone, Copy)]
enum RunMode {
    /// Follow the turn to its end (the classic `codex` call).
    Wait,
    /// Return at once; follow with `codex-status` / `codex-wait`.
    Background,
    /// Return a task handle (the client declared the Tasks extension).
    Task,
}

/// Whether this request declared the Tasks extension (only 2026-07-28 requests can).
fn wants_task(ctx: &RequestContext<RoleServer>) -> bool {
    is_modern(ctx)
        && ctx
            .meta
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
}

/// The caller's trace context: `params._meta.traceparent` (SEP-414, either era), else the
/// `traceparent` header of an HTTP request.
fn caller_trace(ctx: &RequestContext<RoleServer>) -> Option<W3cTraceContext> {
    let from_meta = serde_json::to_value(&ctx.meta)
        .ok()
        .and_then(|meta| W3cTraceContext::from_json(&meta));
    from_meta.or_else(|| {
        let parts = ctx.extensions.get::<http::request::Parts>()?;
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
        };
        W3cTraceContext::from_headers(header("traceparent"), header("tracestate"))
    })
}

/// What one connection remembers about itself.
#[derive(Default)]
struct Connection {
    initialized: AtomicBool,
}

/// The handler rmcp drives.
#[derive(Clone)]
pub(crate) struct AgentServer {
    registry: Arc<Registry>,
    states: Arc<RequestStates>,
    connection: Arc<Connection>,
    app: Arc<AppBridge>,
}

impl AgentServer {
    /// A handler for a new connection.
    pub(crate) fn new(registry: Arc<Registry>, states: Arc<RequestStates>) -> Self {
        let app = Arc::new(AppBridge::new(registry.app.clone()));
        Self {
            registry,
            states,
            connection: Arc::default(),
            app,
        }
    }
}

fn implementation() -> Implementation {
    let mut info =
        Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")).with_title(SERVER_TITLE);
    info.description = Some("A coding agent for open models, as MCP tools.".to_string());
    info
}

/// `_meta` carrying `io.modelcontextprotocol/serverInfo`, which 2026-07-28 results
/// should have.
fn server_info_meta() -> Option<MetaObject> {
    serde_json::from_value(json!({"io.modelcontextprotocol/serverInfo": implementation()})).ok()
}

fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the caller can answer a form elicitation (an empty `elicitation` object means
/// form only).
fn can_elicit_form(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

fn invalid_params(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), None)
}

/// Parse a tool's arguments, or the error result that tells the calling model why not.
/// Boxed: a result is large (its JSON maps are insertion-ordered maps in this build).
fn arguments<T: serde::de::DeserializeOwned>(
    tool: &str,
    params: &CallToolRequestParams,
) -> Result<T, Box<CallToolResult>> {
    let invalid = |message: String| Box::new(result::error(&message));
    let mut arguments = params
        .arguments
        .clone()
        .ok_or_else(|| invalid(format!("Missing arguments for `{tool}`.")))?;
    crate::tools::screen_arguments(tool, &mut arguments)
        .map_err(|e| invalid(format!("Invalid arguments for `{tool}`: {e}")))?;
    serde_json::from_value(Value::Object(arguments))
        .map_err(|e| invalid(format!("Invalid arguments for `{tool}`: {e}")))
}

impl AgentServer {
    fn follower(
        &self,
        ctx: &RequestContext<RoleServer>,
        tool: &str,
        settings: &McpServerSettings,
    ) -> Follower {
        let modern = is_modern(ctx);
        let asker = if !can_elicit_form(ctx) {
            Asker::Fallback(settings.elicitation_fallback)
        } else if modern {
            Asker::Mrtr {
                tool: tool.to_string(),
            }
        } else {
            Asker::Elicit {
                peer: ctx.peer.clone(),
                origin: ctx.id.clone(),
            }
        };
        Follower::new(
            ctx.peer.clone(),
            ctx.meta.get_progress_token(),
            // 2026-07-28 allows only request-scoped standard notifications.
            settings.events && !modern,
            serde_json::to_value(&ctx.id).unwrap_or_default(),
            ctx.ct.clone(),
            self.registry.shutdown.clone(),
            asker,
            Duration::from_secs(settings.progress_interval_sec),
        )
    }

    /// Follow a turn for a call that waits for its end (`codex`, `codex-reply`, their
    /// MRTR retries). A cancelled call interrupts the turn.
    async fn follow_to_end(
        &self,
        mut follower: Follower,
        run: &Arc<TurnRun>,
    ) -> Result<CallToolResponse, ErrorData> {
        match follower.follow(run, &self.states, None).await {
            FollowEnd::Finished(result) => Ok(result.into()),
            FollowEnd::NeedsInput(input) => Ok(input.into()),
            FollowEnd::Cancelled => {
                run.interrupt();
                Err(ErrorData::internal_error("the request was cancelled", None))
            }
            FollowEnd::StillRunning => Ok(status_result(run).into()),
        }
    }

    async fn codex(
        &self,
        params: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: CodexArgs = match arguments(CODEX_TOOL, params) {
            Ok(args) => args,
            Err(error) => return Ok((*error).into()),
        };
        let overrides = match args.overrides() {
            Ok(o) => o,
            Err(e) => {
                return Ok(result::error(&format!("Invalid arguments for `codex`: {e}")).into());
            }
        };
        let config = match build_session_config(&self.registry.inputs, overrides).await {
            Ok(config) => config,
            Err(e) if e.is_refusal() => {
                return Ok(result::error(&format!("Refused: {e}")).into());
            }
            Err(e) => {
                return Ok(result::error(&format!("Failed to load configuration: {e}")).into());
            }
        };
        let settings = config.mcp_server.clone();
        let started = tokio::select! {
            started = self.registry.thread_manager.start_thread(config, SessionSource::Mcp) => started,
            () = ctx.ct.cancelled() => return Err(ErrorData::internal_error("the request was cancelled", None)),
        };
        let started = match started {
            Ok(started) => started,
            Err(e) => return Ok(result::error(&format!("Failed to start session: {e}")).into()),
        };
        let thread_id = started.thread_id;
        let follower = self.follower(ctx, CODEX_TOOL, &settings);
        if follower.codex_events {
            let event = interpreter_protocol::Event {
                id: String::new(),
                msg: EventMsg::SessionConfigured(started.session_configured.clone()),
            };
            follower.codex_event(thread_id, &event).await;
        }
        let mode = if wants_task(ctx) {
            RunMode::Task
        } else if args.background {
            RunMode::Background
        } else {
            RunMode::Wait
        };
        self.start_and_follow(follower, started.thread, args.prompt, ctx, mode)
            .await
    }

    async fn codex_reply(
        &self,
        params: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: CodexReplyArgs = match arguments(CODEX_REPLY_TOOL, params) {
            Ok(args) => args,
            Err(error) => return Ok((*error).into()),
        };
        let thread_id = match args.thread_id() {
            Ok(id) => id,
            Err(e) => return Ok(result::error(&format!("Invalid threadId: {e}")).into()),
        };
        let thread = match self.thread(thread_id, ctx).await? {
            Ok(thread) => thread,
            Err(error) => return Ok(error.into()),
        };
        let follower = self.follower(ctx, CODEX_REPLY_TOOL, &thread.config().mcp_server);
        let mode = if wants_task(ctx) {
            RunMode::Task
        } else {
            RunMode::Wait
        };
        self.start_and_follow(follower, thread, args.prompt, ctx, mode)
            .await
    }

    /// A live or saved thread, or the result that says why not.
    async fn thread(
        &self,
        thread_id: ThreadId,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Result<Arc<interpreter_core::Thread>, CallToolResult>, ErrorData> {
        let thread = tokio::select! {
            thread = self.registry.live_or_resumed(thread_id) => thread,
            () = ctx.ct.cancelled() => return Err(ErrorData::internal_error("the request was cancelled", None)),
        };
        let error = match thread {
            Ok(thread) => return Ok(Ok(thread)),
            Err(error) => error,
        };
        // The engine's kind of failure decides; the tools answer a failed resume as a
        // result the model reads, and a fleet refusal as the retryable error every front
        // end answers it with.
        Ok(Err(match error.kind() {
            // Another replica took the thread between the owner check and the resume.
            ErrorKind::RunsElsewhere(data) => {
                return Err(fleet::runs_elsewhere(
                    thread_id,
                    &data.owner,
                    "it took the thread first",
                ));
            }
            ErrorKind::NotFound => result::thread_error(
                thread_id,
                &format!(
                    "Session not found for thread_id: {thread_id} (no live thread and no saved thread with this id; start a new one with `codex`)"
                ),
            ),
            ErrorKind::InvalidParams
            | ErrorKind::InvalidRequest
            | ErrorKind::Busy
            | ErrorKind::Unavailable
            | ErrorKind::Internal => result::thread_error(
                thread_id,
                &format!("Failed to resume thread {thread_id}: {error}"),
            ),
        }))
    }

    async fn start_and_follow(
        &self,
        mut follower: Follower,
        thread: Arc<interpreter_core::Thread>,
        prompt: String,
        ctx: &RequestContext<RoleServer>,
        mode: RunMode,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool_call_id = match &ctx.id {
            rmcp::model::NumberOrString::String(s) => s.to_string(),
            rmcp::model::NumberOrString::Number(n) => n.to_string(),
        };
        let run = match self
            .registry
            .start_turn(thread, prompt, tool_call_id, caller_trace(ctx), &ctx.ct)
            .await
        {
            None => return Err(ErrorData::internal_error("the request was cancelled", None)),
            Some(Err(error)) => return Ok(error.into()),
            Some(Ok(run)) => run,
        };
        match mode {
            RunMode::Wait => return self.follow_to_end(follower, &run).await,
            // Its approvals wait for the poller (`tasks/get` shows them as inputRequests).
            RunMode::Task => return Ok(CallToolResponse::Task(tasks::created(&run))),
            RunMode::Background => {}
        }
        // A background turn still needs its approvals answered. A legacy client can be
        // asked on its connection right away; a 2026 client is asked (MRTR) when it next
        // calls `codex-wait`; a client that cannot be asked gets the fallback now.
        if !matches!(follower.asker, Asker::Mrtr { .. }) {
            follower.cancel = run.stopping();
            follower.progress_token = None;
            let detached = run.clone();
            let states = self.states.clone();
            tokio::spawn(async move {
                follower.follow(&detached, &states, None).await;
            });
        }
        Ok(result::with_status(run.thread_id, "", TurnStatus::Running).into())
    }

    async fn codex_status(
        &self,
        params: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: CodexStatusArgs = match arguments(CODEX_STATUS_TOOL, params) {
            Ok(args) => args,
            Err(error) => return Ok((*error).into()),
        };
        let thread_id = match parse_thread_id(&args.thread_id) {
            Ok(id) => id,
            Err(e) => return Ok(result::error(&format!("Invalid threadId: {e}")).into()),
        };
        if let Some(run) = self.registry.latest_run(thread_id) {
            return Ok(status_result(&run).into());
        }
        self.idle_status(thread_id, ctx).await
    }

    /// The status of a thread with no turn in this process: idle if it exists at all.
    async fn idle_status(
        &self,
        thread_id: ThreadId,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(match self.thread(thread_id, ctx).await? {
            Ok(_) => result::with_status(
                thread_id,
                "No turn is running on this thread.",
                TurnStatus::Idle,
            ),
            Err(error) => error,
        }
        .into())
    }

    async fn codex_wait(
        &self,
        params: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args: CodexWaitArgs = match arguments(CODEX_WAIT_TOOL, params) {
            Ok(args) => args,
            Err(error) => return Ok((*error).into()),
        };
        let thread_id = match parse_thread_id(&args.thread_id) {
            Ok(id) => id,
            Err(e) => return Ok(result::error(&format!("Invalid threadId: {e}")).into()),
        };
        let Some(run) = self.registry.latest_run(thread_id) else {
            return self.idle_status(thread_id, ctx).await;
        };
        let limit = tokio::time::Instant::now() + args.timeout();
        self.wait_on(
            self.follower(ctx, CODEX_WAIT_TOOL, &run.settings),
            &run,
            limit,
        )
        .await
    }

    /// Follow for `codex-wait`: a cancelled or timed-out wait leaves the turn running.
    async fn wait_on(
        &self,
        mut follower: Follower,
        run: &Arc<TurnRun>,
        limit: tokio::time::Instant,
    ) -> Result<CallToolResponse, ErrorData> {
        match follower.follow(run, &self.states, Some(limit)).await {
            FollowEnd::Finished(result) => Ok(result.into()),
            FollowEnd::NeedsInput(input) => Ok(input.into()),
            FollowEnd::Cancelled => {
                Err(ErrorData::internal_error("the request was cancelled", None))
            }
            FollowEnd::StillRunning => Ok(status_result(run).into()),
        }
    }

    /// The thread a `tools/call` is about: the one its `requestState` names (when it
    /// opens here), or the thread its arguments name, read as the tool itself reads
    /// them. `None` for a new `codex` run, and for arguments the tool would refuse (the
    /// refusal is given here).
    fn thread_of_call(&self, params: &CallToolRequestParams) -> Option<ThreadId> {
        if let Some(sealed) = &params.request_state {
            let state = self.states.open(sealed, params.name.as_ref()).ok()?;
            return parse_thread_id(&state.thread).ok();
        }
        match params.name.as_ref() {
            CODEX_REPLY_TOOL => arguments::<CodexReplyArgs>(CODEX_REPLY_TOOL, params)
                .ok()?
                .thread_id()
                .ok(),
            CODEX_STATUS_TOOL => {
                let args: CodexStatusArgs = arguments(CODEX_STATUS_TOOL, params).ok()?;
                parse_thread_id(&args.thread_id).ok()
            }
            CODEX_WAIT_TOOL => {
                let args: CodexWaitArgs = arguments(CODEX_WAIT_TOOL, params).ok()?;
                parse_thread_id(&args.thread_id).ok()
            }
            _ => None,
        }
    }

    /// When another live replica runs `thread_id`, the answer of that replica to this
    /// request (or the retryable refusal); `None` when it is this replica's to serve.
    async fn forward_if_elsewhere(
        &self,
        thread_id: ThreadId,
        method: &str,
        params: &impl serde::Serialize,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Result<Value, ErrorData>> {
        let owner = fleet::owner_elsewhere(&self.registry, thread_id).await?;
        let params = match serde_json::to_value(params) {
            Ok(params) => params,
            Err(e) => return Some(Err(ErrorData::internal_error(e.to_string(), None))),
        };
        Some(
            fleet::forward(
                &self.registry,
                &owner,
                thread_id,
                method,
                params,
                is_modern(ctx),
                ctx,
            )
            .await,
        )
    }

    /// A 2026-07-28 retry carrying `requestState` and `inputResponses`: resolve the
    /// suspended approval it names, then follow the turn again.
    async fn resume_after_input(
        &self,
        params: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        sealed: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = params.name.as_ref();
        if !is_modern(ctx) {
            return Err(invalid_params(
                "requestState is only valid on 2026-07-28 requests",
            ));
        }
        let state = self.states.open(sealed, tool).map_err(|e| {
            tracing::warn!("refused a requestState: {e}");
            invalid_params(format!("{e}; nothing was run"))
        })?;
        let thread_id = parse_thread_id(&state.thread).map_err(invalid_params)?;
        let run = self.registry.latest_run(thread_id);
        let approval = run.as_ref().and_then(|run| run.redeem(state.approval));
        let (Some(run), Some(approval)) = (run, approval) else {
            return Err(invalid_params(
                "this approval was already answered, has expired, or belongs to a turn that ended; nothing was run",
            ));
        };
        let answer = params
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(APPROVAL_INPUT_KEY));
        approval.resolve(match answer {
            Some(value) => Answer::Client(value.clone()),
            None => Answer::Decided(ReviewDecision::Denied),
        });
        let follower = self.follower(ctx, tool, &run.settings);
        if tool == CODEX_WAIT_TOOL {
            let timeout = params
                .arguments
                .as_ref()
                .and_then(|a| {
                    serde_json::from_value::<CodexWaitArgs>(Value::Object(a.clone())).ok()
                })
                .map_or(Duration::from_secs(crate::tools::DEFAULT_WAIT_SEC), |a| {
                    a.timeout()
                });
            return self
                .wait_on(follower, &run, tokio::time::Instant::now() + timeout)
                .await;
        }
        self.follow_to_end(follower, &run).await
    }
}

/// A forwarded `tools/call`'s answer, by its `resultType`.
fn call_tool_response(result: Value) -> Result<CallToolResponse, ErrorData> {
    match result.get("resultType").and_then(Value::as_str) {
        Some("input_required") => decode_answer(result).map(CallToolResponse::InputRequired),
        Some("task") => decode_answer(result).map(CallToolResponse::Task),
        _ => decode_answer(result).map(CallToolResponse::Complete),
    }
}

fn decode_answer<T: serde::de::DeserializeOwned>(result: Value) -> Result<T, ErrorData> {
    serde_json::from_value(result).map_err(|e| {
        ErrorData::internal_error(
            format!("the owning replica's answer does not decode: {e}"),
            None,
        )
    })
}

fn status_result(run: &TurnRun) -> CallToolResult {
    match run.state() {
        RunState::Finished { result, .. } => result,
        RunState::Running {
            step,
            last_message,
            waiting_for_approval,
        } => {
            let status = if waiting_for_approval {
                TurnStatus::WaitingForApproval
            } else {
                TurnStatus::Running
            };
            let mut text = last_message.unwrap_or_default();
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("Current step: {step}"));
            result::with_status(run.thread_id, &text, status)
        }
    }
}

impl ServerHandler for AgentServer {
    /// The app-server's v2 methods (`thread/start`, `turn/start`, …); see [`crate::app`].
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        if !AppBridge::handles(&request.method) {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                interpreter_transport::jsonrpc::method_not_found_message(&request.method),
                None,
            ));
        }
        let modern = is_modern(&ctx);
        self.app
            .request(request, &ctx.peer, modern)
            .await
            .map(rmcp::model::CustomResult)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(implementation())
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.connection.initialized.swap(true, Ordering::SeqCst) {
            return Err(ErrorData::invalid_request(
                "initialize called more than once",
                None,
            ));
        }
        ctx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let definitions = if is_modern(&ctx) {
            routed_tool_definitions()
        } else {
            tool_definitions()
        };
        let tools: Vec<Tool> = definitions
            .into_iter()
            .filter_map(|t| serde_json::from_value(t).ok())
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        if is_modern(&ctx) {
            result.meta = server_info_meta();
        }
        Ok(result)
    }

    /// The schema rmcp checks a 2026-07-28 call's `Mcp-Param-*` headers against: a
    /// header that disagrees with the body is refused before the call runs, so a
    /// balancer routing on the header and the server acting on the body cannot diverge.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        routed_tool_definitions()
            .into_iter()
            .filter(|t| t.get("name").and_then(Value::as_str) == Some(name))
            .find_map(|t| serde_json::from_value(t).ok())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut result = ListResourcesResult::with_all_items(Vec::new());
        if is_modern(&ctx) {
            result.meta = server_info_meta();
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut result = ListResourceTemplatesResult::with_all_items(Vec::new());
        if is_modern(&ctx) {
            result.meta = server_info_meta();
        }
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(ErrorData::resource_not_found(
            format!(
                "resource not found: {} (this server has no resources)",
                request.uri
            ),
            None,
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut result = ListPromptsResult::with_all_items(Vec::new());
        if is_modern(&ctx) {
            result.meta = server_info_meta();
        }
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(invalid_params(format!(
            "prompt not found: {} (this server has no prompts)",
            request.name
        )))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        if let Some(thread_id) = tasks::thread_of(&request.task_id)
            && let Some(answer) = self
                .forward_if_elsewhere(thread_id, "tasks/get", &request, &ctx)
                .await
        {
            return answer.and_then(decode_answer);
        }
        let mut result = tasks::get(&self.registry, &request.task_id).await?;
        result.meta = server_info_meta();
        Ok(result)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(thread_id) = tasks::thread_of(&request.task_id)
            && let Some(answer) = self
                .forward_if_elsewhere(thread_id, "tasks/update", &request, &ctx)
                .await
        {
            return answer.map(drop);
        }
        tasks::update(&self.registry, &request.task_id, &request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(thread_id) = tasks::thread_of(&request.task_id)
            && let Some(answer) = self
                .forward_if_elsewhere(thread_id, "tasks/cancel", &request, &ctx)
                .await
        {
            return answer.map(drop);
        }
        tasks::cancel(&self.registry, &request.task_id)
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(thread_id) = self.thread_of_call(&params)
            && let Some(answer) = self
                .forward_if_elsewhere(thread_id, "tools/call", &params, &ctx)
                .await
        {
            return answer.and_then(call_tool_response);
        }
        let response = if let Some(sealed) = params.request_state.clone() {
            self.resume_after_input(&params, &ctx, &sealed).await
        } else {
            match params.name.as_ref() {
                CODEX_TOOL => self.codex(&params, &ctx).await,
                CODEX_REPLY_TOOL => self.codex_reply(&params, &ctx).await,
                CODEX_STATUS_TOOL => self.codex_status(&params, &ctx).await,
                CODEX_WAIT_TOOL => self.codex_wait(&params, &ctx).await,
                other => Err(invalid_params(format!(
                    "Unknown tool '{other}'; this server has `codex`, `codex-reply`, `codex-status` and `codex-wait`"
                ))),
            }
        };
        let modern = is_modern(&ctx);
        response.map(|response| match response {
            CallToolResponse::Complete(mut result) if modern => {
                result.meta = server_info_meta();
                CallToolResponse::Complete(result)
            }
            CallToolResponse::InputRequired(input) if modern => match server_info_meta() {
                Some(meta) => CallToolResponse::InputRequired(input.with_meta(meta)),
                None => CallToolResponse::InputRequired(input),
            },
            CallToolResponse::Task(task) => match server_info_meta() {
                Some(meta) => CallToolResponse::Task(task.with_meta(meta)),
                None => CallToolResponse::Task(task),
            },
            other => other,
        })
    }
}
