//! Conversation rules every request must obey, checked against the request's history
//! (`messages` for Chat Completions, `input` for the Responses API) and against what the
//! mock streamed earlier.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

/// What one scripted SSE answer made the model say, reassembled from its chunks the way
/// a client should.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamedTurn {
    pub text: String,
    /// `(field, text)` when reasoning was streamed.
    pub reasoning: Option<(String, String)>,
    /// `(id, name, arguments)` per call, by index order.
    pub tool_calls: Vec<(String, String, String)>,
    /// Responses API reasoning items as streamed (`summary`, `content`,
    /// `encrypted_content`; ids and status left out), which must come back verbatim.
    pub reasoning_items: Vec<Value>,
    /// Messages API thinking and redacted-thinking blocks as streamed (whole, signature
    /// included), which must come back verbatim, before the turn's `tool_use` blocks.
    pub thinking_blocks: Vec<Value>,
}

impl StreamedTurn {
    pub fn from_chunks(chunks: &[Value]) -> Self {
        let mut turn = Self::default();
        let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
        let mut last_index = 0;
        let mut blocks: BTreeMap<u64, Value> = BTreeMap::new();
        for chunk in chunks {
            if chunk.get("type").and_then(Value::as_str) == Some("response.output_item.done")
                && let Some(item) = chunk.get("item")
            {
                turn.push_responses_item(item);
                continue;
            }
            if turn.push_messages_event(chunk, &mut blocks) {
                continue;
            }
            let choices = chunk.get("choices").and_then(Value::as_array);
            for choice in choices.into_iter().flatten() {
                let Some(delta) = choice.get("delta") else {
                    continue;
                };
                if let Some(text) = delta.get("content").and_then(Value::as_str) {
                    turn.text.push_str(text);
                }
                for field in ["reasoning_content", "reasoning"] {
                    if let Some(text) = delta.get(field).and_then(Value::as_str)
                        && !text.is_empty()
                    {
                        let entry = turn
                            .reasoning
                            .get_or_insert_with(|| (field.to_string(), String::new()));
                        entry.1.push_str(text);
                        break;
                    }
                }
                let tool_calls = delta.get("tool_calls").and_then(Value::as_array);
                for call in tool_calls.into_iter().flatten() {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(last_index);
                    last_index = index;
                    let entry = calls.entry(index).or_default();
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        entry.0 = id.to_string();
                    }
                    let function = call.get("function");
                    if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
                    {
                        entry.1.push_str(name);
                    }
                    if let Some(args) = function
                        .and_then(|f| f.get("arguments"))
                        .and_then(Value::as_str)
                    {
                        entry.2.push_str(args);
                    }
                }
            }
        }
        turn.tool_calls.extend(calls.into_values());
        turn
    }

    /// Folds one Messages stream event into the turn; false when `event` is not one.
    fn push_messages_event(&mut self, event: &Value, blocks: &mut BTreeMap<u64, Value>) -> bool {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let append = |block: &mut Value, key: &str, piece: Option<&Value>| {
            let piece = piece.and_then(Value::as_str).unwrap_or("");
            let joined = format!(
                "{}{piece}",
                block.get(key).and_then(Value::as_str).unwrap_or("")
            );
            block[key] = Value::String(joined);
        };
        match event.get("type").and_then(Value::as_str) {
            Some("content_block_start") => {
                if let Some(block) = event.get("content_block") {
                    blocks.insert(index, block.clone());
                }
            }
            Some("content_block_delta") => {
                let (Some(block), Some(delta)) = (blocks.get_mut(&index), event.get("delta"))
                else {
                    return true;
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => append(block, "text", delta.get("text")),
                    Some("thinking_delta") => append(block, "thinking", delta.get("thinking")),
                    Some("signature_delta") => append(block, "signature", delta.get("signature")),
                    Some("input_json_delta") => {
                        append(block, "partial_json", delta.get("partial_json"));
                    }
                    _ => {}
                }
            }
            Some("content_block_stop") => {
                let Some(block) = blocks.remove(&index) else {
                    return true;
                };
                let text = |key: &str| {
                    block
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => self.text.push_str(&text("text")),
                    Some("thinking") => self.thinking_blocks.push(serde_json::json!({
                        "type": "thinking", "thinking": text("thinking"), "signature": text("signature")
                    })),
                    Some("redacted_thinking") => self.thinking_blocks.push(serde_json::json!({
                        "type": "redacted_thinking", "data": text("data")
                    })),
                    Some("tool_use") => {
                        self.tool_calls.push((text("id"), text("name"), text("partial_json")));
                    }
                    _ => {}
                }
            }
            Some("message_start" | "message_delta" | "message_stop" | "ping") => {}
            _ => return false,
        }
        true
    }

    fn push_responses_item(&mut self, item: &Value) {
        let text = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.text.push_str(&text(part, "text"));
                }
            }
            Some("function_call") => self.tool_calls.push((
                text(item, "call_id"),
                text(item, "name"),
                text(item, "arguments"),
            )),
            Some("reasoning") => self.reasoning_items.push(replayable_reasoning(item)),
            _ => {}
        }
    }
}

