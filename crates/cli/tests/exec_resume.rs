//! Resuming threads across processes: by id, `--last`, unknown ids, damaged rollouts,
//! and that replayed history keeps reasoning and tool call ids.

mod exec_support;

use std::io::Write;

use exec_support::{TestEnv, request_mentions};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;
use serde_json::json;

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(5, 2),
    ])
}

const EXEC: [&str; 3] = ["exec", "--json", "--skip-git-repo-check"];

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    EXEC.iter().copied().chain(rest.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_id_after_the_process_exited_sees_history() {
    let env = TestEnv::new().await;
    env.server.push(answer("first answer"));
    env.server.push(answer("second answer"));

    let first = env.run(&args(&["remember the word apricot"])).await;
    first.assert_success();
    let thread_id = first.thread_id();

    let second = env
        .run(&args(&["resume", &thread_id, "what was the word?"]))
        .await;
    second.assert_success();
    assert_eq!(second.thread_id(), thread_id);
    let events = second.events();
    assert_eq!(
        events[events.len() - 2]["item"]["text"],
        json!("second answer")
    );

    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(request_mentions(&requests[1], "remember the word apricot"));
    assert!(request_mentions(&requests[1], "first answer"));
    assert!(request_mentions(&requests[1], "what was the word?"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_last_picks_the_latest_thread_in_this_directory() {
    let env = TestEnv::new().await;
    env.server.push(answer("one"));
    env.server.push(answer("two"));
    env.server.push(answer("three"));

    let older = env.run(&args(&["first thread"])).await;
    older.assert_success();
    let newer = env.run(&args(&["second thread"])).await;
    newer.assert_success();
    assert_ne!(older.thread_id(), newer.thread_id());

    let resumed = env
        .run(&args(&["resume", "--last", "continue please"]))
        .await;
    resumed.assert_success();
    assert_eq!(resumed.thread_id(), newer.thread_id());
    let requests = env.server.requests();
    assert!(request_mentions(&requests[2], "second thread"));
    assert!(!request_mentions(&requests[2], "first thread"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_of_an_unknown_id_fails_naming_the_id() {
    let env = TestEnv::new().await;
    let unknown = "0199a213-81c0-7800-8aa1-bbab2a035a53";
    let out = env.run(&args(&["resume", unknown, "hello"])).await;
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(out.stderr.contains(unknown), "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "no thread may start: {}", out.stdout);
    assert!(env.server.requests().is_empty());

    let not_a_uuid = env.run(&args(&["resume", "my-thread", "hello"])).await;
    assert_eq!(not_a_uuid.code, Some(1));
    assert!(
        not_a_uuid.stderr.contains("my-thread"),
        "{}",
        not_a_uuid.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_survives_a_truncated_last_rollout_line() {
    let env = TestEnv::new().await;
    env.server.push(answer("before the crash"));
    env.server.push(answer("after the crash"));

    let first = env.run(&args(&["note: kiwi"])).await;
    first.assert_success();
    let thread_id = first.thread_id();

    // A process killed mid-write leaves half a JSON line without a newline.
    let rollout = env.rollout_file(&thread_id);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&rollout)
        .expect("open rollout");
    file.write_all(br#"{"timestamp":"2025-01-01T00:00:00Z","type":"response_item","payl"#)
        .expect("append half a line");
    drop(file);

    let second = env
        .run(&args(&["resume", &thread_id, "what was the note?"]))
        .await;
    second.assert_success();
    let requests = env.server.requests();
    assert!(request_mentions(&requests[1], "note: kiwi"));
    assert!(request_mentions(&requests[1], "before the crash"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_and_tool_call_ids_are_replayed_on_resume() {
    let env = TestEnv::new().await;
    let shell_args = json!({"command": "echo replay"}).to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::reasoning("I should run a command."),
        chunk::tool_call(0, "call_replay_1", "shell", &shell_args),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::reasoning("The command printed replay."),
        chunk::text("It printed replay."),
        chunk::finish("stop"),
    ]));
    env.server.push(answer("still here"));

    let first = env
        .run(&args(&["-s", "danger-full-access", "run echo replay"]))
        .await;
    first.assert_success();
    let reasoning: Vec<_> = first
        .events()
        .into_iter()
        .filter(|event| event["item"]["type"] == "reasoning")
        .collect();
    assert!(
        !reasoning.is_empty(),
        "no reasoning item in {}",
        first.stdout
    );

    let thread_id = first.thread_id();
    let second = env.run(&args(&["resume", &thread_id, "again?"])).await;
    second.assert_success();

    let requests = env.server.requests();
    assert_eq!(requests.len(), 3);
    let replayed = requests[2]["messages"].to_string();
    assert!(
        replayed.contains("call_replay_1"),
        "tool id not replayed: {replayed}"
    );
    assert!(
        replayed.contains("I should run a command."),
        "reasoning not replayed: {replayed}"
    );
    env.server.assert_invariants();
}
