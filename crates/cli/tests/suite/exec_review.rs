//! `interpreter exec review`: the review on stdout, the JSONL stream with the review as
//! the agent message, custom instructions, and the errors before any model call.

use std::path::Path;

use crate::exec_support::TestEnv;
use pretty_assertions::assert_eq;
use serde_json::Value;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn init_repo(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one\n").expect("write a.txt");
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "First"]);
}

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_review_prints_the_review_of_the_uncommitted_changes() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    std::fs::write(work.join("a.txt"), "one\ntwo\n").expect("modify");
    env.server
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::text("[P2] a.txt:2 needs a test."),
            interpreter_test_support::mock_model::chunk::finish("stop"),
        ]));

    let out = env.run(&["exec", "review"]).await;
    out.assert_success();
    assert_eq!(out.stdout, "[P2] a.txt:2 needs a test.\n", "{}", out.stderr);
    assert!(out.stderr.contains("uncommitted changes"), "{}", out.stderr);
    let record = env.server.record();
    let asked = last_user_text(&record.requests[0]);
    assert!(asked.contains("+two"), "{asked}");
    assert!(
        record.requests[0]["messages"]
            .to_string()
            .contains("# Review mode")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_review_json_has_the_review_as_the_agent_message() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    git(&work, &["checkout", "-q", "-b", "topic"]);
    std::fs::write(work.join("b.txt"), "topic line\n").expect("b.txt");
    git(&work, &["add", "b.txt"]);
    git(&work, &["commit", "-q", "-m", "Topic"]);
    env.server
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::text("Looks right."),
            interpreter_test_support::mock_model::chunk::finish("stop"),
        ]));

    let out = env
        .run(&["exec", "review", "--json", "--base", "main"])
        .await;
    out.assert_success();
    let kinds: Vec<String> = out
        .events()
        .iter()
        .map(|e| {
            format!(
                "{}{}",
                e["type"].as_str().unwrap_or("?"),
                e["item"]["type"]
                    .as_str()
                    .map(|t| format!(":{t}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "thread.started",
            "turn.started",
            "item.completed:agent_message",
            "turn.completed"
        ],
        "{}",
        out.stdout
    );
    let message = &out.events()[2]["item"]["text"];
    assert_eq!(message, "Looks right.");
    let asked = last_user_text(&env.server.record().requests[0]);
    assert!(asked.contains("+topic line"), "{asked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_review_with_a_prompt_reviews_by_those_instructions() {
    let env = TestEnv::new().await;
    init_repo(&env.work_path());
    env.server
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::text("Error handling is fine."),
            interpreter_test_support::mock_model::chunk::finish("stop"),
        ]));
    let out = env
        .run(&["exec", "review", "check the error handling in a.txt"])
        .await;
    out.assert_success();
    assert_eq!(out.stdout, "Error handling is fine.\n");
    let asked = last_user_text(&env.server.record().requests[0]);
    assert!(
        asked.contains("check the error handling in a.txt"),
        "{asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_review_errors_come_before_any_model_call() {
    let env = TestEnv::new().await;
    // Not a repository (the Git check skipped, so the review itself says so).
    let out = env.run(&["exec", "review", "--skip-git-repo-check"]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("not inside a git repository"),
        "{}",
        out.stderr
    );

    init_repo(&env.work_path());
    let out = env.run(&["exec", "review", "--commit", "nope"]).await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown commit `nope`"),
        "{}",
        out.stderr
    );
    let out = env
        .run(&["exec", "review", "--base", "main", "--commit", "HEAD"])
        .await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(env.server.record().requests.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_without_commits_has_everything_under_review() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("first.txt"), "first line\n").expect("first.txt");
    env.server
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::text("Fine."),
            interpreter_test_support::mock_model::chunk::finish("stop"),
        ]));
    let out = env.run(&["exec", "review", "--uncommitted"]).await;
    out.assert_success();
    assert_eq!(out.stdout, "Fine.\n");
    let asked = last_user_text(&env.server.record().requests[0]);
    assert!(asked.contains("+first line"), "{asked}");
}
