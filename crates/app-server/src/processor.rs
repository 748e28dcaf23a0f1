//! The transport-agnostic [`MessageProcessor`]: JSON-RPC messages in, responses,
//! notifications and server→client requests out through each connection's sink.
//!
//! Every request runs in its own task, so a long request (a `thread/resume` loading a big
//! rollout) never holds up the client's answers to our approval requests, which arrive on
//! the same connection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use interpreter_core::config::{Config, ConfigInputs, load_config};
use interpreter_core::rollout::{
    self, ListDirection, ListQuery, ListSortKey, ThreadIndex, ThreadRecord,
};
use interpreter_core::{Thread, ThreadManager};
use interpreter_protocol::{Op, SessionSource, ThreadId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, MessageSink};
use crate::driver;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::v2::{self, ThreadStatus};
use crate::protocol::{JsonRpcError, JsonRpcMessage, PARSE_ERROR};
use crate::{accounts, config_api, models, v1_api};

/// Max total characters of text in one `input[]`, as the reference.
pub const MAX_INPUT_CHARS: usize = 1_048_576;

/// Idle threads kept loaded; past this the least recently used ones are unloaded (they
/// resume from disk when next used).
const MAX_LIVE_IDLE_THREADS: usize = 32;

/// What the processor needs from the process that hosts it.
#[derive(Clone)]
pub struct ProcessorOptions {
    /// Server-level config inputs (`-c`, profile, env, home, cwd).
    pub config_inputs: ConfigInputs,
    /// Recorded as the `source` of threads this server starts.
    pub session_source: SessionSource,
}

/// A thread this server has loaded, with who follows it.
pub(crate) struct LoadedThread {
    pub thread: Arc<Thread>,
    pub ephemeral: bool,
    pub forked_from: Option<ThreadId>,
    subscribers: std::sync::Mutex<Vec<Arc<Connection>>>,
    pub active: std::sync::Mutex<Option<ActiveTurn>>,
}

/// The turn a loaded thread is running.
#[derive(Clone)]
pub(crate) struct ActiveTurn {
    pub turn_id: String,
    /// Who started it: approval requests go there first.
    pub owner: Arc<Connection>,
}

impl LoadedThread {
    fn new(thread: Arc<Thread>, ephemeral: bool, forked_from: Option<ThreadId>) -> Self {
        Self {
            thread,
            ephemeral,
            forked_from,
            subscribers: std::sync::Mutex::default(),
            active: std::sync::Mutex::default(),
        }
    }

    pub fn id(&self) -> ThreadId {
        self.thread.id()
    }

    pub fn subscribe(&self, connection: &Arc<Connection>) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|c| !c.is_closed());
            if !subs.iter().any(|c| c.id == connection.id) {
                subs.push(connection.clone());
            }
        }
    }

    pub fn subscribers(&self) -> Vec<Arc<Connection>> {
        self.subscribers
            .lock()
            .map(|mut subs| {
                subs.retain(|c| !c.is_closed());
                subs.clone()
            })
            .unwrap_or_default()
    }

    /// Send a notification to every connection following the thread.
    pub fn broadcast<T: Serialize>(&self, method: &str, params: &T) {
        for connection in self.subscribers() {
            connection.notify(method, params);
        }
    }

    pub fn active_turn(&self) -> Option<ActiveTurn> {
        self.active.lock().ok().and_then(|a| a.clone())
    }

    pub fn status(&self) -> ThreadStatus {
        if self.active_turn().is_some() {
            ThreadStatus::Active {
                active_flags: Vec::new(),
            }
        } else {
            ThreadStatus::Idle
        }
    }
}

/// State shared by every connection of one server.
pub(crate) struct ServerState {
    pub inputs: ConfigInputs,
    pub session_source: SessionSource,
    pub thread_manager: Arc<ThreadManager>,
    loaded: std::sync::Mutex<HashMap<ThreadId, Arc<LoadedThread>>>,
    /// One index connection for listings, opened on first use.
    index: Arc<std::sync::Mutex<Option<ThreadIndex>>>,
    next_connection_id: AtomicU64,
    pub fuzzy: v1_api::FuzzySessions,
    /// Fires when the server stops: running turns are interrupted.
    pub shutdown: CancellationToken,
}

/// Requests in, messages out. Cheap to clone; clones share the server state.
#[derive(Clone)]
pub struct MessageProcessor {
    state: Arc<ServerState>,
}

/// Work that must happen after the response is on its way (e.g. `thread/started` after
/// the `thread/start` response, a turn's events after the `turn/start` response).
pub(crate) type AfterResponse = Vec<Box<dyn FnOnce() + Send>>;

/// What a request handler returns.
pub(crate) struct Reply {
    pub result: Value,
    pub after: AfterResponse,
}

impl Reply {
    pub fn new<T: Serialize>(result: &T) -> Result<Self, AppServerError> {
        Ok(Self {
            result: serde_json::to_value(result)
                .map_err(|e| AppServerError::Internal(e.to_string()))?,
            after: Vec::new(),
        })
    }

