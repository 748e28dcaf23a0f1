//! Prefix stability, per thread: a thread's request repeats its previous request's
//! system prompt and tools exactly and its history as an exact prefix, so a server's
//! prompt cache keeps what it computed. A change that rewrites an earlier message, moves
//! a tool or edits the system prompt mid-thread makes every later request pay for the
//! whole prompt again; the mock reports it as a violation on every wire.
//!
//! Exempt, because the history legitimately starts over: the request after a compaction
//! (a summarising request is one without tools), the request after one the mock did not
//! answer with a complete stream (a failed turn rolls its input back), and a request
//! whose history is shorter than the previous one's (a rollback).
//!
//! A thread is its `prompt_cache_key` (chat and Responses); a Messages request carries
//! none, so there it is its system prompt and first message.

use std::collections::HashMap;

use serde_json::Value;

/// What the mock remembers of each thread's last request.
#[derive(Debug, Default)]
pub(super) struct PrefixTracker {
    threads: HashMap<String, Baseline>,
}

#[derive(Debug)]
struct Baseline {
    request: Value,
    /// The next request starts a new prefix.
    restart: bool,
}

impl PrefixTracker {
    /// Checks `request` against its thread's last one, and remembers it. `completed` says
    /// whether the mock's answer to it was a whole, successful stream.
    pub(super) fn observe(&mut self, request: &Value, completed: bool) -> Vec<String> {
        let Some(key) = thread_key(request) else {
            return Vec::new();
        };
        let summarising = tools(request).is_empty();
        let violations = match self.threads.get(&key) {
            Some(baseline) if !baseline.restart && !summarising => {
                check_prefix(&baseline.request, request)
            }
            _ => Vec::new(),
        };
        self.threads.insert(
            key,
            Baseline {
                request: request.clone(),
                restart: summarising || !completed,
            },
        );
        violations
    }
}

fn thread_key(request: &Value) -> Option<String> {
    if let Some(key) = request.get("prompt_cache_key").and_then(Value::as_str) {
        return Some(key.to_string());
    }
    // Messages: no key on the wire.
    let system = request.get("system")?;
    let first = request.get("messages")?.get(0)?;
    Some(format!(
        "{}\u{0}{}",
        without_cache_control(system),
        without_cache_control(first)
    ))
}

fn tools(request: &Value) -> Vec<Value> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| tools.iter().map(without_cache_control).collect())
        .unwrap_or_default()
}

