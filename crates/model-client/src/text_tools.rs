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
//! * DeepSeek V3: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name`
//!   then the arguments in a ```` ```json ```` fence, `<｜tool▁call▁end｜>`; V3.1 drops the
//!   type and the fence: `<｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`
//! * MiniMax M2: `<minimax:tool_call><invoke name="name"><parameter name="k">v</parameter>
//!   </invoke></minimax:tool_call>`
//! * gpt-oss (harmony) leaked as text: `<|channel|>commentary to=functions.name
//!   <|constrain|>json<|message|>{…}<|call|>`
//! * a bare JSON object (optionally in a code fence) `{"name": …, "arguments": …}` whose
//!   name is one of the offered tools.
//!
//! Markup inside a Markdown code fence is prose: a model explaining "to list files, the
//! model would write <tool_call>{…}</tool_call>" in a fenced example, or quoting a file
//! or a tool's output that holds markup, is not asking for anything to run. A fence is a
//! line of three or more backticks or tildes (any indentation) up to a line of at least
//! as many of the same character with nothing after them, or to the end of the answer
//! when it is never closed. Inline code is quoted the same way: text between a run of
//! backticks and the next run of the same length on that line (to the end of the line
//! when there is none) is prose. Only markup outside fences and code spans is a call,
//! and [`MarkupScanner`] is the one place that decides where it begins: the live
//! display hides the answer from there, and recovery parses from there. One fenced form
//! is still a call: the bare-JSON dialect, when the whole answer is a single fenced JSON
//! object (or array of them) naming offered tools and nothing else, because there is no
//! prose around it to be quoting for.
//!
//! Arguments get a bounded repair (code fences, trailing commas, single quotes, Python
//! literals). A call whose arguments still do not parse is passed on with the raw text,
//! so the tool reports invalid arguments and the model can read why; markup with no
//! readable tool name becomes a call of [`UNPARSED_TOOL_CALL`], which the engine answers
//! with the list of real tools. Fenced shell blocks are never run: a model showing a
//! command is not a model asking to run it.

use serde_json::{Map, Value};

/// How tool-call markup begins, per family: text from here on (outside a code fence) is
/// a call, not prose.
pub const MARKUP_OPENERS: &[&str] = &[
    "<tool_call>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "[TOOL_CALLS]",
    DEEPSEEK_CALLS_BEGIN,
    DEEPSEEK_CALL_BEGIN,
    MINIMAX_OPEN,
    HARMONY_CALL,
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

/// Finds where tool-call markup begins outside code fences, in text given piece by piece
/// (a streamed answer) or whole. It looks at each byte once and keeps only the tail of
/// the current line, so a long answer costs no more than reading it.
#[derive(Debug, Clone)]
pub struct MarkupScanner {
    needles: &'static [&'static str],
    /// Bytes taken in so far.
    consumed: usize,
    /// The open fence: its character and the length of its run.
    fence: Option<(u8, usize)>,
    line: LineState,
    /// The last bytes of the current line's searched text, so a needle split between
    /// two pieces is found.
    carry: String,
    /// Backticks just seen on the current line (the run may go on in the next piece).
    ticks: usize,
    /// The inline code span the current line is in: the length of its opening run.
    span: Option<usize>,
    found: Option<usize>,
}

/// Where the scanner is in the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Leading whitespace.
    Indent,
    /// A run of fence characters at the start of the line.
    Run { ch: u8, len: usize },
    /// After a run that opens a fence: the info string.
    Opening { ch: u8, len: usize },
    /// Inside a fence, after a run that closes it: only whitespace may follow.
    Closing,
    /// Text searched for markup.
    Content,
    /// Text never searched: inside a fence, or an inline code span of backticks.
    Skip,
}

impl Default for MarkupScanner {
    fn default() -> Self {
        Self::for_needles(MARKUP_OPENERS)
    }
}

impl MarkupScanner {
    /// A scanner for the openers of every dialect ([`MARKUP_OPENERS`]).
    pub fn new() -> Self {
        Self::default()
    }