    pub fn then(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.after.push(Box::new(f));
        self
    }
}

impl MessageProcessor {
    pub fn new(options: ProcessorOptions, thread_manager: Arc<ThreadManager>) -> Self {
        Self {
            state: Arc::new(ServerState {
                inputs: options.config_inputs,
                session_source: options.session_source,
                thread_manager,
                loaded: std::sync::Mutex::default(),
                index: Arc::default(),
                next_connection_id: AtomicU64::new(1),
                fuzzy: v1_api::FuzzySessions::default(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    /// A new client connection whose outgoing messages go to `sink`.
    pub fn connect(&self, sink: Arc<dyn MessageSink>) -> Arc<Connection> {
        let id = self
            .state
            .next_connection_id
            .fetch_add(1, Ordering::Relaxed);
        Arc::new(Connection::new(id, sink))
    }

    /// A connection whose handshake happened elsewhere (the MCP connection's own
    /// `initialize`): it may call every method at once. `legacy_approvals` picks the v1
    /// approval requests.
    pub fn connect_initialized(
        &self,
        sink: Arc<dyn MessageSink>,
        legacy_approvals: bool,
    ) -> Arc<Connection> {
        let connection = self.connect(sink);
        connection.mark_initialized(legacy_approvals, Vec::new());
        connection
    }

    /// The client went away: its pending server requests end (their approvals fall back
    /// to the deadline's denial at once) and it stops following threads.
    pub fn disconnect(&self, connection: &Arc<Connection>) {
        connection.close();
        self.state.fuzzy.stop_connection(connection.id);
    }

    /// Stop: interrupt running turns and give them a bounded moment to record it.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        self.state.shutdown.cancel();
        self.state.thread_manager.shutdown_all(grace).await;
    }

    /// Handle one message from the client (any JSON value the transport decoded).
    pub fn handle_incoming(&self, connection: &Arc<Connection>, value: Value) {
        match JsonRpcMessage::from_value(value) {
            // The handshake is answered in order, before anything read after it, so a
            // client that pipelines `initialize` and its first requests is served.
            Ok(JsonRpcMessage::Request(request)) if request.method == "initialize" => {
                match parse(request.params).and_then(|p| self.initialize(connection, p)) {
                    Ok(reply) => connection.respond(request.id, reply.result),
                    Err(err) => connection.respond_error(Some(request.id), err.to_rpc()),
                }
            }
            Ok(JsonRpcMessage::Request(request)) => {
                let Some(admitted) = connection.admit() else {
                    connection.respond_error(
                        Some(request.id),
                        JsonRpcError::new(
                            crate::protocol::SERVER_OVERLOADED,
                            "Server overloaded; retry later.",
                        ),
                    );
                    return;
                };
                let this = self.clone();
                let connection = connection.clone();
                tokio::spawn(async move {
                    let _admitted = admitted;
                    let id = request.id.clone();
                    match this
                        .dispatch(&connection, &request.method, request.params)
                        .await
                    {
                        Ok(reply) => {
                            connection.respond(id, reply.result);
                            for after in reply.after {
                                after();
                            }
                        }
                        Err(err) => connection.respond_error(Some(id), err.to_rpc()),
                    }
                });
            }
            Ok(JsonRpcMessage::Notification(notification)) => {
                // `initialized` is the only client notification; the rest are ignored.
                tracing::debug!("client notification {}", notification.method);
            }
            Ok(JsonRpcMessage::Response(response)) => {
                if !connection.resolve(&response.id, Ok(response.result)) {
                    tracing::debug!("response to unknown request {}", response.id);
                }
            }
            Ok(JsonRpcMessage::Error(error)) => {
                if let Some(id) = &error.id
                    && connection.resolve(id, Err(error.error.clone()))
                {
                    return;
                }
                tracing::debug!("client error without a request: {:?}", error.error);
            }
            Err((id, message)) => connection.respond_error(
                id,
                JsonRpcError::new(
                    crate::protocol::INVALID_REQUEST,
                    format!("Invalid request: {message}"),
                ),
            ),
        }
    }

    /// A line (or frame) that is not JSON at all.
    pub fn handle_unparsable(&self, connection: &Arc<Connection>, error: &str) {
        connection.respond_error(
            None,
            JsonRpcError::new(PARSE_ERROR, format!("Parse error: {error}")),
        );
    }

    /// Run one request to its result, for hosts that send the response themselves (the
    /// MCP connection). Work that follows the response runs right after this returns.
    pub async fn handle_request(
        &self,
        connection: &Arc<Connection>,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, JsonRpcError> {
        match self.dispatch(connection, method, params).await {
            Ok(reply) => {
                let after = reply.after;
                // Let the host write its response first.
                tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    for f in after {
                        f();
                    }
                });
                Ok(reply.result)
            }
            Err(err) => Err(err.to_rpc()),
        }
    }

    /// Whether `method` is one of ours (for hosts that mount us beside other methods).
    pub fn handles(method: &str) -> bool {
        METHODS.contains(&method)
    }

    async fn dispatch(
        &self,
        connection: &Arc<Connection>,
        method: &str,
        params: Option<Value>,
    ) -> Result<Reply, AppServerError> {
        if method == "initialize" {
            return self.initialize(connection, parse(params)?);
        }
        if !connection.is_initialized() {
            return Err(AppServerError::NotInitialized);
        }
        let state = &self.state;
        match method {
            "thread/start" => self.thread_start(connection, parse(params)?).await,
            "thread/resume" => self.thread_resume(connection, parse(params)?).await,
            "thread/fork" => self.thread_fork(connection, parse(params)?).await,
            "thread/read" => self.thread_read(parse(params)?).await,
            "thread/list" => self.thread_list(parse(params)?).await,
            "thread/archive" => self.thread_archive(connection, parse(params)?, true).await,
            "thread/unarchive" => self.thread_archive(connection, parse(params)?, false).await,
            "turn/start" => self.turn_start(connection, parse(params)?).await,
            "turn/steer" => self.turn_steer(parse(params)?).await,
            "turn/interrupt" => self.turn_interrupt(parse(params)?).await,
            "account/read" => accounts::read(state, parse_or_default(params)?).await,
            "account/login/start" => accounts::login_start(state, connection, parse(params)?).await,
            "account/login/cancel" => accounts::login_cancel(parse(params)?),
            "account/logout" => accounts::logout(state, connection).await,
            "account/rateLimits/read" => accounts::rate_limits(),
            "config/read" => config_api::read(state, parse_or_default(params)?).await,
            "config/value/write" => config_api::value_write(state, parse(params)?).await,
            "config/batchWrite" => config_api::batch_write(state, parse(params)?).await,
            "model/list" => models::list(state, parse_or_default(params)?).await,
            "collaborationMode/list" => models::collaboration_modes(),
            "getConversationSummary" => v1_api::conversation_summary(state, parse(params)?).await,
            "getAuthStatus" => v1_api::auth_status(state, parse_or_default(params)?).await,
            "gitDiffToRemote" => v1_api::git_diff_to_remote(parse(params)?).await,
            "fuzzyFileSearch" => v1_api::fuzzy_file_search(state, parse(params)?).await,
            "fuzzyFileSearch/sessionStart" => {
                v1_api::session_start(state, connection, parse(params)?)
            }
            "fuzzyFileSearch/sessionUpdate" => {
                v1_api::session_update(state, connection, parse(params)?)
            }
            "fuzzyFileSearch/sessionStop" => {
                v1_api::session_stop(state, connection, parse(params)?)
            }
            other => Err(AppServerError::MethodNotFound(other.to_string())),
        }
    }

    fn initialize(
        &self,
        connection: &Arc<Connection>,
        params: v2::InitializeParams,
    ) -> Result<Reply, AppServerError> {
        let name = &params.client_info.name;
        if name.is_empty() || name.chars().any(|c| c.is_control()) {
            return Err(AppServerError::InvalidRequest(format!(
                "Invalid clientInfo.name: '{name}'. Must be a valid HTTP header value."
            )));
        }
        let capabilities = params.capabilities.unwrap_or_default();
        let legacy = capabilities.legacy_approvals || params.protocol_version == Some(1);
        let opt_out = capabilities
            .opt_out_notification_methods
            .unwrap_or_default();
        if !connection.mark_initialized(legacy, opt_out) {
            return Err(AppServerError::AlreadyInitialized);
        }
        let version = env!("CARGO_PKG_VERSION");
        Reply::new(&v2::InitializeResponse {
            server_info: v2::ServerInfo {
                name: "interpreter".to_string(),
                version: version.to_string(),
            },
            user_agent: format!(
                "interpreter/{version} ({}; {})",
                params.client_info.name, params.client_info.version
            ),
            codex_home: self.state.inputs.home.to_string_lossy().into_owned(),
            platform_family: if cfg!(windows) { "windows" } else { "unix" }.to_string(),
            platform_os: std::env::consts::OS.to_string(),
        })
    }

    // -----------------------------------------------------------------------------------
    // threads

    async fn thread_start(
        &self,
        connection: &Arc<Connection>,
        params: v2::ThreadStartParams,
    ) -> Result<Reply, AppServerError> {
        let mut settings = params.settings;
        let ephemeral = params.ephemeral.unwrap_or(false);
        let config = self
            .state
            .session_config(&mut settings, ephemeral, None)
            .await?;
        let new = self
            .state
            .thread_manager
            .start_thread(config, self.state.session_source)
            .await?;
        let loaded = self.state.register(new.thread, ephemeral, None);
        loaded.subscribe(connection);
        let response = self.state.start_response(&loaded, Vec::new()).await?;
        let thread = response.thread.clone();
        let notify_to = connection.clone();
        Ok(Reply::new(&response)?.then(move || {
            notify_to.notify("thread/started", &v2::ThreadStartedNotification { thread });
        }))
    }

    async fn thread_resume(
        &self,
        connection: &Arc<Connection>,
        params: v2::ThreadResumeParams,
    ) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        let loaded = match self.state.loaded(thread_id) {
            Some(loaded) => loaded,
            None => {
                let record = self.state.record(thread_id).await?;
                let mut settings = params.settings;
                let config = self
                    .state
                    .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
                    .await?;
                let resumed = match self
                    .state
                    .thread_manager
                    .resume_thread(config, thread_id)
                    .await
                {
                    Ok(resumed) => resumed.thread,
                    // Another front end in this process has it live (MCP connection).
                    Err(interpreter_core::CoreError::ThreadAlreadyLive(_)) => self
                        .state
                        .thread_manager
                        .get_thread(thread_id)
                        .await
                        .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?,
                    Err(e) => return Err(e.into()),
                };
                self.state.register(resumed, false, None)
            }
        };
        loaded.subscribe(connection);
        let turns = self.state.recorded_turns(&loaded.thread).await?;
        let response = self.state.start_response(&loaded, turns).await?;
        Reply::new(&response)
    }

    async fn thread_fork(
        &self,
        connection: &Arc<Connection>,
        params: v2::ThreadForkParams,
    ) -> Result<Reply, AppServerError> {
        let source = parse_thread_id(&params.thread_id)?;
        if let Some(last) = &params.last_turn_id
            && let Some(loaded) = self.state.loaded(source)
            && loaded.active_turn().is_some_and(|t| &t.turn_id == last)
        {
            return Err(AppServerError::InvalidRequest(format!(
                "cannot fork at turn `{last}`: it is still in progress"
            )));
        }
        let record = self.state.record(source).await?;
        let mut settings = params.settings;
        let config = self
            .state
            .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
            .await?;
        let new = self
            .state
            .thread_manager
            .fork_thread(
                config,
                source,
                params.last_turn_id,
                self.state.session_source,
            )
            .await?;
        let loaded = self.state.register(new.thread, false, Some(source));
        loaded.subscribe(connection);
        let turns = self.state.recorded_turns(&loaded.thread).await?;
        let response = self.state.start_response(&loaded, turns).await?;
        let mut thread = response.thread.clone();
        thread.turns = Vec::new();
        let notify_to = connection.clone();
        Ok(Reply::new(&response)?.then(move || {
            notify_to.notify("thread/started", &v2::ThreadStartedNotification { thread });
        }))
    }

    async fn thread_read(&self, params: v2::ThreadReadParams) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        let mut thread = match self.state.loaded(thread_id) {
            Some(loaded) => self.state.thread_object(&loaded).await?,
            None => {
                let record = self
                    .state
                    .record(thread_id)
                    .await?
                    .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?;
                mapping::thread_from_record(&record, ThreadStatus::NotLoaded)
            }
        };
        if params.include_turns
            && let Some(path) = &thread.path
        {
            thread.turns = read_turns(PathBuf::from(path)).await?;
        }
        Reply::new(&v2::ThreadReadResponse { thread })
    }

    async fn thread_list(&self, params: v2::ThreadListParams) -> Result<Reply, AppServerError> {
        let limit = params.limit.unwrap_or(25).clamp(1, 100) as usize;
        let direction = match params.sort_direction {
            Some(v2::SortDirection::Asc) => ListDirection::Asc,
            _ => ListDirection::Desc,
        };
        let cwds = match params.cwd {
            None => Vec::new(),
            Some(v2::CwdFilter::One(one)) => vec![one],
            Some(v2::CwdFilter::Many(many)) => many,
        };
        let query = ListQuery {
            limit,
            cursor: params.cursor,
            sort_key: match params.sort_key {
                Some(v2::ThreadSortKey::UpdatedAt) => ListSortKey::UpdatedAt,
                _ => ListSortKey::CreatedAt,
            },
            direction,
            archived: params.archived.unwrap_or(false),
            cwds: cwds
                .iter()
                .map(|cwd| normalize_dir(&self.state.inputs.cwd, cwd))
                .collect(),
            sources: params
                .source_kinds
                .unwrap_or_default()
                .into_iter()
                .map(mapping::source_kind)
                .collect(),
            model_providers: params.model_providers.unwrap_or_default(),
            search_term: params.search_term,
            require_preview: true,
        };
        let page = self
            .state
            .with_index(move |index| index.list_page(&query))
            .await?;
        let data = page
            .records
            .iter()
            .map(|record| {
                let status = self
                    .state
                    .loaded(record.id)
                    .map_or(ThreadStatus::NotLoaded, |l| l.status());
                mapping::thread_from_record(record, status)
            })
            .collect();
        Reply::new(&v2::ThreadListResponse {
            data,
            next_cursor: page.next_cursor,
            backwards_cursor: page.backwards_cursor,
        })
    }

    async fn thread_archive(
        &self,
        connection: &Arc<Connection>,
        params: v2::ThreadIdParams,
        archived: bool,
    ) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        // Make sure the index knows the thread (a rollout it has not seen yet).
        let record = self
            .state
            .record(thread_id)
            .await?
            .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?;
        self.state
            .with_index(move |index| index.set_archived(thread_id, archived))
            .await?;
        let notification = v2::ThreadIdNotification {
            thread_id: thread_id.to_string(),
        };
        let notify_to = connection.clone();
        let method = if archived {
            "thread/archived"
        } else {
            "thread/unarchived"
        };
        let reply = if archived {
            Reply::new(&v2::EmptyResponse {})?
        } else {
            Reply::new(&v2::ThreadUnarchiveResponse {
                thread: mapping::thread_from_record(&record, ThreadStatus::NotLoaded),
            })?
        };
        Ok(reply.then(move || notify_to.notify(method, &notification)))
    }

