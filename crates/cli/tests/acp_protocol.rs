//! `interpreter acp` over stdio against the mock model: initialize, prompts and their
//! stop reasons, tool calls and permissions, cancel, concurrent sessions, load after a
//! restart, and protocol errors.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod acp_support;

use std::time::Duration;

use acp_support::{AcpEnv, is_permission_request, text_of, tool_updates};
use interpreter_test_support::MockResponse;
use serde_json::{Value, json};

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
    for capability in ["list", "resume", "close"] {
        assert!(
            caps["sessionCapabilities"][capability].is_object(),
            "{capability}: {result}"
        );
    }
    assert_eq!(result["agentInfo"]["name"], "interpreter");
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
    let id = client
        .send_request("session/prompt", prompt_params(&session, "hi"))
        .await;
    let response = client.response(id).await;
    let error = &response["error"];
    assert_eq!(error["code"], -32603, "{response}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not exist"), "{response}");
    assert!(!message.contains('\n'), "{response}");
}

#[tokio::test]
async fn an_allowed_command_runs_and_its_tool_call_completes() {
    let env = AcpEnv::new().await;
    env.script_command_then_text("call-1", "printf hi > out.txt", "written");
    let mut client = env.start().await;
    let session = client.new_session(&env.work_path()).await;
    let id = client
        .send_request("session/prompt", prompt_params(&session, "write it"))
        .await;
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
    client
        .answer(
            &ask,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )
        .await;
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
    let id = client
        .send_request("session/prompt", prompt_params(&session, "write it"))
        .await;
    let ask = client.read_until(is_permission_request).await;
    client
        .answer(
            &ask,
            json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}}),
        )
        .await;
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
    let id = client
        .send_request("session/prompt", prompt_params(&session, "write it"))
        .await;
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
    client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "full-access"}),
        )
        .await;
    let id = client
        .send_request("session/prompt", prompt_params(&session, "run it"))
        .await;
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
    let id = client
        .send_request("session/prompt", prompt_params(&session, "write it"))
        .await;
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
    client
        .answer(
            &ask,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!env.work_path().join("out.txt").exists());
}

#[tokio::test]
async fn two_sessions_prompting_at_once_each_get_only_their_own_updates() {
    let env = AcpEnv::new().await;
    env.script_text("first answer");
    env.script_text("second answer");
    let mut client = env.start().await;
    let a = client.new_session(&env.work_path()).await;
    let b = client.new_session(&env.work_path()).await;
    let id_a = client
        .send_request("session/prompt", prompt_params(&a, "one"))
        .await;
    let id_b = client
        .send_request("session/prompt", prompt_params(&b, "two"))
        .await;
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
    client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "full-access"}),
        )
        .await;
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
        let id = client
            .send_request("session/prompt", prompt_params(session, "hi"))
            .await;
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
    let id = client
        .send_request("session/prompt", prompt_params(&session, "add notes"))
        .await;
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
    client
        .answer(
            &ask,
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )
        .await;
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
