//! mcpServer/elicitation/request (server → client)

use super::*;

/// Request input for an MCP server elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestParams {
    /// Registration scope, not necessarily the server's execution environment.
    pub environment_id: Option<String>,
    pub server_name: String,
    pub thread_id: String,
    /// Active turn when this elicitation was observed, if it could be correlated.
    pub turn_id: Option<String>,
    #[serde(flatten)]
    pub request: McpServerElicitationRequest,
}

/// The server's `elicitation/create` params, by mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode")]
pub enum McpServerElicitationRequest {
    #[serde(rename = "form", rename_all = "camelCase")]
    Form {
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        message: String,
        /// The form, as the MCP server sent it (a flat object schema of primitives).
        requested_schema: Value,
    },
    #[serde(rename = "url", rename_all = "camelCase")]
    Url {
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        elicitation_id: String,
        message: String,
        url: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerElicitationAction {
    Accept,
    Decline,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestResponse {
    /// Optional client metadata for form-mode action handling.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    pub action: McpServerElicitationAction,
    /// Structured user input for accepted elicitations; null for decline/cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}