/// The parts of a reasoning item a client must send back unchanged.
fn replayable_reasoning(item: &Value) -> Value {
    let field = |key: &str| item.get(key).cloned().unwrap_or(Value::Null);
    serde_json::json!({
        "summary": field("summary"),
        "content": field("content"),
        "encrypted_content": field("encrypted_content"),
    })
}

/// Returns one human-readable line per broken rule of an Anthropic Messages request:
/// `max_tokens` present and above the thinking budget, roles alternating from a user
/// message, every `tool_use` answered by a `tool_result` at the start of the next user
/// message, no client-private fields, and the streamed thinking blocks, tool ids and
/// inputs sent back exactly, thinking before the turn's calls.
pub(super) fn check_messages_request(request: &Value, streamed: &[StreamedTurn]) -> Vec<String> {
    let mut violations = Vec::new();
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        violations.push("request has no `messages` array".to_string());
        return violations;
    };
    let max_tokens = request.get("max_tokens").and_then(Value::as_u64);
    match (
        max_tokens,
        request
            .pointer("/thinking/budget_tokens")
            .and_then(Value::as_u64),
    ) {
        (None, _) => violations.push("request has no `max_tokens`".to_string()),
        (Some(max), Some(budget)) if budget >= max || budget < 1024 => violations.push(format!(
            "thinking budget {budget} must be at least 1024 and below max_tokens {max}"
        )),
        _ => {}
    }
    if request.to_string().contains("wire_field") {
        violations.push("request carries the client-private field `wire_field`".to_string());
    }
    let mut open: Vec<String> = Vec::new();
    let mut previous_role = "";
    for (position, message) in messages.iter().enumerate() {
        let role = role(message);
        if position == 0 && role != "user" {
            violations.push(format!("messages[0] is `{role}`, not `user`"));
        }
        if role == previous_role {
            violations.push(format!(
                "messages[{position}]: two `{role}` messages in a row"
            ));
        }
        previous_role = role;
        let blocks = message.get("content").and_then(Value::as_array);
        let blocks: Vec<&Value> = blocks.into_iter().flatten().collect();
        if role == "user" {
            let results: Vec<&str> = blocks
                .iter()
                .take_while(|block| str_field(block, "type") == "tool_result")
                .map(|block| str_field(block, "tool_use_id"))
                .collect();
            let mut expected = std::mem::take(&mut open);
            expected.sort();
            let mut answered: Vec<String> = results.iter().map(|id| id.to_string()).collect();
            answered.sort();
            if expected != answered {
                violations.push(format!(
                    "messages[{position}]: tool_result blocks {answered:?} do not answer the calls {expected:?} of the message before"
                ));
            }
            if blocks
                .iter()
                .skip(results.len())
                .any(|block| str_field(block, "type") == "tool_result")
            {
                violations.push(format!(
                    "messages[{position}]: a tool_result block after other content"
                ));
            }
        } else {
            check_messages_turn(position, &blocks, streamed, &mut violations);
            open = blocks
                .iter()
                .filter(|block| str_field(block, "type") == "tool_use")
                .map(|block| str_field(block, "id").to_string())
                .collect();
        }
    }
    violations
}