    fn for_needles(needles: &'static [&'static str]) -> Self {
        Self {
            needles,
            consumed: 0,
            fence: None,
            line: LineState::Indent,
            carry: String::new(),
            ticks: 0,
            span: None,
            found: None,
        }
    }

    /// Takes the next piece of text. Returns where markup outside fences begins (a byte
    /// offset into everything taken in), once it has.
    pub fn push(&mut self, text: &str) -> Option<usize> {
        if self.found.is_some() {
            return self.found;
        }
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            let byte = bytes[at];
            if byte == b'\n' {
                self.end_line();
                at += 1;
                continue;
            }
            // Only the states that take the rest of the line at once look for its end, so
            // a long run of indentation or fence characters is not scanned again per byte.
            let line_end = |at: usize| {
                bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |end| at + end)
            };
            match self.line {
                LineState::Indent if matches!(byte, b' ' | b'\t' | b'\r') => at += 1,
                LineState::Indent if matches!(byte, b'`' | b'~') => {
                    self.line = LineState::Run { ch: byte, len: 1 };
                    at += 1;
                }
                LineState::Indent => {
                    self.line = if self.fence.is_some() {
                        LineState::Skip
                    } else {
                        LineState::Content
                    };
                }
                LineState::Run { ch, len } if byte == ch => {
                    self.line = LineState::Run { ch, len: len + 1 };
                    at += 1;
                }
                LineState::Run { ch, len } => {
                    self.line = match self.fence {
                        None if len >= 3 => LineState::Opening { ch, len },
                        // One or two backticks open an inline code span; tildes are text.
                        None => {
                            if ch == b'`' {
                                self.ticks = len;
                            }
                            LineState::Content
                        }
                        Some((open, open_len))
                            if ch == open
                                && len >= open_len
                                && matches!(byte, b' ' | b'\t' | b'\r') =>
                        {
                            LineState::Closing
                        }
                        Some(_) => LineState::Skip,
                    };
                }
                LineState::Opening { ch, .. } => {
                    let end = line_end(at);
                    // A backtick after a backtick run is an inline code span, not a fence:
                    // the line is quoted text either way.
                    if ch == b'`' && bytes[at..end].contains(&b'`') {
                        self.line = LineState::Skip;
                    }
                    at = end;
                }
                LineState::Closing => {
                    let end = line_end(at);
                    if !bytes[at..end]
                        .iter()
                        .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
                    {
                        self.line = LineState::Skip;
                    }
                    at = end;
                }
                LineState::Skip => at = line_end(at),
                LineState::Content => {
                    let end = line_end(at);
                    // Stretches between backtick runs: searched outside a code span,
                    // skipped inside one. Every boundary here is a character boundary:
                    // before `at` the line held only ASCII (or a whole earlier piece),
                    // and backticks and `\n` are ASCII.
                    while at < end {
                        let stretch_end = bytes[at..end]
                            .iter()
                            .position(|&b| b == b'`')
                            .map_or(end, |tick| at + tick);
                        if stretch_end == at {
                            let run_end = bytes[at..end]
                                .iter()
                                .position(|&b| b != b'`')
                                .map_or(end, |other| at + other);
                            self.ticks += run_end - at;
                            // No opener holds a backtick: nothing joins across one.
                            self.carry.clear();
                            at = run_end;
                            continue;
                        }
                        self.end_tick_run();
                        if self.span.is_none()
                            && let Some(found) = self.search(&text[at..stretch_end], at)
                        {
                            self.found = Some(found);
                            return self.found;
                        }
                        at = stretch_end;
                    }
                }
            }
        }
        self.consumed += bytes.len();
        None
    }

    /// Searches `piece` (at `offset` in the current push) with the carried tail before it.
    fn search(&mut self, piece: &str, offset: usize) -> Option<usize> {
        let mut haystack = std::mem::take(&mut self.carry);
        let carried = haystack.len();
        haystack.push_str(piece);
        if let Some(at) = self
            .needles
            .iter()
            .filter_map(|needle| haystack.find(needle))
            .min()
        {
            return Some(self.consumed + offset + at - carried);
        }
        let longest = self.needles.iter().map(|n| n.len()).max().unwrap_or(1);
        let mut keep = haystack.len().saturating_sub(longest - 1);
        while !haystack.is_char_boundary(keep) {
            keep += 1;
        }
        self.carry = haystack.split_off(keep);
        None
    }

    /// A run of backticks ended: it opens an inline code span, or closes the open one
    /// when it is as long as the one that opened it (CommonMark's rule).
    fn end_tick_run(&mut self) {
        let run = std::mem::take(&mut self.ticks);
        if run == 0 {
            return;
        }
        match self.span {
            None => self.span = Some(run),
            Some(open) if open == run => self.span = None,
            Some(_) => {}
        }
    }

    fn end_line(&mut self) {
        match (self.line, self.fence) {
            (LineState::Opening { ch, len }, None) => self.fence = Some((ch, len)),
            (LineState::Run { ch, len }, None) if len >= 3 => self.fence = Some((ch, len)),
            (LineState::Run { ch, len }, Some((open, open_len)))
                if ch == open && len >= open_len =>
            {
                self.fence = None;
            }
            (LineState::Closing, Some(_)) => self.fence = None,
            _ => {}
        }
        self.line = LineState::Indent;
        self.carry.clear();
        // A code span is kept to its line: a backtick left open quotes the rest of the
        // line only (CommonMark would let it run on, or make it a literal backtick).
        self.ticks = 0;
        self.span = None;
    }
}

