//! `interpreter acp`: the agent inside editors (Zed, JetBrains, Neovim, Emacs) over the
//! Agent Client Protocol, stable v1, on stdio (newline-delimited JSON-RPC; stdout is
//! only the protocol, logs go to stderr).
//!
//! A front end over the engine like `app-server`: a session is a thread, a prompt is a
//! turn, engine events become `session/update`s, approvals become
//! `session/request_permission`. The SDK is wrapped in [`sdk`]; [`agent`] holds the
//! sessions, [`turn`] drives one prompt, [`history`] replays a saved thread, and
//! [`wire`] maps the engine's items to updates for both, so they end the same.

mod agent;
mod calls;
mod error;
mod history;
mod sdk;
mod turn;
mod update;
mod wire;

use std::sync::Arc;

use interpreter_core::config::ConfigInputs;
use tokio_util::sync::CancellationToken;

pub use error::AcpError;

pub struct AcpOptions {
    /// The process's config inputs; each session adds its cwd, mode, model and the
    /// editor's MCP servers.
    pub config_inputs: ConfigInputs,
}

/// Serve until the editor closes stdin, or `stop` fires (a signal); then interrupt what
/// runs and let the threads record it.
pub async fn run(options: AcpOptions, stop: CancellationToken) -> Result<(), AcpError> {
    let files = Arc::new(sdk::EditorFiles::default());
    let agent = Arc::new(agent::Agent::new(options.config_inputs, files.clone()));
    let served = sdk::serve_stdio(agent.clone(), files, stop).await;
    agent.shutdown().await;
    served
}