/// One assistant message against what was streamed: calls with their ids, names and
/// inputs unchanged, and the thinking blocks of the turn they came from, verbatim and
/// before them.
fn check_messages_turn(
    position: usize,
    blocks: &[&Value],
    streamed: &[StreamedTurn],
    violations: &mut Vec<String>,
) {
    for (at, block) in blocks.iter().enumerate() {
        if str_field(block, "type") != "tool_use" {
            continue;
        }
        let id = str_field(block, "id");
        let Some((turn, call)) = streamed.iter().find_map(|turn| {
            turn.tool_calls
                .iter()
                .find(|call| call.0 == id)
                .map(|call| (turn, call))
        }) else {
            continue;
        };
        if call.1 != str_field(block, "name") {
            violations.push(format!("messages[{position}]: tool_use `{id}` renamed"));
        }
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let streamed_input: Value = serde_json::from_str(&call.2).unwrap_or(Value::Null);
        if input != streamed_input {
            violations.push(format!(
                "messages[{position}]: tool_use `{id}` input changed: streamed {}, sent {input}",
                call.2
            ));
        }
        let before: Vec<&Value> = blocks[..at]
            .iter()
            .copied()
            .filter(|block| matches!(str_field(block, "type"), "thinking" | "redacted_thinking"))
            .collect();
        let expected: Vec<&Value> = turn.thinking_blocks.iter().collect();
        if !expected.is_empty() && before != expected {
            violations.push(format!(
                "messages[{position}]: thinking blocks before tool_use `{id}` are {before:?}, streamed {expected:?}"
            ));
        }
    }
}

/// Returns one human-readable line per broken rule of a Responses API request.
pub(super) fn check_responses_request(request: &Value, streamed: &[StreamedTurn]) -> Vec<String> {
    let mut violations = Vec::new();
    let Some(input) = request.get("input").and_then(Value::as_array) else {
        violations.push("request has no `input` array".to_string());
        return violations;
    };
    check_responses_pairing(input, &mut violations);
    check_responses_replay(input, streamed, &mut violations);
    violations
}

fn item_type(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or("")
}

fn str_field<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Every function call answered by exactly one output with its call id before the next
/// non-assistant message; no client-private fields on the wire.
fn check_responses_pairing(input: &[Value], violations: &mut Vec<String>) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for (position, item) in input.iter().enumerate() {
        if item.get("wire_field").is_some() {
            violations.push(format!(
                "input[{position}]: carries the client-private field `wire_field`"
            ));
        }
        match item_type(item) {
            "function_call" => {
                let id = str_field(item, "call_id").to_string();
                if !seen.insert(id.clone()) {
                    violations.push(format!("input[{position}]: duplicate call id `{id}`"));
                }
                open.push(id);
            }
            "function_call_output" => {
                let id = str_field(item, "call_id");
                if !seen.contains(id) {
                    violations.push(format!(
                        "input[{position}]: function_call_output for `{id}` has no matching earlier function_call"
                    ));
                } else if !answered.insert(id.to_string()) {
                    violations.push(format!(
                        "input[{position}]: function call `{id}` is answered more than once"
                    ));
                } else if let Some(open_position) = open.iter().position(|o| o == id) {
                    open.remove(open_position);
                }
            }
            "message" if str_field(item, "role") != "assistant" && !open.is_empty() => {
                violations.push(format!(
                    "input[{position}] ({} message): function call(s) {open:?} not answered before it",
                    str_field(item, "role")
                ));
                open.clear();
            }
            _ => {}
        }
    }
    if !open.is_empty() {
        violations.push(format!(
            "request ends with unanswered function call(s) {open:?}"
        ));
    }
}

