//! Shared harness for the `interpreter app-server` process tests: a fresh home and work
//! directory, the mock model, and a raw JSON-RPC client over the real binary's stdio, a
//! WebSocket or a Unix socket, in which every read has a deadline.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use interpreter_test_support::{MockModelServer, MockResponse};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::Message;

/// Generous: a debug build on a loaded 2-core machine. Only a hang reaches it.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) struct AppEnv {
    pub home: TempDir,
    pub work: TempDir,
    pub model: MockModelServer,
}

impl AppEnv {
    pub(crate) async fn new() -> Self {
        Self::with_config("").await
    }

    /// The mock provider config plus `extra` (top-level keys) in config.toml.
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

    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
        command
            .arg("app-server")
            .args(args)
            .current_dir(self.work_path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("INTERPRETER_HOME", self.home.path())
            .env("MOCK_API_KEY", "test-key")
            .env("RUST_LOG", "info");
        command
    }

    /// `interpreter app-server` on stdio.
    pub(crate) fn spawn(&self) -> AppClient {
        self.spawn_with_args(&[])
    }

    pub(crate) fn spawn_with_args(&self, args: &[&str]) -> AppClient {
        self.spawn_command(self.command(args))
    }

    /// A stdio client of the server `command` starts (from [`Self::command`], adjusted).
    pub(crate) fn spawn_command(&self, command: tokio::process::Command) -> AppClient {
        let process = JsonLinesProcess::spawn(command).expect("spawn app-server");
        AppClient {
            wire: Wire::Stdio(Box::new(process)),
            seen: Vec::new(),
            next_id: 1,
            server: None,
        }
    }

    /// Script: run `command` through the shell tool, then answer `final_text`.
    pub(crate) fn script_command_then_text(&self, call_id: &str, command: &str, final_text: &str) {
        let arguments = json!({"command": command}).to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "shell", &arguments),
            chunk::finish("tool_calls"),
            chunk::usage(10, 5),
        ]));
        self.script_text(final_text);
    }

    /// Script: run `command` through the shell tool (no answer after it).
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
        let arguments = json!({
            "input": format!("*** Begin Patch\n*** Add File: {file}\n+hi\n*** End Patch\n")
        })
        .to_string();
        self.model.push(MockResponse::sse(vec![
            chunk::tool_call(0, call_id, "apply_patch", &arguments),
            chunk::finish("tool_calls"),
        ]));
    }

    /// Scripts a model that tries every way to write into the work directory, one call
    /// a response (an `apply_patch`, a shell redirect, `apply_patch` through the shell,
    /// an escalated command), then answers `final_text`. Check the outcome with
    /// [`assert_nothing_written`].
    pub(crate) fn script_write_attempts(&self, final_text: &str) {
        let patch =
            |file: &str| format!("*** Begin Patch\n*** Add File: {file}\n+pwned\n*** End Patch\n");
        let calls = [
            ("apply_patch", json!({"input": patch("patched.txt")})),
            ("shell", json!({"command": "echo pwned > redirected.txt"})),
            (
                "shell",
                json!({"command": ["apply_patch", patch("smuggled.txt")]}),
            ),
            (
                "shell",
                json!({
                    "command": "touch escalated.txt",
                    "sandbox_permissions": "require_escalated",
                    "justification": "need it"
                }),
            ),
        ];
        for (n, (name, arguments)) in calls.iter().enumerate() {
            self.model.push(MockResponse::sse(vec![
                chunk::tool_call(0, &format!("call_{n}"), name, &arguments.to_string()),
                chunk::finish("tool_calls"),
            ]));
        }
        self.script_text(final_text);
    }

    /// After [`Self::script_write_attempts`]: no file was written and no approval was
    /// asked (there is no way out of a read-only turn's sandbox to approve).
    pub(crate) fn assert_nothing_written(&self, messages: &[Value]) {
        for file in [
            "patched.txt",
            "redirected.txt",
            "smuggled.txt",
            "escalated.txt",
        ] {
            assert!(
                !self.work_path().join(file).exists(),
                "{file} was written: {:?}",
                trace(messages)
            );
        }
        assert!(
            !messages.iter().any(|m| m["method"]
                .as_str()
                .is_some_and(|m| m.contains("requestApproval"))),
            "{:?}",
            trace(messages)
        );
    }

    pub(crate) fn script_text(&self, text: &str) {
        self.model.push(MockResponse::sse(vec![
            chunk::text(text),
            chunk::finish("stop"),
        ]));
    }
}

pub(crate) enum Wire {
    Stdio(Box<JsonLinesProcess>),
    Socket(
        Box<
            dyn futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
                + Unpin
                + Send,
        >,
        Box<
            dyn futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error>
                + Unpin
                + Send,
        >,
    ),
}

pub(crate) struct AppClient {
    pub wire: Wire,
    /// Messages read past while waiting for something else.
    pub seen: Vec<Value>,
    next_id: i64,
    /// The server process behind a socket client.
    pub server: Option<JsonLinesProcess>,
}

