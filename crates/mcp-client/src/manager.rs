//! One thread's view of the MCP servers it uses: which pool instances it holds, the
//! model-visible tool table built from the ones that are ready, and tool calls. The
//! processes themselves live in the process-wide [`McpPool`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{McpApprovalMode, McpServerConfig, McpTransport, validate_server_name};
use crate::elicitation::ElicitationSink;
use crate::env::child_env;
use crate::error::McpClientError;
use crate::naming::qualify_tool_names;
use crate::nesting::self_recursion_warning;
use crate::oauth::FileCredentialStore;
use crate::pool::{LaunchSpec, Lease, Live, McpPool, StartFailure, StartRequest, State};
use crate::progress::ProgressSender;

/// One tool as the model sees it, and where calls to it go.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    /// `mcp__<server>__<tool>`, sanitized to `[A-Za-z0-9_]`, at most 64 bytes, unique.
    pub qualified_name: String,
    /// Raw server name (the `[mcp_servers.NAME]` key).
    pub server: String,
    /// Raw tool name, as the server listed it.
    pub tool: String,
    pub description: String,
    /// The tool's JSON Schema for its arguments.
    pub input_schema: serde_json::Value,
    /// The server's annotations that approvals use.
    pub hints: ToolHints,
    /// This thread's approval mode for the tool (`tools.TOOL.approval`, else the server's
    /// `approval`, else `auto`).
    pub approval: McpApprovalMode,
}

/// Annotations of a tool (hints: the server is not trusted to tell the truth, so they
/// only ever relax asking for tools the user configured as `auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not change its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may destroy data.
    pub destructive: Option<bool>,
}

/// Most tools one server offers the model. Every tool's schema is in every request, so
/// a server listing thousands (20,000 made a 13 MB first request) would crowd out the
/// conversation or be refused by the provider; past this the rest are left out.
pub const MAX_TOOLS_PER_SERVER: usize = 200;

/// Most bytes of tool definitions (name, description and JSON Schema) all MCP servers
/// together add to a request. A tool that does not fit is left out; smaller ones after
/// it still get in, so one huge schema does not hide every other server's tools.
pub const MAX_TOOL_SCHEMA_BYTES: usize = 512 * 1024;

/// Tools of one server left out of the model's list by the caps above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsLeftOut {
    pub server: String,
    /// Tools the server offers this thread (after its filters).
    pub offered: usize,
    pub left_out: usize,
    /// Which cap cut them: `true` for the per-server count, `false` for schema bytes
    /// (the count cut first when both did).
    pub over_count: bool,
}

impl std::fmt::Display for ToolsLeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.over_count {
            format!("over the limit of {MAX_TOOLS_PER_SERVER} tools per server")
        } else {
            format!(
                "over the {} KiB limit on MCP tool definitions per request",
                MAX_TOOL_SCHEMA_BYTES / 1024
            )
        };
        write!(
            f,
            "MCP server `{}` offers {} tools; {} of them were left out ({why})",
            self.server, self.offered, self.left_out
        )
    }
}

/// The tools offered to the model, and what the caps left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolTable {
    pub tools: Vec<McpToolInfo>,
    /// One entry per server that had tools left out, in server order.
    pub left_out: Vec<ToolsLeftOut>,
}

/// What happened while starting the servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartupReport {
    /// Servers that started, by name (sorted).
    pub ready: Vec<String>,
    /// One line per server left out (failed to start, skipped), for the user.
    pub warnings: Vec<String>,
}

