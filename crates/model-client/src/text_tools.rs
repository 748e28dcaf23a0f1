//! Tool calls written as text.
//!
//! Open models are trained to emit tool calls as markup, and the server is supposed to
//! parse that markup into structured `tool_calls`. When it does not (llama.cpp without
//! `--jinja`, vLLM without `--enable-auto-tool-choice`, a template with no tool support,
//! a model that drifts into another family's format), the markup arrives as plain text
//! and the user sees `<tool_call>{…}</tool_call>` while nothing runs. This module finds
//! such calls in a finished answer and turns them into calls the engine runs:
//!
//! * Hermes / Qwen: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
//! * GLM 4.5+: `<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`
//! * Qwen3-Coder: `<tool_call><function=name><parameter=k>v</parameter></function></tool_call>`
//! * Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.name:0
//!   <|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`
//! * Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}]` and
//!   `[TOOL_CALLS]name[ARGS]{…}`
//! * a bare JSON object (optionally in a code fence) `{"name": …, "arguments": …}` whose
//!   name is one of the offered tools.
//!
//! Arguments get a bounded repair (code fences, trailing commas, single quotes, Python
//! literals). A call whose arguments still do not parse is passed on with the raw text,
//! so the tool reports invalid arguments and the model can read why; markup with no
//! readable tool name becomes a call of [`UNPARSED_TOOL_CALL`], which the engine answers
//! with the list of real tools. Fenced shell blocks are never run: a model showing a
//! command is not a model asking to run it.

use serde_json::{Map, Value};

/// How tool-call markup begins, per family: text from here on is a call, not prose.
pub const MARKUP_OPENERS: &[&str] = &[
    "<tool_call>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "[TOOL_CALLS]",
];

/// Name given to markup that looks like a tool call but names no tool.
pub const UNPARSED_TOOL_CALL: &str = "unparsed_tool_call";

/// Longest text searched; a longer answer is left as it is.
const MAX_TEXT_BYTES: usize = 256 * 1024;

/// One call recovered from text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextToolCall {
    pub name: String,
    /// A JSON object when recovery worked; otherwise the raw text the model wrote.
    pub arguments: String,
}

/// What remains of an answer once its tool calls are taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The prose around the calls (trimmed; may be empty).
    pub text: String,
    pub calls: Vec<TextToolCall>,
}

/// Finds the tool calls in `text`. `tools` are the offered tool names (bare JSON only
/// counts when it names one of them). `None` when the text holds no tool-call markup.
pub fn recover_tool_calls(text: &str, tools: &[String]) -> Option<Recovered> {
    if text.len() > MAX_TEXT_BYTES || tools.is_empty() {
        return None;
    }
    recover_hermes_or_glm(text)
        .or_else(|| recover_kimi(text))
        .or_else(|| recover_mistral(text))
        .or_else(|| recover_bare_json(text, tools))
}

const TOOL_CALL_OPEN: &str = "<tool_call>";
const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// `<tool_call>…</tool_call>` blocks: JSON inside (Hermes, Qwen) or GLM's
/// `name<arg_key>…` form. A missing close tag at the end is tolerated (the model stopped
/// on its end-of-turn token).
fn recover_hermes_or_glm(text: &str) -> Option<Recovered> {
    if !text.contains(TOOL_CALL_OPEN) {
        return None;
    }
    let mut prose = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(TOOL_CALL_OPEN) {
        prose.push_str(&rest[..start]);
        let after = &rest[start + TOOL_CALL_OPEN.len()..];
        let (body, next) = match after.find(TOOL_CALL_CLOSE) {
            Some(end) => (&after[..end], &after[end + TOOL_CALL_CLOSE.len()..]),
            None => (after, ""),
        };
        calls.push(if body.contains("<function=") {
            qwen3_xml_call(body)
        } else if body.contains("<arg_key>") || !body.trim_start().starts_with(['{', '`']) {
            glm_call(body)
        } else {
            json_call(body)
        });
        rest = next;
    }
    prose.push_str(rest);
    Some(Recovered {
        text: prose.trim().to_string(),
        calls,
    })
}

