//! `--oss`: the local server that answers is used, in the documented order of
//! preference, with its model unless one is given; when none answers, exec fails with one
//! error line naming every URL tried and makes no model request, and the servers
//! (`mcp-server`, `app-server`) start anyway and report it per call. The four local
//! providers are pointed at mock servers and closed ports, so nothing on this machine is
//! probed.

use std::time::Duration;

use crate::exec_support::TestEnv;
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use interpreter_test_support::{MockModelServer, MockResponse};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Generous: a debug build on a loaded 2-core machine. Only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(60);

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![chunk::text(text), chunk::finish("stop")])
}

/// `http://127.0.0.1:PORT/v1` where nothing listens (the port was free a moment ago).
fn closed_port_url() -> String {
    let port = interpreter_test_support::free_loopback_port().expect("a free port");
    format!("http://127.0.0.1:{port}/v1")
}

/// A config with no model and the four local providers at these base URLs.
fn local_providers(ollama: &str, lmstudio: &str, llamacpp: &str, vllm: &str) -> String {
    [
        ("ollama", "Ollama", ollama),
        ("lmstudio", "LM Studio", lmstudio),
        ("llamacpp", "llama.cpp", llamacpp),
        ("vllm", "vLLM", vllm),
    ]
    .iter()
    .map(|(id, name, url)| {
        format!("[model_providers.{id}]\nname = \"{name}\"\nbase_url = \"{url}\"\n")
    })
    .collect::<Vec<_>>()
    .join("\n")
}

const EXEC_OSS: [&str; 4] = ["exec", "--json", "--skip-git-repo-check", "--oss"];

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    EXEC_OSS
        .iter()
        .copied()
        .chain(rest.iter().copied())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_answering_server_and_its_model_are_used() {
    let env = TestEnv::new().await;
    env.server.set_models(&["qwen2.5-coder:7b"]);
    env.server.push(answer("local hello"));
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &env.server.base_url(),
        &closed_port_url(),
    ));

    let out = env.run(&args(&["hello"])).await;
    out.assert_success();
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "qwen2.5-coder:7b");
    assert!(
        out.events()
            .iter()
            .any(|event| event["item"]["text"] == "local hello"),
        "{}",
        out.stdout
    );
    let said: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with("--oss:"))
        .collect();
    assert_eq!(
        said,
        vec![format!(
            "--oss: using llama.cpp at {} (model_provider llamacpp), model qwen2.5-coder:7b (the only one it serves)",
            env.server.base_url()
        )]
    );
    env.server.assert_invariants();
}

