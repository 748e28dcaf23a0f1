//! Cancellation and shutdown over raw JSON-RPC: `notifications/cancelled` interrupts the
//! turn and kills its command, sends no response, and leaves the thread usable; stdin EOF
//! interrupts running turns and exits.

use std::path::Path;
use std::time::Duration;

use crate::mcp_support::{McpEnv, READ_DEADLINE, assert_valid_result, thread_id};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::json;

/// Script a command that records its shell's pid, then sleeps.
fn script_sleeper(env: &McpEnv) {
    let arguments = json!({"command": "echo $$ > sleeper.pid; exec sleep 120"}).to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_sleep", "shell", &arguments),
        chunk::finish("tool_calls"),
    ]));
}

async fn wait_for_pid(dir: &Path) -> i32 {
    let file = dir.join("sleeper.pid");
    let end = tokio::time::Instant::now() + READ_DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(&file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn process_alive(pid: i32) -> bool {
    // Reading /proc keeps the test free of unsafe code; a zombie counts as gone.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

async fn wait_until_dead(pid: i32) {
    let end = tokio::time::Instant::now() + READ_DEADLINE;
    while process_alive(pid) {
        assert!(
            tokio::time::Instant::now() < end,
            "command {pid} still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn cancel_kills_the_command_sends_no_response_and_reply_works() {
    let env = McpEnv::new().await;
    script_sleeper(&env);
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let id = client
        .start_tool(
            "codex",
            json!({"prompt": "sleep", "sandbox": "danger-full-access", "approval-policy": "never"}),
        )
        .await;
    let configured = client
        .process
        .read_until(READ_DEADLINE, |m| {
            m["method"] == "codex/event" && m["params"]["msg"]["type"] == "session_configured"
        })
        .await
        .expect("session_configured event");
    let thread = configured["params"]["_meta"]["threadId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pid = wait_for_pid(&env.work_path()).await;
    assert!(process_alive(pid));

    client
        .notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "user pressed stop"}),
        )
        .await;
    wait_until_dead(pid).await;
    client
        .process
        .expect_none_within(Duration::from_secs(2), |m| {
            m["id"] == json!(id) && m.get("method").is_none()
        })
        .await
        .expect("no response for a cancelled request");

    env.script_text("Continuing after the interrupt.");
    let reply = client
        .tool(
            "codex-reply",
            json!({"threadId": thread, "prompt": "go on"}),
        )
        .await;
    assert_valid_result(&reply);
    assert_eq!(
        reply["structuredContent"]["content"], "Continuing after the interrupt.",
        "{reply}"
    );
    assert_eq!(thread_id(&reply), thread);
}

#[tokio::test]
async fn stdin_eof_interrupts_running_turns_and_exits() {
    let env = McpEnv::new().await;
    script_sleeper(&env);
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    client
        .start_tool(
            "codex",
            json!({"prompt": "sleep", "sandbox": "danger-full-access", "approval-policy": "never"}),
        )
        .await;
    let pid = wait_for_pid(&env.work_path()).await;
    client.process.close_stdin();
    // The server's own budget is under 2 s; the deadline here only catches a hang.
    let status = client
        .process
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("server exits after EOF with a turn running");
    assert!(status.success(), "{status:?}\n{}", client.process.stderr());
    wait_until_dead(pid).await;
}

/// SIGTERM, SIGINT and SIGHUP stop the server the way stdin EOF does: the running turn is
/// interrupted, its command killed, the interruption recorded, and the process exits 0.
async fn signal_stops_the_server(signal: &str) {
    let env = McpEnv::new().await;
    script_sleeper(&env);
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    client
        .start_tool(
            "codex",
            json!({"prompt": "sleep", "sandbox": "danger-full-access", "approval-policy": "never"}),
        )
        .await;
    let pid = wait_for_pid(&env.work_path()).await;
    let sent = std::process::Command::new("kill")
        .args([
            &format!("-{signal}"),
            &client.process.pid().unwrap().to_string(),
        ])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = client.process.wait_exit(READ_DEADLINE).await.unwrap();
    assert!(status.success(), "{status:?}\n{}", client.process.stderr());
    wait_until_dead(pid).await;
    let mut rollouts = String::new();
    let mut stack = vec![env.home.path().join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.path().is_dir() {
                stack.push(entry.path());
            } else {
                rollouts.push_str(&std::fs::read_to_string(entry.path()).unwrap());
            }
        }
    }
    assert!(rollouts.contains("turn_aborted"), "{rollouts}");
}

#[tokio::test]
async fn sigterm_interrupts_the_turn_and_exits() {
    signal_stops_the_server("TERM").await;
}

#[tokio::test]
async fn sigint_interrupts_the_turn_and_exits() {
    signal_stops_the_server("INT").await;
}

#[tokio::test]
async fn sighup_interrupts_the_turn_and_exits() {
    signal_stops_the_server("HUP").await;
}
