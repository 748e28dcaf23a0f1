//! A hostile or broken model server against the client's bounds: one endless SSE line,
//! one event of endless `data:` lines, an endless answer, endless tool-call arguments
//! (both wire formats), and a server that trickles past the overall deadline. Each ends
//! in its own error, naming the size or key, and none is retried.

use std::time::Duration;

use interpreter_model_client::{
    ModelClient, Oversize, Prompt, ProviderError, ResponseEvent, ToolSpec, WireApi,
};
use interpreter_protocol::{ErrorKind, ResponseItem};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::mock_model::responses_event::ResponseEvents;
use interpreter_test_support::{MockModelServer, MockResponse};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{client_for, provider};

/// Generous upper bound so a broken client fails the test instead of hanging it.
const TEST_DEADLINE: Duration = Duration::from_secs(60);
const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn prompt() -> Prompt {
    Prompt {
        instructions: "You are a test.".into(),
        input: vec![ResponseItem::user_text("hi")],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "run a command".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        }],
        output_schema: None,
        prompt_cache_key: None,
        max_output_tokens: None,
    }
}

/// Streams one response and returns the error it ends in, with the events before it.
async fn failure(client: &ModelClient) -> (Vec<ResponseEvent>, ProviderError) {
    let cancel = CancellationToken::new();
    let run = async {
        let mut stream = client.stream(&prompt(), &cancel).await?;
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => events.push(event),
                Err(err) => return Ok((events, err)),
            }
        }
        panic!(
            "the stream ended without an error after {} events",
            events.len()
        );
    };
    match tokio::time::timeout(TEST_DEADLINE, run).await {
        Ok(Ok(result)) => result,
        Ok(Err(err)) => (Vec::new(), err),
        Err(_) => panic!("client did not finish within {TEST_DEADLINE:?}"),
    }
}

/// `len` bytes of text that never repeats within the client's loop window, so the
/// loop stop (which cuts a repeating answer short) stays out of the way.
fn varied_text(len: usize) -> String {
    let mut state: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from(b'a' + u8::try_from((state >> 16) % 26).unwrap_or(0))
        })
        .collect()
}

#[track_caller]
fn assert_too_large(err: &ProviderError, what: Oversize, limit: usize, words: &str) {
    assert!(
        matches!(err, ProviderError::ResponseTooLarge { what: got, limit: got_limit, .. }
            if *got == what && *got_limit == limit as u64),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(words), "{message}");
    assert!(message.contains(what.key()), "{message}");
    assert!(!err.is_retryable(), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Internal);
}

fn no_calls(events: &[ResponseEvent]) -> bool {
    !events.iter().any(|event| {
        matches!(
            event,
            ResponseEvent::OutputItemDone(ResponseItem::FunctionCall { .. })
        )
    })
}

#[tokio::test]
async fn an_endless_sse_line_ends_at_the_default_bound() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    // Up to 1 GiB, in 64 KiB pieces of one line that never ends.
    server.push(MockResponse::sse_then_flood(
        vec![chunk::text("start")],
        r#"data: {"choices":[{"delta":{"content":""#,
        "a".repeat(64 * KIB),
        16 * 1024,
    ));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let (events, err) = failure(&client).await;
    assert_too_large(
        &err,
        Oversize::SseLine,
        8 * MIB,
        "model provider `mock` sent one SSE line over 8 MiB (stream_max_event_bytes in \
         [model_providers.mock]); the answer was dropped and is not retried",
    );
    assert!(no_calls(&events));
    assert_eq!(server.requests().len(), 1, "not retried");
    Ok(())
}

#[tokio::test]
async fn an_event_of_endless_short_data_lines_is_refused() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse_then_flood(
        Vec::new(),
        "",
        "data: aaaaaaaaaaaaaaaa\n",
        1024 * 1024,
    ));
    let mut info = provider(&server, WireApi::Responses);
    info.stream_max_event_bytes = Some(64 * KIB as u64);
    let client = client_for(info, None)?;
    let (_, err) = failure(&client).await;
    assert_too_large(
        &err,
        Oversize::SseEvent,
        64 * KIB,
        "one SSE event over 64 KiB",
    );
    Ok(())
}

