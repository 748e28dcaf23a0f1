//! The engine against what open-model servers really send, replayed by the mock model at
//! the HTTP layer (which checks the conversation invariants of every request): every
//! family's context-overflow body, the empty 200 stream, a prompt larger than the
//! window, answers cut off by the output cap, and tool calls written as text.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::config::{ConfigInputs, ConfigOverrides, load_config};
use interpreter_core::{Thread, ThreadManager};
use interpreter_protocol::{
    AskForApproval, ErrorKind, EventMsg, Op, SandboxMode, SessionSource, UserInput,
};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse, fixtures};

const DEADLINE: Duration = Duration::from_secs(60);

fn config(
    home: &Path,
    cwd: &Path,
    mock: &MockModelServer,
    extra: &str,
) -> interpreter_core::config::Config {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\n{extra}\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nstream_max_retries = 1\nrequest_max_retries = 0\n",
            mock.base_url()
        ),
    )
    .unwrap();
    load_config(ConfigInputs {
        home: home.to_path_buf(),
        cwd: cwd.to_path_buf(),
        profile: None,
        cli_overrides: Vec::new(),
        overrides: ConfigOverrides {
            approval_policy: Some(AskForApproval::Never),
            sandbox_mode: Some(SandboxMode::DangerFullAccess),
            ..Default::default()
        },
        strict: true,
        env: HashMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        sandbox_exe: None,
        ..Default::default()
    })
    .unwrap()
}

async fn events_until_turn_end(thread: &Thread) -> Vec<EventMsg> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(DEADLINE, thread.next_event())
            .await
            .expect("event deadline")
            .expect("thread closed");
        let done = matches!(
            event.msg,
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_)
        );
        seen.push(event.msg);
        if done {
            return seen;
        }
    }
}

async fn turn(thread: &Arc<Thread>, text: &str) -> Vec<EventMsg> {
    thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: text.to_string(),
            }],
        })
        .await
        .unwrap();
    events_until_turn_end(thread).await
}

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(100, 5),
    ])
}

fn final_message(events: &[EventMsg]) -> (Option<String>, Option<String>) {
    match events.last() {
        Some(EventMsg::TaskComplete(done)) => (done.last_agent_message.clone(), done.error.clone()),
        other => panic!("turn did not complete: {other:?}"),
    }
}

fn compacted(events: &[EventMsg]) -> usize {
    events
        .iter()
        .filter(|m| matches!(m, EventMsg::ContextCompacted(_)))
        .count()
}

#[tokio::test]
async fn every_family_overflow_compacts_and_the_turn_goes_on() {
    for fixture in fixtures::overflow().unwrap() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let mock = MockModelServer::start().await.unwrap();
        mock.push(answer("first answer"));
        mock.push(MockResponse::status(fixture.status, fixture.body.clone()));
        mock.push(answer("SUMMARY of the first request"));
        mock.push(answer("second answer"));
        let manager = ThreadManager::new();
        let new = manager
            .start_thread(
                config(home.path(), work.path(), &mock, ""),
                SessionSource::Exec,
            )
            .await
            .unwrap();
        turn(&new.thread, "first request").await;
        let events = turn(&new.thread, "second request").await;
        assert_eq!(compacted(&events), 1, "{}: {events:#?}", fixture.name);
        assert_eq!(
            final_message(&events),
            (Some("second answer".to_string()), None),
            "{}",
            fixture.name
        );
        mock.assert_invariants();
    }
}

