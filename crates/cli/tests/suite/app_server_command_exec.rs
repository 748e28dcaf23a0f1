//! `interpreter app-server`'s `command/exec` family through the real binary: buffered and
//! streamed runs, stdin, terminate, timeout, output caps, process ids, a connection that
//! goes away, the pseudo-terminal — and the attacks a client (or the command) may try:
//! writing outside the workspace, asking for a looser sandbox, reading the server's
//! secrets, leaving a daemon behind, flooding the server with output.
//!
//! Commands run under the configured `workspace-write` sandbox when the kernel supports
//! it (`interpreter sandbox check`); otherwise the functional tests run with
//! `danger-full-access` and the sandbox tests say they skip. Every read has a deadline.

#![cfg(target_os = "linux")]

use crate::app_server_support;

use std::path::Path;
use std::time::Duration;

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE};
use base64::Engine as _;
use serde_json::{Value, json};

const SECRET: &str = "sk-command-exec-test-secret";

/// Whether `interpreter sandbox check` finds a working sandbox on this machine.
async fn sandbox_supported(env: &AppEnv) -> bool {
    let check = tokio::time::timeout(
        READ_DEADLINE,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["sandbox", "check", "--json"])
            .env("INTERPRETER_HOME", env.home.path())
            .output(),
    )
    .await
    .expect("deadline")
    .expect("sandbox check");
    let support: Value = serde_json::from_slice(&check.stdout).expect("sandbox check --json");
    support["supported"] == json!(true)
}

/// A server whose config is `workspace-write` (without `/tmp`, so the only writable place
/// is the work directory) when the sandbox works here, `danger-full-access` otherwise.
/// Its environment holds a secret the commands must not see. Returns whether sandboxed.
async fn server(extra: &str) -> (AppEnv, AppClient, bool) {
    let probe = AppEnv::new().await;
    let sandboxed = sandbox_supported(&probe).await;
    let mode = if sandboxed {
        "sandbox_mode = \"workspace-write\""
    } else {
        "sandbox_mode = \"danger-full-access\""
    };
    let env = AppEnv::with_config(&format!(
        "{mode}\n{extra}\n[sandbox_workspace_write]\nexclude_slash_tmp = true\n"
    ))
    .await;
    let mut command = env.command(&[]);
    command.env("SECRET_API_KEY", SECRET);
    let mut client = env.spawn_command(command);
    client.initialize().await;
    (env, client, sandboxed)
}

fn decode(delta: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(
            delta["params"]["deltaBase64"]
                .as_str()
                .expect("deltaBase64"),
        )
        .expect("base64")
}

/// Everything that arrives up to the response to request `id`: (deltas, response).
async fn until_response(client: &mut AppClient, id: i64) -> (Vec<Value>, Value) {
    let mut deltas: Vec<Value> = std::mem::take(&mut client.seen)
        .into_iter()
        .filter(|m| m["method"] == "command/exec/outputDelta")
        .collect();
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let message = client
            .read(left)
            .await
            .unwrap_or_else(|e| panic!("no response to {id}: {e:#}\nstderr:\n{}", client.stderr()));
        if message["id"] == json!(id) && message.get("method").is_none() {
            return (deltas, message);
        }
        if message["method"] == "command/exec/outputDelta" {
            deltas.push(message);
        }
    }
}

/// The bytes of `stream` in `deltas`.
fn joined(deltas: &[Value], stream: &str) -> String {
    let bytes: Vec<u8> = deltas
        .iter()
        .filter(|d| d["params"]["stream"] == stream)
        .flat_map(decode)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads deltas until their `stdout` text contains `needle`; returns what was read.
async fn wait_for_output(client: &mut AppClient, needle: &str) -> String {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    while !text.contains(needle) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let message = client.read(left).await.unwrap_or_else(|e| {
            panic!(
                "never saw {needle:?} (got {text:?}): {e:#}\nstderr:\n{}",
                client.stderr()
            )
        });
        if message["method"] == "command/exec/outputDelta" {
            text.push_str(&String::from_utf8_lossy(&decode(&message)));
        } else {
            client.seen.push(message);
        }
    }
    text
}

fn error_message(response: &Value) -> String {
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {response}"))
        .to_string()
}

