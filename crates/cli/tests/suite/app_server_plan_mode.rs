//! Plan mode through `interpreter app-server`: `turn/start`'s `collaborationMode`, the
//! `plan` item with its `item/plan/delta` stream, what the model is sent, the plan kept
//! in the thread across a restart, and a Plan-mode turn that cannot write whatever the
//! model calls.

use crate::app_server_support::{AppClient, AppEnv, trace};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The widest policy there is: Plan mode must still write nothing.
const WIDE_OPEN: &str = r#"{"approvalPolicy": "never", "sandbox": "danger-full-access"}"#;

fn params(text: &str) -> Value {
    serde_json::from_str(text).expect("json")
}

fn mode(kind: &str) -> Value {
    json!({
        "mode": kind,
        "settings": {"model": "mock-model", "reasoning_effort": null, "developer_instructions": null}
    })
}

async fn start_turn_in(client: &mut AppClient, thread_id: &str, text: &str, kind: &str) -> String {
    let result = client
        .ok(
            "turn/start",
            json!({
                "threadId": thread_id,
                "input": [{"type": "text", "text": text}],
                "collaborationMode": mode(kind),
            }),
        )
        .await;
    result["turn"]["id"].as_str().expect("turn id").to_string()
}

/// The answer streamed in `pieces`, each its own SSE chunk.
fn script_pieces(env: &AppEnv, pieces: &[&str]) {
    let mut chunks: Vec<Value> = pieces.iter().map(|p| chunk::text(p)).collect();
    chunks.push(chunk::finish("stop"));
    env.model.push(MockResponse::sse(chunks));
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn system_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().find(|m| m["role"] == "system"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// The collaboration-mode messages of a chat request, in order.
fn mode_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .filter(|text| text.starts_with("<collaboration_mode>"))
        .map(str::to_string)
        .collect()
}

fn of_method<'a>(messages: &'a [Value], method: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["method"] == method).collect()
}

