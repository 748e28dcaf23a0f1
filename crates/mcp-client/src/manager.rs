//! The set of running MCP servers of one session: startup (concurrent, each under its
//! own deadline), the model-visible tool table, tool calls, and shutdown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{McpServerConfig, McpTransport, validate_server_name};
use crate::env::child_env;
use crate::error::McpClientError;
use crate::naming::qualify_tool_names;
use crate::nesting::self_recursion_warning;
use crate::sdk::{self, RawTool, SdkConnection};

/// How long closing one server may take before it is killed.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(8);

/// One tool as the model sees it, and where calls to it go.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    /// `mcp__<server>__<tool>`, sanitized to `[A-Za-z0-9_]`, at most 64 bytes, unique.
    pub qualified_name: String,
    /// Raw server name (the `[mcp_servers.NAME]` key).
    pub server: String,
    /// Raw tool name, as the server listed it.
    pub tool: String,
    pub description: String,
    /// The tool's JSON Schema for its arguments.
    pub input_schema: serde_json::Value,
}

/// What happened while starting the servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartupReport {
    /// Servers that started, by name (sorted).
    pub ready: Vec<String>,
    /// One line per server left out (failed to start, skipped), for the user.
    pub warnings: Vec<String>,
}

struct Connection {
    config: McpServerConfig,
    session: SdkConnection,
}

/// The running MCP servers of a session and their tools.
pub struct McpConnectionManager {
    connections: BTreeMap<String, Connection>,
    tools: Vec<McpToolInfo>,
    tool_index: HashMap<String, usize>,
}

