//! A hostile model against the user's terminal: escape sequences in its answer, its
//! reasoning, the output of a command it runs and a provider error body are shown as
//! visible text by exec's human mode and by `threads show`, never passed through raw.

use crate::exec_support;

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::json;

/// OSC 52 (write the clipboard), OSC 0 (window title), clear screen, a C1 CSI, DEL.
const ATTACK: &str = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x1b[2J\u{9b}31m\u{7f}";

/// The raw bytes a terminal would act on. Colour is off in these runs, so none of our
/// own styling is expected either.
#[track_caller]
fn assert_inert(what: &str, text: &str) {
    for (name, needle) in [
        ("ESC", "\x1b"),
        ("BEL", "\x07"),
        ("C1 CSI", "\u{9b}"),
        ("DEL", "\u{7f}"),
    ] {
        assert!(
            !text.contains(needle),
            "{what} contains a raw {name}:\n{text:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_from_the_model_and_commands_are_shown_not_interpreted() {
    let env = TestEnv::new().await;
    let shell_args =
        json!({"command": "printf 'out:\\033]0;title\\007\\033[2J\\r\\n'"}).to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::reasoning(&format!("thinking {ATTACK}")),
        chunk::tool_call(0, "call_shell", "shell", &shell_args),
        chunk::finish("tool_calls"),
        chunk::usage(10, 5),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text(&format!("answer {ATTACK} end")),
        chunk::finish("stop"),
        chunk::usage(20, 6),
    ]));
    let out = env
        .run(&[
            "exec",
            "--color",
            "never",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "go",
        ])
        .await;
    out.assert_success();
    assert_inert("exec stdout", &out.stdout);
    assert_inert("exec stderr", &out.stderr);
    // Visible, not dropped: the user can see something odd was sent.
    assert!(
        out.stdout.contains(
            "answer \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\x7f end"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("out:\\x1b]0;title\\x07\\x1b[2J"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("thinking \\x1b]52"), "{}", out.stderr);

    let thread_id = out
        .stderr
        .lines()
        .find_map(|line| line.strip_prefix("session id: "))
        .expect("session id in the header")
        .trim()
        .to_string();
    let shown = env.run(&["threads", "show", &thread_id]).await;
    shown.assert_success();
    assert_inert("threads show stdout", &shown.stdout);
    assert_inert("threads show stderr", &shown.stderr);
    assert!(
        shown.stdout.contains("answer \\x1b]52;c;"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("out:\\x1b]0;title"),
        "{}",
        shown.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_body_with_escape_sequences_is_shown_inert() {
    let env = TestEnv::new().await;
    env.server.push(MockResponse::status(
        400,
        json!({"error": {"message": format!("bad request {ATTACK}")}}).to_string(),
    ));
    let out = env
        .run(&["exec", "--color", "never", "--skip-git-repo-check", "go"])
        .await;
    assert_ne!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_inert("exec stdout", &out.stdout);
    assert_inert("exec stderr", &out.stderr);
    assert!(out.stderr.contains("\\x1b]52"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_show_skips_a_50_mib_rollout_line_with_a_note() {
    let env = TestEnv::new().await;
    env.server.push(MockResponse::sse(vec![
        chunk::text("first answer"),
        chunk::finish("stop"),
        chunk::usage(10, 5),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    out.assert_success();
    let thread_id = out.thread_id();
    let rollout = env.rollout_file(&thread_id);
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&rollout)
            .expect("open rollout");
        let mut line = br#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"event_msg","payload":{"type":"agent_message","message":""#.to_vec();
        line.resize(50 * 1024 * 1024, b'a');
        line.extend_from_slice(b"\"}}\n");
        file.write_all(&line).expect("write the long line");
    }
    let lines_before = std::fs::read_to_string(&rollout)
        .map(|text| text.lines().count())
        .unwrap_or_default();

    let shown = env.run(&["threads", "show", &thread_id]).await;
    shown.assert_success();
    assert!(shown.stdout.contains("first answer"), "{}", shown.stdout);
    assert_eq!(
        shown
            .stderr
            .matches("skipped: 50 MiB, over the 8 MiB limit")
            .count(),
        1,
        "{}",
        shown.stderr
    );
    assert!(
        shown
            .stderr
            .contains(&format!("line {lines_before} skipped: 50 MiB")),
        "{}",
        shown.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_patch_on_a_device_link_or_a_fifo_fails_and_the_turn_goes_on() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    std::os::unix::fs::symlink("/dev/zero", work.join("zero.txt")).expect("symlink");
    let fifo = std::process::Command::new("mkfifo")
        .arg(work.join("pipe.txt"))
        .status()
        .expect("run mkfifo");
    assert!(fifo.success());
    for (call, path) in [("call_zero", "zero.txt"), ("call_pipe", "pipe.txt")] {
        let patch_args = json!({
            "input": format!("*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\n")
        })
        .to_string();
        env.server.push(MockResponse::sse(vec![
            chunk::tool_call(0, call, "apply_patch", &patch_args),
            chunk::finish("tool_calls"),
            chunk::usage(10, 5),
        ]));
    }
    env.server.push(MockResponse::sse(vec![
        chunk::text("gave up on those"),
        chunk::finish("stop"),
        chunk::usage(20, 6),
    ]));
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "edit them",
        ])
        .await;
    out.assert_success();
    let requests = env.server.requests();
    assert_eq!(requests.len(), 3, "stderr:\n{}", out.stderr);
    assert!(
        exec_support::request_mentions(
            &requests[1],
            "zero.txt: it is a character device, not a regular file"
        ),
        "{}",
        requests[1]["messages"]
    );
    assert!(
        exec_support::request_mentions(
            &requests[2],
            "pipe.txt: it is a FIFO (named pipe), not a regular file"
        ),
        "{}",
        requests[2]["messages"]
    );
    assert!(
        out.events()
            .iter()
            .any(|event| event["type"] == "turn.completed"),
        "{}",
        out.stdout
    );
}