/// Progress of one server's start, as seen by one thread.
#[derive(Debug, Clone, PartialEq)]
pub enum StartupStatus {
    Starting,
    /// Ready, offering `tools` tools to this thread (after its filters).
    Ready {
        tools: usize,
    },
    Failed {
        error: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StartupUpdate {
    pub server: String,
    pub status: StartupStatus,
}

struct ThreadServer {
    config: McpServerConfig,
    lease: Lease,
    start: StartRequest,
}

/// The MCP servers of one thread: leases on pool instances, plus this thread's filters
/// and timeouts.
pub struct McpConnectionManager {
    servers: BTreeMap<String, ThreadServer>,
    /// Set by [`Self::start`] and [`Self::start_in`], which use a pool of their own and
    /// stop it on [`Self::shutdown`].
    owned_pool: Option<McpPool>,
    /// Becomes `true` when a [`Self::settle`] call finished.
    settled: tokio::sync::watch::Sender<bool>,
    /// Where elicitations arriving during this thread's calls go; none: declined.
    elicitation: Option<Arc<dyn ElicitationSink>>,
}

impl std::fmt::Debug for McpConnectionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnectionManager")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpConnectionManager {
    /// Starts every enabled server concurrently, on a pool of its own, and waits until
    /// each is ready or failed (within its `startup_timeout_sec`). A server that fails is
    /// left out with a warning, unless it is `required`, which makes this fail naming it.
    /// Entries that would start `interpreter mcp-server` again are always skipped.
    /// `env` is the injected environment (never read from the process); stdio servers
    /// without a `cwd` run in the process's working directory.
    pub async fn start(
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
    ) -> Result<(Self, StartupReport), McpClientError> {
        Self::start_in(servers, env, self_exe, None).await
    }

    /// [`Self::start`], with `default_cwd` (the session's working directory) as the
    /// working directory of stdio servers without `cwd`, and the base of relative ones.
    pub async fn start_in(
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
        default_cwd: Option<&Path>,
    ) -> Result<(Self, StartupReport), McpClientError> {
        let pool = McpPool::default();
        let connected = Self::connect(&pool, servers, env, self_exe, default_cwd, None).await;
        let (mut manager, mut report) = match connected {
            Ok(pair) => pair,
            Err(err) => {
                pool.shutdown().await;
                return Err(err);
            }
        };
        manager.owned_pool = Some(pool);
        let settled = manager.settle(&|_| {}).await;
        report.ready = settled.ready;
        report.warnings.extend(settled.warnings);
        Ok((manager, report))
    }

    /// Takes this thread's instances from `pool` and starts the ones not running yet, in
    /// the background and in parallel. Waits only for `required` servers: when one of
    /// them fails this returns [`McpClientError::RequiredServersFailed`]. The report's
    /// `ready` lists the servers ready on return; `warnings` the entries skipped as
    /// invalid or self-recursive. The others settle later: see [`Self::settle`].
    /// `home` is the agent home, where `interpreter mcp login` keeps OAuth tokens.
    pub async fn connect(
        pool: &McpPool,
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
        default_cwd: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<(Self, StartupReport), McpClientError> {
        let mut report = StartupReport::default();
        let mut required_failures = Vec::new();
        let mut held = BTreeMap::new();
        for (name, config) in servers.iter().filter(|(_, c)| c.enabled) {
            let spec = self_recursion_warning(name, config, self_exe)
                .map_or_else(|| launch_spec(name, config, env, default_cwd, home), Err);
            match spec {
                Ok(spec) => {
                    let lease = pool.lease(spec, name);
                    let start = StartRequest {
                        timeout: config.startup_timeout(),
                        name: name.clone(),
                    };
                    lease.entry.kick(&start);
                    held.insert(
                        name.clone(),
                        ThreadServer {
                            config: config.clone(),
                            lease,
                            start,
                        },
                    );
                }
                Err(warning) => {
                    tracing::warn!("{warning}");
                    if config.required {
                        required_failures.push(format!("{name}: {warning}"));
                    }
                    report.warnings.push(warning);
                }
            }
        }
        let manager = Self {
            servers: held,
            owned_pool: None,
            settled: tokio::sync::watch::Sender::new(false),
            elicitation: None,
        };
        let this = &manager;
        let required = manager
            .servers
            .iter()
            .filter(|(_, s)| s.config.required)
            .map(|(name, server)| async move { (name, this.await_server(name, server).await) });
        for (name, outcome) in futures::future::join_all(required).await {
            if let Err(error) = outcome {
                required_failures.push(format!("{name}: {error}"));
            }
        }
        if !required_failures.is_empty() {
            return Err(McpClientError::RequiredServersFailed {
                failures: required_failures,
            });
        }
        report.ready = manager.ready_servers();
        Ok((manager, report))
    }

    /// Waits until every server of this thread is ready or has failed, each within its
    /// `startup_timeout_sec`, calling `on_update` with `Starting` for each server not
    /// ready yet and then its outcome. Returns the ready servers and one warning per
    /// failure. Afterwards [`Self::wait_settled`] returns at once.
    pub async fn settle(&self, on_update: &(dyn Fn(StartupUpdate) + Send + Sync)) -> StartupReport {
        let waits = self.servers.iter().map(|(name, server)| async move {
            let already_ready =
                matches!(server.lease.entry.snapshot(), State::Ready(ref live) if live.is_alive());
            if !already_ready {
                on_update(StartupUpdate {
                    server: name.clone(),
                    status: StartupStatus::Starting,
                });
            }
            let outcome = self.await_server(name, server).await;
            let status = match &outcome {
                Ok(live) => StartupStatus::Ready {
                    tools: live
                        .tools
                        .iter()
                        .filter(|t| server.config.allows_tool(&t.name))
                        .count(),
                },
                Err(error) => StartupStatus::Failed {
                    error: error.clone(),
                },
            };
            on_update(StartupUpdate {
                server: name.clone(),
                status,
            });
            (name, outcome)
        });
        let mut report = StartupReport::default();
        for (name, outcome) in futures::future::join_all(waits).await {
            match outcome {
                Ok(_) => report.ready.push(name.clone()),
                Err(error) => report.warnings.push(error),
            }
        }
        self.settled.send_replace(true);
        report
    }

    /// Returns once a [`Self::settle`] call has finished.
    pub async fn wait_settled(&self) {
        let mut rx = self.settled.subscribe();
        // The sender lives in `self`, so this cannot fail while we borrow it.
        let _ = rx.wait_for(|settled| *settled).await;
    }

    /// Elicitations a server sends while one of this thread's calls is in progress on
    /// it go to `sink` (see [`crate::ElicitationSink`] for the routing rule).
    pub fn set_elicitation_sink(&mut self, sink: Arc<dyn ElicitationSink>) {
        self.elicitation = Some(sink);
    }

    /// Starts, in the background, servers of this thread that failed (backoff over) or
    /// died, so that their tools come back for a later model request. Never waits.
    pub fn revive(&self) {
        for server in self.servers.values() {
            server.lease.entry.kick(&server.start);
        }
    }

    /// A live connection to `name`'s instance, starting (or joining the start of) it,
    /// within this thread's startup timeout. The error is the user-facing text.
    async fn await_server(&self, name: &str, server: &ThreadServer) -> Result<Arc<Live>, String> {
        let timeout = server.config.startup_timeout();
        match tokio::time::timeout(timeout, server.lease.entry.connection(&server.start)).await {
            Ok(Ok(live)) => Ok(live),
            Ok(Err(failure)) => Err(failure_text(name, &failure, timeout)),
            Err(_) => Err(failure_text(
                name,
                &StartFailure {
                    message: String::new(),
                    timed_out: true,
                    retry_in: None,
                },
                timeout,
            )),
        }
    }

    /// Names of this thread's servers that are ready now (sorted).
    fn ready_servers(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| ready(s).is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The tools of this thread's servers that are ready (or were, and died since), as their
    /// `enabled_tools`/`disabled_tools` filters allow, ordered by server then as listed.
    /// Names are stable as long as the set of ready servers and their tools is.
    pub fn tools(&self) -> Vec<McpToolInfo> {
        self.tool_table().tools
    }

    /// [`Self::tools`], and which servers' tools [`MAX_TOOLS_PER_SERVER`] and
    /// [`MAX_TOOL_SCHEMA_BYTES`] left out. Tools left out cannot be called either.
    pub fn tool_table(&self) -> ToolTable {
        let mut raw = Vec::new();
        let mut left_out: Vec<ToolsLeftOut> = Vec::new();
        let mut schema_bytes = 0usize;
        for (server, state) in &self.servers {
            // A server that died still has its tools listed: calling one restarts it.
            let State::Ready(live) = state.lease.entry.snapshot() else {
                continue;
            };
            let mut seen = HashSet::new();
            let mut offered = 0usize;
            let mut over_count = 0usize;
            let mut over_bytes = 0usize;
            for tool in &live.tools {
                if !state.config.allows_tool(&tool.name) {
                    continue;
                }
                if !seen.insert(tool.name.as_str()) {
                    tracing::warn!(
                        "MCP server `{server}` lists tool `{}` twice; keeping the first",
                        tool.name
                    );
                    continue;
                }
                offered += 1;
                if offered > MAX_TOOLS_PER_SERVER {
                    over_count += 1;
                    continue;
                }
                let size = definition_bytes(tool);
                if schema_bytes.saturating_add(size) > MAX_TOOL_SCHEMA_BYTES {
                    over_bytes += 1;
                    continue;
                }
                schema_bytes += size;
                raw.push((server.clone(), tool.clone()));
            }
            if over_count + over_bytes > 0 {
                left_out.push(ToolsLeftOut {
                    server: server.clone(),
                    offered,
                    left_out: over_count + over_bytes,
                    over_count: over_count > 0,
                });
            }
        }
        let pairs: Vec<(String, String)> = raw
            .iter()
            .map(|(server, tool)| (server.clone(), tool.name.clone()))
            .collect();
        let names = qualify_tool_names(&pairs);
        let tools = raw
            .into_iter()
            .zip(names)
            .map(|((server, tool), qualified_name)| McpToolInfo {
                approval: self
                    .servers
                    .get(&server)
                    .map(|s| s.config.approval_mode(&tool.name))
                    .unwrap_or_default(),
                qualified_name,
                server,
                tool: tool.name,
                description: tool.description,
                input_schema: tool.input_schema,
                hints: tool.hints,
            })
            .collect();
        ToolTable { tools, left_out }
    }

    /// Names of the servers that are ready now (sorted).
    pub fn servers(&self) -> Vec<String> {
        self.ready_servers()
    }

    /// Calls a tool by its qualified name. Ends at the server's `tool_timeout_sec` or when
    /// `cancel` fires, whichever comes first; either way the server is sent
    /// `notifications/cancelled`. An `isError` result is returned as `Ok`: it is the
    /// tool's answer. The value is the `CallToolResult` as JSON. A server that died is
    /// restarted first (within its startup timeout, once its backoff allows). The
    /// server's progress notifications go to `progress`, when given (see
    /// [`ProgressSender`] for which reach it).
    pub async fn call_tool(
        &self,
        qualified_name: &str,
        arguments: Option<serde_json::Value>,
        cancel: &CancellationToken,
        progress: Option<ProgressSender>,
    ) -> Result<serde_json::Value, McpClientError> {
        let info = self
            .tools()
            .into_iter()
            .find(|t| t.qualified_name == qualified_name)
            .ok_or_else(|| McpClientError::UnknownTool(qualified_name.to_string()))?;
        let server = self
            .servers
            .get(&info.server)
            .ok_or_else(|| McpClientError::UnknownTool(qualified_name.to_string()))?;
        let arguments = match arguments {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(map)) => Some(map),
            Some(other) => return Err(McpClientError::InvalidArguments(other.to_string())),
        };
        let call_error = |message: String| McpClientError::Call {
            server: info.server.clone(),
            tool: info.tool.clone(),
            message,
        };
        let live = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(McpClientError::Cancelled {
                server: info.server.clone(),
                tool: info.tool.clone(),
            }),
            live = self.await_server(&info.server, server) => live.map_err(call_error)?,
        };
        let timeout = server.config.tool_timeout();
        let caller = self
            .elicitation
            .as_ref()
            .map(|sink| live.conn.callers.enter(&info.server, sink.clone()));
        let _progress = live.conn.progress.enter(progress);
        // Time a question of this call waits for the user's answer does not count.
        let deadline = async {
            match &caller {
                Some(caller) => caller.deadline(timeout).await,
                None => tokio::time::sleep(timeout).await,
            }
        };
        // The request as a CLIENT span in the MCP semantic conventions; the request's
        // `_meta.traceparent` names it.
        let span = interpreter_telemetry::spans::start_internal(
            format!("tools/call {}", info.tool),
            true,
            vec![
                opentelemetry::KeyValue::new("mcp.method.name", "tools/call"),
                opentelemetry::KeyValue::new(
                    interpreter_telemetry::genai::GEN_AI_TOOL_NAME,
                    info.tool.clone(),
                ),
                opentelemetry::KeyValue::new("interpreter.mcp.server", info.server.clone()),
            ],
        );
        let call = {
            use opentelemetry::trace::FutureExt as _;
            live.conn
                .call_tool(&info.tool, arguments)
                .with_context(span.clone())
        };
        // Dropping the call future (on cancel or timeout) is what sends
        // `notifications/cancelled`: the SDK's request guard does it.
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(McpClientError::Cancelled {
                server: info.server.clone(),
                tool: info.tool.clone(),
            }),
            outcome = call => outcome.map_err(call_error),
            () = deadline => Err(McpClientError::Timeout {
                server: info.server.clone(),
                tool: info.tool.clone(),
                timeout,
            }),
        };
        let error = match &outcome {
            Ok(_) => None,
            Err(McpClientError::Cancelled { .. }) => Some("cancelled"),
            Err(McpClientError::Timeout { .. }) => Some("timeout"),
            Err(_) => Some("call_failed"),
        };
        interpreter_telemetry::spans::end_internal(&span, Vec::new(), error);
        outcome
    }