impl std::fmt::Debug for McpConnectionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnectionManager")
            .field("servers", &self.connections.keys().collect::<Vec<_>>())
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpConnectionManager {
    /// Starts every enabled server concurrently, each within its `startup_timeout_sec`.
    /// A server that fails is left out with a warning, unless it is `required`, which
    /// makes this fail naming it (the servers that did start are shut down first).
    /// Entries that would start `interpreter mcp-server` again are always skipped.
    /// `env` is the injected environment (never read from the process); stdio servers
    /// without a `cwd` run in the process's working directory.
    pub async fn start(
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
    ) -> Result<(Self, StartupReport), McpClientError> {
        Self::start_in(servers, env, self_exe, None).await
    }

    /// [`Self::start`], with `default_cwd` (the session's working directory) as the
    /// working directory of stdio servers without `cwd`, and the base of relative ones.
    pub async fn start_in(
        servers: &BTreeMap<String, McpServerConfig>,
        env: &HashMap<String, String>,
        self_exe: Option<&Path>,
        default_cwd: Option<&Path>,
    ) -> Result<(Self, StartupReport), McpClientError> {
        let mut report = StartupReport::default();
        let mut required_failures = Vec::new();
        let mut starting = Vec::new();
        for (name, config) in servers.iter().filter(|(_, c)| c.enabled) {
            if let Some(warning) = self_recursion_warning(name, config, self_exe) {
                if config.required {
                    required_failures.push(format!("{name}: {warning}"));
                }
                report.warnings.push(warning);
                continue;
            }
            starting.push(async move {
                let result = start_server(name, config, env, default_cwd).await;
                (name, config, result)
            });
        }

        let mut connections = BTreeMap::new();
        for (name, config, result) in futures::future::join_all(starting).await {
            match result {
                Ok(connection) => {
                    connections.insert(name.clone(), connection);
                }
                Err(error) => {
                    tracing::warn!("{error}");
                    if config.required {
                        required_failures.push(format!("{name}: {error}"));
                    }
                    report.warnings.push(error);
                }
            }
        }

        if !required_failures.is_empty() {
            shutdown_all(connections).await;
            return Err(McpClientError::RequiredServersFailed {
                failures: required_failures,
            });
        }
        report.ready = connections.keys().cloned().collect();
        let manager = Self::from_connections(connections, &mut report.warnings);
        Ok((manager, report))
    }

    fn from_connections(
        connections: BTreeMap<String, (Connection, Vec<RawTool>)>,
        warnings: &mut Vec<String>,
    ) -> Self {
        let mut raw = Vec::new();
        let mut kept = BTreeMap::new();
        for (server, (connection, tools)) in connections {
            let mut seen = HashSet::new();
            for tool in tools {
                if !connection.config.allows_tool(&tool.name) {
                    continue;
                }
                if !seen.insert(tool.name.clone()) {
                    warnings.push(format!(
                        "MCP server `{server}` lists tool `{}` twice; keeping the first",
                        tool.name
                    ));
                    continue;
                }
                raw.push((server.clone(), tool));
            }
            kept.insert(server, connection);
        }
        let pairs: Vec<(String, String)> = raw
            .iter()
            .map(|(server, tool)| (server.clone(), tool.name.clone()))
            .collect();
        let names = qualify_tool_names(&pairs);
        let tools: Vec<McpToolInfo> = raw
            .into_iter()
            .zip(names)
            .map(|((server, tool), qualified_name)| McpToolInfo {
                qualified_name,
                server,
                tool: tool.name,
                description: tool.description,
                input_schema: tool.input_schema,
            })
            .collect();
        let tool_index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.qualified_name.clone(), i))
            .collect();
        Self {
            connections: kept,
            tools,
            tool_index,
        }
    }

    /// The tools of all running servers that their `enabled_tools`/`disabled_tools`
    /// filters let through, ordered by server then as listed.
    pub fn tools(&self) -> Vec<McpToolInfo> {
        self.tools.clone()
    }

    /// Names of the running servers (sorted).
    pub fn servers(&self) -> Vec<String> {
        self.connections.keys().cloned().collect()
    }

    /// Calls a tool by its qualified name. Ends at the server's `tool_timeout_sec` or when
    /// `cancel` fires, whichever comes first; either way the server is sent
    /// `notifications/cancelled`. An `isError` result is returned as `Ok`: it is the
    /// tool's answer. The value is the `CallToolResult` as JSON.
    pub async fn call_tool(
        &self,
        qualified_name: &str,
        arguments: Option<serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, McpClientError> {
        let info = self
            .tool_index
            .get(qualified_name)
            .and_then(|i| self.tools.get(*i))
            .ok_or_else(|| McpClientError::UnknownTool(qualified_name.to_string()))?;
        let connection = self
            .connections
            .get(&info.server)
            .ok_or_else(|| McpClientError::UnknownTool(qualified_name.to_string()))?;
        let arguments = match arguments {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(map)) => Some(map),
            Some(other) => return Err(McpClientError::InvalidArguments(other.to_string())),
        };
        let timeout = connection.config.tool_timeout();
        // Dropping the call future (on cancel or timeout) is what sends the cancellation.
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(McpClientError::Cancelled {
                server: info.server.clone(),
                tool: info.tool.clone(),
            }),
            outcome = tokio::time::timeout(
                timeout,
                connection.session.call_tool(&info.tool, arguments),
            ) => match outcome {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(message)) => Err(McpClientError::Call {
                    server: info.server.clone(),
                    tool: info.tool.clone(),
                    message,
                }),
                Err(_) => Err(McpClientError::Timeout {
                    server: info.server.clone(),
                    tool: info.tool.clone(),
                    timeout,
                }),
            },
        }
    }

    /// Closes every server concurrently; each gets a bounded grace period, after which
    /// its process is killed.
    pub async fn shutdown(self) {
        shutdown_all(self.connections).await;
    }
}

async fn shutdown_all<C: Into<SdkConnectionOwner>>(connections: BTreeMap<String, C>) {
    futures::future::join_all(
        connections
            .into_values()
            .map(|c| c.into().0.shutdown(SHUTDOWN_DEADLINE)),
    )
    .await;
}

/// Lets [`shutdown_all`] take both bare connections and ones still holding their tools.
struct SdkConnectionOwner(SdkConnection);

impl From<Connection> for SdkConnectionOwner {
    fn from(connection: Connection) -> Self {
        Self(connection.session)
    }
}

impl From<(Connection, Vec<RawTool>)> for SdkConnectionOwner {
    fn from((connection, _): (Connection, Vec<RawTool>)) -> Self {
        Self(connection.session)
    }
}

