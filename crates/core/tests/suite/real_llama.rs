//! The engine against a real `llama-server` running a real open model (SmolLM2-135M on
//! the CPU), for what does not depend on the model's intelligence: streaming and usage,
//! a prompt larger than `n_ctx`, an interrupt mid-stream, tools with and without a
//! template that renders them.
//!
//! `scripts/llama-server` builds the server from a pinned sdist and sets
//! `INTERPRETER_LLAMA_SERVER`, `INTERPRETER_LLAMA_MODEL` and `INTERPRETER_LLAMA_TEMPLATES`
//! (`scripts/test` does this). Without them every test here prints a note and passes, so
//! a plain `cargo nextest run` stays fast.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_core::config::{ConfigInputs, ConfigOverrides, load_config};
use interpreter_core::{Thread, ThreadManager};
use interpreter_protocol::{
    AskForApproval, ErrorKind, EventMsg, Op, SandboxMode, SessionSource, UserInput,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Deadline for one turn on 2 busy cores.
const TURN_DEADLINE: Duration = Duration::from_secs(300);
/// Deadline for the server to load the model and answer `/health`.
const START_DEADLINE: Duration = Duration::from_secs(60);

struct Paths {
    server: PathBuf,
    model: PathBuf,
    templates: PathBuf,
}

impl Paths {
    /// llama-server's arguments for a chat template that renders tools (Qwen2.5's; the
    /// model's own has none).
    fn tool_template(&self) -> Vec<String> {
        let template = self.templates.join("Qwen-Qwen2.5-7B-Instruct.jinja");
        vec![
            "--jinja".to_string(),
            "--chat-template-file".to_string(),
            template.display().to_string(),
        ]
    }
}

fn paths(test: &str) -> Option<Paths> {
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    match (
        var("INTERPRETER_LLAMA_SERVER"),
        var("INTERPRETER_LLAMA_MODEL"),
        var("INTERPRETER_LLAMA_TEMPLATES"),
    ) {
        (Some(server), Some(model), Some(templates)) => Some(Paths {
            server,
            model,
            templates,
        }),
        _ => {
            eprintln!(
                "skipping {test}: INTERPRETER_LLAMA_SERVER / _MODEL / _TEMPLATES are not set (run `eval \"$(scripts/llama-server)\"` or scripts/test)"
            );
            None
        }
    }
}

/// A llama-server child on a free loopback port, killed on drop.
struct LlamaServer {
    child: Child,
    port: u16,
    _log_dir: tempfile::TempDir,
}

impl LlamaServer {
    async fn start(paths: &Paths, n_ctx: u32, extra: &[String]) -> Self {
        let port = interpreter_test_support::free_loopback_port().unwrap();
        let log_dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(log_dir.path().join("server.log")).unwrap();
        let child = Command::new(&paths.server)
            .arg("-m")
            .arg(&paths.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", "2", "-c", &n_ctx.to_string(), "--no-webui"])
            // No weight repacking: on CPUs with AMX, llama.cpp's AMX repack backend
            // crashes the server during warm-up on some hypervisors (seen on the CI
            // machines). The tests measure our client, not the kernel llama.cpp picks.
            .arg("--no-repack")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start llama-server");
        let mut server = Self {
            child,
            port,
            _log_dir: log_dir,
        };
        let started = Instant::now();
        while !server.healthy().await {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "llama-server exited ({status}) before it became healthy; log:\n{}",
                    std::fs::read_to_string(server._log_dir.path().join("server.log"))
                        .unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "llama-server did not become healthy; log:\n{}",
                std::fs::read_to_string(server._log_dir.path().join("server.log"))
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        server
    }

    /// `GET /health` answers 200 (every read bounded by a deadline).
    async fn healthy(&self) -> bool {
        let probe = async {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .ok()?;
            stream
                .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                .await
                .ok()?;
            let mut buf = Vec::new();
            stream.read_to_end(&mut buf).await.ok()?;
            Some(buf.starts_with(b"HTTP/1.1 200") || buf.starts_with(b"HTTP/1.0 200"))
        };
        tokio::time::timeout(Duration::from_secs(2), probe)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `extra` goes to the top level, `provider_extra` into the provider table.
fn config(
    home: &Path,
    cwd: &Path,
    server: &LlamaServer,
    extra: &str,
    provider_extra: &str,
) -> interpreter_core::config::Config {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"smollm2\"\nmodel_provider = \"llama\"\n{extra}\n[model_providers.llama]\nname = \"llama.cpp\"\nbase_url = \"{}\"\nstream_max_retries = 1\nrequest_max_retries = 1\n{provider_extra}",
            server.base_url()
        ),
    )
    .unwrap();
    load_config(ConfigInputs {
        home: home.to_path_buf(),
        cwd: cwd.to_path_buf(),
        profile: None,
        cli_overrides: Vec::new(),
        overrides: ConfigOverrides {
            approval_policy: Some(AskForApproval::Never),
            sandbox_mode: Some(SandboxMode::ReadOnly),
            ..Default::default()
        },
        strict: true,
        env: HashMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        sandbox_exe: None,
        ..Default::default()
    })
    .unwrap()
}

async fn submit(thread: &Arc<Thread>, text: &str) {
    thread
        .submit(Op::UserInput {
            items: vec![UserInput::Text {
                text: text.to_string(),
            }],
        })
        .await
        .unwrap();
}

async fn until_turn_end(thread: &Thread) -> Vec<EventMsg> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + TURN_DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, thread.next_event())
            .await
            .expect("turn deadline")
            .expect("thread closed");
        let done = matches!(
            event.msg,
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_)
        );
        seen.push(event.msg);
        if done {
            return seen;
        }
    }
}