    // -----------------------------------------------------------------------------------
    // turns

    async fn turn_start(
        &self,
        connection: &Arc<Connection>,
        params: v2::TurnStartParams,
    ) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        let items = user_inputs(&params.input)?;
        let mut loaded = self.state.load_for_turn(thread_id).await?;
        loaded.subscribe(connection);
        if loaded.active_turn().is_none() {
            loaded = self.state.apply_turn_settings(loaded, &params).await?;
        }
        // A turn is running: the input joins it (as the reference's start_or_steer).
        if let Some(active) = loaded.active_turn() {
            loaded.thread.submit(Op::UserInput { items }).await?;
            return Reply::new(&v2::TurnStartResponse {
                turn: pending_turn(&active.turn_id),
            });
        }
        let slot = tokio::select! {
            slot = loaded.thread.turn_slot() => slot,
            () = connection.closed.cancelled() => {
                return Err(AppServerError::InvalidRequest("connection closed".into()));
            }
        };
        let turn_id = loaded.thread.submit(Op::UserInput { items }).await?;
        if let Ok(mut active) = loaded.active.lock() {
            *active = Some(ActiveTurn {
                turn_id: turn_id.clone(),
                owner: connection.clone(),
            });
        }
        let (gate, released) = tokio::sync::oneshot::channel::<()>();
        let state = self.state.clone();
        let driven = loaded.clone();
        let id = turn_id.clone();
        let client_id = params.client_user_message_id;
        tokio::spawn(async move {
            // Events follow the turn/start response on the wire.
            let _ = released.await;
            driver::drive(&state, &driven, &id, client_id, slot).await;
            if let Ok(mut active) = driven.active.lock() {
                *active = None;
            }
            state.retire_idle(driven.id()).await;
        });
        Ok(Reply::new(&v2::TurnStartResponse {
            turn: pending_turn(&turn_id),
        })?
        .then(move || {
            let _ = gate.send(());
        }))
    }

    async fn turn_steer(&self, params: v2::TurnSteerParams) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        let items = user_inputs(&params.input)?;
        let (loaded, active) =
            self.expected_active_turn(thread_id, &params.expected_turn_id, "steer")?;
        loaded.thread.submit(Op::UserInput { items }).await?;
        Reply::new(&v2::TurnSteerResponse {
            turn_id: active.turn_id,
        })
    }

    async fn turn_interrupt(
        &self,
        params: v2::TurnInterruptParams,
    ) -> Result<Reply, AppServerError> {
        let thread_id = parse_thread_id(&params.thread_id)?;
        let (loaded, _) = self.expected_active_turn(thread_id, &params.turn_id, "interrupt")?;
        loaded.thread.submit(Op::Interrupt).await?;
        Reply::new(&v2::EmptyResponse {})
    }

    /// The running turn of a thread, which must be the one the client names (`turn/steer`,
    /// `turn/interrupt`); `verb` words the error when none runs.
    fn expected_active_turn(
        &self,
        thread_id: ThreadId,
        expected: &str,
        verb: &str,
    ) -> Result<(Arc<LoadedThread>, ActiveTurn), AppServerError> {
        let active = self
            .state
            .loaded(thread_id)
            .and_then(|l| l.active_turn().map(|a| (l, a)));
        let Some((loaded, active)) = active else {
            return Err(AppServerError::InvalidRequest(format!(
                "no active turn to {verb}"
            )));
        };
        if active.turn_id != expected {
            return Err(AppServerError::InvalidRequest(format!(
                "expected active turn id `{expected}` but found `{}`",
                active.turn_id
            )));
        }
        Ok((loaded, active))
    }
}

