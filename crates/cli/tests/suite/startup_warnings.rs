//! Start-up warnings are shown once, and a normal exit or stdin closing prints nothing
//! stray (no cancelled task, no panic). One configuration triggers every start-up warning
//! a front end can give: an unknown config key, `--add-dir` outside workspace-write, a
//! llama.cpp chat template that cannot render tools, and an MCP server that fails to
//! start. It runs through exec (human and `--json`) and through `mcp-server` with stdin
//! closed after one call. Logging is left at its default, as a user runs it.

use std::time::Duration;

use crate::exec_support::{RunOutput, TestEnv};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use serde_json::{Value, json};

/// Generous: a debug build on a loaded 2-core machine. Only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(60);

const UNKNOWN_KEY: &str = "ignoring unknown config key `mystery_key`";
const ADD_DIR: &str = "--add-dir has no effect";
const NO_TOOLS: &str = "cannot render tools";
const MCP_FAILED: &str = "handshake failed";
/// What must never be printed on the way out.
const STRAY: [&str; 3] = ["was cancelled", "panicked", "RUST_BACKTRACE"];

fn mock_mcp_server() -> std::path::PathBuf {
    interpreter_test_support::bins::mock_mcp_server(
        std::path::Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .expect("mock-mcp-server")
}

async fn warning_env() -> TestEnv {
    let env = TestEnv::new().await;
    env.write_raw_config(&format!(
        "model = \"mock-model\"\nmodel_provider = \"mock\"\nmystery_key = 1\n\n\
         [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nenv_key = \"MOCK_API_KEY\"\n\
         wire_api = \"chat\"\nrequest_max_retries = 0\n\n\
         [mcp_servers.broken]\ncommand = \"{}\"\nargs = [\"--crash\"]\n",
        env.server.base_url(),
        mock_mcp_server().display()
    ));
    env.server
        .set_props(json!({"chat_template_caps": {"supports_tools": false}}));
    env
}

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![chunk::text(text), chunk::finish("stop")])
}

#[track_caller]
fn assert_nothing_stray(stderr: &str) {
    for stray in STRAY {
        assert!(!stderr.contains(stray), "{stray:?} on stderr:\n{stderr}");
    }
}

#[track_caller]
fn assert_count(text: &str, needle: &str, expected: usize) {
    assert_eq!(
        text.matches(needle).count(),
        expected,
        "{needle:?} should appear {expected} time(s) in:\n{text}"
    );
}

/// Config warnings are log lines: at most once, however often the config is read (a
/// quieter log level may hide them).
#[track_caller]
fn assert_at_most_once(text: &str, needle: &str) {
    assert!(
        text.matches(needle).count() <= 1,
        "{needle:?} appears more than once in:\n{text}"
    );
}

#[track_caller]
fn assert_exec_output(out: &RunOutput, json: bool) {
    out.assert_success();
    assert_nothing_stray(&out.stderr);
    assert_at_most_once(&out.stderr, UNKNOWN_KEY);
    assert_at_most_once(&out.stderr, ADD_DIR);
    // The turn's own warnings: on stderr for people, as items on stdout under --json,
    // and not also as a log line.
    let (shown, other) = if json {
        (&out.stdout, &out.stderr)
    } else {
        (&out.stderr, &out.stdout)
    };
    assert_count(shown, NO_TOOLS, 1);
    assert_count(shown, MCP_FAILED, 1);
    assert_count(other, NO_TOOLS, 0);
    assert_count(other, MCP_FAILED, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shows_each_startup_warning_once() {
    let env = warning_env().await;
    let extra = env.work_path().join("extra");
    std::fs::create_dir(&extra).expect("extra dir");
    let extra = extra.display().to_string();
    for json in [false, true] {
        env.server.push(answer("done"));
        let mut args = vec!["exec", "--skip-git-repo-check", "--add-dir", &extra];
        if json {
            args.push("--json");
        }
        args.push("hello");
        let out = env.run(&args).await;
        assert_exec_output(&out, json);
    }
    assert_eq!(env.server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_shows_each_startup_warning_once_and_exits_quietly_on_eof() {
    let env = warning_env().await;
    env.server.push(answer("done"));
    let mut server =
        JsonLinesProcess::spawn(env.command(&["mcp-server"])).expect("spawn mcp-server");
    let request = |id: i64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    server
        .write_json(&request(
            1,
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            }),
        ))
        .await
        .expect("send initialize");
    server
        .read_until(DEADLINE, |m| m["id"] == 1)
        .await
        .expect("initialize answered");
    server
        .write_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .expect("send initialized");
    server
        .write_json(&request(
            2,
            "tools/call",
            json!({"name": "codex", "arguments": {"prompt": "hello"}}),
        ))
        .await
        .expect("send the call");
    let response = server
        .read_until(DEADLINE, |m| m["id"] == 2 && m.get("method").is_none())
        .await
        .expect("the call answered");
    assert_eq!(response["result"]["isError"], false, "{response}");

    server.close_stdin();
    let status = server.wait_exit(DEADLINE).await.expect("exit on EOF");
    assert!(status.success(), "{status:?}");
    let stderr = server.stderr();
    assert_nothing_stray(&stderr);
    // Read at start-up and again for the call: said once.
    assert_at_most_once(&stderr, UNKNOWN_KEY);
    // The client is told of these through the call's events, not the log.
    assert_count(&stderr, NO_TOOLS, 0);
    assert_count(&stderr, MCP_FAILED, 0);
    assert_eq!(env.server.requests().len(), 1);
}
