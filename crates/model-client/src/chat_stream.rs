//! Chat Completions SSE chunk parsing: turns `data:` chunks into [`ResponseEvent`]s and
//! the finished items of one response.

use std::collections::HashMap;

use interpreter_protocol::{ResponseItem, TokenUsage};
use serde::Deserialize;

use crate::chat_request::DEFAULT_REASONING_FIELD;
use crate::limits::{AnswerBudget, ITEM_OVERHEAD_BYTES, Oversize, StreamLimits};

/// What the client yields while a response streams.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseEvent {
    /// The server accepted the request and started streaming.
    Created,
    OutputTextDelta(String),
    /// Raw reasoning text (`reasoning_content`, Responses `reasoning_text.delta`).
    ReasoningDelta(String),
    /// A new reasoning summary part begins (Responses `reasoning_summary_part.added`).
    ReasoningSummaryPartAdded {
        summary_index: i64,
    },
    /// A piece of one reasoning summary part (Responses `reasoning_summary_text.delta`).
    ReasoningSummaryDelta {
        summary_index: i64,
        delta: String,
    },
    /// A finished history item, in the order: reasoning, assistant message, tool calls.
    OutputItemDone(ResponseItem),
    Completed {
        response_id: Option<String>,
        /// The model the server says answered (`model` of a chunk, `response.model`);
        /// `None` when it did not say.
        response_model: Option<String>,
        token_usage: TokenUsage,
        /// True when the server sent no `usage` and the counts are byte-length estimates.
        usage_estimated: bool,
        /// Set when the answer stopped before the model meant to (output cap, or a loop
        /// the client cut off); what arrived is kept.
        cut_off: Option<CutOff>,
    },
}