    /// This thread's ready servers that offer resources (sorted).
    pub fn resource_servers(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| ready(s).is_some_and(|live| live.conn.has_resources()))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `resources/list` of `server` (one page, from `cursor`), or of every resource server
    /// when `server` is `None` (first pages; a server that fails is left out with a log
    /// line). Each value is the server's `ListResourcesResult` as JSON, with its name.
    pub async fn list_resources(
        &self,
        server: Option<&str>,
        cursor: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<Vec<(String, serde_json::Value)>, McpClientError> {
        let names = match server {
            Some(name) => vec![self.resource_server(name)?.0.to_string()],
            None => self.resource_servers(),
        };
        let lists = names.iter().map(|name| {
            let cursor = cursor.clone();
            async move {
                let outcome = self
                    .with_server(name, "resources/list", cancel, |live| async move {
                        live.conn.list_resources(cursor).await
                    })
                    .await;
                (name.clone(), outcome)
            }
        });
        let mut out = Vec::new();
        for (name, outcome) in futures::future::join_all(lists).await {
            match outcome {
                Ok(value) => out.push((name, value)),
                Err(err) if server.is_some() => return Err(err),
                Err(err) => tracing::warn!("listing resources of `{name}` failed: {err}"),
            }
        }
        Ok(out)
    }

    /// `resources/read` of `uri` on `server`: the `ReadResourceResult` as JSON.
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, McpClientError> {
        let (name, _) = self.resource_server(server)?;
        let uri = uri.to_string();
        self.with_server(name, "resources/read", cancel, |live| async move {
            live.conn.read_resource(&uri).await
        })
        .await
    }

    fn resource_server(&self, name: &str) -> Result<(&str, &ThreadServer), McpClientError> {
        self.servers
            .get_key_value(name)
            .map(|(k, v)| (k.as_str(), v))
            .ok_or_else(|| McpClientError::UnknownServer(name.to_string()))
    }

    /// Runs `op` on a live connection of `name`, within its `tool_timeout_sec` and
    /// `cancel`; `what` names the operation in errors.
    async fn with_server<F, Fut>(
        &self,
        name: &str,
        what: &str,
        cancel: &CancellationToken,
        op: F,
    ) -> Result<serde_json::Value, McpClientError>
    where
        F: FnOnce(Arc<Live>) -> Fut,
        Fut: std::future::Future<Output = Result<serde_json::Value, String>>,
    {
        let (_, server) = self.resource_server(name)?;
        let failed = |message: String| McpClientError::Call {
            server: name.to_string(),
            tool: what.to_string(),
            message,
        };
        let timeout = server.config.tool_timeout();
        let work = async {
            let live = self.await_server(name, server).await.map_err(failed)?;
            op(live).await.map_err(failed)
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(McpClientError::Cancelled {
                server: name.to_string(),
                tool: what.to_string(),
            }),
            outcome = tokio::time::timeout(timeout, work) => outcome.unwrap_or_else(|_| {
                Err(McpClientError::Timeout {
                    server: name.to_string(),
                    tool: what.to_string(),
                    timeout,
                })
            }),
        }
    }

    /// Gives up this thread's servers. Instances shared with other threads keep running;
    /// unused ones stop after the pool's idle timeout (at once for a manager made by
    /// [`Self::start`], which owns its pool).
    pub async fn shutdown(self) {
        let Self {
            servers,
            owned_pool,
            ..
        } = self;
        drop(servers);
        if let Some(pool) = owned_pool {
            pool.shutdown().await;
        }
    }
}

/// Where a configured server is, as far as the pool knows, without starting it.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRuntimeStatus {
    /// `enabled = false` in the config.
    Disabled,
    /// No thread has started it (or it was stopped for idleness).
    NotStarted,
    Starting,
    Ready,
    /// The last start failed, the connection died, or the entry cannot be started at all
    /// (invalid entry, missing bearer token, self-recursion); `error` is the user-facing text.
    Failed {
        error: String,
    },
}

