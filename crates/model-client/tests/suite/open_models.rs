//! What real open-model servers do that OpenAI does not, replayed against `ModelClient`:
//! every server family's context-overflow body, the empty 200 stream, the output cap,
//! a looping model, tool calls written as text, and the server probes.

use std::collections::HashMap;

use interpreter_model_client::{
    CutOff, MaxTokensField, ModelClient, ModelProviderInfo, Prompt, ProviderError, ResponseEvent,
    ToolSpec, WireApi,
};
use interpreter_protocol::{ErrorKind, ResponseItem};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse, fixtures};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{collect, done_items};

fn provider(server: &MockModelServer) -> ModelProviderInfo {
    ModelProviderInfo {
        name: "mock".into(),
        base_url: Some(server.base_url()),
        request_max_retries: Some(1),
        ..Default::default()
    }
}

fn client_for(info: ModelProviderInfo) -> anyhow::Result<ModelClient> {
    Ok(ModelClient::new(
        "mock".into(),
        info,
        "test-model".into(),
        None,
        &HashMap::new(),
    )?)
}

fn prompt() -> Prompt {
    Prompt {
        instructions: "You are a test.".into(),
        input: vec![ResponseItem::user_text("hi")],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "run a command".into(),
            parameters: json!({"type": "object"}),
        }],
        prompt_cache_key: Some("thread-1".into()),
        ..Default::default()
    }
}

fn cut_off(events: &[ResponseEvent]) -> Option<CutOff> {
    events.iter().find_map(|event| match event {
        ResponseEvent::Completed { cut_off, .. } => *cut_off,
        _ => None,
    })
}

#[tokio::test]
async fn every_family_overflow_body_is_a_context_window_error() -> anyhow::Result<()> {
    let all = fixtures::overflow()?;
    assert!(all.len() >= 10, "overflow fixtures missing: {}", all.len());
    for fixture in all {
        let server = MockModelServer::start().await?;
        server.push(MockResponse::status(fixture.status, fixture.body.clone()));
        let client = client_for(provider(&server))?;
        let err = collect(&client, &prompt()).await.err();
        match &err {
            Some(ProviderError::ContextWindowExceeded { context_window, .. }) => assert_eq!(
                *context_window, fixture.context_window,
                "{}: window named in the body",
                fixture.name
            ),
            other => panic!("{}: expected an overflow, got {other:?}", fixture.name),
        }
        assert_eq!(
            err.map(|e| e.kind()),
            Some(ErrorKind::ContextWindowExceeded),
            "{}",
            fixture.name
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{}: never retried",
            fixture.name
        );
    }
    Ok(())
}

