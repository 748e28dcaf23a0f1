//! Guard against the agent starting itself as an MCP server, recursively.
//!
//! Every process `interpreter` starts for a session (commands, MCP servers) gets
//! [`NESTING_DEPTH_ENV`] set to one more than our own depth. Independently of the depth,
//! the MCP client never starts an `[mcp_servers.*]` entry that would run
//! `interpreter mcp-server` again: [`self_recursion_warning`] says so.

use std::collections::HashMap;
use std::path::Path;

use crate::config::McpServerConfig;

/// How deeply `interpreter` processes are nested: unset or `0` at the top.
pub const NESTING_DEPTH_ENV: &str = "INTERPRETER_NESTING_DEPTH";

/// The subcommand whose recursive start the guard prevents.
const MCP_SERVER_SUBCOMMAND: &str = "mcp-server";

/// The depth recorded in `env` (unparseable values count as 0).
pub fn current_depth(env: &HashMap<String, String>) -> u32 {
    env.get(NESTING_DEPTH_ENV)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The `(name, value)` to export to children of a process at depth `current_depth(env)`.
pub fn child_depth_marker(env: &HashMap<String, String>) -> (String, String) {
    (
        NESTING_DEPTH_ENV.to_string(),
        current_depth(env).saturating_add(1).to_string(),
    )
}

/// Whether this stdio entry starts our own MCP server: the command is our executable
/// (`own_exe`) or is named `interpreter`, and an argument is `mcp-server` (global flags
/// such as `-c key=value` may come first).
pub fn starts_own_mcp_server(server: &McpServerConfig, own_exe: Option<&Path>) -> bool {
    let Some(command) = server.command.as_deref() else {
        return false;
    };
    let command_path = Path::new(command);
    let is_our_binary = command_path.file_stem().and_then(|s| s.to_str()) == Some("interpreter")
        || own_exe.is_some_and(|exe| exe == command_path);
    is_our_binary && server.args.iter().any(|a| a == MCP_SERVER_SUBCOMMAND)
}

/// `Some(warning)` when server `name` must not be started because it would run
/// `interpreter mcp-server` again.
pub fn self_recursion_warning(
    name: &str,
    server: &McpServerConfig,
    own_exe: Option<&Path>,
) -> Option<String> {
    starts_own_mcp_server(server, own_exe).then(|| {
        format!(
            "skipping MCP server `{name}`: it would start `interpreter {MCP_SERVER_SUBCOMMAND}` \
             again, which could recurse without end"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn server(command: &str, args: &[&str]) -> McpServerConfig {
        McpServerConfig {
            command: Some(command.to_string()),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn recognises_own_server_by_name_or_path() {
        assert!(starts_own_mcp_server(
            &server("/usr/local/bin/interpreter", &["mcp-server"]),
            None
        ));
        assert!(starts_own_mcp_server(
            &server("interpreter", &["-c", "model=x", "mcp-server"]),
            None
        ));
        let own = PathBuf::from("/opt/agent/renamed-binary");
        assert!(starts_own_mcp_server(
            &server("/opt/agent/renamed-binary", &["mcp-server"]),
            Some(&own)
        ));
        assert!(!starts_own_mcp_server(
            &server("interpreter", &["exec", "hi"]),
            None
        ));
        assert!(!starts_own_mcp_server(
            &server("npx", &["mcp-server"]),
            Some(&own)
        ));
        let http = McpServerConfig {
            url: Some("http://127.0.0.1:1/".into()),
            ..Default::default()
        };
        assert!(!starts_own_mcp_server(&http, None));
    }

    #[test]
    fn warning_names_the_server() {
        let warning = self_recursion_warning("me", &server("interpreter", &["mcp-server"]), None);
        assert!(warning.is_some_and(|w| w.contains("`me`")));
    }

    #[test]
    fn marker_increments_depth() {
        let env: HashMap<String, String> =
            [(NESTING_DEPTH_ENV.to_string(), "2".to_string())].into();
        assert_eq!(current_depth(&env), 2);
        assert_eq!(
            child_depth_marker(&env),
            (NESTING_DEPTH_ENV.to_string(), "3".to_string())
        );
        assert_eq!(child_depth_marker(&HashMap::new()).1, "1");
        let junk: HashMap<String, String> =
            [(NESTING_DEPTH_ENV.to_string(), "x".to_string())].into();
        assert_eq!(current_depth(&junk), 0);
    }
}