/// One tool as the server listed it (before any thread's filters).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// One configured server: its status and, when ready, the tools it listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInventory {
    pub name: String,
    pub status: ServerRuntimeStatus,
    /// The tools its `enabled_tools`/`disabled_tools` filters allow; empty unless ready.
    pub tools: Vec<ServerToolInfo>,
    /// How the agent authenticates to it.
    pub auth: ServerAuth,
    /// Scheme, host and port of a streamable HTTP server's URL (no credentials, path or
    /// query); `None` for stdio servers.
    pub http_origin: Option<String>,
}

/// How the agent authenticates to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAuth {
    /// A stdio server: no transport authentication.
    Unsupported,
    /// `bearer_token_env_var` is set.
    BearerToken,
    /// Tokens stored by `interpreter mcp login` are used.
    OAuth,
    /// An HTTP server with neither.
    NotLoggedIn,
}

impl McpPool {
    /// What the pool knows of each of `servers` (resolved as a thread with this config
    /// would resolve them), in name order. Never starts, joins or keeps alive anything:
    /// a server no thread uses is `NotStarted`.
    pub fn inventory(
        &self,
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
        default_cwd: Option<&Path>,
        home: Option<&Path>,
    ) -> Vec<ServerInventory> {
        servers
            .iter()
            .map(|(name, config)| {
                let url = match config.transport() {
                    Ok(McpTransport::StreamableHttp { url }) => Some(url),
                    _ => None,
                };
                let auth = match (&url, home) {
                    (None, _) => ServerAuth::Unsupported,
                    (Some(_), _) if config.bearer_token_env_var.is_some() => {
                        ServerAuth::BearerToken
                    }
                    (Some(url), Some(home)) if crate::oauth::has_credentials(home, name, url) => {
                        ServerAuth::OAuth
                    }
                    (Some(_), _) => ServerAuth::NotLoggedIn,
                };
                let http_origin = url
                    .as_deref()
                    .and_then(|url| reqwest::Url::parse(url).ok())
                    .map(|url| url.origin().ascii_serialization())
                    .filter(|origin| origin != "null");
                let mut tools = Vec::new();
                let status = if !config.enabled {
                    ServerRuntimeStatus::Disabled
                } else {
                    let spec = self_recursion_warning(name, config, self_exe)
                        .map_or_else(|| launch_spec(name, config, env, default_cwd, home), Err);
                    match spec {
                        Err(error) => ServerRuntimeStatus::Failed { error },
                        Ok(spec) => match self.peek(&spec).map(|entry| entry.snapshot()) {
                            None | Some(State::Idle) => ServerRuntimeStatus::NotStarted,
                            Some(State::Starting) => ServerRuntimeStatus::Starting,
                            Some(State::Ready(live)) if live.is_alive() => {
                                tools = live
                                    .tools
                                    .iter()
                                    .filter(|t| config.allows_tool(&t.name))
                                    .map(|t| ServerToolInfo {
                                        name: t.name.clone(),
                                        description: t.description.clone(),
                                        input_schema: t.input_schema.clone(),
                                    })
                                    .collect();
                                ServerRuntimeStatus::Ready
                            }
                            Some(State::Ready(_)) => ServerRuntimeStatus::Failed {
                                error: format!("MCP client for `{name}` failed: the server exited"),
                            },
                            Some(State::Failed { error, .. }) => ServerRuntimeStatus::Failed {
                                error: failure_text(name, &error, config.startup_timeout()),
                            },
                        },
                    }
                };
                ServerInventory {
                    name: name.clone(),
                    status,
                    tools,
                    auth,
                    http_origin,
                }
            })
            .collect()
    }
}

