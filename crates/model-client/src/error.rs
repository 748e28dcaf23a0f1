//! The typed error every provider call ends in, worded so a user can act on it.

use std::time::Duration;

use interpreter_protocol::ErrorKind;

use crate::limits::{Oversize, human_bytes};

/// Why a request to a model provider failed. Each message is a one-liner naming the
/// provider and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    #[error(
        "model provider `{provider}` needs an API key: set the environment variable {env_key}{}",
        instructions.as_deref().map(|text| format!(" ({text})")).unwrap_or_default()
    )]
    MissingApiKey {
        provider: String,
        env_key: String,
        instructions: Option<String>,
    },

    #[error("model provider `{provider}` is misconfigured: {message}")]
    Config { provider: String, message: String },

    /// The server answered the request with an error status (before any stream). The
    /// message names the URL and the status; `hint` says what to do about it.
    #[error(
        "model provider `{provider}` answered {status}{} to POST {url}{}{}{}",
        status_reason(*status).map(|reason| format!(" {reason}")).unwrap_or_default(),
        Some(message).filter(|m| !m.is_empty()).map(|m| format!(": {m}")).unwrap_or_default(),
        attempts_note(*attempts),
        hint_note(hint)
    )]
    Http {
        provider: String,
        url: String,
        status: u16,
        /// What the server said, summarised to one short line (may be empty).
        message: String,
        hint: String,
        attempts: u64,
    },

    /// An error event inside a stream that refused the request as such.
    #[error("model provider `{provider}` rejected the request ({status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },

    /// The prompt does not fit the model's context window, as the server said (by status,
    /// error `type`/`code` or message; see [`context_overflow`]).
    #[error(
        "model provider `{provider}` says the conversation exceeds the model's context window{}: {message}",
        context_window.map(|n| format!(" ({n} tokens)")).unwrap_or_default()
    )]
    ContextWindowExceeded {
        provider: String,
        message: String,
        /// The window size, when the server named it (llama.cpp `n_ctx`, "maximum context
        /// length is N").
        context_window: Option<u64>,
        /// The prompt size the server counted, when it said.
        prompt_tokens: Option<u64>,
    },

    /// An error event inside a stream saying the server is rate limited or overloaded.
    #[error("model provider `{provider}` is rate limited or overloaded ({status}): {message}")]
    Retryable {
        provider: String,
        status: u16,
        message: String,
    },

    /// No HTTP answer at all: the connection failed, or no response headers arrived.
    #[error(
        "could not reach model provider `{provider}` at {url}: {reason}{}{}",
        attempts_note(*attempts),
        hint_note(hint)
    )]
    Connection {
        provider: String,
        url: String,
        failure: ConnectionFailure,
        /// The failure in plain words (what was tried and what happened).
        reason: String,
        hint: String,
        attempts: u64,
    },

    #[error(
        "model provider `{provider}` sent nothing for {}s while streaming (stream_idle_timeout_ms)",
        idle.as_secs_f64()
    )]
    StreamIdle { provider: String, idle: Duration },

    /// The whole request, from sending it to the end of its answer, took longer than
    /// `stream_max_duration_ms`, however steadily the server kept sending. Not retried:
    /// another attempt would get the same time again.
    #[error(
        "model provider `{provider}` did not finish its answer within {}s \
         (stream_max_duration_ms); the answer was dropped and is not retried",
        limit.as_secs_f64()
    )]
    StreamDeadline { provider: String, limit: Duration },

    /// The response went past one of its size bounds (one SSE line or event, one answer,
    /// one tool call's arguments): the server is broken or hostile. Not retried: the same
    /// request would be answered the same way.
    #[error(
        "model provider `{provider}` sent {} over {} ({} in [model_providers.{provider}]); \
         the answer was dropped and is not retried",
        what.what(),
        human_bytes(*limit),
        what.key()
    )]
    ResponseTooLarge {
        provider: String,
        what: Oversize,
        /// The bound it went past, in bytes.
        limit: u64,
    },

    #[error("model provider `{provider}` broke the response stream: {message}")]
    Stream { provider: String, message: String },

    /// The response completed without text, tool calls or reasoning. Ending the turn with
    /// "" would look like success to every front end, so it is a failure worth retrying.
    #[error(
        "model provider `{provider}` returned an empty answer (no text, no tool call, no reasoning)"
    )]
    EmptyAnswer { provider: String },

    /// The stream ended without a finish reason (Chat Completions) or completion event
    /// (Responses): whatever arrived is a cut-off answer.
    #[error("model provider `{provider}`: the stream ended before the model finished ({detail})")]
    Truncated { provider: String, detail: String },

    /// A `200` stream that closed without a single event (llama-cpp-python does this when
    /// the prompt overflows a streamed request). One non-streaming probe of the same
    /// request found no other explanation; `detail` says what the probe saw.
    #[error("model provider `{provider}` closed the stream without sending anything ({detail})")]
    EmptyStream { provider: String, detail: String },

    #[error("the model request was cancelled")]
    Cancelled,
}

