//! Shared harness for the exec integration tests: a fresh home and work directory per
//! test, a mock model server, and runs of the real binary with a hard deadline.

// Each test crate uses a different subset of the helpers; a panic with a message is
// how a test helper reports a broken fixture.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use interpreter_test_support::MockModelServer;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;

/// Generous: a debug build under a loaded 2-core machine. Only a hang hits it.
const RUN_DEADLINE: Duration = Duration::from_secs(90);

pub(crate) struct TestEnv {
    pub home: TempDir,
    pub work: TempDir,
    pub server: MockModelServer,
}

pub(crate) struct RunOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl RunOutput {
    /// stdout parsed as JSON Lines.
    pub(crate) fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("stdout line is not JSON ({err}): {line}"))
            })
            .collect()
    }

    pub(crate) fn thread_id(&self) -> String {
        let events = self.events();
        let first = events.first().expect("no events on stdout");
        assert_eq!(first["type"], "thread.started", "first event: {first}");
        first["thread_id"].as_str().expect("thread_id").to_string()
    }

    #[track_caller]
    pub(crate) fn assert_success(&self) {
        assert_eq!(
            self.code,
            Some(0),
            "exit code {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
    }
}

impl TestEnv {
    pub(crate) async fn new() -> Self {
        let server = MockModelServer::start().await.expect("start mock server");
        let env = Self {
            home: TempDir::new().expect("home tempdir"),
            work: TempDir::new().expect("work tempdir"),
            server,
        };
        env.write_config("");
        env
    }

    /// The standard mock provider config plus `extra_provider_keys` inside
    /// `[model_providers.mock]`.
    pub(crate) fn write_config(&self, extra_provider_keys: &str) {
        self.write_raw_config(&self.server.config_toml(
            "",
            &format!("wire_api = \"chat\"\nrequest_max_retries = 2\n{extra_provider_keys}"),
            "",
        ));
    }

    pub(crate) fn write_raw_config(&self, text: &str) {
        std::fs::write(self.home.path().join("config.toml"), text).expect("write config");
    }

    pub(crate) fn work_path(&self) -> PathBuf {
        std::fs::canonicalize(self.work.path()).expect("canonical work dir")
    }

    /// Run `interpreter ARGS` in the work directory with an empty (non-terminal) stdin.
    /// [`binary_command`] in this environment's home and work directory.
    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        binary_command(self.home.path(), &self.work_path(), args)
    }

    pub(crate) async fn run(&self, args: &[&str]) -> RunOutput {
        self.run_with_stdin(args, None).await
    }

    pub(crate) async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> RunOutput {
        run_binary(self.home.path(), &self.work_path(), args, stdin).await
    }

    /// The rollout file of a thread, found by its id in the file name or content.
    pub(crate) fn rollout_file(&self, thread_id: &str) -> PathBuf {
        let mut stack = vec![self.home.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|ext| ext == "jsonl")
                    && path.to_string_lossy().contains(thread_id)
                {
                    return path;
                }
            }
        }
        panic!(
            "no rollout file for {thread_id} under {}",
            self.home.path().display()
        );
    }
}

/// `interpreter ARGS` in `cwd`, with `home` as both HOME and INTERPRETER_HOME, the mock
/// provider's key, PATH, and nothing else from the test's environment.
pub(crate) fn binary_command(home: &Path, cwd: &Path, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("INTERPRETER_HOME", home)
        .env("MOCK_API_KEY", "test-key");
    command
}

/// How many `--json` warning items (`item.completed` of type `error`) contain `needle`.
pub(crate) fn json_warnings(events: &[Value], needle: &str) -> usize {
    events
        .iter()
        .filter(|event| {
            event["type"] == "item.completed"
                && event["item"]["type"] == "error"
                && event["item"]["message"]
                    .as_str()
                    .is_some_and(|message| message.contains(needle))
        })
        .count()
}

pub(crate) async fn run_binary(
    home: &Path,
    cwd: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> RunOutput {
    let mut command = binary_command(home, cwd, args);
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn interpreter");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        pipe.write_all(text.as_bytes()).await.expect("write stdin");
        drop(pipe);
    }
    let output = tokio::time::timeout(RUN_DEADLINE, child.wait_with_output())
        .await
        .expect("interpreter did not finish before the deadline (killed)")
        .expect("wait for interpreter");
    RunOutput {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The `messages` of a captured request.
pub(crate) fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

/// Whether any message of the request contains `needle` in its text content.
pub(crate) fn request_mentions(request: &Value, needle: &str) -> bool {
    request["messages"].to_string().contains(needle)
}

/// Script a plain answer `text` as the model's next response.
pub(crate) fn script_text(server: &MockModelServer, text: &str) {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::chunk;
    server.push(MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(10, 2),
    ]));
}

/// Script a shell tool call `command` (id `call_id`) as the model's next response.
pub(crate) fn script_shell(server: &MockModelServer, call_id: &str, command: &str) {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::chunk;
    let arguments = serde_json::json!({ "command": command }).to_string();
    server.push(MockResponse::sse(vec![
        chunk::tool_call(0, call_id, "shell", &arguments),
        chunk::finish("tool_calls"),
        chunk::usage(10, 2),
    ]));
}