/// Starts one server: check, connect, handshake and list tools, all within its startup
/// deadline. The error is the user-facing warning text.
async fn start_server(
    name: &str,
    config: &McpServerConfig,
    env: &HashMap<String, String>,
    default_cwd: Option<&Path>,
) -> Result<(Connection, Vec<RawTool>), String> {
    let failed = |error: String| format!("MCP client for `{name}` failed to start: {error}");
    validate_server_name(name).map_err(failed)?;
    let transport = config.transport().map_err(failed)?;
    let timeout = config.startup_timeout();
    let connect_and_list = async {
        let session = match &transport {
            McpTransport::Stdio { command, args } => {
                let cwd = stdio_cwd(config, default_cwd);
                sdk::connect_stdio(name, command, args, &child_env(config, env), cwd.as_deref())
                    .await?
            }
            McpTransport::StreamableHttp { url } => {
                let bearer = bearer_token(name, config, env)?;
                sdk::connect_http(url, bearer, &http_headers(config, env)).await?
            }
        };
        let tools = session.list_tools().await?;
        Ok::<_, String>((session, tools))
    };
    // On timeout the half-started session is dropped, which kills a child process.
    match tokio::time::timeout(timeout, connect_and_list).await {
        Ok(Ok((session, tools))) => Ok((
            Connection {
                config: config.clone(),
                session,
            },
            tools,
        )),
        Ok(Err(error)) => Err(failed(error)),
        Err(_) => Err(format!(
            "MCP client for `{name}` timed out after {} seconds. Add or adjust \
             `startup_timeout_sec` in your config.toml:\n[mcp_servers.{name}]\n\
             startup_timeout_sec = XX",
            timeout.as_secs_f64()
        )),
    }
}

fn stdio_cwd(config: &McpServerConfig, default_cwd: Option<&Path>) -> Option<PathBuf> {
    match (&config.cwd, default_cwd) {
        (Some(cwd), Some(base)) => Some(base.join(cwd)),
        (Some(cwd), None) => Some(cwd.clone()),
        (None, base) => base.map(Path::to_path_buf),
    }
}

fn bearer_token(
    name: &str,
    config: &McpServerConfig,
    env: &HashMap<String, String>,
) -> Result<Option<String>, String> {
    let Some(var) = &config.bearer_token_env_var else {
        return Ok(None);
    };
    match env.get(var) {
        None => Err(format!(
            "Environment variable {var} for MCP server '{name}' is not set"
        )),
        Some(value) if value.trim().is_empty() => Err(format!(
            "Environment variable {var} for MCP server '{name}' is empty"
        )),
        Some(value) => Ok(Some(value.trim().to_string())),
    }
}

/// Static `http_headers`, then `env_http_headers` whose variable is set and non-empty.
fn http_headers(config: &McpServerConfig, env: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = config
        .http_headers
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (header, var) in config.env_http_headers.iter().flatten() {
        match env.get(var) {
            Some(value) if !value.trim().is_empty() => {
                headers.push((header.clone(), value.clone()));
            }
            _ => tracing::debug!("header `{header}` skipped: `{var}` is unset or empty"),
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bearer_token_comes_from_the_injected_env() {
        let config = McpServerConfig {
            url: Some("http://127.0.0.1:1/".into()),
            bearer_token_env_var: Some("TOKEN".into()),
            ..Default::default()
        };
        assert_eq!(
            bearer_token("s", &config, &env(&[("TOKEN", "abc")])),
            Ok(Some("abc".to_string()))
        );
        assert!(
            bearer_token("s", &config, &env(&[]))
                .is_err_and(|e| e.contains("TOKEN") && e.contains("not set"))
        );
        assert!(
            bearer_token("s", &config, &env(&[("TOKEN", " ")])).is_err_and(|e| e.contains("empty"))
        );
    }

    #[test]
    fn env_headers_skip_missing_values() {
        let config = McpServerConfig {
            http_headers: Some([("X-Static".to_string(), "1".to_string())].into()),
            env_http_headers: Some(
                [
                    ("X-Set".to_string(), "SET".to_string()),
                    ("X-Unset".to_string(), "UNSET".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        assert_eq!(
            http_headers(&config, &env(&[("SET", "v")])),
            vec![
                ("X-Static".to_string(), "1".to_string()),
                ("X-Set".to_string(), "v".to_string())
            ]
        );
    }

    #[test]
    fn relative_cwd_is_resolved_against_the_session_cwd() {
        let config = McpServerConfig {
            cwd: Some("sub".into()),
            ..Default::default()
        };
        assert_eq!(
            stdio_cwd(&config, Some(Path::new("/work"))),
            Some(PathBuf::from("/work/sub"))
        );
        assert_eq!(
            stdio_cwd(&McpServerConfig::default(), Some(Path::new("/work"))),
            Some(PathBuf::from("/work"))
        );
        assert_eq!(stdio_cwd(&McpServerConfig::default(), None), None);
    }
}