/// GLM: the tool name, then `<arg_key>k</arg_key><arg_value>v</arg_value>` pairs; values
/// are JSON when they parse, strings otherwise.
fn glm_call(body: &str) -> TextToolCall {
    let name_end = body.find("<arg_key>").unwrap_or(body.len());
    let name = body[..name_end].trim().to_string();
    let mut arguments = Map::new();
    let mut rest = &body[name_end..];
    while let Some(key_start) = rest.find("<arg_key>") {
        let after_key = &rest[key_start + "<arg_key>".len()..];
        let Some(key_end) = after_key.find("</arg_key>") else {
            break;
        };
        let key = after_key[..key_end].trim().to_string();
        let after = &after_key[key_end + "</arg_key>".len()..];
        let Some(value_start) = after.find("<arg_value>") else {
            break;
        };
        let value_text = &after[value_start + "<arg_value>".len()..];
        let value_end = value_text.find("</arg_value>").unwrap_or(value_text.len());
        let raw = &value_text[..value_end];
        let value =
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()));
        arguments.insert(key, value);
        rest = &value_text[value_end..];
    }
    if name.is_empty() || name.contains(char::is_whitespace) {
        return TextToolCall {
            name: UNPARSED_TOOL_CALL.to_string(),
            arguments: body.trim().to_string(),
        };
    }
    TextToolCall {
        name,
        arguments: Value::Object(arguments).to_string(),
    }
}

/// Qwen3-Coder: `<function=NAME>` then `<parameter=KEY>VALUE</parameter>` pairs; values
/// are JSON when they parse, strings otherwise (the template writes strings raw).
fn qwen3_xml_call(body: &str) -> TextToolCall {
    let unparsed = || TextToolCall {
        name: UNPARSED_TOOL_CALL.to_string(),
        arguments: body.trim().to_string(),
    };
    let Some(at) = body.find("<function=") else {
        return unparsed();
    };
    let after = &body[at + "<function=".len()..];
    let Some(name_end) = after.find('>') else {
        return unparsed();
    };
    let name = after[..name_end].trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return unparsed();
    }
    let mut arguments = Map::new();
    let mut rest = &after[name_end + 1..];
    while let Some(start) = rest.find("<parameter=") {
        let after_tag = &rest[start + "<parameter=".len()..];
        let Some(key_end) = after_tag.find('>') else {
            break;
        };
        let key = after_tag[..key_end].trim().to_string();
        let value_text = &after_tag[key_end + 1..];
        let value_end = value_text
            .find("</parameter>")
            .or_else(|| value_text.find("<parameter="))
            .or_else(|| value_text.find("</function>"))
            .unwrap_or(value_text.len());
        // The template puts the value on its own lines.
        let raw = value_text[..value_end]
            .strip_prefix('\n')
            .unwrap_or(&value_text[..value_end]);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let value =
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()));
        arguments.insert(key, value);
        rest = &value_text[value_end..];
    }
    TextToolCall {
        name: name.to_string(),
        arguments: Value::Object(arguments).to_string(),
    }
}

/// A `{"name": …, "arguments": …}` object (also `parameters`, and arguments given as a
/// JSON string), repaired if needed.
fn json_call(body: &str) -> TextToolCall {
    match parse_repaired(body) {
        Some(Value::Object(object)) => call_from_object(&object).unwrap_or_else(|| TextToolCall {
            name: UNPARSED_TOOL_CALL.to_string(),
            arguments: body.trim().to_string(),
        }),
        _ => TextToolCall {
            name: name_from_broken_json(body).unwrap_or_else(|| UNPARSED_TOOL_CALL.to_string()),
            arguments: body.trim().to_string(),
        },
    }
}

fn call_from_object(object: &Map<String, Value>) -> Option<TextToolCall> {
    let object = match object.get("function") {
        Some(Value::Object(inner)) => inner,
        _ => object,
    };
    let name = object.get("name")?.as_str()?.trim().to_string();
    if name.is_empty() {
        return None;
    }
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(text)) => match parse_repaired(text) {
            Some(value @ Value::Object(_)) => value.to_string(),
            _ => text.clone(),
        },
        Some(value) => value.to_string(),
    };
    Some(TextToolCall { name, arguments })
}

