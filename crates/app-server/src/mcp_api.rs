//! The MCP servers the agent itself uses (`[mcp_servers.*]`), as a client sees them:
//! `mcpServerStatus/list`, `config/mcpServer/reload`, and the `mcpServer/startupStatus/updated`
//! notifications built from the engine's `McpStartupUpdate` events.
//!
//! Everything about a server (whether it runs, its tools, how it authenticates) comes from
//! the engine ([`interpreter_core::ThreadManager::mcp_inventory`]); this module only maps it
//! to the wire and pages it. Listing never starts a server: one that no thread has used yet
//! is reported as `notStarted`.

use std::collections::BTreeMap;

use interpreter_core::{ServerAuth, ServerInventory, ServerRuntimeStatus};
use interpreter_protocol::{McpStartupStatus, McpStartupUpdateEvent};

use crate::error::AppServerError;
use crate::protocol::v2;
use crate::state::{Reply, ServerState, parse_thread_id};

/// Page size when the client gives none.
const DEFAULT_PAGE_SIZE: usize = 100;
/// Upper bound of a page, whatever the client asks.
const MAX_PAGE_SIZE: usize = 1000;

/// `mcpServerStatus/list`: every configured server, in name order, paged by an opaque
/// cursor (the index of the next entry). With `threadId`, the servers as that live thread
/// resolved them (its working directory and environment); otherwise as a new thread would.
pub(crate) async fn list(
    state: &ServerState,
    params: v2::ListMcpServerStatusParams,
) -> Result<Reply, AppServerError> {
    let inventory = match &params.thread_id {
        Some(id) => {
            let thread_id = parse_thread_id(id)?;
            // Only a thread that is live here: loading a saved one would start its servers.
            let thread = state
                .thread_manager
                .get_thread(thread_id)
                .await
                .ok_or_else(|| AppServerError::ThreadNotFound(id.clone()))?;
            state.thread_manager.mcp_inventory(thread.config())
        }
        None => {
            let config = state.base_config().await?;
            state.thread_manager.mcp_inventory(&config)
        }
    };
    let entries: Vec<ServerInventory> = inventory
        .into_iter()
        .filter(|s| params.server_name.as_ref().is_none_or(|n| *n == s.name))
        .collect();
    let start = match &params.cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|&i| i <= entries.len())
            .ok_or_else(|| AppServerError::InvalidRequest(format!("invalid cursor: {cursor}")))?,
    };
    let limit = params
        .limit
        .map_or(DEFAULT_PAGE_SIZE, |l| l as usize)
        .clamp(1, MAX_PAGE_SIZE);
    let end = start.saturating_add(limit).min(entries.len());
    let next_cursor = (end < entries.len()).then(|| end.to_string());
    let data = entries[start..end].iter().map(wire_status).collect();
    Reply::new(&v2::ListMcpServerStatusResponse { data, next_cursor })
}

/// `config/mcpServer/reload`: re-reads `[mcp_servers.*]`. Every new thread (and every
/// listing without `threadId`) reads the config afresh, so this checks that the config
/// loads and reports an error when it does not; threads already running keep the servers
/// they started with.
pub(crate) async fn reload(state: &ServerState) -> Result<Reply, AppServerError> {
    state.base_config().await?;
    Reply::new(&v2::McpServerRefreshResponse {})
}

fn wire_status(server: &ServerInventory) -> v2::McpServerStatus {
    let (runtime_status, tools_error) = match &server.status {
        ServerRuntimeStatus::Disabled => (v2::McpServerConnectionStatus::Disabled, None),
        ServerRuntimeStatus::NotStarted => (v2::McpServerConnectionStatus::NotStarted, None),
        ServerRuntimeStatus::Starting => (v2::McpServerConnectionStatus::Starting, None),
        ServerRuntimeStatus::Ready => (v2::McpServerConnectionStatus::Connected, None),
        ServerRuntimeStatus::Failed { error } => {
            (v2::McpServerConnectionStatus::Failed, Some(error.clone()))
        }
    };
    let tools: BTreeMap<String, v2::McpTool> = server
        .tools
        .iter()
        .map(|tool| {
            (
                tool.name.clone(),
                v2::McpTool {
                    meta: None,
                    annotations: None,
                    description: Some(tool.description.clone()).filter(|d| !d.is_empty()),
                    icons: None,
                    input_schema: tool.input_schema.clone(),
                    name: tool.name.clone(),
                    output_schema: None,
                    title: None,
                },
            )
        })
        .collect();
    v2::McpServerStatus {
        auth_status: match server.auth {
            ServerAuth::Unsupported => v2::McpAuthStatus::Unsupported,
            ServerAuth::BearerToken => v2::McpAuthStatus::BearerToken,
            ServerAuth::OAuth => v2::McpAuthStatus::OAuth,
            ServerAuth::NotLoggedIn => v2::McpAuthStatus::NotLoggedIn,
        },
        environment_id: None,
        http_origin: server.http_origin.clone(),
        name: server.name.clone(),
        plugin_id: None,
        // Resources are not fetched for a listing: that would be a request to every
        // running server on each call. Clients read them through the thread's tools.
        resource_templates: Vec::new(),
        resources: Vec::new(),
        runtime_status: Some(runtime_status),
        server_capabilities: None,
        server_info: None,
        tool_list_meta: None,
        tools,
        tools_error,
    }
}

/// The `mcpServer/startupStatus/updated` notification for one engine startup event.
pub(crate) fn startup_notification(
    thread_id: &str,
    event: &McpStartupUpdateEvent,
) -> v2::McpServerStatusUpdatedNotification {
    let (status, error) = match &event.status {
        McpStartupStatus::Starting => (v2::McpServerStartupState::Starting, None),
        McpStartupStatus::Ready { .. } => (v2::McpServerStartupState::Ready, None),
        McpStartupStatus::Failed { error } => {
            (v2::McpServerStartupState::Failed, Some(error.clone()))
        }
    };
    v2::McpServerStatusUpdatedNotification {
        environment_id: None,
        error,
        failure_reason: None,
        name: event.server.clone(),
        status,
        thread_id: Some(thread_id.to_string()),
    }
}
