//! End-to-end tests of `ModelClient` with `wire_api = "responses"` against the scripted
//! mock server's `/v1/responses` endpoint.

use interpreter_model_client::{Prompt, ProviderError, ResponseEvent, ToolSpec, WireApi};
use interpreter_protocol::{
    ErrorKind, ReasoningContent, ReasoningEffort, ReasoningSummary, ResponseItem, TokenUsage,
};
use interpreter_test_support::mock_model::responses_event::ResponseEvents;
use interpreter_test_support::{MockModelServer, MockResponse};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{TEST_DEADLINE, client_for, collect, done_items, provider};

fn prompt(input: Vec<ResponseItem>) -> Prompt {
    Prompt {
        instructions: "You are a test.".into(),
        input,
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "run a command".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        }],
        output_schema: None,
        prompt_cache_key: Some("thread-42".into()),
        max_output_tokens: None,
    }
}

fn deltas(events: &[ResponseEvent]) -> (String, String) {
    let mut text = String::new();
    let mut reasoning = String::new();
    for event in events {
        match event {
            ResponseEvent::OutputTextDelta(delta) => text.push_str(delta),
            ResponseEvent::ReasoningDelta(delta)
            | ResponseEvent::ReasoningSummaryDelta { delta, .. } => reasoning.push_str(delta),
            _ => {}
        }
    }
    (text, reasoning)
}

#[tokio::test]
async fn text_reasoning_and_two_calls_round_trip_verbatim() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let args_a = r#"{"cmd": "ls -la",  "note":"spaced"}"#;
    let args_b = r#"{"cmd":"cat \"a b.txt\""}"#;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_first")
            .reasoning(
                &["**Listing** files", "then reading"],
                Some("raw chain of thought"),
                Some("gAAAAB+opaque/blob=="),
            )
            .text("Looking around.")
            .function_call("call_Ab9+/=", "shell", args_a, 4)
            .function_call("tool-XYZ_2", "shell", args_b, 3)
            .completed_with_usage(json!({
                "input_tokens": 120,
                "input_tokens_details": {"cached_tokens": 64},
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 12},
                "total_tokens": 150
            })),
    ));
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_second")
            .text("All done.")
            .completed(200, 3),
    ));

    let client = client_for(
        provider(&server, WireApi::Responses),
        Some(ReasoningEffort::Medium),
    )?;
    let mut history = vec![
        ResponseItem::developer_text("Stay in the sandbox."),
        ResponseItem::user_text("what is here?"),
    ];
    let events = collect(&client, &prompt(history.clone())).await?;

    assert_eq!(events.first(), Some(&ResponseEvent::Created));
    assert_eq!(
        deltas(&events),
        (
            "Looking around.".to_string(),
            "**Listing** filesthen readingraw chain of thought".to_string()
        )
    );
    let reasoning = ResponseItem::Reasoning {
        summary: vec![
            ReasoningSummary::SummaryText {
                text: "**Listing** files".into(),
            },
            ReasoningSummary::SummaryText {
                text: "then reading".into(),
            },
        ],
        content: Some(vec![ReasoningContent::ReasoningText {
            text: "raw chain of thought".into(),
        }]),
        encrypted_content: Some("gAAAAB+opaque/blob==".into()),
        wire_field: None,
    };
    let items = done_items(&events);
    assert_eq!(
        items,
        vec![
            reasoning,
            ResponseItem::assistant_text("Looking around."),
            ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: args_a.into(),
                call_id: "call_Ab9+/=".into()
            },
            ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: args_b.into(),
                call_id: "tool-XYZ_2".into()
            },
        ]
    );
    assert_eq!(
        events.last(),
        Some(&ResponseEvent::Completed {
            response_id: Some("resp_first".into()),
            response_model: Some("mock-model".into()),
            token_usage: TokenUsage {
                input_tokens: 120,
                cached_input_tokens: 64,
                cache_write_input_tokens: 0,
                output_tokens: 30,
                reasoning_output_tokens: 12,
                total_tokens: 150,
            },
            usage_estimated: false,
            cut_off: None
        })
    );

    // Follow-up request: the history goes back with the tool outputs.
    history.extend(items);
    history.push(ResponseItem::FunctionCallOutput {
        call_id: "call_Ab9+/=".into(),
        output: "a.txt".into(),
    });
    history.push(ResponseItem::FunctionCallOutput {
        call_id: "tool-XYZ_2".into(),
        output: "hello".into(),
    });
    let events = collect(&client, &prompt(history)).await?;
    assert_eq!(
        done_items(&events),
        vec![ResponseItem::assistant_text("All done.")]
    );

    assert_eq!(
        server.endpoints(),
        vec!["/v1/responses".to_string(), "/v1/responses".to_string()]
    );
    let requests = server.requests();
    let first = &requests[0];
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["instructions"], "You are a test.");
    assert_eq!(first["stream"], true);
    assert_eq!(first["store"], false);
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(first["parallel_tool_calls"], true);
    assert_eq!(first["prompt_cache_key"], "thread-42");
    assert_eq!(first["reasoning"], json!({"effort": "medium"}));
    assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        first["tools"],
        json!([{"type": "function", "name": "shell", "description": "run a command", "strict": false,
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}])
    );
    assert_eq!(
        first["input"],
        json!([
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Stay in the sandbox."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is here?"}]}
        ])
    );
    assert_eq!(
        requests[1]["input"],
        json!([
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Stay in the sandbox."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is here?"}]},
            {"type": "reasoning",
             "summary": [{"type": "summary_text", "text": "**Listing** files"}, {"type": "summary_text", "text": "then reading"}],
             "content": [{"type": "reasoning_text", "text": "raw chain of thought"}],
             "encrypted_content": "gAAAAB+opaque/blob=="},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking around."}]},
            {"type": "function_call", "name": "shell", "arguments": args_a, "call_id": "call_Ab9+/="},
            {"type": "function_call", "name": "shell", "arguments": args_b, "call_id": "tool-XYZ_2"},
            {"type": "function_call_output", "call_id": "call_Ab9+/=", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "tool-XYZ_2", "output": "hello"}
        ])
    );
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn output_schema_becomes_text_format() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1")
            .text(r#"{"answer": 4}"#)
            .completed(10, 5),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                        "required": ["answer"], "additionalProperties": false});
    let with_schema = Prompt {
        output_schema: Some(schema.clone()),
        ..prompt(vec![ResponseItem::user_text("2+2?")])
    };
    collect(&client, &with_schema).await?;
    let request = &server.requests()[0];
    assert_eq!(
        request["text"],
        json!({"format": {"type": "json_schema", "name": "output", "schema": schema, "strict": true}})
    );
    assert!(request.get("reasoning").is_none());
    assert!(request.get("include").is_none());
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(
        MockResponse::status(429, r#"{"error":{"message":"slow down"}}"#).with_retry_after(1),
    );
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1").text("ok").completed(1, 1),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let events = collect(&client, &prompt(vec![ResponseItem::user_text("hi")])).await?;
    assert_eq!(
        done_items(&events),
        vec![ResponseItem::assistant_text("ok")]
    );
    assert_eq!(server.requests().len(), 2);
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn failed_response_with_context_length_code_is_context_window_exceeded() -> anyhow::Result<()>
{
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1").failed(
            "context_length_exceeded",
            "Your input exceeds the context window of this model.",
        ),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert_eq!(
        err,
        Some(ProviderError::ContextWindowExceeded {
            provider: "mock".into(),
            message: "Your input exceeds the context window of this model.".into(),
            context_window: None,
            prompt_tokens: None,
        })
    );
    assert_eq!(
        err.map(|e| e.kind()),
        Some(ErrorKind::ContextWindowExceeded)
    );
    Ok(())
}

