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
//! * Every function call is answered exactly once, as on the chat path: calls without an
//!   output get a synthetic `"aborted"` output, duplicate or orphan outputs are dropped,
//!   and user messages that arrive between a call and its output follow the outputs.

use interpreter_protocol::{
    ContentItem, ReasoningContent, ReasoningEffort, ReasoningSummary, ResponseItem, Role,
};
use serde::Serialize;

use crate::chat_request::ABORTED_TOOL_OUTPUT;
use crate::prompt::{Prompt, ToolSpec};

/// What `include` asks for when reasoning is on, so reasoning can be replayed statelessly.
const INCLUDE_ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesRequest {
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
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesTool {
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
pub struct ReasoningOptions {
    pub effort: ReasoningEffort,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextOptions {
    pub format: TextFormat,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TextFormat {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: &'static str,
    pub schema: serde_json::Value,
    pub strict: bool,
}

/// One entry of `input`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputItem {
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
pub enum InputContent {
    InputText { text: String },
    OutputText { text: String },
    InputImage { image_url: String },
}

/// Builds the full request body for one prompt.
pub fn build_responses_request(
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

/// Walks the history once, enforcing the call/output pairing described in the module doc.
#[derive(Default)]
struct Converter {
    input: Vec<InputItem>,
    /// Calls emitted so far that still await their output, oldest first.
    open_calls: Vec<String>,
    /// Whether the previous item was produced by the model; a run of such items is one
    /// model turn, whose calls may be answered after the whole run.
    in_model_turn: bool,
    /// User-side messages held back until the open calls are answered.
    deferred: Vec<InputItem>,
}

impl Converter {
    fn close_open_calls(&mut self) {
        for call_id in std::mem::take(&mut self.open_calls) {
            self.input.push(InputItem::FunctionCallOutput {
                call_id,
                output: ABORTED_TOOL_OUTPUT.to_string(),
            });
        }
        self.input.append(&mut self.deferred);
    }

    fn model_item(&mut self, item: InputItem) {
        if !self.in_model_turn && (!self.open_calls.is_empty() || !self.deferred.is_empty()) {
            self.close_open_calls();
        }
        if let InputItem::FunctionCall { call_id, .. } = &item {
            self.open_calls.push(call_id.clone());
        }
        self.in_model_turn = true;
        self.input.push(item);
    }

    fn item(&mut self, item: &ResponseItem) {
        match item {
            ResponseItem::Reasoning {
                summary,
                content,
                encrypted_content,
                wire_field: _,
            } => {
                let content = content.clone().filter(|parts| !parts.is_empty());
                if summary.is_empty() && content.is_none() && encrypted_content.is_none() {
                    return;
                }
                self.model_item(InputItem::Reasoning {
                    summary: summary.clone(),
                    content,
                    encrypted_content: encrypted_content.clone(),
                });
            }
            ResponseItem::Message {
                role: Role::Assistant,
                content,
            } => {
                if content.is_empty() {
                    return;
                }
                self.model_item(message(Role::Assistant, content));
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => self.model_item(InputItem::FunctionCall {
                name: name.clone(),
                arguments: arguments.clone(),
                call_id: call_id.clone(),
            }),
            ResponseItem::FunctionCallOutput { call_id, output } => {
                self.in_model_turn = false;
                let Some(position) = self.open_calls.iter().position(|id| id == call_id) else {
                    tracing::warn!(
                        call_id,
                        "dropping a tool output that matches no open tool call"
                    );
                    return;
                };
                self.open_calls.remove(position);
                self.input.push(InputItem::FunctionCallOutput {
                    call_id: call_id.clone(),
                    output: output.clone(),
                });
                if self.open_calls.is_empty() {
                    self.input.append(&mut self.deferred);
                }
            }
            ResponseItem::Message { role, content } => {
                self.in_model_turn = false;
                let item = message(*role, content);
                if self.open_calls.is_empty() {
                    self.input.push(item);
                } else {
                    self.deferred.push(item);
                }
            }
        }
    }
}

/// Converts the model-visible history into Responses `input` items.
pub fn history_to_input(history: &[ResponseItem]) -> Vec<InputItem> {
    let mut converter = Converter::default();
    for item in history {
        converter.item(item);
    }
    converter.close_open_calls();
    converter.input
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