#[tokio::test]
async fn other_bad_requests_are_not_overflows() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(
        400,
        r#"{"error":{"message":"Cannot use custom grammar constraints with tools.","type":"invalid_request_error"}}"#,
    ));
    let client = client_for(provider(&server))?;
    let err = collect(&client, &prompt()).await.err();
    assert!(
        matches!(err, Some(ProviderError::Http { status: 400, .. })),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn empty_200_stream_is_probed_once_without_streaming() -> anyhow::Result<()> {
    // llama-cpp-python: a streamed request over the window gets 200 and no events; the
    // same request without streaming gets its 400.
    let server = MockModelServer::start().await?;
    server.push(MockResponse::raw_sse(fixtures::stream(
        "llama-cpp-python-overflow-empty.sse",
    )?));
    let overflow = fixtures::overflow()?
        .into_iter()
        .find(|f| f.name == "llama-cpp-python-nonstreaming")
        .ok_or_else(|| anyhow::anyhow!("fixture missing"))?;
    server.push(MockResponse::status(overflow.status, overflow.body));
    let client = client_for(provider(&server))?;
    let err = collect(&client, &prompt()).await.err();
    assert!(
        matches!(
            err,
            Some(ProviderError::ContextWindowExceeded {
                context_window: Some(2048),
                ..
            })
        ),
        "{err:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["stream"], json!(true));
    assert_eq!(requests[1]["stream"], json!(false));
    assert!(requests[1].get("stream_options").is_none());

    // A probe that succeeds explains nothing: the stream failure stays retryable.
    let server = MockModelServer::start().await?;
    server.push(MockResponse::raw_sse(String::new()));
    server.push(MockResponse::status(200, r#"{"choices":[]}"#));
    let client = client_for(provider(&server))?;
    let err = collect(&client, &prompt()).await.err();
    assert!(
        matches!(err, Some(ProviderError::EmptyStream { .. })),
        "{err:?}"
    );
    assert!(err.is_some_and(|e| e.is_retryable()));
    Ok(())
}

#[tokio::test]
async fn length_finish_is_reported_as_cut_off_and_the_text_kept() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::raw_sse(fixtures::stream(
        "llamacpp-server-finish-length.sse",
    )?));
    let client = client_for(provider(&server))?;
    let mut request = prompt();
    request.max_output_tokens = Some(16);
    let events = collect(&client, &request).await?;
    assert_eq!(cut_off(&events), Some(CutOff::Length));
    assert!(matches!(
        done_items(&events).as_slice(),
        [ResponseItem::Message { .. }]
    ));
    assert_eq!(server.requests()[0]["max_tokens"], json!(16));
    Ok(())
}

#[tokio::test]
async fn output_cap_field_is_a_provider_property() -> anyhow::Result<()> {
    for (field, wire, expected_key) in [
        (None, WireApi::Chat, "max_tokens"),
        (
            Some(MaxTokensField::MaxCompletionTokens),
            WireApi::Chat,
            "max_completion_tokens",
        ),
        (None, WireApi::Responses, "max_output_tokens"),
    ] {
        let server = MockModelServer::start().await?;
        server.push(MockResponse::status(500, "stop here"));
        let mut info = provider(&server);
        info.max_tokens_field = field;
        info.wire_api = wire;
        info.request_max_retries = Some(0);
        let client = client_for(info)?;
        let mut request = prompt();
        request.max_output_tokens = Some(300);
        let _ = collect(&client, &request).await;
        let sent = &server.requests()[0];
        assert_eq!(sent[expected_key], json!(300), "{sent}");
        for other in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
            if other != expected_key {
                assert!(sent.get(other).is_none(), "{other} in {sent}");
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_looping_stream_is_stopped_and_cut_to_one_copy() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let mut chunks = vec![chunk::text("Here is the plan. ")];
    for _ in 0..400 {
        chunks.push(chunk::text("I will check the file again. "));
    }
    chunks.push(chunk::finish("stop"));
    server.push(MockResponse::sse(chunks));
    let client = client_for(provider(&server))?;
    let events = collect(&client, &prompt()).await?;
    assert_eq!(cut_off(&events), Some(CutOff::Loop));
    let text = done_items(&events)
        .first()
        .and_then(ResponseItem::message_text)
        .unwrap_or_default();
    assert!(text.starts_with("Here is the plan. "), "{text}");
    assert!(
        text.len() < 200,
        "the loop was not cut: {} bytes",
        text.len()
    );
    Ok(())
}

#[tokio::test]
async fn long_text_that_does_not_repeat_is_not_a_loop() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let mut chunks = Vec::new();
    for i in 0..600 {
        chunks.push(chunk::text(&format!("line {i}: value {}\n", i * 7)));
    }
    chunks.push(chunk::finish("stop"));
    server.push(MockResponse::sse(chunks));
    let client = client_for(provider(&server))?;
    let events = collect(&client, &prompt()).await?;
    assert_eq!(cut_off(&events), None);
    Ok(())
}

#[tokio::test]
async fn text_tool_calls_are_recovered_only_where_enabled() -> anyhow::Result<()> {
    let markup = "Checking.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"ls\"]}}\n</tool_call>";
    // A loopback provider recovers by default.
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::text(markup),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server))?;
    let events = collect(&client, &prompt()).await?;
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            ResponseEvent::OutputTextDelta(delta) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, "Checking.\n", "markup is not streamed to the user");
    let items = done_items(&events);
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0].message_text().as_deref(), Some("Checking."));
    match &items[1] {
        ResponseItem::FunctionCall {
            name,
            arguments,
            call_id,
        } => {
            assert_eq!(name, "shell");
            assert_eq!(arguments, r#"{"command":["ls"]}"#);
            assert_eq!(
                call_id,
                &interpreter_model_client::text_tools::synthetic_call_id("thread-1:1", 0)
            );
        }
        other => panic!("expected a call, got {other:?}"),
    }

    // Turned off: the text stays text.
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::text(markup),
        chunk::finish("stop"),
    ]));
    let mut info = provider(&server);
    info.text_tool_calls = Some(false);
    let client = client_for(info)?;
    let items = done_items(&collect(&client, &prompt()).await?);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message_text().as_deref(), Some(markup));
    Ok(())
}

