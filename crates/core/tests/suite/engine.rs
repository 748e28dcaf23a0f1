//! The engine driven directly through its queue pair, against the mock model.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::config::{ConfigInputs, ConfigOverrides, load_config};
use interpreter_core::{Thread, ThreadManager};
use interpreter_protocol::{
    AskForApproval, Event, EventMsg, ExecCommandStatus, Op, ReviewDecision, SandboxMode,
    SessionSource, UserInput,
};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse};

const DEADLINE: Duration = Duration::from_secs(30);

fn config(
    home: &Path,
    cwd: &Path,
    mock: &MockModelServer,
    approval: AskForApproval,
) -> interpreter_core::config::Config {
    config_with(home, cwd, mock, approval, Vec::new())
}

fn config_with(
    home: &Path,
    cwd: &Path,
    mock: &MockModelServer,
    approval: AskForApproval,
    cli_overrides: Vec<(String, toml::Value)>,
) -> interpreter_core::config::Config {
    std::fs::write(
        home.join("config.toml"),
        mock.config_toml("", "stream_max_retries = 1", ""),
    )
    .unwrap();
    load_config(ConfigInputs {
        home: home.to_path_buf(),
        cwd: cwd.to_path_buf(),
        profile: None,
        cli_overrides,
        overrides: ConfigOverrides {
            approval_policy: Some(approval),
            sandbox_mode: Some(SandboxMode::DangerFullAccess),
            ..Default::default()
        },
        strict: true,
        env: HashMap::from([
            ("MOCK_API_KEY".to_string(), "test-key".to_string()),
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ]),
        sandbox_exe: None,
        ..Default::default()
    })
    .unwrap()
}

async fn next(thread: &Thread) -> Event {
    tokio::time::timeout(DEADLINE, thread.next_event())
        .await
        .expect("event deadline")
        .expect("thread closed")
}

/// Events until (and including) the first one `stop` accepts.
async fn events_until(thread: &Thread, stop: impl Fn(&EventMsg) -> bool) -> Vec<EventMsg> {
    let mut seen = Vec::new();
    loop {
        let event = next(thread).await;
        let done = stop(&event.msg);
        seen.push(event.msg);
        if done {
            return seen;
        }
    }
}

fn is_turn_end(msg: &EventMsg) -> bool {
    matches!(msg, EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_))
}

async fn submit_text(thread: &Arc<Thread>, text: &str) {
    thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: text.to_string(),
            }],
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn shell_then_patch_then_answer() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::reasoning("I should look first."),
        chunk::tool_call(0, "call_sh_1", "shell", r#"{"command":"cat notes.txt"}"#),
        chunk::finish("tool_calls"),
    ]));
    let patch = "*** Begin Patch\n*** Update File: notes.txt\n alpha\n-beta\n+gamma\n*** Add File: new.txt\n+hello\n*** End Patch";
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_patch_2",
            "apply_patch",
            &serde_json::json!({ "input": patch }).to_string(),
        ),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("Done."),
        chunk::finish("stop"),
        chunk::usage(100, 5),
    ]));

    let manager = ThreadManager::new();
    let cfg = config(home.path(), work.path(), &mock, AskForApproval::Never);
    let new = manager
        .start_thread(cfg, SessionSource::Exec)
        .await
        .unwrap();
    let rollout = new.session_configured.rollout_path.clone().unwrap();
    assert!(
        rollout.exists(),
        "rollout is written before the first model call"
    );

    submit_text(&new.thread, "edit the notes").await;
    let events = events_until(&new.thread, is_turn_end).await;

    let end = events
        .iter()
        .find_map(|m| match m {
            EventMsg::ExecCommandEnd(e) => Some(e.clone()),
            _ => None,
        })
        .expect("exec end");
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.status, ExecCommandStatus::Completed);
    assert!(end.aggregated_output.contains("alpha"));
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::PatchApplyEnd(e) if e.success))
    );
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.last_agent_message.as_deref(), Some("Done."))
        }
        other => panic!("unexpected end {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(work.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("new.txt")).unwrap(),
        "hello\n"
    );

    // The follow-up requests replay reasoning and keep tool ids byte-exact.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    mock.assert_invariants();

    // Resume from disk in a fresh manager: the model sees the whole earlier history.
    mock.push(MockResponse::sse(vec![
        chunk::text("Still here."),
        chunk::finish("stop"),
    ]));
    let manager2 = ThreadManager::new();
    let cfg = config(home.path(), work.path(), &mock, AskForApproval::Never);
    let resumed = manager2.resume_thread(cfg, new.thread_id).await.unwrap();
    submit_text(&resumed.thread, "and now?").await;
    let events = events_until(&resumed.thread, is_turn_end).await;
    assert!(matches!(events.last(), Some(EventMsg::TaskComplete(_))));
    let last = mock.requests().last().cloned().unwrap();
    let body = last.to_string();
    assert!(body.contains("call_patch_2"), "history replayed: {body}");
    assert!(body.contains("I should look first."));
    mock.assert_invariants();
}

