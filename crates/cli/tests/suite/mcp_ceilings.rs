//! The operator's ceilings on `interpreter mcp-server`, attacked through the real binary
//! by a caller that wants more than it was given: a sandbox above `[mcp_server]
//! max_sandbox` (by argument, by `config`, by network), a program of its own in
//! `config`, an approved escalation out of the sandbox, and the same through the
//! app-server methods on the MCP connection (a thread, a write to config.toml).

use crate::mcp_support;

use crate::mcp_support::{McpClient, McpEnv, assert_valid_result};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::{Value, json};

const MAX_WORKSPACE_WRITE: &str = "mcp_server.max_sandbox = \"workspace-write\"";

fn text_of(result: &Value) -> String {
    result["structuredContent"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn client_of(env: &McpEnv) -> McpClient {
    let mut client = env.spawn();
    client.initialize_with_elicitation().await;
    client
}

/// A call asking for more than `max_sandbox` (by its `config`, its `sandbox` argument,
/// or network access the operator's workspace-write lacks) is refused with an error
/// naming the key, before anything runs: the model is never asked, the command it was
/// scripted to run never runs. A call at the ceiling runs.
#[tokio::test]
async fn adversarial_a_call_above_max_sandbox_is_refused_and_runs_nothing() {
    let env = McpEnv::with_config(MAX_WORKSPACE_WRITE).await;
    env.script_command_then_text("call_escape", "touch escaped.txt", "done");
    let mut client = client_of(&env).await;
    client
        .wait_for_stderr("calls may run at most `workspace-write, no network` (mcp_server.max_sandbox = \"workspace-write\")")
        .await;
    for (attempt, arguments) in [
        (
            "config sandbox_mode",
            json!({"prompt": "escape", "approval-policy": "never", "config": {"sandbox_mode": "danger-full-access"}}),
        ),
        (
            "sandbox argument",
            json!({"prompt": "escape", "approval-policy": "never", "sandbox": "danger-full-access"}),
        ),
        (
            "network",
            json!({"prompt": "escape", "approval-policy": "never", "sandbox": "workspace-write",
                   "config": {"sandbox_workspace_write": {"network_access": true}}}),
        ),
    ] {
        let result = client.tool("codex", arguments).await;
        assert_eq!(result["isError"], true, "{attempt}: {result}");
        let text = text_of(&result);
        assert!(text.starts_with("Refused: "), "{attempt}: {text}");
        assert!(text.contains("mcp_server.max_sandbox"), "{attempt}: {text}");
    }
    assert!(
        env.model.requests().is_empty(),
        "a refused call reached the model"
    );
    assert!(!env.work_path().join("escaped.txt").exists());

    let result = client
        .tool(
            "codex",
            json!({"prompt": "within", "approval-policy": "never", "sandbox": "workspace-write"}),
        )
        .await;
    assert_valid_result(&result);
    assert_eq!(result["isError"], false, "{result}");
    assert!(env.work_path().join("escaped.txt").exists());
}

/// A call whose `config` adds an MCP server (a program the agent would start outside
/// the sandbox), however the key is written, or a loader variable for the sandbox
/// helper, is refused naming `mcp_server.allow_caller_programs`, and the program never
/// runs. With the key set, the same call starts it, which is what the rule stops.
#[tokio::test]
async fn adversarial_a_call_adding_a_program_is_refused_naming_allow_caller_programs() {
    let env = McpEnv::new().await;
    let marker = env.work_path().join("program-ran");
    let touch = format!("touch {}", marker.display());
    let mut client = client_of(&env).await;
    for (attempt, config) in [
        (
            "dotted keys",
            json!({"mcp_servers.x.command": "sh", "mcp_servers.x.args": ["-c", touch]}),
        ),
        (
            "a table",
            json!({"mcp_servers": {"x": {"command": "sh", "args": ["-c", touch]}}}),
        ),
        (
            "a loader variable",
            json!({"shell_environment_policy.set.LD_PRELOAD": "/tmp/evil.so"}),
        ),
    ] {
        let result = client
            .tool("codex", json!({"prompt": "hi", "config": config}))
            .await;
        assert_eq!(result["isError"], true, "{attempt}: {result}");
        let text = text_of(&result);
        assert!(
            text.contains("mcp_server.allow_caller_programs"),
            "{attempt}: {text}"
        );
    }
    assert!(env.model.requests().is_empty());
    assert!(!marker.exists(), "the caller's program ran");

    let allowed = McpEnv::with_config("mcp_server.allow_caller_programs = true").await;
    allowed.script_text("hello");
    let marker = allowed.work_path().join("program-ran");
    let touch = format!("touch {}", marker.display());
    let mut client = client_of(&allowed).await;
    let result = client
        .tool(
            "codex",
            json!({"prompt": "hi", "approval-policy": "never",
                   "config": {"mcp_servers.x.command": "sh", "mcp_servers.x.args": ["-c", touch]}}),
        )
        .await;
    assert_valid_result(&result);
    let deadline = tokio::time::Instant::now() + mcp_support::READ_DEADLINE;
    while !marker.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "with allow_caller_programs the program never ran: {result}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The model asks to run a command outside the sandbox and the caller would approve
/// anything; under `max_sandbox = "workspace-write"` the command is rejected without
/// asking, so no approval can lift the thread above the ceiling. Without the ceiling the
/// same turn asks.
#[tokio::test]
async fn adversarial_an_escalation_is_not_even_asked_under_the_ceiling() {
    let escalate = |env: &McpEnv, marker: &std::path::Path| {
        let arguments = json!({
            "command": format!("touch {}", marker.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "needs to write outside",
        })
        .to_string();
        env.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, "call_out", "shell", &arguments),
            chunk::finish("tool_calls"),
        ]));
        env.script_text("done");
    };
    let arguments =
        json!({"prompt": "go", "approval-policy": "on-request", "sandbox": "workspace-write"});

    let env = McpEnv::with_config(MAX_WORKSPACE_WRITE).await;
    // The home is protected: no sandboxed command writes there.
    let marker = env.home.path().join("escaped");
    escalate(&env, &marker);
    let mut client = client_of(&env).await;
    let result = client.tool("codex", arguments.clone()).await;
    assert_valid_result(&result);
    assert!(
        !client
            .take_seen()
            .iter()
            .any(|m| m["method"] == "elicitation/create"),
        "the escalation was put to the caller"
    );
    let told = env
        .model
        .requests()
        .last()
        .map(Value::to_string)
        .unwrap_or_default();
    assert!(told.contains("command rejected"), "{told}");
    assert!(told.contains("mcp_server.max_sandbox"), "{told}");
    assert!(!marker.exists());

    let open = McpEnv::new().await;
    let marker = open.home.path().join("escaped");
    escalate(&open, &marker);
    let mut client = client_of(&open).await;
    let id = client.start_tool("codex", arguments).await;
    let question = client.server_request("elicitation/create").await;
    client
        .respond(&question["id"], json!({"action": "decline"}))
        .await;
    client.response(id).await;
}

