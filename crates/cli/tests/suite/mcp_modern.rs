//! `interpreter mcp-server` for a 2026-07-28 client over stdio, raw JSON-RPC: no
//! `initialize`, per-request `_meta`, caching hints, approvals as MRTR
//! (`InputRequiredResult` + sealed `requestState`), and background turns followed with
//! `codex-status` / `codex-wait`.

use crate::mcp_support;

use crate::mcp_support::{McpClient, McpEnv, assert_valid_result, thread_id};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";

/// `_meta` of a 2026-07-28 request; `elicitation` declares the form capability.
fn meta(elicitation: bool) -> Value {
    let capabilities = if elicitation {
        json!({"elicitation": {"form": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern-test", "version": "0.0.0"},
    })
}

async fn modern_call(client: &mut McpClient, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(true);
    client.call(method, params).await
}

async fn tool_call(client: &mut McpClient, name: &str, arguments: Value) -> Value {
    modern_call(
        client,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

#[tokio::test]
async fn discover_and_list_carry_what_the_era_requires() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let discover = modern_call(&mut client, "server/discover", json!({})).await;
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete", "{discover}");
    assert!(
        result["instructions"]
            .as_str()
            .is_some_and(|s| s.contains("codex"))
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "interpreter"
    );
    assert!(
        result["ttlMs"].is_number() && result["cacheScope"].is_string(),
        "{discover}"
    );
    // Declared capabilities are exactly what is answered.
    let capabilities = result["capabilities"].as_object().unwrap();
    assert!(capabilities.contains_key("tools"));
    assert!(!capabilities.contains_key("logging") && !capabilities.contains_key("completions"));

    for (method, key) in [
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ] {
        let listed = modern_call(&mut client, method, json!({})).await;
        let result = &listed["result"];
        assert!(result[key].is_array(), "{listed}");
        assert!(result["ttlMs"].is_number(), "{method}: {listed}");
        assert!(result["cacheScope"].is_string(), "{method}: {listed}");
        assert_eq!(result["resultType"], "complete", "{listed}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "interpreter",
            "{method}: {listed}"
        );
    }

    // Removed in 2026-07-28, and not advertised: method not found.
    for method in ["ping", "logging/setLevel", "completion/complete"] {
        let answer = modern_call(&mut client, method, json!({})).await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }

    // The required clientCapabilities missing: refused, with the spec's invalid-params.
    let missing = client
        .call(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");

    let unknown_tool = tool_call(&mut client, "nope", json!({})).await;
    assert_eq!(unknown_tool["error"]["code"], -32602, "{unknown_tool}");
}

struct Suspended {
    request_state: String,
    elicitation: Value,
    arguments: Value,
}

/// Start `codex` on a command that needs approval; it must end with InputRequiredResult.
async fn suspended_call(env: &McpEnv, client: &mut McpClient) -> Suspended {
    env.script_command_then_text("call_mrtr", "touch approved.txt", "Finished.");
    let arguments = json!({"prompt": "create the file", "approval-policy": "untrusted", "sandbox": "danger-full-access"});
    let answer = tool_call(client, "codex", arguments.clone()).await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let elicitation = result["inputRequests"]["approval"].clone();
    assert_eq!(elicitation["method"], "elicitation/create", "{answer}");
    assert!(
        elicitation["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("touch approved.txt")),
        "{answer}"
    );
    assert_eq!(
        elicitation["params"]["requestedSchema"]["properties"]["decision"]["type"],
        "string"
    );
    Suspended {
        request_state: result["requestState"].as_str().unwrap().to_string(),
        elicitation,
        arguments,
    }
}

async fn retry(
    client: &mut McpClient,
    suspended: &Suspended,
    request_state: &str,
    answer: Value,
) -> Value {
    modern_call(
        client,
        "tools/call",
        json!({
            "name": "codex",
            "arguments": suspended.arguments,
            "inputResponses": {"approval": answer},
            "requestState": request_state,
        }),
    )
    .await
}

#[tokio::test]
async fn mrtr_accept_runs_the_command_and_a_replay_is_refused() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let suspended = suspended_call(&env, &mut client).await;
    assert!(!env.work_path().join("approved.txt").exists());
    let accept = json!({"action": "accept", "content": {"decision": "approved"}});
    let done = retry(
        &mut client,
        &suspended,
        &suspended.request_state,
        accept.clone(),
    )
    .await;
    let result = &done["result"];
    assert_valid_result(result);
    assert_eq!(
        result["structuredContent"]["content"], "Finished.",
        "{done}"
    );
    assert_eq!(result["structuredContent"]["status"], "completed");
    assert!(env.work_path().join("approved.txt").exists());
    assert!(suspended.elicitation["params"].is_object());

    // The same state again: its approval was redeemed; refused, nothing runs.
    let replay = retry(&mut client, &suspended, &suspended.request_state, accept).await;
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
}

#[tokio::test]
async fn mrtr_decline_does_not_run_the_command() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let suspended = suspended_call(&env, &mut client).await;
    let done = retry(
        &mut client,
        &suspended,
        &suspended.request_state,
        json!({"action": "decline"}),
    )
    .await;
    assert_valid_result(&done["result"]);
    assert_eq!(done["result"]["structuredContent"]["content"], "Finished.");
    assert!(!env.work_path().join("approved.txt").exists());
}

#[tokio::test]
async fn mrtr_forged_or_tampered_state_is_refused_and_runs_nothing() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let suspended = suspended_call(&env, &mut client).await;
    let accept = json!({"action": "accept", "content": {"decision": "approved"}});
    let mut tampered = suspended.request_state.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    for forged in ["garbage", "", tampered.as_str()] {
        let refused = retry(&mut client, &suspended, forged, accept.clone()).await;
        assert_eq!(refused["error"]["code"], -32602, "{forged}: {refused}");
    }
    // A state sealed for another tool does not open for this one.
    let other_tool = modern_call(
        &mut client,
        "tools/call",
        json!({
            "name": "codex-reply",
            "arguments": {"threadId": "x", "prompt": "p"},
            "inputResponses": {"approval": accept},
            "requestState": suspended.request_state,
        }),
    )
    .await;
    assert_eq!(other_tool["error"]["code"], -32602, "{other_tool}");
    assert!(!env.work_path().join("approved.txt").exists());
}

#[tokio::test]
async fn a_client_without_elicitation_gets_the_fallback_not_mrtr() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    env.script_command_then_text("call_fb", "touch approved.txt", "Finished.");
    let answer = client
        .call(
            "tools/call",
            json!({
                "name": "codex",
                "arguments": {"prompt": "create the file", "approval-policy": "untrusted", "sandbox": "danger-full-access"},
                "_meta": meta(false),
            }),
        )
        .await;
    let result = &answer["result"];
    assert_valid_result(result);
    assert!(
        result["structuredContent"]["content"]
            .as_str()
            .is_some_and(|t| t.contains("does not support elicitation")),
        "{answer}"
    );
    assert!(!env.work_path().join("approved.txt").exists());
}

#[tokio::test]
async fn background_turn_is_followed_with_status_and_wait_then_reply_continues() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    env.script_command_then_text("call_bg", "sleep 2; echo done > bg.txt", "Background done.");
    let started = tool_call(
        &mut client,
        "codex",
        json!({"prompt": "slow job", "approval-policy": "never", "sandbox": "danger-full-access", "background": true}),
    )
    .await;
    let result = &started["result"];
    assert_valid_result(result);
    assert_eq!(
        result["structuredContent"]["status"], "running",
        "{started}"
    );
    assert_eq!(result["structuredContent"]["content"], "");
    let thread = thread_id(result);

    // While the command runs, status names it (poll: the turn may still be starting).
    let mut saw_command = false;
    for _ in 0..200 {
        let status = tool_call(&mut client, "codex-status", json!({"threadId": thread})).await;
        let structured = &status["result"]["structuredContent"];
        if structured["content"]
            .as_str()
            .is_some_and(|c| c.contains("sleep 2"))
        {
            saw_command = true;
            assert_eq!(structured["status"], "running", "{status}");
            break;
        }
        if structured["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(saw_command, "codex-status never showed the running command");

    let waited = tool_call(
        &mut client,
        "codex-wait",
        json!({"threadId": thread, "timeoutSec": 60}),
    )
    .await;
    let result = &waited["result"];
    assert_valid_result(result);
    assert_eq!(
        result["structuredContent"]["status"], "completed",
        "{waited}"
    );
    assert_eq!(result["structuredContent"]["content"], "Background done.");
    assert!(env.work_path().join("bg.txt").exists());

    env.script_text("Continued.");
    let reply = tool_call(
        &mut client,
        "codex-reply",
        json!({"threadId": thread, "prompt": "go on"}),
    )
    .await;
    assert_eq!(
        reply["result"]["structuredContent"]["content"], "Continued.",
        "{reply}"
    );
    assert_eq!(thread_id(&reply["result"]), thread);
}

/// `_meta` of a 2026-07-28 request declaring the Tasks extension (and elicitation).
fn task_meta() -> Value {
    let mut meta = meta(true);
    meta["io.modelcontextprotocol/clientCapabilities"]["extensions"] =
        json!({"io.modelcontextprotocol/tasks": {}});
    meta
}

async fn task_request(client: &mut McpClient, method: &str, mut params: Value) -> Value {
    params["_meta"] = task_meta();
    client.call(method, params).await
}

/// Poll `tasks/get` until `done(status)`; every poll is one bounded request.
async fn poll_task(client: &mut McpClient, task_id: &str, done: impl Fn(&str) -> bool) -> Value {
    for _ in 0..2000 {
        let got = task_request(client, "tasks/get", json!({"taskId": task_id})).await;
        let status = got["result"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if done(&status) {
            return got["result"].clone();
        }
        assert!(got.get("error").is_none(), "{got}");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("task {task_id} never reached the expected status");
}

#[tokio::test]
async fn tasks_extension_runs_codex_as_a_task_with_approval_and_survives_restart() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let discover = modern_call(&mut client, "server/discover", json!({})).await;
    assert!(
        discover["result"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{discover}"
    );

    env.script_command_then_text("call_task", "touch approved.txt", "Task finished.");
    let created = task_request(
        &mut client,
        "tools/call",
        json!({"name": "codex", "arguments": {"prompt": "create the file", "approval-policy": "untrusted", "sandbox": "danger-full-access"}}),
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(created["result"]["status"], "working");

    let waiting = poll_task(&mut client, &task_id, |s| s == "input_required").await;
    let (key, request) = waiting["inputRequests"]
        .as_object()
        .and_then(|m| m.iter().next())
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(request["method"], "elicitation/create", "{waiting}");
    assert!(!env.work_path().join("approved.txt").exists());
    let ack = task_request(
        &mut client,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"decision": "approved"}}}}),
    )
    .await;
    assert!(ack.get("error").is_none(), "{ack}");

    let done = poll_task(&mut client, &task_id, |s| s == "completed").await;
    assert_eq!(
        done["result"]["structuredContent"]["content"], "Task finished.",
        "{done}"
    );
    assert!(env.work_path().join("approved.txt").exists());

    // After a restart the task is read back from the thread's rollout.
    client.process.close_stdin();
    client
        .process
        .wait_exit(mcp_support::READ_DEADLINE)
        .await
        .unwrap();
    let mut client = env.spawn();
    let again = poll_task(&mut client, &task_id, |s| s == "completed").await;
    assert_eq!(
        again["result"]["structuredContent"]["content"], "Task finished.",
        "{again}"
    );

    // A task on a turn that never ran is unknown.
    let thread = task_id.split('.').next().unwrap();
    let unknown = task_request(
        &mut client,
        "tasks/get",
        json!({"taskId": format!("{thread}.999")}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn tasks_cancel_interrupts_the_turn() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    env.script_command_then_text("call_sleep", "sleep 30", "never");
    let created = task_request(
        &mut client,
        "tools/call",
        json!({"name": "codex", "arguments": {"prompt": "wait", "approval-policy": "never", "sandbox": "danger-full-access"}}),
    )
    .await;
    let task_id = created["result"]["taskId"].as_str().unwrap().to_string();
    // Wait until the command runs, then cancel.
    for _ in 0..2000 {
        let got = task_request(&mut client, "tasks/get", json!({"taskId": task_id})).await;
        if got["result"]["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("sleep 30"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let ack = task_request(&mut client, "tasks/cancel", json!({"taskId": task_id})).await;
    assert!(ack.get("error").is_none(), "{ack}");
    let done = poll_task(&mut client, &task_id, |s| s == "completed").await;
    assert_eq!(
        done["result"]["structuredContent"]["status"], "interrupted",
        "{done}"
    );
}
