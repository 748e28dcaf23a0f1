//! The approval-policy × sandbox matrix, end to end: the engine runs in this process, the
//! model is the mock, and sandboxed commands go through the real `interpreter` binary's
//! sandbox helper. Each case records what asked, what ran, and what reached the disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use interpreter_core::ThreadManager;
use interpreter_core::config::{ConfigInputs, ConfigOverrides, load_config};
use interpreter_protocol::{
    AskForApproval, EventMsg, Op, ReviewDecision, SandboxMode, SessionSource, UserInput,
};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The case expects no approval request at all.
    NoneExpected,
    Give(ReviewDecision),
}

#[derive(Debug)]
struct Outcome {
    asked: usize,
    /// What the model got back for its tool call.
    tool_output: String,
}

struct Fixture {
    _home: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    outside: PathBuf,
    _work_dir: tempfile::TempDir,
    _outside_dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let work_dir = tempfile::tempdir().unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let work = work_dir.path().canonicalize().unwrap();
    std::fs::create_dir(work.join(".git")).unwrap();
    Fixture {
        home: home.path().to_path_buf(),
        _home: home,
        work,
        outside: outside_dir.path().canonicalize().unwrap(),
        _work_dir: work_dir,
        _outside_dir: outside_dir,
    }
}

fn base_env() -> HashMap<String, String> {
    HashMap::from([
        ("MOCK_API_KEY".to_string(), "test-key".to_string()),
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOME".to_string(), "/nonexistent".to_string()),
        ("MY_SERVICE_TOKEN".to_string(), "hunter2-secret".to_string()),
        ("PLAIN_SETTING".to_string(), "visible-value".to_string()),
    ])
}

/// Run one turn in which the model makes exactly one tool call, answering any approval
/// request with `answer`.
async fn run_case(
    fx: &Fixture,
    policy: AskForApproval,
    sandbox: SandboxMode,
    tool: &str,
    arguments: serde_json::Value,
    answer: Answer,
) -> Outcome {
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_case", tool, &arguments.to_string()),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("finished"),
        chunk::finish("stop"),
    ]));
    std::fs::write(fx.home.join("config.toml"), mock.config_toml("", "", "")).unwrap();
    let config = load_config(ConfigInputs {
        home: fx.home.clone(),
        cwd: fx.work.clone(),
        profile: None,
        // Every directory here lives under /tmp, so the temp dirs must not be writable
        // roots, or "outside the workspace" would be writable too.
        cli_overrides: vec![
            (
                "sandbox_workspace_write.exclude_slash_tmp".to_string(),
                toml::Value::Boolean(true),
            ),
            (
                "sandbox_workspace_write.exclude_tmpdir_env_var".to_string(),
                toml::Value::Boolean(true),
            ),
        ],
        overrides: ConfigOverrides {
            approval_policy: Some(policy),
            sandbox_mode: Some(sandbox),
            ..Default::default()
        },
        strict: true,
        env: base_env(),
        sandbox_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_interpreter"))),
        ..Default::default()
    })
    .unwrap();

    let manager = ThreadManager::new();
    let thread = manager
        .start_thread(config, SessionSource::Exec)
        .await
        .unwrap()
        .thread;
    thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: "go".to_string(),
            }],
        })
        .await
        .unwrap();

    let mut asked = 0;
    loop {
        let event = tokio::time::timeout(DEADLINE, thread.next_event())
            .await
            .expect("event deadline")
            .expect("thread closed");
        let call_id = match &event.msg {
            EventMsg::ExecApprovalRequest(req) => Some(req.call_id.clone()),
            EventMsg::ApplyPatchApprovalRequest(req) => Some(req.call_id.clone()),
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_) => break,
            _ => None,
        };
        if let Some(id) = call_id {
            asked += 1;
            let Answer::Give(decision) = answer else {
                panic!("unexpected approval request {:?}", event.msg);
            };
            let op = match event.msg {
                EventMsg::ExecApprovalRequest(_) => Op::ExecApproval { id, decision },
                _ => Op::PatchApproval { id, decision },
            };
            thread.submit(op).await.unwrap();
        }
    }
    mock.assert_invariants();
    let requests = mock.requests();
    let tool_output = requests
        .get(1)
        .and_then(|req| req["messages"].as_array().cloned())
        .and_then(|messages| {
            messages
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .and_then(|m| m["content"].as_str().map(str::to_string))
        })
        .unwrap_or_default();
    Outcome { asked, tool_output }
}

fn shell(command: &str) -> serde_json::Value {
    json!({ "command": command })
}