/// Wait until the server's stderr contains `marker`; returns the rest of that line.
pub(crate) async fn wait_for_stderr(process: &JsonLinesProcess, marker: &str) -> String {
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    loop {
        let stderr = process.stderr();
        if let Some(pos) = stderr.find(marker) {
            let rest = &stderr[pos + marker.len()..];
            if let Some(end) = rest.find('\n') {
                return rest[..end].trim().to_string();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server never printed {marker:?}; stderr:\n{stderr}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl AppClient {
    /// A WebSocket client of a server started with `--listen ws://…`.
    pub(crate) async fn connect_ws(
        server: JsonLinesProcess,
        url: &str,
        token: Option<&str>,
    ) -> Self {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let mut request = url.into_client_request().expect("request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("header"),
            );
        }
        let (socket, _) =
            tokio::time::timeout(READ_DEADLINE, tokio_tungstenite::connect_async(request))
                .await
                .expect("connect deadline")
                .expect("connect");
        let (sink, stream) = socket.split();
        Self {
            wire: Wire::Socket(Box::new(stream), Box::new(sink)),
            seen: Vec::new(),
            next_id: 1,
            server: Some(server),
        }
    }

    /// A WebSocket client over the Unix socket at `path`.
    pub(crate) async fn connect_unix(server: JsonLinesProcess, path: &Path) -> Self {
        let stream = tokio::time::timeout(READ_DEADLINE, tokio::net::UnixStream::connect(path))
            .await
            .expect("connect deadline")
            .expect("connect unix socket");
        let (socket, _) = tokio::time::timeout(
            READ_DEADLINE,
            tokio_tungstenite::client_async("ws://localhost/", stream),
        )
        .await
        .expect("handshake deadline")
        .expect("websocket handshake");
        let (sink, stream) = socket.split();
        Self {
            wire: Wire::Socket(Box::new(stream), Box::new(sink)),
            seen: Vec::new(),
            next_id: 1,
            server: Some(server),
        }
    }

    pub(crate) fn stderr(&self) -> String {
        match (&self.wire, &self.server) {
            (Wire::Stdio(p), _) => p.stderr(),
            (_, Some(p)) => p.stderr(),
            _ => String::new(),
        }
    }

    pub(crate) async fn send(&mut self, message: Value) {
        match &mut self.wire {
            Wire::Stdio(p) => p.write_json(&message).await.expect("write"),
            Wire::Socket(_, sink) => sink
                .send(Message::Text(message.to_string().into()))
                .await
                .expect("send frame"),
        }
    }

    /// The next message from the server, or an error at the deadline.
    pub(crate) async fn read(&mut self, deadline: Duration) -> anyhow::Result<Value> {
        match &mut self.wire {
            Wire::Stdio(p) => p.read_json(deadline).await,
            Wire::Socket(stream, _) => loop {
                let frame = tokio::time::timeout(deadline, stream.next())
                    .await
                    .map_err(|_| anyhow::anyhow!("no message within {deadline:?}"))?;
                match frame {
                    Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text)?),
                    Some(Ok(Message::Close(_))) | None => anyhow::bail!("socket closed"),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => anyhow::bail!("socket error: {e}"),
                }
            },
        }
    }

    /// The first message (seen before or read now) matching `pred`; others are kept.
    pub(crate) async fn read_until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.seen.iter().position(&pred) {
            return self.seen.remove(pos);
        }
        let deadline = tokio::time::Instant::now() + READ_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let message = self.read(left).await.unwrap_or_else(|e| {
                panic!(
                    "no expected message: {e:#}\nseen: {:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr()
                )
            });
            if pred(&message) {
                return message;
            }
            self.seen.push(message);
        }
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub(crate) async fn response(&mut self, id: i64) -> Value {
        self.read_until(|m| m["id"] == json!(id) && m.get("method").is_none())
            .await
    }

    /// Request → its full response message (result or error).
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// Request → its result; panics on an error response.
    pub(crate) async fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {response}\nstderr:\n{}", self.stderr()),
        }
    }

    pub(crate) async fn initialize(&mut self) -> Value {
        self.initialize_with(json!({})).await
    }

    pub(crate) async fn initialize_with(&mut self, capabilities: Value) -> Value {
        let result = self
            .ok(
                "initialize",
                json!({"clientInfo": {"name": "raw-test", "title": null, "version": "0.0.0"}, "capabilities": capabilities}),
            )
            .await;
        self.send(json!({"method": "initialized"})).await;
        result
    }

    /// The next notification named `method`.
    pub(crate) async fn notification(&mut self, method: &str) -> Value {
        self.read_until(|m| m["method"] == method && m.get("id").is_none())
            .await
    }

    /// The next server→client request named `method`.
    pub(crate) async fn server_request(&mut self, method: &str) -> Value {
        self.read_until(|m| m["method"] == method && m.get("id").is_some())
            .await
    }

    pub(crate) async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"id": id, "result": result})).await;
    }

    pub(crate) async fn respond_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(json!({"id": id, "error": {"code": code, "message": message}}))
            .await;
    }

    /// Every notification up to and including `turn/completed`, in order (requests from
    /// the server are included too, so their place in the order can be checked).
    pub(crate) async fn until_turn_completed(&mut self) -> Vec<Value> {
        let mut out: Vec<Value> = std::mem::take(&mut self.seen);
        if out.iter().any(|m| m["method"] == "turn/completed") {
            return out;
        }
        let deadline = tokio::time::Instant::now() + READ_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let message = self.read(left).await.unwrap_or_else(|e| {
                panic!(
                    "turn never completed: {e:#}\nseen: {out:#?}\nstderr:\n{}",
                    self.stderr()
                )
            });
            let done = message["method"] == "turn/completed";
            out.push(message);
            if done {
                return out;
            }
        }
    }

    /// initialize, thread/start with `params`; returns the thread id.
    pub(crate) async fn start_thread(&mut self, params: Value) -> String {
        let result = self.ok("thread/start", params).await;
        result["thread"]["id"]
            .as_str()
            .expect("thread id")
            .to_string()
    }

    /// turn/start with one text input; returns the turn id.
    pub(crate) async fn start_turn(&mut self, thread_id: &str, text: &str) -> String {
        let result = self
            .ok(
                "turn/start",
                json!({"threadId": thread_id, "input": [{"type": "text", "text": text}]}),
            )
            .await;
        result["turn"]["id"].as_str().expect("turn id").to_string()
    }
}

