//! Builders for `chat.completion.chunk` objects, the payloads of the mock's SSE events.

use serde_json::{Value, json};

const CHUNK_ID: &str = "chatcmpl-mock";

fn with_delta(delta: Value) -> Value {
    json!({
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]
    })
}

/// An assistant text fragment (`delta.content`).
pub fn text(fragment: &str) -> Value {
    with_delta(json!({"content": fragment}))
}

/// A reasoning fragment in `delta.reasoning_content`.
pub fn reasoning(fragment: &str) -> Value {
    reasoning_in("reasoning_content", fragment)
}

/// A reasoning fragment in the named delta field (`reasoning_content` or `reasoning`).
pub fn reasoning_in(field: &str, fragment: &str) -> Value {
    let mut delta = serde_json::Map::new();
    delta.insert(field.to_string(), Value::String(fragment.to_string()));
    with_delta(Value::Object(delta))
}

/// A whole tool call in one chunk.
pub fn tool_call(index: u64, id: &str, name: &str, arguments: &str) -> Value {
    tool_call_fragments(index, id, name, arguments, 1)
        .into_iter()
        .next()
        .unwrap_or(Value::Null)
}

/// A tool call split into `pieces` chunks: the first carries id, name and the first
/// slice of the arguments; the rest carry only `index` and further slices.
pub fn tool_call_fragments(
    index: u64,
    id: &str,
    name: &str,
    arguments: &str,
    pieces: usize,
) -> Vec<Value> {
    let slices = split_evenly(arguments, pieces.max(1));
    slices
        .iter()
        .enumerate()
        .map(|(position, slice)| {
            let call = if position == 0 {
                json!({"index": index, "id": id, "type": "function",
                       "function": {"name": name, "arguments": slice}})
            } else {
                json!({"index": index, "function": {"arguments": slice}})
            };
            with_delta(json!({"tool_calls": [call]}))
        })
        .collect()
}

/// The final chunk of a choice (`"stop"`, `"tool_calls"`, `"length"`).
pub fn finish(reason: &str) -> Value {
    json!({
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "model": "mock-model",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]
    })
}

/// The usage-only chunk sent when `stream_options.include_usage` is set.
pub fn usage(prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "model": "mock-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    })
}

/// Splits on char boundaries into at most `pieces` non-empty parts (one part, possibly
/// empty, for empty text).
pub(crate) fn split_evenly(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(pieces);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
