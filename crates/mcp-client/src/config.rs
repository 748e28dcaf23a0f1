//! `[mcp_servers.NAME]`: the configuration of one MCP server the agent uses, and the
//! checks that turn it into a transport to start.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long starting one server (spawn or connect, `initialize`, first `tools/list`) may
/// take when `startup_timeout_sec` is unset. Generous because `npx`/`uvx` servers fetch
/// their package on first use, and affordable because a start only delays the first
/// model request of the threads that wait for it (see the pool).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one `tools/call` may take when `tool_timeout_sec` is unset.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// `[mcp_servers.NAME]` (stdio or streamable HTTP). `command` selects stdio, `url`
/// selects streamable HTTP.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Literal variables for the child (no indirection).
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Names of variables copied from our environment into the child's.
    #[serde(default)]
    pub env_vars: Vec<String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    /// Name of the variable holding the bearer token sent to an HTTP server.
    #[serde(default)]
    pub bearer_token_env_var: Option<String>,
    #[serde(default)]
    pub http_headers: Option<BTreeMap<String, String>>,
    /// Header name → name of the variable holding its value.
    #[serde(default)]
    pub env_http_headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub startup_timeout_sec: Option<f64>,
    #[serde(default)]
    pub tool_timeout_sec: Option<f64>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default)]
    pub required: bool,
    /// Allow-list of raw MCP tool names (unset: all).
    #[serde(default)]
    pub enabled_tools: Option<Vec<String>>,
    /// Deny-list of raw MCP tool names, applied after the allow-list.
    #[serde(default)]
    pub disabled_tools: Option<Vec<String>>,
    /// OAuth settings for `interpreter mcp login` (HTTP only).
    #[serde(default)]
    pub oauth: Option<McpOAuthConfig>,
    /// When calls of this server's tools are asked for (default `auto`).
    #[serde(default)]
    pub approval: Option<McpApprovalMode>,
    /// Per-tool settings, by raw tool name: `[mcp_servers.NAME.tools.TOOL]`.
    #[serde(default)]
    pub tools: Option<BTreeMap<String, McpToolConfig>>,
}

/// `approval = "never" | "always" | "auto"` of a server or a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpApprovalMode {
    /// Read-only-hinted tools run without asking; the others as the approval policy says
    /// (see the MCP client documentation).
    #[default]
    Auto,
    /// Ask before every call (refused under the `never` policy, which cannot ask).
    Always,
    /// Never ask: the tool is trusted.
    Never,
}

/// `[mcp_servers.NAME.tools.TOOL]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToolConfig {
    #[serde(default)]
    pub approval: Option<McpApprovalMode>,
}

/// `[mcp_servers.NAME.oauth]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuthConfig {
    /// A client id registered with the authorization server beforehand; without it the
    /// login registers a client dynamically.
    #[serde(default)]
    pub client_id: Option<String>,
    /// Variable holding the secret of that pre-registered client, if it has one.
    #[serde(default)]
    pub client_secret_env_var: Option<String>,
    /// Scopes to request (default: what the server asks for).
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// HTTPS URL of a client ID metadata document describing this client; used as the
    /// client id when the authorization server advertises
    /// `client_id_metadata_document_supported` (instead of registering dynamically).
    #[serde(default)]
    pub client_metadata_url: Option<String>,
}

fn default_true() -> bool {
    true
}

/// Which transport an entry uses, with only the keys that apply to it.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    Stdio { command: String, args: Vec<String> },
    StreamableHttp { url: String },
}

impl McpServerConfig {
    /// The transport this entry selects, or why it is invalid: exactly one of `command`
    /// and `url`, and no key that belongs to the other transport.
    pub fn transport(&self) -> Result<McpTransport, String> {
        match (&self.command, &self.url) {
            (Some(command), None) => {
                let http_only = [
                    ("bearer_token_env_var", self.bearer_token_env_var.is_some()),
                    ("oauth", self.oauth.is_some()),
                    ("http_headers", self.http_headers.is_some()),
                    ("env_http_headers", self.env_http_headers.is_some()),
                ];
                if let Some((key, _)) = http_only.iter().find(|(_, set)| *set) {
                    return Err(format!("{key} is not supported for stdio"));
                }
                if command.trim().is_empty() {
                    return Err("invalid transport: `command` is empty".to_string());
                }
                Ok(McpTransport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                })
            }
            (None, Some(url)) => {
                let stdio_only = [
                    ("args", !self.args.is_empty()),
                    ("env", self.env.is_some()),
                    ("env_vars", !self.env_vars.is_empty()),
                    ("cwd", self.cwd.is_some()),
                ];
                if let Some((key, _)) = stdio_only.iter().find(|(_, set)| *set) {
                    return Err(format!("{key} is not supported for streamable_http"));
                }
                Ok(McpTransport::StreamableHttp { url: url.clone() })
            }
            (Some(_), Some(_)) => {
                Err("invalid transport: set either `command` or `url`, not both".to_string())
            }
            (None, None) => Err("invalid transport: set `command` or `url`".to_string()),
        }
    }

    /// `startup_timeout_sec`, or [`DEFAULT_STARTUP_TIMEOUT`] when unset or not a usable
    /// number of seconds.
    pub fn startup_timeout(&self) -> Duration {
        seconds(self.startup_timeout_sec).unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// `tool_timeout_sec`, or [`DEFAULT_TOOL_TIMEOUT`] when unset or not usable.
    pub fn tool_timeout(&self) -> Duration {
        seconds(self.tool_timeout_sec).unwrap_or(DEFAULT_TOOL_TIMEOUT)
    }

    /// The approval mode of raw tool `tool`: its own, else the server's, else `auto`.
    pub fn approval_mode(&self, tool: &str) -> McpApprovalMode {
        self.tools
            .as_ref()
            .and_then(|tools| tools.get(tool))
            .and_then(|t| t.approval)
            .or(self.approval)
            .unwrap_or_default()
    }

    /// Whether the filters let the model see raw tool `tool`: on the allow-list (when
    /// there is one) and not on the deny-list.
    pub fn allows_tool(&self, tool: &str) -> bool {
        let allowed = self
            .enabled_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool));
        let denied = self
            .disabled_tools
            .as_ref()
            .is_some_and(|list| list.iter().any(|t| t == tool));
        allowed && !denied
    }
}

