//! Failure paths of exec: provider retries, idle streams, bad arguments and config,
//! unreachable endpoints, and the pre-flight checks. Each must end with a clear message
//! and the documented exit code, never a hang.

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![chunk::text(text), chunk::finish("stop")])
}

const EXEC: [&str; 3] = ["exec", "--json", "--skip-git-repo-check"];

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    EXEC.iter().copied().chain(rest.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_and_server_errors_are_retried() {
    let env = TestEnv::new().await;
    env.server.push(
        MockResponse::status(429, r#"{"error":{"message":"slow down"}}"#).with_retry_after(1),
    );
    env.server
        .push(MockResponse::status(500, r#"{"error":{"message":"oops"}}"#));
    env.server.push(answer("made it"));

    let out = env.run(&args(&["hello"])).await;
    out.assert_success();
    assert_eq!(env.server.requests().len(), 3);
    let events = out.events();
    assert_eq!(events.last().expect("events")["type"], "turn.completed");
    assert!(
        events
            .iter()
            .any(|event| event["item"]["text"] == "made it"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_fails_the_turn_cleanly() {
    let env = TestEnv::new().await;
    env.write_config("stream_idle_timeout_ms = 300\nstream_max_retries = 0");
    env.server
        .push(MockResponse::sse_then_stall(vec![chunk::text("partial")]));

    let out = env.run(&args(&["hello"])).await;
    assert_eq!(
        out.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    let events = out.events();
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turn.failed", "{}", out.stdout);
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_flag_is_a_usage_error() {
    let env = TestEnv::new().await;
    let out = env.run(&["exec", "--no-such-flag", "hi"]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    let out = env.run(&["no-such-subcommand"]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_override_key_is_one_line_error() {
    let env = TestEnv::new().await;
    let out = env.run(&args(&["-c", "=x", "hello"])).await;
    assert_eq!(out.code, Some(1));
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {}", out.stderr);
    assert!(lines[0].starts_with("Error: "), "{}", lines[0]);
    assert!(lines[0].contains("=x"), "{}", lines[0]);
    assert!(env.server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_model_is_reported() {
    let env = TestEnv::new().await;
    env.write_raw_config("model_provider = \"mock\"\n");
    let out = env.run(&args(&["hello"])).await;
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.starts_with("Error: "), "{}", out.stderr);
    assert!(out.stderr.contains("model"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_endpoint_fails_with_one_error_line() {
    let env = TestEnv::new().await;
    env.write_raw_config(
        "model = \"mock-model\"\nmodel_provider = \"dead\"\n\n[model_providers.dead]\nname = \"dead\"\nbase_url = \"http://127.0.0.1:1/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"chat\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
    );
    let out = env.run(&["exec", "--skip-git-repo-check", "hello"]).await;
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "no answer expected: {}", out.stdout);
    let error_lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with("ERROR: ") || line.starts_with("Error: "))
        .collect();
    assert_eq!(error_lines.len(), 1, "stderr: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_a_git_repo_requires_the_skip_flag() {
    let env = TestEnv::new().await;
    let out = env.run(&["exec", "hello"]).await;
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains(
            "Not inside a trusted directory and --skip-git-repo-check was not specified."
        ),
        "{}",
        out.stderr
    );
    assert!(env.server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_stdin_prompt_is_an_error() {
    let env = TestEnv::new().await;
    let out = env.run_with_stdin(&args(&["-"]), Some("  \n")).await;
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("No prompt provided via stdin."),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_output_schema_is_an_error() {
    let env = TestEnv::new().await;
    let schema = env.work_path().join("schema.json");
    std::fs::write(&schema, "{ not json").expect("write schema");
    let out = env
        .run(&args(&[
            "--output-schema",
            schema.to_str().expect("utf-8"),
            "hi",
        ]))
        .await;
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("schema.json"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_fails_the_turn_and_the_thread_resumes() {
    let env = TestEnv::new().await;
    env.write_config("stream_max_retries = 1");
    // Only `data: [DONE]`, twice (the attempt and its retry).
    env.server.push(MockResponse::sse(vec![]));
    env.server.push(MockResponse::sse(vec![]));
    env.server.push(answer("second time lucky"));

    let out = env.run(&args(&["hello"])).await;
    assert_eq!(
        out.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    let events = out.events();
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turn.failed", "{}", out.stdout);
    let message = last["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the model returned an empty answer 2 times"),
        "{last}"
    );
    assert_eq!(env.server.requests().len(), 2);

    let thread_id = out.thread_id();
    let again = env.run(&args(&["resume", &thread_id, "try again"])).await;
    again.assert_success();
    assert!(
        again
            .events()
            .iter()
            .any(|event| event["item"]["text"] == "second time lucky"),
        "{}",
        again.stdout
    );
    env.server.assert_invariants();
}

/// Found by a new user: `interpreter sandbox -- CMD` refused to run without a model in
/// the config, though it never talks to one.
#[tokio::test]
async fn sandbox_runs_a_command_without_a_model() {
    let env = TestEnv::new().await;
    env.write_raw_config("");
    let out = env
        .run(&["sandbox", "-s", "read-only", "--", "echo", "sandboxed"])
        .await;
    out.assert_success();
    assert_eq!(out.stdout, "sandboxed\n");
}
