//! Guard against the agent starting itself as an MCP server, recursively.
//!
//! Sessions started by `interpreter mcp-server` export [`MCP_DEPTH_ENV`] (one more than
//! the server's own depth) to every command they run. The MCP client reads it with
//! [`skip_self_server`] and refuses an `[mcp_servers.*]` entry that would start
//! `interpreter mcp-server` again from inside a server-driven session.

use std::collections::HashMap;
use std::path::Path;

use interpreter_core::config::McpServerConfig;

/// Nesting depth of MCP-server sessions: unset or `0` outside any server. The engine
/// owns the name, since it also scrubs and forwards the environment of commands.
pub use interpreter_core::NESTING_DEPTH_ENV as MCP_DEPTH_ENV;

/// The depth recorded in `env` (unparseable values count as 0).
pub fn current_depth(env: &HashMap<String, String>) -> u32 {
    env.get(MCP_DEPTH_ENV)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The `(name, value)` to export to sessions a server at depth `current_depth(env)` runs.
pub fn child_depth_marker(env: &HashMap<String, String>) -> (String, String) {
    (
        MCP_DEPTH_ENV.to_string(),
        current_depth(env).saturating_add(1).to_string(),
    )
}

/// Whether this stdio entry starts our own MCP server (`interpreter … mcp-server`).
pub fn starts_own_mcp_server(server: &McpServerConfig, own_exe: Option<&Path>) -> bool {
    let Some(command) = server.command.as_deref() else {
        return false;
    };
    let command_path = Path::new(command);
    let is_our_binary = command_path.file_stem().and_then(|s| s.to_str()) == Some("interpreter")
        || own_exe.is_some_and(|exe| exe == command_path);
    is_our_binary && server.args.iter().any(|a| a == "mcp-server")
}

/// `Some(warning)` when the MCP client must skip server `name`: we already run inside an
/// MCP-server session and the entry would start `interpreter mcp-server` again.
pub fn skip_self_server(
    name: &str,
    server: &McpServerConfig,
    env: &HashMap<String, String>,
    own_exe: Option<&Path>,
) -> Option<String> {
    let depth = current_depth(env);
    (depth > 0 && starts_own_mcp_server(server, own_exe)).then(|| {
        format!(
            "skipping MCP server `{name}`: it would start `interpreter mcp-server` inside a \
             session that `interpreter mcp-server` already runs ({MCP_DEPTH_ENV}={depth})"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(command: &str, args: &[&str]) -> McpServerConfig {
        McpServerConfig {
            command: Some(command.to_string()),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn skips_only_own_server_when_nested() {
        let nested: HashMap<String, String> = [(MCP_DEPTH_ENV.to_string(), "1".to_string())].into();
        let own = server("/usr/local/bin/interpreter", &["mcp-server"]);
        assert!(skip_self_server("me", &own, &nested, None).is_some());
        assert!(skip_self_server("me", &own, &HashMap::new(), None).is_none());
        let other = server("npx", &["some-server"]);
        assert!(skip_self_server("other", &other, &nested, None).is_none());
        let exec = server("interpreter", &["exec", "hi"]);
        assert!(skip_self_server("exec", &exec, &nested, None).is_none());
    }

    #[test]
    fn marker_increments_depth() {
        let env: HashMap<String, String> = [(MCP_DEPTH_ENV.to_string(), "2".to_string())].into();
        assert_eq!(
            child_depth_marker(&env),
            (MCP_DEPTH_ENV.to_string(), "3".to_string())
        );
        assert_eq!(child_depth_marker(&HashMap::new()).1, "1");
    }
}
