//! Review mode through `interpreter app-server`: `review/start` on the uncommitted
//! changes, a base branch and a commit of a repository the test makes; the
//! `enteredReviewMode`/`exitedReviewMode` items, in order and kept across a restart; what
//! the model is sent; the errors that come before any model call; a hostile repository
//! whose config would run programs; a hostile model that tries to write; a huge diff.

use std::path::Path;

use crate::app_server_support::{
    AppClient, AppEnv, assert_drivers_armed, repository_with_drivers_beyond_reach,
    touch_submodule_file, trace,
};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The widest policy there is: a review must still write nothing.
fn wide_open() -> Value {
    json!({"approvalPolicy": "never", "sandbox": "danger-full-access"})
}

/// `git ARGS` in `dir` for the test's own set-up, with a fixed identity and no config
/// from the machine or the user.
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

/// A repository on `main` with one commit of `a.txt`.
fn init_repo(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one\n").expect("write a.txt");
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "First"]);
}

async fn start_review(client: &mut AppClient, thread_id: &str, target: Value) -> Value {
    client
        .ok(
            "review/start",
            json!({"threadId": thread_id, "target": target}),
        )
        .await
}

fn of_type<'a>(messages: &'a [Value], method: &str, kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method && m["params"]["item"]["type"] == kind)
        .map(|m| &m["params"]["item"])
        .collect()
}

fn items_of_type<'a>(items: &'a Value, kind: &str) -> Vec<&'a Value> {
    items
        .as_array()
        .map(|items| items.iter().filter(|i| i["type"] == kind).collect())
        .unwrap_or_default()
}

