//! Scripted responses: what the mock answers to one request. The same shape is read
//! from JSON by the `mock-model` binary, e.g.
//! `[{"chunks": [...]}, {"status": 429, "body": "slow down", "retry_after": 1}]`.
//! A chunk with a string `type` (a Responses API event) is sent with a matching
//! `event:` line; Responses scripts set `"send_done": false`, as real servers send no
//! `[DONE]` there.

use serde::{Deserialize, Serialize};

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MockResponse {
    Sse(SseScript),
    Status(StatusScript),
}

/// A `200 text/event-stream` answer: each chunk becomes one `data:` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SseScript {
    /// Raw `chat.completion.chunk` objects (see [`super::chunk`] for builders) or
    /// Responses API events (see [`super::responses_event`]).
    pub chunks: Vec<serde_json::Value>,
    /// Pause before every chunk after the first.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// After the chunks, keep the connection open without sending anything (for idle
    /// timeout tests). No `[DONE]` is sent.
    #[serde(default)]
    pub stall_after_chunks: bool,
    /// Whether `data: [DONE]` ends the stream (otherwise it just closes).
    #[serde(default = "default_true")]
    pub send_done: bool,
    /// A recorded SSE body sent byte for byte instead of framing `chunks` (which then
    /// only hold its parsed `data:` payloads, for the invariant checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Raw bytes a broken or hostile server keeps sending after the chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood: Option<Flood>,
}

/// What a server floods the client with after the chunks: `head` once, then `frame`
/// `times` times (each after the script's `chunk_delay_ms`), then the connection closes
/// (no `[DONE]`). Made as it is sent, so a test streams gigabytes without holding them;
/// the server stops as soon as the client hangs up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flood {
    /// Sent once, e.g. the start of a line that never ends: `data: {"choices":[…"`.
    #[serde(default)]
    pub head: String,
    /// Sent over and over: more of that line, or a whole `data: …\n\n` event.
    pub frame: String,
    pub times: u64,
}

/// A non-streaming answer with this status and body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusScript {
    pub status: u16,
    #[serde(default)]
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<RetryAfter>,
}

/// A `Retry-After` header: delay-seconds or any literal text (an HTTP date).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RetryAfter {
    Seconds(u64),
    Text(String),
}

impl RetryAfter {
    pub fn header_value(&self) -> String {
        match self {
            Self::Seconds(seconds) => seconds.to_string(),
            Self::Text(text) => text.clone(),
        }
    }
}

fn default_true() -> bool {
    true
}

impl MockResponse {
    /// A stream of these chunks followed by `[DONE]`.
    pub fn sse(chunks: Vec<serde_json::Value>) -> Self {
        Self::Sse(SseScript {
            chunks,
            chunk_delay_ms: 0,
            stall_after_chunks: false,
            send_done: true,
            raw: None,
            flood: None,
        })
    }

    /// A recorded SSE body (comments, `data:` lines, `[DONE]`, exactly as a real server
    /// sent it), replayed byte for byte.
    pub fn raw_sse(body: impl Into<String>) -> Self {
        let body = body.into();
        let chunks = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect();
        Self::Sse(SseScript {
            chunks,
            chunk_delay_ms: 0,
            stall_after_chunks: false,
            send_done: false,
            raw: Some(body),
            flood: None,
        })
    }

    /// A Responses API stream of these events, ending when they end (no `[DONE]`).
    pub fn responses(events: Vec<serde_json::Value>) -> Self {
        Self::Sse(SseScript {
            chunks: events,
            chunk_delay_ms: 0,
            stall_after_chunks: false,
            send_done: false,
            raw: None,
            flood: None,
        })
    }

    /// An Anthropic Messages stream of these events (see
    /// [`super::messages_event::MessageEvents`]), ending when they end (no `[DONE]`).
    pub fn messages(events: Vec<serde_json::Value>) -> Self {
        Self::responses(events)
    }

    /// Sends these chunks, then nothing at all while keeping the connection open.
    pub fn sse_then_stall(chunks: Vec<serde_json::Value>) -> Self {
        Self::Sse(SseScript {
            chunks,
            chunk_delay_ms: 0,
            stall_after_chunks: true,
            send_done: false,
            raw: None,
            flood: None,
        })
    }

    /// Sends these chunks, then floods the client: `head` once and `frame` `times`
    /// times, as raw bytes (see [`Flood`]). With [`Self::with_chunk_delay`], a server
    /// that trickles.
    pub fn sse_then_flood(
        chunks: Vec<serde_json::Value>,
        head: impl Into<String>,
        frame: impl Into<String>,
        times: u64,
    ) -> Self {
        Self::Sse(SseScript {
            chunks,
            chunk_delay_ms: 0,
            stall_after_chunks: false,
            send_done: false,
            raw: None,
            flood: Some(Flood {
                head: head.into(),
                frame: frame.into(),
                times,
            }),
        })
    }

    /// A plain HTTP answer, e.g. `status(401, "{\"error\":{\"message\":\"bad key\"}}")`.
    pub fn status(code: u16, body: impl Into<String>) -> Self {
        Self::Status(StatusScript {
            status: code,
            body: body.into(),
            retry_after: None,
        })
    }

    /// Adds a `Retry-After: <seconds>` header (status answers only).
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        if let Self::Status(script) = &mut self {
            script.retry_after = Some(RetryAfter::Seconds(seconds));
        }
        self
    }

    /// Pauses this long before every chunk after the first (SSE answers only).
    pub fn with_chunk_delay(mut self, delay: std::time::Duration) -> Self {
        if let Self::Sse(script) = &mut self {
            script.chunk_delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        }
        self
    }

    /// Ends the stream by closing the connection instead of sending `[DONE]`.
    pub fn without_done(mut self) -> Self {
        if let Self::Sse(script) = &mut self {
            script.send_done = false;
        }
        self
    }
}
