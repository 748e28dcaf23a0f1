//! Shared harness for the `interpreter mcp-server` process tests: a fresh home and work
//! directory, the mock model, and a raw JSON-RPC client over the real binary's stdio in
//! which every read has a deadline.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use interpreter_test_support::{MockModelServer, MockResponse};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Generous: a debug build on a loaded 2-core machine. Only a hang reaches it.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) struct McpEnv {
    pub home: TempDir,
    pub work: TempDir,
    pub model: MockModelServer,
}

impl McpEnv {
    pub(crate) async fn new() -> Self {
        Self::with_config("").await
    }

    /// The mock provider config plus `extra` appended at the end of config.toml.
    pub(crate) async fn with_config(extra: &str) -> Self {
        let model = MockModelServer::start().await.expect("start mock model");
        let env = Self {
            home: TempDir::new().expect("home"),
            work: TempDir::new().expect("work"),
            model,
        };
        std::fs::write(
            env.home.path().join("config.toml"),
            env.model
                .config_toml(extra, MockModelServer::CHAT_NO_RETRIES, ""),
        )
        .expect("write config");
        env
    }

    pub(crate) fn work_path(&self) -> PathBuf {
        std::fs::canonicalize(self.work.path()).expect("canonical work dir")
    }

    pub(crate) fn spawn(&self) -> McpClient {
        McpClient::spawn(self.home.path(), &self.work_path(), &[])
    }

    pub(crate) fn spawn_with_args(&self, args: &[&str]) -> McpClient {
        McpClient::spawn(self.home.path(), &self.work_path(), args)
    }

    /// Script: run `command` through the shell tool, then answer `final_text`.
    pub(crate) fn script_command_then_text(&self, call_id: &str, command: &str, final_text: &str) {
        let arguments = json!({"command": command}).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "shell", &arguments),
            chunk::finish("tool_calls"),
        ]));
        self.script_text(final_text);
    }

    pub(crate) fn script_text(&self, text: &str) {
        self.model.push(MockResponse::sse(vec![
            chunk::text(text),
            chunk::finish("stop"),
        ]));
    }
}

pub(crate) struct McpClient {
    pub process: JsonLinesProcess,
    next_id: i64,
}

impl McpClient {
    pub(crate) fn spawn(home: &Path, cwd: &Path, extra_args: &[&str]) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
        command
            .arg("mcp-server")
            .args(extra_args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("INTERPRETER_HOME", home)
            .env("MOCK_API_KEY", "test-key")
            .env("RUST_LOG", "info");
        Self {
            process: JsonLinesProcess::spawn(command).expect("spawn interpreter mcp-server"),
            next_id: 1,
        }
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.process.write_json(&message).await.expect("write");
    }

    /// Send a request; returns its id.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub(crate) async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// The response (result or error) to request `id`.
    pub(crate) async fn response(&mut self, id: i64) -> Value {
        let is_response = |m: &Value| m["id"] == json!(id) && m.get("method").is_none();
        if let Some(pos) = self.process.seen.iter().position(is_response) {
            return self.process.seen.remove(pos);
        }
        self.process
            .read_until(READ_DEADLINE, |m| {
                m["id"] == json!(id) && m.get("method").is_none()
            })
            .await
            .unwrap_or_else(|e| panic!("no response to {id}: {e:#}"))
    }

    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// The next server→client request (e.g. `elicitation/create`).
    pub(crate) async fn server_request(&mut self, method: &str) -> Value {
        self.process
            .read_until(READ_DEADLINE, |m| {
                m["method"] == method && m.get("id").is_some()
            })
            .await
            .unwrap_or_else(|e| panic!("no {method} request: {e:#}"))
    }

    pub(crate) async fn initialize(&mut self, capabilities: Value) -> Value {
        let response = self
            .call(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "raw-test", "version": "0.0.0"}
                }),
            )
            .await;
        self.notify("notifications/initialized", json!({})).await;
        response
    }

    pub(crate) async fn initialize_with_elicitation(&mut self) -> Value {
        self.initialize(json!({"elicitation": {}})).await
    }

    /// Start a `tools/call` with a progress token; returns its id.
    pub(crate) async fn start_tool(&mut self, name: &str, arguments: Value) -> i64 {
        let token = format!("progress-{}", self.next_id);
        self.request(
            "tools/call",
            json!({"name": name, "arguments": arguments, "_meta": {"progressToken": token}}),
        )
        .await
    }

    /// Run a tool call to its result.
    pub(crate) async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let id = self.start_tool(name, arguments).await;
        let response = self.response(id).await;
        response
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call failed: {response}"))
    }

    pub(crate) async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Wait (bounded) until the server's stderr, collected in the background, contains
    /// `needle`.
    pub(crate) async fn wait_for_stderr(&self, needle: &str) {
        let deadline = tokio::time::Instant::now() + READ_DEADLINE;
        while !self.process.stderr().contains(needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "stderr never said {needle:?}:\n{}",
                self.process.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Messages read past while waiting, then cleared.
    pub(crate) fn take_seen(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.process.seen)
    }
}

/// Check a tool result against the tools' `outputSchema` (object with string `threadId`
/// and `content`, both required), the text mirror, and, once a thread exists, the thread
/// id in a text block (for hosts that hand their model only text).
#[track_caller]
pub(crate) fn assert_valid_result(result: &Value) {
    let structured = result["structuredContent"]
        .as_object()
        .unwrap_or_else(|| panic!("no structuredContent: {result}"));
    assert!(structured["threadId"].is_string(), "{result}");
    assert!(structured["content"].is_string(), "{result}");
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    assert_eq!(
        result["content"][0]["text"], structured["content"],
        "{result}"
    );
    if structured["threadId"] != "" {
        let trailer: Value = result["content"][1]["text"]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        assert_eq!(trailer["threadId"], structured["threadId"], "{result}");
    }
}

pub(crate) fn thread_id(result: &Value) -> String {
    result["structuredContent"]["threadId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `notifications/progress` values for `token` among `messages`, in order.
pub(crate) fn progress_values(messages: &[Value], token: &str) -> Vec<f64> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
        })
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect()
}

pub(crate) fn codex_events(messages: &[Value], request_id: i64) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "codex/event" && m["params"]["_meta"]["requestId"] == json!(request_id)
        })
        .collect()
}