/// The `"name": "…"` of JSON too broken to parse, so the error names the right tool.
fn name_from_broken_json(body: &str) -> Option<String> {
    let at = body.find("\"name\"")? + "\"name\"".len();
    let rest = body[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let name = &rest[..rest.find('"')?];
    (!name.is_empty() && !name.contains(char::is_whitespace)).then(|| name.to_string())
}

const KIMI_CALL_BEGIN: &str = "<|tool_call_begin|>";
const KIMI_ARGS_BEGIN: &str = "<|tool_call_argument_begin|>";
const KIMI_CALL_END: &str = "<|tool_call_end|>";
const KIMI_SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
const KIMI_SECTION_END: &str = "<|tool_calls_section_end|>";

/// Kimi K2: `functions.NAME:INDEX` ids before each argument object.
fn recover_kimi(text: &str) -> Option<Recovered> {
    if !text.contains(KIMI_CALL_BEGIN) {
        return None;
    }
    // The section starts at whichever marker comes first (the model may drop the section
    // opener), and only an end marker after that start closes it: a stray end marker in
    // the prose before the calls must not make the section end before it begins.
    let section_start = [KIMI_SECTION_BEGIN, KIMI_CALL_BEGIN]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(0);
    let (section_end, after_section) = match text[section_start..].find(KIMI_SECTION_END) {
        Some(at) => (
            section_start + at,
            section_start + at + KIMI_SECTION_END.len(),
        ),
        None => (text.len(), text.len()),
    };
    let mut prose = text[..section_start].to_string();
    prose.push_str(&text[after_section..]);
    let section = &text[section_start..section_end];
    let mut calls = Vec::new();
    for piece in section.split(KIMI_CALL_BEGIN).skip(1) {
        let piece = piece.split(KIMI_CALL_END).next().unwrap_or(piece);
        let (id, arguments) = match piece.find(KIMI_ARGS_BEGIN) {
            Some(at) => (&piece[..at], &piece[at + KIMI_ARGS_BEGIN.len()..]),
            None => (piece, ""),
        };
        // `functions.shell:0` → `shell`.
        let id = id.trim();
        let name = id.strip_prefix("functions.").unwrap_or(id);
        let name = name.rsplit_once(':').map_or(name, |(name, _)| name).trim();
        calls.push(if name.is_empty() {
            TextToolCall {
                name: UNPARSED_TOOL_CALL.to_string(),
                arguments: piece.trim().to_string(),
            }
        } else {
            TextToolCall {
                name: name.to_string(),
                arguments: repaired_arguments(arguments),
            }
        });
    }
    Some(Recovered {
        text: prose.trim().to_string(),
        calls,
    })
}

const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";

/// Mistral: a JSON array of calls after `[TOOL_CALLS]`, or (newer tokenizers)
/// `[TOOL_CALLS]name[ARGS]{…}` repeated.
fn recover_mistral(text: &str) -> Option<Recovered> {
    let start = text.find(MISTRAL_CALLS)?;
    let prose = text[..start].trim().to_string();
    let rest = &text[start..];
    let mut calls = Vec::new();
    for piece in rest.split(MISTRAL_CALLS).skip(1) {
        if let Some(at) = piece.find(MISTRAL_ARGS) {
            let name = piece[..at].trim();
            let arguments = &piece[at + MISTRAL_ARGS.len()..];
            calls.push(if name.is_empty() {
                TextToolCall {
                    name: UNPARSED_TOOL_CALL.to_string(),
                    arguments: piece.trim().to_string(),
                }
            } else {
                TextToolCall {
                    name: name.to_string(),
                    arguments: repaired_arguments(arguments),
                }
            });
            continue;
        }
        match parse_repaired(piece) {
            Some(Value::Array(items)) => {
                for item in items {
                    match item.as_object().and_then(call_from_object) {
                        Some(call) => calls.push(call),
                        None => calls.push(TextToolCall {
                            name: UNPARSED_TOOL_CALL.to_string(),
                            arguments: item.to_string(),
                        }),
                    }
                }
            }
            Some(Value::Object(object)) => {
                calls.push(call_from_object(&object).unwrap_or_else(|| TextToolCall {
                    name: UNPARSED_TOOL_CALL.to_string(),
                    arguments: piece.trim().to_string(),
                }))
            }
            _ => calls.push(TextToolCall {
                name: name_from_broken_json(piece)
                    .unwrap_or_else(|| UNPARSED_TOOL_CALL.to_string()),
                arguments: piece.trim().to_string(),
            }),
        }
    }
    Some(Recovered { text: prose, calls })
}

/// The whole answer is one JSON object (or an array of them), maybe fenced, naming an
/// offered tool. Prose around it means the model is talking about JSON, not calling.
fn recover_bare_json(text: &str, tools: &[String]) -> Option<Recovered> {
    let trimmed = strip_fence(text.trim());
    if !trimmed.starts_with(['{', '[']) {
        return None;
    }
    let value = parse_repaired(trimmed)?;
    let objects: Vec<Map<String, Value>> = match value {
        Value::Object(object) => vec![object],
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Object(object) => Some(object),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    let calls = objects
        .iter()
        .map(call_from_object)
        .collect::<Option<Vec<_>>>()?;
    if calls.is_empty() || !calls.iter().all(|call| tools.contains(&call.name)) {
        return None;
    }
    Some(Recovered {
        text: String::new(),
        calls,
    })
}

/// Arguments as a JSON object string, repaired; the raw text when nothing works.
fn repaired_arguments(raw: &str) -> String {
    let raw = raw.trim();
    if raw.is_empty() {
        return "{}".to_string();
    }
    match parse_repaired(raw) {
        Some(value @ Value::Object(_)) => value.to_string(),
        _ => raw.to_string(),
    }
}

/// `text` without a surrounding Markdown code fence.
fn strip_fence(text: &str) -> &str {
    let Some(inner) = text.strip_prefix("```") else {
        return text;
    };
    let inner = inner.find('\n').map_or("", |at| &inner[at + 1..]);
    inner.trim_end().strip_suffix("```").unwrap_or(inner).trim()
}

/// Parses JSON, trying a fixed sequence of repairs for what models get wrong: a code
/// fence around it, text after the value, trailing commas, single quotes, Python's
/// `True`/`False`/`None`. Each step runs once, so the work is bounded.
fn parse_repaired(raw: &str) -> Option<Value> {
    let mut candidate = strip_fence(raw.trim()).to_string();
    if let Ok(value) = serde_json::from_str(&candidate) {
        return Some(value);
    }
    if let Some(value) = first_value(&candidate) {
        return Some(value);
    }
    let repairs: [fn(&str) -> String; 3] = [
        remove_trailing_commas,
        single_to_double_quotes,
        python_literals,
    ];
    for repair in repairs {
        candidate = repair(&candidate);
        if let Ok(value) = serde_json::from_str(&candidate) {
            return Some(value);
        }
        if let Some(value) = first_value(&candidate) {
            return Some(value);
        }
    }
    None
}

/// The first complete JSON value at the start of `text` (the model went on talking after
/// it, or closed one brace too many).
fn first_value(text: &str) -> Option<Value> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => Some(value),
        _ => None,
    }
}