#[tokio::test]
async fn prompt_larger_than_the_window_fails_once_clearly_and_the_next_turn_runs() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    // A llama.cpp server with `-c 2048` and a template without tools.
    mock.set_props(serde_json::json!({
        "default_generation_settings": {"n_ctx": 2048},
        "chat_template_caps": {"supports_tools": false},
    }));
    let overflow = fixtures::overflow()
        .unwrap()
        .into_iter()
        .find(|f| f.name == "llamacpp-server")
        .unwrap();
    // The oversized message alone is over the window: compaction cannot shrink it, the
    // server refuses the summarising request, and the turn fails.
    mock.push(MockResponse::status(overflow.status, overflow.body.clone()));
    mock.push(answer("small answer"));
    mock.push(answer("after resume"));
    let cfg = config(home.path(), work.path(), &mock, "");
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg.clone(), SessionSource::Exec)
        .await
        .unwrap();

    let huge = format!("HUGE-MARKER {}", "lorem ipsum dolor sit amet ".repeat(600));
    let events = turn(&new.thread, &huge).await;
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::TaskStarted(t) if t.model_context_window == Some(2048))),
        "the window comes from /props: {events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::Warning(w) if w.message.contains("--jinja"))),
        "no tool support is reported: {events:#?}"
    );
    let errors: Vec<_> = events
        .iter()
        .filter_map(|m| match m {
            EventMsg::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert_eq!(errors[0].kind, Some(ErrorKind::ContextWindowExceeded));
    for needle in [
        "2048 tokens",
        "new thread",
        "model_context_window",
        "taken out",
    ] {
        assert!(
            errors[0].message.contains(needle),
            "{needle}: {}",
            errors[0].message
        );
    }
    // Only the summarising request reached the server: the full prompt was estimated
    // over the window and never sent.
    assert_eq!(mock.requests().len(), 1);
    assert!(mock.requests()[0].get("tools").is_none());

    let events = turn(&new.thread, "small question").await;
    assert_eq!(
        final_message(&events),
        (Some("small answer".to_string()), None)
    );
    let sent = mock.requests()[1].to_string();
    assert!(
        !sent.contains("HUGE-MARKER"),
        "the failed message poisoned the thread"
    );
    assert!(sent.contains("small question"));
    let max_tokens = mock.requests()[1]["max_tokens"].as_u64();
    assert_eq!(
        max_tokens,
        Some(512),
        "a local server gets a quarter of the window"
    );

    // A resumed thread does not see the failed message either.
    let thread_id = new.thread_id;
    drop(new);
    drop(manager);
    let manager = ThreadManager::new();
    let resumed = manager.resume_thread(cfg, thread_id).await.unwrap();
    let events = turn(&resumed.thread, "after resume").await;
    assert_eq!(
        final_message(&events),
        (Some("after resume".to_string()), None)
    );
    let sent = mock.requests()[2].to_string();
    assert!(!sent.contains("HUGE-MARKER"), "{sent}");
    assert!(sent.contains("small answer"));
    mock.assert_invariants();
}

#[tokio::test]
async fn overflow_after_two_compactions_is_one_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    let body = fixtures::overflow()
        .unwrap()
        .into_iter()
        .find(|f| f.name == "vllm-openai-server")
        .unwrap()
        .body;
    mock.push(MockResponse::status(400, body.clone()));
    mock.push(answer("summary one"));
    mock.push(MockResponse::status(400, body.clone()));
    mock.push(answer("summary two"));
    mock.push(MockResponse::status(400, body));
    mock.push(answer("next turn works"));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, ""),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    let events = turn(&new.thread, "FAILING-REQUEST").await;
    assert_eq!(compacted(&events), 2);
    let (message, error) = final_message(&events);
    assert_eq!(message, None);
    let error = error.unwrap();
    assert!(
        error.contains("4096 tokens") && error.contains("compacting twice"),
        "{error}"
    );
    let events = turn(&new.thread, "next").await;
    assert_eq!(
        final_message(&events),
        (Some("next turn works".to_string()), None)
    );
    let last = mock.requests().last().unwrap().to_string();
    assert!(!last.contains("FAILING-REQUEST"), "{last}");
    mock.assert_invariants();
}

#[tokio::test]
async fn empty_stream_is_probed_and_an_overflow_compacts() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    let overflow = fixtures::overflow()
        .unwrap()
        .into_iter()
        .find(|f| f.name == "llama-cpp-python-nonstreaming")
        .unwrap();
    mock.push(answer("first"));
    mock.push(MockResponse::raw_sse(
        fixtures::stream("llama-cpp-python-overflow-empty.sse").unwrap(),
    ));
    mock.push(MockResponse::status(overflow.status, overflow.body));
    mock.push(answer("summary"));
    mock.push(answer("after compaction"));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, ""),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    turn(&new.thread, "one").await;
    let events = turn(&new.thread, "two").await;
    assert_eq!(compacted(&events), 1, "{events:#?}");
    assert_eq!(
        final_message(&events),
        (Some("after compaction".to_string()), None)
    );
    assert!(
        !events.iter().any(|m| matches!(m, EventMsg::StreamError(_))),
        "an explained empty stream is not retried: {events:#?}"
    );
    assert_eq!(mock.requests()[2]["stream"], serde_json::json!(false));
    mock.assert_invariants();
}