/// Why a connection attempt got no HTTP answer, as far as the transport says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionFailure {
    /// Nothing accepts connections at the host and port.
    Refused,
    /// The host name does not resolve.
    Dns,
    /// TLS handshake or certificate verification failed.
    Tls,
    /// The URL cannot be requested at all (config validation normally catches this).
    InvalidUrl,
    /// Connecting, or waiting for the response headers, took too long.
    Timeout,
    /// The connection was reset or closed before the answer arrived.
    Reset,
    /// Anything the transport does not say more about.
    Other,
}

impl ProviderError {
    /// The coarse category front ends report next to the message.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::MissingApiKey { .. } => ErrorKind::Unauthorized,
            Self::Http { status, .. } => match status {
                401 | 403 => ErrorKind::Unauthorized,
                _ if retryable_status(*status) => ErrorKind::ServerOverloaded,
                _ => ErrorKind::BadRequest,
            },
            Self::Config { .. } | Self::BadRequest { .. } => ErrorKind::BadRequest,
            Self::ContextWindowExceeded { .. } => ErrorKind::ContextWindowExceeded,
            Self::Retryable { .. } => ErrorKind::ServerOverloaded,
            Self::Connection { .. } => ErrorKind::Connection,
            // A stream cut short by the client, as an idle one is.
            Self::StreamIdle { .. } | Self::StreamDeadline { .. } => ErrorKind::StreamIdle,
            // The server misbehaved; nothing about the request was wrong.
            Self::ResponseTooLarge { .. }
            | Self::Stream { .. }
            | Self::EmptyAnswer { .. }
            | Self::EmptyStream { .. }
            | Self::Truncated { .. }
            | Self::Cancelled => ErrorKind::Internal,
        }
    }

    /// The one retry rule: whether trying the same request again may succeed. The client
    /// applies it to failures before the stream starts (with `request_max_retries`), the
    /// engine to failures of an established stream (with `stream_max_retries`); each
    /// failure is retried by exactly one of them. The table is in docs/reliability.md.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { status, .. } => retryable_status(*status),
            Self::Connection { failure, .. } => matches!(
                failure,
                ConnectionFailure::Timeout | ConnectionFailure::Reset | ConnectionFailure::Other
            ),
            Self::Retryable { .. }
            | Self::Stream { .. }
            | Self::StreamIdle { .. }
            | Self::EmptyAnswer { .. }
            | Self::EmptyStream { .. }
            | Self::Truncated { .. } => true,
            Self::MissingApiKey { .. }
            | Self::Config { .. }
            | Self::BadRequest { .. }
            | Self::ContextWindowExceeded { .. }
            | Self::StreamDeadline { .. }
            | Self::ResponseTooLarge { .. }
            | Self::Cancelled => false,
        }
    }

    /// The failure of one attempt as a retry notice shows it: no attempt count and no
    /// hint, because the client is about to try again.
    pub(crate) fn into_retry_notice(mut self) -> Self {
        if let Self::Http { attempts, hint, .. } | Self::Connection { attempts, hint, .. } =
            &mut self
        {
            *attempts = 1;
            hint.clear();
        }
        self
    }

    /// The message a turn fails with after `attempts` tries ended in this error. For
    /// answers that were empty or cut off every time, it says so plainly, because "the
    /// model returned nothing" is the whole story.
    pub fn final_message(&self, attempts: u32) -> String {
        let times = if attempts == 1 {
            "once".to_string()
        } else {
            format!("{attempts} times")
        };
        match self {
            Self::EmptyAnswer { provider } => format!(
                "the model returned an empty answer {times} (model provider `{provider}` sent no text, no tool call and no reasoning)"
            ),
            Self::Truncated { provider, detail } => format!(
                "the stream ended before the model finished ({times}; model provider `{provider}`: {detail})"
            ),
            _ if attempts > 1 => format!("{self} (after {attempts} attempts)"),
            _ => self.to_string(),
        }
    }
}

