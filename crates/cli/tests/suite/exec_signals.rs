//! `interpreter exec` stopped by a signal mid-command: SIGTERM, SIGINT and SIGHUP each
//! interrupt the turn, kill the command, record the interruption in the rollout and
//! exit 1 — nothing of the turn keeps running.

use std::time::Duration;

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);

fn alive(pid: i32) -> bool {
    // A zombie still has a /proc entry; only a live process has a non-Z state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}

async fn stop_mid_command(signal: &str) {
    let env = TestEnv::new().await;
    let arguments = json!({"command": "echo $$ > sleeper.pid; exec sleep 120"}).to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_sleep", "shell", &arguments),
        chunk::finish("tool_calls"),
    ]));
    let command = env.command(&[
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-s",
        "danger-full-access",
        "sleep for a while",
    ]);
    let mut exec = JsonLinesProcess::spawn(command).unwrap();
    // A piped stdin would be read as more prompt; close it.
    exec.close_stdin();
    let started = exec
        .read_until(DEADLINE, |e| {
            e["type"] == "item.started" && e["item"]["type"] == "command_execution"
        })
        .await
        .unwrap();
    assert!(started["item"]["command"].as_str().is_some());
    let pid_file = env.work_path().join("sleeper.pid");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let sleeper: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "no pid file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &exec.pid().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Found with the Codex SDK: an interrupted `--json` run ended with no terminal line.
    let failed = exec
        .read_until(DEADLINE, |e| e["type"] == "turn.failed")
        .await
        .unwrap();
    assert_eq!(failed["error"]["message"], "turn interrupted", "{failed}");
    let exit = exec.wait_exit(DEADLINE).await.unwrap();
    assert_eq!(exit.code(), Some(1), "{}", exec.stderr());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while alive(sleeper) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command outlived exec after SIG{signal}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let thread = std::fs::read_dir(env.home.path().join("sessions"))
        .map(|_| ())
        .ok();
    assert!(thread.is_some());
    let rollout = walk_rollouts(env.home.path());
    assert!(
        rollout.contains("turn_aborted"),
        "the interruption is recorded: {rollout}"
    );
}

fn walk_rollouts(dir: &std::path::Path) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                text.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    text
}

#[tokio::test]
async fn sigterm_interrupts_records_and_kills_the_command() {
    stop_mid_command("TERM").await;
}

#[tokio::test]
async fn sigint_interrupts_records_and_kills_the_command() {
    stop_mid_command("INT").await;
}

#[tokio::test]
async fn sighup_interrupts_records_and_kills_the_command() {
    stop_mid_command("HUP").await;
}