/// Why an answer was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutOff {
    /// The server stopped at the output cap (`finish_reason: "length"`, Responses
    /// `incomplete_details.reason: "max_output_tokens"`).
    Length,
    /// The client stopped a stream that kept repeating the same text.
    Loop,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChatChunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    /// Some servers report failures mid-stream as a chunk with an `error` object.
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct ChatChoice {
    #[serde(default)]
    delta: Option<ChatDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatDelta {
    /// A string, or (some servers) an array of `{text}` parts or one `{text}` object.
    #[serde(default)]
    content: Option<serde_json::Value>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct CompletionTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates one streamed response, within its [`StreamLimits`].
#[derive(Debug, Default)]
pub(crate) struct ChatStreamParser {
    budget: AnswerBudget,
    response_id: Option<String>,
    response_model: Option<String>,
    text: String,
    reasoning: String,
    reasoning_field: Option<String>,
    calls: Vec<PartialCall>,
    /// Where the call of each `index` is in `calls`: a stream of many calls must not
    /// search them all for every fragment.
    slots: HashMap<u64, usize>,
    usage: Option<TokenUsage>,
    finished: bool,
    /// `finish_reason: "length"` was seen.
    length_stop: bool,
}

/// Why a chunk could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChunkError {
    /// Not a chunk, or the server's error report.
    Unreadable(String),
    /// The answer went past one of its bounds.
    TooLarge(Oversize),
}

impl From<Oversize> for ChunkError {
    fn from(bound: Oversize) -> Self {
        Self::TooLarge(bound)
    }
}

impl ChatStreamParser {
    pub(crate) fn new(limits: StreamLimits) -> Self {
        Self {
            budget: AnswerBudget::new(limits),
            ..Default::default()
        }
    }

    /// The bounds this response is read under.
    pub(crate) fn limits(&self) -> StreamLimits {
        self.budget.limits()
    }

    /// Whether a `finish_reason` was seen (an EOF after it is a normal end).
    pub(crate) fn saw_finish_reason(&self) -> bool {
        self.finished
    }

    /// Parses one `data:` payload (not `[DONE]`) and returns the deltas it carries.
    pub(crate) fn push_data(&mut self, data: &str) -> Result<Vec<ResponseEvent>, ChunkError> {
        let chunk: ChatChunk = serde_json::from_str(data).map_err(|err| {
            ChunkError::Unreadable(format!("failed to parse chunk ({err}): {}", clip(data)))
        })?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(ChunkError::Unreadable(format!(
                "server reported an error: {}",
                clip(&message)
            )));
        }
        if chunk.id.is_some() {
            self.response_id = chunk.id;
        }
        if let Some(model) = chunk.model.filter(|model| !model.is_empty()) {
            self.response_model = Some(clip(&model));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(TokenUsage {
                input_tokens: usage.prompt_tokens,
                cached_input_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                cache_write_input_tokens: 0,
                output_tokens: usage.completion_tokens,
                reasoning_output_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
                // Saturating: the counts are the server's, and may be absurd.
                total_tokens: if usage.total_tokens > 0 {
                    usage.total_tokens
                } else {
                    usage.prompt_tokens.saturating_add(usage.completion_tokens)
                },
            });
        }
        let mut events = Vec::new();
        for choice in chunk.choices {
            if let Some(reason) = &choice.finish_reason {
                self.finished = true;
                self.length_stop |= reason == "length";
            }
            let Some(delta) = choice.delta else { continue };
            let reasoning = match (delta.reasoning_content, delta.reasoning) {
                (Some(text), _) if !text.is_empty() => Some((DEFAULT_REASONING_FIELD, text)),
                (_, Some(text)) if !text.is_empty() => Some(("reasoning", text)),
                _ => None,
            };
            if let Some((field, text)) = reasoning {
                self.budget.spend(text.len())?;
                self.reasoning_field
                    .get_or_insert_with(|| field.to_string());
                self.reasoning.push_str(&text);
                events.push(ResponseEvent::ReasoningDelta(text));
            }
            if let Some(text) = delta.content.as_ref().map(content_text)
                && !text.is_empty()
            {
                self.budget.spend(text.len())?;
                self.text.push_str(&text);
                events.push(ResponseEvent::OutputTextDelta(text));
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.push_tool_call(call)?;
            }
        }
        Ok(events)
    }

    /// Adds one tool-call fragment. Everything it adds counts towards the answer, and
    /// the call's arguments so far must stay within their own bound.
    fn push_tool_call(&mut self, delta: ToolCallDelta) -> Result<(), Oversize> {
        let (name, arguments) = delta
            .function
            .map(|f| (f.name, f.arguments))
            .unwrap_or_default();
        let slot = match delta.index {
            Some(index) => self.slots.get(&index).copied(),
            // No index: a continuation of the latest call, unless it clearly opens a new
            // one with a different id.
            None => match (self.calls.last(), &delta.id) {
                (Some(last), Some(id)) if !last.id.is_empty() && &last.id != id => None,
                (Some(_), _) => Some(self.calls.len() - 1),
                (None, _) => None,
            },
        };
        let slot = match slot {
            Some(slot) => slot,
            None => {
                self.budget.spend(ITEM_OVERHEAD_BYTES)?;
                self.calls.push(PartialCall::default());
                let slot = self.calls.len() - 1;
                if let Some(index) = delta.index {
                    self.slots.insert(index, slot);
                }
                slot
            }
        };
        let call = &mut self.calls[slot];
        if let Some(id) = delta.id
            && call.id.is_empty()
        {
            self.budget.spend(id.len())?;
            call.id = id;
        }
        // Some servers repeat the full name on every fragment; only a different piece
        // extends it.
        if let Some(name) = name
            && call.name != name
        {
            self.budget.spend(name.len())?;
            call.name.push_str(&name);
        }
        if let Some(arguments) = arguments {
            self.budget
                .check_arguments(call.arguments.len().saturating_add(arguments.len()))?;
            self.budget.spend(arguments.len())?;
            call.arguments.push_str(&arguments);
        }
        Ok(())
    }

    /// Ends the response: finished items, then `Completed`. `request_bytes` feeds the
    /// usage estimate when the server sent none.
    pub(crate) fn finish(self, request_bytes: usize) -> Vec<ResponseEvent> {
        let mut events = Vec::new();
        let mut output_bytes = self.text.len() + self.reasoning.len();
        if !self.reasoning.is_empty() {
            events.push(ResponseEvent::OutputItemDone(ResponseItem::reasoning_text(
                self.reasoning,
                self.reasoning_field,
            )));
        }
        if !self.text.is_empty() {
            events.push(ResponseEvent::OutputItemDone(ResponseItem::assistant_text(
                self.text,
            )));
        }
        for call in self.calls {
            output_bytes += call.name.len() + call.arguments.len();
            let call_id = if call.id.is_empty() {
                format!("call_{}", call.name)
            } else {
                call.id
            };
            events.push(ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                name: call.name,
                arguments: call.arguments,
                call_id,
            }));
        }
        let (token_usage, usage_estimated) = match self.usage {
            Some(usage) => (usage, false),
            None => (estimated_usage(request_bytes, output_bytes), true),
        };
        events.push(ResponseEvent::Completed {
            response_id: self.response_id,
            response_model: self.response_model,
            token_usage,
            usage_estimated,
            cut_off: self.length_stop.then_some(CutOff::Length),
        });
        events
    }
}

/// Roughly four bytes per token for English text and code; only used when the server
/// reports nothing.
pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The usage of a response whose server reported none: byte-length estimates of the
/// request's history and of the answer. The one fallback of every wire.
pub(crate) fn estimated_usage(request_bytes: usize, output_bytes: usize) -> TokenUsage {
    let input_tokens = estimate_tokens(request_bytes);
    let output_tokens = estimate_tokens(output_bytes);
    TokenUsage {
        input_tokens,
        output_tokens,
        total_tokens: input_tokens.saturating_add(output_tokens),
        ..Default::default()
    }
}