fn completed_without_error(events: &[EventMsg]) -> bool {
    matches!(events.last(), Some(EventMsg::TaskComplete(done)) if done.error.is_none())
}

fn warnings(events: &[EventMsg]) -> Vec<String> {
    events
        .iter()
        .filter_map(|m| match m {
            EventMsg::Warning(w) => Some(w.message.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_streams_an_answer_with_usage_and_warns_that_tools_are_dropped() {
    let Some(paths) = paths("real_server_streams_an_answer_with_usage") else {
        return;
    };
    let server = LlamaServer::start(&paths, 4096, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(
                home.path(),
                work.path(),
                &server,
                "model_max_output_tokens = 48\n",
                "",
            ),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit(&new.thread, "Say hello in one short sentence.").await;
    let events = until_turn_end(&new.thread).await;
    assert!(completed_without_error(&events), "{events:#?}");
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::AgentMessageDelta(_))),
        "streamed: {events:#?}"
    );
    let usage = events.iter().find_map(|m| match m {
        EventMsg::TokenCount(count) => count.info.clone(),
        _ => None,
    });
    let usage = usage.expect("token count");
    assert!(usage.last_token_usage.input_tokens > 0);
    assert_eq!(usage.model_context_window, Some(4096), "n_ctx from /props");
    // SmolLM2's own template has no tools: the server drops them, and the user is told.
    assert!(
        warnings(&events).iter().any(|w| w.contains("--jinja")),
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_prompt_over_n_ctx_ends_in_one_clear_error_and_the_thread_goes_on() {
    let Some(paths) = paths("real_server_prompt_over_n_ctx") else {
        return;
    };
    let server = LlamaServer::start(&paths, 2048, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = config(
        home.path(),
        work.path(),
        &server,
        "model_max_output_tokens = 32\n",
        "",
    );
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg.clone(), SessionSource::Exec)
        .await
        .unwrap();
    // About 3,000 tokens of text: more than the whole window.
    submit(&new.thread, &"word ".repeat(3000)).await;
    let events = until_turn_end(&new.thread).await;
    let errors: Vec<_> = events
        .iter()
        .filter_map(|m| match m {
            EventMsg::Error(e) => Some(e.clone()),
            _ => None,
        })
        .collect();
    match events.last() {
        // Either the error (the message alone does not fit) ...
        Some(EventMsg::TaskComplete(done)) if done.error.is_some() => {
            eprintln!("over n_ctx: the turn failed with {:?}", done.error);
            assert_eq!(errors.len(), 1, "{events:#?}");
            assert_eq!(errors[0].kind, Some(ErrorKind::ContextWindowExceeded));
            assert!(errors[0].message.contains("2048"), "{}", errors[0].message);
        }
        // ... or a compaction that made it fit.
        Some(EventMsg::TaskComplete(_)) => {
            eprintln!("over n_ctx: compacted and answered");
            assert!(
                events
                    .iter()
                    .any(|m| matches!(m, EventMsg::ContextCompacted(_))),
                "{events:#?}"
            )
        }
        other => panic!("unexpected end {other:?}"),
    }

    submit(&new.thread, "Say hi.").await;
    let events = until_turn_end(&new.thread).await;
    assert!(completed_without_error(&events), "next turn: {events:#?}");

    // And after a resume.
    let thread_id = new.thread_id;
    drop(new);
    drop(manager);
    let manager = ThreadManager::new();
    let resumed = manager.resume_thread(cfg, thread_id).await.unwrap();
    submit(&resumed.thread, "Say hi again.").await;
    let events = until_turn_end(&resumed.thread).await;
    assert!(completed_without_error(&events), "resumed: {events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_interrupt_mid_stream_aborts_and_the_next_turn_runs() {
    let Some(paths) = paths("real_server_interrupt_mid_stream") else {
        return;
    };
    let server = LlamaServer::start(&paths, 4096, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(
                home.path(),
                work.path(),
                &server,
                "model_max_output_tokens = 600\n",
                "",
            ),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit(&new.thread, "Write a very long story about a cat.").await;
    let deadline = Instant::now() + TURN_DEADLINE;
    let mut interrupted = false;
    let end = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, new.thread.next_event())
            .await
            .expect("turn deadline")
            .expect("thread closed");
        match event.msg {
            EventMsg::AgentMessageDelta(_) if !interrupted => {
                interrupted = true;
                new.thread.submit(Op::Interrupt).await.unwrap();
            }
            msg @ (EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_)) => break msg,
            _ => {}
        }
    };
    assert!(interrupted, "no delta arrived before the end: {end:?}");
    assert!(matches!(end, EventMsg::TurnAborted(_)), "{end:?}");

    let mut cfg_note = String::new();
    cfg_note.push_str("Say hi.");
    submit(&new.thread, &cfg_note).await;
    let events = until_turn_end(&new.thread).await;
    assert!(completed_without_error(&events), "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_with_a_tool_template_takes_tools_without_a_warning() {
    let Some(paths) = paths("real_server_with_a_tool_template") else {
        return;
    };
    let server = LlamaServer::start(&paths, 4096, &paths.tool_template()).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(
            config(
                home.path(),
                work.path(),
                &server,
                "model_max_output_tokens = 48\n",
                // A small model may write tool markup: recovery stays off here, the test
                // is about the server taking the tools.
                "text_tool_calls = false\n",
            ),
            SessionSource::Exec,
        )
        .await
        .unwrap();
    submit(&new.thread, "Say hello.").await;
    // The first answer is enough (a small model calling tools could go on for long):
    // once its usage is counted, the turn is interrupted.
    let deadline = Instant::now() + TURN_DEADLINE;
    let mut events = Vec::new();
    let mut interrupted = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, new.thread.next_event())
            .await
            .expect("turn deadline")
            .expect("thread closed");
        let end = matches!(
            event.msg,
            EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_)
        );
        if matches!(event.msg, EventMsg::TokenCount(_)) && !interrupted {
            interrupted = true;
            new.thread.submit(Op::Interrupt).await.unwrap();
        }
        events.push(event.msg);
        if end {
            break;
        }
    }
    assert!(
        events.iter().any(|m| matches!(m, EventMsg::TokenCount(_))),
        "the server answered a request with tools: {events:#?}"
    );
    assert!(
        !events.iter().any(|m| matches!(m, EventMsg::Error(_))),
        "{events:#?}"
    );
    assert!(
        !warnings(&events).iter().any(|w| w.contains("--jinja")),
        "tools are rendered, no warning: {events:#?}"
    );
}

/// The same server over `wire_api = "responses"` (llama-server's `POST /v1/responses`):
/// it takes a history with a function call and its output as this client sends them, a
/// turn streams an answer with usage, a prompt over the window ends in one clear error
/// or a compaction, and the thread goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_over_the_responses_wire_answers_and_survives_an_overflow() {
    let Some(paths) = paths("real_server_over_the_responses_wire") else {
        return;
    };
    let server = LlamaServer::start(&paths, 2048, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = config(
        home.path(),
        work.path(),
        &server,
        "model_max_output_tokens = 32\n",
        "wire_api = \"responses\"\n",
    );
    // The server takes a history with a function call and its output, as this client
    // sends them back.
    assert_takes_a_tool_call_history(&cfg).await;
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg, SessionSource::Exec)
        .await
        .unwrap();
    submit(&new.thread, "Say hello in one short sentence.").await;
    let events = until_turn_end(&new.thread).await;
    assert!(completed_without_error(&events), "{events:#?}");
    assert!(
        events
            .iter()
            .any(|m| matches!(m, EventMsg::AgentMessageDelta(_))),
        "streamed: {events:#?}"
    );
    assert_counted_input(&events);

    overflow_then_next_turn(&new.thread).await;
}