fn escalated(command: &str) -> serde_json::Value {
    json!({ "command": command, "sandbox_permissions": "require_escalated", "justification": "needs it" })
}

fn add_file_patch(path: &Path) -> serde_json::Value {
    json!({ "input": format!("*** Begin Patch\n*** Add File: {}\n+content\n*** End Patch", path.display()) })
}

use AskForApproval::{Never, OnFailure, OnRequest, Untrusted};
use SandboxMode::{DangerFullAccess, ReadOnly, WorkspaceWrite};

#[tokio::test]
async fn untrusted_asks_before_writes_and_obeys_the_answer() {
    let fx = fixture();
    let out = run_case(
        &fx,
        Untrusted,
        WorkspaceWrite,
        "shell",
        shell("touch approved.txt"),
        Answer::Give(ReviewDecision::Approved),
    )
    .await;
    assert_eq!(out.asked, 1);
    assert!(fx.work.join("approved.txt").exists(), "{out:?}");

    let out = run_case(
        &fx,
        Untrusted,
        WorkspaceWrite,
        "shell",
        shell("touch denied.txt"),
        Answer::Give(ReviewDecision::Denied),
    )
    .await;
    assert_eq!(out.asked, 1);
    assert!(!fx.work.join("denied.txt").exists());
    assert!(out.tool_output.contains("declined"), "{out:?}");

    // Known-safe read-only commands run without asking.
    let out = run_case(
        &fx,
        Untrusted,
        WorkspaceWrite,
        "shell",
        shell("ls"),
        Answer::NoneExpected,
    )
    .await;
    assert_eq!(out.asked, 0);
}

#[tokio::test]
async fn on_request_runs_sandboxed_and_asks_only_to_escalate() {
    let fx = fixture();
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "shell",
        shell("touch inside.txt && mkdir -p target/debug"),
        Answer::NoneExpected,
    )
    .await;
    assert_eq!(out.asked, 0);
    assert!(fx.work.join("inside.txt").exists(), "{out:?}");
    assert!(fx.work.join("target/debug").is_dir(), "{out:?}");

    let outside = fx.outside.join("blocked.txt");
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "shell",
        shell(&format!("touch {}", outside.display())),
        Answer::NoneExpected,
    )
    .await;
    assert_eq!(out.asked, 0);
    assert!(!outside.exists());

    let escalated_path = fx.outside.join("escalated.txt");
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "shell",
        escalated(&format!("touch {}", escalated_path.display())),
        Answer::Give(ReviewDecision::Approved),
    )
    .await;
    assert_eq!(out.asked, 1);
    assert!(escalated_path.exists(), "{out:?}");

    // .git stays read-only inside the workspace.
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "shell",
        shell("mkdir -p .git/hooks && echo x > .git/hooks/pre-commit"),
        Answer::NoneExpected,
    )
    .await;
    assert!(!fx.work.join(".git/hooks/pre-commit").exists(), "{out:?}");
}

#[tokio::test]
async fn on_failure_offers_an_unsandboxed_retry() {
    let fx = fixture();
    let outside = fx.outside.join("retried.txt");
    let out = run_case(
        &fx,
        OnFailure,
        WorkspaceWrite,
        "shell",
        shell(&format!("touch {}", outside.display())),
        Answer::Give(ReviewDecision::Approved),
    )
    .await;
    assert_eq!(out.asked, 1, "{out:?}");
    assert!(outside.exists());
}

#[tokio::test]
async fn never_refuses_what_would_need_approval() {
    let fx = fixture();
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "shell",
        shell("touch ok.txt"),
        Answer::NoneExpected,
    )
    .await;
    assert!(fx.work.join("ok.txt").exists(), "{out:?}");

    let outside = fx.outside.join("never.txt");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "shell",
        escalated(&format!("touch {}", outside.display())),
        Answer::NoneExpected,
    )
    .await;
    assert_eq!(out.asked, 0);
    assert!(!outside.exists());
    assert!(out.tool_output.contains("rejected"), "{out:?}");

    let patched = fx.outside.join("patched.txt");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&patched),
        Answer::NoneExpected,
    )
    .await;
    assert!(!patched.exists());
    assert!(out.tool_output.contains("rejected"), "{out:?}");
}

#[tokio::test]
async fn read_only_blocks_writes_everywhere() {
    let fx = fixture();
    let out = run_case(
        &fx,
        Never,
        ReadOnly,
        "shell",
        shell("touch ro.txt; touch /tmp/interpreter-ro-probe-$$"),
        Answer::NoneExpected,
    )
    .await;
    assert!(!fx.work.join("ro.txt").exists(), "{out:?}");
    assert!(
        out.tool_output.contains("ermission denied") || out.tool_output.contains("Read-only"),
        "{out:?}"
    );
}