#[tokio::test]
async fn error_events_map_to_provider_errors() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1").error("rate_limit_exceeded", "Rate limit reached"),
    ));
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_2").failed("server_error", "The server had an error"),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let input = prompt(vec![ResponseItem::user_text("hi")]);
    let rate_limited = collect(&client, &input).await.err();
    assert!(
        matches!(
            rate_limited,
            Some(ProviderError::Retryable { status: 429, .. })
        ),
        "{rate_limited:?}"
    );
    let server_error = collect(&client, &input).await.err();
    assert!(
        matches!(server_error, Some(ProviderError::Stream { .. })),
        "{server_error:?}"
    );
    assert!(server_error.is_some_and(|e| e.is_retryable()));
    Ok(())
}

#[tokio::test]
async fn stream_without_completed_is_truncated_and_retryable() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1").text("partial").unfinished(),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::Truncated { .. })),
        "{err:?}"
    );
    assert!(err.is_some_and(|e| e.is_retryable()));
    Ok(())
}

#[tokio::test]
async fn incomplete_response_keeps_what_was_produced() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1")
            .text("truncated")
            .incomplete("max_output_tokens"),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let events = collect(&client, &prompt(vec![ResponseItem::user_text("hi")])).await?;
    assert_eq!(
        done_items(&events),
        vec![ResponseItem::assistant_text("truncated")]
    );
    assert!(matches!(
        events.last(),
        Some(ResponseEvent::Completed {
            response_id: Some(id),
            ..
        }) if id == "resp_1"
    ));
    Ok(())
}

#[tokio::test]
async fn idle_stream_times_out() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse_then_stall(
        ResponseEvents::new("resp_1").text("partial").unfinished(),
    ));
    let mut info = provider(&server, WireApi::Responses);
    info.stream_idle_timeout_ms = Some(300);
    let client = client_for(info, None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::StreamIdle { .. })),
        "{err:?}"
    );
    assert!(err.is_some_and(|e| e.is_retryable()));
    Ok(())
}

#[tokio::test]
async fn cancellation_ends_a_stalled_stream() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse_then_stall(
        ResponseEvents::new("resp_1")
            .text_in_pieces("partial", 1)
            .unfinished(),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let cancel = CancellationToken::new();
    let mut stream = client
        .stream(&prompt(vec![ResponseItem::user_text("hi")]), &cancel)
        .await?;
    let mut last = None;
    let run = async {
        while let Some(event) = stream.next().await {
            if matches!(&event, Ok(ResponseEvent::OutputItemDone(_))) {
                cancel.cancel();
            }
            last = Some(event);
        }
    };
    tokio::time::timeout(TEST_DEADLINE, run).await?;
    assert_eq!(last, Some(Err(ProviderError::Cancelled)));
    Ok(())
}

#[tokio::test]
async fn completed_response_without_output_is_an_empty_answer() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::responses(
        ResponseEvents::new("resp_1").completed(5, 0),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::EmptyAnswer { .. })),
        "{err:?}"
    );
    assert!(err.is_some_and(|e| e.is_retryable()));
    Ok(())
}

#[tokio::test]
async fn done_before_completed_is_truncated() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    // `[DONE]` after partial output but before `response.completed`.
    server.push(MockResponse::sse(
        ResponseEvents::new("resp_1").text("partial").unfinished(),
    ));
    let client = client_for(provider(&server, WireApi::Responses), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::Truncated { .. })),
        "{err:?}"
    );
    Ok(())
}