/// The app-server methods on the same connection are held to the same limits: a
/// `thread/start` above the ceiling is refused, and a caller cannot write config.toml
/// to add a program or to move the ceiling for the next start.
#[tokio::test]
async fn adversarial_the_app_server_methods_on_the_connection_keep_the_ceilings() {
    let env = McpEnv::with_config(MAX_WORKSPACE_WRITE).await;
    let config_path = env.home.path().join("config.toml");
    let before = std::fs::read_to_string(&config_path).unwrap();
    let mut client = client_of(&env).await;

    let started = client
        .call(
            "thread/start",
            json!({"approvalPolicy": "never", "sandbox": "danger-full-access"}),
        )
        .await;
    let message = started["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mcp_server.max_sandbox"), "{started}");
    let started = client
        .call(
            "thread/start",
            json!({"config": {"mcp_servers.x.command": "sh"}}),
        )
        .await;
    let message = started["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("mcp_server.allow_caller_programs"),
        "{started}"
    );

    for (key, value, why) in [
        (
            "mcp_servers.x.command",
            json!("sh"),
            "mcp_server.allow_caller_programs",
        ),
        (
            "mcp_server.max_sandbox",
            json!("danger-full-access"),
            "the operator's",
        ),
        (
            "mcp_server.allow_caller_programs",
            json!(true),
            "the operator's",
        ),
        (
            "sandbox_mode",
            json!("danger-full-access"),
            "mcp_server.max_sandbox",
        ),
    ] {
        let written = client
            .call(
                "config/value/write",
                json!({"keyPath": key, "value": value, "mergeStrategy": "replace"}),
            )
            .await;
        let message = written["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{key}: {written}");
    }
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), before);
}
