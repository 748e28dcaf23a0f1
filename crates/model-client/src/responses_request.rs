//! Responses API request bodies (`POST {base_url}/responses`): the history → `input`
//! conversion and the typed request shape.
//!
//! Choices that differ from a naive mapping, and why:
//! * Items are sent one for one in the Responses wire form, without item ids: with
//!   `store: false` the server keeps nothing, so an id would point at an item it cannot
//!   find. Reasoning goes back with its summary, raw content and `encrypted_content`
//!   verbatim, which is how a stateless conversation keeps the model's chain of thought.
//! * Developer messages keep the `developer` role; this API defines it.
//! * Message parts are re-tagged by role (`output_text` for the assistant, `input_text`
//!   otherwise) because the API rejects the other kind for each role.
//! * Reasoning with no summary, content or `encrypted_content`, and assistant messages
//!   with no parts, are left out: there is nothing to send.
//! * Call/output pairing (every call answered once, late messages after the outputs)
//!   comes from [`crate::history`], shared with the chat path.

use interpreter_protocol::{
    ContentItem, ReasoningContent, ReasoningEffort, ReasoningSummary, ResponseItem, Role,
};
use serde::Serialize;

use crate::history::{Step, well_formed};
use crate::prompt::{Prompt, ToolSpec};

/// What `include` asks for when reasoning is on, so reasoning can be replayed statelessly.
const INCLUDE_ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ResponsesRequest {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    pub input: Vec<InputItem>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ResponsesTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    pub store: bool,
    pub stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<TextOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ResponsesTool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    pub description: String,
    /// Our tool schemas are not written to strict mode's rules (every property required,
    /// no additional properties), so strict validation stays off.
    pub strict: bool,
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReasoningOptions {
    pub effort: ReasoningEffort,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TextOptions {
    pub format: TextFormat,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TextFormat {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: &'static str,
    pub schema: serde_json::Value,
    pub strict: bool,
}

/// One entry of `input`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum InputItem {
    Message {
        role: Role,
        content: Vec<InputContent>,
    },
    Reasoning {
        summary: Vec<ReasoningSummary>,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ReasoningContent>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    FunctionCallOutput {
        call_id: String,
        output: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum InputContent {
    InputText { text: String },
    OutputText { text: String },
    InputImage { image_url: String },
}

/// Builds the full request body for one prompt.
pub(crate) fn build_responses_request(
    model: &str,
    prompt: &Prompt,
    reasoning_effort: Option<ReasoningEffort>,
) -> ResponsesRequest {
    let has_tools = !prompt.tools.is_empty();
    let instructions = prompt.instructions.trim();
    ResponsesRequest {
        model: model.to_string(),
        instructions: (!instructions.is_empty()).then(|| prompt.instructions.clone()),
        input: history_to_input(&prompt.input),
        tools: prompt.tools.iter().map(responses_tool).collect(),
        tool_choice: has_tools.then_some("auto"),
        parallel_tool_calls: has_tools.then_some(true),
        store: false,
        stream: true,
        include: reasoning_effort
            .map(|_| vec![INCLUDE_ENCRYPTED_REASONING])
            .unwrap_or_default(),
        reasoning: reasoning_effort.map(|effort| ReasoningOptions { effort }),
        text: prompt.output_schema.as_ref().map(|schema| TextOptions {
            format: TextFormat {
                kind: "json_schema",
                name: "output",
                schema: schema.clone(),
                strict: true,
            },
        }),
        prompt_cache_key: prompt.prompt_cache_key.clone(),
        max_output_tokens: prompt.max_output_tokens,
    }
}

fn responses_tool(tool: &ToolSpec) -> ResponsesTool {
    ResponsesTool {
        kind: "function",
        name: tool.name.clone(),
        description: tool.description.clone(),
        strict: false,
        parameters: tool.parameters.clone(),
    }
}

/// Converts the model-visible history into Responses `input` items.
pub(crate) fn history_to_input(history: &[ResponseItem]) -> Vec<InputItem> {
    let mut input = Vec::with_capacity(history.len());
    for step in well_formed(history.iter().filter(|item| !sends_nothing(item))) {
        match step {
            Step::ModelTurn(items) => input.extend(items.iter().map(input_item)),
            Step::Item(item) => input.push(input_item(&item)),
        }
    }
    input
}

/// Items with nothing to send; they must not split or start a model turn.
fn sends_nothing(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Reasoning {
            summary,
            content,
            encrypted_content,
            wire_field: _,
        } => {
            summary.is_empty()
                && content.as_ref().is_none_or(Vec::is_empty)
                && encrypted_content.is_none()
        }
        ResponseItem::Message {
            role: Role::Assistant,
            content,
        } => content.is_empty(),
        ResponseItem::Message { .. }
        | ResponseItem::FunctionCall { .. }
        | ResponseItem::FunctionCallOutput { .. } => false,
    }
}

fn input_item(item: &ResponseItem) -> InputItem {
    match item {
        ResponseItem::Reasoning {
            summary,
            content,
            encrypted_content,
            wire_field,
        } => InputItem::Reasoning {
            summary: summary.clone(),
            content: content.clone().filter(|parts| !parts.is_empty()),
            // A Messages signature is not this API's encrypted reasoning.
            encrypted_content: encrypted_content
                .clone()
                .filter(|_| !crate::messages_request::is_messages_reasoning(wire_field)),
        },
        ResponseItem::Message { role, content } => message(*role, content),
        ResponseItem::FunctionCall {
            name,
            arguments,
            call_id,
        } => InputItem::FunctionCall {
            name: name.clone(),
            arguments: arguments.clone(),
            call_id: call_id.clone(),
        },
        ResponseItem::FunctionCallOutput { call_id, output } => InputItem::FunctionCallOutput {
            call_id: call_id.clone(),
            output: output.clone(),
        },
    }
}

fn message(role: Role, content: &[ContentItem]) -> InputItem {
    let content = content
        .iter()
        .map(|part| match part {
            ContentItem::InputText { text } | ContentItem::OutputText { text } => {
                if role == Role::Assistant {
                    InputContent::OutputText { text: text.clone() }
                } else {
                    InputContent::InputText { text: text.clone() }
                }
            }
            ContentItem::InputImage { image_url } => InputContent::InputImage {
                image_url: image_url.clone(),
            },
        })
        .collect();
    InputItem::Message { role, content }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn call(id: &str, args: &str) -> ResponseItem {
        ResponseItem::FunctionCall {
            name: "shell".into(),
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

    fn to_json(input: &[ResponseItem]) -> Value {
        serde_json::to_value(history_to_input(input)).unwrap_or_default()
    }

    #[test]
    fn items_map_one_for_one_without_private_fields() {
        let input = vec![
            ResponseItem::developer_text("be brief"),
            ResponseItem::user_text("hi"),
            ResponseItem::Reasoning {
                summary: vec![ReasoningSummary::SummaryText {
                    text: "**Plan**".into(),
                }],
                content: None,
                encrypted_content: Some("gAAA==".into()),
                wire_field: Some("reasoning".into()),
            },
            ResponseItem::reasoning_text("raw thought", Some("reasoning_content".into())),
            ResponseItem::Message {
                role: Role::Assistant,
                content: vec![ContentItem::InputText {
                    text: "running".into(),
                }],
            },
            call("call_A", r#"{"cmd": "ls"}"#),
            call("call_B", "{}"),
            output("call_A", "a.txt"),
            output("call_B", "/tmp"),
        ];
        assert_eq!(
            to_json(&input),
            json!([
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Plan**"}], "encrypted_content": "gAAA=="},
                {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "raw thought"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "running"}]},
                {"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"ls\"}", "call_id": "call_A"},
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "call_B"},
                {"type": "function_call_output", "call_id": "call_A", "output": "a.txt"},
                {"type": "function_call_output", "call_id": "call_B", "output": "/tmp"}
            ])
        );
    }

    #[test]
    fn pairing_is_repaired_like_the_chat_path() {
        let input = vec![
            ResponseItem::user_text("go"),
            call("c1", "{}"),
            ResponseItem::reasoning_text("between calls", None),
            call("c2", "{}"),
            ResponseItem::user_text("also this"),
            output("c1", "ok"),
            output("c1", "again"),
            output("ghost", "orphan"),
            ResponseItem::Message {
                role: Role::User,
                content: vec![ContentItem::InputImage {
                    image_url: "data:image/png;base64,AA".into(),
                }],
            },
            call("c3", "{}"),
        ];
        assert_eq!(
            to_json(&input),
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
                {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "between calls"}]},
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                {"type": "function_call_output", "call_id": "c2", "output": "aborted"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "also this"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c3"},
                {"type": "function_call_output", "call_id": "c3", "output": "aborted"}
            ])
        );
    }

    #[test]
    fn encrypted_only_reasoning_starts_a_turn_and_empty_items_are_left_out() {
        let input = vec![
            call("c1", "{}"),
            call("c2", "{}"),
            output("c1", "ok"),
            ResponseItem::Message {
                role: Role::Assistant,
                content: Vec::new(),
            },
            ResponseItem::Reasoning {
                summary: Vec::new(),
                content: Some(Vec::new()),
                encrypted_content: Some("gAAA==".into()),
                wire_field: None,
            },
            output("c2", "too late"),
        ];
        assert_eq!(
            to_json(&input),
            json!([
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                {"type": "function_call_output", "call_id": "c2", "output": "aborted"},
                {"type": "reasoning", "summary": [], "encrypted_content": "gAAA=="}
            ])
        );
    }

    #[test]
    fn request_body_has_tools_effort_schema_and_cache_key() {
        let prompt = Prompt {
            instructions: "sys".into(),
            input: vec![ResponseItem::user_text("hi")],
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "run".into(),
                parameters: json!({"type": "object"}),
            }],
            output_schema: Some(json!({"type": "object"})),
            prompt_cache_key: Some("thread-1".into()),
            max_output_tokens: None,
        };
        let body = serde_json::to_value(build_responses_request(
            "m",
            &prompt,
            Some(ReasoningEffort::High),
        ))
        .unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "instructions": "sys",
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                "tools": [{"type": "function", "name": "shell", "description": "run", "strict": false, "parameters": {"type": "object"}}],
                "tool_choice": "auto",
                "parallel_tool_calls": true,
                "store": false,
                "stream": true,
                "include": ["reasoning.encrypted_content"],
                "reasoning": {"effort": "high"},
                "text": {"format": {"type": "json_schema", "name": "output", "schema": {"type": "object"}, "strict": true}},
                "prompt_cache_key": "thread-1"
            })
        );
        let bare = Prompt {
            instructions: " ".into(),
            tools: Vec::new(),
            output_schema: None,
            prompt_cache_key: None,
            ..prompt
        };
        let body =
            serde_json::to_value(build_responses_request("m", &bare, None)).unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                "store": false,
                "stream": true
            })
        );
    }
}