/// Polls for `path` for `wait`; whether it appeared.
async fn appears(path: &Path, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    path.exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_run_returns_stdout_stderr_and_exit_code() {
    let (_env, mut client, _) = server("").await;
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sh", "-c", "printf out; printf err >&2; exit 3"]}),
        )
        .await;
    assert_eq!(
        result,
        json!({"exitCode": 3, "stdout": "out", "stderr": "err"})
    );
    let missing = client
        .call("command/exec", json!({"command": ["no-such-program-here"]}))
        .await;
    assert!(missing.get("error").is_some() || missing["result"]["exitCode"] != json!(0));
    let empty = client.call("command/exec", json!({"command": []})).await;
    assert!(error_message(&empty).contains("empty"), "{empty}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_come_before_the_response() {
    let (_env, mut client, _) = server("").await;
    let id = client
        .request(
            "command/exec",
            json!({
                "command": ["sh", "-c", "printf one; sleep 0.2; printf two >&2; sleep 0.2; printf three"],
                "processId": "stream-1",
                "streamStdoutStderr": true,
            }),
        )
        .await;
    let (deltas, response) = until_response(&mut client, id).await;
    assert_eq!(joined(&deltas, "stdout"), "onethree");
    assert_eq!(joined(&deltas, "stderr"), "two");
    for delta in &deltas {
        assert_eq!(delta["params"]["processId"], "stream-1");
        assert_eq!(delta["params"]["capReached"], false);
    }
    // Streamed bytes are not repeated in the response.
    assert_eq!(
        response["result"],
        json!({"exitCode": 0, "stdout": "", "stderr": ""})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_writes_reach_the_command_and_close_ends_it() {
    let (_env, mut client, _) = server("").await;
    // The id exists once the request is being handled; the first output says so.
    let id = client
        .request(
            "command/exec",
            json!({
                "command": ["sh", "-c", "echo ready; exec cat"],
                "processId": "cat-1",
                "streamStdin": true,
                "streamStdoutStderr": true,
            }),
        )
        .await;
    wait_for_output(&mut client, "ready").await;
    let hello = base64::engine::general_purpose::STANDARD.encode("hello\n");
    client
        .ok(
            "command/exec/write",
            json!({"processId": "cat-1", "deltaBase64": hello}),
        )
        .await;
    client
        .ok(
            "command/exec/write",
            json!({"processId": "cat-1", "closeStdin": true}),
        )
        .await;
    let (deltas, response) = until_response(&mut client, id).await;
    assert_eq!(joined(&deltas, "stdout"), "hello\n");
    assert_eq!(response["result"]["exitCode"], 0, "{response}");
    // Pipelined: the write and the close go out right behind the request, before it can
    // have started anything; they wait for it instead of finding no process.
    let id = client
        .request(
            "command/exec",
            json!({"command": ["cat"], "processId": "cat-2", "streamStdin": true}),
        )
        .await;
    let write = client
        .request(
            "command/exec/write",
            json!({"processId": "cat-2", "deltaBase64": hello, "closeStdin": true}),
        )
        .await;
    let written = client.response(write).await;
    assert!(written.get("result").is_some(), "{written}");
    let (_, response) = until_response(&mut client, id).await;
    assert_eq!(
        response["result"],
        json!({"exitCode": 0, "stdout": "hello\n", "stderr": ""})
    );
    // Without streamStdin, writes are refused.
    let id = client
        .request(
            "command/exec",
            json!({"command": ["sleep", "30"], "processId": "no-stdin", "streamStdoutStderr": true}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = client
        .call(
            "command/exec/write",
            json!({"processId": "no-stdin", "deltaBase64": hello}),
        )
        .await;
    assert!(error_message(&refused).contains("stdin"), "{refused}");
    client
        .ok("command/exec/terminate", json!({"processId": "no-stdin"}))
        .await;
    until_response(&mut client, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_the_command() {
    let (_env, mut client, _) = server("").await;
    let started = std::time::Instant::now();
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sleep", "60"], "timeoutMs": 300}),
        )
        .await;
    assert_eq!(result["exitCode"], 124, "{result}");
    assert!(started.elapsed() < Duration::from_secs(50));
    let both = client
        .call(
            "command/exec",
            json!({"command": ["true"], "timeoutMs": 10, "disableTimeout": true}),
        )
        .await;
    assert!(error_message(&both).contains("disableTimeout"), "{both}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_capped_per_stream_with_cap_reached() {
    let (_env, mut client, _) = server("").await;
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sh", "-c", "printf 0123456789abcdef; printf xy >&2"], "outputBytesCap": 10}),
        )
        .await;
    assert_eq!(
        result,
        json!({"exitCode": 0, "stdout": "0123456789", "stderr": "xy"})
    );
    let id = client
        .request(
            "command/exec",
            json!({
                "command": ["sh", "-c", "printf 0123456789abcdef; sleep 0.1; printf more"],
                "processId": "capped",
                "streamStdoutStderr": true,
                "outputBytesCap": 10,
            }),
        )
        .await;
    let (deltas, response) = until_response(&mut client, id).await;
    assert_eq!(joined(&deltas, "stdout"), "0123456789");
    let last = deltas.last().expect("a delta");
    assert_eq!(last["params"]["capReached"], true, "{deltas:?}");
    assert!(
        deltas[..deltas.len() - 1]
            .iter()
            .all(|d| d["params"]["capReached"] == false)
    );
    assert_eq!(response["result"]["exitCode"], 0);
}

/// Hostile: a client asks for far more output than the server keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_capped_by_the_server_whatever_the_client_asks() {
    let (_env, mut client, _) = server("").await;
    let flood = "head -c 20000000 /dev/zero | tr '\\0' y";
    for params in [
        json!({"command": ["sh", "-c", flood], "outputBytesCap": 1_000_000_000_000u64}),
        json!({"command": ["sh", "-c", flood], "disableOutputCap": true}),
    ] {
        let result = client.ok("command/exec", params).await;
        let stdout = result["stdout"].as_str().expect("stdout");
        assert_eq!(stdout.len(), 8 * 1024 * 1024);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_ids_are_unique_and_must_exist() {
    let (_env, mut client, _) = server("").await;
    let id = client
        .request(
            "command/exec",
            json!({"command": ["sleep", "60"], "processId": "dup", "streamStdoutStderr": true}),
        )
        .await;
    // Until it is registered, a duplicate could still start; wait for that.
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    loop {
        let probe = client
            .call("command/exec/terminate", json!({"processId": "absent"}))
            .await;
        assert!(error_message(&probe).contains("absent"), "{probe}");
        let second = client
            .call(
                "command/exec",
                json!({"command": ["true"], "processId": "dup", "streamStdoutStderr": true}),
            )
            .await;
        if second.get("error").is_some() {
            assert!(error_message(&second).contains("dup"), "{second}");
            break;
        }
        // The first command must still be running: had it ended, its id would be free.
        let first_ended = client
            .seen
            .iter()
            .find(|message| message["id"] == json!(id) && message.get("method").is_none());
        assert!(
            first_ended.is_none(),
            "the first command ended: {first_ended:?}"
        );
        assert!(tokio::time::Instant::now() < deadline, "never refused");
    }
    for (method, params) in [
        (
            "command/exec/write",
            json!({"processId": "nope", "deltaBase64": ""}),
        ),
        ("command/exec/terminate", json!({"processId": "nope"})),
        (
            "command/exec/resize",
            json!({"processId": "nope", "size": {"rows": 10, "cols": 10}}),
        ),
    ] {
        let response = client.call(method, params).await;
        assert!(error_message(&response).contains("nope"), "{response}");
    }
    let needs_id = client
        .call(
            "command/exec",
            json!({"command": ["true"], "streamStdoutStderr": true}),
        )
        .await;
    assert!(error_message(&needs_id).contains("processId"), "{needs_id}");
    client
        .ok("command/exec/terminate", json!({"processId": "dup"}))
        .await;
    let (_, response) = until_response(&mut client, id).await;
    assert_eq!(response["result"]["exitCode"], 137, "{response}");
    // The id is free again once its process is gone.
    let again = client
        .ok(
            "command/exec",
            json!({"command": ["true"], "processId": "dup"}),
        )
        .await;
    assert_eq!(again["exitCode"], 0);
}

/// Hostile: the command daemonizes a child that would act later; terminate must take it
/// down with the whole group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_kills_the_daemon_the_command_forked() {
    let (env, mut client, _) = server("").await;
    let marker = env.work_path().join("daemon-was-here");
    let script = format!(
        "(sleep 2; touch '{}') & echo started; sleep 60",
        marker.display()
    );
    let id = client
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", script], "processId": "daemon", "streamStdoutStderr": true}),
        )
        .await;
    wait_for_output(&mut client, "started").await;
    client
        .ok("command/exec/terminate", json!({"processId": "daemon"}))
        .await;
    let (_, response) = until_response(&mut client, id).await;
    assert_eq!(response["result"]["exitCode"], 137, "{response}");
    assert!(
        !appears(&marker, Duration::from_secs(4)).await,
        "the forked daemon survived terminate"
    );
}

/// The connection closes while a command runs (the server stays up): the command dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_connection_kills_its_commands() {
    let probe = AppEnv::new().await;
    let mode = if sandbox_supported(&probe).await {
        "workspace-write"
    } else {
        "danger-full-access"
    };
    let env = AppEnv::with_config(&format!("sandbox_mode = \"{mode}\"")).await;
    let socket = env.home.path().join("control").join("app.sock");
    let server = interpreter_test_support::process::JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    app_server_support::wait_for_stderr(&server, "listening on unix://").await;
    let mut client = AppClient::connect_unix(server, &socket).await;
    client.initialize().await;
    let marker = env.work_path().join("survived-the-connection");
    let script = format!(
        "echo started; sleep 2; touch '{}'; sleep 60",
        marker.display()
    );
    client
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", script], "processId": "orphan", "streamStdoutStderr": true}),
        )
        .await;
    wait_for_output(&mut client, "started").await;
    let server = client.server.take().expect("server");
    drop(client);
    assert!(
        !appears(&marker, Duration::from_secs(4)).await,
        "the command outlived its connection"
    );
    // The server itself is still serving.
    let mut again = AppClient::connect_unix(server, &socket).await;
    again.initialize().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pty_is_a_terminal_and_follows_resize() {
    let (_env, mut client, _) = server("").await;
    let id = client
        .request(
            "command/exec",
            json!({
                "command": ["sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty; stty size; read line; stty size"],
                "processId": "pty",
                "tty": true,
                "size": {"rows": 30, "cols": 100},
            }),
        )
        .await;
    let first = wait_for_output(&mut client, "30 100").await;
    assert!(first.contains("is-a-tty"), "{first:?}");
    client
        .ok(
            "command/exec/resize",
            json!({"processId": "pty", "size": {"rows": 40, "cols": 120}}),
        )
        .await;
    let newline = base64::engine::general_purpose::STANDARD.encode("\n");
    client
        .ok(
            "command/exec/write",
            json!({"processId": "pty", "deltaBase64": newline}),
        )
        .await;
    wait_for_output(&mut client, "40 120").await;
    let (_, response) = until_response(&mut client, id).await;
    assert_eq!(
        response["result"],
        json!({"exitCode": 0, "stdout": "", "stderr": ""})
    );
    // Resizing a process without a terminal is refused.
    let id = client
        .request(
            "command/exec",
            json!({"command": ["sleep", "60"], "processId": "pipes", "streamStdin": true}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = client
        .call(
            "command/exec/resize",
            json!({"processId": "pipes", "size": {"rows": 10, "cols": 10}}),
        )
        .await;
    assert!(error_message(&refused).contains("PTY"), "{refused}");
    client
        .ok("command/exec/terminate", json!({"processId": "pipes"}))
        .await;
    until_response(&mut client, id).await;
}

/// Hostile: under the configured workspace-write policy a command cannot write outside
/// the workspace, not with a request that widens the policy, and not by pointing `TMPDIR`
/// (a writable root) elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_write_outside_the_workspace() {
    let (env, mut client, sandboxed) = server("").await;
    if !sandboxed {
        eprintln!("note: no working sandbox on this machine; skipping");
        return;
    }
    let outside = tempfile::tempdir().expect("outside");
    let outside_dir = outside.path().canonicalize().expect("canonical");
    let target = outside_dir.join("escaped");
    let script = format!("echo pwned > '{}'", target.display());
    let result = client
        .ok("command/exec", json!({"command": ["sh", "-c", script]}))
        .await;
    assert_ne!(result["exitCode"], 0, "{result}");
    assert!(
        !target.exists(),
        "a sandboxed command wrote outside the workspace"
    );
    // The agent's home is out of reach even though it is a plain directory.
    let home_target = env.home.path().join("config.toml");
    let script = format!(
        "echo 'sandbox_mode = \"danger-full-access\"' >> '{}'",
        home_target.display()
    );
    client
        .ok("command/exec", json!({"command": ["sh", "-c", script]}))
        .await;
    let config = std::fs::read_to_string(&home_target).expect("config");
    assert!(!config.contains("danger-full-access"), "{config}");
    // Inside the workspace it works (the sandbox is not simply broken).
    let inside = env.work_path().join("inside");
    let script = format!("echo ok > '{}'", inside.display());
    let result = client
        .ok("command/exec", json!({"command": ["sh", "-c", script]}))
        .await;
    assert_eq!(result["exitCode"], 0, "{result}");
    assert!(inside.exists());
    // A request that makes the outside writable is refused before anything runs.
    let script = format!("echo pwned > '{}'", target.display());
    for params in [
        json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": [outside_dir]}}),
        json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/"]}}),
        json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "workspaceWrite"}, "env": {"TMPDIR": outside_dir}}),
        json!({"command": ["sh", "-c", script], "env": {"TMPDIR": outside_dir}}),
        json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "workspaceWrite", "networkAccess": true}}),
    ] {
        let response = client.call("command/exec", params.clone()).await;
        assert!(
            error_message(&response).contains("sandboxPolicy refused"),
            "{params} → {response}"
        );
        assert!(!target.exists());
    }
    // The sandbox helper is started with the command's environment: a loader variable
    // from the client would run code in it before it sandboxes itself.
    let library = env.work_path().join("planted.so");
    std::fs::write(&library, b"not really a library").expect("plant");
    for name in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "GLIBC_TUNABLES",
    ] {
        let response = client
            .call(
                "command/exec",
                json!({"command": ["true"], "env": {name: library}}),
            )
            .await;
        assert!(
            error_message(&response).contains(name),
            "{name} → {response}"
        );
    }
    // Narrower is fine: read-only cannot write even the workspace.
    let script = format!(
        "echo no > '{}'",
        env.work_path().join("read-only").display()
    );
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "readOnly"}}),
        )
        .await;
    assert_ne!(result["exitCode"], 0, "{result}");
    assert!(!env.work_path().join("read-only").exists());
}