#[tokio::test]
async fn bad_tool_arguments_become_a_readable_result() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_bad", "shell", r#"{"cmd_typo": 3}"#),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("ok"),
        chunk::finish("stop"),
    ]));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "go").await;
    events_until(&new.thread, is_turn_end).await;
    let second = mock.requests()[1].to_string();
    assert!(second.contains("invalid arguments for `shell`"), "{second}");
    mock.assert_invariants();
}

#[tokio::test]
async fn approval_declined_then_interrupt_during_command() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_1", "shell", r#"{"command":"touch declined.txt"}"#),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_2", "shell", r#"{"command":"sleep 60"}"#),
        chunk::finish("tool_calls"),
    ]));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Untrusted),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "go").await;
    let events = events_until(&new.thread, |m| {
        matches!(m, EventMsg::ExecApprovalRequest(_))
    })
    .await;
    let EventMsg::ExecApprovalRequest(req) = events.last().unwrap() else {
        unreachable!()
    };
    new.thread
        .submit(Op::ExecApproval {
            id: req.call_id.clone(),
            decision: ReviewDecision::Denied,
        })
        .await
        .unwrap();
    // The second command also needs approval: approve it, then interrupt while it runs.
    let events = events_until(&new.thread, |m| {
        matches!(m, EventMsg::ExecApprovalRequest(_))
    })
    .await;
    let EventMsg::ExecApprovalRequest(req) = events.last().unwrap() else {
        unreachable!()
    };
    new.thread
        .submit(Op::ExecApproval {
            id: req.call_id.clone(),
            decision: ReviewDecision::Approved,
        })
        .await
        .unwrap();
    events_until(&new.thread, |m| matches!(m, EventMsg::ExecCommandBegin(_))).await;
    new.thread.submit(Op::Interrupt).await.unwrap();
    let events = events_until(&new.thread, is_turn_end).await;
    assert!(matches!(events.last(), Some(EventMsg::TurnAborted(_))));
    assert!(!work.path().join("declined.txt").exists());

    // The history stays valid: the next request answers both calls exactly once.
    mock.push(MockResponse::sse(vec![
        chunk::text("ok"),
        chunk::finish("stop"),
    ]));
    submit_text(&new.thread, "again").await;
    events_until(&new.thread, is_turn_end).await;
    let last = mock.requests().last().cloned().unwrap().to_string();
    assert!(last.contains("declined"), "{last}");
    // Found in a crash review: a command killed by the interrupt was reported to the
    // model as never having run. It is told the truth: it ran and was killed.
    assert!(last.contains("stopped while this command ran"), "{last}");
    assert!(!last.contains("before this tool call ran"), "{last}");
    mock.assert_invariants();
}