#[tokio::test]
async fn patches_outside_the_roots_ask_and_inside_apply() {
    let fx = fixture();
    let inside = fx.work.join("in_patch.txt");
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&inside),
        Answer::NoneExpected,
    )
    .await;
    assert_eq!(out.asked, 0);
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "content\n");

    let outside = fx.outside.join("out_patch.txt");
    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&outside),
        Answer::Give(ReviewDecision::Denied),
    )
    .await;
    assert_eq!(out.asked, 1);
    assert!(!outside.exists());

    let out = run_case(
        &fx,
        OnRequest,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&outside),
        Answer::Give(ReviewDecision::Approved),
    )
    .await;
    assert_eq!(out.asked, 1);
    assert!(outside.exists());

    // A symlink inside the workspace that points outside does not make a path writable.
    let link = fx.work.join("escape");
    std::os::unix::fs::symlink(&fx.outside, &link).unwrap();
    let via_link = link.join("via_link.txt");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&via_link),
        Answer::NoneExpected,
    )
    .await;
    assert!(!fx.outside.join("via_link.txt").exists(), "{out:?}");

    let git_hook = fx.work.join(".git/hooks/post-checkout");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&git_hook),
        Answer::NoneExpected,
    )
    .await;
    assert!(!git_hook.exists(), "{out:?}");

    let out = run_case(
        &fx,
        Untrusted,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&fx.work.join("asked.txt")),
        Answer::Give(ReviewDecision::Approved),
    )
    .await;
    assert_eq!(out.asked, 1);
}

#[tokio::test]
async fn full_access_runs_everything_without_a_sandbox() {
    let fx = fixture();
    let outside = fx.outside.join("free.txt");
    let out = run_case(
        &fx,
        Never,
        DangerFullAccess,
        "shell",
        shell(&format!(
            "touch {} && echo hook > .git/hook-test",
            outside.display()
        )),
        Answer::NoneExpected,
    )
    .await;
    assert!(outside.exists(), "{out:?}");
    assert!(fx.work.join(".git/hook-test").exists());
}

#[tokio::test]
async fn secrets_do_not_reach_commands_by_default() {
    let fx = fixture();
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "shell",
        shell("env"),
        Answer::NoneExpected,
    )
    .await;
    assert!(out.tool_output.contains("visible-value"), "{out:?}");
    assert!(!out.tool_output.contains("hunter2-secret"), "{out:?}");
    assert!(!out.tool_output.contains("test-key"), "{out:?}");
}

/// The agent's home is never writable, even when it lies inside the workspace: neither a
/// sandboxed command nor apply_patch may change the configuration the agent starts with.
/// A patch cannot start a repository anywhere in the workspace either: a `.git` file
/// (`gitdir: …`) in a new subdirectory is refused like the workspace's own `.git`.
#[tokio::test]
async fn a_patch_cannot_plant_a_git_file_below_the_workspace() {
    let fx = fixture();
    let planted = fx.work.join("sub/new/.git");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&planted),
        Answer::NoneExpected,
    )
    .await;
    assert!(!planted.exists(), "{out:?}");
    assert!(out.tool_output.contains("rejected"), "{out:?}");
}

#[tokio::test]
async fn the_agent_home_inside_the_workspace_is_never_writable() {
    let mut fx = fixture();
    let home = fx.work.join("agent-home");
    std::fs::create_dir(&home).unwrap();
    fx.home = home.clone();

    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "shell",
        shell("echo 'sandbox_mode = \"danger-full-access\"' >> agent-home/config.toml"),
        Answer::NoneExpected,
    )
    .await;
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(!config.contains("danger-full-access"), "{out:?}");

    // A profile file the agent would read with `--profile evil`.
    let profile = home.join("evil.config.toml");
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "apply_patch",
        add_file_patch(&profile),
        Answer::NoneExpected,
    )
    .await;
    assert!(!profile.exists());
    assert!(out.tool_output.contains("rejected"), "{out:?}");

    // The rest of the workspace stays writable.
    let out = run_case(
        &fx,
        Never,
        WorkspaceWrite,
        "shell",
        shell("touch beside-home.txt"),
        Answer::NoneExpected,
    )
    .await;
    assert!(fx.work.join("beside-home.txt").exists(), "{out:?}");
}
