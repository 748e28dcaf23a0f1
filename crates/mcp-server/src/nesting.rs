//! The nesting marker sessions started by `interpreter mcp-server` carry.
//!
//! Every session the server starts exports [`MCP_DEPTH_ENV`] (one more than the server's
//! own depth) to the commands and MCP servers it runs. The decision whether an
//! `[mcp_servers.*]` entry would start `interpreter mcp-server` again, and skipping it, is
//! the MCP client's (`interpreter_mcp_client::nesting`); this module only re-exports what
//! the server needs so both sides agree on one variable.

pub use interpreter_mcp_client::nesting::{
    NESTING_DEPTH_ENV as MCP_DEPTH_ENV, child_depth_marker, current_depth, starts_own_mcp_server,
};