/// Hostile: a client asks for no sandbox at all when the config does not allow it.
/// A client's command may not start a repository either: a `.git` it creates deep in the
/// workspace is removed, and its stderr says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_a_command_starts_is_removed() {
    let (env, mut client, sandboxed) = server("").await;
    if !sandboxed {
        eprintln!("note: no working sandbox on this machine; skipping");
        return;
    }
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sh", "-c", "mkdir -p a/b && git init -q a/b && echo STARTED"]}),
        )
        .await;
    assert_eq!(result["exitCode"], 0, "{result}");
    assert!(result["stdout"].as_str().unwrap().contains("STARTED"));
    let planted = env.work_path().join("a/b/.git");
    assert!(!planted.exists(), "the repository stayed");
    assert!(
        result["stderr"].as_str().unwrap().contains(&format!(
            "created a git repository at {}",
            planted.display()
        )),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn danger_full_access_is_refused_unless_configured() {
    let env = AppEnv::with_config("sandbox_mode = \"read-only\"").await;
    let mut client = env.spawn();
    client.initialize().await;
    let marker = env.work_path().join("unsandboxed");
    let script = format!("echo pwned > '{}'", marker.display());
    let response = client
        .call(
            "command/exec",
            json!({"command": ["sh", "-c", script], "sandboxPolicy": {"type": "dangerFullAccess"}}),
        )
        .await;
    assert!(
        error_message(&response).contains("dangerFullAccess"),
        "{response}"
    );
    assert!(!marker.exists());
    // An external sandbox is not something this server can vouch for either.
    let response = client
        .call(
            "command/exec",
            json!({"command": ["true"], "sandboxPolicy": {"type": "externalSandbox"}}),
        )
        .await;
    assert!(response.get("error").is_some(), "{response}");
    // Nor is a permission profile silently replaced by the configured policy.
    let response = client
        .call(
            "command/exec",
            json!({"command": ["true"], "permissionProfile": ":danger-full-access"}),
        )
        .await;
    assert!(
        error_message(&response).contains("permissionProfile"),
        "{response}"
    );
}

/// Hostile: the server's secrets (`*_API_KEY`, the provider's key) are not in the
/// command's environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_secrets_are_not_in_the_commands_environment() {
    let (_env, mut client, _) = server("").await;
    let result = client.ok("command/exec", json!({"command": ["env"]})).await;
    let stdout = result["stdout"].as_str().expect("stdout");
    assert!(stdout.contains("PATH="), "{stdout}");
    assert!(!stdout.contains(SECRET), "{stdout}");
    assert!(!stdout.contains("SECRET_API_KEY"), "{stdout}");
    assert!(!stdout.contains("test-key"), "{stdout}");
    // Overrides merge, and `null` unsets.
    let result = client
        .ok(
            "command/exec",
            json!({"command": ["sh", "-c", "echo \"$EXTRA-${HOME:-unset}\""], "env": {"EXTRA": "given", "HOME": null}}),
        )
        .await;
    assert_eq!(result["stdout"], "given-unset\n");
}