/// Where the first of `needles` outside code fences is in `text`.
fn find_unfenced(text: &str, needles: &'static [&'static str]) -> Option<usize> {
    MarkupScanner::for_needles(needles).push(text)
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
        .or_else(|| recover_deepseek(text))
        .or_else(|| recover_minimax(text))
        .or_else(|| recover_harmony(text))
        .or_else(|| recover_bare_json(text, tools))
}

const TOOL_CALL_OPEN: &str = "<tool_call>";
const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// `<tool_call>…</tool_call>` blocks: JSON inside (Hermes, Qwen) or GLM's
/// `name<arg_key>…` form. A missing close tag at the end is tolerated (the model stopped
/// on its end-of-turn token).
fn recover_hermes_or_glm(text: &str) -> Option<Recovered> {
    recover_blocks(text, &[TOOL_CALL_OPEN], TOOL_CALL_CLOSE, |body, calls| {
        calls.push(if body.contains("<function=") {
            qwen3_xml_call(body)
        } else if body.contains("<arg_key>") || !body.trim_start().starts_with(['{', '`']) {
            glm_call(body)
        } else {
            json_call(body)
        });
    })
}

/// Calls written in `open`…`close` blocks, each body turned into calls by `calls_of`; the
/// text around the blocks is the prose. After each block the text is prose again, with
/// fences of its own; a missing close tag at the end is tolerated (the model stopped on
/// its end-of-turn token).
fn recover_blocks(
    text: &str,
    needles: &'static [&'static str; 1],
    close: &str,
    mut calls_of: impl FnMut(&str, &mut Vec<TextToolCall>),
) -> Option<Recovered> {
    let [open] = *needles;
    find_unfenced(text, needles)?;
    let mut prose = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = find_unfenced(rest, needles) {
        prose.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let (body, next) = match after.find(close) {
            Some(end) => (&after[..end], &after[end + close.len()..]),
            None => (after, ""),
        };
        calls_of(body, &mut calls);
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
    find_unfenced(text, &[KIMI_CALL_BEGIN])?;
    // The section starts at whichever marker comes first outside fences (the model may
    // drop the section opener), and only an end marker after that start closes it: a
    // stray end marker in the prose before the calls must not make the section end
    // before it begins.
    let section_start = find_unfenced(text, &[KIMI_SECTION_BEGIN, KIMI_CALL_BEGIN]).unwrap_or(0);
    let (section, prose) = calls_section(text, section_start, KIMI_SECTION_END);
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

/// A section of calls that starts at `start` and ends at the first `end_marker` after it
/// (or at the end of the answer: the model stopped on its end-of-turn token), and the
/// prose around it. Only an end marker after the start closes it: a stray one in the prose
/// before the calls must not make the section end before it begins.
fn calls_section<'a>(text: &'a str, start: usize, end_marker: &str) -> (&'a str, String) {
    let (end, after) = match text[start..].find(end_marker) {
        Some(at) => (start + at, start + at + end_marker.len()),
        None => (text.len(), text.len()),
    };
    let mut prose = text[..start].to_string();
    prose.push_str(&text[after..]);
    (&text[start..end], prose)
}

const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";

/// Mistral: a JSON array of calls after `[TOOL_CALLS]`, or (newer tokenizers)
/// `[TOOL_CALLS]name[ARGS]{…}` repeated.
fn recover_mistral(text: &str) -> Option<Recovered> {
    let start = find_unfenced(text, &[MISTRAL_CALLS])?;
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

// DeepSeek's markers use U+FF5C (fullwidth vertical line) and U+2581 (lower one eighth
// block), as its tokenizer spells them.
const DEEPSEEK_CALLS_BEGIN: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}>";
const DEEPSEEK_CALLS_END: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}end\u{ff5c}>";
const DEEPSEEK_CALL_BEGIN: &str = "<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>";
const DEEPSEEK_CALL_END: &str = "<\u{ff5c}tool\u{2581}call\u{2581}end\u{ff5c}>";
const DEEPSEEK_SEP: &str = "<\u{ff5c}tool\u{2581}sep\u{ff5c}>";

