//! The app-server's v2 methods on the `interpreter mcp-server` connection: requests as
//! custom MCP requests, notifications as custom notifications, and (legacy era) approvals
//! as custom server→client requests.

use crate::mcp_support;

use crate::mcp_support::McpEnv;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_thread_and_turn_with_an_approval_over_mcp_stdio() {
    let env = McpEnv::new().await;
    env.script_command_then_text("call_1", "touch via-mcp.txt", "done over mcp");
    let mut client = env.spawn();
    client.initialize(json!({})).await;

    let started = client
        .call(
            "thread/start",
            json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}),
        )
        .await;
    let thread_id = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    assert_eq!(
        started["result"]["thread"]["source"],
        json!({"custom": "mcp"})
    );
    let turn = client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "touch it"}]}),
        )
        .await;
    let turn_id = turn["result"]["turn"]["id"].clone();
    assert!(turn_id.is_string(), "{turn}");

    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    assert_eq!(request["params"]["threadId"], thread_id.as_str());
    client
        .respond(&request["id"], json!({"decision": "accept"}))
        .await;
    let done = client
        .process
        .read_until(mcp_support::READ_DEADLINE, |m| {
            m["method"] == "turn/completed"
        })
        .await
        .expect("turn/completed");
    assert_eq!(done["params"]["turn"]["id"], turn_id);
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert!(env.work_path().join("via-mcp.txt").is_file());

    let list = client.call("thread/list", json!({})).await;
    assert_eq!(list["result"]["data"][0]["id"], thread_id.as_str());
    let unknown = client.call("thread/nope", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
}

/// 2026-07-28 forbids server→client requests: an approval gets the configured fallback
/// (default deny) at once, and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_era_approvals_get_the_fallback() {
    let env = McpEnv::new().await;
    env.script_command_then_text("call_1", "touch modern.txt", "done");
    let mut client = env.spawn();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern-test", "version": "0.0.0"},
    });
    let started = client
        .call(
            "thread/start",
            json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access", "_meta": meta}),
        )
        .await;
    let thread_id = started["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    let turn = client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "input": [{"type": "text", "text": "touch"}], "_meta": meta}),
        )
        .await;
    assert!(turn["result"]["turn"]["id"].is_string(), "{turn}");
    let done = client
        .process
        .read_until(mcp_support::READ_DEADLINE, |m| {
            m["method"] == "turn/completed"
        })
        .await
        .expect("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert!(!env.work_path().join("modern.txt").exists());
    assert!(
        !client
            .take_seen()
            .iter()
            .any(|m| m["method"] == "item/commandExecution/requestApproval"),
        "no server request in the 2026-07-28 era"
    );
}
