//! Errors of the MCP client.

use std::time::Duration;

/// What can go wrong starting MCP servers or calling their tools.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpClientError {
    /// `required = true` servers that did not start; `failures` is `name: error` pairs.
    #[error("required MCP servers failed to initialize: {}", .failures.join("; "))]
    RequiredServersFailed { failures: Vec<String> },
    #[error("unknown MCP tool `{0}`")]
    UnknownTool(String),
    #[error("unknown MCP server '{0}'")]
    UnknownServer(String),
    #[error("MCP tool arguments must be a JSON object, got {0}")]
    InvalidArguments(String),
    #[error("MCP tool `{tool}` on server `{server}` timed out after {timeout:?}")]
    Timeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    #[error("MCP tool call `{tool}` on server `{server}` was cancelled")]
    Cancelled { server: String, tool: String },
    /// The server or the connection failed the call (not an `isError` tool result, which
    /// is a successful call).
    #[error("MCP tool call `{tool}` on server `{server}` failed: {message}")]
    Call {
        server: String,
        tool: String,
        message: String,
    },
}
