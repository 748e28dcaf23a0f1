//! The interactive mode driven as a person would: the real binary on a pseudo-terminal,
//! keys typed into it, the screen read back. Every read has a deadline; the model is the
//! mock server at the HTTP layer.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::exec_support::TestEnv;
use expectrl::process::unix::{PtyStream, UnixProcess, WaitStatus};
use expectrl::stream::log::LogStream;
use expectrl::{ControlCode, Eof, Expect, Regex, Session};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::json;

/// Generous: a debug build on a loaded 2-core machine. Only a hang hits it.
const DEADLINE: Duration = Duration::from_secs(60);
const PROMPT: &str = "› ";
const ANSWER_PROMPT: &str = "[y/n/a] › ";

/// The test's stderr through `eprint!`, which the test harness captures (a plain
/// `std::io::stderr()` would bypass it under `cargo test`).
struct TestStderr;

impl Write for TestStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        eprint!("{}", String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The binary on a pseudo-terminal. What it prints is copied to the test's stderr, which
/// the runner shows when a test fails.
struct Terminal {
    session: Session<UnixProcess, LogStream<PtyStream, TestStderr>>,
}

impl Terminal {
    fn spawn(env: &TestEnv, args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_interpreter"));
        command.args(args);
        Self::spawn_command(env, command)
    }

    /// `command` (the binary, or a shell that runs it) in the test's environment.
    fn spawn_command(env: &TestEnv, mut command: Command) -> Self {
        command
            .current_dir(env.work_path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.home.path())
            .env("INTERPRETER_HOME", env.home.path())
            .env("MOCK_API_KEY", "test-key")
            .env("TERM", "xterm");
        let mut session = Session::spawn(command).expect("spawn on a pty");
        // Wide enough that no line the tests look for wraps.
        session
            .get_process_mut()
            .set_window_size(200, 50)
            .expect("window size");
        let mut session = expectrl::session::log(session, TestStderr).expect("log");
        session.set_expect_timeout(Some(DEADLINE));
        Self { session }
    }

    /// Wait for `needle`; returns everything up to and including it.
    #[track_caller]
    fn expect(&mut self, needle: &str) -> String {
        match self.session.expect(needle) {
            Ok(found) => String::from_utf8_lossy(found.as_bytes()).into_owned(),
            Err(err) => panic!("waiting for {needle:?}: {err}"),
        }
    }

    #[track_caller]
    fn expect_regex(&mut self, pattern: &str) -> Vec<String> {
        match self.session.expect(Regex(pattern)) {
            Ok(found) => found
                .matches()
                .map(|group| String::from_utf8_lossy(group).into_owned())
                .collect(),
            Err(err) => panic!("waiting for /{pattern}/: {err}"),
        }
    }

    fn line(&mut self, text: &str) {
        self.session.send_line(text).expect("type a line");
    }

    fn key(&mut self, key: ControlCode) {
        self.session.send(key).expect("type a key");
    }

    /// Wait for the process to end, and return its exit code.
    #[track_caller]
    fn wait_exit(&mut self) -> Option<i32> {
        if let Err(err) = self.session.expect(Eof) {
            panic!("waiting for the process to end: {err}");
        }
        let deadline = std::time::Instant::now() + DEADLINE;
        loop {
            match self.session.get_process().status() {
                Ok(WaitStatus::Exited(_, code)) => return Some(code),
                Ok(WaitStatus::Signaled(..)) => return None,
                _ => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the process did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The thread id from the session header.
    fn session_id(&mut self) -> String {
        self.expect("session id:");
        let groups =
            self.expect_regex("([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})");
        groups.last().cloned().expect("a thread id")
    }
}

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(10, 2),
    ])
}

fn shell_call(call_id: &str, command: &str) -> MockResponse {
    let arguments = json!({ "command": command }).to_string();
    MockResponse::sse(vec![
        chunk::tool_call(0, call_id, "shell", &arguments),
        chunk::finish("tool_calls"),
    ])
}

fn alive(pid: i32) -> bool {
    // A zombie still has a /proc entry; only a live process has a non-Z state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}

fn wait_for_pid(file: &Path) -> i32 {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "no pid file");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_runs_after_the_user_approves_it() {
    let env = TestEnv::new().await;
    env.server
        .push(shell_call("call_touch", "touch created.txt"));
    env.server.push(answer("Created the file."));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(
            &env,
            &["chat", "-a", "untrusted", "-s", "danger-full-access"],
        );
        term.expect("approval:");
        term.expect("untrusted");
        term.expect(PROMPT);
        term.line("please create the file");
        term.expect("Run `bash -lc 'touch created.txt'`? [y]es / [n]o / [a]lways for this session");
        term.expect(ANSWER_PROMPT);
        assert!(!env.work_path().join("created.txt").exists());
        // Anything but y/n/a asks again.
        term.line("maybe");
        term.expect("please answer y");
        term.expect(ANSWER_PROMPT);
        term.line("y");
        term.expect("succeeded");
        term.expect("Created the file.");
        term.expect(PROMPT);
        // Tab completes a slash command.
        term.line("/stat\t");
        term.expect("tokens used:");
        term.expect(PROMPT);
        term.key(ControlCode::EndOfTransmission);
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert!(env.work_path().join("created.txt").exists());
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1]["messages"].to_string();
    assert!(second.contains("call_touch"), "{second}");
    env.server.assert_invariants();

    // The line editor's history: the message, not the approval answers, private to the user.
    let history = env.home.path().join("history.txt");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(text.contains("please create the file"), "{text}");
    assert!(
        !text.lines().any(|line| line == "y" || line == "maybe"),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&history).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// The model's question is asked on the terminal; an option is picked by its number and
/// the model reads the option's label as the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_question_is_answered_on_the_terminal() {
    let env = TestEnv::new().await;
    let arguments = json!({"questions": [{
        "id": "db",
        "header": "Database",
        "question": "Which database should the tests use?",
        "options": [
            {"label": "sqlite", "description": "in-process"},
            {"label": "postgres", "description": "the local server"}
        ]
    }]})
    .to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_q", "request_user_input", &arguments),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(answer("Using postgres."));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat", "-s", "read-only"]);
        term.expect(PROMPT);
        term.line("set up the tests");
        term.expect("Which database should the tests use?");
        term.expect("2. postgres");
        term.expect("answer › ");
        term.line("2");
        term.expect("Using postgres.");
        term.expect(PROMPT);
        term.line("/exit");
        assert_eq!(term.wait_exit(), Some(0));
    });
    let requests = env.server.requests();
    let tools = requests[0]["tools"].to_string();
    assert!(tools.contains("request_user_input"), "{tools}");
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains(r#"{\"answers\":{\"db\":{\"answers\":[\"postgres\"]}}}"#),
        "{second}"
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_the_approval_question_denies() {
    let env = TestEnv::new().await;
    env.server
        .push(shell_call("call_touch", "touch created.txt"));
    env.server.push(answer("Understood, not creating it."));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(
            &env,
            &["chat", "-a", "untrusted", "-s", "danger-full-access"],
        );
        term.expect(PROMPT);
        term.line("please create the file");
        term.expect(ANSWER_PROMPT);
        term.key(ControlCode::EndOfText);
        term.expect("no answer: denied");
        term.expect("Understood, not creating it.");
        term.expect(PROMPT);
        term.line("/exit");
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert!(!env.work_path().join("created.txt").exists());
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_a_long_command_and_the_prompt_comes_back() {
    let env = TestEnv::new().await;
    env.server.push(shell_call(
        "call_sleep",
        "echo $$ > sleeper.pid; exec sleep 120",
    ));
    env.server.push(answer("Still here."));
    let pid_file = env.work_path().join("sleeper.pid");
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat", "-a", "never", "-s", "danger-full-access"]);
        term.expect(PROMPT);
        term.line("sleep for a while");
        term.expect("sleep 120");
        let sleeper = wait_for_pid(&pid_file);
        assert!(alive(sleeper));
        term.key(ControlCode::EndOfText);
        term.expect("turn interrupted");
        term.expect(PROMPT);
        let deadline = std::time::Instant::now() + DEADLINE;
        while alive(sleeper) {
            assert!(
                std::time::Instant::now() < deadline,
                "the command outlived the interrupt"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The thread goes on after the interrupt.
        // Alt-Enter (ESC CR) continues the message on a new line.
        term.session.send("are you\x1b\rthere?\r").expect("type");
        term.expect("Still here.");
        term.expect(PROMPT);
        term.line("/exit");
        assert_eq!(term.wait_exit(), Some(0));
    });
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("are you\\nthere?"),
        "{}",
        requests[1]["messages"]
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_leaves() {
    let env = TestEnv::new().await;
    // The model starts answering and then never finishes.
    env.server
        .push(MockResponse::sse_then_stall(vec![chunk::text(
            "Thinking it over",
        )]));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat", "-a", "never", "-s", "read-only"]);
        let id = term.session_id();
        term.expect(PROMPT);
        term.line("a question that is never answered");
        term.expect("Thinking it over");
        term.key(ControlCode::EndOfText);
        term.expect("interrupting the turn (Ctrl-C again to leave)");
        // Whether the interrupted turn is still stopping or the prompt is back, the
        // second Ctrl-C leaves, the thread stopped cleanly.
        term.key(ControlCode::EndOfText);
        term.expect(&format!("/resume {id}"));
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert_eq!(env.server.requests().len(), 1);
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oss_opens_on_the_local_server_that_answers() {
    let env = TestEnv::new().await;
    env.server.set_models(&["pty-local-model"]);
    env.server.push(answer("Hello from the local server."));
    // Only llama.cpp's base URL has a server; the others are closed ports.
    let closed = || {
        let port = interpreter_test_support::free_loopback_port().unwrap();
        format!("http://127.0.0.1:{port}/v1")
    };
    env.write_raw_config(&format!(
        "[model_providers.ollama]\nname = \"Ollama\"\nbase_url = \"{}\"\n\
         [model_providers.lmstudio]\nname = \"LM Studio\"\nbase_url = \"{}\"\n\
         [model_providers.llamacpp]\nname = \"llama.cpp\"\nbase_url = \"{}\"\n\
         [model_providers.vllm]\nname = \"vLLM\"\nbase_url = \"{}\"\n",
        closed(),
        closed(),
        env.server.base_url(),
        closed()
    ));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["--oss"]);
        term.expect("--oss: using llama.cpp at");
        // The session header (its labels are bold).
        term.expect_regex("model:.*pty-local-model");
        term.expect_regex("provider:.*llamacpp");
        term.expect(PROMPT);
        term.line("hello");
        term.expect("Hello from the local server.");
        term.expect(PROMPT);
        term.key(ControlCode::EndOfTransmission);
        assert_eq!(term.wait_exit(), Some(0));
    });
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "pty-local-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_continues_an_earlier_thread_with_its_history() {
    let env = TestEnv::new().await;
    env.server.push(answer("Noted: pelican."));
    env.server.push(answer("The word was pelican."));
    let first_id = tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat"]);
        let id = term.session_id();
        term.expect(PROMPT);
        term.line("remember the word pelican");
        term.expect("Noted: pelican.");
        term.expect(PROMPT);
        term.line("/exit");
        term.expect(&format!("/resume {id}"));
        assert_eq!(term.wait_exit(), Some(0));
        id
    });
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat"]);
        let second_id = term.session_id();
        assert_ne!(second_id, first_id);
        term.expect(PROMPT);
        // Without an argument: this directory's threads, the earlier one among them.
        term.line("/resume");
        term.expect("recent threads in");
        term.expect(&first_id);
        term.expect(PROMPT);
        // The newest thread here is this session's own; --last means the one before it.
        term.line("/resume --last");
        // Where the thread left off is shown again.
        term.expect("remember the word pelican");
        term.expect("Noted: pelican.");
        term.expect(&format!("resumed thread {first_id}"));
        term.expect(PROMPT);
        term.line(&format!("/resume {first_id}"));
        term.expect("already on that thread");
        term.expect(PROMPT);
        // Usage so far is known before the next turn.
        term.line("/status");
        term.expect("tokens used:  12");
        term.expect(PROMPT);
        term.line("/model other-model");
        term.expect("model: other-model");
        term.expect(PROMPT);
        term.line("which word?");
        term.expect("The word was pelican.");
        term.expect(PROMPT);
        term.line("/status");
        term.expect("model:        other-model");
        term.expect(&format!("thread:       {first_id}"));
        // Usage carries over from the first session's turn.
        term.expect("tokens used:  24");
        term.expect(PROMPT);
        term.key(ControlCode::EndOfTransmission);
        assert_eq!(term.wait_exit(), Some(0));
    });
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["model"], "other-model");
    let history = requests[1]["messages"].to_string();
    assert!(
        history.contains("remember the word pelican") && history.contains("Noted: pelican."),
        "the resumed thread's request lacks the earlier turn: {history}"
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_interpreter_sends_its_prompt_and_asks_before_a_patch() {
    let env = TestEnv::new().await;
    let patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the patch\n*** End Patch";
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_patch",
            "apply_patch",
            &json!({ "input": patch }).to_string(),
        ),
        chunk::finish("tool_calls"),
    ]));
    // An answer in fragments: they stream onto one line.
    env.server.push(MockResponse::sse(vec![
        chunk::text("Wrote "),
        chunk::text("hello.txt "),
        chunk::text("for you."),
        chunk::finish("stop"),
        chunk::usage(10, 3),
    ]));
    tokio::task::block_in_place(|| {
        // No subcommand: the root form, with the first message as an argument.
        let mut term = Terminal::spawn(
            &env,
            &[
                "-a",
                "untrusted",
                "-s",
                "danger-full-access",
                "add a hello file",
            ],
        );
        term.expect("add a hello file");
        term.expect("A hello.txt");
        term.expect("+hello from the patch");
        term.expect("Apply these changes? [y]es / [n]o / [a]lways for this session");
        term.expect(ANSWER_PROMPT);
        term.line("a");
        term.expect("patch: completed");
        term.expect("Wrote hello.txt for you.");
        term.expect(PROMPT);
        // Ctrl-C with text typed clears the line and keeps the prompt...
        term.session.send("half a thought").expect("type");
        term.expect("half a thought");
        term.key(ControlCode::EndOfText);
        term.line("/approval");
        term.expect("approval: untrusted");
        term.expect(PROMPT);
        // ...and at an empty prompt it leaves.
        term.key(ControlCode::EndOfText);
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("hello.txt")).unwrap(),
        "hello from the patch\n"
    );
    assert_eq!(env.server.requests().len(), 2);
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_changes_carry_over_to_a_new_thread() {
    let env = TestEnv::new().await;
    env.server.push(answer("First answer."));
    env.server.push(shell_call("call_touch", "touch x.txt"));
    env.server.push(answer("Fine, no file."));
    let (first_id, second_id) = tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat", "-a", "never", "-s", "danger-full-access"]);
        let first_id = term.session_id();
        term.expect(PROMPT);
        term.line("first message");
        term.expect("First answer.");
        term.expect(PROMPT);
        term.line("/approval untrusted");
        term.expect("approval: untrusted");
        term.expect(PROMPT);
        term.line("/new");
        let second_id = term.session_id();
        term.expect(PROMPT);
        // The stricter policy holds in the new thread: the command is asked about.
        term.line("make x");
        term.expect("Run `bash -lc 'touch x.txt'`?");
        term.expect(ANSWER_PROMPT);
        term.line("n");
        term.expect("Fine, no file.");
        term.expect(PROMPT);
        term.line("/sandbox read-only");
        term.expect("sandbox: read-only");
        term.expect(PROMPT);
        term.line("/status");
        term.expect(&format!("thread:       {second_id}"));
        term.expect("approval:     untrusted");
        term.expect("sandbox:      read-only");
        term.expect(PROMPT);
        term.line("/sandbox wide-open");
        term.expect("unknown sandbox mode");
        term.expect(PROMPT);
        term.key(ControlCode::EndOfTransmission);
        assert_eq!(term.wait_exit(), Some(0));
        (first_id, second_id)
    });
    assert_ne!(first_id, second_id);
    assert!(!env.work_path().join("x.txt").exists());
    let requests = env.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !requests[1]["messages"]
            .to_string()
            .contains("first message")
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_at_the_prompt_leaves_cleanly() {
    let env = TestEnv::new().await;
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat"]);
        let id = term.session_id();
        term.expect(PROMPT);
        let pid = term.session.get_process().pid().as_raw();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        term.expect(&format!("/resume {id}"));
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert!(env.server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_at_an_approval_question_denies_and_leaves() {
    let env = TestEnv::new().await;
    env.server
        .push(shell_call("call_touch", "touch created.txt"));
    // The turn may or may not reach the model again before the interrupt lands.
    env.server.push(answer("Not creating it."));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(
            &env,
            &["chat", "-a", "untrusted", "-s", "danger-full-access"],
        );
        let id = term.session_id();
        term.expect(PROMPT);
        term.line("please create the file");
        term.expect(ANSWER_PROMPT);
        let pid = term.session.get_process().pid().as_raw();
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        term.expect("no answer: denied");
        term.expect(&format!("/resume {id}"));
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert!(!env.work_path().join("created.txt").exists());
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_bare_interpreter_prints_help_and_exits_2() {
    let env = TestEnv::new().await;
    let out = env.run(&[]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("interactive mode"), "{}", out.stderr);
    assert!(out.stderr.contains("Usage:"), "{}", out.stderr);
    let out = env.run(&["chat"]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("needs a terminal"), "{}", out.stderr);
    let out = env.run(&["-m", "x", "exec", "hi"]).await;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(env.server.requests().is_empty());
}

/// `interpreter login` on a terminal: the pasted key is stored but never echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_on_a_terminal_does_not_echo_the_key() {
    let env = TestEnv::new().await;
    // The pty starts with echo off; a real terminal has it on, so turn it on before the
    // binary starts (in the same process, so nothing races the binary's own switch).
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "stty echo && exec \"$0\" login --provider mock",
        env!("CARGO_BIN_EXE_interpreter"),
    ]);
    let mut term = Terminal::spawn_command(&env, command);
    term.expect("(it is not shown):");
    term.line("sk-pty-secret-4821");
    let rest = term.expect("stored the API key for `mock`");
    assert!(
        !rest.contains("sk-pty-secret-4821"),
        "the key was echoed: {rest:?}"
    );
    assert_eq!(term.wait_exit(), Some(0));
    let stored = std::fs::read_to_string(env.home.path().join("credentials.json")).unwrap();
    assert!(stored.contains("sk-pty-secret-4821"), "{stored}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_a_streamed_answer_are_shown_not_interpreted() {
    let env = TestEnv::new().await;
    // Split inside the sequences: each delta is neutralised on its own.
    env.server.push(MockResponse::sse(vec![
        chunk::text("look \x1b]5"),
        chunk::text("2;c;cm0gLXJmIH4=\x07 and \x1b]0;owned\x07\u{9b}2J"),
        chunk::text(" done-marker"),
        chunk::finish("stop"),
        chunk::usage(10, 2),
    ]));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(&env, &["chat"]);
        term.expect(PROMPT);
        term.line("hi");
        let screen = term.expect("done-marker");
        // The line editor and the renderer's colours draw with escape sequences of
        // their own; the model's must not reach the terminal.
        for raw in ["\x1b]52", "\x1b]0;owned", "\u{9b}", "\x07"] {
            assert!(
                !screen.contains(raw),
                "raw {raw:?} on the screen: {screen:?}"
            );
        }
        assert!(
            screen.contains("look \\x1b]52;c;cm0gLXJmIH4=\\x07 and \\x1b]0;owned\\x07\\x9b2J"),
            "{screen:?}"
        );
        term.expect(PROMPT);
        term.key(ControlCode::EndOfTransmission);
        assert_eq!(term.wait_exit(), Some(0));
    });
}