/// Method names (and item types for item notifications) of `messages`, for order checks.
pub(crate) fn trace(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| {
            let method = m["method"].as_str()?;
            Some(match method {
                "item/started" | "item/completed" => {
                    format!(
                        "{method}:{}",
                        m["params"]["item"]["type"].as_str().unwrap_or("?")
                    )
                }
                _ => method.to_string(),
            })
        })
        .collect()
}

/// A repository in `work` (one commit of `a.txt`, made here) whose programs no `-c`
/// setting reaches: a filter driver named `a=b` (`-c filter.a=b.clean=` sets
/// `filter.a.b=clean=`), and a submodule `sub` with its own filter and fsmonitor (a
/// submodule's git reads only the submodule's config). Each names a script in `outside`
/// that appends to the returned marker file. `a.txt` is left changed, so a diff reads it.
pub(crate) fn repository_with_drivers_beyond_reach(work: &Path, outside: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;

    let marker = outside.join("driver-ran");
    let script = outside.join("driver.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", marker.display()),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = script.display();
    let set_up = format!(
        "git init -q && echo one > a.txt && git add a.txt && git commit -qm one \
         && mkdir sub && cd sub && git init -q && echo s > s.txt && git add s.txt \
         && git commit -qm s && cd .. && git add sub && git commit -qm sub \
         && printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules \
         && git config submodule.sub.ignore none \
         && printf '[filter \"a=b\"]\\n\\tclean = {script}\\n' >> .git/config \
         && echo '* filter=a=b' > .gitattributes \
         && cd sub && git config filter.sub.clean '{script}' && git config core.fsmonitor '{script}' \
         && echo '* filter=sub' > .gitattributes && cd .. && echo two >> a.txt"
    );
    let output = std::process::Command::new("sh")
        .args(["-c", &set_up])
        .current_dir(work)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("sh");
    assert!(output.status.success(), "{output:?}");
    touch_submodule_file(work);
    marker
}

/// Gives `sub/s.txt` of [`repository_with_drivers_beyond_reach`] a new mtime and the same
/// size: git has to read the file (through the submodule's filter) to know it is unchanged.
pub(crate) fn touch_submodule_file(work: &Path) {
    let file = std::fs::File::options()
        .write(true)
        .open(work.join("sub/s.txt"))
        .expect("s.txt");
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    file.set_modified(later).expect("mtime");
}

/// Runs plain git (no hardening) in `work` to show the fixture of
/// [`repository_with_drivers_beyond_reach`] is armed: both drivers run.
pub(crate) fn assert_drivers_armed(work: &Path, marker: &Path) {
    let output = std::process::Command::new("git")
        .args(["diff", "HEAD"])
        .current_dir(work)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git diff");
    assert!(output.status.success(), "{output:?}");
    let ran = std::fs::read_to_string(marker).unwrap_or_default();
    assert!(ran.lines().count() >= 2, "plain git ran: {ran:?}");
    std::fs::remove_file(marker).expect("clear the marker");
    touch_submodule_file(work);
}

/// Swaps `a` and `b` (`renameat2(RENAME_EXCHANGE)`) in a tight loop until stopped:
/// a second agent racing this one on the same workspace.
pub(crate) struct RenameLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl RenameLoop {
    pub(crate) fn start(a: std::path::PathBuf, b: std::path::PathBuf) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                swaps += 1;
            }
            swaps
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or(0)
    }
}
