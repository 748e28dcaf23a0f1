//! Calls to the tools of the thread's MCP servers: approval, progress, the result
//! (capped, images attached), and the begin and end events.

use super::*;

pub(super) const DECLINED_MCP_CALL: &str = "this MCP tool call was declined (by the user or the approval policy); do not call it again, find another way or ask";

/// The end of a call to an MCP server (a tool, or a resource list/read): one rule for the
/// end event, an interrupted call, and images the result carries.
pub(super) struct McpCallEnd<'a> {
    pub(super) call_id: &'a str,
    pub(super) invocation: McpInvocation,
    pub(super) started: Instant,
    /// "MCP tool call", "resource read": how an interrupted call is described.
    pub(super) what: &'a str,
    /// Where images in the result came from, for the message that shows them.
    pub(super) images_from: &'a str,
}

impl McpCallEnd<'_> {
    /// Emit the end event; then the result, or the outcome that stops the turn.
    pub(super) async fn report(
        self,
        sess: &Arc<Session>,
        sub_id: &str,
        result: Result<serde_json::Value, String>,
        cancel: &CancellationToken,
    ) -> Result<Result<serde_json::Value, String>, ToolOutcome> {
        sess.emit(
            sub_id,
            EventMsg::McpToolCallEnd(McpToolCallEndEvent {
                call_id: self.call_id.to_string(),
                invocation: self.invocation,
                duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                result: result.clone(),
            }),
        )
        .await;
        if cancel.is_cancelled() {
            return Err(stopped_while_running(self.what, self.started));
        }
        if let Ok(value) = &result {
            attach_images(sess, self.images_from, value).await;
        }
        Ok(result)
    }
}

/// Call a tool of one of the thread's MCP servers.
///
/// Whether to ask first is [`approval::assess_mcp`]'s call (the tool's approval mode, its
/// hints, the policy). A question is shown like a command,
/// `mcp:<server>/<tool> <arguments>`, and "approved for the session" covers later calls
/// of the same tool.
pub(super) async fn handle_mcp(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    tool: McpToolInfo,
    arguments: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let Some(mcp) = &sess.mcp else {
        return ToolOutcome::Output(format!(
            "MCP tool `{}` is not available",
            tool.qualified_name
        ));
    };
    let arguments: Option<serde_json::Value> = if arguments.trim().is_empty() {
        None
    } else {
        match serde_json::from_str(arguments) {
            Ok(value) => Some(value),
            Err(err) => {
                return ToolOutcome::Output(format!(
                    "invalid arguments for `{}`: {err}. Send a JSON object that matches the tool's parameters schema.",
                    tool.qualified_name
                ));
            }
        }
    };
    let invocation = McpInvocation {
        server: tool.server.clone(),
        tool: tool.tool.clone(),
        arguments: arguments.clone(),
    };
    let session_key = format!("mcp:{}", tool.qualified_name);
    let approved_for_session = sess.is_approved_for_session(&session_key).await;
    match approval::assess_mcp(
        sess.config.approval_policy,
        tool.approval,
        tool.hints,
        approved_for_session,
    ) {
        McpAssessment::Run => {}
        McpAssessment::Reject(reason) => return ToolOutcome::Output(reason),
        McpAssessment::Ask(reason) => {
            let shown = vec![
                format!("mcp:{}/{}", tool.server, tool.tool),
                arguments
                    .as_ref()
                    .map(serde_json::Value::to_string)
                    .unwrap_or_default(),
            ];
            let reason = format!(
                "{reason} (tool `{}` of MCP server `{}`)",
                tool.tool, tool.server
            );
            let subject = ApprovalSubject::McpTool {
                name: crate::hook_runs::mcp_tool_name(&tool.server, &tool.tool),
                arguments: arguments.clone().unwrap_or_else(|| serde_json::json!({})),
            };
            // Shown like a command; hooks are told the MCP tool.
            let request = exec_approval_request(sub_id, call_id, &shown, &sess.config.cwd, reason);
            let decision = wait_for_approval(sess, sub_id, call_id, subject, request, cancel).await;
            if let Err(stop) = settle(sess, decision, session_key, DECLINED_MCP_CALL).await {
                return stop;
            }
        }
    }

    sess.emit(
        sub_id,
        EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: call_id.to_string(),
            invocation: invocation.clone(),
        }),
    )
    .await;
    let started = Instant::now();
    let (progress, updates) = tokio::sync::watch::channel(None);
    // Boxed: the call's future is large, and the turn's future holds it otherwise.
    let call = Box::pin(mcp.call_tool(&tool.qualified_name, arguments, cancel, Some(progress)));
    let result = with_progress(sess, sub_id, call_id, call, updates)
        .await
        .map_err(|err| err.to_string());
    let label = format!("MCP tool {}", tool.qualified_name);
    let ended = McpCallEnd {
        call_id,
        invocation,
        started,
        what: "MCP tool call",
        images_from: &label,
    };
    let result = match ended.report(sess, sub_id, result, cancel).await {
        Ok(result) => result,
        Err(stop) => return stop,
    };
    let max_bytes = sess.config.tool_output_max_bytes;
    ToolOutcome::Output(match result {
        Ok(value) => cap_tool_result(mcp_result_text(&value), max_bytes),
        Err(message) => cap_tool_result(format!("MCP tool call failed: {message}"), max_bytes),
    })
}