/// A local server that serves the Anthropic Messages API (llama.cpp, Ollama, vLLM) is
/// used over it when its provider says `wire_api = "messages"`, from the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answering_server_is_used_over_the_messages_wire_when_asked() {
    let env = TestEnv::new().await;
    env.server.set_models(&["qwen3"]);
    env.server.push(MockResponse::messages(
        interpreter_test_support::mock_model::messages_event::MessageEvents::new("m")
            .text("local messages hello")
            .end("end_turn", 5, 3),
    ));
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &env.server.base_url(),
        &closed_port_url(),
    ));
    let out = env
        .run(&args(&[
            "-c",
            "model_providers.llamacpp.wire_api=\"messages\"",
            "hello",
        ]))
        .await;
    out.assert_success();
    assert_eq!(env.server.endpoints(), vec!["/v1/messages".to_string()]);
    assert_eq!(env.server.requests()[0]["model"], "qwen3");
    assert!(
        out.events()
            .iter()
            .any(|event| event["item"]["text"] == "local messages hello"),
        "{}",
        out.stdout
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_is_preferred_when_several_answer() {
    let env = TestEnv::new().await;
    let vllm = MockModelServer::start().await.expect("second mock");
    env.server.set_models(&["llama3.2", "qwen3"]);
    env.server.push(answer("from ollama"));
    env.write_raw_config(&local_providers(
        &env.server.base_url(),
        &closed_port_url(),
        &closed_port_url(),
        &vllm.base_url(),
    ));

    let out = env.run(&args(&["hello"])).await;
    out.assert_success();
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1);
    // Several served: the first listed.
    assert_eq!(requests[0]["model"], "llama3.2");
    assert!(vllm.requests().is_empty(), "vLLM got a model request");
    assert!(
        out.stderr
            .contains("--oss: using Ollama at http://127.0.0.1:"),
        "{}",
        out.stderr
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_model_wins_over_the_servers() {
    let env = TestEnv::new().await;
    env.server.set_models(&["served-model"]);
    env.server.push(answer("ok"));
    env.write_raw_config(&format!(
        "model = \"from-config\"\n{}",
        local_providers(
            &closed_port_url(),
            &env.server.base_url(),
            &closed_port_url(),
            &closed_port_url(),
        )
    ));

    // `model` from the config is not served there: the server's model is used.
    let out = env.run(&args(&["hello"])).await;
    out.assert_success();
    assert!(
        out.stderr.contains(
            "model served-model (the first it lists: the configured model is not served there)"
        ),
        "{}",
        out.stderr
    );

    // -m always wins.
    env.server.push(answer("ok"));
    let out = env.run(&args(&["-m", "my-model", "hello"])).await;
    out.assert_success();
    assert!(
        out.stderr.contains("model my-model (as given)"),
        "{}",
        out.stderr
    );
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "served-model");
    assert_eq!(requests[1]["model"], "my-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_is_one_error_line_naming_each_url() {
    let env = TestEnv::new().await;
    // A server that is up but has no model list at this path, and three closed ports.
    let wrong_path = format!("{}/nope", env.server.base_url());
    let closed = [closed_port_url(), closed_port_url(), closed_port_url()];
    env.write_raw_config(&local_providers(
        &closed[0],
        &wrong_path,
        &closed[1],
        &closed[2],
    ));

    let out = env.run(&args(&["hello"])).await;
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.contains("Error"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    let line = errors[0];
    assert!(
        line.starts_with("Error: --oss: no local model server answered ("),
        "{line}"
    );
    for url in &closed {
        assert!(
            line.contains(&format!("cannot reach {url}/models")),
            "{line}"
        );
    }
    assert!(
        line.contains(&format!(
            "{wrong_path}/models is reachable but answered HTTP 404"
        )),
        "{line}"
    );
    assert!(
        line.contains("-c model_providers.ollama.base_url="),
        "{line}"
    );
    assert!(env.server.requests().is_empty(), "a model request was made");
}

/// `interpreter ARGS` with piped stdio in the test's home and work directory.
fn spawn(env: &TestEnv, args: &[&str]) -> JsonLinesProcess {
    JsonLinesProcess::spawn(env.command(args)).expect("spawn interpreter")
}

async fn rpc(process: &mut JsonLinesProcess, id: i64, method: &str, params: Value) -> Value {
    process
        .write_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await
        .expect("send a request");
    process
        .read_until(DEADLINE, |m| m["id"] == id && m.get("method").is_none())
        .await
        .unwrap_or_else(|err| panic!("no answer to {method}: {err:#}"))
}

/// `initialize`, then one `codex` call; returns the call's result.
async fn one_mcp_call(process: &mut JsonLinesProcess) -> Value {
    let init = rpc(
        process,
        1,
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        }),
    )
    .await;
    assert!(init.get("result").is_some(), "{init}");
    process
        .write_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .expect("send initialized");
    let response = rpc(
        process,
        2,
        "tools/call",
        json!({"name": "codex", "arguments": {"prompt": "hello"}}),
    )
    .await;
    response["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_uses_the_answering_server() {
    let env = TestEnv::new().await;
    env.server.set_models(&["local-coder"]);
    env.server.push(answer("served locally"));
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &closed_port_url(),
        &env.server.base_url(),
    ));
    let mut server = spawn(&env, &["mcp-server", "--oss"]);
    let result = one_mcp_call(&mut server).await;
    assert_eq!(result["isError"], false, "{result}");
    assert!(result.to_string().contains("served locally"), "{result}");
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "local-coder");
    server.close_stdin();
    assert!(server.wait_exit(DEADLINE).await.expect("exit").success());
    assert!(
        server
            .stderr()
            .contains("--oss: using vLLM at http://127.0.0.1:"),
        "{}",
        server.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_starts_when_nothing_answers_and_each_call_says_so() {
    let env = TestEnv::new().await;
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &closed_port_url(),
        &closed_port_url(),
    ));
    let mut server = spawn(&env, &["mcp-server", "--oss"]);
    let result = one_mcp_call(&mut server).await;
    assert_eq!(result["isError"], true, "{result}");
    server.close_stdin();
    assert!(server.wait_exit(DEADLINE).await.expect("exit").success());
    let stderr = server.stderr();
    assert!(
        stderr.contains("warning: --oss: no local model server answered ("),
        "{stderr}"
    );
    assert!(
        stderr.contains("serving anyway with model_provider ollama"),
        "{stderr}"
    );
    assert!(env.server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_threads_use_the_answering_server() {
    let env = TestEnv::new().await;
    env.server.set_models(&["lm-model"]);
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &env.server.base_url(),
        &closed_port_url(),
        &closed_port_url(),
    ));
    let mut server = spawn(&env, &["app-server", "--oss"]);
    let init = rpc(
        &mut server,
        1,
        "initialize",
        json!({"clientInfo": {"name": "test", "version": "1"}}),
    )
    .await;
    assert!(init.get("result").is_some(), "{init}");
    server
        .write_json(&json!({"jsonrpc": "2.0", "method": "initialized"}))
        .await
        .expect("send initialized");
    let started = rpc(&mut server, 2, "thread/start", json!({})).await;
    assert_eq!(started["result"]["modelProvider"], "lmstudio", "{started}");
    assert_eq!(started["result"]["model"], "lm-model", "{started}");
    server.close_stdin();
    assert!(server.wait_exit(DEADLINE).await.expect("exit").success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_choice_first_and_checks_that_server() {
    let env = TestEnv::new().await;
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &env.server.base_url(),
        &closed_port_url(),
    ));
    let out = env.run(&["doctor", "--oss", "--json"]).await;
    let report: Value = serde_json::from_str(&out.stdout).expect("one JSON report");
    let checks = report["checks"].as_array().expect("checks");
    assert_eq!(checks[0]["name"], "oss", "{report}");
    assert_eq!(checks[0]["status"], "ok", "{report}");
    let endpoint = checks
        .iter()
        .find(|check| check["name"] == "endpoint")
        .expect("endpoint check");
    assert_eq!(endpoint["status"], "ok", "{report}");
    assert!(
        endpoint["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(&env.server.base_url())),
        "{report}"
    );

    // Nothing answering: the oss check fails and says why, and so does the exit code.
    env.write_raw_config(&local_providers(
        &closed_port_url(),
        &closed_port_url(),
        &closed_port_url(),
        &closed_port_url(),
    ));
    let out = env.run(&["doctor", "--oss", "--json"]).await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    let report: Value = serde_json::from_str(&out.stdout).expect("one JSON report");
    assert_eq!(report["checks"][0]["status"], "fail", "{report}");
    assert!(
        report["checks"][0]["detail"]
            .as_str()
            .is_some_and(|detail| detail.starts_with("--oss: no local model server answered")),
        "{report}"
    );
}
