//! End-to-end tests of `ModelClient` with `wire_api = "messages"` against the scripted
//! mock server's `/v1/messages` endpoint: the request it sends (headers, blocks, cache
//! breakpoints, thinking), the stream it reads, and the errors it classifies.

use interpreter_model_client::{
    AuthHeader, ModelProviderInfo, Prompt, ProviderError, ResponseEvent, ToolSpec, WireApi,
};
use interpreter_protocol::{ReasoningEffort, ResponseItem, TokenUsage};
use interpreter_test_support::mock_model::messages_event::MessageEvents;
use interpreter_test_support::{MockModelServer, MockResponse};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{client_for, collect, done_items, provider};

fn prompt(input: Vec<ResponseItem>) -> Prompt {
    Prompt {
        instructions: "You are a test.".into(),
        input,
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "run a command".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        }],
        prompt_cache_key: Some("thread-42".into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_thinking_turn_with_a_call_goes_back_block_for_block() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::messages(
        MessageEvents::new("msg_1")
            .thinking("I should list files.", "sig-abc")
            .redacted_thinking("opaque-blob")
            .tool_use("toolu_1", "shell", r#"{"cmd": "ls"}"#)
            .end_with_usage(
                "tool_use",
                json!({"input_tokens": 20, "cache_read_input_tokens": 300,
                       "cache_creation_input_tokens": 40, "output_tokens": 12}),
            ),
    ));
    server.push(MockResponse::messages(
        MessageEvents::new("msg_2")
            .text("Two files.")
            .end("end_turn", 400, 5),
    ));
    let client = client_for(
        provider(&server, WireApi::Messages),
        Some(ReasoningEffort::Low),
    )?;
    let mut history = vec![ResponseItem::user_text("what is here?")];
    let first = collect(&client, &prompt(history.clone())).await?;
    assert_eq!(
        first.last(),
        Some(&ResponseEvent::Completed {
            response_id: Some("msg_1".into()),
            response_model: Some("mock-model".into()),
            token_usage: TokenUsage {
                input_tokens: 360,
                cached_input_tokens: 300,
                cache_write_input_tokens: 40,
                output_tokens: 12,
                reasoning_output_tokens: 0,
                total_tokens: 372,
            },
            usage_estimated: false,
            cut_off: None,
        })
    );
    history.extend(done_items(&first));
    history.push(ResponseItem::FunctionCallOutput {
        call_id: "toolu_1".into(),
        output: "a.txt\nb.txt".into(),
    });
    let second = collect(&client, &prompt(history)).await?;
    assert_eq!(
        done_items(&second),
        vec![ResponseItem::assistant_text("Two files.")]
    );

    server.assert_invariants();
    let requests = server.requests();
    assert_eq!(
        requests[1]["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "what is here?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should list files.", "signature": "sig-abc"},
                {"type": "redacted_thinking", "data": "opaque-blob"},
                {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt",
                 "cache_control": {"type": "ephemeral"}}
            ]}
        ])
    );
    for request in &requests {
        assert_eq!(
            request["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert_eq!(request["max_tokens"], json!(8192 + 4096));
        assert_eq!(request["stream"], json!(true));
        assert_eq!(
            request["system"],
            json!([{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(request["tools"][0]["input_schema"]["type"], json!("object"));
        assert_eq!(
            request["tools"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
    let headers = server.record().messages_headers;
    assert_eq!(headers.len(), 2);
    for sent in headers {
        assert_eq!(sent.anthropic_version.as_deref(), Some("2023-06-01"));
        assert_eq!(sent.x_api_key.as_deref(), Some("sk-test"));
        assert_eq!(sent.authorization, None);
    }
    Ok(())
}

#[tokio::test]
async fn a_provider_may_take_the_key_as_a_bearer_token() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::messages(
        MessageEvents::new("m").text("hi").end("end_turn", 3, 1),
    ));
    let info = ModelProviderInfo {
        auth_header: Some(AuthHeader::Bearer),
        ..provider(&server, WireApi::Messages)
    };
    let client = client_for(info, None)?;
    collect(&client, &prompt(vec![ResponseItem::user_text("hi")])).await?;
    let headers = server.record().messages_headers;
    assert_eq!(headers[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(headers[0].x_api_key, None);
    assert_eq!(server.requests()[0].get("thinking"), None);
    Ok(())
}

#[tokio::test]
async fn max_tokens_cuts_the_answer_off_and_keeps_it() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::messages(
        MessageEvents::new("m")
            .text("partial ans")
            .end("max_tokens", 3, 100),
    ));
    let client = client_for(provider(&server, WireApi::Messages), None)?;
    let events = collect(&client, &prompt(vec![ResponseItem::user_text("x")])).await?;
    assert_eq!(
        done_items(&events),
        vec![ResponseItem::assistant_text("partial ans")]
    );
    assert!(matches!(
        events.last(),
        Some(ResponseEvent::Completed {
            cut_off: Some(interpreter_model_client::CutOff::Length),
            ..
        })
    ));
    Ok(())
}

#[tokio::test]
async fn a_prompt_too_long_is_an_overflow_and_overload_is_retried() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    ).with_retry_after(0));
    server.push(MockResponse::status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error",
               "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        .to_string(),
    ));
    let client = client_for(provider(&server, WireApi::Messages), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("x")]))
        .await
        .err();
    assert!(
        matches!(
            err,
            Some(ProviderError::ContextWindowExceeded {
                context_window: Some(200_000),
                prompt_tokens: Some(210_000),
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 2);

    // llama.cpp's overflow on this route.
    server.push(MockResponse::status(
        400,
        json!({"error": {"code": 400, "type": "exceed_context_size_error", "n_ctx": 4096,
               "n_prompt_tokens": 5000, "message": "request (5000 tokens) exceeds the available context size (4096 tokens)"}})
        .to_string(),
    ));
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("x")]))
        .await
        .err();
    assert!(
        matches!(
            err,
            Some(ProviderError::ContextWindowExceeded {
                context_window: Some(4096),
                ..
            })
        ),
        "{err:?}"
    );
    // An error event mid-stream is classified by the same table.
    server.push(MockResponse::messages(
        MessageEvents::new("m")
            .text("par")
            .error("overloaded_error", "Overloaded"),
    ));
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("x")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::Retryable { .. })),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn count_tokens_is_asked_where_served() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.set_token_count(1234);
    let client = client_for(provider(&server, WireApi::Messages), None)?;
    let counted = client
        .count_prompt_tokens(&prompt(vec![ResponseItem::user_text("x")]))
        .await;
    assert_eq!(counted, Some(1234));
    assert!(
        server
            .record()
            .probes
            .contains(&"/v1/messages/count_tokens".to_string())
    );
    Ok(())
}
