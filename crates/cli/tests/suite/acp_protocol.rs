//! `interpreter acp` over stdio against the mock model: initialize, prompts and their
//! stop reasons, tool calls and permissions, cancel, concurrent sessions, load after a
//! restart, and protocol errors.

use crate::acp_support;

use std::time::Duration;

use crate::acp_support::{AcpEnv, is_permission_request, text_of, tool_updates};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::{Value, json};

/// A 64 MiB line gets a JSON-RPC error (`-32600`, `id: null`), the server goes on
/// serving, and its peak memory grows by less than the line: the line is dropped as it
/// arrives past the 16 MiB bound, never held whole (measured before: 143 MiB on
/// app-server, 140 MiB on ACP). The same bound and answer on every stdio server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_line_is_refused_with_bounded_memory() {
    let env = AcpEnv::new().await;
    let mut client = env.start().await;
    let (answer, grew_kib) = client
        .process
        .huge_line_answer(64 * 1024 * 1024, Duration::from_secs(60))
        .await
        .expect("an answer to the huge line");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert!(grew_kib < 48 * 1024, "peak memory grew by {grew_kib} KiB");
    let listed = client.request("session/list", json!({})).await;
    assert!(listed["sessions"].is_array(), "{listed}");
    // A line that is not JSON: the same answer as on the other servers.
    client
        .send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\n")
        .await;
    let parse_error = client.read().await;
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], Value::Null, "{parse_error}");
}

fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// The final status a tool call reached in `updates`.
fn final_status(updates: &[Value], id: &str) -> Value {
    tool_updates(updates, id)
        .iter()
        .filter_map(|u| u.get("status").cloned())
        .next_back()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn acp_is_a_subcommand_with_help_not_a_prompt() {
    let env = AcpEnv::new().await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .args(["acp", "--help"])
        .env("INTERPRETER_HOME", env.home.path())
        .output()
        .expect("run --help");
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("Agent Client Protocol"), "{help}");
}

#[tokio::test]
async fn initialize_answers_with_honest_capabilities_and_no_model_server() {
    let env = AcpEnv::new().await;
    // Nothing listens where the config points: initialize must not need it.
    drop(env.model);
    let mut client = AcpEnv::spawn_from(&env.home, &env.work);
    let result = client
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(result["protocolVersion"], 1);
    let caps = &result["agentCapabilities"];
    assert_eq!(caps["loadSession"], true, "{result}");
    assert_eq!(caps["promptCapabilities"]["image"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["promptCapabilities"]["audio"], false);
    assert_eq!(caps["mcpCapabilities"]["http"], true);
    assert_eq!(caps["mcpCapabilities"]["sse"], false);
    for capability in ["list", "resume", "close", "delete"] {
        assert!(
            caps["sessionCapabilities"][capability].is_object(),
            "{capability}: {result}"
        );
    }
    assert_eq!(result["agentInfo"]["name"], "interpreter");
}

/// Found by Neovim + CodeCompanion.nvim: it sends `session/new` (and then a prompt)
/// right behind `initialize`, before the answer; the request was refused (-32600) and the
/// first message lost. Such requests wait for the answer and are served in order; one
/// sent before any `initialize` is still refused.
#[tokio::test]
async fn codecompanion_requests_sent_before_the_initialize_answer_are_queued() {
    let env = AcpEnv::new().await;
    env.script_text("Hello from the first message.");
    let mut client = env.spawn();
    let early = client
        .send_request(
            "session/new",
            json!({"cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    let refused = client.response(early).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");

    // Both lines in one write, as the editor's pipe delivers them.
    let (initialize, new) = (100, 101);
    let lines = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": initialize, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": new, "method": "session/new",
               "params": {"cwd": env.work_path(), "mcpServers": []}}),
    );
    client.send_raw(lines.as_bytes()).await;
    let answered = client.response(initialize).await;
    assert_eq!(answered["result"]["protocolVersion"], 1, "{answered}");
    let session = client.response(new).await;
    let session_id = session["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new was refused: {session}"))
        .to_string();
    let prompt = client.send_prompt(&session_id, "hi").await;
    let done = client.response(prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(
        client
            .updates(&session_id)
            .iter()
            .any(|u| u.to_string().contains("Hello from the first message.")),
        "{:?}",
        client.updates(&session_id)
    );
}

