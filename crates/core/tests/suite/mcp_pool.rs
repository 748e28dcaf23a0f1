//! Threads share the process's MCP servers: many threads configured with the same server
//! start it once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::ThreadManager;
use interpreter_core::config::{ConfigInputs, ConfigOverrides, load_config};
use interpreter_protocol::{
    AskForApproval, ElicitationAction, ElicitationResponse, EventMsg, McpStartupStatus, Op,
    ReviewDecision, SandboxMode, SessionSource, UserInput,
};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse};

const DEADLINE: Duration = Duration::from_secs(120);
const THREADS: usize = 50;

/// The `mock-mcp-server` binary of the test-support package, next to this test's
/// `deps/` directory; built when missing.
fn mock_mcp_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("mock-mcp-server");
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "interpreter-test-support",
                "--bin",
                "mock-mcp-server",
            ])
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building mock-mcp-server failed");
    }
    path
}

fn config(
    home: &Path,
    cwd: &Path,
    mock: &MockModelServer,
    log: &Path,
) -> interpreter_core::config::Config {
    config_with(home, cwd, mock, log, "", AskForApproval::Never)
}

/// `extra` is appended to the `[mcp_servers.mock]` table.
fn config_with(
    home: &Path,
    cwd: &Path,
    mock: &MockModelServer,
    log: &Path,
    extra: &str,
    policy: AskForApproval,
) -> interpreter_core::config::Config {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
             name = \"mock\"\nbase_url = \"{}\"\nenv_key = \"MOCK_API_KEY\"\nstream_max_retries = 1\n\n\
             [mcp_servers.mock]\ncommand = \"{}\"\nstartup_timeout_sec = 60\n\
             env = {{ MOCK_MCP_LOG = \"{}\" }}\n{extra}",
            mock.base_url(),
            mock_mcp_server().display(),
            log.display()
        ),
    )
    .unwrap();
    load_config(ConfigInputs {
        home: home.to_path_buf(),
        cwd: cwd.to_path_buf(),
        profile: None,
        cli_overrides: Vec::new(),
        overrides: ConfigOverrides {
            approval_policy: Some(policy),
            sandbox_mode: Some(SandboxMode::DangerFullAccess),
            ephemeral: true,
            ..Default::default()
        },
        strict: true,
        env: HashMap::from([
            ("MOCK_API_KEY".to_string(), "test-key".to_string()),
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ]),
        sandbox_exe: None,
        ..Default::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_threads_calling_one_stdio_server_start_it_once() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = home.path().join("mock-mcp.log");
    let mock = MockModelServer::start().await.unwrap();
    // Every thread asks for one tool call, then ends with a text; which thread gets which
    // response does not matter: 50 calls and 50 answers in all.
    for i in 0..THREADS {
        mock.push(MockResponse::sse(vec![
            chunk::tool_call(
                0,
                &format!("call_{i}"),
                "mcp__mock__echo",
                &format!(r#"{{"text":"from-{i}"}}"#),
            ),
            chunk::finish("tool_calls"),
        ]));
    }
    for _ in 0..THREADS {
        mock.push(MockResponse::sse(vec![
            chunk::text("done"),
            chunk::finish("stop"),
        ]));
    }

    let manager = Arc::new(ThreadManager::new());
    let runs = (0..THREADS).map(|_| {
        let manager = manager.clone();
        let cfg = config(home.path(), work.path(), &mock, &log);
        async move {
            let new = manager
                .start_thread(cfg, SessionSource::Exec)
                .await
                .unwrap();
            new.thread
                .submit(Op::UserInput {
                    items: vec![UserInput::Text {
                        text: "call the tool".to_string(),
                    }],
                })
                .await
                .unwrap();
            let mut events = Vec::new();
            loop {
                let event = tokio::time::timeout(DEADLINE, new.thread.next_event())
                    .await
                    .expect("event deadline")
                    .expect("thread closed");
                let done = matches!(event.msg, EventMsg::TaskComplete(_));
                events.push(event.msg);
                if done {
                    return events;
                }
            }
        }
    });
    let all = futures::future::join_all(runs).await;

    let calls: usize = all
        .iter()
        .flatten()
        .filter(|m| matches!(m, EventMsg::McpToolCallEnd(e) if e.result.is_ok()))
        .count();
    assert_eq!(calls, THREADS);
    let ready = all
        .iter()
        .flatten()
        .filter(|m| {
            matches!(m, EventMsg::McpStartupUpdate(u)
                if u.server == "mock" && matches!(u.status, McpStartupStatus::Ready { .. }))
        })
        .count();
    assert_eq!(ready, THREADS, "every thread is told the server is ready");
    let started = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(started, 1, "one server process for all threads");
    manager.shutdown_all(Duration::from_secs(10)).await;
    assert!(manager.mcp_pool().is_empty());
}

#[tokio::test]
async fn a_servers_question_is_an_event_and_the_answer_an_op() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = home.path().join("mock-mcp.log");
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_ask",
            "mcp__mock__ask",
            r#"{"message":"your name?"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("thanks"),
        chunk::finish("stop"),
    ]));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, &log),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    new.thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: "ask me".to_string(),
            }],
        })
        .await
        .unwrap();
    let mut result = None;
    loop {
        let event = tokio::time::timeout(DEADLINE, new.thread.next_event())
            .await
            .expect("event deadline")
            .expect("thread closed");
        match event.msg {
            EventMsg::ElicitationRequest(request) => {
                assert_eq!(request.server, "mock");
                assert_eq!(
                    request.request["message"],
                    "MCP server `mock` asks: your name?"
                );
                new.thread
                    .submit(Op::ResolveElicitation {
                        id: request.id,
                        response: ElicitationResponse {
                            action: ElicitationAction::Accept,
                            content: Some(serde_json::json!({"name": "Ada"})),
                        },
                    })
                    .await
                    .unwrap();
            }
            EventMsg::McpToolCallEnd(end) => result = Some(end.result),
            EventMsg::TaskComplete(_) => break,
            _ => {}
        }
    }
    let result = result.expect("the call ended").expect("the call succeeded");
    assert!(result.to_string().contains("Ada"), "{result}");
    manager.shutdown_all(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn approval_modes_per_server_and_per_tool() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = home.path().join("mock-mcp.log");
    let mock = MockModelServer::start().await.unwrap();
    // echo: the per-tool `never` wins over the server's `always`; add: asked, declined.
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_echo", "mcp__mock__echo", r#"{"text":"free"}"#),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_add", "mcp__mock__add", r#"{"a":1,"b":2}"#),
        chunk::finish("tool_calls"),
    ]));
    mock.push(MockResponse::sse(vec![
        chunk::text("done"),
        chunk::finish("stop"),
    ]));
    let manager = ThreadManager::new();
    let cfg = config_with(
        home.path(),
        work.path(),
        &mock,
        &log,
        "approval = \"always\"\n[mcp_servers.mock.tools.echo]\napproval = \"never\"\n",
        AskForApproval::OnRequest,
    );
    let new = manager
        .start_thread(cfg, SessionSource::Exec)
        .await
        .unwrap();
    new.thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: "go".to_string(),
            }],
        })
        .await
        .unwrap();
    let mut asked = Vec::new();
    loop {
        let event = tokio::time::timeout(DEADLINE, new.thread.next_event())
            .await
            .expect("event deadline")
            .expect("thread closed");
        match event.msg {
            EventMsg::ExecApprovalRequest(request) => {
                asked.push(request.command.join(" "));
                new.thread
                    .submit(Op::ExecApproval {
                        id: request.call_id,
                        decision: ReviewDecision::Denied,
                    })
                    .await
                    .unwrap();
            }
            EventMsg::TaskComplete(_) => break,
            _ => {}
        }
    }
    assert_eq!(asked, [r#"mcp:mock/add {"a":1,"b":2}"#]);
    let requests = mock.requests();
    assert!(requests[1].to_string().contains("free"), "echo ran");
    assert!(
        requests[2]
            .to_string()
            .contains("this MCP tool call was declined"),
        "{}",
        requests[2]
    );
    manager.shutdown_all(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn an_interrupt_cancels_the_call_at_the_server() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = home.path().join("mock-mcp.log");
    let mock = MockModelServer::start().await.unwrap();
    mock.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_sleep", "mcp__mock__sleep", r#"{"ms":30000}"#),
        chunk::finish("tool_calls"),
    ]));
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(home.path(), work.path(), &mock, &log),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    new.thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: "sleep".to_string(),
            }],
        })
        .await
        .unwrap();
    loop {
        let event = tokio::time::timeout(DEADLINE, new.thread.next_event())
            .await
            .expect("event deadline")
            .expect("thread closed");
        match event.msg {
            EventMsg::McpToolCallBegin(_) => {
                // Interrupt once the server is in the call, so there is a call to cancel.
                wait_for_line(&log, "sleeping 30000").await;
                new.thread.submit(Op::Interrupt).await.unwrap();
            }
            EventMsg::TurnAborted(_) => break,
            _ => {}
        }
    }
    // The server logs the cancellation when it receives it.
    wait_for_line(&log, "cancelled sleep 30000").await;
    manager.shutdown_all(Duration::from_secs(10)).await;
}

/// Polls (bounded) until the mock server's log has `line`.
async fn wait_for_line(log: &Path, line: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().any(|l| l == line) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mock server never logged `{line}`: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