/// Every method the processor answers.
pub const METHODS: &[&str] = &[
    "initialize",
    "thread/start",
    "thread/resume",
    "thread/fork",
    "thread/read",
    "thread/list",
    "thread/archive",
    "thread/unarchive",
    "turn/start",
    "turn/steer",
    "turn/interrupt",
    "account/read",
    "account/login/start",
    "account/login/cancel",
    "account/logout",
    "account/rateLimits/read",
    "config/read",
    "config/value/write",
    "config/batchWrite",
    "model/list",
    "collaborationMode/list",
    "getConversationSummary",
    "getAuthStatus",
    "gitDiffToRemote",
    "fuzzyFileSearch",
    "fuzzyFileSearch/sessionStart",
    "fuzzyFileSearch/sessionUpdate",
    "fuzzyFileSearch/sessionStop",
];

impl ServerState {
    pub fn loaded(&self, id: ThreadId) -> Option<Arc<LoadedThread>> {
        self.loaded.lock().ok().and_then(|l| l.get(&id).cloned())
    }

    fn register(
        &self,
        thread: Arc<Thread>,
        ephemeral: bool,
        forked_from: Option<ThreadId>,
    ) -> Arc<LoadedThread> {
        let loaded = Arc::new(LoadedThread::new(thread, ephemeral, forked_from));
        if let Ok(mut map) = self.loaded.lock() {
            map.insert(loaded.id(), loaded.clone());
        }
        loaded
    }