/// Found by acpx (`acpx set mode read-only` got `-32602 unknown config option 'mode'`)
/// and CodeCompanion.nvim (`session_config_options = { mode = … }` was ignored): the
/// mode and the reasoning effort are session config options beside the model, and a
/// change through either route is announced on the other.
#[tokio::test]
async fn acpx_mode_and_reasoning_effort_are_config_options() {
    let env = AcpEnv::new().await;
    env.script_text("first");
    env.script_text("second");
    let mut client = env.start().await;
    let result = client
        .request(
            "session/new",
            json!({"cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    let session = result["sessionId"].as_str().expect("sessionId").to_string();
    let option = |options: &Value, id: &str| -> Value {
        options
            .as_array()
            .and_then(|all| all.iter().find(|o| o["id"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("no `{id}` option in {options}"))
    };
    let options = &result["configOptions"];
    assert_eq!(
        option(options, "mode")["currentValue"],
        "workspace-write",
        "{options}"
    );
    assert_eq!(option(options, "mode")["category"], "mode");
    assert_eq!(option(options, "model")["currentValue"], "mock-model");
    assert_eq!(
        option(options, "reasoning_effort")["currentValue"],
        "default"
    );
    assert_eq!(
        option(options, "reasoning_effort")["category"],
        "thought_level"
    );

    // The mode as a config option (acpx `set mode read-only`).
    let answer = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "read-only"}),
        )
        .await;
    assert_eq!(
        option(&answer["configOptions"], "mode")["currentValue"],
        "read-only"
    );
    let update = client
        .read_until(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .await;
    assert_eq!(update["params"]["update"]["currentModeId"], "read-only");

    // The mode through session/set_mode: the config options follow.
    client.set_mode(&session, "full-access").await;
    let update = client
        .read_until(|m| m["params"]["update"]["sessionUpdate"] == "config_option_update")
        .await;
    assert_eq!(
        option(&update["params"]["update"]["configOptions"], "mode")["currentValue"],
        "full-access"
    );

    // The reasoning effort reaches the model from the next prompt on.
    let prompt = client.send_prompt(&session, "one").await;
    client.response(prompt).await;
    assert!(
        !env.model_request(0).contains("reasoning_effort"),
        "{}",
        env.model_request(0)
    );
    let answer = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "reasoning_effort", "value": "high"}),
        )
        .await;
    assert_eq!(
        option(&answer["configOptions"], "reasoning_effort")["currentValue"],
        "high"
    );
    let prompt = client.send_prompt(&session, "two").await;
    client.response(prompt).await;
    assert!(
        env.model_request(1)
            .contains(r#""reasoning_effort":"high""#),
        "{}",
        env.model_request(1)
    );
    // Back to `default` after a turn ran with `high`: the answer shows the configured
    // effort, not the one the thread ran with (found by acpx's test 9 once choices were
    // applied at once: acpx keeps the answer's value and sets it again later).
    let answer = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "reasoning_effort", "value": "default"}),
        )
        .await;
    assert_eq!(
        option(&answer["configOptions"], "reasoning_effort")["currentValue"],
        "default"
    );

    // Unknown options and values are invalid params, naming what exists.
    for (config, value) in [
        ("colour", "red"),
        ("mode", "yolo"),
        ("reasoning_effort", "max"),
    ] {
        let id = client
            .send_request(
                "session/set_config_option",
                json!({"sessionId": session, "configId": config, "value": value}),
            )
            .await;
        let refused = client.response(id).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
    env.model.assert_invariants();
}

#[tokio::test]
async fn prompt_streams_each_text_once_and_ends_end_turn() {
    let env = AcpEnv::new().await;
    env.script_streamed_text(&["Hel", "lo ", "there"]);
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let result = client
        .request("session/prompt", prompt_params(&session, "hi"))
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    let updates = client.updates(&session);
    assert_eq!(text_of(&updates, "agent_message_chunk"), "Hello there");
    env.model.assert_invariants();
}

#[tokio::test]
async fn a_failed_model_call_is_an_error_with_the_providers_message() {
    let env = AcpEnv::new().await;
    env.model.push(MockResponse::status(
        400,
        r#"{"error":{"message":"model mock-model does not exist","type":"invalid_request_error"}}"#,
    ));
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "hi").await;
    let response = client.response(id).await;
    let error = &response["error"];
    assert_eq!(error["code"], -32603, "{response}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not exist"), "{response}");
    assert!(!message.contains('\n'), "{response}");
    // What the turn did before it failed (nothing ran), for an agent driving ACP.
    assert_eq!(
        error["data"]["recap"],
        serde_json::json!({"commands": [], "filesChanged": [], "toolCalls": []}),
        "{response}"
    );
}

#[tokio::test]
async fn an_allowed_command_runs_and_its_tool_call_completes() {
    let env = AcpEnv::new().await;
    env.script_command_then_text("call-1", "printf hi > out.txt", "written");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "write it").await;
    let ask = client.read_until(is_permission_request).await;
    let tool_call = &ask["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "call-1", "{ask}");
    // The question is about a call the editor has already been shown.
    let announced = client.updates(&session);
    let card = tool_updates(&announced, "call-1");
    assert_eq!(card[0]["sessionUpdate"], "tool_call", "{announced:?}");
    assert_eq!(card[0]["kind"], "execute");
    assert!(
        card[0]["title"]
            .as_str()
            .unwrap_or_default()
            .contains("printf hi")
    );
    let options: Vec<&str> = ask["params"]["options"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    client.choose(&ask, "allow_once").await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("out.txt"))
            .ok()
            .as_deref(),
        Some("hi")
    );
    let updates = client.updates(&session);
    assert_eq!(final_status(&updates, "call-1"), "completed", "{updates:?}");
}