fn system_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().find(|m| m["role"] == "system"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The text of the request's last user message: the review request.
fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_uncommitted_changes_sends_the_diff_and_keeps_the_review() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    std::fs::write(work.join("a.txt"), "one\ntwo\n").expect("modify");
    std::fs::write(work.join("staged.txt"), "staged line\n").expect("staged");
    git(&work, &["add", "staged.txt"]);
    std::fs::write(work.join("new.txt"), "untracked line\n").expect("untracked");
    env.model.push(MockResponse::sse(vec![
        chunk::text("No findings: "),
        chunk::text("the change looks correct."),
        chunk::finish("stop"),
    ]));

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;
    let result = start_review(
        &mut client,
        &thread_id,
        json!({"type": "uncommittedChanges"}),
    )
    .await;
    assert_eq!(result["reviewThreadId"], thread_id.as_str(), "{result}");
    let turn_id = result["turn"]["id"].as_str().expect("turn id").to_string();
    assert_eq!(result["turn"]["status"], "inProgress", "{result}");
    let messages = client.until_turn_completed().await;

    let order: Vec<String> = trace(&messages)
        .into_iter()
        .filter(|m| m.starts_with("item/") || m.starts_with("turn/"))
        .collect();
    assert_eq!(
        order,
        [
            "turn/started",
            "item/started:enteredReviewMode",
            "item/completed:enteredReviewMode",
            "item/started:exitedReviewMode",
            "item/completed:exitedReviewMode",
            "turn/completed",
        ],
        "{order:?}"
    );
    let entered = of_type(&messages, "item/completed", "enteredReviewMode")[0].clone();
    assert_eq!(
        entered,
        json!({"type": "enteredReviewMode", "id": format!("{turn_id}-review"), "review": "uncommitted changes"})
    );
    let exited = of_type(&messages, "item/completed", "exitedReviewMode")[0].clone();
    assert_eq!(
        exited,
        json!({"type": "exitedReviewMode", "id": format!("{turn_id}-review-done"), "review": "No findings: the change looks correct."})
    );
    let completed = messages
        .iter()
        .find(|m| m["method"] == "turn/completed")
        .expect("turn/completed");
    assert_eq!(completed["params"]["turn"]["status"], "completed");

    // What the model was sent: the review instructions as the turn's mode (in the
    // conversation; the system prompt stays the thread's, for the prompt cache), the
    // whole diff (modified, staged and untracked), and the usual tools (apply_patch is
    // refused in a review, not withdrawn).
    let record = env.model.record();
    let request = record.requests.last().expect("request");
    assert!(!system_text(request).contains("# Review mode"), "{request}");
    assert!(
        request["messages"]
            .as_array()
            .is_some_and(|messages| messages.iter().any(|m| {
                m["content"].as_str().is_some_and(|text| {
                    text.starts_with("<collaboration_mode>") && text.contains("# Review mode")
                })
            })),
        "{request}"
    );
    let asked = last_user_text(request);
    for needle in [
        "+two",
        "staged.txt",
        "+staged line",
        "new.txt",
        "+untracked line",
    ] {
        assert!(asked.contains(needle), "{needle} missing from: {asked}");
    }
    assert!(!asked.contains("The diff was cut here"), "{asked}");
    let tools = tool_names(request);
    assert!(tools.contains(&"shell".to_string()), "{tools:?}");
    assert!(tools.contains(&"apply_patch".to_string()), "{tools:?}");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    drop(client);

    // A new server process reads the review back from disk; the diff is the model's
    // input, not a user message.
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = &read["thread"]["turns"][0]["items"];
    assert_eq!(
        items_of_type(items, "enteredReviewMode"),
        [&entered],
        "{items}"
    );
    assert_eq!(
        items_of_type(items, "exitedReviewMode"),
        [&exited],
        "{items}"
    );
    assert!(items_of_type(items, "userMessage").is_empty(), "{items}");
    assert!(items_of_type(items, "agentMessage").is_empty(), "{items}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_branch_and_commit_targets_review_their_own_diffs() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    git(&work, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.join("feature.txt"), "feature line\n").expect("feature");
    git(&work, &["add", "feature.txt"]);
    git(&work, &["commit", "-q", "-m", "Add the feature"]);
    std::fs::write(work.join("later.txt"), "later line\n").expect("later");
    git(&work, &["add", "later.txt"]);
    git(&work, &["commit", "-q", "-m", "Later work"]);
    let base = git(&work, &["rev-parse", "main"]);
    let feature_commit = git(&work, &["rev-parse", "HEAD~1"]);
    env.script_text("Branch review.");
    env.script_text("Commit review.");
    env.script_text("Titled review.");

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;

    start_review(
        &mut client,
        &thread_id,
        json!({"type": "baseBranch", "branch": "main"}),
    )
    .await;
    let messages = client.until_turn_completed().await;
    assert_eq!(
        of_type(&messages, "item/completed", "enteredReviewMode")[0]["review"],
        "changes against `main`"
    );
    assert_eq!(
        of_type(&messages, "item/completed", "exitedReviewMode")[0]["review"],
        "Branch review."
    );

    start_review(
        &mut client,
        &thread_id,
        json!({"type": "commit", "sha": feature_commit}),
    )
    .await;
    let messages = client.until_turn_completed().await;
    assert_eq!(
        of_type(&messages, "item/completed", "enteredReviewMode")[0]["review"],
        format!("commit {}: Add the feature", &feature_commit[..7])
    );

    start_review(
        &mut client,
        &thread_id,
        json!({"type": "commit", "sha": "HEAD", "title": "My title"}),
    )
    .await;
    let messages = client.until_turn_completed().await;
    assert_eq!(
        of_type(&messages, "item/completed", "enteredReviewMode")[0]["review"],
        format!(
            "commit {}: My title",
            &git(&work, &["rev-parse", "HEAD"])[..7]
        )
    );

    let record = env.model.record();
    let [branch, commit, titled] = &record.requests[..] else {
        panic!("three requests: {:?}", record.requests.len());
    };
    let branch = last_user_text(branch);
    assert!(branch.contains(&base), "merge base missing: {branch}");
    assert!(
        branch.contains("+feature line") && branch.contains("+later line"),
        "{branch}"
    );
    let commit = last_user_text(commit);
    assert!(commit.contains("+feature line"), "{commit}");
    assert!(commit.contains("Add the feature"), "{commit}");
    assert!(!commit.contains("+later line"), "{commit}");
    let titled = last_user_text(titled);
    assert!(
        titled.contains("+later line") && !titled.contains("+feature line"),
        "{titled}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_targets_are_errors_before_any_model_call() {
    let env = AppEnv::new().await;
    init_repo(&env.work_path());
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;

    let invalid = [
        json!({"threadId": thread_id, "target": {"type": "baseBranch", "branch": "no-such-branch"}}),
        json!({"threadId": thread_id, "target": {"type": "commit", "sha": "0123456789abcdef0123"}}),
        json!({"threadId": thread_id, "target": {"type": "baseBranch", "branch": "--output=/tmp/x"}}),
        json!({"threadId": thread_id, "target": {"type": "custom", "instructions": "  "}}),
        json!({"threadId": thread_id, "target": {"type": "pullRequest"}}),
        json!({"threadId": thread_id, "target": {"type": "uncommittedChanges"}, "delivery": "detached"}),
    ];
    for params in invalid {
        let response = client.call("review/start", params.clone()).await;
        assert_eq!(response["error"]["code"], -32602, "{params} → {response}");
    }
    let response = client
        .call(
            "review/start",
            json!({"threadId": thread_id, "target": {"type": "baseBranch", "branch": "no-such-branch"}}),
        )
        .await;
    assert!(
        response["error"]["message"]
            .to_string()
            .contains("unknown branch `no-such-branch`"),
        "{response}"
    );

    // A thread whose directory is not in a repository.
    let outside = tempfile::TempDir::new().expect("outside dir");
    let outside_path = std::fs::canonicalize(outside.path()).expect("canonical");
    let outside_thread = client
        .start_thread(json!({"cwd": outside_path, "approvalPolicy": "never"}))
        .await;
    let response = client
        .call(
            "review/start",
            json!({"threadId": outside_thread, "target": {"type": "uncommittedChanges"}}),
        )
        .await;
    assert_eq!(response["error"]["code"], -32600, "{response}");
    assert!(
        response["error"]["message"]
            .to_string()
            .contains("not inside a git repository"),
        "{response}"
    );
    assert_eq!(env.model.record().requests.len(), 0);
}

/// A repository whose config names a program for every hook git has into running one:
/// an external diff, a textconv and a filter driver for every file, a pager, an
/// fsmonitor, hooks, a gpg program for signatures. Reviewing it runs none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_repository_runs_nothing_of_its_own() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    std::fs::write(work.join("a.txt"), "one\nchanged\n").expect("modify");
    let marker = env.home.path().join("marker");
    let script = env.home.path().join("evil.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho ran \"$@\" >> {}\ncat\n", marker.display()),
    )
    .expect("script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let evil = script.display();
    let config = std::fs::read_to_string(work.join(".git/config")).expect("config");
    std::fs::write(
        work.join(".git/config"),
        format!(
            "{config}[core]\n\tpager = {evil}\n\tfsmonitor = {evil}\n\thooksPath = {hooks}\n[diff]\n\texternal = {evil}\n[diff \"evil\"]\n\ttextconv = {evil}\n\tcommand = {evil}\n[filter \"evil\"]\n\tclean = {evil}\n\tsmudge = {evil}\n\tprocess = {evil}\n\trequired = true\n[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {evil}\n[pager]\n\tdiff = {evil}\n\tshow = {evil}\n",
            hooks = env.home.path().join("hooks").display(),
        ),
    )
    .expect("hostile config");
    std::fs::write(work.join(".gitattributes"), "* diff=evil filter=evil\n").expect("attributes");
    let hooks = env.home.path().join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks dir");
    for hook in [
        "post-checkout",
        "pre-commit",
        "post-index-change",
        "reference-transaction",
    ] {
        std::fs::copy(&script, hooks.join(hook)).expect("hook");
    }
    env.script_text("Reviewed.");
    env.script_text("Reviewed again.");

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "uncommittedChanges"}),
    )
    .await;
    client.until_turn_completed().await;
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "commit", "sha": "HEAD"}),
    )
    .await;
    client.until_turn_completed().await;

    assert!(
        !marker.exists(),
        "a repository program ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    // The review still saw the change, as plain text.
    let record = env.model.record();
    assert_eq!(record.requests.len(), 2);
    assert!(last_user_text(&record.requests[0]).contains("+changed"));
    assert!(last_user_text(&record.requests[1]).contains("+one"));
}

