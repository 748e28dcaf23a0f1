//! `interpreter app-server` over stdio: the handshake, a turn's notification order with a
//! command and a patch, approvals in both protocol versions, interrupt, steer, fork and
//! resume after a restart.

use crate::app_server_support::{AppEnv, trace};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NO_APPROVALS: &str = r#"{"approvalPolicy": "never", "sandbox": "danger-full-access"}"#;

fn params(text: &str) -> Value {
    serde_json::from_str(text).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_errors_and_unknown_methods() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    let early = client.call("thread/list", json!({})).await;
    assert_eq!(early["error"]["code"], -32600);
    assert_eq!(early["error"]["message"], "Not initialized");
    let init = client.initialize().await;
    assert!(
        init["userAgent"]
            .as_str()
            .is_some_and(|u| u.starts_with("interpreter/"))
    );
    assert_eq!(
        init["codexHome"].as_str(),
        env.home
            .path()
            .canonicalize()
            .ok()
            .as_deref()
            .and_then(|p| p.to_str())
    );
    let again = client
        .call(
            "initialize",
            json!({"clientInfo": {"name": "x", "version": "1"}}),
        )
        .await;
    assert_eq!(again["error"]["code"], -32600);
    assert_eq!(again["error"]["message"], "Already initialized");
    // Method not found, as on every front end (Codex says -32600 here).
    let unknown = client.call("thread/frobnicate", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(
        unknown["error"]["message"],
        "method not found: thread/frobnicate"
    );
    let bad = client.call("thread/read", json!({"nope": 1})).await;
    assert_eq!(bad["error"]["code"], -32602);
    // No "jsonrpc" member on output, as the reference.
    assert!(early.get("jsonrpc").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_command_and_a_patch_streams_in_order() {
    let env = AppEnv::new().await;
    env.script_command("call_cmd", "echo hello");
    env.script_patch("call_patch", "notes.txt");
    env.script_text("said hello and wrote notes");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    let started = client.notification("thread/started").await;
    assert_eq!(started["params"]["thread"]["id"], thread_id.as_str());

    let turn_id = client.start_turn(&thread_id, "say hello").await;
    let messages = client.until_turn_completed().await;
    let order = trace(&messages);
    assert_eq!(
        order
            .iter()
            .filter(|m| !m.starts_with("thread/"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "turn/started",
            "item/started:userMessage",
            "item/completed:userMessage",
            "item/started:commandExecution",
            "item/commandExecution/outputDelta",
            "item/completed:commandExecution",
            "item/started:fileChange",
            "item/fileChange/outputDelta",
            "item/completed:fileChange",
            "turn/diff/updated",
            "item/started:agentMessage",
            "item/agentMessage/delta",
            "item/completed:agentMessage",
            "turn/completed",
        ],
        "{messages:#?}"
    );
    // What applying the patch printed, on the patch's item, as the model was told.
    let output = messages
        .iter()
        .find(|m| m["method"] == "item/fileChange/outputDelta")
        .expect("item/fileChange/outputDelta");
    assert_eq!(output["params"]["itemId"], "call_patch");
    assert_eq!(output["params"]["turnId"], turn_id.as_str());
    assert!(
        output["params"]["delta"]
            .as_str()
            .is_some_and(|delta| delta.contains("notes.txt")),
        "{output}"
    );
    let diff = messages
        .iter()
        .find(|m| m["method"] == "turn/diff/updated")
        .expect("turn/diff/updated");
    assert_eq!(
        diff["params"],
        json!({
            "threadId": thread_id,
            "turnId": turn_id,
            "diff": "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+hi\n",
        })
    );
    for message in &messages {
        let params = &message["params"];
        if message["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("item/"))
        {
            assert_eq!(params["threadId"], thread_id.as_str(), "{message}");
            assert_eq!(params["turnId"], turn_id.as_str(), "{message}");
        }
        if message["method"]
            .as_str()
            .is_some_and(|m| m.ends_with("Delta"))
        {
            assert!(params["itemId"].is_string(), "{message}");
        }
    }
    let command = messages
        .iter()
        .find(|m| {
            m["method"] == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
        })
        .expect("command item");
    assert_eq!(command["params"]["item"]["status"], "completed");
    assert_eq!(command["params"]["item"]["exitCode"], 0);
    assert_eq!(command["params"]["item"]["aggregatedOutput"], "hello\n");
    let patch = messages
        .iter()
        .find(|m| m["method"] == "item/completed" && m["params"]["item"]["type"] == "fileChange")
        .expect("patch item");
    assert_eq!(patch["params"]["item"]["status"], "completed");
    assert_eq!(patch["params"]["item"]["changes"][0]["kind"]["type"], "add");
    assert!(env.work_path().join("notes.txt").is_file());
    let done = messages.last().expect("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(done["params"]["turn"]["id"], turn_id.as_str());

    // A second turn gets its own id; the stored thread replays both with their items.
    env.script_text("again");
    let turn2 = client.start_turn(&thread_id, "once more").await;
    assert_ne!(turn2, turn_id);
    client.until_turn_completed().await;
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let turns = read["thread"]["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2);
    let kinds: Vec<&str> = turns[0]["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "userMessage",
            "commandExecution",
            "fileChange",
            "agentMessage"
        ]
    );
    assert_eq!(read["thread"]["preview"], "say hello");
}

/// No answer within approval_timeout_sec: denied, resolved, and the turn goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_is_denied_at_the_deadline() {
    let env = AppEnv::with_config("approval_timeout_sec = 1").await;
    env.script_command_then_text("call_1", "touch late.txt", "gave up");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}))
        .await;
    client.start_turn(&thread_id, "touch").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    let messages = client.until_turn_completed().await;
    let resolved = messages
        .iter()
        .find(|m| m["method"] == "serverRequest/resolved")
        .expect("resolved");
    assert_eq!(resolved["params"]["requestId"], request["id"]);
    let item = messages
        .iter()
        .find(|m| {
            m["method"] == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
        })
        .expect("command item");
    assert_eq!(item["params"]["item"]["status"], "declined");
    assert!(!env.work_path().join("late.txt").exists());
}

/// Approval v2: item/started → request → serverRequest/resolved → item/completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_command_approval_accept_and_decline() {
    let env = AppEnv::new().await;
    env.script_command_then_text("call_1", "touch approved.txt", "first done");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}))
        .await;
    client.start_turn(&thread_id, "touch it").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    assert_eq!(request["params"]["threadId"], thread_id.as_str());
    assert_eq!(request["params"]["itemId"], "call_1");
    assert!(
        request["params"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("touch approved.txt")),
        "{request}"
    );
    let request_id = request["id"].clone();
    client
        .respond(&request_id, json!({"decision": "accept"}))
        .await;
    let messages = client.until_turn_completed().await;
    let order = trace(&messages);
    let resolved = order
        .iter()
        .position(|m| m == "serverRequest/resolved")
        .expect("resolved");
    let completed = order
        .iter()
        .position(|m| m == "item/completed:commandExecution")
        .expect("completed");
    assert!(resolved < completed, "{order:?}");
    let resolved_msg = messages
        .iter()
        .find(|m| m["method"] == "serverRequest/resolved")
        .expect("resolved");
    assert_eq!(resolved_msg["params"]["requestId"], request_id);
    assert!(env.work_path().join("approved.txt").is_file());

    // Declined: the command does not run, the item completes as declined.
    env.script_command_then_text("call_2", "touch declined.txt", "second done");
    client.start_turn(&thread_id, "touch another").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    client
        .respond(&request["id"], json!({"decision": "decline"}))
        .await;
    let messages = client.until_turn_completed().await;
    let item = messages
        .iter()
        .find(|m| {
            m["method"] == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
        })
        .expect("command item");
    assert_eq!(item["params"]["item"]["status"], "declined");
    assert!(!env.work_path().join("declined.txt").exists());
}