#[tokio::test]
async fn a_rejected_command_does_not_run_and_its_tool_call_fails() {
    let env = AcpEnv::new().await;
    env.script_command_then_text("call-1", "printf hi > out.txt", "ok, not written");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "write it").await;
    let ask = client.read_until(is_permission_request).await;
    client.choose(&ask, "reject_once").await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!env.work_path().join("out.txt").exists());
    let updates = client.updates(&session);
    assert_eq!(final_status(&updates, "call-1"), "failed", "{updates:?}");
}

#[tokio::test]
async fn a_failed_permission_request_denies() {
    let env = AcpEnv::new().await;
    env.script_command_then_text("call-1", "printf hi > out.txt", "not written");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "write it").await;
    let ask = client.read_until(is_permission_request).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32603, "message": "editor broke"}}))
        .await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!env.work_path().join("out.txt").exists());
}

#[tokio::test]
async fn cancel_during_a_command_kills_it_and_the_session_goes_on() {
    let env = AcpEnv::new().await;
    env.script_command("call-1", "sleep 2 && printf late > late.txt");
    env.script_text("after the cancel");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    client.set_mode(&session, "full-access").await;
    let id = client.send_prompt(&session, "run it").await;
    // The command has started once its card is in progress.
    client
        .read_until(|m| {
            m["params"]["update"]["toolCallId"] == "call-1"
                && m["params"]["update"]["status"] == "in_progress"
        })
        .await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let after_answer = client.take_seen();
    // Well past the command's own end: its write never lands.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !env.work_path().join("late.txt").exists(),
        "the cancelled command ran on"
    );
    let late = client
        .process
        .expect_none_within(Duration::from_millis(300), |m| {
            m["method"] == "session/update"
        })
        .await;
    assert!(
        late.is_ok(),
        "updates after the cancelled answer: {late:?} {after_answer:?}"
    );
    let result = client
        .request("session/prompt", prompt_params(&session, "again"))
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(
        text_of(&client.updates(&session), "agent_message_chunk"),
        "after the cancel"
    );
}

#[tokio::test]
async fn cancel_during_a_permission_question_withdraws_it() {
    let env = AcpEnv::new().await;
    env.script_command("call-1", "printf hi > out.txt");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "write it").await;
    let ask = client.read_until(is_permission_request).await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let withdrawn = client
        .read_until(|m| m["method"] == "$/cancel_request")
        .await;
    assert_eq!(withdrawn["params"]["requestId"], ask["id"], "{withdrawn}");
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    // An answer that arrives after the cancel changes nothing.
    client.choose(&ask, "allow_once").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!env.work_path().join("out.txt").exists());
}

/// One clock: the engine's deadline (`approval_timeout_sec`) times the question; when it
/// passes the engine decides (timed out, declined) and the editor's question is
/// withdrawn, as on every front end. (ACP had a timer of its own and called it denied.)
#[tokio::test]
async fn an_unanswered_permission_question_times_out_on_the_engines_clock() {
    let env = AcpEnv::new().await;
    let config = env.home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("approval_timeout_sec = 1\n{text}")).expect("config");
    env.script_command_then_text("call-1", "printf hi > out.txt", "gave up");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "write it").await;
    let ask = client.read_until(is_permission_request).await;
    let withdrawn = client
        .read_until(|m| m["method"] == "$/cancel_request")
        .await;
    assert_eq!(withdrawn["params"]["requestId"], ask["id"], "{withdrawn}");
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!env.work_path().join("out.txt").exists());
    // The model heard the engine's one outcome.
    let second = env.model_request(1);
    assert!(second.contains("declined"), "{second}");
}