#[tokio::test]
async fn context_overflow_compacts_and_the_turn_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::text("noted"),
        chunk::finish("stop"),
    ]));
    mock.push(MockResponse::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.","type":"invalid_request_error"}}"#,
    ));
    mock.push(MockResponse::sse(vec![
        chunk::text("SUMMARY-TEXT: the user shared OLD facts"),
        chunk::finish("stop"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("second answer"),
        chunk::finish("stop"),
    ]));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "first request OLD-MARKER").await;
    events_until(&new.thread, is_turn_end).await;
    submit_text(&new.thread, "second request").await;
    let events = events_until(&new.thread, is_turn_end).await;
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::ContextCompacted(_))),
        "{events:?}"
    );
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.last_agent_message.as_deref(), Some("second answer"));
            assert_eq!(done.error, None);
        }
        other => panic!("unexpected end {other:?}"),
    }
    // The summary itself is not shown as an agent message.
    assert!(
        !events
            .iter()
            .any(|m| matches!(m, EventMsg::AgentMessage(a) if a.message.contains("SUMMARY-TEXT")))
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let summarise = &requests[2];
    assert!(summarise.get("tools").is_none(), "{summarise}");
    let after = requests[3].to_string();
    assert!(after.contains("SUMMARY-TEXT"), "{after}");
    assert!(after.contains("second request"), "{after}");
    assert!(!after.contains("OLD-MARKER"), "{after}");
    mock.assert_invariants();

    // A resumed thread continues from the compacted history.
    mock.push(MockResponse::sse(vec![
        chunk::text("third"),
        chunk::finish("stop"),
    ]));
    let manager2 = ThreadManager::new();
    let resumed = manager2
        .resume_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            new.thread_id,
        )
        .await
        .unwrap();
    submit_text(&resumed.thread, "third request").await;
    events_until(&resumed.thread, is_turn_end).await;
    let last = mock.requests().last().cloned().unwrap().to_string();
    assert!(last.contains("SUMMARY-TEXT"), "{last}");
    assert!(!last.contains("OLD-MARKER"), "{last}");
}

#[tokio::test]
async fn responses_wire_api_runs_a_tool_turn() {
    use interpreter_test_support::mock_model::responses_event::ResponseEvents;

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::responses(
        ResponseEvents::new("resp_1")
            .reasoning(
                &["Checking the directory."],
                Some("raw thoughts"),
                Some("ENCRYPTED"),
            )
            .function_call(
                "call_r1",
                "shell",
                r#"{"command":"echo from-responses"}"#,
                3,
            )
            .completed(50, 10),
    ));
    mock.push(MockResponse::responses(
        ResponseEvents::new("resp_2")
            .text("All good.")
            .completed(80, 5),
    ));
    let cfg = config_with(
        home.path(),
        work.path(),
        &mock,
        AskForApproval::Never,
        vec![(
            "model_providers.mock.wire_api".to_string(),
            toml::Value::String("responses".to_string()),
        )],
    );
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg, SessionSource::Exec)
        .await
        .unwrap();
    submit_text(&new.thread, "check").await;
    let events = events_until(&new.thread, is_turn_end).await;
    assert!(events.iter().any(|m| matches!(
        m,
        EventMsg::ExecCommandEnd(e) if e.aggregated_output.contains("from-responses")
    )));
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.last_agent_message.as_deref(), Some("All good."))
        }
        other => panic!("unexpected end {other:?}"),
    }
    assert!(mock.endpoints().iter().all(|e| e.ends_with("/responses")));
    let second = mock.requests()[1].to_string();
    assert!(
        second.contains("ENCRYPTED") && second.contains("call_r1"),
        "{second}"
    );
    mock.assert_invariants();
}

