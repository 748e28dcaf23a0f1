//! The transport-agnostic [`MessageProcessor`]: JSON-RPC messages in, responses,
//! notifications and server→client requests out through each connection's sink.
//!
//! Every request runs in its own task, so a long request (a `thread/resume` loading a big
//! rollout) never holds up the client's answers to our approval requests, which arrive on
//! the same connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use interpreter_core::ThreadManager;
use interpreter_core::config::ConfigInputs;
use interpreter_protocol::SessionSource;
use interpreter_telemetry::W3cTraceContext;
use serde_json::Value;

use crate::connection::{Connection, MessageSink};
use crate::error::AppServerError;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::protocol::{JsonRpcError, JsonRpcMessage};
use crate::state::{Reply, ServerState, parse, parse_or_default};
use crate::{
    accounts, command_exec, config_api, fs_api, goals, listings, mcp_api, model_providers, models,
    thread_edits, threads, turns, v1_api,
};

/// What the processor needs from the process that hosts it.
#[derive(Clone)]
pub struct ProcessorOptions {
    /// Server-level config inputs (`-c`, profile, env, home, cwd).
    pub config_inputs: ConfigInputs,
    /// Recorded as the `source` of threads this server starts.
    pub session_source: SessionSource,
}

/// Requests in, messages out. Cheap to clone; clones share the server state.
#[derive(Clone)]
pub struct MessageProcessor {
    state: Arc<ServerState>,
    tables: Arc<ConnectionTables>,
}

/// What some method families keep per connection, ended with it: owned here, next to
/// the dispatch, and handed to each family's handlers, so the server state below them
/// knows none of them.
#[derive(Default)]
pub(crate) struct ConnectionTables {
    /// `fuzzyFileSearch` searches and sessions.
    pub fuzzy: v1_api::FuzzySessions,
    /// `fs/watch` watches, by connection.
    pub fs_watches: fs_api::FsWatches,
    /// `command/exec` processes, by connection and client process id.
    pub command_exec: command_exec::CommandExecProcesses,
}

impl MessageProcessor {
    pub fn new(options: ProcessorOptions, thread_manager: Arc<ThreadManager>) -> Self {
        Self {
            state: Arc::new(ServerState::new(
                options.config_inputs,
                options.session_source,
                thread_manager,
            )),
            tables: Arc::default(),
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
        // No capability negotiation there: the host decides what it exposes.
        connection.allow_experimental();
        connection
    }

    /// The client went away: its pending server requests end (their approvals fall back
    /// to the deadline's denial at once), it stops following threads, and its `fs/watch`
    /// watches end.
    pub fn disconnect(&self, connection: &Arc<Connection>) {
        connection.close();
        self.tables.fuzzy.stop_connection(connection.id);
        self.tables.fs_watches.stop_connection(connection.id);
        // Its `command/exec` processes are killed with their process groups.
        self.tables.command_exec.stop_connection(connection.id);
    }

    /// Stop: interrupt running turns and give them a bounded moment to record it.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        self.state.shutdown.cancel();
        self.tables.command_exec.stop_all();
        self.state.thread_manager.shutdown_all(grace).await;
    }

