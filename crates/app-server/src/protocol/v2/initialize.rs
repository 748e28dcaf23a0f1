//! `initialize`: the handshake, its capabilities and what the server says of itself.

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    #[serde(default)]
    pub experimental_api: bool,
    /// Notification methods this connection does not want (exact names).
    #[serde(default)]
    pub opt_out_notification_methods: Option<Vec<String>>,
    /// Ours: approvals arrive as the v1 `execCommandApproval` / `applyPatchApproval`
    /// requests instead of the v2 `item/*/requestApproval` ones.
    #[serde(default)]
    pub legacy_approvals: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    #[serde(default)]
    pub capabilities: Option<InitializeCapabilities>,
    /// Ours: `1` asks for v1 approval requests (same as `capabilities.legacyApprovals`).
    #[serde(default)]
    pub protocol_version: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    pub server_info: ServerInfo,
    pub user_agent: String,
    /// Absolute path of the agent home.
    pub codex_home: String,
    pub platform_family: String,
    pub platform_os: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}