/// The system prompt: chat's leading system message, Responses' `instructions`,
/// Messages' `system`.
fn system(request: &Value) -> Value {
    if let Some(instructions) = request.get("instructions") {
        return instructions.clone();
    }
    if let Some(system) = request.get("system") {
        return without_cache_control(system);
    }
    request
        .get("messages")
        .and_then(|messages| messages.get(0))
        .filter(|first| first.get("role").and_then(Value::as_str) == Some("system"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The conversation after the system prompt (chat's leading system message is
/// [`system`]'s).
fn history(request: &Value) -> Vec<Value> {
    let items = request
        .get("messages")
        .or_else(|| request.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let skip = usize::from(
        request.get("system").is_none()
            && items
                .first()
                .and_then(|first| first.get("role"))
                .and_then(Value::as_str)
                == Some("system"),
    );
    items.iter().skip(skip).map(without_cache_control).collect()
}

/// `value` without `cache_control` markers: a breakpoint moves to the end of each new
/// request, which is how prompt caching is meant to be used, and is not a change of
/// content.
fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| key.as_str() != "cache_control")
                .map(|(key, value)| (key.clone(), without_cache_control(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

/// The rule in the module doc, for one request after another of the same thread.
pub(super) fn check_prefix(previous: &Value, request: &Value) -> Vec<String> {
    let (before, now) = (history(previous), history(request));
    if now.len() < before.len() {
        return Vec::new();
    }
    let mut violations = Vec::new();
    if system(previous) != system(request) {
        violations.push(format!(
            "prefix: the system prompt changed mid-thread (was {:.300}, now {:.300})",
            system(previous).to_string(),
            system(request).to_string()
        ));
    }
    let (tools_before, tools_now) = (tools(previous), tools(request));
    if tools_before != tools_now {
        let names = |tools: &[Value]| -> Vec<String> {
            tools
                .iter()
                .map(|tool| {
                    tool.pointer("/function/name")
                        .or_else(|| tool.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                })
                .collect()
        };
        violations.push(format!(
            "prefix: the tools changed mid-thread (were {:?}, now {:?})",
            names(&tools_before),
            names(&tools_now)
        ));
    }
    for (at, (was, is)) in before.iter().zip(&now).enumerate() {
        if was == is || (at + 1 == before.len() && extends(was, is)) {
            continue;
        }
        violations.push(format!(
            "prefix: history item {at} was rewritten (was {:.300}, now {:.300})",
            was.to_string(),
            is.to_string()
        ));
        break;
    }
    violations
}

/// Whether `is` is `was` with more content blocks at the end: the last message of a
/// request may gain blocks when the next step of the same role is merged into it (a
/// steering message after tool results, on the Messages wire).
fn extends(was: &Value, is: &Value) -> bool {
    let blocks = |message: &Value| message.get("content").and_then(Value::as_array).cloned();
    match (blocks(was), blocks(is)) {
        (Some(was_blocks), Some(is_blocks)) => {
            was.get("role") == is.get("role")
                && is_blocks.len() > was_blocks.len()
                && is_blocks[..was_blocks.len()] == was_blocks[..]
        }
        _ => false,
    }
}

/// Whether a scripted stream ends the way a whole, successful answer does on its wire.
pub(super) fn stream_completes(chunks: &[Value]) -> bool {
    chunks.iter().any(|chunk| {
        let kind = chunk.get("type").and_then(Value::as_str);
        matches!(
            kind,
            Some("response.completed" | "response.incomplete" | "message_stop")
        ) || chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|choice| choice.get("finish_reason").is_some_and(|f| !f.is_null()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(messages: Value, tools: Value) -> Value {
        json!({"prompt_cache_key": "t", "messages": messages, "tools": tools})
    }

    #[test]
    fn a_growing_thread_passes_and_a_rewrite_or_new_tools_fail() {
        let tools = json!([{"type": "function", "function": {"name": "shell"}}]);
        let mut tracker = PrefixTracker::default();
        let first = chat(
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]),
            tools.clone(),
        );
        assert!(tracker.observe(&first, true).is_empty());
        let grown = chat(
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                   {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]),
            tools.clone(),
        );
        assert!(tracker.observe(&grown, true).is_empty());
        let rewritten = chat(
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "A"},
                   {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"},
                   {"role": "user", "content": "d"}]),
            json!([]),
        );
        // No tools: a summarising request, exempt; the one after it starts over.
        assert!(tracker.observe(&rewritten, true).is_empty());
        assert!(tracker.observe(&first, true).is_empty());
        let other_tools = chat(
            json!([{"role": "system", "content": "s2"}, {"role": "user", "content": "a"},
                   {"role": "user", "content": "e"}]),
            json!([{"type": "function", "function": {"name": "plan"}}]),
        );
        let violations = tracker.observe(&other_tools, true);
        assert_eq!(violations.len(), 2, "{violations:#?}");
        assert!(violations[0].contains("system prompt"));
        assert!(violations[1].contains("[\"shell\"]"));
    }

    #[test]
    fn a_failed_answer_lets_the_next_request_start_over() {
        let mut tracker = PrefixTracker::default();
        let tools = json!([{"name": "shell"}]);
        let one = chat(json!([{"role": "user", "content": "a"}]), tools.clone());
        assert!(tracker.observe(&one, false).is_empty());
        let other = chat(json!([{"role": "user", "content": "b"}]), tools);
        assert!(tracker.observe(&other, true).is_empty());
        assert!(!tracker.observe(&one, true).is_empty());
    }

    #[test]
    fn messages_breakpoints_may_move_and_the_last_message_may_grow() {
        let mut tracker = PrefixTracker::default();
        let request = |messages: Value| {
            json!({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
                   "tools": [{"name": "shell"}], "messages": messages})
        };
        let first = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}
        ]));
        assert!(tracker.observe(&first, true).is_empty());
        let second = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "shell", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x",
                                          "cache_control": {"type": "ephemeral"}}]}
        ]));
        assert!(tracker.observe(&second, true).is_empty());
        let third = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "shell", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"},
                                         {"type": "text", "text": "steer"}]}
        ]));
        assert!(tracker.observe(&third, true).is_empty());
    }
}