/// Runs a turn against two bad answers (the first attempt and its one retry, as
/// `stream_max_retries = 1`), checks it fails with `expected` after one retry notice, then
/// checks the thread goes on: a next turn on the live thread and one after resuming it
/// from its rollout both succeed, with the failed turn's question still in the history.
async fn bad_answer_fails_the_turn_but_not_the_thread(
    wire_api: &str,
    bad: fn() -> MockResponse,
    good: fn(&str) -> MockResponse,
    expected: &str,
) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(bad());
    mock.push(bad());
    mock.push(good("recovered"));
    mock.push(good("resumed"));
    let cfg = config_with(
        home.path(),
        work.path(),
        &mock,
        AskForApproval::Never,
        vec![(
            "model_providers.mock.wire_api".to_string(),
            toml::Value::String(wire_api.to_string()),
        )],
    );
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg.clone(), SessionSource::Exec)
        .await
        .unwrap();

    submit_text(&new.thread, "first question").await;
    let events = events_until(&new.thread, is_turn_end).await;
    let retries = events
        .iter()
        .filter(|m| matches!(m, EventMsg::StreamError(_)))
        .count();
    assert_eq!(retries, 1, "{events:#?}");
    let error = events
        .iter()
        .find_map(|m| match m {
            EventMsg::Error(e) => Some(e.message.clone()),
            _ => None,
        })
        .expect("error event");
    assert!(error.contains(expected), "{error}");
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.error.as_deref(), Some(error.as_str()));
            assert_eq!(done.last_agent_message, None);
        }
        other => panic!("unexpected end {other:?}"),
    }
    assert!(
        !events
            .iter()
            .any(|m| matches!(m, EventMsg::AgentMessage(_))),
        "a failed answer must not be shown as an answer: {events:#?}"
    );

    submit_text(&new.thread, "second question").await;
    let events = events_until(&new.thread, is_turn_end).await;
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.error, None);
            assert_eq!(done.last_agent_message.as_deref(), Some("recovered"));
        }
        other => panic!("unexpected end {other:?}"),
    }
    let third = mock.requests()[2].to_string();
    assert!(
        third.contains("first question") && third.contains("second question"),
        "{third}"
    );
    assert!(
        !third.contains("half an ans"),
        "partial output leaked: {third}"
    );

    // The rollout resumes in another process's manager too.
    let thread_id = new.thread_id;
    drop(new);
    drop(manager);
    let manager = ThreadManager::new();
    let resumed = manager.resume_thread(cfg, thread_id).await.unwrap();
    submit_text(&resumed.thread, "third question").await;
    let events = events_until(&resumed.thread, is_turn_end).await;
    match events.last().unwrap() {
        EventMsg::TaskComplete(done) => {
            assert_eq!(done.last_agent_message.as_deref(), Some("resumed"))
        }
        other => panic!("unexpected end {other:?}"),
    }
    let fourth = mock.requests()[3].to_string();
    assert!(fourth.contains("recovered") && fourth.contains("third question"));
    assert_eq!(mock.remaining(), 0);
    mock.assert_invariants();
}

fn chat_answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(10, 2),
    ])
}

fn responses_answer(text: &str) -> MockResponse {
    use interpreter_test_support::mock_model::responses_event::ResponseEvents;
    MockResponse::responses(ResponseEvents::new("resp_ok").text(text).completed(10, 2))
}

#[tokio::test]
async fn chat_done_only_stream_is_retried_then_fails_and_the_thread_goes_on() {
    bad_answer_fails_the_turn_but_not_the_thread(
        "chat",
        || MockResponse::sse(vec![]),
        chat_answer,
        "the model returned an empty answer 2 times",
    )
    .await;
}

#[tokio::test]
async fn chat_truncated_stream_is_retried_then_fails_and_the_thread_goes_on() {
    bad_answer_fails_the_turn_but_not_the_thread(
        "chat",
        || MockResponse::sse(vec![chunk::text("half an ans")]).without_done(),
        chat_answer,
        "the stream ended before the model finished (2 times",
    )
    .await;
}

#[tokio::test]
async fn responses_empty_answer_is_retried_then_fails_and_the_thread_goes_on() {
    use interpreter_test_support::mock_model::responses_event::ResponseEvents;
    bad_answer_fails_the_turn_but_not_the_thread(
        "responses",
        || MockResponse::responses(ResponseEvents::new("resp_empty").completed(10, 0)),
        responses_answer,
        "the model returned an empty answer 2 times",
    )
    .await;
}