/// A filter whose name holds `=` and a submodule with a filter and an fsmonitor of its
/// own: reviewing the changes and a commit runs none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_runs_no_driver_beyond_reach_of_dash_c() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let marker = repository_with_drivers_beyond_reach(&work, env.home.path());
    assert_drivers_armed(&work, &marker);
    env.script_text("Reviewed.");
    env.script_text("Reviewed again.");

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "uncommittedChanges"}),
    )
    .await;
    client.until_turn_completed().await;
    touch_submodule_file(&work);
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "commit", "sha": "HEAD"}),
    )
    .await;
    client.until_turn_completed().await;

    assert!(
        !marker.exists(),
        "a driver ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    let record = env.model.record();
    assert_eq!(record.requests.len(), 2);
    assert!(last_user_text(&record.requests[0]).contains("+two"));
}

/// A hostile model in a review, on a thread whose policy would allow anything: a patch,
/// a shell redirect, a patch smuggled through the shell and a request to leave the
/// sandbox all leave the workspace as it was, and nothing asks for approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_model_in_a_review_writes_nothing() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    std::fs::write(work.join("a.txt"), "one\ntwo\n").expect("modify");
    env.script_write_attempts("Nothing to fix.");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "uncommittedChanges"}),
    )
    .await;
    let messages = client.until_turn_completed().await;

    env.assert_nothing_written(&messages);
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).expect("a.txt"),
        "one\ntwo\n"
    );
    let changes = of_type(&messages, "item/completed", "fileChange");
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(changes.iter().all(|item| item["status"] == "failed"));
    assert_eq!(
        of_type(&messages, "item/completed", "exitedReviewMode")[0]["review"],
        "Nothing to fix."
    );
    let record = env.model.record();
    let last = record.requests.last().expect("request").to_string();
    assert!(last.contains("not available in a review"), "{last}");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_diff_is_cut_with_a_note() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    init_repo(&work);
    let mut big = String::from("one\n");
    for n in 0..20_000 {
        big.push_str(&format!("line {n} of a change far too big to send whole\n"));
    }
    big.push_str("THE LAST LINE\n");
    std::fs::write(work.join("a.txt"), &big).expect("big change");
    std::fs::write(work.join("untracked.txt"), "never reached\n").expect("untracked");
    env.script_text("Too big to judge in one go.");

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(wide_open()).await;
    start_review(
        &mut client,
        &thread_id,
        json!({"type": "uncommittedChanges"}),
    )
    .await;
    client.until_turn_completed().await;

    let record = env.model.record();
    let asked = last_user_text(record.requests.last().expect("request"));
    assert!(
        asked.contains("+line 0 of a change"),
        "start of the diff missing"
    );
    assert!(asked.contains("The diff was cut here"), "no note");
    assert!(!asked.contains("THE LAST LINE"), "the diff was sent whole");
    assert!(asked.len() < 80 * 1024, "request of {} bytes", asked.len());
}
