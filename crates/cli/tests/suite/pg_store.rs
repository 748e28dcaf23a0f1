//! The PostgreSQL thread store through the real binary: a thread started by `exec` on
//! one machine (home) continues from another that shares only the store URL, is listed
//! from a third, and `threads migrate` / `threads export` copy threads between a home
//! and the store. Skipped without `INTERPRETER_TEST_PG_URL` unless
//! `INTERPRETER_REQUIRE_PG=1` (set by `scripts/test`).

use crate::exec_support::{TestEnv, request_mentions, run_binary};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::postgres;
use serde_json::Value;

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(5, 2),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_started_on_one_machine_continues_on_another_through_the_store() {
    let Some(url) = postgres::test_url() else {
        return;
    };
    let store = format!("thread_store=\"{url}\"");
    let one = TestEnv::new().await;
    let two = TestEnv::new().await;
    one.server.push(answer("first answer"));
    two.server.push(answer("second answer"));

    let first = one
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            &store,
            "remember apricot",
        ])
        .await;
    first.assert_success();
    let thread_id = first.thread_id();
    assert!(
        !one.home.path().join("sessions").exists(),
        "nothing is written to the home with a PostgreSQL store"
    );

    let second = two
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            &store,
            "resume",
            &thread_id,
            "what was the word?",
        ])
        .await;
    second.assert_success();
    assert_eq!(second.thread_id(), thread_id);
    let requests = two.server.requests();
    assert_eq!(requests.len(), 1);
    assert!(request_mentions(&requests[0], "remember apricot"));
    assert!(request_mentions(&requests[0], "first answer"));
    two.server.assert_invariants();

    // A third machine with no model configured lists and shows it.
    let third = tempfile::tempdir().unwrap();
    let listed = run_binary(
        third.path(),
        &one.work_path(),
        &["-c", &store, "threads", "list", "--json", "--limit", "50"],
        None,
    )
    .await;
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert!(
        rows.iter().any(|r| r["id"] == thread_id.as_str()),
        "{rows:?}"
    );
    let shown = run_binary(
        third.path(),
        &one.work_path(),
        &["-c", &store, "threads", "show", &thread_id],
        None,
    )
    .await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(shown.stdout.contains("second answer"), "{}", shown.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_copies_a_home_into_the_store_once_and_export_writes_it_back() {
    let Some(url) = postgres::test_url() else {
        return;
    };
    let store = format!("thread_store=\"{url}\"");
    let env = TestEnv::new().await;
    env.server.push(answer("local answer"));
    let local = env
        .run(&["exec", "--json", "--skip-git-repo-check", "local thread"])
        .await;
    local.assert_success();
    let thread_id = local.thread_id();

    let migrate = ["threads", "migrate", "--to", url.as_str()];
    let first = env.run(&migrate).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(first.stdout.contains("1 copied"), "{}", first.stdout);
    let again = env.run(&migrate).await;
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert!(
        again.stdout.contains("0 copied, 1 already there"),
        "{}",
        again.stdout
    );

    // Exported from the store, it is the local rollout's records.
    let exported = env
        .run(&["-c", &store, "threads", "export", &thread_id])
        .await;
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    let original = std::fs::read_to_string(env.rollout_file(&thread_id)).unwrap();
    let records = |text: &str| -> Vec<Value> {
        text.lines()
            .map(|line| {
                let mut value: Value = serde_json::from_str(line).unwrap();
                // Lines are re-stamped when copied; the records are the same.
                value.as_object_mut().unwrap().remove("timestamp");
                value
            })
            .collect()
    };
    assert_eq!(records(&exported.stdout), records(&original));

    let missing = env
        .run(&[
            "-c",
            &store,
            "threads",
            "export",
            "0199a213-81c0-7800-8aa1-bbab2a035a53",
        ])
        .await;
    assert_eq!(missing.code, Some(1));
    assert!(missing.stderr.contains("no thread"), "{}", missing.stderr);
}