    /// Apply `turn/start`'s settings (model, cwd, approval policy, sandbox policy,
    /// effort) to an idle thread. They stick for later turns, as in the reference. The
    /// engine fixes a session's settings for its lifetime, so changed settings restart the
    /// thread from its rollout (core's `reconfigure_thread`); its subscribers carry over.
    async fn apply_turn_settings(
        &self,
        loaded: Arc<LoadedThread>,
        params: &v2::TurnStartParams,
    ) -> Result<Arc<LoadedThread>, AppServerError> {
        let mut config = loaded.thread.config().clone();
        let before = (
            config.model.clone(),
            config.cwd.clone(),
            config.approval_policy,
            config.sandbox_policy.clone(),
            config.model_reasoning_effort,
        );
        if let Some(model) = &params.model {
            config.model = model.clone();
        }
        if let Some(cwd) = &params.cwd {
            let cwd = self.inputs.cwd.join(cwd);
            if !cwd.is_dir() {
                return Err(AppServerError::InvalidParams(format!(
                    "cwd {} is not a directory",
                    cwd.display()
                )));
            }
            config.cwd = cwd;
        }
        if let Some(policy) = params.approval_policy {
            config.approval_policy = mapping::approval_policy_in(policy);
        }
        if let Some(policy) = &params.sandbox_policy {
            config.sandbox_policy = mapping::sandbox_policy_in(policy);
        }
        if let Some(effort) = &params.effort {
            config.model_reasoning_effort = Some(
                serde_json::from_value(serde_json::Value::String(effort.clone())).map_err(
                    |_| AppServerError::InvalidParams(format!("unknown effort `{effort}`")),
                )?,
            );
        }
        let after = (
            config.model.clone(),
            config.cwd.clone(),
            config.approval_policy,
            config.sandbox_policy.clone(),
            config.model_reasoning_effort,
        );
        if before == after {
            return Ok(loaded);
        }
        let restarted = self
            .thread_manager
            .reconfigure_thread(loaded.id(), config, std::time::Duration::from_secs(5))
            .await?;
        let replacement = Arc::new(LoadedThread::new(
            restarted.thread,
            loaded.ephemeral,
            loaded.forked_from,
        ));
        for subscriber in loaded.subscribers() {
            replacement.subscribe(&subscriber);
        }
        if let Ok(mut map) = self.loaded.lock() {
            map.insert(replacement.id(), replacement.clone());
        }
        Ok(replacement)
    }