/// DeepSeek V3 (`function<sep>NAME` then fenced JSON) and V3.1 (`NAME<sep>{…}`), in a
/// section that starts at whichever marker comes first and ends at the section's end
/// marker (or the end of the answer: the model stopped on its end-of-turn token).
fn recover_deepseek(text: &str) -> Option<Recovered> {
    let start = find_unfenced(text, &[DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALL_BEGIN])?;
    let (section, prose) = calls_section(text, start, DEEPSEEK_CALLS_END);
    let mut calls = Vec::new();
    for piece in section.split(DEEPSEEK_CALL_BEGIN).skip(1) {
        let piece = piece.split(DEEPSEEK_CALL_END).next().unwrap_or(piece);
        let unparsed = || TextToolCall {
            name: UNPARSED_TOOL_CALL.to_string(),
            arguments: piece.trim().to_string(),
        };
        let Some((head, rest)) = piece.split_once(DEEPSEEK_SEP) else {
            calls.push(unparsed());
            continue;
        };
        let (name, arguments) = if head.trim() == "function" {
            // V3: the name on the rest of the line, the arguments after it (fenced).
            let rest = rest.trim_start();
            match rest.split_once('\n') {
                Some((name, arguments)) => (name.trim(), arguments),
                None => (rest.trim(), ""),
            }
        } else {
            (head.trim(), rest)
        };
        calls.push(if name.is_empty() || name.contains(char::is_whitespace) {
            unparsed()
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

const MINIMAX_OPEN: &str = "<minimax:tool_call>";
const MINIMAX_CLOSE: &str = "</minimax:tool_call>";

/// MiniMax M2: `<invoke name="…">` elements with `<parameter name="…">` values (JSON when
/// they parse, strings otherwise) inside `<minimax:tool_call>` blocks.
fn recover_minimax(text: &str) -> Option<Recovered> {
    recover_blocks(text, &[MINIMAX_OPEN], MINIMAX_CLOSE, |body, calls| {
        let invokes: Vec<&str> = body.split("<invoke").skip(1).collect();
        if invokes.is_empty() {
            calls.push(TextToolCall {
                name: UNPARSED_TOOL_CALL.to_string(),
                arguments: body.trim().to_string(),
            });
        }
        for invoke in invokes {
            let invoke = invoke.split("</invoke>").next().unwrap_or(invoke);
            calls.push(minimax_invoke(invoke));
        }
    })
}

/// The value of `name="…"` (or `name='…'`, or bare up to `>`) at the start of `tag`, and
/// what follows the tag's `>`.
fn name_attribute(tag: &str) -> Option<(&str, &str)> {
    let after = tag.trim_start().strip_prefix("name")?.trim_start();
    let after = after.strip_prefix('=')?.trim_start();
    let (name, rest) = match after.chars().next()? {
        quote @ ('"' | '\'') => {
            let inner = &after[1..];
            let end = inner.find(quote)?;
            (&inner[..end], &inner[end + 1..])
        }
        _ => {
            let end = after.find('>')?;
            (&after[..end], &after[end..])
        }
    };
    let rest = &rest[rest.find('>')? + 1..];
    Some((name.trim(), rest))
}

fn minimax_invoke(invoke: &str) -> TextToolCall {
    let unparsed = || TextToolCall {
        name: UNPARSED_TOOL_CALL.to_string(),
        arguments: invoke.trim().to_string(),
    };
    let Some((name, mut rest)) = name_attribute(invoke) else {
        return unparsed();
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return unparsed();
    }
    let mut arguments = Map::new();
    while let Some(start) = rest.find("<parameter") {
        let Some((key, value_text)) = name_attribute(&rest[start + "<parameter".len()..]) else {
            break;
        };
        let value_end = value_text
            .find("</parameter>")
            .or_else(|| value_text.find("<parameter"))
            .unwrap_or(value_text.len());
        let raw = value_text[..value_end].trim_matches('\n');
        let value =
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()));
        arguments.insert(key.to_string(), value);
        rest = &value_text[value_end..];
    }
    TextToolCall {
        name: name.to_string(),
        arguments: Value::Object(arguments).to_string(),
    }
}

const HARMONY_CALL: &str = "<|channel|>commentary to=";
const HARMONY_MESSAGE: &str = "<|message|>";
const HARMONY_ENDS: &[&str] = &["<|call|>", "<|end|>", "<|return|>", "<|start|>"];

/// gpt-oss's harmony format leaked as text: a `commentary` message addressed
/// `to=functions.NAME` whose `<|message|>` is the JSON arguments, ended by `<|call|>`.
fn recover_harmony(text: &str) -> Option<Recovered> {
    let first = find_unfenced(text, &[HARMONY_CALL])?;
    // The message header that opens the call (`<|start|>assistant`) is not prose.
    let prose_end = text[..first]
        .rfind("<|start|>")
        .filter(|at| text[*at..first].trim_end().ends_with("assistant"))
        .unwrap_or(first);
    let mut prose = text[..prose_end].to_string();
    let mut calls = Vec::new();
    let mut rest = &text[first..];
    while let Some(start) = find_unfenced(rest, &[HARMONY_CALL]) {
        let after = &rest[start + HARMONY_CALL.len()..];
        let name_end = after
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(after.len());
        let recipient = &after[..name_end];
        let name = recipient
            .strip_prefix("functions.")
            .unwrap_or(recipient)
            .trim();
        let body = &after[name_end..];
        let (arguments, next) = match body.find(HARMONY_MESSAGE) {
            Some(at) => {
                let message = &body[at + HARMONY_MESSAGE.len()..];
                let end = HARMONY_ENDS
                    .iter()
                    .filter_map(|marker| message.find(marker).map(|i| (i, marker.len())))
                    .min();
                match end {
                    Some((i, _)) if message[i..].starts_with("<|start|>") => {
                        (&message[..i], &message[i..])
                    }
                    Some((i, len)) => (&message[..i], &message[i + len..]),
                    None => (message, ""),
                }
            }
            None => ("", body),
        };
        calls.push(if name.is_empty() {
            TextToolCall {
                name: UNPARSED_TOOL_CALL.to_string(),
                arguments: body.trim().to_string(),
            }
        } else {
            TextToolCall {
                name: name.to_string(),
                arguments: repaired_arguments(arguments),
            }
        });
        // What follows a call is prose again, up to the next call.
        let next_call = find_unfenced(next, &[HARMONY_CALL]).unwrap_or(next.len());
        prose.push_str(harmony_prose(&next[..next_call]));
        rest = &next[next_call..];
    }
    Some(Recovered {
        text: prose.trim().to_string(),
        calls,
    })
}

/// Text between harmony calls without the message framing around it.
fn harmony_prose(text: &str) -> &str {
    let text = text.trim();
    let text = text.strip_prefix("<|start|>assistant").unwrap_or(text);
    text.strip_suffix("<|start|>assistant").unwrap_or(text)
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

    /// What the adversarial pass sent: an answer explaining markup in a fenced example.
    const QUOTED: &str = "To list files, the model would write:\n\n```\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"touch\", \"pwned\"]}}\n</tool_call>\n```\n\nThat is all.";

    #[test]
    fn adversarial_markup_quoted_in_a_fence_is_prose_in_every_dialect() {
        assert_eq!(recover_tool_calls(QUOTED, &tools()), None);
        for quoted in [
            "Example:\n```xml\n<tool_call>shell<arg_key>command</arg_key><arg_value>[\"ls\"]</arg_value></tool_call>\n```",
            "Example:\n~~~\n<tool_call><function=shell><parameter=command>[\"ls\"]</parameter></function></tool_call>\n~~~\n",
            "Kimi writes:\n  ```\n  <|tool_calls_section_begin|><|tool_call_begin|>functions.shell:0<|tool_call_argument_begin|>{\"command\": [\"ls\"]}<|tool_call_end|><|tool_calls_section_end|>\n  ```",
            "Mistral writes:\n````text\n[TOOL_CALLS][{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}]\n````",
            // Never closed: the rest of the answer is the fence's.
            "Like this:\n```\n<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>",
            // A shorter run does not close a longer fence.
            "````\n```\n<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>\n```\n````",
            // A run of the other character does not close it either.
            "```\n~~~\n<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>",
            // Inline code spans, closed or left open on their line.
            "The model would write `<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}</tool_call>` to list files.",
            "Write ```<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>``` to call.",
            "Hermes models emit `<tool_call>{\"name\": \"shell\", \"arguments\": {}}",
            "Like ``[TOOL_CALLS]shell[ARGS]{}`` in Mistral.",
            "```<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>```",
            "DeepSeek writes:\n```\n<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}><\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>shell<\u{ff5c}tool\u{2581}sep\u{ff5c}>{\"command\": [\"ls\"]}<\u{ff5c}tool\u{2581}call\u{2581}end\u{ff5c}>\n```",
            "MiniMax writes:\n```xml\n<minimax:tool_call><invoke name=\"shell\"><parameter name=\"command\">[\"ls\"]</parameter></invoke></minimax:tool_call>\n```",
            "gpt-oss writes `<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{}<|call|>` to call.",
        ] {
            assert_eq!(recover_tool_calls(quoted, &tools()), None, "{quoted}");
        }
    }

    const DS_CALLS: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}begin\u{ff5c}>";
    const DS_CALLS_END: &str = "<\u{ff5c}tool\u{2581}calls\u{2581}end\u{ff5c}>";
    const DS_CALL: &str = "<\u{ff5c}tool\u{2581}call\u{2581}begin\u{ff5c}>";
    const DS_CALL_END: &str = "<\u{ff5c}tool\u{2581}call\u{2581}end\u{ff5c}>";
    const DS_SEP: &str = "<\u{ff5c}tool\u{2581}sep\u{ff5c}>";

    #[test]
    fn deepseek_v3_with_the_function_type_and_a_json_fence() {
        let text = format!(
            "Let me look.\n{DS_CALLS}{DS_CALL}function{DS_SEP}shell\n```json\n{{\"command\": [\"ls\", \"-la\"],}}\n```{DS_CALL_END}{DS_CALL}function{DS_SEP}apply_patch\n```json\n{{\"input\": \"x\"}}\n```{DS_CALL_END}{DS_CALLS_END}"
        );
        let recovered = recover_tool_calls(&text, &tools()).unwrap();
        assert_eq!(recovered.text, "Let me look.");
        assert_eq!(
            recovered.calls,
            vec![
                TextToolCall {
                    name: "shell".into(),
                    arguments: r#"{"command":["ls","-la"]}"#.into()
                },
                TextToolCall {
                    name: "apply_patch".into(),
                    arguments: r#"{"input":"x"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn deepseek_v3_1_without_type_or_fence_and_without_the_end_markers() {
        let text = format!("{DS_CALL}shell{DS_SEP}{{\"command\": [\"pwd\"]}}");
        let recovered = recover_tool_calls(&text, &tools()).unwrap();
        assert_eq!(recovered.text, "");
        assert_eq!(recovered.calls, one("shell", r#"{"command":["pwd"]}"#));
        // No separator: the markup names no tool.
        let broken = format!("{DS_CALLS}{DS_CALL}shell {{}}{DS_CALL_END}{DS_CALLS_END} done");
        let recovered = recover_tool_calls(&broken, &tools()).unwrap();
        assert_eq!(recovered.calls[0].name, UNPARSED_TOOL_CALL);
        assert_eq!(recovered.text, "done");
    }

    #[test]
    fn minimax_m2_invocations() {
        let text = "I will run two things.\n<minimax:tool_call>\n<invoke name=\"shell\">\n<parameter name=\"command\">[\"ls\"]</parameter>\n<parameter name=\"timeout_ms\">5000</parameter>\n</invoke>\n<invoke name=\"apply_patch\">\n<parameter name=\"input\">*** Begin Patch\n*** End Patch</parameter>\n</invoke>\n</minimax:tool_call>";
        let recovered = recover_tool_calls(text, &tools()).unwrap();
        assert_eq!(recovered.text, "I will run two things.");
        assert_eq!(
            recovered.calls,
            vec![
                TextToolCall {
                    name: "shell".into(),
                    arguments: r#"{"command":["ls"],"timeout_ms":5000}"#.into()
                },
                TextToolCall {
                    name: "apply_patch".into(),
                    arguments: r#"{"input":"*** Begin Patch\n*** End Patch"}"#.into()
                },
            ]
        );
        let nameless = "<minimax:tool_call><invoke><parameter name=\"a\">1</parameter></invoke>";
        assert_eq!(
            recover_tool_calls(nameless, &tools()).unwrap().calls[0].name,
            UNPARSED_TOOL_CALL
        );
    }

    #[test]
    fn harmony_commentary_to_a_function() {
        let text = "<|start|>assistant<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{\"command\": [\"ls\"]}<|call|>";
        let recovered = recover_tool_calls(text, &tools()).unwrap();
        assert_eq!(recovered.text, "");
        assert_eq!(recovered.calls, one("shell", r#"{"command":["ls"]}"#));
        let with_prose = "Checking the tree first.<|channel|>commentary to=functions.shell<|message|>{'command': ['ls']}<|call|><|start|>assistant<|channel|>commentary to=functions.apply_patch <|constrain|>json<|message|>{\"input\": \"p\"}";
        let recovered = recover_tool_calls(with_prose, &tools()).unwrap();
        assert_eq!(recovered.text, "Checking the tree first.");
        assert_eq!(
            recovered.calls,
            vec![
                TextToolCall {
                    name: "shell".into(),
                    arguments: r#"{"command":["ls"]}"#.into()
                },
                TextToolCall {
                    name: "apply_patch".into(),
                    arguments: r#"{"input":"p"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn adversarial_truncated_markup_of_the_new_dialects_never_panics() {
        let samples = [
            format!("{DS_CALLS}{DS_CALL}function{DS_SEP}shell\n```json\n{{\"command\": [\"ls\"]}}\n```{DS_CALL_END}{DS_CALLS_END}"),
            "<minimax:tool_call><invoke name=\"shell\"><parameter name=\"command\">[\"ls\"]</parameter></invoke></minimax:tool_call>".to_string(),
            "<|start|>assistant<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{\"command\": [\"ls\"]}<|call|>".to_string(),
        ];
        for sample in samples {
            for end in (0..=sample.len()).filter(|end| sample.is_char_boundary(*end)) {
                let _ = recover_tool_calls(&sample[..end], &tools());
                for start in (0..end)
                    .filter(|start| sample.is_char_boundary(*start))
                    .step_by(7)
                {
                    let _ = recover_tool_calls(&sample[start..end], &tools());
                }
            }
        }
    }

    #[test]
    fn a_call_after_a_closed_fence_is_recovered_and_the_fence_stays_prose() {
        let text = "Here is the plan:\n```sh\nls\n```\n<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}</tool_call>";
        assert_eq!(
            recover_tool_calls(text, &tools()),
            Some(Recovered {
                text: "Here is the plan:\n```sh\nls\n```".into(),
                calls: one("shell", r#"{"command":["ls"]}"#)
            })
        );
        // Fence characters inside a call's own body do not hide the call after it.
        let text = "<tool_call><function=apply_patch><parameter=input>\n```\nunbalanced\n</parameter></function></tool_call>\n<tool_call>{\"name\": \"shell\", \"arguments\": {}}</tool_call>";
        let calls = recover_tool_calls(text, &tools()).map(|r| r.calls);
        assert_eq!(calls.map(|calls| calls.len()), Some(2));
        // A quoted block between two real calls stays prose.
        let text = format!(
            "<tool_call>{{\"name\": \"shell\", \"arguments\": {{}}}}</tool_call>\n{QUOTED}"
        );
        let recovered = recover_tool_calls(&text, &tools());
        assert_eq!(recovered.as_ref().map(|r| r.calls.len()), Some(1));
        assert!(
            recovered.is_some_and(|r| r.text.contains("touch")),
            "the quote stays in the prose"
        );
    }

    #[test]
    fn only_a_whole_answer_of_fenced_json_is_a_fenced_call() {
        assert_eq!(
            recover_tool_calls(
                "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}\n```",
                &tools()
            )
            .map(|r| r.calls),
            Some(one("shell", r#"{"command":["ls"]}"#))
        );
        assert_eq!(
            recover_tool_calls(
                "The call looks like this:\n```json\n{\"name\": \"shell\", \"arguments\": {}}\n```",
                &tools()
            ),
            None
        );
    }

    #[test]
    fn the_scanner_finds_the_same_place_however_the_text_is_split() {
        let texts = [
            QUOTED.to_string(),
            format!("{QUOTED}\nNow for real: <tool_call>{{}}</tool_call>"),
            "plain\n  ``\nstill plain [TOOL_CALLS]".to_string(),
            "é```\n<tool_call>".to_string(),
            "```\n<tool_call>\n   ```   \r\nafter <|tool_call_begin|>".to_string(),
            "```a`b\n<tool_call>".to_string(),
            "~~~ é\n<tool_call>\n~~~~\n<tool_call>".to_string(),
            "see `<tool_call>` and ``a`<tool_call>`` then\n`open <tool_call>\nreal <tool_call>"
                .to_string(),
            "``x`` <tool_call>".to_string(),
        ];
        for text in &texts {
            let whole = MarkupScanner::new().push(text);
            let boundaries: Vec<usize> = (0..=text.len())
                .filter(|&at| text.is_char_boundary(at))
                .collect();
            for &split in &boundaries {
                let mut scanner = MarkupScanner::new();
                let first = scanner.push(&text[..split]);
                let found = first.or_else(|| scanner.push(&text[split..]));
                assert_eq!(found, whole, "{text:?} split at {split}");
            }
            let mut scanner = MarkupScanner::new();
            let mut found = None;
            for window in boundaries.windows(2) {
                found = found.or_else(|| scanner.push(&text[window[0]..window[1]]));
            }
            assert_eq!(found, whole, "{text:?} one character at a time");
        }
        assert_eq!(MarkupScanner::new().push(QUOTED), None);
        let real = format!("{QUOTED}\nNow for real: <tool_call>");
        assert_eq!(MarkupScanner::new().push(&real), real.rfind("<tool_call>"));
        assert_eq!(MarkupScanner::new().push("```a`b\n<tool_call>"), Some(7));
        assert_eq!(
            MarkupScanner::new().push("~~~ é\n<tool_call>\n~~~~\n<tool_call>"),
            Some(24)
        );
        // Inline code: `` opens a span that only `` closes; a lone ` left open quotes
        // the rest of its line.
        let inline =
            "see `<tool_call>` and ``a`<tool_call>`` then\n`open <tool_call>\nreal <tool_call>";
        assert_eq!(
            MarkupScanner::new().push(inline),
            inline.rfind("<tool_call>")
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
