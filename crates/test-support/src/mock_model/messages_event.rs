//! Builders for Anthropic Messages stream events, the payloads the mock sends on
//! `POST /v1/messages` (each becomes `event: <type>` + `data: <json>`).
//!
//! [`MessageEvents`] numbers content blocks the way a real server does and emits for
//! each its `content_block_start`, deltas and `content_block_stop`, e.g.
//! `MessageEvents::new("msg_1").thinking("hmm", "sig").text("hi").end("end_turn", 10, 2)`.

use serde_json::{Value, json};

use super::chunk::split_evenly;

/// One scripted message, built block by block and closed by `message_delta` +
/// `message_stop`.
#[derive(Debug, Clone)]
pub struct MessageEvents {
    next_index: u64,
    events: Vec<Value>,
}

impl MessageEvents {
    /// Starts with `message_start` (no usage yet, as servers send before counting).
    pub fn new(message_id: &str) -> Self {
        Self {
            next_index: 0,
            events: vec![json!({"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": "mock-model",
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0}}})],
        }
    }

    /// A thinking block streamed in two deltas, then its signature.
    pub fn thinking(mut self, text: &str, signature: &str) -> Self {
        let index = self.open(json!({"type": "thinking", "thinking": "", "signature": ""}));
        for piece in split_evenly(text, 2) {
            self.delta(index, json!({"type": "thinking_delta", "thinking": piece}));
        }
        self.delta(
            index,
            json!({"type": "signature_delta", "signature": signature}),
        );
        self.close(index)
    }

    /// A redacted thinking block (opaque data, no deltas).
    pub fn redacted_thinking(mut self, data: &str) -> Self {
        let index = self.open(json!({"type": "redacted_thinking", "data": data}));
        self.close(index)
    }

    /// A text block streamed in two deltas.
    pub fn text(mut self, text: &str) -> Self {
        let index = self.open(json!({"type": "text", "text": ""}));
        for piece in split_evenly(text, 2) {
            self.delta(index, json!({"type": "text_delta", "text": piece}));
        }
        self.close(index)
    }

    /// A `tool_use` block whose input streams as `input_json_delta` in two pieces.
    pub fn tool_use(mut self, id: &str, name: &str, input: &str) -> Self {
        let index = self.open(json!({"type": "tool_use", "id": id, "name": name, "input": {}}));
        for piece in split_evenly(input, 2) {
            self.delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            );
        }
        self.close(index)
    }

    /// Ends with `message_delta` (this stop reason and usage) and `message_stop`.
    pub fn end(self, stop_reason: &str, input_tokens: u64, output_tokens: u64) -> Vec<Value> {
        self.end_with_usage(
            stop_reason,
            json!({"input_tokens": input_tokens, "output_tokens": output_tokens}),
        )
    }

    /// Ends with `message_delta` carrying this `usage` verbatim, and `message_stop`.
    pub fn end_with_usage(mut self, stop_reason: &str, usage: Value) -> Vec<Value> {
        self.events.push(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}));
        self.events.push(json!({"type": "message_stop"}));
        self.events
    }

    /// Ends with an `error` event of this type (e.g. `overloaded_error`).
    pub fn error(mut self, kind: &str, message: &str) -> Vec<Value> {
        self.events
            .push(json!({"type": "error", "error": {"type": kind, "message": message}}));
        self.events
    }

    fn open(&mut self, block: Value) -> u64 {
        let index = self.next_index;
        self.next_index += 1;
        self.events
            .push(json!({"type": "content_block_start", "index": index, "content_block": block}));
        index
    }

    fn delta(&mut self, index: u64, delta: Value) {
        self.events
            .push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }

    fn close(mut self, index: u64) -> Self {
        self.events
            .push(json!({"type": "content_block_stop", "index": index}));
        self
    }
}
