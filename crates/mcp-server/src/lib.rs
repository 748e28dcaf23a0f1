//! `interpreter mcp-server`: the agent as MCP tools `codex` and `codex-reply` over stdio.
//!
//! # Design: our own JSON-RPC loop on rmcp's model types
//!
//! rmcp's server runtime was read (3.11.0) and not used for the connection loop, because
//! the behaviour clients need cannot be had from it without forking it:
//! * its stdio transport drops a syntactically invalid line without any reply, where we
//!   answer `-32700` with `id: null` and go on; and it cannot answer a batch with an error;
//! * the initialize handshake and the repeated-initialize error are fixed inside the
//!   runtime, while we want the reference's exact `-32600 initialize called more than once`
//!   and the reference tool-call ids/correlation fields on our own server→client requests;
//! * we need our own deadline, cancellation and "deny on client error" semantics on
//!   `elicitation/create`, and a bounded, clock-limited shutdown on stdin EOF.
//!
//! So the loop (framing, dispatch, per-call tasks, the writer) is ours and small, and
//! every spec-vocabulary type we do borrow from rmcp (protocol versions, error codes,
//! server info, `server/discover`, `ElicitResult`) goes through [`rmcp_glue`], the one
//! module an rmcp upgrade touches.
//!
//! Module map: [`framing`] bounded line reading; [`outgoing`] the writer and our
//! requests' bookkeeping; `server` dispatch and lifecycle; `runner` one tool call;
//! [`approval`] elicitation; [`tools`] definitions and config; [`result`] results;
//! [`nesting`] the self-recursion guard.

pub mod approval;
pub mod framing;
pub mod nesting;
pub mod outgoing;
pub mod result;
pub mod rmcp_glue;
mod runner;
mod server;
pub mod tools;

use std::sync::Arc;

use interpreter_core::ThreadManager;
use interpreter_core::config::{ConfigError, ConfigInputs, load_config};
use tokio::io::{AsyncRead, AsyncWrite};

pub use nesting::{MCP_DEPTH_ENV, child_depth_marker, current_depth};

/// What the CLI passes to [`run`].
#[derive(Debug, Clone)]
pub struct McpServerOptions {
    /// Server-level config inputs (`-c`, `--strict-config`, profile, env, home, cwd),
    /// applied to every tool session before the call's own overrides.
    pub config_inputs: ConfigInputs,
}

#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    #[error("error loading config: {0}")]
    Config(#[from] ConfigError),
    #[error("configuration loader stopped unexpectedly: {0}")]
    Join(String),
}

/// Serve MCP over this process's stdin/stdout until stdin closes.
pub async fn run(opts: McpServerOptions) -> Result<(), McpServerError> {
    serve(tokio::io::stdin(), tokio::io::stdout(), opts).await
}

/// Serve MCP over any byte streams (tests use in-memory pipes).
pub async fn serve<R, W>(input: R, output: W, opts: McpServerOptions) -> Result<(), McpServerError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Fail fast on a broken config (e.g. an unknown key under --strict-config) instead of
    // failing every tool call later.
    let inputs = opts.config_inputs.clone();
    let config = tokio::task::spawn_blocking(move || load_config(inputs))
        .await
        .map_err(|e| McpServerError::Join(e.to_string()))??;
    let shared = Arc::new(runner::Shared::new(
        Arc::new(ThreadManager::new()),
        opts.config_inputs,
        config.mcp_server.clone(),
    ));
    server::serve_connection(input, output, shared).await;
    Ok(())
}