/// Function calls replay what the mock streamed byte for byte, and every reasoning item
/// of a replayed turn comes back with its summary, content and encrypted content intact.
fn check_responses_replay(
    input: &[Value],
    streamed: &[StreamedTurn],
    violations: &mut Vec<String>,
) {
    let mut replayed_turns: Vec<&StreamedTurn> = Vec::new();
    for (position, item) in input.iter().enumerate() {
        match item_type(item) {
            "function_call" => {
                let id = str_field(item, "call_id");
                let name = str_field(item, "name");
                let arguments = str_field(item, "arguments");
                let original = streamed.iter().find_map(|turn| {
                    turn.tool_calls
                        .iter()
                        .find(|c| c.0 == id)
                        .map(|c| (turn, c))
                });
                match original {
                    Some((turn, call)) => {
                        if call.1 != name {
                            violations.push(format!(
                                "input[{position}]: function call `{id}` replayed with name `{name}`, streamed `{}`",
                                call.1
                            ));
                        }
                        if call.2 != arguments {
                            violations.push(format!(
                                "input[{position}]: function call `{id}` arguments changed: streamed {:?}, replayed {arguments:?}",
                                call.2
                            ));
                        }
                        if !replayed_turns.iter().any(|t| std::ptr::eq(*t, turn)) {
                            replayed_turns.push(turn);
                        }
                    }
                    None => {
                        let rewritten = streamed
                            .iter()
                            .flat_map(|t| &t.tool_calls)
                            .find(|c| c.1 == name && c.2 == arguments && !c.0.is_empty());
                        if let Some(call) = rewritten {
                            violations.push(format!(
                                "input[{position}]: call id `{id}` does not match the streamed id `{}`",
                                call.0
                            ));
                        }
                    }
                }
            }
            "message" if str_field(item, "role") == "assistant" => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|part| str_field(part, "text"))
                    .collect();
                if let Some(turn) = streamed.iter().find(|turn| {
                    turn.tool_calls.is_empty() && !turn.text.is_empty() && turn.text == text
                }) && !replayed_turns.iter().any(|t| std::ptr::eq(*t, turn))
                {
                    replayed_turns.push(turn);
                }
            }
            _ => {}
        }
    }
    let sent_reasoning: Vec<Value> = input
        .iter()
        .filter(|item| item_type(item) == "reasoning")
        .map(replayable_reasoning)
        .collect();
    for turn in replayed_turns {
        for reasoning in &turn.reasoning_items {
            if !sent_reasoning.contains(reasoning) {
                violations.push(format!(
                    "reasoning item {reasoning} streamed with a replayed turn is not sent back verbatim"
                ));
            }
        }
    }
}

/// Returns one human-readable line per broken rule.
pub(super) fn check_request(request: &Value, streamed: &[StreamedTurn]) -> Vec<String> {
    let mut violations = Vec::new();
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        violations.push("request has no `messages` array".to_string());
        return violations;
    };
    check_tool_pairing(messages, &mut violations);
    check_replay(messages, streamed, &mut violations);
    violations
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

fn call_ids(message: &Value) -> Vec<String> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| {
            call.get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Every tool call answered exactly once, right after its assistant message.
fn check_tool_pairing(messages: &[Value], violations: &mut Vec<String>) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for (position, message) in messages.iter().enumerate() {
        match role(message) {
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !seen.contains(id) {
                    violations.push(format!(
                        "messages[{position}]: tool message for `{id}` has no matching earlier tool call"
                    ));
                } else if !answered.insert(id.to_string()) {
                    violations.push(format!(
                        "messages[{position}]: tool call `{id}` is answered more than once"
                    ));
                } else if let Some(open_position) = open.iter().position(|o| o == id) {
                    open.remove(open_position);
                } else {
                    violations.push(format!(
                        "messages[{position}]: tool result for `{id}` arrives after other messages"
                    ));
                }
            }
            other => {
                if !open.is_empty() {
                    violations.push(format!(
                        "messages[{position}] ({other}): tool call(s) {open:?} not answered before it"
                    ));
                    open.clear();
                }
                for id in call_ids(message) {
                    if !seen.insert(id.clone()) {
                        violations.push(format!(
                            "messages[{position}]: duplicate tool call id `{id}`"
                        ));
                    }
                    open.push(id);
                }
            }
        }
    }
    if !open.is_empty() {
        violations.push(format!(
            "request ends with unanswered tool call(s) {open:?}"
        ));
    }
}