/// Statuses worth another try: the server (or a gateway in front of it) is busy, timed
/// out or failed transiently. 408 Request Timeout, 409 Conflict (a concurrent request),
/// 429 Too Many Requests, 500, 502, 503, 504, and the 520–524/529 that CDN gateways in
/// front of hosted APIs answer. Every other status is an answer that will not change.
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(
        status,
        408 | 409 | 429 | 500 | 502 | 503 | 504 | 520..=524 | 529
    )
}

/// The reason phrase of a status, for messages (`404 Not Found`).
fn status_reason(status: u16) -> Option<&'static str> {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|status| status.canonical_reason())
}

/// ` (after N attempts)` when the request was tried more than once.
fn attempts_note(attempts: u64) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// `; HINT`, or nothing without a hint.
fn hint_note(hint: &str) -> String {
    if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    }
}

/// How much of a server's words end up in a failed request's message.
pub(crate) const SUMMARY_CHARS: usize = 200;

/// A server's error body as one short line: the `message` of a JSON error, the title
/// (else first heading, else text) of an HTML page, or the text itself; whitespace
/// collapsed and cut at `max_chars`. A proxy's or web server's whole page never ends up
/// in a message. The one rule for quoting a server's body, in request errors and in
/// model-list errors alike.
pub(crate) fn body_summary(body: &str, content_type: Option<&str>, max_chars: usize) -> String {
    let trimmed = body.trim_start();
    let looks_like_html = content_type.is_some_and(|t| t.to_ascii_lowercase().contains("html"))
        || trimmed.get(..15).is_some_and(|head| {
            let head = head.to_ascii_lowercase();
            head.starts_with("<!doctype html") || head.starts_with("<html")
        });
    let text = if looks_like_html {
        html_summary(body)
    } else {
        let fields = error_fields(body);
        fields
            .message
            .or_else(|| {
                fields.detail.map(|detail| match detail {
                    serde_json::Value::String(text) => text,
                    other => other.to_string(),
                })
            })
            .unwrap_or_else(|| body.to_string())
    };
    clip(&collapse_whitespace(&text), max_chars)
}

/// The page's `<title>` (else its first `<h1>`…`<h6>`), then the rest of its visible
/// text: web servers' error pages put the useful part ("Unsupported method ('POST')")
/// after a generic title.
fn html_summary(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let element = |open: &str, close: &str| -> Option<String> {
        let start = lower.find(open)?;
        let content = start + lower[start..].find('>')? + 1;
        let end = content + lower[content..].find(close)?;
        let text = collapse_whitespace(&decode_entities(&strip_tags(&html[content..end])));
        Some(text).filter(|t| !t.is_empty())
    };
    let title = element("<title", "</title")
        .or_else(|| (1..=6).find_map(|n| element(&format!("<h{n}"), &format!("</h{n}"))))
        .unwrap_or_default();
    let body = lower.find("<body").map_or(html, |at| &html[at..]);
    let text = collapse_whitespace(&decode_entities(&strip_tags(body)));
    let rest = text.strip_prefix(title.as_str()).unwrap_or(&text).trim();
    match (title.is_empty(), rest.is_empty()) {
        (_, true) => title,
        (true, false) => rest.to_string(),
        (false, false) => format!("{title}: {rest}"),
    }
}