#[tokio::test]
async fn responses_truncated_stream_is_retried_then_fails_and_the_thread_goes_on() {
    use interpreter_test_support::mock_model::responses_event::ResponseEvents;
    bad_answer_fails_the_turn_but_not_the_thread(
        "responses",
        || {
            MockResponse::responses(
                ResponseEvents::new("resp_cut")
                    .text("half an ans")
                    .unfinished(),
            )
        },
        responses_answer,
        "the stream ended before the model finished (2 times",
    )
    .await;
}

/// Found by resuming a thread: its turn ids restarted at "1", so two turns of one thread
/// shared an id (and anything keyed by turn, like a task id, pointed at the wrong one).
#[tokio::test]
async fn turn_ids_stay_unique_across_resume() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(chat_answer("first"));
    mock.push(chat_answer("second"));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "one").await;
    let first = events_until(&new.thread, is_turn_end).await;
    let thread_id = new.thread_id;
    drop(new);
    drop(manager);
    let manager = ThreadManager::new();
    let resumed = manager
        .resume_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            thread_id,
        )
        .await
        .unwrap();
    submit_text(&resumed.thread, "two").await;
    let second = events_until(&resumed.thread, is_turn_end).await;
    let turn_id = |events: &[EventMsg]| {
        events.iter().find_map(|e| match e {
            EventMsg::TaskStarted(started) => Some(started.turn_id.clone()),
            _ => None,
        })
    };
    let (first, second) = (turn_id(&first).unwrap(), turn_id(&second).unwrap());
    assert_ne!(first, second);
    assert!(second.parse::<u64>().unwrap() > first.parse::<u64>().unwrap());
}

/// Found by goal mode, which starts the next turn the moment one ends: input sent as
/// soon as `task_complete` arrives used to join the finished turn as steering and ran as
/// a follow-up turn under another id, so a front end waiting for its own turn id waited
/// forever. It is now a turn of its own, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_sent_the_moment_a_turn_completes_is_a_turn_under_its_own_id() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    let rounds = 20;
    for n in 0..rounds {
        mock.push(chat_answer(&format!("answer {n}")));
    }
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    let mut expected = new
        .thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text { text: "go".into() }],
        })
        .await
        .unwrap();
    for n in 1..=rounds {
        let events = events_until(&new.thread, is_turn_end).await;
        let started = events.iter().find_map(|e| match e {
            EventMsg::TaskStarted(started) => Some(started.turn_id.clone()),
            _ => None,
        });
        assert_eq!(started.as_deref(), Some(expected.as_str()), "{events:?}");
        if n < rounds {
            expected = new
                .thread
                .submit(Op::UserInput {
                    items: vec![UserInput::Text {
                        text: "again".into(),
                    }],
                })
                .await
                .unwrap();
        }
    }
}

/// Found by resuming a thread under another approval policy: the model's environment
/// context still named the old one. A resumed thread whose settings changed gets a fresh
/// environment context; one resumed unchanged does not repeat it.
#[tokio::test]
async fn resume_under_new_settings_tells_the_model() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    for text in ["one", "two", "three"] {
        mock.push(chat_answer(text));
    }
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "first").await;
    events_until(&new.thread, is_turn_end).await;
    let thread_id = new.thread_id;
    drop(new);
    drop(manager);

    let count = |body: &str, needle: &str| body.matches(needle).count();
    let resume = |approval| {
        let cfg = config(home.path(), work.path(), &mock, approval);
        async move {
            let manager = ThreadManager::new();
            let resumed = manager.resume_thread(cfg, thread_id).await.unwrap();
            submit_text(&resumed.thread, "next").await;
            events_until(&resumed.thread, is_turn_end).await;
        }
    };
    resume(AskForApproval::Untrusted).await;
    let body = mock.requests().last().unwrap().to_string();
    assert_eq!(
        count(&body, "<approval_policy>never</approval_policy>"),
        1,
        "{body}"
    );
    assert_eq!(
        count(&body, "<approval_policy>untrusted</approval_policy>"),
        1,
        "{body}"
    );

    resume(AskForApproval::Untrusted).await;
    let body = mock.requests().last().unwrap().to_string();
    assert_eq!(
        count(&body, "<approval_policy>untrusted</approval_policy>"),
        1,
        "{body}"
    );
    mock.assert_invariants();
}