/// Assistant messages replay what the mock streamed: same call ids and arguments byte
/// for byte, and reasoning in the field it was streamed in.
fn check_replay(messages: &[Value], streamed: &[StreamedTurn], violations: &mut Vec<String>) {
    let by_call_id: HashMap<&str, &StreamedTurn> = streamed
        .iter()
        .flat_map(|turn| {
            turn.tool_calls
                .iter()
                .map(move |call| (call.0.as_str(), turn))
        })
        .collect();
    for (position, message) in messages.iter().enumerate() {
        if role(message) != "assistant" {
            continue;
        }
        let calls: Vec<&Value> = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        let mut matched_turn: Option<&StreamedTurn> = None;
        for call in &calls {
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            let function = call.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let arguments = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or("");
            match by_call_id.get(id) {
                Some(turn) => {
                    matched_turn = Some(turn);
                    if let Some(original) = turn.tool_calls.iter().find(|c| c.0 == id) {
                        if original.1 != name {
                            violations.push(format!(
                                "messages[{position}]: tool call `{id}` replayed with name `{name}`, streamed `{}`",
                                original.1
                            ));
                        }
                        if original.2 != arguments {
                            violations.push(format!(
                                "messages[{position}]: tool call `{id}` arguments changed: streamed {:?}, replayed {arguments:?}",
                                original.2
                            ));
                        }
                    }
                }
                None => {
                    let rewritten = streamed
                        .iter()
                        .flat_map(|t| &t.tool_calls)
                        .find(|c| c.1 == name && c.2 == arguments && !c.0.is_empty());
                    if let Some(original) = rewritten {
                        violations.push(format!(
                            "messages[{position}]: tool call id `{id}` does not match the streamed id `{}`",
                            original.0
                        ));
                    }
                }
            }
        }
        if matched_turn.is_none() && calls.is_empty() {
            let content = message.get("content").and_then(Value::as_str).unwrap_or("");
            matched_turn = streamed.iter().find(|turn| {
                turn.tool_calls.is_empty() && !turn.text.is_empty() && turn.text == content
            });
        }
        if let Some(StreamedTurn {
            reasoning: Some((field, text)),
            ..
        }) = matched_turn
        {
            let replayed = message.get(field.as_str()).and_then(Value::as_str);
            if replayed != Some(text.as_str()) {
                violations.push(format!(
                    "messages[{position}]: reasoning streamed in `{field}` is not replayed verbatim in `{field}` (got {replayed:?})"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::mock_model::chunk;

    #[test]
    fn well_formed_replay_has_no_violations() {
        let streamed = vec![StreamedTurn::from_chunks(
            &[
                vec![chunk::reasoning_in("reasoning", "hmm")],
                chunk::tool_call_fragments(0, "call_1", "shell", "{\"a\":1}", 3),
            ]
            .concat(),
        )];
        let request = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "reasoning": "hmm",
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
        ]});
        assert_eq!(check_request(&request, &streamed), Vec::<String>::new());
    }

    #[test]
    fn responses_requests_are_checked_for_pairing_ids_and_reasoning() {
        use crate::mock_model::responses_event::ResponseEvents;
        let streamed = vec![StreamedTurn::from_chunks(
            &ResponseEvents::new("r1")
                .reasoning(&["plan"], None, Some("enc=="))
                .function_call("call_1", "shell", "{\"a\": 1}", 2)
                .completed(1, 1),
        )];
        let reasoning = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}],
                               "encrypted_content": "enc=="});
        let call = json!({"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"a\": 1}"});
        let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]});
        let good = json!({"input": [user, reasoning, call,
            {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]});
        assert_eq!(
            check_responses_request(&good, &streamed),
            Vec::<String>::new()
        );

        let bad = json!({"input": [user,
            {"type": "reasoning", "summary": [], "wire_field": "reasoning"},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"a\":1}"},
            {"type": "function_call", "call_id": "other", "name": "shell", "arguments": "{\"a\": 1}"},
            user,
            {"type": "function_call_output", "call_id": "call_1", "output": "late"},
            {"type": "function_call_output", "call_id": "ghost", "output": "orphan"}]});
        let violations = check_responses_request(&bad, &streamed);
        // wire_field, changed arguments, rewritten id, unanswered before the user
        // message, orphan output, reasoning not replayed.
        assert_eq!(violations.len(), 6, "{violations:#?}");
    }

    #[test]
    fn broken_requests_are_reported() {
        let streamed = vec![StreamedTurn::from_chunks(&[
            chunk::reasoning("why"),
            chunk::tool_call(0, "call_1", "shell", "{\"a\": 1}"),
        ])];
        let request = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null,
             "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"a\":1}"}}]},
            {"role": "user", "content": "interrupt"},
            {"role": "tool", "tool_call_id": "call_1", "content": "late"},
            {"role": "tool", "tool_call_id": "ghost", "content": "orphan"}
        ]});
        let violations = check_request(&request, &streamed);
        assert_eq!(violations.len(), 5, "{violations:#?}");
    }
}