/// The text outside tags, with `<script>` and `<style>` contents left out.
fn strip_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    let mut rest = html;
    let mut visible = String::with_capacity(html.len());
    // Cut out script and style blocks first: their contents are not text.
    loop {
        let script = find_ignoring_case(rest, "<script").map(|at| (at, "</script"));
        let style = find_ignoring_case(rest, "<style").map(|at| (at, "</style"));
        let Some((start, closer)) = script.into_iter().chain(style).min() else {
            break;
        };
        let (before, block) = rest.split_at(start);
        visible.push_str(before);
        rest = match find_ignoring_case(block, closer) {
            Some(end) => block[end..]
                .find('>')
                .map_or("", |close| &block[end + close + 1..]),
            None => "",
        };
    }
    visible.push_str(rest);
    for c in visible.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

fn find_ignoring_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack.to_ascii_lowercase().find(needle)
}

fn decode_entities(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What a server said about a prompt that does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub message: String,
    pub context_window: Option<u64>,
    pub prompt_tokens: Option<u64>,
}

impl Overflow {
    pub(crate) fn into_error(self, provider: &str) -> ProviderError {
        ProviderError::ContextWindowExceeded {
            provider: provider.to_string(),
            message: self.message,
            context_window: self.context_window,
            prompt_tokens: self.prompt_tokens,
        }
    }
}

/// The error object of an error body, wherever the server family puts it: OpenAI style
/// `{"error":{...}}`, vLLM's older top-level `{"object":"error","message":...}`, or
/// `{"error":"text"}`. Only this quirk boundary looks at untyped JSON.
#[derive(Debug, Default, serde::Deserialize)]
struct ErrorFields {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// A string (`"context_length_exceeded"`, Z.AI's `"1261"`) or a number (`400`).
    #[serde(default)]
    code: Option<serde_json::Value>,
    /// llama.cpp's `exceed_context_size_error` carries both counts.
    #[serde(default)]
    n_ctx: Option<u64>,
    #[serde(default)]
    n_prompt_tokens: Option<u64>,
    /// FastAPI-based servers (vLLM's older routes) put their words in `detail`.
    #[serde(default)]
    detail: Option<serde_json::Value>,
}

fn error_fields(body: &str) -> ErrorFields {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return ErrorFields {
            message: Some(body.trim().to_string()).filter(|m| !m.is_empty()),
            ..Default::default()
        };
    };
    let object = match value.get("error") {
        Some(serde_json::Value::String(text)) => {
            return ErrorFields {
                message: Some(text.clone()),
                ..Default::default()
            };
        }
        Some(error) => error.clone(),
        None => value,
    };
    serde_json::from_value(object).unwrap_or_default()
}

/// Error `type`/`code` values that mean "prompt too long", per server family:
/// llama.cpp `exceed_context_size_error`; OpenAI and llama-cpp-python
/// `context_length_exceeded`; Z.AI (GLM) business code `1261` ("Prompt exceeds max
/// length").
const OVERFLOW_CODES: &[&str] = &[
    "exceed_context_size_error",
    "context_length_exceeded",
    "string_above_max_length",
    "1261",
];

/// Message fragments that mean "prompt too long", per server family (lower case):
/// vLLM / OpenAI / DeepSeek / llama-cpp-python "maximum context length is N tokens";
/// llama.cpp "exceeds the available context size"; OpenAI Responses "exceeds the context
/// window"; Moonshot "exceeded model token limit"; Z.AI "prompt exceeds max length";
/// DashScope "range of input length should be [1, N]"; Ollama (native API, and
/// embeddings) "input length exceeds the context length"; Anthropic-style "prompt is too
/// long"; vLLM's newer "longer than the maximum model length".
const OVERFLOW_PHRASES: &[&str] = &[
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the available context size",
    "exceeds the context",
    "context window",
    "context size",
    "exceeded model token limit",
    "max length exceeded",
    "prompt exceeds max length",
    "range of input length should be",
    "input length exceeds",
    "prompt is too long",
    "prompt too long",
    "too many tokens",
    "maximum model length",
    "maximum prompt length",
];

