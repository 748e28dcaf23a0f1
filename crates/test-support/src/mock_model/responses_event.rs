//! Builders for Responses API stream events, the payloads the mock sends on
//! `POST /v1/responses` (each becomes `event: <type>` + `data: <json>`).
//!
//! [`ResponseEvents`] numbers output items and events the way a real server does, and
//! emits for each item its `output_item.added`, deltas and `output_item.done`, e.g.
//! `ResponseEvents::new("resp_1").text("hi").completed(10, 2)`.

use serde_json::{Value, json};

use super::chunk::split_evenly;

/// One scripted response, built item by item and closed by a terminal event.
#[derive(Debug, Clone)]
pub struct ResponseEvents {
    response_id: String,
    next_output_index: u64,
    next_sequence: u64,
    events: Vec<Value>,
}

impl ResponseEvents {
    /// Starts with `response.created`.
    pub fn new(response_id: &str) -> Self {
        let mut events = Self {
            response_id: response_id.to_string(),
            next_output_index: 0,
            next_sequence: 0,
            events: Vec::new(),
        };
        let response = events.response("in_progress", json!({}));
        events.push("response.created", json!({ "response": response }));
        events
    }

    /// A reasoning item: summary parts and raw text streamed as deltas, then the finished
    /// item carrying them and `encrypted_content`.
    pub fn reasoning(
        mut self,
        summary: &[&str],
        raw: Option<&str>,
        encrypted: Option<&str>,
    ) -> Self {
        let index = self.next_item();
        let id = format!("rs_{}_{index}", self.response_id);
        self.push(
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "reasoning", "id": id, "summary": []}}),
        );
        for (summary_index, text) in summary.iter().enumerate() {
            self.push(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": summary_index,
                    "part": {"type": "summary_text", "text": ""}}),
            );
            self.push(
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": summary_index, "delta": text}),
            );
        }
        if let Some(raw) = raw {
            self.push(
                "response.reasoning_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": raw}),
            );
        }
        let mut item = json!({
            "type": "reasoning",
            "id": id,
            "summary": summary
                .iter()
                .map(|text| json!({"type": "summary_text", "text": text}))
                .collect::<Vec<_>>(),
        });
        if let Some(raw) = raw {
            item["content"] = json!([{"type": "reasoning_text", "text": raw}]);
        }
        if let Some(encrypted) = encrypted {
            item["encrypted_content"] = json!(encrypted);
        }
        self.push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self
    }

    /// An assistant message streamed in `pieces` deltas.
    pub fn text_in_pieces(mut self, text: &str, pieces: usize) -> Self {
        let index = self.next_item();
        let id = format!("msg_{}_{index}", self.response_id);
        self.push(
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "message", "id": id, "role": "assistant",
                   "status": "in_progress", "content": []}}),
        );
        for delta in split_evenly(text, pieces.max(1)) {
            self.push(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": delta}),
            );
        }
        self.push(
            "response.output_item.done",
            json!({"output_index": index, "item": {"type": "message", "id": id, "role": "assistant",
                   "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
        );
        self
    }

    /// An assistant message streamed in two deltas.
    pub fn text(self, text: &str) -> Self {
        self.text_in_pieces(text, 2)
    }

    /// A function call whose arguments stream in `pieces` deltas.
    pub fn function_call(
        mut self,
        call_id: &str,
        name: &str,
        arguments: &str,
        pieces: usize,
    ) -> Self {
        let index = self.next_item();
        let id = format!("fc_{}_{index}", self.response_id);
        self.push(
            "response.output_item.added",
            json!({"output_index": index, "item": {"type": "function_call", "id": id, "call_id": call_id,
                   "name": name, "arguments": "", "status": "in_progress"}}),
        );
        for delta in split_evenly(arguments, pieces.max(1)) {
            self.push(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": delta}),
            );
        }
        self.push(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": arguments}),
        );
        self.push(
            "response.output_item.done",
            json!({"output_index": index, "item": {"type": "function_call", "id": id, "call_id": call_id,
                   "name": name, "arguments": arguments, "status": "completed"}}),
        );
        self
    }

    /// Ends with `response.completed` and plain usage.
    pub fn completed(self, input_tokens: u64, output_tokens: u64) -> Vec<Value> {
        self.completed_with_usage(json!({
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens
        }))
    }

    /// Ends with `response.completed` carrying this `usage` object verbatim.
    pub fn completed_with_usage(mut self, usage: Value) -> Vec<Value> {
        let response = self.response("completed", json!({ "usage": usage }));
        self.push("response.completed", json!({ "response": response }));
        self.events
    }

    /// Ends with `response.incomplete` for this reason (e.g. `max_output_tokens`).
    pub fn incomplete(mut self, reason: &str) -> Vec<Value> {
        let response = self.response(
            "incomplete",
            json!({"incomplete_details": {"reason": reason}}),
        );
        self.push("response.incomplete", json!({ "response": response }));
        self.events
    }

    /// Ends with `response.failed` carrying `{code, message}`.
    pub fn failed(mut self, code: &str, message: &str) -> Vec<Value> {
        let response = self.response(
            "failed",
            json!({"error": {"code": code, "message": message}}),
        );
        self.push("response.failed", json!({ "response": response }));
        self.events
    }

    /// Ends with a bare `error` event.
    pub fn error(mut self, code: &str, message: &str) -> Vec<Value> {
        self.push(
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
        self.events
    }

    /// The events so far, without a terminal event (for cut-off and stall scripts).
    pub fn unfinished(self) -> Vec<Value> {
        self.events
    }

    fn next_item(&mut self) -> u64 {
        let index = self.next_output_index;
        self.next_output_index += 1;
        index
    }

    /// A `response` object in this status, with `extra` fields merged in.
    fn response(&self, status: &str, extra: Value) -> Value {
        let mut response = json!({
            "id": self.response_id,
            "object": "response",
            "status": status,
            "model": "mock-model",
            "output": [],
        });
        if let (Some(target), Value::Object(fields)) = (response.as_object_mut(), extra) {
            target.extend(fields);
        }
        response
    }

    fn push(&mut self, kind: &str, fields: Value) {
        let mut event = json!({"type": kind, "sequence_number": self.next_sequence});
        if let (Some(target), Value::Object(fields)) = (event.as_object_mut(), fields) {
            target.extend(fields);
        }
        self.next_sequence += 1;
        self.events.push(event);
    }
}
