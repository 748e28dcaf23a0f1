//! The MCP servers the agent itself uses (`[mcp_servers.*]`), as a client sees them:
//! `mcpServerStatus/list`, `config/mcpServer/reload`, and the `mcpServer/startupStatus/updated`
//! notifications built from the engine's `McpStartupUpdate` events, and the
//! `mcpServer/elicitation/request` server→client request that forwards a server's question
//! (the engine's `ElicitationRequest` event, answered with `Op::ResolveElicitation`).
//!
//! Elicitations fail closed: no client to ask, no answer within the engine's deadline
//! (`approval_timeout_sec`), a malformed answer, an error answer, the connection closing or
//! the turn ending all decline. An accepted answer whose content does not fit the requested
//! schema is declined by the engine, which checks every front end's answers.
//!
//! Everything about a server (whether it runs, its tools, how it authenticates) comes from
//! the engine ([`interpreter_core::ThreadManager::mcp_inventory`]); this module only maps it
//! to the wire and pages it. Listing never starts a server: one that no thread has used yet
//! is reported as `notStarted`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::{ServerAuth, ServerInventory, ServerRuntimeStatus, mcp_oauth};
use interpreter_protocol::{
    ElicitationAction, ElicitationRequestEvent, ElicitationResponse, McpStartupStatus,
    McpStartupUpdateEvent, Op,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::connection::{ClientAnswer, Connection};
use crate::error::AppServerError;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::state::{LoadedThread, Reply, ServerState, parse_thread_id};

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

/// `mcpServer/tool/call`: the client calls a tool of a loaded thread's server itself,
/// without approval (the client speaks for the user) and without a trace in the thread's
/// history; the engine owns the rules ([`interpreter_core::Thread::call_mcp_tool`]).
/// Ends when the server answers, at its `tool_timeout_sec`, or when the connection closes.
pub(crate) async fn tool_call(
    state: &ServerState,
    connection: &Connection,
    params: v2::McpServerToolCallParams,
) -> Result<Reply, AppServerError> {
    no_environment(params.environment_id.as_deref())?;
    let thread = live_thread(state, &params.thread_id).await?;
    let result = thread
        .call_mcp_tool(
            &params.server,
            &params.tool,
            params.arguments,
            &connection.closed,
        )
        .await?;
    Reply::new(&v2::McpServerToolCallResponse {
        meta: result.get("_meta").cloned(),
        content: result["content"].as_array().cloned().unwrap_or_default(),
        is_error: result["isError"].as_bool(),
        structured_content: result
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .cloned(),
    })
}

/// `mcpServer/resource/read` on a loaded thread's server. Hosted connectors and apps
/// (`connectorId`, `target`) do not exist here and are refused.
pub(crate) async fn resource_read(
    state: &ServerState,
    connection: &Connection,
    params: v2::McpResourceReadParams,
) -> Result<Reply, AppServerError> {
    no_environment(params.environment_id.as_deref())?;
    if params.connector_id.is_some() || params.target.as_ref().is_some_and(|t| !t.is_null()) {
        return Err(AppServerError::InvalidParams(
            "hosted connectors and apps are not served: read from one of the thread's MCP servers"
                .to_string(),
        ));
    }
    let thread_id = params.thread_id.as_deref().ok_or_else(|| {
        AppServerError::InvalidParams(
            "threadId is required: resources are read through a loaded thread's MCP servers"
                .to_string(),
        )
    })?;
    let thread = live_thread(state, thread_id).await?;
    let result = thread
        .read_mcp_resource(&params.server, &params.uri, &connection.closed)
        .await?;
    Reply::new(&v2::McpResourceReadResponse {
        contents: result["contents"].as_array().cloned().unwrap_or_default(),
        origin_call_id: None,
    })
}

/// Longest a login may take to produce its authorization URL (discovery and client
/// registration, each step under its own deadline in the engine).
const LOGIN_URL_DEADLINE: Duration = Duration::from_secs(120);

/// Longest wait for the browser a client may ask for (`timeoutSecs`).
const MAX_LOGIN_WAIT: Duration = Duration::from_secs(3600);

/// `mcpServer/oauth/login`: discovery and client registration, then the answer with the
/// authorization URL; the wait for the browser goes on in the background and ends with
/// `mcpServer/oauthLogin/completed` to this connection (success, error, or the timeout).
/// The tokens are saved where `interpreter mcp login` saves them. A failure before there
/// is a URL is the request's error. The wait ends early if the connection closes.
pub(crate) async fn oauth_login(
    state: &ServerState,
    connection: &Arc<Connection>,
    params: v2::McpServerOauthLoginParams,
) -> Result<Reply, AppServerError> {
    no_environment(params.environment_id.as_deref())?;
    if let Some(
        other @ (v2::McpServerOauthClientRegistration::Cimd
        | v2::McpServerOauthClientRegistration::Dcr),
    ) = params.client_registration
    {
        return Err(AppServerError::InvalidParams(format!(
            "clientRegistration {other:?} is not served: registration is automatic \
             (`oauth.client_id` or `oauth.client_metadata_url` in the server's config entry)"
        )));
    }
    let callback_timeout = match params.timeout_secs {
        None => None,
        Some(secs) if secs > 0 => {
            Some(Duration::from_secs(secs.unsigned_abs()).min(MAX_LOGIN_WAIT))
        }
        Some(secs) => {
            return Err(AppServerError::InvalidParams(format!(
                "timeoutSecs must be positive, got {secs}"
            )));
        }
    };
    let config = match &params.thread_id {
        Some(id) => Arc::new(live_thread(state, id).await?.config().clone()),
        None => Arc::new(state.base_config().await?),
    };
    let server = config
        .mcp_servers
        .get(&params.name)
        .cloned()
        .ok_or_else(|| {
            AppServerError::InvalidParams(format!("unknown MCP server '{}'", params.name))
        })?;
    let options = mcp_oauth::LoginOptions {
        scopes: params.scopes.unwrap_or_default(),
        follow_redirect: false,
        callback_timeout,
    };
    let login_id = uuid::Uuid::now_v7().to_string();
    let (url_tx, url_rx) = tokio::sync::oneshot::channel::<Result<String, String>>();
    let url_tx = std::sync::Mutex::new(Some(url_tx));
    let take_url_tx = move || url_tx.lock().ok().and_then(|mut slot| slot.take());
    let notify_to = connection.clone();
    let name = params.name.clone();
    let thread_id = params.thread_id.clone();
    let completion_login_id = login_id.clone();
    let login = tokio::spawn(async move {
        let show_url = |url: &str| {
            if let Some(tx) = take_url_tx() {
                let _ = tx.send(Ok(url.to_string()));
            }
        };
        let outcome = tokio::select! {
            outcome = mcp_oauth::login(&name, &server, &config.env, &config.home, &options, &show_url) => {
                outcome.map_err(|err| err.to_string())
            }
            () = notify_to.closed.cancelled() => Err("the connection closed".to_string()),
        };
        match take_url_tx() {
            // No URL was shown: the request itself failed, with this error.
            Some(tx) => {
                let _ = tx.send(Err(outcome.err().unwrap_or_default()));
            }
            None => notify_to.notify(
                notification_names::MCP_SERVER_OAUTH_LOGIN_COMPLETED,
                &v2::McpServerOauthLoginCompletedNotification {
                    error: outcome.as_ref().err().cloned(),
                    login_id: Some(completion_login_id),
                    name,
                    success: outcome.is_ok(),
                    thread_id,
                },
            ),
        }
    });
    let url = match tokio::time::timeout(LOGIN_URL_DEADLINE, url_rx).await {
        Ok(Ok(Ok(url))) => url,
        Ok(Ok(Err(error))) => return Err(AppServerError::InvalidRequest(error)),
        Ok(Err(_)) => {
            return Err(AppServerError::Internal(
                "the login ended without an answer".to_string(),
            ));
        }
        Err(_) => {
            login.abort();
            return Err(AppServerError::InvalidRequest(format!(
                "no authorization URL within {} s",
                LOGIN_URL_DEADLINE.as_secs()
            )));
        }
    };
    Reply::new(&v2::McpServerOauthLoginResponse {
        authorization_url: url,
        login_id: Some(login_id),
    })
}

/// A thread loaded in this process: asking would otherwise start its servers for a
/// thread nobody has opened.
async fn live_thread(
    state: &ServerState,
    id: &str,
) -> Result<Arc<interpreter_core::Thread>, AppServerError> {
    let thread_id = parse_thread_id(id)?;
    state
        .thread_manager
        .get_thread(thread_id)
        .await
        .ok_or_else(|| AppServerError::InvalidRequest(format!("thread not loaded: {id}")))
}

/// Servers have one registration each here; an environment scope cannot be honoured.
fn no_environment(environment_id: Option<&str>) -> Result<(), AppServerError> {
    match environment_id {
        None => Ok(()),
        Some(id) => Err(AppServerError::InvalidParams(format!(
            "unknown environment `{id}`: MCP servers are not registered per environment here"
        ))),
    }
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

/// Forward an MCP server's question to `connection` (the turn's owner, else a follower)
/// and answer the engine with what comes back, or with a decline when nothing usable does.
pub(crate) fn ask_elicitation(
    loaded: &Arc<LoadedThread>,
    connection: Option<Arc<Connection>>,
    turn_id: &str,
    request: ElicitationRequestEvent,
    turn_over: &CancellationToken,
) {
    let params = elicitation_params(loaded, turn_id, &request);
    let (Some(connection), Some(params)) = (connection, params) else {
        // Nobody to ask, or a request we cannot represent: declined at once rather than
        // left to the deadline.
        resolve(
            loaded.clone(),
            None,
            request.id,
            ElicitationResponse::decline(),
        );
        return;
    };
    let (request_id, reply) = connection.request("mcpServer/elicitation/request", &params);
    // The engine declines by itself at its deadline and says so (`RequestExpired`);
    // stopping then forgets the request and tells followers it is resolved.
    let expired = loaded.open_requests.open(&request.id);
    let turn_over = turn_over.clone();
    let loaded = loaded.clone();
    tokio::spawn(async move {
        let response = tokio::select! {
            answer = reply => match answer {
                Ok(answer) => decode_answer(answer),
                Err(_) => ElicitationResponse::decline(),
            },
            () = expired.cancelled() => ElicitationResponse::decline(),
            () = turn_over.cancelled() => ElicitationResponse::decline(),
            () = connection.closed.cancelled() => ElicitationResponse::decline(),
        };
        loaded.open_requests.close(&request.id);
        connection.forget_request(&request_id);
        if expired.is_cancelled() {
            // The engine declined it at its deadline: only the followers are told.
            crate::approvals::settle_request(
                loaded,
                Some(request_id),
                None,
                "withdrawing an expired question",
            );
        } else {
            resolve(loaded, Some(request_id), request.id, response);
        }
    });
}

fn elicitation_params(
    loaded: &LoadedThread,
    turn_id: &str,
    request: &ElicitationRequestEvent,
) -> Option<v2::McpServerElicitationRequestParams> {
    let mut raw = request.request.clone();
    // Servers following the 2025-06-18 spec send no `mode`: a form.
    if let Value::Object(map) = &mut raw {
        map.entry("mode").or_insert_with(|| Value::from("form"));
    }
    let parsed = serde_json::from_value::<v2::McpServerElicitationRequest>(raw);
    match parsed {
        Ok(parsed) => Some(v2::McpServerElicitationRequestParams {
            environment_id: None,
            server_name: request.server.clone(),
            thread_id: loaded.id().to_string(),
            turn_id: Some(turn_id.to_string()).filter(|t| !t.is_empty()),
            request: parsed,
        }),
        Err(e) => {
            tracing::info!(
                "MCP elicitation from `{}` not forwarded: {e}",
                request.server
            );
            None
        }
    }
}

/// The client's answer, strictly: anything but a well-formed response is a decline, and
/// content only travels with `accept`.
fn decode_answer(answer: ClientAnswer) -> ElicitationResponse {
    let Ok(value) = answer else {
        return ElicitationResponse::decline();
    };
    match serde_json::from_value::<v2::McpServerElicitationRequestResponse>(value) {
        Ok(response) => match response.action {
            v2::McpServerElicitationAction::Accept => ElicitationResponse {
                action: ElicitationAction::Accept,
                content: response.content,
            },
            v2::McpServerElicitationAction::Decline => ElicitationResponse::decline(),
            v2::McpServerElicitationAction::Cancel => ElicitationResponse {
                action: ElicitationAction::Cancel,
                content: None,
            },
        },
        Err(e) => {
            tracing::info!("malformed elicitation answer ({e}); declined");
            ElicitationResponse::decline()
        }
    }
}

fn resolve(
    loaded: Arc<LoadedThread>,
    request_id: Option<crate::protocol::RequestId>,
    id: String,
    response: ElicitationResponse,
) {
    crate::approvals::settle_request(
        loaded,
        request_id,
        Some(Op::ResolveElicitation { id, response }),
        "answering an MCP server's question",
    );
}