/// The engine's clock is the only one: at the engine's deadline a question nobody
/// answered is said to be timed out (declined), as on every other front end; a late
/// "yes" runs nothing, and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_times_out_on_the_engines_clock() {
    let env = TestEnv::new().await;
    env.write_raw_config(&env.server.config_toml(
        "approval_timeout_sec = 1",
        "wire_api = \"chat\"\nrequest_max_retries = 2",
        "",
    ));
    env.server.push(shell_call("call_late", "touch late.txt"));
    env.server.push(answer("Gave up on the file."));
    tokio::task::block_in_place(|| {
        let mut term = Terminal::spawn(
            &env,
            &["chat", "-a", "untrusted", "-s", "danger-full-access"],
        );
        term.expect(PROMPT);
        term.line("please create the file");
        term.expect("Run `bash -lc 'touch late.txt'`?");
        term.expect(ANSWER_PROMPT);
        // Nobody answers; the engine decides, and says so.
        term.expect("no answer within 1s (approval_timeout_sec): timed out, declined");
        // What is typed at the stale question goes nowhere.
        term.line("y");
        term.expect("Gave up on the file.");
        term.expect(PROMPT);
        term.line("/exit");
        assert_eq!(term.wait_exit(), Some(0));
    });
    assert!(!env.work_path().join("late.txt").exists());
    let told = env.server.requests()[1].to_string();
    assert!(
        told.contains("declined") || told.contains("timed out"),
        "{told}"
    );
    env.server.assert_invariants();
}