fn seconds(value: Option<f64>) -> Option<Duration> {
    // try_from_secs_f64 rejects negative, NaN and overflowing values instead of panicking.
    value
        .filter(|s| *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// Server names end up in tool names and log lines, so only `[A-Za-z0-9_-]+` is accepted.
pub fn validate_server_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "Invalid MCP server name '{name}': must match pattern ^[a-zA-Z0-9_-]+$"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(text: &str) -> McpServerConfig {
        match toml::from_str(text) {
            Ok(config) => config,
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn stdio_and_http_entries_parse_with_defaults() {
        let stdio = parse("command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv_vars = [\"TOKEN\"]");
        assert!(stdio.enabled);
        assert!(!stdio.required);
        assert_eq!(
            stdio.transport(),
            Ok(McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "srv".into()]
            })
        );
        assert_eq!(stdio.startup_timeout(), DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(stdio.tool_timeout(), DEFAULT_TOOL_TIMEOUT);

        let http = parse(
            "url = \"https://example.test/mcp\"\nbearer_token_env_var = \"T\"\n\
             tool_timeout_sec = 1.5\n[http_headers]\nX-A = \"b\"",
        );
        assert_eq!(
            http.transport(),
            Ok(McpTransport::StreamableHttp {
                url: "https://example.test/mcp".into()
            })
        );
        assert_eq!(http.tool_timeout(), Duration::from_millis(1500));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<McpServerConfig>("command = \"x\"\nbogus = 1").is_err());
    }

    #[test]
    fn transport_errors_name_the_offending_key() {
        let none = McpServerConfig::default();
        assert!(none.transport().is_err());
        let both = parse("command = \"x\"\nurl = \"http://127.0.0.1/\"");
        assert!(both.transport().is_err());
        let stdio_with_header = parse("command = \"x\"\n[http_headers]\nA = \"b\"");
        assert_eq!(
            stdio_with_header.transport(),
            Err("http_headers is not supported for stdio".to_string())
        );
        let http_with_env = parse("url = \"http://127.0.0.1/\"\n[env]\nA = \"b\"");
        assert_eq!(
            http_with_env.transport(),
            Err("env is not supported for streamable_http".to_string())
        );
    }

    #[test]
    fn bad_timeouts_fall_back_to_defaults() {
        let config = McpServerConfig {
            startup_timeout_sec: Some(-1.0),
            tool_timeout_sec: Some(f64::NAN),
            ..Default::default()
        };
        assert_eq!(config.startup_timeout(), DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(config.tool_timeout(), DEFAULT_TOOL_TIMEOUT);
    }

    #[test]
    fn filters_apply_allow_list_then_deny_list() {
        let config = McpServerConfig {
            enabled_tools: Some(vec!["a".into(), "b".into()]),
            disabled_tools: Some(vec!["b".into()]),
            ..Default::default()
        };
        assert!(config.allows_tool("a"));
        assert!(!config.allows_tool("b"));
        assert!(!config.allows_tool("c"));
        assert!(McpServerConfig::default().allows_tool("anything"));
    }

    #[test]
    fn approval_modes_resolve_tool_then_server_then_auto() {
        let config =
            parse("command = \"x\"\napproval = \"always\"\n[tools.read]\napproval = \"never\"");
        assert_eq!(config.approval_mode("read"), McpApprovalMode::Never);
        assert_eq!(config.approval_mode("write"), McpApprovalMode::Always);
        assert_eq!(
            McpServerConfig::default().approval_mode("x"),
            McpApprovalMode::Auto
        );
        assert!(
            toml::from_str::<McpServerConfig>("command = \"x\"\napproval = \"maybe\"").is_err()
        );
    }

    #[test]
    fn server_names_are_checked() {
        assert!(validate_server_name("my-server_1").is_ok());
        assert!(validate_server_name("").is_err());
        assert!(validate_server_name("a.b").is_err());
    }
}
