//! End-to-end tests of `ModelClient` against the scripted mock server.

use std::time::Duration;

use interpreter_model_client::{Prompt, ProviderError, ResponseEvent, ToolSpec, WireApi};
use interpreter_protocol::{ErrorKind, ResponseItem, TokenUsage};
use interpreter_test_support::mock_model::chunk;
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
        prompt_cache_key: None,
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn text_reasoning_and_parallel_calls_round_trip_verbatim() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    let args_a = r#"{"cmd": "ls -la",  "note":"spaced"}"#;
    let args_b = r#"{"cmd":"cat \"a b.txt\""}"#;
    let mut chunks = vec![
        chunk::reasoning("I should "),
        chunk::reasoning("list files."),
        chunk::text("Looking"),
        chunk::text(" around."),
    ];
    let mut frags_a = chunk::tool_call_fragments(0, "call_Ab9+/=", "shell", args_a, 4);
    let mut frags_b = chunk::tool_call_fragments(1, "tool-XYZ_2", "shell", args_b, 3);
    // Interleave the two calls' fragments the way parallel calls arrive.
    while !frags_a.is_empty() || !frags_b.is_empty() {
        if !frags_a.is_empty() {
            chunks.push(frags_a.remove(0));
        }
        if !frags_b.is_empty() {
            chunks.push(frags_b.remove(0));
        }
    }
    chunks.push(chunk::finish("tool_calls"));
    chunks.push(chunk::usage(120, 30));
    server.push(MockResponse::sse(chunks));
    server.push(MockResponse::sse(vec![
        chunk::text("All done."),
        chunk::finish("stop"),
        chunk::usage(200, 3),
    ]));

    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let mut history = vec![ResponseItem::user_text("what is here?")];
    let events = collect(&client, &prompt(history.clone())).await?;

    assert_eq!(events.first(), Some(&ResponseEvent::Created));
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ResponseEvent::OutputTextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Looking around.");
    let items = done_items(&events);
    assert_eq!(
        items,
        vec![
            ResponseItem::reasoning_text("I should list files.", Some("reasoning_content".into())),
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
            response_id: Some("chatcmpl-mock".into()),
            response_model: Some("mock-model".into()),
            token_usage: TokenUsage {
                input_tokens: 120,
                output_tokens: 30,
                total_tokens: 150,
                ..Default::default()
            },
            usage_estimated: false,
            cut_off: None
        })
    );

    // Follow-up request: history replayed with tool results.
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

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["stream"], true);
    assert_eq!(first["stream_options"], json!({"include_usage": true}));
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(first["parallel_tool_calls"], true);
    assert_eq!(first["tools"][0]["type"], "function");
    assert_eq!(
        first["messages"],
        json!([
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "what is here?"}
        ])
    );
    let replayed = &requests[1]["messages"][2];
    assert_eq!(replayed["reasoning_content"], "I should list files.");
    assert_eq!(replayed["tool_calls"][0]["id"], "call_Ab9+/=");
    assert_eq!(replayed["tool_calls"][0]["function"]["arguments"], args_a);
    assert_eq!(replayed["tool_calls"][1]["id"], "tool-XYZ_2");
    assert_eq!(replayed["tool_calls"][1]["function"]["arguments"], args_b);
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn reasoning_field_is_replayed_in_the_field_it_arrived_in() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::reasoning_in("reasoning", "short thought"),
        chunk::text("Hi!"),
        chunk::finish("stop"),
    ]));
    server.push(MockResponse::sse(vec![
        chunk::text("Again."),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let mut history = vec![ResponseItem::user_text("hello")];
    let events = collect(&client, &prompt(history.clone())).await?;
    history.extend(done_items(&events));
    history.push(ResponseItem::user_text("again"));
    collect(&client, &prompt(history)).await?;

    let second = &server.requests()[1];
    assert_eq!(second["messages"][2]["reasoning"], "short thought");
    assert!(second["messages"][2].get("reasoning_content").is_none());
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(
        MockResponse::status(429, r#"{"error":{"message":"slow down"}}"#).with_retry_after(1),
    );
    server.push(MockResponse::sse(vec![
        chunk::text("ok"),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
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
async fn server_error_is_retried_then_succeeds() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(500, "boom"));
    server.push(MockResponse::sse(vec![
        chunk::text("ok"),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
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
async fn exhausted_retries_report_the_last_status() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    for _ in 0..3 {
        server.push(MockResponse::status(
            503,
            r#"{"error":{"message":"overloaded"}}"#,
        ));
    }
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert_eq!(
        err,
        Some(ProviderError::Http {
            provider: "mock".into(),
            url: format!("{}/chat/completions", server.base_url()),
            status: 503,
            message: "overloaded".into(),
            hint: "the server is busy or failing; try again later, or run `interpreter doctor`"
                .into(),
            attempts: 3
        })
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::ServerOverloaded));
    server.assert_invariants();
    Ok(())
}

#[tokio::test]
async fn idle_stream_times_out() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse_then_stall(vec![chunk::text("partial")]));
    let mut info = provider(&server, WireApi::Chat);
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
async fn missing_usage_is_estimated() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::text("twelve bytes"),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let events = collect(&client, &prompt(vec![ResponseItem::user_text("hi")])).await?;
    let Some(ResponseEvent::Completed {
        token_usage,
        usage_estimated,
        ..
    }) = events.last()
    else {
        panic!("no Completed event: {events:?}");
    };
    assert!(usage_estimated);
    assert_eq!(token_usage.output_tokens, 3);
    assert!(token_usage.input_tokens > 0);
    assert_eq!(
        token_usage.total_tokens,
        token_usage.input_tokens + token_usage.output_tokens
    );
    Ok(())
}

#[tokio::test]
async fn unauthorized_names_the_key_variable() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(
        401,
        r#"{"error":{"message":"invalid api key"}}"#,
    ));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert_eq!(
        err.as_ref().map(ToString::to_string).as_deref(),
        Some(
            format!(
                "model provider `mock` answered 401 Unauthorized to POST {}/chat/completions: \
                 invalid api key; check the API key in MODEL_API_KEY, or store one with \
                 `interpreter login --provider mock`",
                server.base_url()
            )
            .as_str()
        )
    );
    assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Unauthorized));
    assert_eq!(server.requests().len(), 1, "401 must not be retried");
    Ok(())
}

#[tokio::test]
async fn context_length_error_is_recognised() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."}}"#,
    ));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::ContextWindowExceeded { .. })),
        "{err:?}"
    );
    assert_eq!(
        err.map(|e| e.kind()),
        Some(ErrorKind::ContextWindowExceeded)
    );
    Ok(())
}