fn ready(server: &ThreadServer) -> Option<Arc<Live>> {
    match server.lease.entry.snapshot() {
        State::Ready(live) if live.is_alive() => Some(live),
        _ => None,
    }
}

/// The user-facing text of a failed start.
fn failure_text(name: &str, failure: &StartFailure, timeout: Duration) -> String {
    let retry = failure
        .retry_in
        .map(|wait| format!(" (next attempt in {:.0}s)", wait.as_secs_f64().ceil()))
        .unwrap_or_default();
    if failure.timed_out {
        format!(
            "MCP client for `{name}` timed out after {} seconds{retry}. Add or adjust \
             `startup_timeout_sec` in your config.toml:\n[mcp_servers.{name}]\n\
             startup_timeout_sec = XX",
            timeout.as_secs_f64()
        )
    } else {
        format!(
            "MCP client for `{name}` failed to start: {}{retry}",
            failure.message
        )
    }
}

/// Resolves an entry into what the pool starts: checks it, and fills in the
/// environment, working directory and headers. The error is the user-facing warning.
fn launch_spec(
    name: &str,
    config: &McpServerConfig,
    env: &HashMap<String, String>,
    default_cwd: Option<&Path>,
    home: Option<&Path>,
) -> Result<LaunchSpec, String> {
    let failed = |error: String| format!("MCP client for `{name}` failed to start: {error}");
    validate_server_name(name).map_err(failed)?;
    match config.transport().map_err(failed)? {
        McpTransport::Stdio { command, args } => Ok(LaunchSpec::Stdio {
            command,
            args,
            env: child_env(config, env),
            cwd: stdio_cwd(config, default_cwd),
        }),
        McpTransport::StreamableHttp { url } => {
            let bearer = bearer_token(name, config, env).map_err(failed)?;
            // A configured bearer token wins over stored OAuth tokens.
            let oauth = match (&bearer, home) {
                (None, Some(home)) if crate::oauth::has_credentials(home, name, &url) => {
                    Some(FileCredentialStore::new(home, name, &url))
                }
                _ => None,
            };
            Ok(LaunchSpec::Http {
                headers: http_headers(config, env),
                url,
                bearer,
                oauth,
            })
        }
    }
}