    /// Handle one message from the client (any JSON value the transport decoded).
    pub fn handle_incoming(&self, connection: &Arc<Connection>, value: Value) {
        match JsonRpcMessage::from_value(value) {
            // The handshake is answered in order, before anything read after it, so a
            // client that pipelines `initialize` and its first requests is served.
            Ok(JsonRpcMessage::Request(request)) if request.method == "initialize" => {
                match parse(request.params).and_then(|p| self.initialize(connection, p)) {
                    Ok(reply) => {
                        connection.respond(request.id, reply.result);
                        self.warn_about_config(connection);
                    }
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
                // Requests run in tasks of their own, which may start in any order; a
                // `command/exec` takes its `processId` in arrival order, so the follow-ups a
                // client sends right behind it find the process.
                if request.method == "command/exec" && connection.is_initialized() {
                    command_exec::note_arrival(
                        &self.tables.command_exec,
                        connection,
                        request.params.as_ref(),
                    );
                }
                let this = self.clone();
                let connection = connection.clone();
                tokio::spawn(async move {
                    let _admitted = admitted;
                    let id = request.id.clone();
                    match this
                        .dispatch(&connection, &request.method, request.params, request.trace)
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

    /// After the handshake: one `configWarning` per problem the config has (unknown keys,
    /// values it fell back on), or the error that keeps it from loading, as Codex tells a
    /// client that just connected.
    fn warn_about_config(&self, connection: &Arc<Connection>) {
        let state = self.state.clone();
        let connection = connection.clone();
        tokio::spawn(async move {
            let path = state
                .inputs
                .home
                .join("config.toml")
                .to_string_lossy()
                .into_owned();
            let warnings = match state.base_config().await {
                Ok(config) => config
                    .warnings
                    .into_iter()
                    .map(|summary| (summary, None))
                    .collect(),
                Err(e) => vec![(
                    "the config could not be loaded; threads cannot start until it is fixed"
                        .to_string(),
                    Some(e.to_string()),
                )],
            };
            for (summary, details) in warnings {
                connection.notify(
                    notification_names::CONFIG_WARNING,
                    &v2::ConfigWarningNotification {
                        summary,
                        details,
                        path: Some(path.clone()),
                        range: None,
                    },
                );
            }
        });
    }

    /// A line (or frame) no method can see: not JSON, or too long to read.
    pub fn handle_unservable(
        &self,
        connection: &Arc<Connection>,
        unservable: &interpreter_transport::jsonrpc::Unservable,
    ) {
        connection.respond_error(
            None,
            JsonRpcError::new(unservable.code(), unservable.message()),
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
        match self.dispatch(connection, method, params, None).await {
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
        method == "initialize" || method_entry(method).is_some()
    }

    async fn dispatch(
        &self,
        connection: &Arc<Connection>,
        method: &str,
        params: Option<Value>,
        trace: Option<W3cTraceContext>,
    ) -> Result<Reply, AppServerError> {
        if method == "initialize" {
            return self.initialize(connection, parse(params)?);
        }
        if !connection.is_initialized() {
            return Err(AppServerError::NotInitialized);
        }
        let Some(entry) = method_entry(method) else {
            return Err(AppServerError::UnknownMethod(method.to_string()));
        };
        if entry.experimental && !connection.experimental_api() {
            return Err(AppServerError::InvalidRequest(format!(
                "{method} requires experimentalApi capability"
            )));
        }
        (entry.handler)(Call {
            state: &self.state,
            tables: &self.tables,
            connection,
            params,
            trace: trace.and_then(W3cTraceContext::checked),
        })
        .await
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
        if capabilities.experimental_api {
            connection.allow_experimental();
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
}

/// One request as a handler gets it.
pub(crate) struct Call<'a> {
    pub state: &'a Arc<ServerState>,
    pub tables: &'a ConnectionTables,
    pub connection: &'a Arc<Connection>,
    pub params: Option<Value>,
    /// The request's `trace`, for the methods that start a turn.
    pub trace: Option<W3cTraceContext>,
}

type Handler = for<'a> fn(Call<'a>) -> BoxFuture<'a, Result<Reply, AppServerError>>;

/// One entry of the dispatch table.
pub(crate) struct Method {
    pub name: &'static str,
    /// Served only to clients that asked for `capabilities.experimentalApi`, as Codex.
    pub experimental: bool,
    handler: Handler,
}

/// A table entry: `method!(NAME, |call| EXPR)` where `EXPR` is the handler's result
/// (inside an async block, so `?` and `.await` work); `method!(experimental NAME, …)`
/// for one Codex marks experimental.
macro_rules! method {
    (@entry $name:literal, $experimental:expr, |$call:ident| $body:expr) => {{
        fn handler<'a>($call: Call<'a>) -> BoxFuture<'a, Result<Reply, AppServerError>> {
            Box::pin(async move { $body })
        }
        Method {
            name: $name,
            experimental: $experimental,
            handler,
        }
    }};
    (experimental $name:literal, |$call:ident| $body:expr) => {
        method!(@entry $name, true, |$call| $body)
    };
    ($name:literal, |$call:ident| $body:expr) => {
        method!(@entry $name, false, |$call| $body)
    };
}

/// Every method the processor answers besides `initialize`: the one place a method is
/// added.
static METHODS: &[Method] = &[
    method!("thread/start", |c| threads::start(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("thread/resume", |c| threads::resume(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("thread/fork", |c| threads::fork(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("thread/read", |c| threads::read(c.state, parse(c.params)?)
        .await),
    method!("thread/list", |c| threads::list(c.state, parse(c.params)?)
        .await),
    method!("thread/archive", |c| {
        threads::archive(c.state, c.connection, parse(c.params)?, true).await
    }),
    method!("thread/unarchive", |c| {
        threads::archive(c.state, c.connection, parse(c.params)?, false).await
    }),
    method!("thread/name/set", |c| {
        threads::name_set(c.state, c.connection, parse(c.params)?).await
    }),
    method!("thread/metadata/update", |c| thread_edits::metadata_update(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("thread/shellCommand", |c| {
        thread_edits::shell_command(c.state, c.connection, parse(c.params)?).await
    }),
    method!("thread/inject_items", |c| {
        thread_edits::inject_items(c.state, c.connection, parse(c.params)?).await
    }),
    method!("thread/revert", |c| {
        thread_edits::revert(c.state, c.connection, parse(c.params)?).await
    }),
    method!("thread/compact/start", |c| {
        threads::compact_start(c.state, c.connection, parse(c.params)?, c.trace).await
    }),
    method!("thread/unsubscribe", |c| {
        threads::unsubscribe(c.state, c.connection, parse(c.params)?)
    }),
    method!("thread/loaded/list", |c| {
        threads::loaded_list(c.state, parse_or_default(c.params)?)
    }),
    method!("thread/delete", |c| threads::delete(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!(experimental "thread/backgroundTerminals/list", |c| {
        threads::background_terminals(c.state, parse(c.params)?).await
    }),
    method!("thread/goal/get", |c| goals::get(c.state, parse(c.params)?)
        .await),
    method!("thread/goal/set", |c| goals::set(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("thread/goal/clear", |c| goals::clear(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("thread/turns/list", |c| threads::turns_list(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("thread/items/list", |c| threads::items_list(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("turn/start", |c| turns::start(
        c.state,
        c.connection,
        parse(c.params)?,
        c.trace
    )
    .await),
    method!("review/start", |c| turns::review_start(
        c.state,
        c.connection,
        parse(c.params)?,
        c.trace
    )
    .await),
    method!("turn/steer", |c| turns::steer(c.state, parse(c.params)?)
        .await),
    method!("turn/interrupt", |c| turns::interrupt(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("command/exec", |c| command_exec::exec(
        c.state,
        &c.tables.command_exec,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("command/exec/write", |c| command_exec::write(
        &c.tables.command_exec,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("command/exec/terminate", |c| command_exec::terminate(
        &c.tables.command_exec,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("command/exec/resize", |c| command_exec::resize(
        &c.tables.command_exec,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("account/read", |c| accounts::read(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("account/login/start", |c| {
        accounts::login_start(c.state, c.connection, parse(c.params)?).await
    }),
    method!("account/login/cancel", |c| accounts::login_cancel(parse(
        c.params
    )?)),
    method!("account/logout", |c| accounts::logout(
        c.state,
        c.connection
    )
    .await),
    method!("account/rateLimits/read", |_c| accounts::rate_limits()),
    method!("config/read", |c| config_api::read(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("config/value/write", |c| config_api::value_write(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("config/batchWrite", |c| config_api::batch_write(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("mcpServerStatus/list", |c| mcp_api::list(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("config/mcpServer/reload", |c| mcp_api::reload(c.state)
        .await),
    method!("mcpServer/tool/call", |c| mcp_api::tool_call(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("mcpServer/oauth/login", |c| mcp_api::oauth_login(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("mcpServer/resource/read", |c| mcp_api::resource_read(
        c.state,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("model/list", |c| models::list(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("permissionProfile/list", |c| {
        listings::permission_profiles(parse_or_default(c.params)?)
    }),
    method!("hooks/list", |c| listings::hooks(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("modelProvider/list", |c| model_providers::list(c.state)
        .await),
    method!("modelProvider/capabilities/read", |_c| {
        model_providers::capabilities()
    }),
    method!("modelProvider/default/set", |c| {
        model_providers::default_set(c.state, parse(c.params)?).await
    }),
    method!("modelProvider/config/write", |c| {
        model_providers::config_write(c.state, parse(c.params)?).await
    }),
    method!("experimentalFeature/list", |_c| {
        listings::experimental_features()
    }),
    method!("configRequirements/read", |_c| {
        listings::config_requirements()
    }),
    method!("skills/list", |c| listings::skills(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("skills/config/write", |c| listings::skills_config_write(
        c.state,
        parse(c.params)?
    )
    .await),
    method!(experimental "collaborationMode/list", |_c| models::collaboration_modes()),
    method!("getConversationSummary", |c| {
        v1_api::conversation_summary(c.state, parse(c.params)?).await
    }),
    method!("getAuthStatus", |c| v1_api::auth_status(
        c.state,
        parse_or_default(c.params)?
    )
    .await),
    method!("gitDiffToRemote", |c| v1_api::git_diff_to_remote(parse(
        c.params
    )?)
    .await),
    method!("fuzzyFileSearch", |c| v1_api::fuzzy_file_search(
        &c.tables.fuzzy,
        parse(c.params)?
    )
    .await),
    method!(experimental "fuzzyFileSearch/sessionStart", |c| {
        v1_api::session_start(&c.tables.fuzzy, c.connection, parse(c.params)?)
    }),
    method!(experimental "fuzzyFileSearch/sessionUpdate", |c| {
        v1_api::session_update(&c.tables.fuzzy, c.connection, parse(c.params)?)
    }),
    method!(experimental "fuzzyFileSearch/sessionStop", |c| {
        v1_api::session_stop(&c.tables.fuzzy, c.connection, parse(c.params)?)
    }),
    method!("fs/readFile", |c| fs_api::read_file(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("fs/writeFile", |c| fs_api::write_file(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("fs/createDirectory", |c| fs_api::create_directory(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("fs/getMetadata", |c| fs_api::get_metadata(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("fs/readDirectory", |c| fs_api::read_directory(
        c.state,
        parse(c.params)?
    )
    .await),
    method!("fs/remove", |c| fs_api::remove(c.state, parse(c.params)?)
        .await),
    method!("fs/copy", |c| fs_api::copy(c.state, parse(c.params)?).await),
    method!("fs/watch", |c| fs_api::watch(
        c.state,
        &c.tables.fs_watches,
        c.connection,
        parse(c.params)?
    )
    .await),
    method!("fs/unwatch", |c| fs_api::unwatch(
        &c.tables.fs_watches,
        c.connection,
        parse(c.params)?
    )),
];

fn method_entry(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// The names of every method served (`initialize` first), for the docs and the schema
/// check.
pub fn method_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("initialize").chain(METHODS.iter().map(|m| m.name))
}
