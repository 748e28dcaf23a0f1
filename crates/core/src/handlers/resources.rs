//! `list_mcp_resources` and `read_mcp_resource`: the resources of the thread's MCP
//! servers, as text the model reads.

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListResourcesArgs {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadResourceArgs {
    server: String,
    uri: String,
}

/// `list_mcp_resources` / `read_mcp_resource`. Reading data needs no approval under
/// any policy: nothing changes, like the read-only commands that run without asking.
/// Reported as MCP tool call events, with the tool's name as the tool.
pub(super) async fn handle_resources(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let Some(mcp) = &sess.mcp else {
        return ToolOutcome::Output(format!("`{name}` is not available"));
    };
    let (server, work) = if name == LIST_RESOURCES_TOOL {
        match parse_args::<ListResourcesArgs>(name, arguments) {
            Ok(args) => (args.server.clone(), Ok(args)),
            Err(text) => return ToolOutcome::Output(text),
        }
    } else {
        match parse_args::<ReadResourceArgs>(name, arguments) {
            Ok(args) => (Some(args.server.clone()), Err(args)),
            Err(text) => return ToolOutcome::Output(text),
        }
    };
    let invocation = McpInvocation {
        server: server.clone().unwrap_or_else(|| "*".to_string()),
        tool: name.to_string(),
        arguments: serde_json::from_str(arguments).ok(),
    };
    sess.emit(
        sub_id,
        EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: call_id.to_string(),
            invocation: invocation.clone(),
        }),
    )
    .await;
    let started = Instant::now();
    let result = match work {
        Ok(list) => mcp
            .list_resources(list.server.as_deref(), list.cursor, cancel)
            .await
            .map(|lists| resource_list_value(&lists)),
        Err(read) => mcp.read_resource(&read.server, &read.uri, cancel).await,
    }
    .map_err(|err| err.to_string());
    let label = format!("MCP resource read ({name})");
    let ended = McpCallEnd {
        call_id,
        invocation,
        started,
        what: "resource read",
        images_from: &label,
    };
    let result = match ended.report(sess, sub_id, result, cancel).await {
        Ok(result) => result,
        Err(stop) => return stop,
    };
    let text = match result {
        Ok(value) if name == LIST_RESOURCES_TOOL => value.to_string(),
        Ok(value) => resource_contents_text(&value),
        Err(message) => format!("{name} failed: {message}"),
    };
    ToolOutcome::Output(cap_tool_result(text, sess.config.tool_output_max_bytes))
}

/// Every server's resources in one list, each tagged with its server; `nextCursor` per
/// server that has more.
pub(super) fn resource_list_value(lists: &[(String, serde_json::Value)]) -> serde_json::Value {
    let mut resources = Vec::new();
    let mut cursors = serde_json::Map::new();
    for (server, list) in lists {
        for resource in list["resources"].as_array().into_iter().flatten() {
            let mut resource = resource.clone();
            if let Some(object) = resource.as_object_mut() {
                object.insert("server".to_string(), json!(server));
            }
            resources.push(resource);
        }
        if let Some(cursor) = list.get("nextCursor").filter(|c| !c.is_null()) {
            cursors.insert(server.clone(), cursor.clone());
        }
    }
    let mut value = json!({ "resources": resources });
    if !cursors.is_empty() {
        value["nextCursor"] = serde_json::Value::Object(cursors);
    }
    value
}

/// The model-facing text of a `ReadResourceResult`: text parts as they are, binary
/// parts as a one-line description (base64 would only fill the context).
pub(super) fn resource_contents_text(result: &serde_json::Value) -> String {
    result["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(resource_part_text)
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn resource_part_text(part: &serde_json::Value) -> String {
    let uri = part["uri"].as_str().unwrap_or_default();
    let mime = part["mimeType"]
        .as_str()
        .unwrap_or("application/octet-stream");
    match (part["text"].as_str(), part["blob"].as_str()) {
        (Some(text), _) => text.to_string(),
        (None, Some(blob)) if mime.starts_with("image/") => format!(
            "[image resource {uri} ({mime}), {} bytes; images follow as a message]",
            blob.len() / 4 * 3
        ),
        (None, Some(blob)) => format!(
            "[binary resource {uri} ({mime}), {} bytes; not shown]",
            blob.len() / 4 * 3
        ),
        (None, None) => part.to_string(),
    }
}