fn stdio_cwd(config: &McpServerConfig, default_cwd: Option<&Path>) -> Option<PathBuf> {
    match (&config.cwd, default_cwd) {
        (Some(cwd), Some(base)) => Some(base.join(cwd)),
        (Some(cwd), None) => Some(cwd.clone()),
        (None, base) => base.map(Path::to_path_buf),
    }
}

fn bearer_token(
    name: &str,
    config: &McpServerConfig,
    env: &HashMap<String, String>,
) -> Result<Option<String>, String> {
    let Some(var) = &config.bearer_token_env_var else {
        return Ok(None);
    };
    match env.get(var) {
        None => Err(format!(
            "Environment variable {var} for MCP server '{name}' is not set"
        )),
        Some(value) if value.trim().is_empty() => Err(format!(
            "Environment variable {var} for MCP server '{name}' is empty"
        )),
        Some(value) => Ok(Some(value.trim().to_string())),
    }
}

/// Static `http_headers`, then `env_http_headers` whose variable is set and non-empty.
fn http_headers(config: &McpServerConfig, env: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = config
        .http_headers
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (header, var) in config.env_http_headers.iter().flatten() {
        match env.get(var) {
            Some(value) if !value.trim().is_empty() => {
                headers.push((header.clone(), value.clone()));
            }
            _ => tracing::debug!("header `{header}` skipped: `{var}` is unset or empty"),
        }
    }
    headers
}

