//! `interpreter app-server`: the v2 thread/turn control plane for IDEs and orchestrators.
//!
//! # Design
//!
//! * [`protocol`]: the wire types (serde + schemars), the one source of the JSON Schema.
//! * [`processor`]: the transport-agnostic [`MessageProcessor`]. Requests go in; responses,
//!   notifications and server→client requests go out through each connection's
//!   [`MessageSink`]. The same processor serves stdio, WebSocket, the Unix socket, and can
//!   be mounted on another connection (the MCP server's) through
//!   [`MessageProcessor::handle_request`].
//! * [`driver`]: a turn driven by its own task, turning the thread's events into
//!   notifications and approval requests (v2 `item/*/requestApproval`, or v1
//!   `execCommandApproval` / `applyPatchApproval` for connections that ask for them),
//!   answered through the engine's one fail-closed decoder.
//! * [`transport`]: the listeners, on `interpreter_transport` (bounded lines, access
//!   rules, the accept loop they share with the MCP server's HTTP listener).
//!
//! Engine rules (one turn per thread, thread settings, idle retirement, rollouts and the
//! thread index) are the core's; this crate translates.

// `schema::methods` is one `json!` literal naming every method; it nests past the
// default macro recursion limit.
#![recursion_limit = "256"]

pub mod accounts;
mod approvals;
mod command_exec;
pub mod config_api;
pub mod connection;
mod driver;
pub mod error;
#[cfg(test)]
mod file_layers;
mod fs_api;
mod goals;
mod hooks;
mod listings;
pub mod mapping;
mod mcp_api;
mod model_providers;
pub mod models;
pub mod processor;
pub mod protocol;
pub mod schema;
mod state;
mod thread_edits;
mod threads;
pub mod transport;
mod turns;
mod user_requests;
pub mod v1_api;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::ThreadManager;
use interpreter_core::config::{ConfigError, ConfigInputs, load_config};
use interpreter_protocol::SessionSource;
use tokio_util::sync::CancellationToken;

pub use connection::{Connection, MessageSink};
pub use error::AppServerError;
pub use processor::{MessageProcessor, ProcessorOptions};
pub use transport::{Listen, TransportError};

/// How long running turns get to record their interruption when the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// What the CLI passes to [`run`].
#[derive(Debug, Clone)]
pub struct AppServerOptions {
    pub config_inputs: ConfigInputs,
    pub listen: Listen,
    /// `--ws-token-file`; `None` means [`default_ws_token_file`] under the home.
    pub ws_token_file: Option<PathBuf>,
    /// `--no-auth`: WebSocket clients need no token (loopback only).
    pub no_auth: bool,
    /// `--allow-host`: `Host` names a WebSocket listener accepts besides `localhost` and
    /// IP addresses.
    pub allow_hosts: Vec<String>,
}

/// The capability token file of a WebSocket listener started without `--ws-token-file`.
pub fn default_ws_token_file(home: &std::path::Path) -> PathBuf {
    home.join("app-server-ws.token")
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("error loading config: {0}")]
    Config(#[from] ConfigError),
    #[error("configuration loader stopped unexpectedly: {0}")]
    Join(String),
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Serve until the client goes away (stdio), or `stop` fires (a signal).
pub async fn run(opts: AppServerOptions, stop: CancellationToken) -> Result<(), RunError> {
    // Fail fast on a broken config instead of failing every thread/start later.
    let inputs = opts.config_inputs.clone();
    tokio::task::spawn_blocking(move || load_config(inputs).map(drop))
        .await
        .map_err(|e| RunError::Join(e.to_string()))??;
    let processor = MessageProcessor::new(
        ProcessorOptions {
            config_inputs: opts.config_inputs.clone(),
            session_source: SessionSource::AppServer,
        },
        Arc::new(ThreadManager::new()),
    );
    let served = match opts.listen {
        Listen::Stdio => {
            transport::serve_stdio(&processor, stop.clone()).await;
            Ok(())
        }
        Listen::WebSocket(addr) => {
            // Every WebSocket listener needs the token unless `--no-auth` says otherwise,
            // loopback included: other local users reach loopback too.
            let token = if opts.no_auth {
                None
            } else {
                let path = opts
                    .ws_token_file
                    .clone()
                    .unwrap_or_else(|| default_ws_token_file(&opts.config_inputs.home));
                let token = transport::load_or_create_token(&path)?;
                eprintln!("capability token file: {}", path.display());
                Some(token)
            };
            let access = transport::WsAccess {
                token,
                allow_hosts: opts.allow_hosts.clone(),
            };
            transport::serve_ws(processor.clone(), addr, access, stop.clone(), |local| {
                eprintln!("listening on ws://{local}");
            })
            .await
        }
        Listen::Unix(path) => {
            transport::serve_unix(processor.clone(), path, stop.clone(), |path| {
                eprintln!("listening on unix://{}", path.display());
            })
            .await
        }
    };
    // However serving ended: interrupt running turns and let them record it.
    processor.shutdown(SHUTDOWN_GRACE).await;
    served.map_err(RunError::from)
}
