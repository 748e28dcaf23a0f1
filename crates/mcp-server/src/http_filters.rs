//! Two corrections around rmcp's streamable HTTP service, as axum middleware: what it
//! sends legacy-era clients, and what it does with an unreadable answer from a client.
//!
//! * **Priming events only for clients that poll.** rmcp opens every SSE stream with an
//!   empty-data event (`id`, `retry`, `data:`), the 2025-11-25 way of letting a client
//!   resume a stream the server closes. A client that negotiated an older revision never
//!   asked for it, and some parse every event's data as JSON (Gemini CLI's client fails
//!   with "Unexpected end of JSON input" and gets no tools). rmcp decides per server, not
//!   per client, so the events are taken out here for requests whose
//!   `MCP-Protocol-Version` is older than 2025-11-25 (or absent, as on `initialize`).
//! * **An unreadable answer settles its request.** A POSTed answer to one of our requests
//!   that does not decode (both `result` and `error`, say) is refused by rmcp, and the
//!   approval waiting for it would hang until its deadline. It is rewritten into an error
//!   answer for the same id ([`approval::unreadable_answer_as_error`]), which denies it at
//!   once. POST bodies are also bounded here, as stdio lines are.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::ClientJsonRpcMessage;
use serde_json::Value;

use crate::approval;

/// The first revision whose clients expect priming events (SSE polling, SEP-1699).
/// Revisions are dates, so they compare as strings.
const FIRST_POLLING_REVISION: &str = "2025-11-25";

/// The largest POST body read: the same bound as a stdio line.
pub(crate) const MAX_BODY_BYTES: usize = interpreter_transport::lines::MAX_LINE_BYTES;

/// Middleware: strip priming events from the SSE responses of pre-2025-11-25 requests.
pub(crate) async fn priming_only_for_polling_clients(request: Request, next: Next) -> Response {
    let polling = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|version| version >= FIRST_POLLING_REVISION);
    let response = next.run(request).await;
    let is_event_stream = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if polling || !is_event_stream {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::from_stream(without_priming(body)))
}

/// The body's SSE events with the empty-data ones left out. Events are cut at their blank
/// line, whatever the chunking; a partial event at the end is passed on as it is.
fn without_priming(
    body: Body,
) -> impl futures::Stream<Item = Result<Bytes, axum::Error>> + Send + 'static {
    struct State {
        chunks: axum::body::BodyDataStream,
        pending: Vec<u8>,
        /// How much of `pending` is known to hold no event end, so a large event that
        /// arrives in many chunks is scanned once, not once per chunk.
        scanned: usize,
        ended: bool,
    }
    let state = State {
        chunks: body.into_data_stream(),
        pending: Vec::new(),
        scanned: 0,
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if state.ended {
                if state.pending.is_empty() {
                    return None;
                }
                let rest = Bytes::from(std::mem::take(&mut state.pending));
                return Some((Ok(rest), state));
            }
            let kept = take_kept_events(&mut state.pending, &mut state.scanned);
            if !kept.is_empty() {
                return Some((Ok(Bytes::from(kept)), state));
            }
            match state.chunks.next().await {
                Some(Ok(chunk)) => state.pending.extend_from_slice(&chunk),
                Some(Err(e)) => return Some((Err(e), state)),
                None => state.ended = true,
            }
        }
    })
}

/// Remove every complete event from `pending` and return those worth sending. The first
/// `scanned` bytes of `pending` are known to hold no blank line; on return it says how
/// far the leftover was searched.
fn take_kept_events(pending: &mut Vec<u8>, scanned: &mut usize) -> Vec<u8> {
    let mut kept = Vec::new();
    loop {
        // Back one byte: the blank line may straddle the old end.
        let from = scanned.saturating_sub(1).min(pending.len());
        let Some(at) = pending[from..].windows(2).position(|w| w == b"\n\n") else {
            *scanned = pending.len();
            return kept;
        };
        let event: Vec<u8> = pending.drain(..from + at + 2).collect();
        *scanned = 0;
        if !is_priming(&event) {
            kept.extend_from_slice(&event);
        }
    }
}

/// An event with fields but no data: rmcp's priming event. Comment-only blocks (the
/// keep-alives) are not.
fn is_priming(event: &[u8]) -> bool {
    let mut has_field = false;
    let mut has_data = false;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b":") {
            continue;
        }
        has_field = true;
        if let Some(data) = line.strip_prefix(b"data:") {
            let data = data.strip_prefix(b" ").unwrap_or(data);
            has_data |= !data.trim_ascii().is_empty();
        }
    }
    has_field && !has_data
}

/// Middleware: bound POST bodies, and turn an unreadable answer into an error answer.
pub(crate) async fn unreadable_answers_settle(request: Request, next: Next) -> Response {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("a message may be at most {MAX_BODY_BYTES} bytes\n"),
        )
            .into_response();
    };
    let body = match repaired(&bytes) {
        Some(answer) => Body::from(answer),
        None => Body::from(bytes),
    };
    next.run(Request::from_parts(parts, body)).await
}

/// The error answer to put in place of `body`, when `body` is an unreadable answer.
fn repaired(body: &[u8]) -> Option<Vec<u8>> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = serde_json::from_value::<ClientJsonRpcMessage>(value.clone()).err()?;
    let answer = approval::unreadable_answer_as_error(&value, &error.to_string())?;
    tracing::warn!("an unreadable answer to our request, taken as an error: {error}");
    serde_json::to_vec(&answer).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priming_events_are_dropped_and_messages_kept() {
        let mut pending =
            b"data: \nid: 0\nretry: 3000\n\ndata: {\"jsonrpc\":\"2.0\"}\nid: 1\n\n:ping\n\nid: 2\nretry: 3000\n\ndata: {\"a\"".to_vec();
        let mut scanned = 0;
        let kept = take_kept_events(&mut pending, &mut scanned);
        assert_eq!(
            String::from_utf8_lossy(&kept),
            "data: {\"jsonrpc\":\"2.0\"}\nid: 1\n\n:ping\n\n"
        );
        assert_eq!(pending, b"data: {\"a\"");
        assert_eq!(scanned, pending.len());
        // The rest of the event arrives in two chunks, its blank line split between them.
        pending.extend_from_slice(b"}\n");
        assert!(take_kept_events(&mut pending, &mut scanned).is_empty());
        pending.extend_from_slice(b"\ndata: ");
        let kept = take_kept_events(&mut pending, &mut scanned);
        assert_eq!(String::from_utf8_lossy(&kept), "data: {\"a\"}\n\n");
        assert_eq!(pending, b"data: ");
    }

    #[test]
    fn only_unreadable_answers_are_rewritten() {
        let both = br#"{"jsonrpc":"2.0","id":0,"result":{"action":"accept"},"error":{"code":1,"message":"x"}}"#;
        let answer: Value =
            serde_json::from_slice(&repaired(both).unwrap_or_default()).unwrap_or_default();
        assert_eq!(answer["id"], 0);
        assert!(answer["error"]["message"].is_string(), "{answer}");
        assert!(repaired(br#"{"jsonrpc":"2.0","id":0,"result":{}}"#).is_none());
        assert!(repaired(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_none());
        assert!(repaired(b"not json").is_none());
    }
}