#[tokio::test]
async fn reconfigure_changes_the_model_between_turns_and_keeps_the_history() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    mock.push(chat_answer("first answer"));
    mock.push(chat_answer("second answer"));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Cli,
        )
        .await
        .unwrap();
    submit_text(&new.thread, "remember the word pelican").await;
    events_until(&new.thread, is_turn_end).await;

    let mut changed = config(home.path(), work.path(), &mock, AskForApproval::OnRequest);
    changed.model = "other-model".to_string();
    let restarted = manager
        .reconfigure_thread(new.thread_id, changed, DEADLINE)
        .await
        .unwrap();
    assert_eq!(restarted.thread_id, new.thread_id);
    assert_eq!(restarted.session_configured.model, "other-model");
    assert_eq!(
        restarted.session_configured.approval_policy,
        AskForApproval::OnRequest
    );
    // The old handle is closed; the manager knows only the new one.
    assert!(new.thread.submit(Op::Interrupt).await.is_err());
    let live = manager.get_thread(new.thread_id).await.unwrap();
    assert!(Arc::ptr_eq(&live, &restarted.thread));

    submit_text(&restarted.thread, "which word?").await;
    events_until(&restarted.thread, is_turn_end).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["model"], "other-model");
    let history = requests[1]["messages"].to_string();
    assert!(history.contains("pelican") && history.contains("first answer"));
    mock.assert_invariants();
}

/// Found by acpx, which starts an agent process per command: settings changed before the
/// thread's first turn must be on record for the next process that resumes it.
#[tokio::test]
async fn reconfigured_settings_are_recorded_before_any_turn_runs_with_them() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, AskForApproval::Never),
            SessionSource::Cli,
        )
        .await
        .unwrap();
    let mut changed = config(home.path(), work.path(), &mock, AskForApproval::OnRequest);
    changed.model_reasoning_effort = Some(interpreter_protocol::ReasoningEffort::High);
    manager
        .reconfigure_thread(new.thread_id, changed, DEADLINE)
        .await
        .unwrap();
    manager.shutdown_all(DEADLINE).await;

    let store = interpreter_core::store::open(
        &interpreter_core::store::StoreLocation::Local {
            home: home.path().to_path_buf(),
        },
        None,
        None,
    )
    .await
    .unwrap();
    let read = store.read(new.thread_id).await.unwrap().unwrap();
    let recorded = interpreter_core::store::last_turn_context(&read.items).unwrap();
    assert_eq!(recorded.turn_id, None, "no turn ran with them yet");
    assert_eq!(recorded.approval_policy, AskForApproval::OnRequest);
    assert_eq!(
        recorded.effort,
        Some(interpreter_protocol::ReasoningEffort::High)
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn reconfigure_refuses_an_ephemeral_thread_and_leaves_it_running() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mock = MockModelServer::start().await.unwrap();
    let mut ephemeral = config(home.path(), work.path(), &mock, AskForApproval::Never);
    ephemeral.ephemeral = true;
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(ephemeral.clone(), SessionSource::Cli)
        .await
        .unwrap();
    let err = manager
        .reconfigure_thread(new.thread_id, ephemeral, DEADLINE)
        .await
        .err()
        .unwrap();
    assert!(matches!(
        err,
        interpreter_core::CoreError::ThreadNotPersisted(_)
    ));
    assert!(manager.get_thread(new.thread_id).await.is_some());
    new.thread.submit(Op::Interrupt).await.unwrap();
}
