//! `interpreter mcp-server`: the agent as MCP tools `codex`, `codex-reply`, `codex-status`
//! and `codex-wait`, over stdio or streamable HTTP, for clients of both MCP eras.
//!
//! # Design
//!
//! The protocol is rmcp's (pinned exactly in the workspace): its runtime serves the
//! legacy era (`initialize`, sessions, server→client `elicitation/create`) and the
//! 2026-07-28 era (`server/discover`, per-request `_meta`, caching hints, MRTR) from one
//! [`rmcp::ServerHandler`], over its stdio transport or its streamable HTTP service. We
//! own what is the agent's:
//!
//! * [`handler`]: the tools, and how a call becomes a turn;
//! * [`turns`]: turns driven by their own task, so they outlive the request that started
//!   them (background runs, MRTR retries, client timeouts), one turn slot per thread;
//! * [`follow`]: a call following a turn (events, progress heartbeats, approvals);
//! * [`approval`] and [`mrtr`]: approvals as `elicitation/create` (legacy) or as
//!   `InputRequiredResult` with a sealed `requestState` (2026-07-28);
//! * [`tasks`]: the 2026-07-28 Tasks extension, backed by the thread store;
//! * [`http`]: the listener, its bearer token and Origin/Host checks;
//! * [`fleet`]: requests about a thread another replica runs, forwarded to it, signed
//!   with the fleet's replica key ([`replica_auth`]);
//! * [`app`]: the app-server's v2 methods on the same connection, as custom requests;
//! * [`tools`], [`result`]: tool definitions, arguments and results. The nesting
//!   marker sessions carry is the MCP client's (`interpreter_mcp_client::nesting`).
//!
//! Behaviour that follows rmcp rather than our earlier hand-written loop: a line that is
//! not JSON at all is ignored (as the official SDKs do: there is no id to answer), a line
//! over 16 MiB is dropped, and well-formed JSON that is not a JSON-RPC message gets
//! `-32600`.

mod app;
mod approval;
mod fleet;
mod follow;
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod http;
mod http_filters;
mod keyring;
mod mrtr;
mod replica_auth;
mod result;
mod stdio;
mod tasks;
mod tools;
mod turns;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::ThreadManager;
use interpreter_core::config::{
    CallerLimits, Config, ConfigError, ConfigInputs, ForwardAllow, McpServerSettings,
    SandboxCeiling, load_config,
};
use interpreter_core::store::StoreLocation;
use interpreter_protocol::SandboxPolicy;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use crate::handler::AgentServer;
pub use crate::http::HttpListen;
use crate::http::{HttpAuth, HttpError};
use crate::mrtr::{MrtrError, RequestStates};
use crate::replica_auth::ReplicaKeyError;
pub use crate::replica_auth::{ReplicaKeys, SIGNATURE_HEADER, SignedRequest};
use crate::turns::Registry;

/// The fleet key file in the home when `mcp_server.fleet_key_file` names none.
pub const DEFAULT_FLEET_KEY_FILE: &str = "mcp-server-fleet.keys";

/// How long running turns get to record their interruption when the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Where the server listens.
#[derive(Debug, Clone)]
pub enum Listen {
    Stdio,
    Http {
        listen: HttpListen,
        /// `None` = no token (`--no-auth`, loopback only).
        token_file: Option<PathBuf>,
        allowed_origins: Vec<String>,
        /// `Host` names accepted besides this machine's own addresses (a load
        /// balancer's, a fleet peer's).
        allowed_hosts: Vec<String>,
        /// Where other replicas sharing the thread store forward requests for threads
        /// this one runs. `None`: the listen address, unless it is a wildcard.
        internal_url: Option<String>,
    },
}

/// What the CLI passes to [`run`].
#[derive(Debug, Clone)]
pub struct McpServerOptions {
    /// Server-level config inputs (`-c`, `--strict-config`, profile, env, home, cwd),
    /// applied to every tool session before the call's own overrides.
    pub config_inputs: ConfigInputs,
    pub listen: Listen,
}

