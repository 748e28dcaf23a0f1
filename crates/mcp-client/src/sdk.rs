//! The only module that touches the MCP SDK (`rmcp`): connecting over stdio or streamable
//! HTTP, listing tools, calling one, and closing. Callers put the deadlines around these
//! futures; dropping a pending [`SdkConnection::call_tool`] future makes the SDK send
//! `notifications/cancelled` for it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationCapability, Implementation, JsonObject, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, RunningService,
};
use rmcp::transport::auth::{AuthClient, WWWAuthenticateParams};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, serve_client};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::elicitation::{Callers, ElicitationAction};
use crate::manager::ToolHints;
use crate::oauth::FileCredentialStore;
use crate::progress::ProgressRoutes;

/// A tool as the server listed it.
#[derive(Debug, Clone)]
pub(crate) struct RawTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub hints: ToolHints,
}

/// One initialized MCP session.
pub(crate) struct SdkConnection {
    service: RunningService<RoleClient, Handler>,
    /// The threads with a call in progress here, to whom elicitations go.
    pub callers: Arc<Callers>,
    /// The calls in progress here, to which progress notifications go.
    pub progress: Arc<ProgressRoutes>,
    /// Where the session's OAuth tokens come from, when they come from a login.
    oauth: Option<FileCredentialStore>,
    /// The server's URL (HTTP only), against which challenges are read.
    url: Option<reqwest::Url>,
}

/// Our side of a session: who we are, and where the server's requests to us go.
#[derive(Clone)]
pub(crate) struct Handler {
    callers: Arc<Callers>,
    progress: Arc<ProgressRoutes>,
}

impl Handler {
    fn new() -> Self {
        Self {
            callers: Arc::new(Callers::default()),
            progress: Arc::new(ProgressRoutes::default()),
        }
    }
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        client_config()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let params = serde_json::to_value(&request)
            .map_err(|err| rmcp::ErrorData::internal_error(err.to_string(), None))?;
        let answer = self.callers.elicit(params).await;
        let action = match answer.action {
            ElicitationAction::Accept => "accept",
            ElicitationAction::Decline => "decline",
            ElicitationAction::Cancel => "cancel",
        };
        // `ElicitResult` is non-exhaustive: built from its wire form.
        let mut result = serde_json::json!({ "action": action });
        if let (ElicitationAction::Accept, Some(content)) = (answer.action, answer.content) {
            result["content"] = content;
        }
        serde_json::from_value(result)
            .map_err(|err| rmcp::ErrorData::internal_error(err.to_string(), None))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress
            .deliver(params.message.as_deref(), params.progress, params.total);
    }
}

fn client_config() -> ClientConfig {
    // Form-mode elicitation only: URL mode would need a browser hand-off no front end has.
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(ElicitationCapability::default());
    ClientConfig::new(
        capabilities,
        Implementation::new("interpreter-mcp-client", env!("CARGO_PKG_VERSION")),
    )
}

/// Spawns `command` with exactly `env` (nothing inherited), logs its stderr, and runs
/// the `initialize` handshake over its stdin/stdout.
pub(crate) async fn connect_stdio(
    server_name: &str,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<SdkConnection, String> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear().envs(env).kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    // Its own process group: a Ctrl-C meant for us does not reach the server directly.
    #[cfg(unix)]
    cmd.process_group(0);
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("failed to spawn `{command}`: {err}"))?;
    if let Some(stderr) = stderr {
        let server_name = server_name.to_string();
        // Ends at EOF, i.e. when the child exits or is killed.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %server_name, "MCP server stderr: {line}");
            }
        });
    }
    let handler = Handler::new();
    let callers = handler.callers.clone();
    let progress = handler.progress.clone();
    let service = serve_client(handler, transport)
        .await
        .map_err(|err| format!("handshake failed: {err}"))?;
    Ok(SdkConnection {
        service,
        callers,
        progress,
        oauth: None,
        url: None,
    })
}

/// Both eras over HTTP: the SDK probes with `server/discover` (2026-07-28) and falls
/// back to the `initialize` handshake when the server is older.
fn http_lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_06_18),
    }
}

