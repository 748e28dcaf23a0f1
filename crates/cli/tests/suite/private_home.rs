//! The agent's home is private whatever the umask: run through the real binary under
//! `umask 022` (what most systems default to), every directory the agent creates there
//! is 0700 and every file it writes 0600 — config edits (`mcp add`), stored keys
//! (`login`), rollouts and the state database of a turn that ran a command (`exec`), the
//! token files and the socket directory of the listeners. Another local user must not
//! read a command's output from a rollout.

#![cfg(unix)]

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::{MockModelServer, MockResponse};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

const DEADLINE: Duration = Duration::from_secs(90);

/// `interpreter ARGS` under `umask 022`, with `$HOME` = `user_home` and no
/// `INTERPRETER_HOME`: the agent's home is `user_home/.interpreter`, created by the agent.
fn under_umask(user_home: &Path, cwd: &Path, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg("umask 022; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_interpreter"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", user_home)
        .env("MOCK_API_KEY", "test-key")
        .kill_on_drop(true);
    command
}

/// Runs `command` to its end, feeding it `stdin`; fails the test unless it succeeds.
async fn run_to_end(mut command: tokio::process::Command, stdin: &str) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).await.expect("stdin");
    drop(pipe);
    let output = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("deadline")
        .expect("wait");
    assert!(output.status.success(), "{output:?}");
}

/// Starts a listener and waits for the stderr line holding `needle`.
async fn start_listener(
    user_home: &Path,
    cwd: &Path,
    args: &[&str],
    needle: &str,
) -> tokio::process::Child {
    let mut child = under_umask(user_home, cwd, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("listener");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.expect("stderr line") {
            if line.contains(needle) {
                return;
            }
        }
        panic!("the listener exited before printing {needle}");
    })
    .await
    .expect("listener start deadline");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

/// Every entry under `home` (itself included) that is not a 0700 directory, a 0600 file
/// or a 0600 socket, with its mode; and the names of the files seen.
fn open_entries(home: &Path) -> (Vec<String>, Vec<PathBuf>) {
    let mut open = Vec::new();
    let mut files = Vec::new();
    let mut pending = vec![home.to_path_buf()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).expect("metadata");
        let mode = metadata.mode() & 0o7777;
        let kind = metadata.file_type();
        let expected = if kind.is_dir() {
            pending.extend(
                std::fs::read_dir(&path)
                    .expect("read dir")
                    .map(|entry| entry.expect("entry").path()),
            );
            0o700
        } else if kind.is_file() || kind.is_socket() {
            files.push(path.strip_prefix(home).unwrap().to_path_buf());
            0o600
        } else {
            open.push(format!(
                "{} is neither a directory nor a file",
                path.display()
            ));
            continue;
        };
        if mode != expected {
            open.push(format!("{} {mode:04o}", path.display()));
        }
    }
    (open, files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_the_agent_writes_in_its_home_is_private_under_umask_022() {
    let user_home = tempfile::tempdir().expect("user home");
    let work = tempfile::tempdir().expect("work");
    let work = std::fs::canonicalize(work.path()).expect("canonical work");
    let home = user_home.path().join(".interpreter");

    // Config edits: the first creates the home and config.toml. (The server is removed
    // again: the turn below would wait for it to start.)
    for edit in [
        &["mcp", "add", "files", "--", "cat"][..],
        &["mcp", "remove", "files"],
    ] {
        run_to_end(under_umask(user_home.path(), &work, edit), "").await;
    }
    // A stored API key.
    run_to_end(
        under_umask(user_home.path(), &work, &["login", "--provider", "openai"]),
        "sk-private-home-test\n",
    )
    .await;

    // A turn that runs a command: its output goes to a rollout, the thread to the index.
    let model = MockModelServer::start().await.expect("mock model");
    model.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_1",
            "shell",
            &serde_json::json!({"command": "echo private-output"}).to_string(),
        ),
        chunk::finish("tool_calls"),
        chunk::usage(10, 5),
    ]));
    model.push(MockResponse::sse(vec![
        chunk::text("done"),
        chunk::finish("stop"),
        chunk::usage(20, 5),
    ]));
    // The model comes from `-c` only: the agent writes its home's config.toml itself.
    let base_url = format!("model_providers.mock.base_url=\"{}\"", model.base_url());
    let model_flags = [
        "-c",
        "model=\"mock-model\"",
        "-c",
        "model_provider=\"mock\"",
        "-c",
        "model_providers.mock.name=\"mock\"",
        "-c",
        &base_url,
        "-c",
        "model_providers.mock.env_key=\"MOCK_API_KEY\"",
        "-c",
        "model_providers.mock.wire_api=\"chat\"",
    ];
    let exec: Vec<&str> = [
        "exec",
        "--skip-git-repo-check",
        "-s",
        "danger-full-access",
        "-c",
        "approval_policy=\"never\"",
    ]
    .into_iter()
    .chain(model_flags)
    .chain(["run it"])
    .collect();
    run_to_end(under_umask(user_home.path(), &work, &exec), "").await;

    // The listeners' token files and socket directory.
    let mut listeners = Vec::new();
    for (args, needle) in [
        (
            &["app-server", "--listen", "unix://"][..],
            "listening on unix://",
        ),
        (
            &["app-server", "--listen", "ws://127.0.0.1:0"][..],
            "listening on ws://",
        ),
        (
            &["mcp-server", "--listen", "http://127.0.0.1:0/mcp"][..],
            "listening on http://",
        ),
    ] {
        let args: Vec<&str> = args.iter().copied().chain(model_flags).collect();
        listeners.push(start_listener(user_home.path(), &work, &args, needle).await);
    }
    let (open, files) = open_entries(&home);
    for mut listener in listeners {
        listener.start_kill().expect("kill");
        let _ = tokio::time::timeout(DEADLINE, listener.wait()).await;
    }

    assert_eq!(open, Vec::<String>::new(), "entries open to other users");
    for expected in [
        "config.toml",
        "credentials.json",
        "state.sqlite",
        "app-server-ws.token",
        "mcp-server.token",
    ] {
        assert!(
            files.iter().any(|file| file == Path::new(expected)),
            "{expected} was not written: {files:?}"
        );
    }
    let rollouts: Vec<&PathBuf> = files
        .iter()
        .filter(|file| {
            file.starts_with("sessions") && file.extension().is_some_and(|e| e == "jsonl")
        })
        .collect();
    assert_eq!(rollouts.len(), 1, "{files:?}");
    let rollout = std::fs::read_to_string(home.join(rollouts[0])).expect("rollout");
    assert!(
        rollout.contains("private-output"),
        "the command's output is in the rollout"
    );
    assert!(
        files
            .iter()
            .any(|file| file.starts_with("app-server-control")),
        "{files:?}"
    );
}