#[tokio::test]
async fn an_endless_chat_answer_ends_at_its_bound_with_the_call_before_it_dropped()
-> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let delta = format!("data: {}\n\n", chunk::text(&varied_text(16 * KIB)));
    server.push(MockResponse::sse_then_flood(
        vec![chunk::tool_call(
            0,
            "call_1",
            "shell",
            r#"{"cmd":"touch marker"}"#,
        )],
        "",
        delta,
        1024 * 1024,
    ));
    let mut info = provider(&server, WireApi::Chat);
    info.stream_max_answer_bytes = Some(MIB as u64);
    let client = client_for(info, None)?;
    let (events, err) = failure(&client).await;
    assert_too_large(
        &err,
        Oversize::Answer,
        MIB,
        "sent an answer (text, reasoning and tool calls) over 1 MiB",
    );
    assert!(no_calls(&events));
    Ok(())
}

#[tokio::test]
async fn endless_reasoning_counts_towards_the_answer() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let delta = format!("data: {}\n\n", chunk::reasoning(&varied_text(16 * KIB)));
    server.push(MockResponse::sse_then_flood(
        Vec::new(),
        "",
        delta,
        1024 * 1024,
    ));
    let mut info = provider(&server, WireApi::Chat);
    info.stream_max_answer_bytes = Some(MIB as u64);
    let client = client_for(info, None)?;
    let (_, err) = failure(&client).await;
    assert_too_large(&err, Oversize::Answer, MIB, "over 1 MiB");
    Ok(())
}

#[tokio::test]
async fn endless_chat_tool_call_arguments_end_at_their_bound() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let first = chunk::tool_call(0, "call_1", "shell", r#"{"cmd":"touch marker","pad":""#);
    // Fragments after the first carry only the index and more arguments.
    let fragment = json!({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "c".repeat(16 * KIB)}}
    ]}}]});
    server.push(MockResponse::sse_then_flood(
        vec![first],
        "",
        format!("data: {fragment}\n\n"),
        1024 * 1024,
    ));
    let mut info = provider(&server, WireApi::Chat);
    info.stream_max_arguments_bytes = Some(256 * KIB as u64);
    let client = client_for(info, None)?;
    let (events, err) = failure(&client).await;
    assert_too_large(
        &err,
        Oversize::Arguments,
        256 * KIB,
        "sent the arguments of one tool call over 256 KiB (stream_max_arguments_bytes",
    );
    assert!(no_calls(&events));
    Ok(())
}

#[tokio::test]
async fn many_small_tool_calls_count_towards_the_answer() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    // Each fragment opens a new call (a new index) with nothing in it.
    let frames: String = (0..4096)
        .map(|index| {
            let chunk = json!({"choices": [{"delta": {"tool_calls": [{"index": index}]}}]});
            format!("data: {chunk}\n\n")
        })
        .collect();
    server.push(MockResponse::sse_then_flood(Vec::new(), "", frames, 1));
    let mut info = provider(&server, WireApi::Chat);
    info.stream_max_answer_bytes = Some(64 * KIB as u64);
    let client = client_for(info, None)?;
    let (_, err) = failure(&client).await;
    assert_too_large(&err, Oversize::Answer, 64 * KIB, "over 64 KiB");
    Ok(())
}

#[tokio::test]
async fn an_endless_responses_answer_ends_at_its_bound() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let delta = json!({"type": "response.output_text.delta", "delta": varied_text(16 * KIB)});
    server.push(MockResponse::sse_then_flood(
        vec![json!({"type": "response.created", "response": {"id": "r"}})],
        "",
        format!("event: response.output_text.delta\ndata: {delta}\n\n"),
        1024 * 1024,
    ));
    let mut info = provider(&server, WireApi::Responses);
    info.stream_max_answer_bytes = Some(MIB as u64);
    let client = client_for(info, None)?;
    let (_, err) = failure(&client).await;
    assert_too_large(&err, Oversize::Answer, MIB, "over 1 MiB");
    Ok(())
}

