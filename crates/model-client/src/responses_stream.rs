//! Responses API SSE parsing: turns typed stream events (`response.output_text.delta`,
//! `response.output_item.done`, `response.completed`, …) into [`ResponseEvent`]s, and
//! `response.failed` / `error` events into the matching [`ProviderError`].
//!
//! Finished items come from `response.output_item.done`, whose payload is the complete
//! item: reasoning summaries, raw reasoning text and `encrypted_content` are kept exactly
//! as sent so they can be replayed, and call ids and arguments byte for byte. Deltas only
//! drive the live display, except as a fallback for servers whose finished message or
//! reasoning item comes back empty.

use std::collections::HashMap;

use interpreter_protocol::{
    ContentItem, ReasoningContent, ReasoningSummary, ResponseItem, Role, TokenUsage,
};
use serde::Deserialize;

use crate::chat_stream::{CutOff, ResponseEvent, estimated_usage};
use crate::error::{ProviderError, clip_bytes, stream_failure};
use crate::limits::{AnswerBudget, ITEM_OVERHEAD_BYTES, Oversize, StreamLimits};

/// One SSE event's JSON payload. Only the fields any handled event type uses.
#[derive(Debug, Deserialize)]
struct StreamEvent {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    delta: Option<String>,
    /// Which part of a reasoning summary a `reasoning_summary_*` event is about.
    #[serde(default)]
    summary_index: Option<i64>,
    #[serde(default)]
    item: Option<serde_json::Value>,
    #[serde(default)]
    response: Option<ResponseBody>,
    /// Top-level `code` / `message` of an `error` event.
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
    /// Some servers nest the details of an `error` event.
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseBody {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    output: Vec<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    /// A string in practice; some servers send a number.
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputTokensDetails>,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    output_tokens_details: Option<OutputTokensDetails>,
    #[serde(default)]
    total_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct InputTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct OutputTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The output item kinds this client understands; others (built-in tool calls the
/// client never offers) are skipped.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutputItem {
    Message {
        #[serde(default)]
        content: Vec<Part>,
    },
    Reasoning {
        #[serde(default)]
        summary: Vec<Part>,
        #[serde(default)]
        content: Option<Vec<Part>>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    FunctionCall {
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: String,
        #[serde(default)]
        call_id: Option<String>,
        /// The item id, used as the call id only by servers that send no `call_id`.
        #[serde(default)]
        id: Option<String>,
    },
    #[serde(other)]
    Other,
}

/// A typed text part: `output_text`, `refusal`, `summary_text`, `reasoning_text`, `text`.
#[derive(Debug, Deserialize)]
struct Part {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

impl Part {
    fn into_text(self) -> String {
        self.text.or(self.refusal).unwrap_or_default()
    }
}

/// Accumulates one streamed response, within its [`StreamLimits`].
#[derive(Debug)]
pub(crate) struct ResponsesStreamParser {
    provider: String,
    /// Deltas and finished items count towards it; a finished item only with what its
    /// deltas did not already count, so an answer is measured once.
    budget: AnswerBudget,
    /// Size of the request's history, for the usage estimate when the server sends none.
    request_bytes: usize,
    response_id: Option<String>,
    response_model: Option<String>,
    /// Text deltas since the last finished message.
    pending_text: String,
    /// Raw reasoning deltas since the last finished reasoning item.
    pending_reasoning: String,
    /// Reasoning summary deltas since the last finished reasoning item, one string per
    /// part in the order the parts arrived.
    pending_summary: Vec<(i64, String)>,
    /// Where each summary index is in `pending_summary`, so many parts are not searched
    /// for every delta.
    summary_slots: HashMap<i64, usize>,
    output_bytes: usize,
    items_done: usize,
    completed: bool,
}

impl ResponsesStreamParser {
    pub(crate) fn new(provider: String, request_bytes: usize, limits: StreamLimits) -> Self {
        Self {
            provider,
            budget: AnswerBudget::new(limits),
            request_bytes,
            response_id: None,
            response_model: None,
            pending_text: String::new(),
            pending_reasoning: String::new(),
            pending_summary: Vec::new(),
            summary_slots: HashMap::new(),
            output_bytes: 0,
            items_done: 0,
            completed: false,
        }
    }

    /// The bounds this response is read under.
    pub(crate) fn limits(&self) -> StreamLimits {
        self.budget.limits()
    }

    /// The streamed text of one summary part, opened if it is new.
    fn summary_part(&mut self, summary_index: i64) -> Result<&mut String, ProviderError> {
        let at = match self.summary_slots.get(&summary_index) {
            Some(&at) => at,
            None => {
                self.spend(ITEM_OVERHEAD_BYTES)?;
                self.pending_summary.push((summary_index, String::new()));
                let at = self.pending_summary.len() - 1;
                self.summary_slots.insert(summary_index, at);
                at
            }
        };
        Ok(&mut self.pending_summary[at].1)
    }

    /// Counts `bytes` more of the answer.
    fn spend(&mut self, bytes: usize) -> Result<(), ProviderError> {
        self.budget
            .spend(bytes)
            .map_err(|bound| self.too_large(bound))
    }

    fn too_large(&self, bound: Oversize) -> ProviderError {
        self.budget.limits().exceeded(bound, &self.provider)
    }

    /// Whether the terminal event arrived; nothing after it matters.
    pub(crate) fn is_complete(&self) -> bool {
        self.completed
    }

    /// Parses one SSE event. `event_name` is the `event:` line, used when the payload
    /// has no `type`.
    pub(crate) fn push_event(
        &mut self,
        event_name: &str,
        data: &str,
    ) -> Result<Vec<ResponseEvent>, ProviderError> {
        let event: StreamEvent = serde_json::from_str(data).map_err(|err| {
            self.stream_error(format!("failed to parse event ({err}): {}", clip(data)))
        })?;
        let kind = event.kind.clone().unwrap_or_else(|| event_name.to_string());
        let mut events = Vec::new();
        match kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.note_response_id(event.response.as_ref());
            }
            "response.output_text.delta" => {
                if let Some(delta) = event.delta.filter(|d| !d.is_empty()) {
                    self.spend(delta.len())?;
                    self.pending_text.push_str(&delta);
                    events.push(ResponseEvent::OutputTextDelta(delta));
                }
            }
            "response.reasoning_text.delta" => {
                if let Some(delta) = event.delta.filter(|d| !d.is_empty()) {
                    self.spend(delta.len())?;
                    self.pending_reasoning.push_str(&delta);
                    events.push(ResponseEvent::ReasoningDelta(delta));
                }
            }
            "response.reasoning_summary_part.added" => {
                let summary_index = event.summary_index.unwrap_or(0);
                self.summary_part(summary_index)?;
                events.push(ResponseEvent::ReasoningSummaryPartAdded { summary_index });
            }
            "response.reasoning_summary_text.delta" => {
                if let Some(delta) = event.delta.filter(|d| !d.is_empty()) {
                    let summary_index = event.summary_index.unwrap_or(0);
                    self.spend(delta.len())?;
                    self.summary_part(summary_index)?.push_str(&delta);
                    events.push(ResponseEvent::ReasoningSummaryDelta {
                        summary_index,
                        delta,
                    });
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event
                    .item
                    .map(|item| self.finished_item(item))
                    .transpose()?
                    .flatten()
                {
                    self.items_done += 1;
                    events.push(ResponseEvent::OutputItemDone(item));
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or_default();
                if kind == "response.incomplete" {
                    // Like a chat `finish_reason: "length"`: what was produced is kept and
                    // the turn goes on from it.
                    tracing::warn!(
                        provider = %self.provider,
                        reason = response
                            .incomplete_details
                            .as_ref()
                            .and_then(|d| d.reason.as_deref())
                            .unwrap_or("unknown"),
                        "the model response ended incomplete"
                    );
                }
                self.note_response_id(Some(&response));
                // A server that streams no item events still lists the output here.
                if self.items_done == 0 {
                    for item in response.output {
                        if let Some(item) = self.finished_item(item)? {
                            events.push(ResponseEvent::OutputItemDone(item));
                        }
                    }
                }
                let cut_off = (kind == "response.incomplete"
                    && response
                        .incomplete_details
                        .as_ref()
                        .and_then(|d| d.reason.as_deref())
                        .is_none_or(|reason| reason == "max_output_tokens"))
                .then_some(CutOff::Length);
                events.push(self.completed_event(response.usage, cut_off));
                self.completed = true;
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error).unwrap_or_default();
                return Err(self.failure(error));
            }
            "error" => {
                let error = match event.error {
                    Some(nested) => nested,
                    None => ErrorBody {
                        code: event.code,
                        kind: None,
                        message: event.message,
                    },
                };
                return Err(self.failure(error));
            }
            _ => {}
        }
        Ok(events)
    }

    /// Called when the stream ends (EOF or `[DONE]`); an end before the terminal event
    /// means the response was cut off.
    pub(crate) fn finish(&self) -> Result<(), ProviderError> {
        if self.completed {
            Ok(())
        } else {
            Err(self.stream_error("the stream ended before response.completed".to_string()))
        }
    }

    fn note_response_id(&mut self, response: Option<&ResponseBody>) {
        if let Some(id) = response.and_then(|r| r.id.clone()) {
            self.response_id = Some(id);
        }
        if let Some(model) = response
            .and_then(|r| r.model.as_deref())
            .filter(|model| !model.is_empty())
        {
            self.response_model = Some(clip(model));
        }
    }

    /// A finished output item as a history item (`None` for kinds the client skips),
    /// counted towards the answer.
    fn finished_item(
        &mut self,
        raw: serde_json::Value,
    ) -> Result<Option<ResponseItem>, ProviderError> {
        let item = match serde_json::from_value::<OutputItem>(raw) {
            Ok(item) => item,
            Err(err) => {
                tracing::warn!(provider = %self.provider, "skipping an unreadable output item: {err}");
                return Ok(None);
            }
        };
        match item {
            OutputItem::Message { content } => {
                let streamed = std::mem::take(&mut self.pending_text);
                let mut parts: Vec<ContentItem> = content
                    .into_iter()
                    .map(Part::into_text)
                    .filter(|text| !text.is_empty())
                    .map(|text| ContentItem::OutputText { text })
                    .collect();
                let streamed_bytes = streamed.len();
                if parts.is_empty() && !streamed.is_empty() {
                    parts.push(ContentItem::OutputText { text: streamed });
                }
                let bytes = parts
                    .iter()
                    .filter_map(ContentItem::text)
                    .map(str::len)
                    .sum::<usize>();
                self.spend(bytes.saturating_sub(streamed_bytes) + ITEM_OVERHEAD_BYTES)?;
                self.output_bytes += bytes;
                Ok(Some(ResponseItem::Message {
                    role: Role::Assistant,
                    content: parts,
                }))
            }
            OutputItem::Reasoning {
                summary,
                content,
                encrypted_content,
            } => {
                let streamed = std::mem::take(&mut self.pending_reasoning);
                let streamed_summary = std::mem::take(&mut self.pending_summary);
                self.summary_slots.clear();
                let streamed_bytes = streamed.len()
                    + streamed_summary
                        .iter()
                        .map(|(_, text)| text.len())
                        .sum::<usize>();
                let mut summary: Vec<ReasoningSummary> = summary
                    .into_iter()
                    .map(|part| ReasoningSummary::SummaryText {
                        text: part.into_text(),
                    })
                    .collect();
                if summary.is_empty() {
                    summary = streamed_summary
                        .into_iter()
                        .filter(|(_, text)| !text.is_empty())
                        .map(|(_, text)| ReasoningSummary::SummaryText { text })
                        .collect();
                }
                let mut content: Option<Vec<ReasoningContent>> = content.map(|parts| {
                    parts
                        .into_iter()
                        .map(|part| {
                            if part.kind == "text" {
                                ReasoningContent::Text {
                                    text: part.into_text(),
                                }
                            } else {
                                ReasoningContent::ReasoningText {
                                    text: part.into_text(),
                                }
                            }
                        })
                        .collect()
                });
                let has_content = content.as_ref().is_some_and(|parts| !parts.is_empty());
                if summary.is_empty()
                    && !has_content
                    && encrypted_content.is_none()
                    && !streamed.is_empty()
                {
                    content = Some(vec![ReasoningContent::ReasoningText { text: streamed }]);
                }
                let bytes = summary
                    .iter()
                    .map(|ReasoningSummary::SummaryText { text }| text.len())
                    .chain(content.iter().flatten().map(|part| part.text().len()))
                    .sum::<usize>();
                // The encrypted reasoning is kept to be sent back: it is held like text.
                let encrypted_bytes = encrypted_content.as_ref().map_or(0, String::len);
                self.spend(
                    (bytes + encrypted_bytes).saturating_sub(streamed_bytes) + ITEM_OVERHEAD_BYTES,
                )?;
                self.output_bytes += bytes;
                Ok(Some(ResponseItem::Reasoning {
                    summary,
                    content,
                    encrypted_content,
                    wire_field: None,
                }))
            }
            OutputItem::FunctionCall {
                name,
                arguments,
                call_id,
                id,
            } => {
                self.budget
                    .check_arguments(arguments.len())
                    .map_err(|bound| self.too_large(bound))?;
                let call_id = call_id
                    .or(id)
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{name}"));
                self.spend(name.len() + arguments.len() + call_id.len() + ITEM_OVERHEAD_BYTES)?;
                self.output_bytes += name.len() + arguments.len();
                Ok(Some(ResponseItem::FunctionCall {
                    name,
                    arguments,
                    call_id,
                }))
            }
            OutputItem::Other => Ok(None),
        }
    }

    fn completed_event(&self, usage: Option<Usage>, cut_off: Option<CutOff>) -> ResponseEvent {
        let (token_usage, usage_estimated) = match usage {
            Some(usage) => (
                TokenUsage {
                    input_tokens: usage.input_tokens,
                    cached_input_tokens: usage
                        .input_tokens_details
                        .and_then(|d| d.cached_tokens)
                        .unwrap_or(0),
                    cache_write_input_tokens: 0,
                    output_tokens: usage.output_tokens,
                    reasoning_output_tokens: usage
                        .output_tokens_details
                        .and_then(|d| d.reasoning_tokens)
                        .unwrap_or(0),
                    // Saturating: the counts are the server's, and may be absurd.
                    total_tokens: if usage.total_tokens > 0 {
                        usage.total_tokens
                    } else {
                        usage.input_tokens.saturating_add(usage.output_tokens)
                    },
                },
                false,
            ),
            None => (estimated_usage(self.request_bytes, self.output_bytes), true),
        };
        ResponseEvent::Completed {
            response_id: self.response_id.clone(),
            response_model: self.response_model.clone(),
            token_usage,
            usage_estimated,
            cut_off,
        }
    }

    /// Maps a server-reported failure to the error the engine acts on.
    fn failure(&self, error: ErrorBody) -> ProviderError {
        stream_failure(&self.provider, error.code, error.kind, error.message)
    }

    fn stream_error(&self, message: String) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            message,
        }
    }
}

fn clip(text: &str) -> String {
    clip_bytes(text, 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn feed(
        parser: &mut ResponsesStreamParser,
        event: serde_json::Value,
    ) -> Result<Vec<ResponseEvent>, ProviderError> {
        parser.push_event("message", &event.to_string())
    }

    #[test]
    fn items_come_from_done_events_and_usage_from_completed() {
        let mut parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
        let mut events = Vec::new();
        for event in [
            json!({"type": "response.created", "response": {"id": "resp_1"}}),
            json!({"type": "response.reasoning_summary_text.delta", "delta": "Plan"}),
            json!({"type": "response.output_item.done", "item": {"type": "reasoning", "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Plan"}], "encrypted_content": "enc=="}}),
            json!({"type": "response.output_text.delta", "delta": "Hi"}),
            json!({"type": "response.output_item.done", "item": {"type": "message", "id": "msg_1", "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}}),
            json!({"type": "response.output_item.done", "item": {"type": "function_call", "id": "fc_1",
                "call_id": "call_1", "name": "shell", "arguments": "{\"a\": 1}"}}),
            json!({"type": "response.output_item.done", "item": {"type": "web_search_call", "id": "ws_1"}}),
            json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {
                "input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15}}}),
        ] {
            events.extend(feed(&mut parser, event).unwrap_or_default());
        }
        assert!(parser.is_complete());
        assert_eq!(parser.finish(), Ok(()));
        assert_eq!(
            events,
            vec![
                ResponseEvent::ReasoningSummaryDelta {
                    summary_index: 0,
                    delta: "Plan".into()
                },
                ResponseEvent::OutputItemDone(ResponseItem::Reasoning {
                    summary: vec![ReasoningSummary::SummaryText {
                        text: "Plan".into()
                    }],
                    content: None,
                    encrypted_content: Some("enc==".into()),
                    wire_field: None,
                }),
                ResponseEvent::OutputTextDelta("Hi".into()),
                ResponseEvent::OutputItemDone(ResponseItem::assistant_text("Hi")),
                ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                    name: "shell".into(),
                    arguments: "{\"a\": 1}".into(),
                    call_id: "call_1".into()
                }),
                ResponseEvent::Completed {
                    response_id: Some("resp_1".into()),
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
    fn empty_done_items_fall_back_to_deltas_and_output_list() {
        let mut parser = ResponsesStreamParser::new("p".into(), 40, StreamLimits::default());
        let mut events = Vec::new();
        for event in [
            json!({"type": "response.reasoning_text.delta", "delta": "hmm"}),
            json!({"type": "response.output_item.done", "item": {"type": "reasoning", "summary": []}}),
            json!({"type": "response.output_text.delta", "delta": "12345678"}),
            json!({"type": "response.output_item.done", "item": {"type": "message", "content": []}}),
            json!({"type": "response.completed", "response": {}}),
        ] {
            events.extend(feed(&mut parser, event).unwrap_or_default());
        }
        assert_eq!(
            events[1],
            ResponseEvent::OutputItemDone(ResponseItem::reasoning_text("hmm", None))
        );
        assert_eq!(
            events[3],
            ResponseEvent::OutputItemDone(ResponseItem::assistant_text("12345678"))
        );
        assert_eq!(
            events[4],
            ResponseEvent::Completed {
                response_id: None,
                response_model: None,
                token_usage: TokenUsage {
                    input_tokens: 10,
                    output_tokens: 3,
                    total_tokens: 13,
                    ..Default::default()
                },
                usage_estimated: true,
                cut_off: None
            }
        );

        let mut parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
        let events = feed(
            &mut parser,
            json!({"type": "response.completed", "response": {"id": "r", "output": [
                {"type": "function_call", "id": "fc_9", "name": "shell", "arguments": "{}"}
            ]}}),
        )
        .unwrap_or_default();
        assert_eq!(
            events[0],
            ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: "{}".into(),
                call_id: "fc_9".into()
            })
        );
    }

    #[test]
    fn failures_map_to_provider_errors() {
        let parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
        let fail = |event: serde_json::Value| {
            let mut parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
            feed(&mut parser, event).err().map(|err| err.kind())
        };
        use interpreter_protocol::ErrorKind;
        assert_eq!(
            fail(json!({"type": "response.failed", "response": {"error": {
                "code": "context_length_exceeded", "message": "Your input exceeds the context window"}}})),
            Some(ErrorKind::ContextWindowExceeded)
        );
        assert_eq!(
            fail(json!({"type": "response.failed", "response": {"error": {
                "code": "rate_limit_exceeded", "message": "slow down"}}})),
            Some(ErrorKind::ServerOverloaded)
        );
        assert_eq!(
            fail(json!({"type": "error", "code": "invalid_prompt", "message": "no"})),
            Some(ErrorKind::BadRequest)
        );
        assert_eq!(
            fail(json!({"type": "error", "error": {"type": "server_error", "message": "boom"}})),
            Some(ErrorKind::Internal)
        );
        assert!(matches!(
            ResponsesStreamParser::new("p".into(), 0, StreamLimits::default())
                .push_event("message", "{oops"),
            Err(ProviderError::Stream { .. })
        ));
        assert!(matches!(parser.finish(), Err(ProviderError::Stream { .. })));
    }

    #[test]
    fn fuzzing_review_usage_counts_whose_sum_overflows_do_not_panic() {
        let mut parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
        let events = feed(
            &mut parser,
            json!({"type": "response.completed", "response": {"usage": {
                "input_tokens": u64::MAX, "output_tokens": 3}}}),
        )
        .unwrap_or_default();
        let Some(ResponseEvent::Completed { token_usage, .. }) = events.last() else {
            panic!("no Completed event: {events:?}");
        };
        assert_eq!(token_usage.total_tokens, u64::MAX);
    }

    #[test]
    fn event_name_is_used_when_the_payload_has_no_type() {
        let mut parser = ResponsesStreamParser::new("p".into(), 0, StreamLimits::default());
        let events = parser
            .push_event("response.output_text.delta", r#"{"delta": "x"}"#)
            .unwrap_or_default();
        assert_eq!(events, vec![ResponseEvent::OutputTextDelta("x".into())]);
    }
}
