//! Two `interpreter app-server` processes that share only a PostgreSQL thread store: a
//! thread one of them runs a turn on is readable from the other, refused there with the
//! retryable "runs elsewhere" error while the turn runs, and continued there (with its
//! whole history) once the turn is over. Skipped without `INTERPRETER_TEST_PG_URL` unless
//! `INTERPRETER_REQUIRE_PG=1` (set by `scripts/test`).

use crate::app_server_support::AppEnv;
use interpreter_test_support::postgres;
use serde_json::json;

/// The error code of a request about a thread another live process runs.
const RUNS_ELSEWHERE: i64 = -32050;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_running_on_one_app_server_is_refused_retryably_by_another_then_continues() {
    let Some(url) = postgres::test_url() else {
        return;
    };
    let config = format!("thread_store = \"{url}\"");
    let one = AppEnv::with_config(&config).await;
    let two = AppEnv::with_config(&config).await;
    let mut first = one.spawn();
    let mut second = two.spawn();
    first.initialize().await;
    second.initialize().await;

    one.script_command_then_text("call_wait", "sleep 3", "first done");
    let thread_id = first
        .start_thread(json!({"approvalPolicy": "never", "sandbox": "danger-full-access"}))
        .await;
    first.start_turn(&thread_id, "remember quince").await;
    // The command runs on the first server; wait until it has asked the model.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while one.model.requests().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no model request");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    let read = second
        .ok("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["thread"]["id"], thread_id.as_str());
    let refused = second
        .call("thread/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(refused["error"]["code"], RUNS_ELSEWHERE, "{refused}");
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    assert_eq!(refused["error"]["data"]["threadId"], thread_id.as_str());

    first.until_turn_completed().await;
    two.script_text("second done");
    let resumed = second
        .ok("thread/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(resumed["thread"]["id"], thread_id.as_str());
    second.start_turn(&thread_id, "what was the fruit?").await;
    second.until_turn_completed().await;
    let requests = two.model.requests();
    assert_eq!(requests.len(), 1);
    let history = requests[0]["messages"].to_string();
    assert!(history.contains("remember quince"), "{history}");
    assert!(history.contains("first done"), "{history}");
    one.model.assert_invariants();
    two.model.assert_invariants();
}
