//! The agent as an MCP client.
//!
//! A process-wide [`McpPool`] owns the server processes and connections, shared by
//! every thread whose entry resolves to the same launch spec. Each thread holds an
//! [`McpConnectionManager`]: [`McpConnectionManager::connect`] takes its instances from
//! the pool and starts the missing ones concurrently, under per-server startup
//! deadlines; [`McpConnectionManager::tools`] lists their tools under model-safe
//! qualified names (`mcp__<server>__<tool>`); [`McpConnectionManager::call_tool`] calls
//! one with a deadline and a cancellation token. The MCP SDK is confined to one private
//! module (`sdk`), so its API churn stays out of the rest of the code.

mod config;
mod elicitation;
mod env;
mod error;
mod manager;
mod naming;
pub mod nesting;
pub mod oauth;
mod pool;
mod progress;
mod sdk;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpApprovalMode, McpOAuthConfig,
    McpServerConfig, McpToolConfig, McpTransport, validate_server_name,
};
pub use elicitation::{ElicitationAction, ElicitationAnswer, ElicitationSink};
pub use env::{BASE_ENV_VARS, child_env};
pub use error::McpClientError;
pub use manager::{
    MAX_TOOL_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER, McpConnectionManager, McpToolInfo, ServerAuth,
    ServerInventory, ServerRuntimeStatus, ServerToolInfo, StartupReport, StartupStatus,
    StartupUpdate, ToolHints, ToolTable, ToolsLeftOut,
};
pub use naming::{MAX_TOOL_NAME_LEN, qualify_tool_names, sanitize_name_part};
pub use nesting::NESTING_DEPTH_ENV;
pub use pool::{McpPool, PoolOptions};
pub use progress::{MAX_PROGRESS_CHARS, ProgressSender};