#[tokio::test]
async fn two_sessions_prompting_at_once_each_get_only_their_own_updates() {
    let env = AcpEnv::new().await;
    env.script_text("first answer");
    env.script_text("second answer");
    let mut client = env.start().await;
    let a = client.new_session(&env.work_path()).await;
    let b = client.new_session(&env.work_path()).await;
    let id_a = client.send_prompt(&a, "one").await;
    let id_b = client.send_prompt(&b, "two").await;
    let mut answers = Vec::new();
    for id in [id_a, id_b] {
        let response = client.response(id).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    for session in [&a, &b] {
        let text = text_of(&client.updates(session), "agent_message_chunk");
        assert!(
            text == "first answer" || text == "second answer",
            "{session}: {text}"
        );
        answers.push(text);
    }
    assert_ne!(answers[0], answers[1]);
    let strangers: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter(|m| {
            m["params"]["sessionId"] != a.as_str() && m["params"]["sessionId"] != b.as_str()
        })
        .collect();
    assert!(strangers.is_empty(), "{strangers:?}");
}

#[tokio::test]
async fn load_after_a_restart_replays_the_history_before_answering() {
    let env = AcpEnv::new().await;
    env.script_command_then_text("call-1", "printf hi > out.txt", "wrote out.txt");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    client.set_mode(&session, "full-access").await;
    let result = client
        .request("session/prompt", prompt_params(&session, "please write"))
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    client.process.close_stdin();
    client
        .process
        .wait_exit(acp_support::READ_DEADLINE)
        .await
        .expect("agent exits at end of input");

    let mut client = env.start().await;
    let listed = client
        .request("session/list", json!({"cwd": env.work_path()}))
        .await;
    assert_eq!(
        listed["sessions"][0]["sessionId"],
        session.as_str(),
        "{listed}"
    );
    assert_eq!(listed["sessions"][0]["title"], "please write");
    let id = client
        .send_request(
            "session/load",
            json!({"sessionId": session, "cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    let response = client.response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let updates = client.updates(&session);
    assert_eq!(
        text_of(&updates, "user_message_chunk"),
        "please write",
        "{updates:?}"
    );
    assert_eq!(text_of(&updates, "agent_message_chunk"), "wrote out.txt");
    let card = tool_updates(&updates, "call-1");
    assert_eq!(card[0]["sessionUpdate"], "tool_call", "{updates:?}");
    assert_eq!(card[0]["status"], "completed");
}

#[tokio::test]
async fn malformed_input_gets_the_right_errors_and_the_agent_stays_up() {
    let env = AcpEnv::new().await;
    let mut client = env.start().await;

    client.send_raw(b"this is not json\n").await;
    let parse = client.read().await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);

    client.send_raw(b"\xff\xfe{\n").await;
    let parse = client.read().await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    // JSON that is not a request object is the SDK's to refuse (-32600), not a parse
    // error: found in review of the initialize gate, which reads each line's envelope.
    for line in [
        &b"[1,2]\n"[..],
        b"\"x\"\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":5}\n",
    ] {
        client.send_raw(line).await;
        let invalid = client.read().await;
        assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    }

    let id = client.send_request("session/fly", json!({})).await;
    let unknown = client.response(id).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    let id = client
        .send_request("session/new", json!({"cwd": 7, "mcpServers": []}))
        .await;
    let bad = client.response(id).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    let id = client
        .send_request(
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        )
        .await;
    let relative = client.response(id).await;
    assert_eq!(relative["error"]["code"], -32602, "{relative}");

    for session in ["0190f1b2-0000-7000-8000-000000000000", "not-a-session"] {
        let id = client.send_prompt(session, "hi").await;
        let missing = client.response(id).await;
        assert_eq!(missing["error"]["code"], -32002, "{missing}");
    }

    // Still serving.
    let session = client.new_session(&env.work_path()).await;
    assert!(!session.is_empty());
}

#[tokio::test]
async fn an_allowed_patch_shows_its_diff_and_completes() {
    let env = AcpEnv::new().await;
    env.script_patch("patch-1", "notes.txt");
    env.script_text("added notes");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "add notes").await;
    let ask = client.read_until(is_permission_request).await;
    let tool_call = &ask["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "patch-1", "{ask}");
    assert_eq!(tool_call["kind"], "edit");
    let diff = &tool_call["content"][0];
    assert_eq!(diff["type"], "diff", "{ask}");
    assert_eq!(diff["newText"], "hi\n");
    assert_eq!(diff["oldText"], Value::Null);
    assert!(
        diff["path"]
            .as_str()
            .unwrap_or_default()
            .ends_with("notes.txt")
    );
    client.choose(&ask, "allow_once").await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("notes.txt"))
            .ok()
            .as_deref(),
        Some("hi\n")
    );
    let updates = client.updates(&session);
    assert_eq!(
        final_status(&updates, "patch-1"),
        "completed",
        "{updates:?}"
    );
}

#[tokio::test]
async fn an_answer_cut_at_the_output_limit_ends_max_tokens() {
    let env = AcpEnv::new().await;
    env.model.push(MockResponse::sse(vec![
        interpreter_test_support::mock_model::chunk::text("a long answ"),
        interpreter_test_support::mock_model::chunk::finish("length"),
    ]));
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let result = client
        .request("session/prompt", prompt_params(&session, "write a lot"))
        .await;
    assert_eq!(result["stopReason"], "max_tokens", "{result}");
}

#[tokio::test]
async fn images_and_embedded_resources_reach_the_model() {
    let env = AcpEnv::new().await;
    env.script_text("seen");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let result = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///p/a.rs", "text": "fn main() {}", "mimeType": "text/x-rust"}},
                {"type": "resource_link", "uri": "file:///p/b.rs", "name": "b.rs"}
            ]}),
        )
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    let request = env.model.requests().pop().expect("a model request");
    let sent = request.to_string();
    assert!(
        sent.contains("data:image/png;base64,iVBORw0KGgo="),
        "{sent}"
    );
    assert!(sent.contains("fn main() {}"), "{sent}");
    assert!(sent.contains("file:///p/b.rs"), "{sent}");
}

