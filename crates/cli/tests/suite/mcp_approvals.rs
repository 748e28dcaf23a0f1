//! Approvals as `elicitation/create` over raw JSON-RPC: every way a client can answer
//! (or not) and what the turn does with it. Nothing may leave the turn waiting forever.

use crate::mcp_support::{McpClient, McpEnv, assert_valid_result};
use serde_json::{Value, json};

enum Answer {
    Result(Value),
    RpcError,
    /// One message carrying both `result` and `error`: not a valid JSON-RPC answer.
    ResultAndError,
    Silence,
}

struct Outcome {
    result: Value,
    elicitation: Option<Value>,
    file_created: bool,
}

async fn run_approval(env: &McpEnv, client: &mut McpClient, answer: Answer) -> Outcome {
    env.script_command_then_text("call_a", "touch approved.txt", "Finished.");
    let id = client
        .start_tool(
            "codex",
            json!({"prompt": "create the file", "approval-policy": "untrusted", "sandbox": "danger-full-access"}),
        )
        .await;
    let mut elicitation = None;
    match answer {
        Answer::Result(result) => {
            let request = client.server_request("elicitation/create").await;
            client.respond(&request["id"], result).await;
            elicitation = Some(request);
        }
        Answer::RpcError => {
            let request = client.server_request("elicitation/create").await;
            client
                .send(json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "no UI"}}))
                .await;
            elicitation = Some(request);
        }
        Answer::ResultAndError => {
            let request = client.server_request("elicitation/create").await;
            client
                .send(json!({"jsonrpc": "2.0", "id": request["id"],
                    "result": {"action": "accept", "content": {"decision": "approved"}},
                    "error": {"code": -32603, "message": "no UI"}}))
                .await;
            elicitation = Some(request);
        }
        Answer::Silence => {}
    }
    let response = client.response(id).await;
    let result = response["result"].clone();
    assert_valid_result(&result);
    Outcome {
        result,
        elicitation,
        file_created: env.work_path().join("approved.txt").exists(),
    }
}

async fn elicitation_client(env: &McpEnv) -> McpClient {
    let mut client = env.spawn();
    client.initialize_with_elicitation().await;
    client
}

#[tokio::test]
async fn spec_accept_runs_the_command_and_params_carry_correlation_fields() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(
        &env,
        &mut client,
        Answer::Result(json!({"action": "accept", "content": {"decision": "approved"}})),
    )
    .await;
    assert!(outcome.file_created, "{}", outcome.result);
    assert_eq!(outcome.result["structuredContent"]["content"], "Finished.");
    let params = &outcome.elicitation.unwrap_or_default()["params"];
    assert_eq!(params["codex_elicitation"], "exec-approval");
    assert_eq!(params["codex_call_id"], "call_a");
    assert!(params["codex_mcp_tool_call_id"].is_string());
    assert!(params["codex_event_id"].is_string());
    assert!(
        params["codex_command"]
            .to_string()
            .contains("touch approved.txt")
    );
    assert!(params["codex_cwd"].is_string());
    assert!(params["codex_parsed_cmd"].is_array());
    assert!(params["threadId"].is_string());
    assert!(
        params["message"]
            .as_str()
            .is_some_and(|m| m.contains("touch approved.txt"))
    );
    let schema = &params["requestedSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["decision"]["type"], "string");
    assert_eq!(schema["required"], json!(["decision"]));
}

#[tokio::test]
async fn legacy_decision_answer_is_understood() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(
        &env,
        &mut client,
        Answer::Result(json!({"decision": "approved"})),
    )
    .await;
    assert!(outcome.file_created);
}

#[tokio::test]
async fn decline_denies_and_the_turn_goes_on() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(
        &env,
        &mut client,
        Answer::Result(json!({"action": "decline"})),
    )
    .await;
    assert!(!outcome.file_created);
    assert_eq!(outcome.result["structuredContent"]["content"], "Finished.");
    assert_eq!(
        env.model.requests().len(),
        2,
        "the model did not hear about the denial"
    );
}

#[tokio::test]
async fn garbage_answer_denies() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(
        &env,
        &mut client,
        Answer::Result(json!({"allow": "yes please"})),
    )
    .await;
    assert!(!outcome.file_created);
    assert_eq!(outcome.result["structuredContent"]["content"], "Finished.");
}

#[tokio::test]
async fn client_error_denies_and_says_so() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(&env, &mut client, Answer::RpcError).await;
    assert!(!outcome.file_created);
    let text = outcome.result["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("Finished."), "{text}");
    assert!(text.contains("could not answer"), "{text}");
}

/// Found running the MCP hosts: an answer with both `result` and `error` was dropped by
/// the transport, and the approval was denied only at its deadline (600 s by default;
/// the test's read deadline is far shorter, so a wait for the deadline fails it).
#[tokio::test]
async fn an_answer_with_result_and_error_denies_at_once() {
    let env = McpEnv::new().await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(&env, &mut client, Answer::ResultAndError).await;
    assert!(!outcome.file_created, "{}", outcome.result);
    let text = outcome.result["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("Finished."), "{text}");
    assert!(text.contains("could not answer"), "{text}");
}

#[tokio::test]
async fn unanswered_elicitation_times_out_as_denied() {
    let env = McpEnv::with_config("[mcp_server]\napproval_timeout_sec = 1").await;
    let mut client = elicitation_client(&env).await;
    let outcome = run_approval(&env, &mut client, Answer::Silence).await;
    assert!(!outcome.file_created);
    let text = outcome.result["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("no answer within 1s"), "{text}");
    // The server withdrew its request so the client can close any dialog.
    assert!(
        client
            .process
            .seen
            .iter()
            .any(|m| m["method"] == "notifications/cancelled"),
        "no notifications/cancelled for the expired elicitation"
    );
}

#[tokio::test]
async fn client_without_elicitation_gets_the_fallback_and_is_told() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let outcome = run_approval(&env, &mut client, Answer::Silence).await;
    assert!(!outcome.file_created);
    assert!(
        !client
            .process
            .seen
            .iter()
            .any(|m| m["method"] == "elicitation/create"),
        "elicited a client that did not declare the capability"
    );
    let text = outcome.result["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("does not support elicitation"), "{text}");
    assert!(text.contains("denied"), "{text}");
}

#[tokio::test]
async fn fallback_approve_is_configurable() {
    let env = McpEnv::with_config("[mcp_server]\nelicitation_fallback = \"approve\"").await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let outcome = run_approval(&env, &mut client, Answer::Silence).await;
    assert!(outcome.file_created, "{}", outcome.result);
}
