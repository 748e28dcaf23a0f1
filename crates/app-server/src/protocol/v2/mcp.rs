//! mcpServerStatus/list, config/mcpServer/reload, mcpServer/startupStatus/updated

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStatusDetail {
    Full,
    ToolsAndAuthOnly,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusParams {
    /// Opaque pagination cursor returned by a previous call.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Controls how much MCP inventory data to fetch for each server. Defaults to `Full`
    /// when omitted.
    #[serde(default)]
    pub detail: Option<McpServerStatusDetail>,
    /// Select this environment's registration. Requires `serverName` and `threadId`. When
    /// omitted, a named request uses the same server as older clients.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// Optional page size; defaults to a server-defined value.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub limit: Option<u32>,
    /// Limit discovery to one server. With a thread ID, reuse that thread's MCP connection.
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpAuthStatus {
    Unknown,
    Unsupported,
    NotLoggedIn,
    BearerToken,
    #[serde(rename = "oAuth")]
    OAuth,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerConnectionStatus {
    NotStarted,
    Starting,
    Connected,
    AuthenticationRequired,
    Failed,
    Cancelled,
    Disabled,
}

/// Presentation metadata advertised by an initialized MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub description: Option<String>,
    pub icons: Option<Vec<Value>>,
    pub name: String,
    pub title: Option<String>,
    pub version: String,
    pub website_url: Option<String>,
}

/// Definition for a tool the client can call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub icons: Option<Vec<Value>>,
    pub input_schema: Value,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub title: Option<String>,
}

/// `mcpServer/tool/call`: a client calls a tool of a loaded thread's MCP server itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallParams {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Exact registration scope; omission preserves legacy name-only selection.
    #[serde(default)]
    pub environment_id: Option<String>,
    pub server: String,
    pub thread_id: String,
    pub tool: String,
}

/// The tool's `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallResponse {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    pub content: Vec<Value>,
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

/// `mcpServer/oauth/login`: log in to an HTTP MCP server of the config with OAuth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginParams {
    /// Registration strategy for this login only; only `auto` (or omitted) is served.
    #[serde(default)]
    pub client_registration: Option<McpServerOauthClientRegistration>,
    #[serde(default)]
    pub environment_id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// Resolve the server as this loaded thread does (its working directory).
    #[serde(default)]
    pub thread_id: Option<String>,
    /// How long to wait for the browser to come back (default 300 s).
    #[serde(default)]
    pub timeout_secs: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerOauthClientRegistration {
    Auto,
    Cimd,
    Dcr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginResponse {
    /// Open this in a browser; the login completes when it comes back to our loopback
    /// listener.
    pub authorization_url: String,
    pub login_id: Option<String>,
}

/// `mcpServer/oauthLogin/completed`: how a login that answered with an
/// `authorizationUrl` ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginCompletedNotification {
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub login_id: Option<String>,
    pub name: String,
    pub success: bool,
    #[serde(default)]
    pub thread_id: Option<String>,
}

/// `mcpServer/resource/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceReadParams {
    /// Additional MCP request metadata.
    #[serde(rename = "_meta", default)]
    pub meta: Option<serde_json::Map<String, Value>>,
    /// Hosted connectors are not served: must be absent.
    #[serde(default)]
    pub connector_id: Option<String>,
    #[serde(default)]
    pub environment_id: Option<String>,
    #[serde(default)]
    pub origin_call_id: Option<String>,
    pub server: String,
    /// Hosted apps are not served: must be absent.
    #[serde(default)]
    pub target: Option<Value>,
    /// The loaded thread whose server to read from; required here (Codex allows omitting it).
    #[serde(default)]
    pub thread_id: Option<String>,
    pub uri: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceReadResponse {
    /// The server's `ReadResourceResult.contents`, as sent.
    pub contents: Vec<Value>,
    #[serde(default)]
    pub origin_call_id: Option<String>,
}

/// A known resource that the server is capable of reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResource {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub icons: Option<Vec<Value>>,
    #[serde(default)]
    pub mime_type: Option<String>,
    pub name: String,
    #[serde(default)]
    pub size: Option<i64>,
    #[serde(default)]
    pub title: Option<String>,
    pub uri: String,
}

/// A template description for resources available on the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    pub uri_template: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub auth_status: McpAuthStatus,
    /// Environment that contributed this registration; null for a thread-wide server.
    /// Older servers omit this field.
    pub environment_id: Option<String>,
    /// HTTP origin of the effective configured endpoint, including plugin servers.
    /// Excludes credentials, path, query, and fragment; null for non-HTTP transports.
    pub http_origin: Option<String>,
    pub name: String,
    pub plugin_id: Option<String>,
    pub resource_templates: Vec<McpResourceTemplate>,
    pub resources: Vec<McpResource>,
    /// Current thread-runtime connection state; null when unavailable or the
    /// configuration changed.
    pub runtime_status: Option<McpServerConnectionStatus>,
    /// Capabilities advertised by the initialized MCP server; null when unavailable.
    pub server_capabilities: Option<Value>,
    pub server_info: Option<McpServerInfo>,
    /// Opaque `_meta` from the first page of the corresponding MCP tool catalog. Null when
    /// unavailable.
    pub tool_list_meta: Option<Value>,
    pub tools: BTreeMap<String, McpTool>,
    /// Tool discovery failed and no catalog was returned. Null when a catalog is returned,
    /// including cached or empty catalogs.
    pub tools_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusResponse {
    pub data: Vec<McpServerStatus>,
    /// Opaque cursor to pass to the next call to continue after the last item. If None,
    /// there are no more items to return.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerRefreshResponse {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStartupState {
    Starting,
    Ready,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStartupFailureReason {
    ReauthenticationRequired,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatusUpdatedNotification {
    /// Registration scope, not necessarily the server's execution environment.
    pub environment_id: Option<String>,
    pub error: Option<String>,
    pub failure_reason: Option<McpServerStartupFailureReason>,
    pub name: String,
    pub status: McpServerStartupState,
    pub thread_id: Option<String>,
}