/// About what a tool adds to a request: its name, description and schema as JSON.
fn definition_bytes(tool: &crate::sdk::RawTool) -> usize {
    let schema = serde_json::to_string(&tool.input_schema).map_or(0, |text| text.len());
    tool.name.len() + tool.description.len() + schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bearer_token_comes_from_the_injected_env() {
        let config = McpServerConfig {
            url: Some("http://127.0.0.1:1/".into()),
            bearer_token_env_var: Some("TOKEN".into()),
            ..Default::default()
        };
        assert_eq!(
            bearer_token("s", &config, &env(&[("TOKEN", "abc")])),
            Ok(Some("abc".to_string()))
        );
        assert!(
            bearer_token("s", &config, &env(&[]))
                .is_err_and(|e| e.contains("TOKEN") && e.contains("not set"))
        );
        assert!(
            bearer_token("s", &config, &env(&[("TOKEN", " ")])).is_err_and(|e| e.contains("empty"))
        );
    }

    #[test]
    fn env_headers_skip_missing_values() {
        let config = McpServerConfig {
            http_headers: Some([("X-Static".to_string(), "1".to_string())].into()),
            env_http_headers: Some(
                [
                    ("X-Set".to_string(), "SET".to_string()),
                    ("X-Unset".to_string(), "UNSET".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        assert_eq!(
            http_headers(&config, &env(&[("SET", "v")])),
            vec![
                ("X-Static".to_string(), "1".to_string()),
                ("X-Set".to_string(), "v".to_string())
            ]
        );
    }

    #[test]
    fn relative_cwd_is_resolved_against_the_session_cwd() {
        let config = McpServerConfig {
            cwd: Some("sub".into()),
            ..Default::default()
        };
        assert_eq!(
            stdio_cwd(&config, Some(Path::new("/work"))),
            Some(PathBuf::from("/work/sub"))
        );
        assert_eq!(
            stdio_cwd(&McpServerConfig::default(), Some(Path::new("/work"))),
            Some(PathBuf::from("/work"))
        );
        assert_eq!(stdio_cwd(&McpServerConfig::default(), None), None);
    }
}
