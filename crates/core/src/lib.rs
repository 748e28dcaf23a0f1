//! The engine.
//!
//! This crate owns the behaviour every front end shares: loading configuration into one
//! validated [`config::Config`], threads as queue pairs (`Op` in, `Event` out), the turn
//! loop that alternates model sampling and tool calls, the approval rules, AGENTS.md
//! discovery, and durable threads behind one [`store::ThreadStore`] (local JSONL rollouts
//! plus a SQLite index, or PostgreSQL for a fleet). Front ends translate; they never decide.

mod approval;
pub mod config;
mod elicitation;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod goal;
mod handlers;
mod hook_runs;
pub mod hooks;
pub mod items;
mod op_loop;
pub mod open_requests;
mod pending;
mod permissions;
mod plan_mode;
pub mod planted_repos;
mod project_doc;
mod repo_dirs;
pub mod revert;
pub mod review;
mod session;
pub mod skills;
pub mod store;
mod submission;
mod thread_manager;
mod tool_output;
mod turn;
mod user_requests;
pub mod workspace_files;

pub use error::{CoreError, ErrorKind};
pub use handlers::{SandboxHelperUnavailable, SandboxedCommand, sandboxed_command};
/// How deeply `interpreter` processes are nested; owned by the MCP client, which decides
/// which configured servers would start the agent recursively.
pub use interpreter_mcp_client::NESTING_DEPTH_ENV;
/// OAuth logins to the MCP servers the agent uses, for every front end that offers one.
pub use interpreter_mcp_client::oauth as mcp_oauth;
pub use interpreter_mcp_client::{
    McpClientError, ServerAuth, ServerInventory, ServerRuntimeStatus, ServerToolInfo,
};
pub use thread_manager::{NewThread, Submission, Thread, ThreadManager};
pub use workspace_files::{LocalFiles, WorkspaceFiles};