    /// A loaded thread, or the saved one loaded from disk (a client may start a turn on a
    /// thread it listed without resuming it first).
    async fn load_for_turn(&self, id: ThreadId) -> Result<Arc<LoadedThread>, AppServerError> {
        if let Some(loaded) = self.loaded(id) {
            return Ok(loaded);
        }
        let thread = match self.thread_manager.get_thread(id).await {
            Some(thread) => thread,
            None => {
                let record = self.record(id).await?;
                let config = self
                    .session_config(
                        &mut v2::ThreadSettingsParams::default(),
                        false,
                        record.map(|r| r.cwd),
                    )
                    .await?;
                match self.thread_manager.resume_thread(config, id).await {
                    Ok(resumed) => resumed.thread,
                    Err(interpreter_core::CoreError::ThreadAlreadyLive(_)) => self
                        .thread_manager
                        .get_thread(id)
                        .await
                        .ok_or_else(|| AppServerError::ThreadNotFound(id.to_string()))?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        Ok(self.register(thread, false, None))
    }

    async fn retire_idle(&self, just_used: ThreadId) {
        let retired = self
            .thread_manager
            .retire_idle(just_used, MAX_LIVE_IDLE_THREADS)
            .await;
        if let Ok(mut map) = self.loaded.lock() {
            for id in retired {
                map.remove(&id);
            }
        }
    }

    /// The config a thread runs with: the server's inputs plus the request's settings.
    pub async fn session_config(
        &self,
        settings: &mut v2::ThreadSettingsParams,
        ephemeral: bool,
        default_cwd: Option<PathBuf>,
    ) -> Result<Config, AppServerError> {
        let mut inputs = self.inputs.clone();
        if let Some(config) = settings.config.take() {
            for (key, value) in config {
                let value = json_to_toml(&value).ok_or_else(|| {
                    AppServerError::InvalidParams(format!("config.{key}: null is not a value"))
                })?;
                inputs.cli_overrides.push((key, value));
            }
        }
        let cwd = settings
            .cwd
            .take()
            .map(PathBuf::from)
            .or(default_cwd.filter(|d| d.is_dir()));
        if let Some(cwd) = cwd {
            inputs.overrides.cwd = Some(if cwd.is_absolute() {
                cwd
            } else {
                self.inputs.cwd.join(cwd)
            });
        }
        if let Some(model) = settings.model.take() {
            inputs.overrides.model = Some(model);
        }
        if let Some(provider) = settings.model_provider.take() {
            inputs.overrides.model_provider = Some(provider);
        }
        if let Some(policy) = settings.approval_policy {
            inputs.overrides.approval_policy = Some(mapping::approval_policy_in(policy));
        }
        if let Some(mode) = settings.sandbox {
            inputs.overrides.sandbox_mode = Some(mapping::sandbox_mode_in(mode));
        }
        if let Some(text) = settings.base_instructions.take() {
            inputs.overrides.base_instructions = Some(text);
        }
        if let Some(text) = settings.developer_instructions.take() {
            inputs.overrides.developer_instructions = Some(text);
        }
        inputs.overrides.ephemeral = ephemeral;
        load_config_blocking(inputs).await
    }

    /// The server's own effective config (no thread settings).
    pub async fn base_config(&self) -> Result<Config, AppServerError> {
        load_config_blocking(self.inputs.clone()).await
    }

    /// Run `f` on the shared index connection, off the async workers.
    pub async fn with_index<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ThreadIndex) -> Result<T, rollout::RolloutError> + Send + 'static,
    ) -> Result<T, AppServerError> {
        let index = self.index.clone();
        let home = self.inputs.home.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = index
                .lock()
                .map_err(|_| AppServerError::Internal("thread index lock poisoned".into()))?;
            if guard.is_none() {
                *guard = Some(ThreadIndex::open(&home)?);
            }
            match guard.as_ref() {
                Some(index) => f(index).map_err(AppServerError::from),
                None => Err(AppServerError::Internal("thread index unavailable".into())),
            }
        })
        .await
        .map_err(|e| AppServerError::Internal(format!("index task stopped: {e}")))?
    }

    /// The index record of a thread, finding (and indexing) its rollout when the index
    /// does not know it yet.
    pub async fn record(&self, id: ThreadId) -> Result<Option<ThreadRecord>, AppServerError> {
        if let Some(record) = self.with_index(move |index| index.get(id)).await? {
            return Ok(Some(record));
        }
        let home = self.inputs.home.clone();
        let found = tokio::task::spawn_blocking(move || rollout::find_rollout(&home, id))
            .await
            .map_err(|e| AppServerError::Internal(e.to_string()))??;
        if found.is_none() {
            return Ok(None);
        }
        self.with_index(move |index| index.get(id)).await
    }

    async fn thread_object(&self, loaded: &LoadedThread) -> Result<v2::Thread, AppServerError> {
        let record = if loaded.ephemeral {
            None
        } else {
            self.record(loaded.id()).await?
        };
        let config = loaded.thread.config();
        let mut thread = match record {
            Some(record) => mapping::thread_from_record(&record, loaded.status()),
            None => {
                let now = chrono::Utc::now().timestamp();
                v2::Thread {
                    id: loaded.id().to_string(),
                    session_id: loaded.id().to_string(),
                    forked_from_id: None,
                    parent_thread_id: None,
                    preview: String::new(),
                    ephemeral: loaded.ephemeral,
                    model_provider: config.model_provider_id.clone(),
                    created_at: now,
                    updated_at: now,
                    recency_at: None,
                    status: loaded.status(),
                    path: None,
                    cwd: config.cwd.to_string_lossy().into_owned(),
                    cli_version: env!("CARGO_PKG_VERSION").to_string(),
                    source: mapping::session_source(self.session_source),
                    thread_source: None,
                    agent_nickname: None,
                    agent_role: None,
                    git_info: None,
                    name: None,
                    turns: Vec::new(),
                }
            }
        };
        thread.ephemeral = loaded.ephemeral;
        thread.forked_from_id = loaded.forked_from.map(|id| id.to_string());
        thread.model_provider = config.model_provider_id.clone();
        Ok(thread)
    }

    async fn recorded_turns(&self, thread: &Thread) -> Result<Vec<v2::Turn>, AppServerError> {
        match thread.rollout_path() {
            Some(path) => read_turns(path.clone()).await,
            None => Ok(Vec::new()),
        }
    }

    async fn start_response(
        &self,
        loaded: &LoadedThread,
        turns: Vec<v2::Turn>,
    ) -> Result<v2::ThreadStartResponse, AppServerError> {
        let mut thread = self.thread_object(loaded).await?;
        thread.turns = turns;
        let config = loaded.thread.config();
        Ok(v2::ThreadStartResponse {
            thread,
            model: config.model.clone(),
            model_provider: config.model_provider_id.clone(),
            service_tier: None,
            cwd: config.cwd.to_string_lossy().into_owned(),
            instruction_sources: instruction_sources(&config.cwd),
            approval_policy: mapping::approval_policy(config.approval_policy),
            approvals_reviewer: "user".to_string(),
            sandbox: mapping::sandbox_policy(&config.sandbox_policy),
            reasoning_effort: config
                .model_reasoning_effort
                .map(|e| e.as_str().to_string()),
        })
    }
}