#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    #[error("error loading config: {0}")]
    Config(#[from] ConfigError),
    #[error("configuration loader stopped unexpectedly: {0}")]
    Join(String),
    #[error(transparent)]
    RequestState(#[from] MrtrError),
    #[error(transparent)]
    ReplicaKey(#[from] ReplicaKeyError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("MCP connection failed: {0}")]
    Connection(String),
}

/// Serve until the client goes away (stdio: stdin closes) or `stop` fires (a signal).
pub async fn run(opts: McpServerOptions, stop: CancellationToken) -> Result<(), McpServerError> {
    // A config that does not load (no model yet, an unknown key under --strict-config)
    // must not stop the server before `initialize`: an MCP host would only show
    // "connection closed". Say it on stderr; every tool call then answers with the error.
    let load = |inputs: ConfigInputs| async move {
        tokio::task::spawn_blocking(move || load_config(inputs))
            .await
            .map_err(|e| McpServerError::Join(e.to_string()))
    };
    let own = match load(opts.config_inputs.clone()).await? {
        Ok(config) => Some(config),
        Err(e) => {
            eprintln!(
                "warning: the configuration does not load yet ({e}); every tool call will report it until it is fixed (e.g. `interpreter mcp-server -m MODEL`)"
            );
            // The server's own settings need no model: calls may name one.
            let mut inputs = opts.config_inputs.clone();
            inputs.overrides.model_not_needed = true;
            load(inputs).await?.ok()
        }
    };
    let no_auth = matches!(
        opts.listen,
        Listen::Http {
            token_file: None,
            ..
        }
    );
    let limits = caller_limits(own.as_ref(), no_auth);
    if let (Some(config), Some(ceiling)) = (&own, &limits.sandbox) {
        if let Some(why) = ceiling.exceeded_by(&config.sandbox_policy) {
            eprintln!(
                "warning: the server's own {why}, which {} sets: every call will be refused \
                 until one of them changes",
                ceiling.source()
            );
        } else {
            eprintln!(
                "calls may run at most `{}` ({})",
                ceiling.describe(),
                ceiling.source()
            );
        }
    }
    let (home, settings, thread_store) = match own {
        Some(config) => (config.home, config.mcp_server, Some(config.thread_store)),
        None => (
            opts.config_inputs.home.clone(),
            McpServerSettings::default(),
            None,
        ),
    };
    let mut inputs = opts.config_inputs;
    inputs.caller_limits = Some(limits);
    let key_file = settings
        .request_state_key_file
        .as_ref()
        .map(|path| home.join(path));
    let thread_manager = Arc::new(ThreadManager::new());
    let registry = Arc::new(Registry::new(thread_manager.clone(), inputs));
    let states = Arc::new(match &key_file {
        Some(path) => {
            let states = RequestStates::from_key_file(path)?;
            eprintln!("request-state key file: {}", path.display());
            states
        }
        None => RequestStates::new()?,
    });
    let served = match opts.listen {
        Listen::Stdio => Box::pin(serve_stdio(registry.clone(), states, stop)).await,
        Listen::Http {
            listen,
            token_file,
            allowed_origins,
            allowed_hosts,
            internal_url,
        } => {
            if let Some(location) = &thread_store {
                eprintln!("thread store: {location}");
                // An address for other replicas means a fleet, and a fleet shares one
                // database; on a local store the others never see this one's threads.
                if internal_url.is_some() && matches!(location, StoreLocation::Local { .. }) {
                    eprintln!(
                        "warning: --internal-url is set but the thread store is this machine's \
                         home: other replicas cannot see its threads; set thread_store = \
                         \"postgres://…\" at the top of config.toml"
                    );
                }
            }
            // A fleet replica signs what it forwards and checks what is forwarded to it
            // with the fleet's key: on a shared store, or wherever the key is named.
            let shared_store = thread_store
                .as_ref()
                .is_some_and(|location| !matches!(location, StoreLocation::Local { .. }));
            let replica_key_file = match &settings.fleet_key_file {
                Some(path) => Some(home.join(path)),
                None if shared_store => Some(home.join(DEFAULT_FLEET_KEY_FILE)),
                None => None,
            };
            let replica_keys = match replica_key_file {
                Some(path) => {
                    let keys = Arc::new(ReplicaKeys::from_key_file(&path)?);
                    eprintln!("fleet key file: {}", path.display());
                    Some(keys)
                }
                None => None,
            };
            let auth = match token_file {
                Some(path) => {
                    let token = http::load_or_create_token(&path)?;
                    eprintln!("bearer token file: {}", path.display());
                    HttpAuth::Token(token)
                }
                None => HttpAuth::None,
            };
            let peers_keys = replica_keys.clone();
            let forward_allow = settings.fleet_forward_allow.clone();
            let peers_registry = registry.clone();
            http::serve(
                http::HttpServe {
                    listen,
                    auth,
                    allowed_origins,
                    allowed_hosts,
                    internal_url,
                    replica_keys,
                },
                registry.clone(),
                states,
                stop,
                |url: &str, advertised: Option<&str>| {
                    // Stores open at the first call, after this.
                    if let Some(advertised) = advertised {
                        thread_manager.advertise_internal_url(advertised.to_string());
                    }
                    if let Some(keys) = peers_keys {
                        let own = advertised.and_then(|url| reqwest::Url::parse(url).ok());
                        let own_host = own
                            .as_ref()
                            .and_then(|url| Some((url.host_str()?, url.port_or_known_default()?)));
                        let allow = ForwardAllow::resolve(forward_allow.as_deref(), own_host);
                        eprintln!("fleet forwards: {}", allow.describe());
                        let _ = peers_registry.peers.set(fleet::Peers { keys, allow });
                    }
                    eprintln!("listening on {url}");
                },
            )
            .await
            .map_err(McpServerError::from)
        }
    };
    // However serving ended: interrupt every running turn and give the engine a bounded
    // moment to record it (and kill its commands) before the process exits.
    registry.shutdown.cancel();
    registry.thread_manager.shutdown_all(SHUTDOWN_GRACE).await;
    served
}

/// What this server's callers may set, from its operator's own configuration (`None`:
/// it did not load, so the strictest): `[mcp_server] max_sandbox` and
/// `allow_caller_programs`, and on a `--no-auth` listener (which any local process may
/// call) no sandbox above the server's own. Fixed here, at start: a caller that writes
/// config.toml cannot loosen it.
fn caller_limits(config: Option<&Config>, no_auth: bool) -> CallerLimits {
    let mut limits = CallerLimits {
        sandbox: None,
        allow_programs: false,
        programs_key: "mcp_server.allow_caller_programs".to_string(),
        operator_keys: vec!["mcp_server".to_string(), "thread_store".to_string()],
    };
    let Some(config) = config else {
        limits.sandbox = Some(SandboxCeiling::of_policy(
            &SandboxPolicy::ReadOnly {
                network_access: false,
            },
            "the configuration not loading when the server started (restart it once it loads)",
        ));
        return limits;
    };
    limits.allow_programs = config.mcp_server.allow_caller_programs;
    let max = config.mcp_server.max_sandbox.map(|mode| {
        SandboxCeiling::of_mode(
            mode,
            config,
            format!("mcp_server.max_sandbox = \"{}\"", mode.as_str()),
        )
    });
    let own = no_auth.then(|| {
        SandboxCeiling::of_policy(
            &config.sandbox_policy,
            format!(
                "--no-auth (its callers may only lower the server's own sandbox, `{}`)",
                config.sandbox_policy.mode().as_str()
            ),
        )
    });
    limits.sandbox = match (max, own) {
        (Some(max), Some(own)) => Some(max.lower(own)),
        (max, own) => max.or(own),
    };
    limits
}

async fn serve_stdio(
    registry: Arc<Registry>,
    states: Arc<RequestStates>,
    stop: CancellationToken,
) -> Result<(), McpServerError> {
    let input_closed = registry.shutdown.clone();
    let handler = AgentServer::new(registry, states);
    let running = tokio::select! {
        running = handler.serve_with_ct(stdio::transport(input_closed), stop.child_token()) => running,
        () = stop.cancelled() => return Ok(()),
    };
    let running = match running {
        Ok(running) => running,
        // The client went away (or spoke no MCP) before the handshake finished.
        Err(e) => {
            tracing::info!("MCP connection closed before it was established: {e}");
            return Ok(());
        }
    };
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| McpServerError::Connection(e.to_string()))
}