/// `,` directly before `}` or `]` (outside strings) removed.
fn remove_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Single-quoted strings rewritten as JSON strings (inner double quotes escaped).
fn single_to_double_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            None => {
                if c == '\'' {
                    quote = Some('\'');
                    out.push('"');
                } else {
                    if c == '"' {
                        quote = Some('"');
                    }
                    out.push(c);
                }
            }
            Some(q) => {
                if escaped {
                    escaped = false;
                    if q == '\'' && c == '\'' {
                        out.pop();
                    }
                    out.push(c);
                } else if c == '\\' {
                    escaped = true;
                    out.push(c);
                } else if c == q {
                    quote = None;
                    out.push('"');
                } else if q == '\'' && c == '"' {
                    out.push_str("\\\"");
                } else {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// `True`/`False`/`None` outside strings as JSON literals.
fn python_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(match word.as_str() {
            "True" => "true",
            "False" => "false",
            "None" => "null",
            other => other,
        });
        word.clear();
    };
    for c in text.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if c.is_ascii_alphabetic() {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    flush(&mut word, &mut out);
    out
}

/// A stable id for the `index`-th call recovered from one response: the same request
/// position and index give the same id (so a replayed history matches), different
/// positions never collide in practice. FNV-1a, because std's hasher may change between
/// Rust releases and ids are persisted in rollouts.
pub fn synthetic_call_id(seed: &str, index: usize) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.bytes().chain(index.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("call_text_{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn tools() -> Vec<String> {
        vec!["shell".to_string(), "apply_patch".to_string()]
    }

    fn one(name: &str, arguments: &str) -> Vec<TextToolCall> {
        vec![TextToolCall {
            name: name.into(),
            arguments: arguments.into(),
        }]
    }

    #[test]
    fn hermes_block_with_prose_and_missing_close_tag() {
        let got = recover_tool_calls(
            "Let me look.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}\n",
            &tools(),
        );
        assert_eq!(
            got,
            Some(Recovered {
                text: "Let me look.".into(),
                calls: one("shell", r#"{"command":["ls"]}"#)
            })
        );
    }

    #[test]
    fn glm_arg_pairs() {
        let got = recover_tool_calls(
            "<tool_call>shell\n<arg_key>command</arg_key>\n<arg_value>[\"ls\",\"-la\"]</arg_value>\n<arg_key>workdir</arg_key>\n<arg_value>src</arg_value>\n</tool_call>",
            &tools(),
        );
        assert_eq!(
            got.map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls","-la"],"workdir":"src"}"#))
        );
    }

    #[test]
    fn qwen3_coder_xml() {
        let got = recover_tool_calls(
            "<tool_call>\n<function=shell>\n<parameter=command>\n[\"ls\", \"-la\"]\n</parameter>\n<parameter=workdir>\nsrc\n</parameter>\n</function>\n</tool_call>",
            &tools(),
        );
        assert_eq!(
            got.map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls","-la"],"workdir":"src"}"#))
        );
    }

    #[test]
    fn kimi_section() {
        let got = recover_tool_calls(
            "ok <|tool_calls_section_begin|><|tool_call_begin|>functions.shell:0<|tool_call_argument_begin|>{\"command\": [\"pwd\"]}<|tool_call_end|><|tool_calls_section_end|>",
            &tools(),
        );
        assert_eq!(
            got,
            Some(Recovered {
                text: "ok".into(),
                calls: one("shell", r#"{"command":["pwd"]}"#)
            })
        );
    }

    #[test]
    fn adversarial_pass_kimi_section_end_before_call_begin_does_not_panic() {
        let got = recover_tool_calls(
            "<|tool_calls_section_end|><|tool_call_begin|>functions.shell:0<|tool_call_argument_begin|>{\"command\": [\"pwd\"]}<|tool_call_end|>",
            &tools(),
        );
        assert_eq!(
            got,
            Some(Recovered {
                text: "<|tool_calls_section_end|>".into(),
                calls: one("shell", r#"{"command":["pwd"]}"#)
            })
        );
        // The bare marker pair the adversarial pass sent.
        assert!(
            recover_tool_calls("<|tool_calls_section_end|><|tool_call_begin|>", &tools()).is_some()
        );
    }

    #[test]
    fn mistral_both_forms() {
        assert_eq!(
            recover_tool_calls(
                "[TOOL_CALLS][{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}]",
                &tools()
            )
            .map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls"]}"#))
        );
        assert_eq!(
            recover_tool_calls("[TOOL_CALLS]shell[ARGS]{\"command\": [\"ls\"]}", &tools())
                .map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls"]}"#))
        );
    }

    #[test]
    fn bare_json_only_for_offered_tools_and_without_prose() {
        assert_eq!(
            recover_tool_calls(
                "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}\n```",
                &tools()
            )
            .map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls"]}"#))
        );
        assert_eq!(
            recover_tool_calls("{\"name\": \"weather\", \"arguments\": {}}", &tools()),
            None
        );
        assert_eq!(
            recover_tool_calls(
                "Here is JSON: {\"name\": \"shell\", \"arguments\": {}}",
                &tools()
            ),
            None
        );
        assert_eq!(recover_tool_calls("just prose", &tools()), None);
    }

    #[test]
    fn repairs_are_applied() {
        assert_eq!(
            parse_repaired("{'command': ['ls', \"a\"], 'x': True,}"),
            Some(serde_json::json!({"command": ["ls", "a"], "x": true}))
        );
        assert_eq!(
            parse_repaired("```json\n{\"a\": 1}\n```"),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            parse_repaired("{\"a\": 1}} trailing"),
            Some(serde_json::json!({"a": 1}))
        );
    }

    #[test]
    fn unrecoverable_markup_keeps_the_raw_text() {
        let got = recover_tool_calls(
            "<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"</tool_call>",
            &tools(),
        );
        assert_eq!(
            got.map(|r| r.calls),
            Some(one(
                "shell",
                "{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\""
            ))
        );
        let got = recover_tool_calls("<tool_call>{oops}</tool_call>", &tools());
        assert_eq!(
            got.map(|r| r.calls),
            Some(one(UNPARSED_TOOL_CALL, "{oops}"))
        );
    }

    #[test]
    fn synthetic_ids_are_stable_and_distinct() {
        assert_eq!(synthetic_call_id("t:3", 0), synthetic_call_id("t:3", 0));
        assert_ne!(synthetic_call_id("t:3", 0), synthetic_call_id("t:3", 1));
        assert_ne!(synthetic_call_id("t:3", 0), synthetic_call_id("t:5", 0));
        assert!(synthetic_call_id("t", 0).starts_with("call_text_"));
    }
}