async fn load_config_blocking(inputs: ConfigInputs) -> Result<Config, AppServerError> {
    tokio::task::spawn_blocking(move || load_config(inputs))
        .await
        .map_err(|e| AppServerError::Internal(format!("configuration loader stopped: {e}")))?
        .map_err(AppServerError::from)
}

async fn read_turns(path: PathBuf) -> Result<Vec<v2::Turn>, AppServerError> {
    tokio::task::spawn_blocking(move || {
        let items = rollout::read_rollout(&path)?;
        Ok(rollout::turns_from_rollout(&items)
            .iter()
            .map(mapping::turn_from_record)
            .collect())
    })
    .await
    .map_err(|e| AppServerError::Internal(format!("rollout reader stopped: {e}")))?
}

/// AGENTS.md files from the cwd up to the filesystem root that exist (what the engine
/// loads into the context).
fn instruction_sources(cwd: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for dir in cwd.ancestors() {
        let candidate = dir.join("AGENTS.md");
        if candidate.is_file() {
            found.push(candidate.to_string_lossy().into_owned());
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    found.reverse();
    found
}

fn pending_turn(id: &str) -> v2::Turn {
    v2::Turn {
        id: id.to_string(),
        items: Vec::new(),
        items_view: v2::ItemsView::NotLoaded,
        status: v2::TurnStatus::InProgress,
        error: None,
        started_at: None,
        completed_at: None,
        duration_ms: None,
    }
}

/// Wire input → engine input, with the reference's size limit.
fn user_inputs(
    input: &[v2::UserInput],
) -> Result<Vec<interpreter_protocol::UserInput>, AppServerError> {
    let total: usize = input
        .iter()
        .map(|item| match item {
            v2::UserInput::Text { text, .. } => text.chars().count(),
            _ => 0,
        })
        .sum();
    if total > MAX_INPUT_CHARS {
        return Err(AppServerError::InputTooLarge { actual: total });
    }
    let mut items = Vec::new();
    for item in input {
        match item {
            v2::UserInput::Text { text, .. } => {
                items.push(interpreter_protocol::UserInput::Text { text: text.clone() });
            }
            v2::UserInput::LocalImage { path, .. } => {
                items.push(interpreter_protocol::UserInput::LocalImage {
                    path: PathBuf::from(path),
                });
            }
            // Mentions and skills name files; the model gets their paths as text.
            v2::UserInput::Mention { name, path } | v2::UserInput::Skill { name, path } => {
                items.push(interpreter_protocol::UserInput::Text {
                    text: format!("{name}: {path}"),
                });
            }
            v2::UserInput::Image { .. } => {
                return Err(AppServerError::InvalidParams(
                    "image URLs are not supported; send a localImage".into(),
                ));
            }
        }
    }
    if items.is_empty() {
        return Err(AppServerError::InvalidParams("input is empty".into()));
    }
    Ok(items)
}

pub(crate) fn parse_thread_id(text: &str) -> Result<ThreadId, AppServerError> {
    ThreadId::from_str(text)
        .map_err(|_| AppServerError::InvalidRequest(format!("invalid thread id: {text}")))
}

fn normalize_dir(base: &Path, dir: &str) -> PathBuf {
    let path = base.join(dir);
    std::fs::canonicalize(&path).unwrap_or(path)
}

pub(crate) fn parse<T: DeserializeOwned>(params: Option<Value>) -> Result<T, AppServerError> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|e| AppServerError::InvalidParams(e.to_string()))
}

/// For "no params" methods: omitted, `null` and `{}` all mean the defaults.
pub(crate) fn parse_or_default<T: DeserializeOwned + Default>(
    params: Option<Value>,
) -> Result<T, AppServerError> {
    match params {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => {
            serde_json::from_value(value).map_err(|e| AppServerError::InvalidParams(e.to_string()))
        }
    }
}

/// JSON → TOML for config overrides; `None` for `null`, which TOML cannot express.
pub(crate) fn json_to_toml(value: &Value) -> Option<toml::Value> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => toml::Value::Array(items.iter().filter_map(json_to_toml).collect()),
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .filter_map(|(k, v)| json_to_toml(v).map(|v| (k.clone(), v)))
                .collect(),
        ),
    })
}