#[tokio::test]
async fn a_responses_call_with_arguments_over_the_bound_is_refused() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let arguments = json!({"cmd": "touch marker", "pad": "e".repeat(300 * KIB)}).to_string();
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1")
            .function_call("call_1", "shell", &arguments, 4)
            .completed(10, 2),
    ));
    let mut info = provider(&server, WireApi::Responses);
    info.stream_max_arguments_bytes = Some(256 * KIB as u64);
    let client = client_for(info, None)?;
    let (events, err) = failure(&client).await;
    assert_too_large(&err, Oversize::Arguments, 256 * KIB, "over 256 KiB");
    assert!(no_calls(&events));
    Ok(())
}

#[tokio::test]
async fn a_trickling_stream_ends_at_the_overall_deadline_and_is_not_retried() -> anyhow::Result<()>
{
    for wire_api in [WireApi::Chat, WireApi::Responses, WireApi::Messages] {
        let server = MockModelServer::start().await?;
        let frame = match wire_api {
            WireApi::Chat => format!("data: {}\n\n", chunk::text("x")),
            WireApi::Responses => {
                let delta = json!({"type": "response.output_text.delta", "delta": "x"});
                format!("event: response.output_text.delta\ndata: {delta}\n\n")
            }
            WireApi::Messages => {
                let delta = json!({"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "x"}});
                format!("event: content_block_delta\ndata: {delta}\n\n")
            }
        };
        let head = match wire_api {
            WireApi::Messages => json!({"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": "start"}}),
            WireApi::Chat | WireApi::Responses => chunk::text("start"),
        };
        server.push(
            MockResponse::sse_then_flood(vec![head], "", frame, 10_000)
                .with_chunk_delay(Duration::from_millis(100)),
        );
        let mut info = provider(&server, wire_api);
        // Far longer than the pauses: only the overall deadline can end this.
        info.stream_idle_timeout_ms = Some(60_000);
        info.stream_max_duration_ms = Some(1_000);
        let client = client_for(info, None)?;
        let (events, err) = failure(&client).await;
        assert!(
            matches!(err, ProviderError::StreamDeadline { limit, .. } if limit == Duration::from_secs(1)),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "model provider `mock` did not finish its answer within 1s (stream_max_duration_ms); \
             the answer was dropped and is not retried"
        );
        assert!(!err.is_retryable());
        assert_eq!(err.kind(), ErrorKind::StreamIdle);
        let deltas = events
            .iter()
            .filter(|event| matches!(event, ResponseEvent::OutputTextDelta(_)))
            .count();
        assert!(deltas >= 2, "the server did trickle: {events:?}");
        assert_eq!(server.requests().len(), 1);
    }
    Ok(())
}

#[tokio::test]
async fn retries_before_the_stream_count_towards_the_deadline() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    for _ in 0..3 {
        server.push(MockResponse::status(503, "busy").with_retry_after(2));
    }
    let mut info = provider(&server, WireApi::Chat);
    info.request_max_retries = Some(3);
    info.stream_max_duration_ms = Some(500);
    let client = client_for(info, None)?;
    let (_, err) = failure(&client).await;
    assert!(
        matches!(err, ProviderError::StreamDeadline { .. }),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1, "the retry's wait ran into it");
    Ok(())
}

#[tokio::test]
async fn an_endless_error_body_is_read_only_in_part() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(400, "f".repeat(4 * MIB)));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let (_, err) = failure(&client).await;
    let ProviderError::Http {
        status, message, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*status, 400);
    assert!(
        message.starts_with("fff") && message.chars().count() <= 201,
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn a_huge_error_event_is_quoted_in_part() -> anyhow::Result<()> {
    for wire_api in [WireApi::Chat, WireApi::Responses, WireApi::Messages] {
        let server = MockModelServer::start().await?;
        let words = "g".repeat(3 * MIB);
        let event = match wire_api {
            WireApi::Chat => json!({"error": {"message": words}}),
            WireApi::Responses => json!({"type": "error", "code": words, "message": words}),
            WireApi::Messages => {
                json!({"type": "error", "error": {"type": words, "message": words}})
            }
        };
        server.push(MockResponse::sse(vec![event]).without_done());
        let mut info = provider(&server, wire_api);
        info.stream_max_retries = Some(0);
        let client = client_for(info, None)?;
        let (_, err) = failure(&client).await;
        let message = err.to_string();
        assert!(message.contains("ggg"), "{message:.300}");
        assert!(message.len() < 4 * KIB, "{} bytes", message.len());
    }
    Ok(())
}