#[tokio::test]
async fn cancellation_ends_a_stalled_stream() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse_then_stall(vec![chunk::text("partial")]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let cancel = CancellationToken::new();
    let mut stream = client
        .stream(&prompt(vec![ResponseItem::user_text("hi")]), &cancel)
        .await?;
    let mut last = None;
    let run = async {
        while let Some(event) = stream.next().await {
            if event == Ok(ResponseEvent::OutputTextDelta("partial".into())) {
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
async fn cancellation_interrupts_retry_backoff() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::status(429, "busy").with_retry_after(30));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let result = tokio::time::timeout(
        TEST_DEADLINE,
        client.stream(&prompt(vec![ResponseItem::user_text("hi")]), &cancel),
    )
    .await?;
    assert!(matches!(result, Err(ProviderError::Cancelled)));
    Ok(())
}

#[tokio::test]
async fn done_only_stream_is_an_empty_answer() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    // Nothing but `data: [DONE]`.
    server.push(MockResponse::sse(vec![]));
    // A finish reason, but nothing said: also empty.
    server.push(MockResponse::sse(vec![
        chunk::text(""),
        chunk::text("  \n"),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let input = prompt(vec![ResponseItem::user_text("hi")]);
    for _ in 0..2 {
        let err = collect(&client, &input).await.err();
        assert!(
            matches!(err, Some(ProviderError::EmptyAnswer { .. })),
            "{err:?}"
        );
        assert!(err.is_some_and(|e| e.is_retryable()));
    }
    Ok(())
}

#[tokio::test]
async fn finished_stream_without_content_is_an_empty_answer() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::finish("stop"),
        chunk::usage(5, 0),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let err = collect(&client, &prompt(vec![ResponseItem::user_text("hi")]))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::EmptyAnswer { .. })),
        "{err:?}"
    );
    let message = err.map(|e| e.final_message(3)).unwrap_or_default();
    assert!(
        message.starts_with("the model returned an empty answer 3 times"),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn stream_cut_before_the_finish_reason_is_truncated() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    // Text, then the connection closes: no finish_reason, no [DONE].
    server.push(MockResponse::sse(vec![chunk::text("half an ans")]).without_done());
    // Text, then [DONE] without a finish_reason.
    server.push(MockResponse::sse(vec![chunk::text("half an ans")]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let input = prompt(vec![ResponseItem::user_text("hi")]);
    for _ in 0..2 {
        let err = collect(&client, &input).await.err();
        assert!(
            matches!(err, Some(ProviderError::Truncated { .. })),
            "{err:?}"
        );
        let message = err.map(|e| e.final_message(2)).unwrap_or_default();
        assert!(
            message.starts_with("the stream ended before the model finished"),
            "{message}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn tool_call_only_and_reasoning_only_answers_are_not_empty() -> anyhow::Result<()> {
    let server = MockModelServer::start().await?;
    server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_1", "shell", "{\"cmd\":\"ls\"}"),
        chunk::finish("tool_calls"),
    ]));
    server.push(MockResponse::sse(vec![
        chunk::reasoning("thinking only"),
        chunk::finish("stop"),
    ]));
    let client = client_for(provider(&server, WireApi::Chat), None)?;
    let input = prompt(vec![ResponseItem::user_text("hi")]);
    let calls = collect(&client, &input).await?;
    assert!(matches!(
        done_items(&calls).as_slice(),
        [ResponseItem::FunctionCall { .. }]
    ));
    let reasoning = collect(&client, &input).await?;
    assert!(matches!(
        done_items(&reasoning).as_slice(),
        [ResponseItem::Reasoning { .. }]
    ));
    Ok(())
}
