//! `interpreter threads list|show` over the thread store: every front end's threads,
//! newest first; one thread rendered readably, including a long one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{Duration as ChronoDuration, Utc};
use interpreter_core::store::local::write_rollout;
use interpreter_core::store::{RolloutItem, SessionMeta};
use interpreter_protocol::{
    AgentMessageEvent, EventMsg, ExecCommandEndEvent, ExecCommandStatus, FileChange,
    PatchApplyEndEvent, SessionSource, TaskCompleteEvent, TaskStartedEvent, ThreadId,
    UserMessageEvent,
};
use serde_json::Value;

fn run(home: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .arg("threads")
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("INTERPRETER_HOME", home)
        .output()
        .expect("run interpreter threads")
}

fn meta(cwd: &Path, minutes_ago: i64, source: SessionSource) -> SessionMeta {
    SessionMeta {
        id: ThreadId::new(),
        timestamp: Utc::now() - ChronoDuration::minutes(minutes_ago),
        cwd: cwd.to_path_buf(),
        originator: "test".into(),
        cli_version: "0.0.0".into(),
        source,
        model_provider: Some("mock".into()),
        model: Some("mock-model".into()),
        base_instructions: None,
        forked_from_id: None,
    }
}

fn turn(n: usize, items: &mut Vec<RolloutItem>, cwd: &Path) {
    let id = (n + 1).to_string();
    let ev = |m| RolloutItem::EventMsg(m);
    items.push(ev(EventMsg::TaskStarted(TaskStartedEvent {
        turn_id: id.clone(),
        model_context_window: None,
    })));
    items.push(ev(EventMsg::UserMessage(UserMessageEvent {
        item_id: String::new(),
        message: format!("please do step {n}"),
    })));
    items.push(ev(EventMsg::ExecCommandEnd(ExecCommandEndEvent {
        parsed_cmd: Vec::new(),
        call_id: format!("call_{n}"),
        turn_id: id.clone(),
        command: vec!["bash".into(), "-lc".into(), format!("echo step {n}")],
        cwd: cwd.to_path_buf(),
        exit_code: Some(0),
        aggregated_output: format!("step {n}\n"),
        duration_ms: 3,
        status: ExecCommandStatus::Completed,
        source: Default::default(),
    })));
    let mut changes = BTreeMap::new();
    changes.insert(
        cwd.join(format!("file_{n}.txt")),
        FileChange::Add {
            content: "hello\n".into(),
        },
    );
    items.push(ev(EventMsg::PatchApplyEnd(PatchApplyEndEvent {
        call_id: format!("patch_{n}"),
        turn_id: id.clone(),
        stdout: String::new(),
        stderr: String::new(),
        success: true,
        changes,
    })));
    items.push(ev(EventMsg::AgentMessage(AgentMessageEvent {
        item_id: String::new(),
        message: format!("did step {n}"),
    })));
    items.push(ev(EventMsg::TaskComplete(TaskCompleteEvent {
        turn_id: id,
        last_agent_message: None,
        error: None,
        output_limit: false,
    })));
}

fn write_thread(
    home: &Path,
    cwd: &Path,
    minutes_ago: i64,
    source: SessionSource,
    turns: usize,
) -> (ThreadId, PathBuf) {
    let meta = meta(cwd, minutes_ago, source);
    let mut items = Vec::new();
    for n in 0..turns {
        turn(n, &mut items, cwd);
    }
    let path = write_rollout(home, &meta, &items).expect("write rollout");
    (meta.id, path)
}

#[test]
fn list_shows_every_front_end_newest_first_and_filters_by_cwd() {
    let home = tempfile::tempdir().expect("home");
    let a = tempfile::tempdir().expect("a");
    let b = tempfile::tempdir().expect("b");
    let a_dir = a.path().canonicalize().expect("a");
    let b_dir = b.path().canonicalize().expect("b");
    let (exec_id, exec_path) = write_thread(home.path(), &a_dir, 30, SessionSource::Exec, 1);
    let (mcp_id, mcp_path) = write_thread(home.path(), &b_dir, 20, SessionSource::Mcp, 1);
    let (app_id, app_path) = write_thread(home.path(), &a_dir, 10, SessionSource::AppServer, 1);
    // The index orders by last update (file modification time): make it deterministic.
    let now = std::time::SystemTime::now();
    for (path, ago) in [(&exec_path, 300), (&mcp_path, 200), (&app_path, 100)] {
        let file = std::fs::File::options()
            .append(true)
            .open(path)
            .expect("open");
        file.set_modified(now - std::time::Duration::from_secs(ago))
            .expect("mtime");
    }

    let out = run(home.path(), &a_dir, &["list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        vec![app_id.to_string(), mcp_id.to_string(), exec_id.to_string()]
    );
    assert_eq!(rows[1]["source"], "mcp");
    assert_eq!(rows[0]["preview"], "please do step 0");

    let out = run(home.path(), &a_dir, &["list", "--json", "--cwd", "."]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(rows.len(), 2);

    let out = run(home.path(), &a_dir, &["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&app_id.to_string()) && text.contains("please do step 0"),
        "{text}"
    );
}

#[test]
fn show_renders_messages_commands_and_patches_of_a_long_thread() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let dir = work.path().canonicalize().expect("work");
    // 200 turns × 5 items = 1,000 items.
    let (id, _) = write_thread(home.path(), &dir, 5, SessionSource::Exec, 200);
    let out = run(home.path(), &dir, &["show", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with(&format!("Thread {id}\n")), "{text}");
    assert!(text.contains("── Turn 1 (completed) ──"));
    assert!(text.contains("── Turn 200 (completed) ──"));
    assert!(text.contains("> please do step 199"));
    assert!(
        text.contains("$ bash -lc 'echo step 7'    [exit 0, 3 ms;"),
        "{}",
        &text[..2000.min(text.len())]
    );
    assert!(text.contains("  │ step 7"));
    assert!(text.contains("~ patch applied"));
    assert!(text.contains(&format!("  A {}", dir.join("file_42.txt").display())));
    assert!(text.contains("did step 150"));

    let missing = run(home.path(), &dir, &["show", &ThreadId::new().to_string()]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no thread"));
}