/// Least time between two progress events of one MCP call: a server may report as often
/// as it likes, a client sees the newest line a few times a second.
pub(super) const MCP_PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Runs `call`, passing on the progress its server reports (see [`MCP_PROGRESS_INTERVAL`])
/// until it ends; nothing is sent after it has ended.
pub(super) async fn with_progress<T>(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    call: impl std::future::Future<Output = T>,
    mut updates: tokio::sync::watch::Receiver<Option<String>>,
) -> T {
    tokio::pin!(call);
    loop {
        tokio::select! {
            biased;
            result = &mut call => return result,
            Ok(()) = updates.changed() => {
                let line = updates.borrow_and_update().clone();
                if let Some(message) = line {
                    sess.emit(
                        sub_id,
                        EventMsg::McpToolCallProgress(McpToolCallProgressEvent {
                            call_id: call_id.to_string(),
                            message,
                        }),
                    )
                    .await;
                }
                tokio::select! {
                    biased;
                    result = &mut call => return result,
                    () = tokio::time::sleep(MCP_PROGRESS_INTERVAL) => {}
                }
            }
        }
    }
}

/// The model-facing text of an MCP `CallToolResult`: its text parts, other parts as JSON,
/// `structuredContent` when there is nothing else, and an `Error:` prefix for `isError`.
pub(super) fn mcp_result_text(result: &serde_json::Value) -> String {
    let mut parts: Vec<String> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(
            |item| match (item["type"].as_str(), item["text"].as_str()) {
                (Some("text"), Some(text)) => text.to_string(),
                (Some(kind @ ("image" | "audio")), _) => format!(
                    "[{kind} ({}), {} bytes; {}]",
                    item["mimeType"].as_str().unwrap_or("unknown type"),
                    item["data"].as_str().map_or(0, |d| d.len() / 4 * 3),
                    if kind == "image" {
                        "images follow as a message"
                    } else {
                        "not shown"
                    }
                ),
                (Some("resource"), _) => resource_part_text(&item["resource"]),
                (Some("resource_link"), _) => format!(
                    "[resource {}{}]",
                    item["uri"].as_str().unwrap_or_default(),
                    item["name"]
                        .as_str()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
                _ => item.to_string(),
            },
        )
        .collect();
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result["isError"].as_bool() == Some(true) {
        format!("Error: {text}")
    } else {
        text
    }
}

/// Images in an MCP result (`image` parts of a tool result, `image/*` blobs of a resource
/// or embedded resource), as `(mime type, base64 data)`.
pub(super) fn result_images(result: &serde_json::Value) -> Vec<(String, String)> {
    let image =
        |mime: &serde_json::Value, data: &serde_json::Value| match (mime.as_str(), data.as_str()) {
            (Some(mime), Some(data)) if mime.starts_with("image/") => {
                Some((mime.to_string(), data.to_string()))
            }
            _ => None,
        };
    let parts = result["content"]
        .as_array()
        .into_iter()
        .chain(result["contents"].as_array())
        .flatten();
    parts
        .filter_map(|part| match part["type"].as_str() {
            Some("image") => image(&part["mimeType"], &part["data"]),
            Some("resource") => image(&part["resource"]["mimeType"], &part["resource"]["blob"]),
            _ => image(&part["mimeType"], &part["blob"]),
        })
        .collect()
}

/// Shows the model the images of an MCP result. A tool output is text only, so they follow
/// it as a user message, which the turn sends with its next model request.
pub(super) async fn attach_images(sess: &Session, source: &str, result: &serde_json::Value) {
    let images = result_images(result);
    if images.is_empty() {
        return;
    }
    let mut content = vec![interpreter_protocol::ContentItem::InputText {
        text: format!("[images returned by {source}]"),
    }];
    content.extend(images.into_iter().map(|(mime, data)| {
        interpreter_protocol::ContentItem::InputImage {
            image_url: format!("data:{mime};base64,{data}"),
        }
    }));
    sess.pending_input
        .lock()
        .await
        .push(interpreter_protocol::ResponseItem::Message {
            role: interpreter_protocol::Role::User,
            content,
        });
}

#[cfg(test)]
mod tests {
    use super::cap_tool_result;

    #[test]
    fn a_short_result_is_kept_whole() {
        assert_eq!(cap_tool_result("short".into(), 10), "short");
    }

    #[test]
    fn a_long_result_keeps_head_and_tail_on_character_boundaries() {
        let text = format!("{}{}", "é".repeat(20), "z".repeat(20));
        let capped = cap_tool_result(text, 21);
        // 10 bytes of head are five `é`; 11 of tail are `z`s.
        assert_eq!(
            capped,
            format!(
                "{}\n[... 39 bytes cut from the middle of this tool result ...]\n{}",
                "é".repeat(5),
                "z".repeat(11)
            )
        );
    }
}