#[tokio::test]
async fn adversarial_markup_quoted_in_a_fence_streams_as_prose_and_is_no_call() -> anyhow::Result<()>
{
    let answer = "To list files, the model would write:\n```\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": [\"touch\", \"pwned\"]}}\n</tool_call>\n```\nThat is all.";
    let server = MockModelServer::start().await?;
    // In small pieces, so the fence and the markup arrive in different deltas.
    let mut chunks: Vec<_> = answer
        .as_bytes()
        .chunks(7)
        .map(|piece| chunk::text(&String::from_utf8_lossy(piece)))
        .collect();
    chunks.push(chunk::finish("stop"));
    server.push(MockResponse::sse(chunks));
    let client = client_for(provider(&server))?;
    let events = collect(&client, &prompt()).await?;
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            ResponseEvent::OutputTextDelta(delta) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, answer, "the quoted markup is shown, not held back");
    let items = done_items(&events);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].message_text().as_deref(), Some(answer));
    Ok(())
}

#[tokio::test]
async fn llama_server_props_give_the_window_and_tool_support() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.set_props(json!({
        "default_generation_settings": {"n_ctx": 2048},
        "chat_template_caps": {"supports_tools": false},
    }));
    let client = client_for(provider(&server))?;
    let facts = client.server_facts().await;
    assert_eq!(facts.context_window.map(|(n, _)| n), Some(2048));
    assert_eq!(facts.supports_tools, Some(false));
    assert!(server.violations().is_empty(), "{:?}", server.violations());

    // Without /props, vLLM-style /models is asked next (the mock lists no length).
    let server = MockModelServer::start().await?;
    let client = client_for(provider(&server))?;
    let facts = client.server_facts().await;
    assert_eq!(facts.context_window, None);
    assert_eq!(facts.supports_tools, None);
    Ok(())
}

#[tokio::test]
async fn recorded_llama_server_stream_gives_text_and_real_usage() -> anyhow::Result<()> {
    // First chunk `content: null`, `timings` and `system_fingerprint` extras, a final
    // `choices: []` chunk with usage and `cached_tokens`, and a leading SSE comment.
    let server = MockModelServer::start().await?;
    server.push(MockResponse::raw_sse(fixtures::stream(
        "llamacpp-server-stream-usage.sse",
    )?));
    let client = client_for(provider(&server))?;
    let events = collect(&client, &prompt()).await?;
    let text = done_items(&events)
        .first()
        .and_then(ResponseItem::message_text)
        .unwrap_or_default();
    assert!(text.starts_with("Hello"), "{text}");
    let usage = events.iter().find_map(|event| match event {
        ResponseEvent::Completed {
            token_usage,
            usage_estimated,
            cut_off,
            ..
        } => Some((*token_usage, *usage_estimated, *cut_off)),
        _ => None,
    });
    let Some((usage, estimated, cut)) = usage else {
        panic!("no completion: {events:?}");
    };
    assert_eq!((usage.input_tokens, usage.output_tokens), (26, 14));
    assert!(!estimated);
    assert_eq!(cut, None);
    Ok(())
}