/// The SDK's HTTP client brings no TLS crypto provider of its own.
pub(crate) fn install_crypto_provider() {
    // An error only means one is installed already, which is just as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The `WWW-Authenticate` challenge an unauthenticated `initialize` to `url` gets, if
/// the server demands authorization. A single hand-made POST rather than the SDK's
/// transport: the transport treats the expected 401 as a fatal worker error and logs it
/// as one, which would greet every `mcp login` with an alarming line.
pub(crate) async fn auth_challenge(url: &str) -> Option<String> {
    install_crypto_provider();
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": ProtocolVersion::V_2025_06_18,
            "capabilities": {},
            "clientInfo": {"name": "interpreter-mcp-client", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .ok()?;
    let response = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response
        .headers()
        .get("www-authenticate")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// Starts a session over transports made by `make`: the SDK's auto lifecycle, and the
/// plain `initialize` handshake when the server answered the discovery probe but speaks
/// no modern version (the SDK's fallback covers only servers that reject the probe).
async fn serve_http<C>(
    handler: Handler,
    make: impl Fn() -> StreamableHttpClientTransport<C>,
) -> Result<RunningService<RoleClient, Handler>, ClientInitializeError>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient + Send + Sync + 'static,
{
    match handler
        .clone()
        .serve_with_lifecycle(make(), http_lifecycle())
        .await
    {
        Err(ClientInitializeError::NoCompatibleProtocolVersion { .. }) => {
            handler
                .serve_with_lifecycle(make(), ClientLifecycleMode::Initialize)
                .await
        }
        other => other,
    }
}

/// Connects to a streamable HTTP server (`server_name` in the configuration);
/// `bearer_token` becomes `Authorization: Bearer`; with `oauth`, tokens come from the
/// store (and are refreshed) instead.
pub(crate) async fn connect_http(
    server_name: &str,
    url: &str,
    bearer_token: Option<String>,
    headers: &[(String, String)],
    oauth: Option<FileCredentialStore>,
) -> Result<SdkConnection, String> {
    install_crypto_provider();
    let mut header_map = HashMap::new();
    for (name, value) in headers {
        let parsed = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        );
        match parsed {
            (Ok(name), Ok(value)) => {
                header_map.insert(name, value);
            }
            _ => tracing::warn!("skipping invalid HTTP header `{name}` for MCP server {url}"),
        }
    }
    // A session the server forgot (HTTP 404) is re-initialized once and the request
    // retried, by the SDK; this is its default, spelled out because we rely on it.
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(header_map)
        .reinit_on_expired_session(true);
    if let Some(token) = bearer_token {
        config = config.auth_header(token);
    }
    let manager = match oauth.clone() {
        Some(store) => crate::oauth::runtime_manager(store).await?,
        None => None,
    };
    let handler = Handler::new();
    let callers = handler.callers.clone();
    let progress = handler.progress.clone();
    let service = match manager {
        Some(manager) => {
            let client = AuthClient::new(reqwest::Client::default(), manager);
            serve_http(handler, || {
                StreamableHttpClientTransport::with_client(client.clone(), config.clone())
            })
            .await
        }
        None => {
            serve_http(handler, || {
                StreamableHttpClientTransport::from_config(config.clone())
            })
            .await
        }
    }
    .map_err(|err| {
        if err.auth_challenge().is_some() {
            format!(
                "the server requires authorization ({err}); run `interpreter mcp login {server_name}`"
            )
        } else {
            format!("handshake failed: {err}")
        }
    })?;
    Ok(SdkConnection {
        service,
        callers,
        progress,
        oauth,
        url: reqwest::Url::parse(url).ok(),
    })
}

impl SdkConnection {
    /// `error` of a `what` request, in words, and what to do about it when the server
    /// refused it for authorization. A `403 insufficient_scope` is recorded for the next
    /// `interpreter mcp login` (see [`crate::oauth`]): re-authorizing needs a browser,
    /// which a turn in progress cannot open.
    async fn failure(&self, what: &str, error: rmcp::ServiceError) -> String {
        let (Some(challenge), Some(url)) = (error.auth_challenge(), &self.url) else {
            return format!("{what} failed: {error}");
        };
        let params = WWWAuthenticateParams::parse(challenge, url);
        let login = match &self.oauth {
            Some(store) => format!("run `interpreter mcp login {}`", store.name()),
            None => "check the server's token".to_string(),
        };
        if !params.is_insufficient_scope() {
            return format!(
                "{what} failed: the server requires authorization again ({error}); {login}"
            );
        }
        let scopes: Vec<String> = params
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if let Some(store) = &self.oauth
            && !scopes.is_empty()
            && let Err(err) = store.set_step_up(scopes.clone()).await
        {
            tracing::warn!("could not record the scopes MCP server {url} asked for: {err}");
        }
        let needed = if scopes.is_empty() {
            String::new()
        } else {
            format!(" (it asks for `{}`)", scopes.join(" "))
        };
        match &self.oauth {
            Some(_) => format!(
                "{what} failed: the server refused it for lack of OAuth scope{needed}; \
                 {login} to grant it"
            ),
            None => format!(
                "{what} failed: the server refused it for lack of OAuth scope{needed}; \
                 the token sent lacks it"
            ),
        }
    }

    /// Whether the session ended: the server exited, the connection broke, or it was
    /// closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Every tool the server lists (all pages).
    pub(crate) async fn list_tools(&self) -> Result<Vec<RawTool>, String> {
        let tools = self.service.peer().list_all_tools().await;
        let tools = match tools {
            Ok(tools) => tools,
            Err(err) => return Err(self.failure("tools/list", err).await),
        };
        Ok(tools
            .into_iter()
            .map(|tool| RawTool {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object(tool.input_schema.as_ref().clone()),
                hints: ToolHints {
                    read_only: tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                    destructive: tool.annotations.as_ref().and_then(|a| a.destructive_hint),
                },
            })
            .collect())
    }

    /// Whether the server declared the `resources` capability.
    pub(crate) fn has_resources(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.resources.is_some())
    }

    /// One page of `resources/list`, as JSON (`resources`, `nextCursor`).
    pub(crate) async fn list_resources(
        &self,
        cursor: Option<String>,
    ) -> Result<serde_json::Value, String> {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let result = match self.service.peer().list_resources(params).await {
            Ok(result) => result,
            Err(err) => return Err(self.failure("resources/list", err).await),
        };
        serde_json::to_value(&result).map_err(|err| format!("unreadable resource list: {err}"))
    }

    /// `resources/read`, as JSON (`contents`: text or base64 `blob` parts).
    pub(crate) async fn read_resource(&self, uri: &str) -> Result<serde_json::Value, String> {
        let result = match self
            .service
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
        {
            Ok(result) => result,
            Err(err) => return Err(self.failure("resources/read", err).await),
        };
        serde_json::to_value(&result).map_err(|err| format!("unreadable resource: {err}"))
    }

    /// One `tools/call`; the `CallToolResult` as JSON (an `isError` result is a success
    /// here: the model should see it).
    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<serde_json::Value, String> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(arguments) = arguments {
            let arguments: JsonObject = arguments;
            params = params.with_arguments(arguments);
        }
        // The call is part of the turn's trace (SEP-414: `_meta.traceparent`, on every
        // transport); the current span is the call's own.
        if let Some(trace) = interpreter_telemetry::W3cTraceContext::current() {
            let mut meta = rmcp::model::MetaObject::new();
            if let Some(parent) = trace.traceparent {
                meta.set_traceparent(parent);
            }
            if let Some(state) = trace.tracestate {
                meta.set_tracestate(state);
            }
            params.meta = Some(meta.into());
        }
        // The service-level call drives 2026-07-28 `input_required` rounds through our
        // handler (elicitations), which the peer-level one would reject.
        let result = match self.service.call_tool(params).await {
            Ok(result) => result,
            Err(err) if err.auth_challenge().is_some() => {
                return Err(self.failure("tools/call", err).await);
            }
            Err(err) => return Err(err.to_string()),
        };
        serde_json::to_value(&result).map_err(|err| format!("unreadable tool result: {err}"))
    }

    /// Closes the session (for stdio: closes stdin, then SIGTERM, then kill). Past
    /// `deadline` the session is dropped, which kills a child process.
    pub(crate) async fn shutdown(mut self, deadline: Duration) {
        match self.service.close_with_timeout(deadline).await {
            Ok(Some(_)) => {}
            Ok(None) => tracing::warn!("MCP session did not close within {deadline:?}"),
            // Cancelled: the runtime is going down with the process, which ends the
            // session anyway; nothing failed.
            Err(err) if err.is_cancelled() => {
                tracing::debug!("MCP session task cancelled while closing");
            }
            Err(err) => tracing::warn!("MCP session task failed while closing: {err}"),
        }
    }
}