fn content_text(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(parts) => parts.iter().map(content_text).collect(),
        serde_json::Value::Object(map) => map
            .get("text")
            .and_then(|t| t.as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

fn clip(text: &str) -> String {
    crate::error::clip_bytes(text, 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn feed(parser: &mut ChatStreamParser, chunk: serde_json::Value) -> Vec<ResponseEvent> {
        parser.push_data(&chunk.to_string()).unwrap_or_default()
    }

    #[test]
    fn accumulates_text_reasoning_and_fragmented_parallel_calls() {
        let mut parser = ChatStreamParser::default();
        let mut events = Vec::new();
        events.extend(feed(
            &mut parser,
            json!({"id": "r1", "choices": [{"delta": {"reasoning": "let me "}}]}),
        ));
        events.extend(feed(
            &mut parser,
            json!({"id": "r1", "choices": [{"delta": {"reasoning": "think"}}]}),
        ));
        events.extend(feed(
            &mut parser,
            json!({"choices": [{"delta": {"content": [{"text": "ok"}]}}]}),
        ));
        for chunk in [
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_x1", "function": {"name": "shell", "arguments": "{\"a\""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "call_y2", "function": {"name": "read", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                   "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2}}}),
        ] {
            events.extend(feed(&mut parser, chunk));
        }
        assert!(parser.saw_finish_reason());
        events.extend(parser.finish(1000));
        assert_eq!(
            events,
            vec![
                ResponseEvent::ReasoningDelta("let me ".into()),
                ResponseEvent::ReasoningDelta("think".into()),
                ResponseEvent::OutputTextDelta("ok".into()),
                ResponseEvent::OutputItemDone(ResponseItem::reasoning_text(
                    "let me think",
                    Some("reasoning".into())
                )),
                ResponseEvent::OutputItemDone(ResponseItem::assistant_text("ok")),
                ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                    name: "shell".into(),
                    arguments: "{\"a\": 1}".into(),
                    call_id: "call_x1".into()
                }),
                ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                    name: "read".into(),
                    arguments: "{}".into(),
                    call_id: "call_y2".into()
                }),
                ResponseEvent::Completed {
                    response_id: Some("r1".into()),
                    response_model: None,
                    token_usage: TokenUsage {
                        input_tokens: 10,
                        cached_input_tokens: 4,
                        cache_write_input_tokens: 0,
                        output_tokens: 5,
                        reasoning_output_tokens: 2,
                        total_tokens: 15
                    },
                    usage_estimated: false,
                    cut_off: None
                }
            ]
        );
    }

    #[test]
    fn missing_index_continues_latest_call_and_missing_id_is_synthesized() {
        let mut parser = ChatStreamParser::default();
        feed(
            &mut parser,
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"name": "shell", "arguments": "{\"cmd\":"}}]}}]}),
        );
        feed(
            &mut parser,
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"name": "shell", "arguments": "\"ls\"}"}}]}}]}),
        );
        let events = parser.finish(0);
        assert_eq!(
            events[0],
            ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: "{\"cmd\":\"ls\"}".into(),
                call_id: "call_shell".into()
            })
        );
    }

    #[test]
    fn no_usage_is_estimated_from_bytes() {
        let mut parser = ChatStreamParser::default();
        feed(
            &mut parser,
            json!({"choices": [{"delta": {"content": "12345678"}}]}),
        );
        let events = parser.finish(40);
        assert_eq!(
            events.last(),
            Some(&ResponseEvent::Completed {
                response_id: None,
                response_model: None,
                token_usage: TokenUsage {
                    input_tokens: 10,
                    output_tokens: 2,
                    total_tokens: 12,
                    ..Default::default()
                },
                usage_estimated: true,
                cut_off: None
            })
        );
    }

    #[test]
    fn fuzzing_review_usage_counts_whose_sum_overflows_do_not_panic() {
        let mut parser = ChatStreamParser::default();
        feed(
            &mut parser,
            json!({"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 2}}),
        );
        let Some(ResponseEvent::Completed { token_usage, .. }) = parser.finish(0).pop() else {
            panic!("no Completed event");
        };
        assert_eq!(token_usage.total_tokens, u64::MAX);
    }

    #[test]
    fn malformed_and_error_chunks_are_errors() {
        let mut parser = ChatStreamParser::default();
        assert!(parser.push_data("{not json").is_err());
        let err = parser
            .push_data(r#"{"error": {"message": "overloaded"}}"#)
            .err();
        assert_eq!(
            err,
            Some(ChunkError::Unreadable(
                "server reported an error: overloaded".into()
            ))
        );
    }
}