#[tokio::test]
async fn length_cut_off_is_surfaced_in_an_event_and_the_answer() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::raw_sse(
        fixtures::stream("llamacpp-server-finish-length.sse").unwrap(),
    ));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(
                home.path(),
                work.path(),
                &mock,
                "model_max_output_tokens = 16\n",
            ),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    let events = turn(&new.thread, "tell me a story").await;
    assert!(
        events.iter().any(
            |m| matches!(m, EventMsg::Warning(w) if w.message.contains("output limit (16 tokens"))
        ),
        "{events:#?}"
    );
    let (message, error) = final_message(&events);
    assert_eq!(error, None);
    let message = message.unwrap();
    assert!(message.contains("[the answer was cut off"), "{message}");
    assert_eq!(mock.requests()[0]["max_tokens"], serde_json::json!(16));
    mock.assert_invariants();
}

#[tokio::test]
async fn tool_call_markup_corpus_runs_through_the_engine() {
    for fixture in fixtures::tool_markup().unwrap() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let mock = MockModelServer::start().await.unwrap();
        mock.push(MockResponse::sse(vec![
            chunk::text(&fixture.text),
            chunk::finish("stop"),
        ]));
        mock.push(answer("done"));
        let manager = ThreadManager::new();
        let new = manager
            .start_thread(
                config(home.path(), work.path(), &mock, ""),
                SessionSource::Exec,
            )
            .await
            .unwrap();
        let events = turn(&new.thread, "use the tool").await;
        assert_eq!(
            final_message(&events),
            (Some("done".to_string()), None),
            "{}",
            fixture.name
        );
        let second = &mock.requests()[1];
        let messages = second["messages"].as_array().unwrap();
        let calls: Vec<&serde_json::Value> = messages
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .collect();
        let outputs: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect();
        if fixture.unrecoverable {
            assert_eq!(calls.len(), 1, "{}: {second}", fixture.name);
            assert!(
                outputs[0].contains("invalid arguments") || outputs[0].contains("unknown tool"),
                "{}: the model must read why: {outputs:?}",
                fixture.name
            );
        } else {
            assert_eq!(
                calls.len(),
                fixture.calls.len(),
                "{}: {second}",
                fixture.name
            );
            for (call, expected) in calls.iter().zip(&fixture.calls) {
                assert_eq!(call["function"]["name"], expected.name.as_str());
                let arguments: serde_json::Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(arguments, expected.arguments, "{}", fixture.name);
                assert!(call["id"].as_str().unwrap().starts_with("call_text_"));
            }
            for (output, expected) in outputs.iter().zip(&fixture.calls) {
                let word = expected.arguments["command"][1].as_str().unwrap();
                assert!(output.contains(word), "{}: {output}", fixture.name);
            }
        }
        // The raw markup is not sent back as the assistant's words.
        assert!(
            !second.to_string().contains("<tool_call>")
                && !second.to_string().contains("[TOOL_CALLS]"),
            "{}: {second}",
            fixture.name
        );
        mock.assert_invariants();
    }
}

#[tokio::test]
async fn llama_server_token_count_calibrates_the_first_estimate() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.set_props(serde_json::json!({
        "default_generation_settings": {"n_ctx": 2048},
        "chat_template_caps": {"supports_tools": true},
    }));
    // The server counts 900 tokens for a request whose bytes/4 estimate is well over
    // the budget (about 1,380 tokens): nothing is compacted.
    mock.set_token_count(900);
    mock.push(answer("fits"));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, ""),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    let events = turn(&new.thread, &"lorem ipsum ".repeat(400)).await;
    assert_eq!(compacted(&events), 0, "{events:#?}");
    assert_eq!(final_message(&events), (Some("fits".to_string()), None));
    assert_eq!(mock.requests().len(), 1);
    mock.assert_invariants();
}