fn items_of_type<'a>(items: &'a Value, kind: &str) -> Vec<&'a Value> {
    items
        .as_array()
        .map(|items| items.iter().filter(|i| i["type"] == kind).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_turn_streams_the_plan_item_and_keeps_it_across_a_restart() {
    let env = AppEnv::new().await;
    // The tags split across chunks, mid-word.
    script_pieces(
        &env,
        &[
            "Intro\n<propo",
            "sed_plan>\n- Step",
            " 1\n</proposed",
            "_plan>\nOutro",
        ],
    );
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(WIDE_OPEN)).await;
    let turn_id = start_turn_in(&mut client, &thread_id, "make a plan", "plan").await;
    let messages = client.until_turn_completed().await;
    let plan_id = format!("{turn_id}-plan");

    let order: Vec<String> = trace(&messages)
        .into_iter()
        .filter(|m| m.contains("plan") || m.contains("agentMessage"))
        .collect();
    assert_eq!(
        order.first().map(String::as_str),
        Some("item/started:agentMessage"),
        "{order:?}"
    );
    let plan_started = order.iter().position(|m| m == "item/started:plan");
    let first_delta = order.iter().position(|m| m == "item/plan/delta");
    let plan_completed = order.iter().position(|m| m == "item/completed:plan");
    assert!(
        plan_started < first_delta && first_delta < plan_completed && plan_started.is_some(),
        "{order:?}"
    );

    let started = of_method(&messages, "item/started")
        .into_iter()
        .find(|m| m["params"]["item"]["type"] == "plan")
        .expect("plan started");
    assert_eq!(
        started["params"]["item"],
        json!({"type": "plan", "id": plan_id, "text": ""})
    );
    assert_eq!(started["params"]["turnId"], turn_id.as_str());
    let deltas = of_method(&messages, "item/plan/delta");
    for delta in &deltas {
        assert_eq!(delta["params"]["threadId"], thread_id.as_str());
        assert_eq!(delta["params"]["turnId"], turn_id.as_str());
        assert_eq!(delta["params"]["itemId"], plan_id.as_str());
    }
    let streamed: String = deltas
        .iter()
        .map(|d| d["params"]["delta"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(streamed, "- Step 1\n");
    let completed = of_method(&messages, "item/completed");
    let plan = completed
        .iter()
        .find(|m| m["params"]["item"]["type"] == "plan")
        .expect("plan completed");
    assert_eq!(
        plan["params"]["item"],
        json!({"type": "plan", "id": plan_id, "text": "- Step 1\n"})
    );
    // The message keeps what is outside the block, streamed and completed alike.
    let message = completed
        .iter()
        .find(|m| m["params"]["item"]["type"] == "agentMessage")
        .expect("message completed");
    assert_eq!(message["params"]["item"]["text"], "Intro\nOutro");
    let message_deltas: String = of_method(&messages, "item/agentMessage/delta")
        .iter()
        .map(|d| d["params"]["delta"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(message_deltas, "Intro\nOutro");

    // What the model was sent: the plan instructions as a message of the conversation;
    // the system prompt and the tools as in any turn (apply_patch is refused, not
    // withdrawn), so the server's prompt cache holds across modes.
    let record = env.model.record();
    let request = record.requests.last().expect("request");
    assert!(
        !system_text(request).contains("<proposed_plan>"),
        "{request}"
    );
    assert!(
        mode_messages(request)
            .iter()
            .any(|text| text.contains("<proposed_plan>")),
        "{request}"
    );
    let tools = tool_names(request);
    assert!(tools.contains(&"shell".to_string()), "{tools:?}");
    assert!(tools.contains(&"apply_patch".to_string()), "{tools:?}");
    assert!(record.violations.is_empty(), "{:?}", record.violations);

    // The plan is part of the thread, in every listing.
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = &read["thread"]["turns"][0]["items"];
    assert_eq!(
        items_of_type(items, "plan"),
        [&json!({"type": "plan", "id": plan_id, "text": "- Step 1\n"})],
        "{items}"
    );
    let listed = client
        .ok("thread/items/list", json!({"threadId": thread_id}))
        .await;
    assert!(
        listed["data"]
            .as_array()
            .expect("data")
            .iter()
            .any(|e| e["item"]["type"] == "plan" && e["turnId"] == turn_id.as_str()),
        "{listed}"
    );
    let turns = client
        .ok(
            "thread/turns/list",
            json!({"threadId": thread_id, "itemsView": "full"}),
        )
        .await;
    assert_eq!(
        items_of_type(&turns["data"][0]["items"], "plan").len(),
        1,
        "{turns}"
    );
    drop(client);

    // A new server process reads the plan back from disk.
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = &read["thread"]["turns"][0]["items"];
    assert_eq!(
        items_of_type(items, "plan"),
        [&json!({"type": "plan", "id": plan_id, "text": "- Step 1\n"})],
        "{items}"
    );
    assert_eq!(
        items_of_type(items, "agentMessage")[0]["text"],
        "Intro\nOutro"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mode_sticks_until_default_and_default_is_unchanged() {
    let env = AppEnv::new().await;
    env.script_text("Just looking around, no plan yet.");
    env.script_text("Still planning.");
    env.script_text("Done.\n<proposed_plan>\nnot a plan here\n</proposed_plan>\n");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(WIDE_OPEN)).await;

    // Plan mode, an answer without a block: no plan item, the message whole.
    start_turn_in(&mut client, &thread_id, "plan it", "plan").await;
    let messages = client.until_turn_completed().await;
    assert!(
        !trace(&messages).iter().any(|m| m.contains("plan")),
        "{:?}",
        trace(&messages)
    );
    let message = of_method(&messages, "item/completed")
        .into_iter()
        .find(|m| m["params"]["item"]["type"] == "agentMessage")
        .expect("message");
    assert_eq!(
        message["params"]["item"]["text"],
        "Just looking around, no plan yet."
    );

    // No mode given: the thread stays in Plan mode.
    client.start_turn(&thread_id, "go on").await;
    client.until_turn_completed().await;
    // Default mode: today's request and answer, a block included as text.
    start_turn_in(&mut client, &thread_id, "now do it", "default").await;
    let messages = client.until_turn_completed().await;
    assert!(
        !trace(&messages).iter().any(|m| m.contains("plan")),
        "{:?}",
        trace(&messages)
    );
    let message = of_method(&messages, "item/completed")
        .into_iter()
        .find(|m| m["params"]["item"]["type"] == "agentMessage")
        .expect("message");
    assert_eq!(
        message["params"]["item"]["text"],
        "Done.\n<proposed_plan>\nnot a plan here\n</proposed_plan>\n"
    );

    let record = env.model.record();
    let [first, second, third] = &record.requests[..] else {
        panic!("three requests: {:?}", record.requests);
    };
    // The mode is said once when it starts and once when it ends; the system prompt
    // and tools never change (the mock's prefix check holds on every request).
    assert_eq!(mode_messages(first).len(), 1, "{first}");
    assert!(mode_messages(first)[0].contains("<proposed_plan>"));
    assert_eq!(mode_messages(second), mode_messages(first), "{second}");
    let said = mode_messages(third);
    assert_eq!(said.len(), 2, "{third}");
    assert!(said[1].contains("Default mode"), "{third}");
    for request in [first, second, third] {
        assert!(
            !system_text(request).contains("<proposed_plan>"),
            "{request}"
        );
        assert!(tool_names(request).contains(&"apply_patch".to_string()));
    }
    assert!(record.violations.is_empty(), "{:?}", record.violations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_mode_is_invalid_params() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(WIDE_OPEN)).await;
    let response = client
        .call(
            "turn/start",
            json!({
                "threadId": thread_id,
                "input": [{"type": "text", "text": "hi"}],
                "collaborationMode": mode("yolo"),
            }),
        )
        .await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"].to_string().contains("yolo"),
        "{response}"
    );
    assert_eq!(env.model.record().requests.len(), 0);
}

/// A hostile model in Plan mode, on a thread whose policy would allow anything: a patch,
/// a shell redirect, a patch smuggled through the shell and a request to leave the
/// sandbox all leave the workspace as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_model_in_plan_mode_writes_nothing() {
    let env = AppEnv::new().await;
    env.script_write_attempts("<proposed_plan>\nnothing\n</proposed_plan>");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(params(WIDE_OPEN)).await;
    start_turn_in(&mut client, &thread_id, "plan", "plan").await;
    let messages = client.until_turn_completed().await;

    env.assert_nothing_written(&messages);
    let changes: Vec<&Value> = of_method(&messages, "item/completed")
        .into_iter()
        .filter(|m| m["params"]["item"]["type"] == "fileChange")
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        changes
            .iter()
            .all(|m| m["params"]["item"]["status"] == "failed")
    );
    // The model was told why.
    let record = env.model.record();
    let last = record.requests.last().expect("request").to_string();
    assert!(last.contains("not available in Plan mode"), "{last}");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
}