/// Whether an error body (status 400/413, or a stream's error event) says the prompt
/// does not fit the context window, with the sizes when the server named them. The one
/// place that knows every server family's way of saying so.
pub(crate) fn context_overflow(status: u16, body: &str) -> Option<Overflow> {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return None;
    }
    let fields = error_fields(body);
    let code = match &fields.code {
        Some(serde_json::Value::String(code)) => code.to_lowercase(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let kind = fields.kind.as_deref().unwrap_or("").to_lowercase();
    let message = fields.message.unwrap_or_default();
    let lower = message.to_lowercase();
    let by_code = OVERFLOW_CODES.iter().any(|c| *c == code || *c == kind);
    let by_message = OVERFLOW_PHRASES.iter().any(|p| lower.contains(p));
    // A 500 counts only when the words are unmistakable (vLLM behind some gateways).
    let matched = if status == 500 {
        by_message
    } else {
        by_code || by_message
    };
    if !matched {
        return None;
    }
    let context_window = fields.n_ctx.or_else(|| window_from_message(&lower));
    let prompt_tokens = fields
        .n_prompt_tokens
        .or_else(|| prompt_tokens_from_message(&lower));
    let message = if message.trim().is_empty() {
        if code.is_empty() { kind } else { code }
    } else {
        message
    };
    Some(Overflow {
        message,
        context_window,
        prompt_tokens,
    })
}

/// The error a failure reported inside a stream stands for (Responses `error` and
/// `response.failed`, Messages `error`): `code` (or the error's `type`) and `message` as
/// the server gave them. The one classification of in-stream failures for both wires.
pub(crate) fn stream_failure(
    provider: &str,
    code: Option<serde_json::Value>,
    kind: Option<String>,
    message: Option<String>,
) -> ProviderError {
    // The server's words end up in the turn's one-line error: long enough for any real
    // failure (and the sizes an overflow names), never a whole event.
    const SERVER_WORDS: usize = 1000;
    let code = match &code {
        Some(serde_json::Value::String(code)) => clip_bytes(code, SERVER_WORDS),
        Some(other) => clip_bytes(&other.to_string(), SERVER_WORDS),
        None => clip_bytes(kind.as_deref().unwrap_or_default(), SERVER_WORDS),
    };
    let message = message
        .map(|message| clip_bytes(&message, SERVER_WORDS))
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| {
            if code.is_empty() {
                "the server reported a failure without details".to_string()
            } else {
                code.clone()
            }
        });
    let provider = provider.to_string();
    let lower_code = code.to_lowercase();
    let as_body = serde_json::json!({"error": {"message": message, "code": code}}).to_string();
    if let Some(overflow) = context_overflow(400, &as_body) {
        return overflow.into_error(&provider);
    }
    match lower_code.as_str() {
        "rate_limit_exceeded" | "rate_limit_error" | "too_many_requests" => {
            ProviderError::Retryable {
                provider,
                status: 429,
                message,
            }
        }
        "server_is_overloaded" | "slow_down" | "overloaded" | "overloaded_error" => {
            ProviderError::Retryable {
                provider,
                status: 503,
                message,
            }
        }
        code if code.starts_with("invalid") || code == "bad_request" => ProviderError::BadRequest {
            provider,
            status: 400,
            message,
        },
        // Server errors and anything unknown: the response is lost, and sampling again
        // may well succeed.
        _ => ProviderError::Stream {
            provider,
            message: if code.is_empty() {
                message
            } else {
                format!("{message} ({code})")
            },
        },
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), marked when cut.
pub(crate) fn clip_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The number right after the first of `markers` found in `text`.
fn number_after(text: &str, markers: &[&str]) -> Option<u64> {
    markers.iter().find_map(|marker| {
        let start = text.find(marker)? + marker.len();
        let digits: String = text[start..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

fn window_from_message(lower: &str) -> Option<u64> {
    number_after(
        lower,
        &[
            "maximum context length is",
            "available context size (",
            "context window of",
            "maximum model length of",
            "model token limit:",
            "max length:",
            "range of input length should be [1,",
            "maximum prompt length is",
            " tokens >",
        ],
    )
}

fn prompt_tokens_from_message(lower: &str) -> Option<u64> {
    number_after(
        lower,
        &[
            "request (",
            "you requested",
            "resulted in",
            "requested:",
            "request contains",
            "prompt is too long:",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `python3 -m http.server` answers a POST.
    const PYTHON_501: &str = r#"<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <style type="text/css">:root { color-scheme: light dark; }</style>
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
        <p>Error code explanation: 501 - Server does not support this operation.</p>
    </body>
</html>
"#;

    #[test]
    fn html_pages_are_summarised_to_title_and_text() {
        assert_eq!(
            body_summary(PYTHON_501, Some("text/html;charset=utf-8"), SUMMARY_CHARS),
            "Error response: Error code: 501 Message: Unsupported method ('POST'). Error code \
             explanation: 501 - Server does not support this operation."
        );
        let nginx = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>";
        assert_eq!(
            body_summary(nginx, None, SUMMARY_CHARS),
            "404 Not Found: nginx/1.25.3"
        );
        let script =
            "<html><body><script>var x = '<b>';</script><h2>Gone &amp; away</h2></body></html>";
        assert_eq!(
            body_summary(script, Some("text/html"), SUMMARY_CHARS),
            "Gone & away"
        );
    }

    #[test]
    fn long_bodies_are_cut_and_json_errors_give_their_message() {
        let page = format!(
            "<html><title>T</title><body>{}</body></html>",
            "word ".repeat(500)
        );
        let summary = body_summary(&page, Some("text/html"), SUMMARY_CHARS);
        assert!(summary.ends_with('…'), "{summary}");
        assert_eq!(summary.chars().count(), SUMMARY_CHARS + 1);
        assert_eq!(
            body_summary(
                r#"{"error":{"message":"bad tool"}}"#,
                Some("application/json"),
                SUMMARY_CHARS
            ),
            "bad tool"
        );
        assert_eq!(
            body_summary(r#"{"error":"nope"}"#, None, SUMMARY_CHARS),
            "nope"
        );
        assert_eq!(
            body_summary(r#"{"detail":"Not Found"}"#, None, SUMMARY_CHARS),
            "Not Found"
        );
        assert_eq!(
            body_summary("  plain\n\ntext  ", None, SUMMARY_CHARS),
            "plain text"
        );
        assert_eq!(body_summary("", None, SUMMARY_CHARS), "");
        assert_eq!(
            body_summary(&"x".repeat(1000), None, SUMMARY_CHARS)
                .chars()
                .count(),
            SUMMARY_CHARS + 1
        );
    }

    #[test]
    fn only_transient_failures_are_retryable() {
        let http = |status| ProviderError::Http {
            provider: "p".into(),
            url: "http://h/v1/chat/completions".into(),
            status,
            message: String::new(),
            hint: "h".into(),
            attempts: 1,
        };
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(http(status).is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 405, 413, 422, 501, 505] {
            assert!(!http(status).is_retryable(), "{status}");
        }
        let connection = |failure| ProviderError::Connection {
            provider: "p".into(),
            url: "u".into(),
            failure,
            reason: "r".into(),
            hint: "h".into(),
            attempts: 1,
        };
        for failure in [
            ConnectionFailure::Refused,
            ConnectionFailure::Dns,
            ConnectionFailure::Tls,
            ConnectionFailure::InvalidUrl,
        ] {
            assert!(!connection(failure).is_retryable(), "{failure:?}");
        }
        for failure in [ConnectionFailure::Timeout, ConnectionFailure::Reset] {
            assert!(connection(failure).is_retryable(), "{failure:?}");
        }
    }

    #[test]
    fn an_http_failure_is_one_line_with_status_url_and_hint() {
        let err = ProviderError::Http {
            provider: "local".into(),
            url: "http://127.0.0.1:8000/chat/completions".into(),
            status: 404,
            message: "Not Found".into(),
            hint: "try base_url = \"http://127.0.0.1:8000/v1\"".into(),
            attempts: 1,
        };
        assert_eq!(
            err.to_string(),
            "model provider `local` answered 404 Not Found to POST \
             http://127.0.0.1:8000/chat/completions: Not Found; try base_url = \
             \"http://127.0.0.1:8000/v1\""
        );
    }
}