/// The same server over `wire_api = "messages"` (llama-server's `POST /v1/messages`):
/// an engine turn streams an answer with usage; the server takes a history with a
/// `tool_use` and its `tool_result` exactly as this client spells them; it counts a
/// prompt's tokens at `/v1/messages/count_tokens`; a prompt over the window ends in one
/// clear error or a compaction, and the thread goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_over_the_messages_wire_answers_takes_tool_blocks_and_survives_an_overflow() {
    let Some(paths) = paths("real_server_over_the_messages_wire") else {
        return;
    };
    let server = LlamaServer::start(&paths, 2048, &paths.tool_template()).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cfg = config(
        home.path(),
        work.path(),
        &server,
        "model_max_output_tokens = 32\n",
        "wire_api = \"messages\"\ntext_tool_calls = false\n",
    );

    // The client alone: a tool call and its result, as this client sends them back.
    let (client, prompt) = assert_takes_a_tool_call_history(&cfg).await;
    let counted = client.count_prompt_tokens(&prompt).await;
    assert!(counted.is_some_and(|n| n > 10), "count_tokens: {counted:?}");
    let cancel = tokio_util::sync::CancellationToken::new();

    // Thinking on (`thinking.budget_tokens` below `max_tokens`) and an earlier turn's
    // thinking and redacted-thinking blocks sent back with their signatures: the server
    // takes the request. Its first streamed event is enough.
    let thinking = interpreter_model_client::ModelClient::new(
        "llama".into(),
        cfg.model_provider.clone(),
        "smollm2".into(),
        Some(interpreter_protocol::ReasoningEffort::Low),
        &HashMap::new(),
    )
    .unwrap();
    let mut with_thinking = prompt.clone();
    with_thinking.max_output_tokens = Some(2048);
    with_thinking.input.insert(
        1,
        interpreter_protocol::ResponseItem::Reasoning {
            summary: Vec::new(),
            content: Some(vec![
                interpreter_protocol::ReasoningContent::ReasoningText {
                    text: "I will run ls.".into(),
                },
            ]),
            encrypted_content: Some("sig-1".into()),
            wire_field: Some("thinking".into()),
        },
    );
    with_thinking.input.insert(
        2,
        interpreter_protocol::ResponseItem::Reasoning {
            summary: Vec::new(),
            content: None,
            encrypted_content: Some("opaque".into()),
            wire_field: Some("redacted_thinking".into()),
        },
    );
    let mut stream = tokio::time::timeout(TURN_DEADLINE, thinking.stream(&with_thinking, &cancel))
        .await
        .expect("request deadline")
        .expect("the server takes thinking and the thinking blocks");
    let first = tokio::time::timeout(TURN_DEADLINE, async {
        loop {
            match stream.next().await {
                Some(Ok(interpreter_model_client::ResponseEvent::Created)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("stream deadline");
    assert!(matches!(first, Some(Ok(_))), "{first:?}");
    drop(stream);

    // The engine: a turn, an overflow, the next turn.
    let manager = ThreadManager::new();
    let new = manager
        .start_thread(cfg, SessionSource::Exec)
        .await
        .unwrap();
    submit(&new.thread, "Say hello in one short sentence.").await;
    let events = until_turn_end(&new.thread).await;
    assert!(completed_without_error(&events), "{events:#?}");
    assert_counted_input(&events);

    overflow_then_next_turn(&new.thread).await;
}

/// One request straight from the client, with a history holding a tool call and its
/// output, streamed to its end: the server took the shapes this client sends back on the
/// provider's wire. Returns the client and the prompt for more.
async fn assert_takes_a_tool_call_history(
    cfg: &interpreter_core::config::Config,
) -> (
    interpreter_model_client::ModelClient,
    interpreter_model_client::Prompt,
) {
    let client = interpreter_model_client::ModelClient::new(
        "llama".into(),
        cfg.model_provider.clone(),
        "smollm2".into(),
        None,
        &HashMap::new(),
    )
    .unwrap();
    let prompt = interpreter_model_client::Prompt {
        instructions: "You are terse.".into(),
        input: vec![
            interpreter_protocol::ResponseItem::user_text("List the files."),
            interpreter_protocol::ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: r#"{"command": ["ls"]}"#.into(),
                call_id: "toolu_01".into(),
            },
            interpreter_protocol::ResponseItem::FunctionCallOutput {
                call_id: "toolu_01".into(),
                output: "a.txt\nb.txt".into(),
            },
        ],
        tools: vec![interpreter_model_client::ToolSpec {
            name: "shell".into(),
            description: "Runs a command.".into(),
            parameters: serde_json::json!({"type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                "required": ["command"]}),
        }],
        max_output_tokens: Some(16),
        ..Default::default()
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut stream = tokio::time::timeout(TURN_DEADLINE, client.stream(&prompt, &cancel))
        .await
        .expect("request deadline")
        .expect("the server takes a tool call and its output");
    let mut completed = false;
    while let Some(event) = tokio::time::timeout(TURN_DEADLINE, stream.next())
        .await
        .expect("stream deadline")
    {
        if let interpreter_model_client::ResponseEvent::Completed { token_usage, .. } =
            event.expect("stream event")
        {
            assert!(token_usage.input_tokens > 10, "{token_usage:?}");
            completed = true;
        }
    }
    assert!(completed, "the answer completed");
    (client, prompt)
}

/// The turn's events report usage, with input tokens.
fn assert_counted_input(events: &[EventMsg]) {
    let usage = events
        .iter()
        .find_map(|m| match m {
            EventMsg::TokenCount(count) => count.info.clone(),
            _ => None,
        })
        .expect("token count");
    assert!(usage.last_token_usage.input_tokens > 0, "{usage:?}");
}

/// A prompt over the window ends in one clear overflow error or a compaction, and the
/// thread's next turn runs.
async fn overflow_then_next_turn(thread: &Arc<Thread>) {
    submit(thread, &"word ".repeat(3000)).await;
    let events = until_turn_end(thread).await;
    match events.last() {
        Some(EventMsg::TaskComplete(done)) if done.error.is_some() => {
            let errors: Vec<_> = events
                .iter()
                .filter_map(|m| match m {
                    EventMsg::Error(e) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(errors.len(), 1, "{events:#?}");
            assert_eq!(errors[0].kind, Some(ErrorKind::ContextWindowExceeded));
        }
        Some(EventMsg::TaskComplete(_)) => assert!(
            events
                .iter()
                .any(|m| matches!(m, EventMsg::ContextCompacted(_))),
            "{events:#?}"
        ),
        other => panic!("unexpected end {other:?}"),
    }
    submit(thread, "Say hi.").await;
    let events = until_turn_end(thread).await;
    assert!(completed_without_error(&events), "next turn: {events:#?}");
}
