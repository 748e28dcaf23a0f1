//! Shared harness for the `interpreter acp` process tests: a fresh home and project
//! directory, the mock model, and a raw ACP client over the real binary's stdio in which
//! every read has a deadline.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use interpreter_test_support::{MockModelServer, MockResponse};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Generous: a debug build on a loaded 2-core machine. Only a hang reaches it.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) struct AcpEnv {
    pub home: TempDir,
    pub work: TempDir,
    pub model: MockModelServer,
}

impl AcpEnv {
    pub(crate) async fn new() -> Self {
        let model = MockModelServer::start().await.expect("start mock model");
        let env = Self {
            home: TempDir::new().expect("home"),
            work: TempDir::new().expect("work"),
            model,
        };
        std::fs::write(
            env.home.path().join("config.toml"),
            env.model
                .config_toml("", MockModelServer::CHAT_NO_RETRIES, ""),
        )
        .expect("write config");
        env
    }

    pub(crate) fn work_path(&self) -> PathBuf {
        std::fs::canonicalize(self.work.path()).expect("canonical work dir")
    }

    pub(crate) fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
        command
            .arg("acp")
            .current_dir(self.work_path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("INTERPRETER_HOME", self.home.path())
            .env("MOCK_API_KEY", "test-key")
            .env("RUST_LOG", "info");
        command
    }

    /// `interpreter acp`, not yet initialized.
    pub(crate) fn spawn(&self) -> AcpClient {
        AcpClient::spawn(self.command())
    }

    /// `interpreter acp` with this home and project, for a test that dropped the model.
    pub(crate) fn spawn_from(home: &TempDir, work: &TempDir) -> AcpClient {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
        command
            .arg("acp")
            .current_dir(work.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("INTERPRETER_HOME", home.path())
            .env("RUST_LOG", "info");
        AcpClient::spawn(command)
    }

    /// `interpreter acp`, initialized.
    pub(crate) async fn start(&self) -> AcpClient {
        self.start_with(json!({})).await
    }

    /// `interpreter acp`, initialized by an editor that declares `capabilities`.
    pub(crate) async fn start_with(&self, capabilities: Value) -> AcpClient {
        let mut client = self.spawn();
        let result = client
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await;
        assert_eq!(result["protocolVersion"], 1, "{result}");
        client
    }

    /// The `n`th request the model got, as JSON text (empty when there was none).
    pub(crate) fn model_request(&self, n: usize) -> String {
        self.model
            .requests()
            .get(n)
            .map(Value::to_string)
            .unwrap_or_default()
    }

    /// Script: run `command` through the shell tool, then answer `final_text`.
    pub(crate) fn script_command_then_text(&self, call_id: &str, command: &str, final_text: &str) {
        self.script_command(call_id, command);
        self.script_text(final_text);
    }

    pub(crate) fn script_command(&self, call_id: &str, command: &str) {
        let arguments = json!({"command": command}).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "shell", &arguments),
            chunk::finish("tool_calls"),
            chunk::usage(10, 5),
        ]));
    }

    /// Script: add `file` with one line through apply_patch.
    pub(crate) fn script_patch(&self, call_id: &str, file: &str) {
        self.script_apply_patch(
            call_id,
            &format!("*** Begin Patch\n*** Add File: {file}\n+hi\n*** End Patch\n"),
        );
    }

    /// Script: the model calls apply_patch with `patch`.
    pub(crate) fn script_apply_patch(&self, call_id: &str, patch: &str) {
        let arguments = json!({ "input": patch }).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "apply_patch", &arguments),
            chunk::finish("tool_calls"),
        ]));
    }

    pub(crate) fn script_text(&self, text: &str) {
        self.model.push(MockResponse::sse(vec![
            chunk::text(text),
            chunk::finish("stop"),
        ]));
    }

    /// Script: an answer streamed in `pieces`.
    pub(crate) fn script_streamed_text(&self, pieces: &[&str]) {
        let mut chunks: Vec<Value> = pieces.iter().map(|p| chunk::text(p)).collect();
        chunks.push(chunk::finish("stop"));
        self.model.push(MockResponse::sse(chunks));
    }
}

pub(crate) struct AcpClient {
    pub process: JsonLinesProcess,
    /// Messages read past while waiting for something else, in order.
    pub seen: Vec<Value>,
    next_id: i64,
}

impl AcpClient {
    fn spawn(command: tokio::process::Command) -> Self {
        let process = JsonLinesProcess::spawn(command).expect("spawn interpreter acp");
        Self {
            process,
            seen: Vec::new(),
            next_id: 1,
        }
    }

    pub(crate) fn stderr(&self) -> String {
        self.process.stderr()
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.process.write_json(&message).await.expect("write");
    }

    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) {
        self.process.write_raw(bytes).await.expect("write raw");
    }

    /// The next message from the agent (the deadline fails the test).
    pub(crate) async fn read(&mut self) -> Value {
        match self.process.read_json(READ_DEADLINE).await {
            Ok(message) => message,
            Err(e) => panic!("no message from the agent: {e}\nstderr:\n{}", self.stderr()),
        }
    }

    /// Send a request; returns its id.
    pub(crate) async fn send_request(&mut self, method: &str, params: Value) -> i64 {
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

    /// The response to `id`, read now or earlier (responses to concurrent requests can
    /// come in any order); other messages read on the way are kept in `seen`.
    pub(crate) async fn response(&mut self, id: i64) -> Value {
        let is_it = |message: &Value| message["id"] == id && message.get("method").is_none();
        if let Some(at) = self.seen.iter().position(is_it) {
            return self.seen.remove(at);
        }
        loop {
            let message = self.read().await;
            if is_it(&message) {
                return message;
            }
            self.seen.push(message);
        }
    }

    /// A request's result; panics on an error answer.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        let response = self.response(id).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// Read until a message matches `pred` (kept out of `seen`).
    pub(crate) async fn read_until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.read().await;
            if pred(&message) {
                return message;
            }
            self.seen.push(message);
        }
    }

    /// Answer an agent→client request.
    pub(crate) async fn answer(&mut self, request: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
            .await;
    }

    pub(crate) async fn set_mode(&mut self, session: &str, mode: &str) {
        self.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
        .await;
    }

    /// Send a text prompt; returns the request id (the answer comes later).
    pub(crate) async fn send_prompt(&mut self, session: &str, text: &str) -> i64 {
        self.send_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Answer a permission request with one of its options.
    pub(crate) async fn choose(&mut self, ask: &Value, option: &str) {
        self.answer(
            ask,
            json!({"outcome": {"outcome": "selected", "optionId": option}}),
        )
        .await;
    }

    pub(crate) async fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let result = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        result["sessionId"].as_str().expect("sessionId").to_string()
    }

    /// The `update` objects of the `session/update`s seen for `session`.
    pub(crate) fn updates(&self, session: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    pub(crate) fn take_seen(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.seen)
    }
}

/// The concatenated text of `kind` chunks (`agent_message_chunk`, …) among `updates`.
pub(crate) fn text_of(updates: &[Value], kind: &str) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The updates about tool call `id`, in order.
pub(crate) fn tool_updates<'a>(updates: &'a [Value], id: &str) -> Vec<&'a Value> {
    updates.iter().filter(|u| u["toolCallId"] == id).collect()
}

pub(crate) fn is_permission_request(message: &Value) -> bool {
    message["method"] == "session/request_permission"
}

/// Whether the process with this pid is gone (or a zombie).
pub(crate) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