/// A client that does not implement approvals answers -32601: the configured fallback
/// applies (here approve), and a malformed answer is a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_not_found_gets_the_fallback_and_garbage_denies() {
    let env = AppEnv::with_config("[app_server]\napproval_fallback = \"approve\"").await;
    env.script_command_then_text("call_1", "touch fallback.txt", "done");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}))
        .await;
    client.start_turn(&thread_id, "touch").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    client
        .respond_error(&request["id"], -32601, "method not found")
        .await;
    client.until_turn_completed().await;
    assert!(env.work_path().join("fallback.txt").is_file());

    env.script_command_then_text("call_2", "touch garbage.txt", "done");
    client.start_turn(&thread_id, "touch again").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    client
        .respond(&request["id"], json!({"decision": "yes please"}))
        .await;
    client.until_turn_completed().await;
    assert!(!env.work_path().join("garbage.txt").exists());
}

/// v1 clients get execCommandApproval / applyPatchApproval and answer with ReviewDecision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_approvals_for_legacy_clients() {
    let env = AppEnv::new().await;
    env.script_command_then_text("call_1", "touch v1.txt", "unused");
    let mut client = env.spawn();
    client
        .initialize_with(json!({"legacyApprovals": true}))
        .await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}))
        .await;
    client.start_turn(&thread_id, "go").await;
    let request = client.server_request("execCommandApproval").await;
    assert_eq!(request["params"]["conversationId"], thread_id.as_str());
    assert_eq!(request["params"]["callId"], "call_1");
    let argv = request["params"]["command"].as_array().expect("argv");
    assert_eq!(argv.last(), Some(&json!("touch v1.txt")));
    client
        .respond(&request["id"], json!({"decision": "approved"}))
        .await;
    client.until_turn_completed().await;
    assert!(env.work_path().join("v1.txt").is_file());

    env.script_patch("call_p", "v1-notes.txt");
    env.script_text("patched");
    client.start_turn(&thread_id, "patch").await;
    let request = client.server_request("applyPatchApproval").await;
    assert_eq!(request["params"]["callId"], "call_p");
    let changes = request["params"]["fileChanges"]
        .as_object()
        .expect("fileChanges");
    assert_eq!(changes.len(), 1);
    client
        .respond(
            &request["id"],
            json!({"decision": {"denied": {"rejection": "no"}}}),
        )
        .await;
    let messages = client.until_turn_completed().await;
    assert!(
        messages
            .iter()
            .any(|m| m["method"] == "serverRequest/resolved")
    );
    assert!(
        !env.work_path().join("v1-notes.txt").exists(),
        "{messages:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_patch_approval_accept() {
    let env = AppEnv::new().await;
    env.script_patch("call_p", "approved-notes.txt");
    env.script_text("patched");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "workspace-write"}))
        .await;
    client.start_turn(&thread_id, "patch").await;
    let request = client
        .server_request("item/fileChange/requestApproval")
        .await;
    assert_eq!(request["params"]["itemId"], "call_p");
    client
        .respond(&request["id"], json!({"decision": "accept"}))
        .await;
    let messages = client.until_turn_completed().await;
    let order = trace(&messages);
    assert!(
        order.iter().position(|m| m == "serverRequest/resolved")
            < order.iter().position(|m| m == "item/completed:fileChange"),
        "{order:?}"
    );
    assert!(env.work_path().join("approved-notes.txt").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_ends_the_turn_as_interrupted() {
    let env = AppEnv::new().await;
    env.script_command_then_text("call_sleep", "sleep 60", "never");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    let turn_id = client.start_turn(&thread_id, "wait").await;
    client
        .read_until(|m| {
            m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    let wrong = client
        .call(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": "nope"}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32600);
    client
        .ok(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    let done = client.notification("turn/completed").await;
    assert_eq!(done["params"]["turn"]["status"], "interrupted");
    let none = client
        .call(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    assert_eq!(none["error"]["message"], "no active turn to interrupt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_adds_input_to_the_running_turn() {
    let env = AppEnv::new().await;
    env.script_command_then_text("call_sleep", "sleep 3", "steered answer");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    let turn_id = client.start_turn(&thread_id, "start").await;
    client
        .read_until(|m| {
            m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    let wrong = client
        .call(
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": "other", "input": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(
        wrong["error"]["message"],
        format!("expected active turn id `other` but found `{turn_id}`")
    );
    let steered = client
        .ok(
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": turn_id, "input": [{"type": "text", "text": "also say steered"}]}),
        )
        .await;
    assert_eq!(steered["turnId"], turn_id.as_str());
    let messages = client.until_turn_completed().await;
    let steer_item = messages.iter().find(|m| {
        m["method"] == "item/completed"
            && m["params"]["item"]["type"] == "userMessage"
            && m["params"]["item"]["content"][0]["text"] == "also say steered"
    });
    assert!(steer_item.is_some(), "{messages:#?}");
    assert_eq!(
        messages.last().map(|m| m["params"]["turn"]["id"].clone()),
        Some(json!(turn_id))
    );
    // The model saw the steer in the same turn's next request.
    let record = env.model.record();
    let last = record.requests.last().expect("requests").to_string();
    assert!(last.contains("also say steered"), "{last}");
    let none = client
        .call(
            "turn/steer",
            json!({"threadId": thread_id, "expectedTurnId": turn_id, "input": [{"type": "text", "text": "late"}]}),
        )
        .await;
    assert_eq!(none["error"]["message"], "no active turn to steer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_copies_history_and_resume_survives_a_restart() {
    let env = AppEnv::new().await;
    env.script_text("first answer");
    env.script_text("second answer");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    let first = client.start_turn(&thread_id, "first question").await;
    client.until_turn_completed().await;
    client.start_turn(&thread_id, "second question").await;
    client.until_turn_completed().await;

    // Fork through the first turn only.
    let fork = client
        .ok(
            "thread/fork",
            json!({"threadId": thread_id, "lastTurnId": first}),
        )
        .await;
    let fork_id = fork["thread"]["id"].as_str().expect("fork id").to_string();
    assert_ne!(fork_id, thread_id);
    assert_eq!(fork["thread"]["forkedFromId"], thread_id.as_str());
    assert_eq!(fork["thread"]["turns"].as_array().map(Vec::len), Some(1));
    client.notification("thread/started").await;
    env.script_text("fork answer");
    client.start_turn(&fork_id, "fork question").await;
    client.until_turn_completed().await;
    // The fork's model request carries the first turn, not the second.
    let record = env.model.record();
    let last = record.requests.last().expect("request").to_string();
    assert!(
        last.contains("first question") && !last.contains("second question"),
        "{last}"
    );
    drop(client);

    // A new server process resumes the original thread from disk, with the settings it
    // ran with (another approval policy would offer other tools, a new prompt prefix).
    let mut client = env.spawn();
    client.initialize().await;
    let resumed = client
        .ok(
            "thread/resume",
            json!({"threadId": thread_id, "approvalPolicy": "never",
                   "sandbox": "danger-full-access"}),
        )
        .await;
    assert_eq!(resumed["thread"]["id"], thread_id.as_str());
    assert_eq!(resumed["thread"]["turns"].as_array().map(Vec::len), Some(2));
    env.script_text("third answer");
    client.start_turn(&thread_id, "third question").await;
    let messages = client.until_turn_completed().await;
    assert_eq!(
        messages
            .last()
            .map(|m| m["params"]["turn"]["status"].clone()),
        Some(json!("completed"))
    );
    let record = env.model.record();
    let last = record.requests.last().expect("request").to_string();
    assert!(
        last.contains("second answer") && last.contains("third question"),
        "{last}"
    );
    assert!(record.violations.is_empty(), "{:?}", record.violations);
}

/// `turn/start` settings apply to that turn and stick for the next (as in the reference):
/// here the model and the approval policy change between two turns of one thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_start_settings_apply_and_stick() {
    let env = AppEnv::new().await;
    env.script_text("first");
    env.script_text("second");
    env.script_text("third");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    client.start_turn(&thread_id, "one").await;
    client.until_turn_completed().await;
    client
        .ok(
            "turn/start",
            json!({"threadId": thread_id, "model": "other-model", "approvalPolicy": "untrusted",
                   "input": [{"type": "text", "text": "two"}]}),
        )
        .await;
    client.until_turn_completed().await;
    client.start_turn(&thread_id, "three").await;
    client.until_turn_completed().await;
    let requests = env.model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["model"], "mock-model");
    for request in &requests[1..] {
        assert_eq!(request["model"], "other-model", "{request}");
        let body = request.to_string();
        assert!(
            body.contains("<approval_policy>untrusted</approval_policy>"),
            "the model is told the new policy: {body}"
        );
        assert!(body.contains("first"), "the history carries over: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model_request_is_one_error_with_the_providers_message() {
    let env = AppEnv::new().await;
    env.model
        .push(interpreter_test_support::MockResponse::status(
            401,
            r#"{"error":{"message":"invalid api key"}}"#,
        ));
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    client.start_turn(&thread_id, "hi").await;
    let messages = client.until_turn_completed().await;
    let expected = format!(
        "model provider `mock` answered 401 Unauthorized to POST {}/chat/completions: invalid \
         api key; check the API key in MOCK_API_KEY, or store one with `interpreter login \
         --provider mock`",
        env.model.base_url()
    );
    let errors: Vec<&Value> = messages.iter().filter(|m| m["method"] == "error").collect();
    assert_eq!(errors.len(), 1, "{messages:#?}");
    assert_eq!(errors[0]["params"]["error"]["message"], expected.as_str());
    assert_eq!(errors[0]["params"]["willRetry"], false);
    assert_eq!(
        errors[0]["params"]["error"]["codexErrorInfo"],
        "unauthorized"
    );
    let completed = messages.last().expect("turn/completed");
    assert_eq!(completed["params"]["turn"]["status"], "failed");
    assert_eq!(
        completed["params"]["turn"]["error"]["message"],
        expected.as_str()
    );
    // What the turn did before it failed (nothing): the recap the MCP tools give too,
    // and the same when the turn is read back.
    assert_eq!(
        completed["params"]["turn"]["error"]["additionalDetails"],
        "Before it stopped, the turn ran no command and changed no file."
    );
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    assert_eq!(
        read["thread"]["turns"][0]["error"], completed["params"]["turn"]["error"],
        "{read}"
    );
    assert_eq!(env.model.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_server_is_an_http_connection_failure() {
    let env = AppEnv::new().await;
    let port = interpreter_test_support::free_loopback_port().unwrap();
    let base_url = format!("model_providers.mock.base_url=\"http://127.0.0.1:{port}/v1\"");
    let mut client = env.spawn_with_args(&["-c", &base_url]);
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    client.start_turn(&thread_id, "hi").await;
    let messages = client.until_turn_completed().await;
    let completed = messages.last().expect("turn/completed");
    assert_eq!(completed["params"]["turn"]["status"], "failed");
    let error = &completed["params"]["turn"]["error"];
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing is listening")),
        "{error}"
    );
    assert_eq!(
        error["codexErrorInfo"],
        serde_json::json!({"httpConnectionFailed": {"httpStatusCode": null}})
    );
}

/// Codex's granular approval policy (a stable input we used to refuse with -32602): a
/// kind of question that is on is asked, one that is off is refused without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granular_policy_asks_what_is_on_and_refuses_what_is_off() {
    let env = AppEnv::new().await;
    let outside = tempfile::TempDir::new().expect("outside dir");
    let target = outside.path().join("planted.txt");
    // A patch outside the workspace (a sandbox question, off), then a forceful delete
    // (a rule question, on).
    let arguments = json!({
        "input": format!("*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch\n", target.display())
    })
    .to_string();
    env.model
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::tool_call(
                0,
                "call_p",
                "apply_patch",
                &arguments,
            ),
            interpreter_test_support::mock_model::chunk::finish("tool_calls"),
        ]));
    env.script_command_then_text("call_rm", "rm -rf build", "done");
    let mut client = env.spawn();
    client.initialize().await;
    let granular =
        json!({"granular": {"sandbox_approval": false, "rules": true, "mcp_elicitations": false}});
    let started = client
        .ok(
            "thread/start",
            json!({
                "approvalPolicy": granular,
                "sandbox": "workspace-write",
                // /tmp (where the test's directories are) is not a writable root then.
                "config": {
                    "sandbox_workspace_write.exclude_slash_tmp": true,
                    "sandbox_workspace_write.exclude_tmpdir_env_var": true,
                },
            }),
        )
        .await;
    assert_eq!(
        started["approvalPolicy"],
        json!({"granular": {
            "sandbox_approval": false,
            "rules": true,
            "mcp_elicitations": false,
            "request_permissions": false,
            "skill_approval": false,
        }}),
        "{started}"
    );
    let thread_id = started["thread"]["id"].as_str().expect("id").to_string();
    client.start_turn(&thread_id, "go").await;
    let request = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    assert_eq!(request["params"]["itemId"], "call_rm", "{request}");
    client
        .respond(&request["id"], json!({"decision": "decline"}))
        .await;
    let messages = client.until_turn_completed().await;
    assert!(
        !messages
            .iter()
            .any(|m| m["method"] == "item/fileChange/requestApproval"),
        "a sandbox question was asked: {messages:#?}"
    );
    assert!(
        !target.exists(),
        "the patch outside the workspace was written"
    );
    let requests = env.model.requests();
    let after_patch = requests[1].to_string();
    assert!(
        after_patch.contains("turns sandbox questions off"),
        "{after_patch}"
    );
}

/// Codex's `externalSandbox` (a stable input we used to refuse with -32602): the client
/// runs the agent inside its own sandbox, so commands run without ours, and the model is
/// told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_sandbox_runs_commands_without_ours_and_says_so() {
    let env = AppEnv::new().await;
    let outside = tempfile::TempDir::new().expect("outside dir");
    let marker = outside.path().join("written-outside.txt");
    env.script_command_then_text("call_1", &format!("touch {}", marker.display()), "done");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "never", "sandbox": "read-only"}))
        .await;
    client
        .ok(
            "turn/start",
            json!({"threadId": thread_id,
                   "sandboxPolicy": {"type": "externalSandbox", "networkAccess": "enabled"},
                   "input": [{"type": "text", "text": "touch it"}]}),
        )
        .await;
    client.until_turn_completed().await;
    assert!(
        marker.is_file(),
        "the command did not run outside our sandbox"
    );
    let body = env.model.requests()[0].to_string();
    assert!(
        body.contains("<sandbox_mode>external-sandbox</sandbox_mode>")
            && body.contains("<network_access>enabled</network_access>"),
        "{body}"
    );
    let resumed = client
        .ok("thread/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(
        resumed["sandbox"],
        json!({"type": "externalSandbox", "networkAccess": "enabled"}),
        "{resumed}"
    );
}

/// A Responses server that summarises its reasoning: each summary part is announced
/// (`item/reasoning/summaryPartAdded`) and streamed (`item/reasoning/summaryTextDelta`)
/// on the reasoning item, raw text streams as `item/reasoning/textDelta`, and the
/// completed item (and `thread/read` after a restart) keeps the summary's parts apart
/// from the raw text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_summaries_stream_part_by_part_and_stay_apart_from_raw_text() {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::responses_event::ResponseEvents;

    let env = AppEnv::new().await;
    let config = env.home.path().join("config.toml");
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace("wire_api = \"chat\"", "wire_api = \"responses\"");
    std::fs::write(&config, text).expect("write config");
    env.model.push(MockResponse::responses(
        ResponseEvents::new("resp_1")
            .reasoning(
                &["Look at the tests.", "Then run them."],
                Some("raw thoughts"),
                None,
            )
            .text("done")
            .completed(10, 5),
    ));
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(NO_APPROVALS)).await;
    let turn_id = client.start_turn(&thread_id, "think").await;
    let messages = client.until_turn_completed().await;

    let reasoning: Vec<&Value> = messages
        .iter()
        .filter(|m| {
            m["method"].as_str().is_some_and(|method| {
                method.starts_with("item/reasoning/")
                    || ((method == "item/started" || method == "item/completed")
                        && m["params"]["item"]["type"] == "reasoning")
            })
        })
        .collect();
    let order: Vec<String> = reasoning
        .iter()
        .map(|m| {
            let method = m["method"].as_str().unwrap_or("?");
            match m["params"]["summaryIndex"].as_i64() {
                Some(index) => format!("{method}#{index}"),
                None => method.to_string(),
            }
        })
        .collect();
    assert_eq!(
        order,
        vec![
            "item/started",
            "item/reasoning/summaryPartAdded#0",
            "item/reasoning/summaryTextDelta#0",
            "item/reasoning/summaryPartAdded#1",
            "item/reasoning/summaryTextDelta#1",
            "item/reasoning/textDelta",
            "item/completed",
        ]
    );
    let item_id = reasoning[0]["params"]["item"]["id"].clone();
    for m in &reasoning[1..6] {
        assert_eq!(m["params"]["itemId"], item_id, "{m}");
        assert_eq!(m["params"]["turnId"], turn_id.as_str(), "{m}");
        assert_eq!(m["params"]["threadId"], thread_id.as_str(), "{m}");
    }
    assert_eq!(reasoning[2]["params"]["delta"], "Look at the tests.");
    assert_eq!(reasoning[4]["params"]["delta"], "Then run them.");
    let expected = json!({
        "type": "reasoning",
        "id": item_id,
        "summary": ["Look at the tests.", "Then run them."],
        "content": ["raw thoughts"],
    });
    assert_eq!(reasoning[6]["params"]["item"], expected);
    drop(client);

    // After a restart the stored turn shows the same item.
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = read["thread"]["turns"][0]["items"]
        .as_array()
        .expect("items")
        .clone();
    let stored = items
        .iter()
        .find(|item| item["type"] == "reasoning")
        .expect("reasoning item");
    assert_eq!(stored["summary"], expected["summary"]);
    assert_eq!(stored["content"], expected["content"]);
}

/// What a client saw live is what `thread/read` gives back: the same items, with the
/// same ids, in the same order, with the same content, for turns with reasoning, a
/// command, a patch, a declined command and an interrupted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_items_equal_the_items_read_back() {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::chunk;

    let env = AppEnv::new().await;
    let call = |id: &str, name: &str, arguments: Value| {
        MockResponse::sse(vec![
            chunk::tool_call(0, id, name, &arguments.to_string()),
            chunk::finish("tool_calls"),
        ])
    };
    env.model.push(MockResponse::sse(vec![
        chunk::reasoning("Look first, "),
        chunk::reasoning("then write."),
        chunk::tool_call(0, "call_ls", "shell", &json!({"command": "ls"}).to_string()),
        chunk::finish("tool_calls"),
    ]));
    env.script_patch("call_patch", "notes.txt");
    env.model.push(call(
        "call_no",
        "shell",
        json!({"command": "touch declined.txt"}),
    ));
    env.script_text("wrote the notes");
    env.model.push(call(
        "call_sleep",
        "shell",
        json!({"command": "echo started; sleep 60"}),
    ));

    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "untrusted", "sandbox": "danger-full-access"}))
        .await;
    let mut live = Vec::new();
    // Turn 1: approve everything but `call_no`.
    let first = client.start_turn(&thread_id, "take notes").await;
    loop {
        let message = client.read_until(|m| m.get("method").is_some()).await;
        if message.get("id").is_some() {
            let decision = if message["params"]["itemId"] == "call_no" {
                "decline"
            } else {
                "accept"
            };
            client
                .respond(&message["id"], json!({"decision": decision}))
                .await;
            continue;
        }
        let done = message["method"] == "turn/completed";
        live.push(message);
        if done {
            break;
        }
    }
    // Turn 2: the command runs until the turn is interrupted.
    let second = client.start_turn(&thread_id, "wait").await;
    let ask = client
        .server_request("item/commandExecution/requestApproval")
        .await;
    client
        .respond(&ask["id"], json!({"decision": "accept"}))
        .await;
    client
        .read_until(|m| {
            m["method"] == "item/commandExecution/outputDelta"
                && m["params"]["itemId"] == "call_sleep"
        })
        .await;
    client
        .ok(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": second}),
        )
        .await;
    live.extend(client.until_turn_completed().await);

    let completed = |turn: &str| -> Vec<Value> {
        live.iter()
            .filter(|m| m["method"] == "item/completed" && m["params"]["turnId"] == turn)
            .map(|m| m["params"]["item"].clone())
            .collect()
    };
    let started: Vec<Value> = live
        .iter()
        .filter(|m| m["method"] == "item/started")
        .map(|m| m["params"]["item"]["id"].clone())
        .collect();
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let turns = read["thread"]["turns"].as_array().expect("turns");
    assert_eq!(turns.len(), 2, "{read:#}");
    assert_eq!(turns[0]["id"], first.as_str());
    assert_eq!(turns[1]["id"], second.as_str());
    assert_eq!(turns[1]["status"], "interrupted");
    for (turn, stored) in [(&first, &turns[0]), (&second, &turns[1])] {
        assert_eq!(
            &completed(turn),
            stored["items"].as_array().expect("items"),
            "turn {turn}: live (left) and read back (right) differ"
        );
    }
    // Every item started live completed, once.
    let all_completed: Vec<Value> = [completed(&first), completed(&second)]
        .concat()
        .iter()
        .map(|item| item["id"].clone())
        .collect();
    assert_eq!(started, all_completed);
    let kinds_and_status: Vec<(String, String)> = [completed(&first), completed(&second)]
        .concat()
        .iter()
        .map(|item| {
            (
                format!(
                    "{}:{}",
                    item["type"].as_str().unwrap_or("?"),
                    item["id"].as_str().unwrap_or("?")
                ),
                item["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected = |kind: &str, status: &str| (kind.to_string(), status.to_string());
    assert_eq!(
        kinds_and_status,
        vec![
            expected(&format!("userMessage:{first}-user-1"), ""),
            expected(&format!("reasoning:{first}-reasoning-2"), ""),
            expected("commandExecution:call_ls", "completed"),
            expected("fileChange:call_patch", "completed"),
            expected("commandExecution:call_no", "declined"),
            expected(&format!("agentMessage:{first}-msg-3"), ""),
            expected(&format!("userMessage:{second}-user-1"), ""),
            expected("commandExecution:call_sleep", "failed"),
        ]
    );
}