/// Configured `[shell_environment_policy]` is what decides: a policy that lets a
/// variable through lets it through here too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_policy_can_pass_a_variable() {
    let (_env, mut client, _) =
        server("\n[shell_environment_policy]\nallow = [\"SECRET_API_KEY\"]\n").await;
    let result = client.ok("command/exec", json!({"command": ["env"]})).await;
    let stdout = result["stdout"].as_str().expect("stdout");
    assert!(stdout.contains(SECRET), "{stdout}");
}

/// Without a sandbox the terminal is the command's controlling terminal: `/dev/tty` opens
/// and a resize reaches it as `SIGWINCH`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsandboxed_pty_is_the_controlling_terminal() {
    let env = AppEnv::with_config("sandbox_mode = \"danger-full-access\"").await;
    let mut client = env.spawn();
    client.initialize().await;
    let script = "exec 3</dev/tty && echo has-ctty; trap 'stty size' WINCH; echo ready; while :; do sleep 0.1; done";
    let id = client
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", script], "processId": "ctty", "tty": true}),
        )
        .await;
    let seen = wait_for_output(&mut client, "ready").await;
    assert!(seen.contains("has-ctty"), "{seen:?}");
    client
        .ok(
            "command/exec/resize",
            json!({"processId": "ctty", "size": {"rows": 50, "cols": 132}}),
        )
        .await;
    wait_for_output(&mut client, "50 132").await;
    client
        .ok("command/exec/terminate", json!({"processId": "ctty"}))
        .await;
    let (_, response) = until_response(&mut client, id).await;
    assert_eq!(response["result"]["exitCode"], 137, "{response}");
}

/// The server stops (its stdin closes) while a command runs: the command dies with it and
/// the server still exits promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_shutdown_kills_running_commands() {
    let (env, mut client, _) = server("").await;
    let marker = env.work_path().join("survived-the-server");
    let script = format!(
        "echo started; sleep 2; touch '{}'; sleep 60",
        marker.display()
    );
    client
        .request(
            "command/exec",
            json!({"command": ["sh", "-c", script], "processId": "long", "streamStdoutStderr": true, "disableTimeout": true}),
        )
        .await;
    wait_for_output(&mut client, "started").await;
    let app_server_support::Wire::Stdio(process) = &mut client.wire else {
        panic!("stdio client");
    };
    process.close_stdin();
    process
        .wait_exit(READ_DEADLINE)
        .await
        .expect("the server exits once its stdin closes");
    assert!(
        !appears(&marker, Duration::from_secs(4)).await,
        "the command outlived the server"
    );
}
