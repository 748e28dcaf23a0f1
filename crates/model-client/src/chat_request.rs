//! Chat Completions request bodies: the history → `messages` conversion and the typed
//! request shape.
//!
//! Choices that differ from a naive mapping, and why:
//! * Developer/system items before the first user or assistant message are merged into
//!   the single leading `system` message; later ones are sent as `user`. Many open-model
//!   servers reject the `developer` role, and several chat templates reject a `system`
//!   message anywhere but first.
//! * Consecutive reasoning / assistant text / function call items form ONE assistant
//!   message, because that is how the model produced them and how thinking models expect
//!   them back (reasoning in the same field it arrived in, call ids and arguments byte
//!   for byte).
//! * Empty assistant text and empty reasoning are left out: there is nothing to send.
//! * Call/output pairing (every call answered once, late messages after the tool
//!   results) comes from [`crate::history`]; this module only spells its steps as
//!   messages, one model turn per assistant message.

use std::collections::BTreeMap;

use interpreter_protocol::{ContentItem, ReasoningEffort, ReasoningSummary, ResponseItem, Role};
use serde::Serialize;

use crate::history::{Step, well_formed};
use crate::prompt::{Prompt, ToolSpec};

/// Field name reasoning text is sent back in when the item does not say which one it
/// arrived in.
pub const DEFAULT_REASONING_FIELD: &str = "reasoning_content";
/// The delta fields reasoning text arrives in on the chat wire.
const CHAT_REASONING_FIELDS: &[&str] = &[DEFAULT_REASONING_FIELD, "reasoning"];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub stream: bool,
    pub stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StreamOptions {
    pub include_usage: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatTool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: ChatFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatFunction {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub json_schema: JsonSchemaFormat,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JsonSchemaFormat {
    pub name: &'static str,
    pub schema: serde_json::Value,
    pub strict: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChatRole {
    System,
    User,
    Assistant,
    Tool,
}

/// One entry of `messages`. `content` is always serialized (as `null` for an assistant
/// message that only calls tools), as the API requires the key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatMessage {
    pub role: ChatRole,
    pub content: Option<ChatContent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ChatToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning text under the field name it arrived in (`reasoning_content` or
    /// `reasoning`); a map because the key is chosen at run time.
    #[serde(flatten)]
    pub reasoning: BTreeMap<String, String>,
}

impl ChatMessage {
    fn text(role: ChatRole, text: String) -> Self {
        Self {
            role,
            content: Some(ChatContent::Text(text)),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning: BTreeMap::new(),
        }
    }

    fn tool_result(call_id: String, output: String) -> Self {
        Self {
            tool_call_id: Some(call_id),
            ..Self::text(ChatRole::Tool, output)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum ChatContent {
    Text(String),
    Parts(Vec<ChatContentPart>),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ChatContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ImageUrl {
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: ChatToolCallFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatToolCallFunction {
    pub name: String,
    pub arguments: String,
}

/// Builds the full request body for one prompt.
pub(crate) fn build_chat_request(
    model: &str,
    prompt: &Prompt,
    reasoning_effort: Option<ReasoningEffort>,
) -> ChatRequest {
    let has_tools = !prompt.tools.is_empty();
    ChatRequest {
        model: model.to_string(),
        messages: history_to_messages(&prompt.instructions, &prompt.input),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: prompt.tools.iter().map(chat_tool).collect(),
        tool_choice: has_tools.then_some("auto"),
        parallel_tool_calls: has_tools.then_some(true),
        response_format: prompt.output_schema.as_ref().map(|schema| ResponseFormat {
            kind: "json_schema",
            json_schema: JsonSchemaFormat {
                name: "output",
                schema: schema.clone(),
                strict: true,
            },
        }),
        reasoning_effort,
        prompt_cache_key: prompt.prompt_cache_key.clone(),
        max_tokens: prompt.max_output_tokens,
        max_completion_tokens: None,
    }
}

fn chat_tool(tool: &ToolSpec) -> ChatTool {
    ChatTool {
        kind: "function",
        function: ChatFunction {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.parameters.clone(),
        },
    }
}

/// Converts instructions + history into Chat Completions `messages`.
pub(crate) fn history_to_messages(instructions: &str, input: &[ResponseItem]) -> Vec<ChatMessage> {
    let mut leading_system = Vec::new();
    if !instructions.trim().is_empty() {
        leading_system.push(instructions.to_string());
    }
    let mut messages = Vec::new();
    for step in well_formed(input.iter().filter(|item| !sends_nothing(item))) {
        match step {
            Step::ModelTurn(items) => messages.push(assistant_message(&items)),
            Step::Item(ResponseItem::FunctionCallOutput { call_id, output }) => {
                messages.push(ChatMessage::tool_result(call_id, output));
            }
            Step::Item(ResponseItem::Message { role, content }) => {
                let is_system = matches!(role, Role::System | Role::Developer);
                if is_system && messages.is_empty() {
                    let text = joined_text(&content);
                    if !text.trim().is_empty() {
                        leading_system.push(text);
                    }
                    continue;
                }
                messages.push(ChatMessage {
                    content: Some(user_content(&content)),
                    ..ChatMessage::text(ChatRole::User, String::new())
                });
            }
            // Model items only ever arrive inside a model turn.
            Step::Item(ResponseItem::Reasoning { .. } | ResponseItem::FunctionCall { .. }) => {}
        }
    }
    if !leading_system.is_empty() {
        messages.insert(
            0,
            ChatMessage::text(ChatRole::System, leading_system.join("\n\n")),
        );
    }
    messages
}

/// Items with no text to send; they must not split or start a model turn.
fn sends_nothing(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Reasoning { .. } => reasoning_text(item).is_empty(),
        ResponseItem::Message {
            role: Role::Assistant,
            content,
        } => joined_text(content).is_empty(),
        ResponseItem::Message { .. }
        | ResponseItem::FunctionCall { .. }
        | ResponseItem::FunctionCallOutput { .. } => false,
    }
}

/// The raw reasoning text when there is any, else the summary.
fn reasoning_text(item: &ResponseItem) -> String {
    let ResponseItem::Reasoning {
        content, summary, ..
    } = item
    else {
        return String::new();
    };
    match content {
        Some(parts) => parts.iter().map(|p| p.text()).collect(),
        None => summary
            .iter()
            .map(|s| match s {
                ReasoningSummary::SummaryText { text } => text.as_str(),
            })
            .collect(),
    }
}

/// One model turn as one assistant message: reasoning concatenated under the field the
/// first part arrived in, texts joined by a blank line, calls byte for byte.
fn assistant_message(turn: &[ResponseItem]) -> ChatMessage {
    let mut text: Option<String> = None;
    let mut reasoning: Option<(String, String)> = None;
    let mut tool_calls = Vec::new();
    for item in turn {
        match item {
            ResponseItem::Reasoning { wire_field, .. } => {
                let part = reasoning_text(item);
                match &mut reasoning {
                    Some((_, existing)) => existing.push_str(&part),
                    None => {
                        // Only a chat field goes back as one: reasoning that came on
                        // another wire (a Messages `thinking` block) uses the default.
                        let field = wire_field
                            .clone()
                            .filter(|field| CHAT_REASONING_FIELDS.contains(&field.as_str()))
                            .unwrap_or_else(|| DEFAULT_REASONING_FIELD.to_string());
                        reasoning = Some((field, part));
                    }
                }
            }
            ResponseItem::Message {
                role: Role::Assistant,
                content,
            } => {
                let part = joined_text(content);
                match &mut text {
                    Some(existing) => {
                        existing.push_str("\n\n");
                        existing.push_str(&part);
                    }
                    None => text = Some(part),
                }
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => tool_calls.push(ChatToolCall {
                id: call_id.clone(),
                kind: "function",
                function: ChatToolCallFunction {
                    name: name.clone(),
                    arguments: arguments.clone(),
                },
            }),
            // A model turn holds model items only.
            ResponseItem::Message { .. } | ResponseItem::FunctionCallOutput { .. } => {}
        }
    }
    let content = match (text, tool_calls.is_empty()) {
        (Some(text), _) => Some(ChatContent::Text(text)),
        // A reasoning-only turn still needs a content string for most servers.
        (None, true) => Some(ChatContent::Text(String::new())),
        (None, false) => None,
    };
    ChatMessage {
        role: ChatRole::Assistant,
        content,
        tool_calls,
        tool_call_id: None,
        reasoning: reasoning.into_iter().collect(),
    }
}

/// The message's text parts as one string, one line break between two parts: parts are
/// separate blocks (an editor's file mention, then the question), and glued together
/// they would read as one word (`…/notes.txtWhat is in it?`). Empty parts add nothing.
fn joined_text(content: &[ContentItem]) -> String {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(ContentItem::text)
        .filter(|text| !text.is_empty())
        .collect();
    parts.join("\n")
}

/// Plain string when the message is text only; typed parts when it carries images.
fn user_content(content: &[ContentItem]) -> ChatContent {
    let has_image = content
        .iter()
        .any(|c| matches!(c, ContentItem::InputImage { .. }));
    if !has_image {
        return ChatContent::Text(joined_text(content));
    }
    ChatContent::Parts(
        content
            .iter()
            .map(|c| match c {
                ContentItem::InputText { text } | ContentItem::OutputText { text } => {
                    ChatContentPart::Text { text: text.clone() }
                }
                ContentItem::InputImage { image_url } => ChatContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: image_url.clone(),
                    },
                },
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    /// Found by Neovim + CodeCompanion over ACP: a file mention and the question, two
    /// blocks of one prompt, reached the model as one word.
    #[test]
    fn codecompanion_prompt_blocks_keep_their_boundary_on_the_chat_wire() {
        let input = vec![ResponseItem::Message {
            role: Role::User,
            content: vec![
                ContentItem::InputText {
                    text: "/work/notes.txt".into(),
                },
                ContentItem::InputText {
                    text: String::new(),
                },
                ContentItem::InputText {
                    text: "What is in the shared file?".into(),
                },
            ],
        }];
        assert_eq!(
            to_json("", &input),
            json!([{"role": "user", "content": "/work/notes.txt\nWhat is in the shared file?"}])
        );
    }

    fn call(id: &str, name: &str, args: &str) -> ResponseItem {
        ResponseItem::FunctionCall {
            name: name.into(),
            arguments: args.into(),
            call_id: id.into(),
        }
    }

    fn output(id: &str, text: &str) -> ResponseItem {
        ResponseItem::FunctionCallOutput {
            call_id: id.into(),
            output: text.into(),
        }
    }

    fn to_json(instructions: &str, input: &[ResponseItem]) -> Value {
        serde_json::to_value(history_to_messages(instructions, input)).unwrap_or_default()
    }

    #[test]
    fn groups_reasoning_text_and_calls_into_one_assistant_message() {
        let input = vec![
            ResponseItem::developer_text("be brief"),
            ResponseItem::user_text("hi"),
            ResponseItem::reasoning_text("think ", Some("reasoning".into())),
            ResponseItem::reasoning_text("more", Some("reasoning".into())),
            ResponseItem::assistant_text("running"),
            call("call_A", "shell", r#"{"cmd": "ls"}"#),
            call("call_B", "shell", r#"{"cmd":"pwd"}"#),
            output("call_A", "a.txt"),
            output("call_B", "/tmp"),
            ResponseItem::assistant_text("done"),
        ];
        assert_eq!(
            to_json("sys", &input),
            json!([
                {"role": "system", "content": "sys\n\nbe brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "running", "reasoning": "think more",
                 "tool_calls": [
                    {"id": "call_A", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}},
                    {"id": "call_B", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\":\"pwd\"}"}}
                 ]},
                {"role": "tool", "content": "a.txt", "tool_call_id": "call_A"},
                {"role": "tool", "content": "/tmp", "tool_call_id": "call_B"},
                {"role": "assistant", "content": "done"}
            ])
        );
    }

    #[test]
    fn unanswered_calls_are_aborted_and_late_user_messages_follow_tool_results() {
        let input = vec![
            ResponseItem::user_text("go"),
            call("c1", "shell", "{}"),
            call("c2", "shell", "{}"),
            ResponseItem::user_text("also this"),
            output("c1", "ok"),
            ResponseItem::developer_text("note"),
            ResponseItem::reasoning_text("hmm", None),
            call("c3", "shell", "{}"),
        ];
        assert_eq!(
            to_json("", &input),
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
                ]},
                {"role": "tool", "content": "ok", "tool_call_id": "c1"},
                {"role": "tool", "content": "aborted", "tool_call_id": "c2"},
                {"role": "user", "content": "also this"},
                {"role": "user", "content": "note"},
                {"role": "assistant", "content": null, "reasoning_content": "hmm", "tool_calls": [
                    {"id": "c3", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
                ]},
                {"role": "tool", "content": "aborted", "tool_call_id": "c3"}
            ])
        );
    }

    #[test]
    fn duplicate_and_orphan_outputs_are_dropped() {
        let input = vec![
            ResponseItem::user_text("go"),
            call("c1", "shell", "{}"),
            output("c1", "first"),
            output("c1", "second"),
            output("nope", "orphan"),
        ];
        assert_eq!(
            to_json("", &input),
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
                ]},
                {"role": "tool", "content": "first", "tool_call_id": "c1"}
            ])
        );
    }

    #[test]
    fn empty_items_do_not_split_a_turn_but_a_dropped_output_does() {
        let input = vec![
            ResponseItem::assistant_text("one"),
            ResponseItem::reasoning_text("", None),
            ResponseItem::assistant_text("two"),
            output("ghost", "orphan"),
            ResponseItem::assistant_text("three"),
            call("c1", "shell", "{}"),
            call("c2", "shell", "{}"),
            output("c1", "ok"),
            ResponseItem::Reasoning {
                summary: Vec::new(),
                content: None,
                encrypted_content: Some("gAAA==".into()),
                wire_field: None,
            },
            output("c2", "late but answered"),
        ];
        assert_eq!(
            to_json("", &input),
            json!([
                {"role": "assistant", "content": "one\n\ntwo"},
                {"role": "assistant", "content": "three", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
                ]},
                {"role": "tool", "content": "ok", "tool_call_id": "c1"},
                {"role": "tool", "content": "late but answered", "tool_call_id": "c2"}
            ])
        );
    }

    #[test]
    fn trailing_reasoning_only_turn_gets_empty_content_and_images_become_parts() {
        let input = vec![
            ResponseItem::Message {
                role: Role::User,
                content: vec![
                    ContentItem::InputText { text: "see".into() },
                    ContentItem::InputImage {
                        image_url: "data:image/png;base64,AA".into(),
                    },
                ],
            },
            ResponseItem::reasoning_text("thinking", None),
        ];
        assert_eq!(
            to_json("   ", &input),
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
                ]},
                {"role": "assistant", "content": "", "reasoning_content": "thinking"}
            ])
        );
    }

    #[test]
    fn request_body_has_tools_schema_and_effort() {
        let prompt = Prompt {
            instructions: "sys".into(),
            input: vec![ResponseItem::user_text("hi")],
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "run".into(),
                parameters: json!({"type": "object"}),
            }],
            output_schema: Some(json!({"type": "object"})),
            prompt_cache_key: None,
            max_output_tokens: None,
        };
        let body = serde_json::to_value(build_chat_request(
            "m",
            &prompt,
            Some(ReasoningEffort::High),
        ))
        .unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type": "function", "function": {"name": "shell", "description": "run", "parameters": {"type": "object"}}}],
                "tool_choice": "auto",
                "parallel_tool_calls": true,
                "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": true}},
                "reasoning_effort": "high"
            })
        );
    }
}