/// What an editor that serves `fs/*` saw: the paths it was asked to read, and the
/// writes it was asked to make (which it records instead of touching the disk).
#[derive(Default)]
struct EditorFs {
    reads: Vec<String>,
    writes: Vec<(String, String)>,
}

/// Read until the response to `id`, answering the agent's `fs/*` requests from
/// `buffers` (path suffix → unsaved text) and recording its writes.
async fn serve_fs_until(
    client: &mut acp_support::AcpClient,
    id: i64,
    buffers: &[(&str, &str)],
    fs: &mut EditorFs,
) -> Value {
    loop {
        let message = client.read().await;
        match message["method"].as_str() {
            Some("fs/read_text_file") => {
                let path = message["params"]["path"].as_str().unwrap_or_default();
                fs.reads.push(path.to_string());
                match buffers.iter().find(|(suffix, _)| path.ends_with(suffix)) {
                    Some((_, text)) => client.answer(&message, json!({"content": text})).await,
                    None => {
                        client
                            .send(json!({"jsonrpc": "2.0", "id": message["id"],
                                "error": {"code": -32002, "message": "no such file"}}))
                            .await;
                    }
                }
            }
            Some("fs/write_text_file") => {
                fs.writes.push((
                    message["params"]["path"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    message["params"]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
                client.answer(&message, json!({})).await;
            }
            _ if message["id"] == id && message.get("method").is_none() => return message,
            _ => client.seen.push(message),
        }
    }
}

const EDITOR_FS: &str = r#"{"fs": {"readTextFile": true, "writeTextFile": true}}"#;

#[tokio::test]
async fn with_the_editors_fs_a_patch_reads_its_buffer_and_saves_through_it() {
    let env = AcpEnv::new().await;
    std::fs::write(env.work_path().join("a.txt"), "one\n").expect("write a.txt");
    env.script_apply_patch(
        "patch-1",
        "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n two\n+three\n*** Add File: sub/new.txt\n+fresh\n*** End Patch\n",
    );
    env.script_text("edited");
    let mut client = env
        .start_with(serde_json::from_str(EDITOR_FS).expect("capabilities"))
        .await;
    let session = client.new_session(&env.work_path()).await;
    client.set_mode(&session, "full-access").await;
    let id = client.send_prompt(&session, "edit").await;
    let mut fs = EditorFs::default();
    // The disk says "one"; the editor's unsaved buffer says "one\ntwo": the patch only
    // fits the buffer.
    let response = serve_fs_until(&mut client, id, &[("/a.txt", "one\ntwo\n")], &mut fs).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // Only the patched files are read: each before the patch (its buffer), and each
    // again just before it is written, for the record `thread/revert` restores from.
    let work = env.work_path();
    let patched = [
        work.join("a.txt").display().to_string(),
        work.join("sub/new.txt").display().to_string(),
    ];
    assert!(
        fs.reads.iter().all(|p| patched.contains(p)),
        "{:?}",
        fs.reads
    );
    assert!(!fs.reads.is_empty());
    assert_eq!(
        fs.writes,
        vec![
            (
                work.join("a.txt").display().to_string(),
                "one\ntwo\nthree\n".to_string()
            ),
            (
                work.join("sub/new.txt").display().to_string(),
                "fresh\n".to_string()
            ),
        ]
    );
    // Saved through the editor only: the disk is as it was.
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).ok().as_deref(),
        Some("one\n")
    );
    assert!(!work.join("sub/new.txt").exists());
    let updates = client.updates(&session);
    assert_eq!(
        final_status(&updates, "patch-1"),
        "completed",
        "{updates:?}"
    );
    let requests = env.model.requests();
    let second = requests.get(1).map(Value::to_string).unwrap_or_default();
    assert!(
        second.contains("Success. Updated the following files"),
        "{second}"
    );
}

#[tokio::test]
async fn with_the_editors_fs_a_rejected_patch_never_reaches_the_editor() {
    let env = AcpEnv::new().await;
    env.script_apply_patch(
        "patch-1",
        "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n",
    );
    env.script_text("as you wish");
    let mut client = env
        .start_with(serde_json::from_str(EDITOR_FS).expect("capabilities"))
        .await;
    let session = client.new_session(&env.work_path()).await;
    client.set_mode(&session, "read-only").await;
    let id = client.send_prompt(&session, "add notes").await;
    let ask = client.read_until(is_permission_request).await;
    client.choose(&ask, "reject_once").await;
    let mut fs = EditorFs::default();
    let response = serve_fs_until(&mut client, id, &[], &mut fs).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(fs.writes.is_empty(), "{:?}", fs.writes);
    assert!(!env.work_path().join("notes.txt").exists());
    let updates = client.updates(&session);
    assert_eq!(final_status(&updates, "patch-1"), "failed", "{updates:?}");
}

#[tokio::test]
async fn delete_removes_a_session_for_good() {
    let env = AcpEnv::new().await;
    env.script_text("remember me");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "hello").await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let listed = client
        .request("session/list", json!({"cwd": env.work_path()}))
        .await;
    assert!(listed.to_string().contains(&session), "{listed}");

    client
        .request("session/delete", json!({"sessionId": session}))
        .await;

    let listed = client
        .request("session/list", json!({"cwd": env.work_path()}))
        .await;
    assert!(!listed.to_string().contains(&session), "{listed}");
    let id = client
        .send_request(
            "session/load",
            json!({"sessionId": session, "cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    let gone = client.response(id).await;
    assert_eq!(gone["error"]["code"], -32002, "{gone}");
    let id = client
        .send_request("session/delete", json!({"sessionId": session}))
        .await;
    let again = client.response(id).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
}

#[tokio::test]
async fn a_file_changed_while_its_patch_waited_for_approval_is_not_overwritten() {
    let env = AcpEnv::new().await;
    let file = env.work_path().join("a.txt");
    std::fs::write(&file, "one\n").expect("write a.txt");
    env.script_apply_patch(
        "patch-1",
        "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n+two\n*** End Patch\n",
    );
    env.script_text("noted");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "edit").await;
    let ask = client.read_until(is_permission_request).await;
    // Someone edits the file while the question is open: what was approved is no longer
    // what the patch would do.
    std::fs::write(&file, "one\nedited meanwhile\n").expect("edit a.txt");
    client.choose(&ask, "allow_once").await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        std::fs::read_to_string(&file).ok().as_deref(),
        Some("one\nedited meanwhile\n")
    );
    let updates = client.updates(&session);
    assert_eq!(final_status(&updates, "patch-1"), "failed", "{updates:?}");
    let second = env.model_request(1);
    assert!(
        second.contains("the files changed while the patch waited for approval"),
        "{second}"
    );
}

/// The `mock-mcp-server` binary of the test-support package, built next to `interpreter`.
fn mock_mcp_server() -> std::path::PathBuf {
    interpreter_test_support::bins::mock_mcp_server(
        std::path::Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .expect("mock-mcp-server")
}

#[tokio::test]
async fn an_editors_stdio_mcp_server_is_called_and_its_call_replayed_after_a_restart() {
    let env = AcpEnv::new().await;
    let arguments = json!({"text": "hello from the editor"}).to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "mcp-1", "mcp__mock__echo", &arguments),
        chunk::finish("tool_calls"),
    ]));
    env.script_text("echoed");
    let servers = json!([{
        "name": "mock",
        "command": mock_mcp_server(),
        "args": [],
        "env": [],
    }]);
    let mut client = env.start().await;
    let session = client
        .request(
            "session/new",
            json!({"cwd": env.work_path(), "mcpServers": servers}),
        )
        .await["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    client.set_mode(&session, "full-access").await;
    let result = client
        .request("session/prompt", prompt_params(&session, "echo it"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let updates = client.updates(&session);
    let card = tool_updates(&updates, "mcp-1");
    assert_eq!(card[0]["sessionUpdate"], "tool_call", "{updates:?}");
    assert_eq!(final_status(&updates, "mcp-1"), "completed", "{updates:?}");
    let second = env.model_request(1);
    assert!(second.contains("hello from the editor"), "{second}");

    client.process.close_stdin();
    client
        .process
        .wait_exit(acp_support::READ_DEADLINE)
        .await
        .expect("agent exits at end of input");
    let mut client = env.start().await;
    let id = client
        .send_request(
            "session/load",
            json!({"sessionId": session, "cwd": env.work_path(), "mcpServers": servers}),
        )
        .await;
    let response = client.response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replayed = client.updates(&session);
    let card = tool_updates(&replayed, "mcp-1");
    assert_eq!(card.len(), 1, "{replayed:?}");
    assert_eq!(card[0]["sessionUpdate"], "tool_call");
    assert_eq!(card[0]["status"], "completed");
    assert!(
        card[0].to_string().contains("hello from the editor"),
        "{replayed:?}"
    );
}

#[tokio::test]
async fn a_patch_that_does_not_fit_its_file_is_a_failed_tool_call() {
    let env = AcpEnv::new().await;
    std::fs::write(env.work_path().join("a.txt"), "one\n").expect("write a.txt");
    env.script_apply_patch(
        "patch-1",
        "*** Begin Patch\n*** Update File: a.txt\n@@\n not there\n+two\n*** End Patch\n",
    );
    env.script_text("that failed");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let result = client
        .request("session/prompt", prompt_params(&session, "edit"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let updates = client.updates(&session);
    let card = tool_updates(&updates, "patch-1");
    assert_eq!(card[0]["sessionUpdate"], "tool_call", "{updates:?}");
    assert_eq!(card[0]["kind"], "edit");
    assert_eq!(final_status(&updates, "patch-1"), "failed", "{updates:?}");
    assert!(
        card.last()
            .map(|u| u.to_string())
            .unwrap_or_default()
            .contains("apply_patch failed"),
        "{card:?}"
    );
}

#[tokio::test]
async fn slash_compact_is_offered_and_summarises_the_conversation() {
    let env = AcpEnv::new().await;
    env.script_text("first answer");
    env.script_text("SUMMARY: the user said hello");
    env.script_text("after the summary");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let offered = client
        .read_until(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    assert_eq!(
        offered["params"]["sessionId"],
        session.as_str(),
        "{offered}"
    );
    let commands = offered["params"]["update"]["availableCommands"].to_string();
    assert!(commands.contains("\"compact\""), "{commands}");

    let result = client
        .request("session/prompt", prompt_params(&session, "hello"))
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    let result = client
        .request("session/prompt", prompt_params(&session, "/compact"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let said = text_of(&client.updates(&session), "agent_message_chunk");
    assert!(said.contains("Compacted the conversation"), "{said}");
    let result = client
        .request("session/prompt", prompt_params(&session, "go on"))
        .await;
    assert_eq!(result["stopReason"], "end_turn");

    let requests = env.model.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    // The third request continues from the summary, not from the old messages.
    let third = requests[2].to_string();
    assert!(third.contains("SUMMARY: the user said hello"), "{third}");
    assert!(!third.contains("first answer"), "{third}");
    assert!(!requests[1].to_string().contains("/compact"));
}

/// A patch to `notes.md`, a symlink the model planted to a file outside the workspace, is
/// asked as what it would write (the outside file, and why), never as the workspace
/// path; the editor is never asked to read (or write) a file outside the workspace; and
/// a rejection writes nothing anywhere (found by the fourth adversarial pass).
#[tokio::test]
async fn adversarial_a_patch_through_a_planted_symlink_is_asked_as_its_target() {
    let env = AcpEnv::new().await;
    // Only the workspace is writable: the outside file lives in /tmp too.
    let config = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str("\n[sandbox_workspace_write]\nexclude_slash_tmp = true\n");
    std::fs::write(&config, text).expect("config");
    let outside = tempfile::tempdir().expect("outside");
    let outside = std::fs::canonicalize(outside.path()).expect("canonical");
    let real = outside.join("real.md");
    std::fs::write(&real, "kept\n").expect("write real.md");
    std::os::unix::fs::symlink(&real, env.work_path().join("notes.md")).expect("symlink");
    env.script_apply_patch(
        "patch-1",
        "*** Begin Patch\n*** Update File: notes.md\n@@\n-kept\n+overwritten\n*** End Patch\n",
    );
    env.script_text("ok");
    let mut client = env
        .start_with(serde_json::from_str(EDITOR_FS).expect("capabilities"))
        .await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "edit the notes").await;
    let mut fs = EditorFs::default();
    let ask = loop {
        let message = client.read().await;
        match message["method"].as_str() {
            Some("fs/read_text_file") => {
                fs.reads.push(
                    message["params"]["path"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                );
                client.answer(&message, json!({"content": "kept\n"})).await;
            }
            Some("session/request_permission") => break message,
            _ => client.seen.push(message),
        }
    };
    let card = ask["params"]["toolCall"].to_string();
    let real_shown = real.display().to_string();
    assert!(
        card.contains(&real_shown),
        "the card hides the target: {card}"
    );
    assert!(
        card.contains("which leads to") && card.contains("outside the sandbox"),
        "the card does not say why it asks: {card}"
    );
    client.choose(&ask, "reject_once").await;
    let response = serve_fs_until(&mut client, id, &[], &mut fs).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        fs.reads.iter().all(|path| !path.contains(&real_shown)),
        "the editor was asked to read outside the workspace: {:?}",
        fs.reads
    );
    assert!(fs.writes.is_empty(), "{:?}", fs.writes);
    assert_eq!(std::fs::read_to_string(&real).expect("real.md"), "kept\n");
}

/// The editor's view after `updates`: runs of one kind of text joined, each tool call's
/// card with every later update of it applied.
fn editor_view(updates: &[Value]) -> Vec<Value> {
    let mut view: Vec<Value> = Vec::new();
    for update in updates {
        let kind = update["sessionUpdate"].as_str().unwrap_or_default();
        match kind {
            "agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk" => {
                let text = update["content"]["text"].as_str().unwrap_or_default();
                match view.last_mut() {
                    Some(last) if last["sessionUpdate"] == kind => {
                        let joined = format!("{}{text}", last["text"].as_str().unwrap_or_default());
                        last["text"] = json!(joined);
                    }
                    _ => view.push(json!({"sessionUpdate": kind, "text": text})),
                }
            }
            "tool_call" => view.push(update.clone()),
            "tool_call_update" => {
                let card = view
                    .iter_mut()
                    .find(|card| card["toolCallId"] == update["toolCallId"])
                    .unwrap_or_else(|| panic!("an update of a card never announced: {update}"));
                for field in ["status", "content", "rawOutput", "title", "kind"] {
                    if let Some(value) = update.get(field).filter(|v| !v.is_null()) {
                        card[field] = value.clone();
                    }
                }
            }
            // Not part of the conversation.
            _ => {}
        }
    }
    view
}

/// After a restart, `session/load` shows the editor what it showed live: the same text,
/// and every card ending the same, for prompts with reasoning, a command, a patch, a
/// rejected command and a cancelled one (the user's own prompts come back too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_editor_saw_live_is_what_session_load_replays() {
    let env = AcpEnv::new().await;
    env.model.push(MockResponse::sse(vec![
        chunk::reasoning("Look first, "),
        chunk::reasoning("then write."),
        chunk::tool_call(0, "call_ls", "shell", &json!({"command": "ls"}).to_string()),
        chunk::finish("tool_calls"),
    ]));
    env.script_patch("call_patch", "notes.txt");
    env.script_command("call_no", "touch declined.txt");
    env.script_text("wrote the notes");
    env.script_command("call_sleep", "echo started; sleep 60");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client.send_prompt(&session, "take notes").await;
    loop {
        let message = client
            .read_until(|m| {
                is_permission_request(m) || (m["id"] == id && m.get("method").is_none())
            })
            .await;
        if !is_permission_request(&message) {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        let option = if message["params"]["toolCall"]["toolCallId"] == "call_no" {
            "reject_once"
        } else {
            "allow_once"
        };
        client.choose(&message, option).await;
    }
    assert!(env.work_path().join("notes.txt").is_file());
    assert!(!env.work_path().join("declined.txt").exists());
    let id = client.send_prompt(&session, "wait").await;
    let ask = client.read_until(is_permission_request).await;
    client.choose(&ask, "allow_once").await;
    client
        .read_until(|m| {
            m["params"]["update"]["toolCallId"] == "call_sleep"
                && m["params"]["update"]["content"].is_array()
                && m["params"]["update"]["content"]
                    .to_string()
                    .contains("started")
        })
        .await;
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let response = client.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let live = editor_view(&client.updates(&session));
    client.process.close_stdin();
    client
        .process
        .wait_exit(acp_support::READ_DEADLINE)
        .await
        .expect("agent exits at end of input");

    let mut client = env.start().await;
    client
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    let replayed: Vec<Value> = editor_view(&client.updates(&session))
        .into_iter()
        .filter(|entry| entry["sessionUpdate"] != "user_message_chunk")
        .collect();
    assert_eq!(live, replayed, "live (left) and replayed (right) differ");
    let statuses: Vec<(String, String)> = live
        .iter()
        .filter(|entry| entry["sessionUpdate"] == "tool_call")
        .map(|card| {
            (
                card["toolCallId"].as_str().unwrap_or_default().to_string(),
                card["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let pair = |id: &str, status: &str| (id.to_string(), status.to_string());
    assert_eq!(
        statuses,
        [
            pair("call_ls", "completed"),
            pair("call_patch", "completed"),
            pair("call_no", "failed"),
            pair("call_sleep", "failed"),
        ]
    );
}

/// A session opened again by another agent process (acpx starts a new one once its
/// background owner expires) goes on in the mode and with the reasoning effort its last
/// turn ran with, not the defaults (found by acpx).
#[tokio::test]
async fn acpx_a_resumed_session_keeps_the_mode_and_effort_its_last_turn_ran_with() {
    let env = AcpEnv::new().await;
    env.script_text("first");
    env.script_text("second");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    client.set_mode(&session, "full-access").await;
    let set = client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "reasoning_effort", "value": "high"}),
        )
        .await;
    assert!(set.get("configOptions").is_some(), "{set}");
    let result = client
        .request("session/prompt", prompt_params(&session, "one"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    client.process.close_stdin();
    client
        .process
        .wait_exit(acp_support::READ_DEADLINE)
        .await
        .expect("agent exits at end of input");

    let mut client = env.start().await;
    let resumed = client
        .request(
            "session/resume",
            json!({"sessionId": session, "cwd": env.work_path(), "mcpServers": []}),
        )
        .await;
    assert_eq!(
        resumed["modes"]["currentModeId"], "full-access",
        "{resumed}"
    );
    let options = resumed["configOptions"].to_string();
    assert!(options.contains("\"currentValue\":\"high\""), "{options}");
    let result = client
        .request("session/prompt", prompt_params(&session, "two"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    assert!(
        env.model_request(1)
            .contains("\"reasoning_effort\":\"high\""),
        "{}",
        env.model_request(1)
    );
}
