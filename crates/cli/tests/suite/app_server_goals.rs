//! Goal mode through `interpreter app-server` (`thread/goal/set|get|clear`), as the Codex
//! Python SDK's goal helpers use it: a goal set active starts turns on its own until the
//! model marks it complete, its token budget is spent, or it is paused; every change is
//! announced with `thread/goal/updated`, and a restarted server has the goal back.

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::{Value, json};

/// One model answer of plain text that costs 15 tokens.
fn answer(env: &AppEnv, text: &str) {
    env.model.push(MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(10, 5),
    ]));
}

/// The model ends the goal, then says so.
fn mark_goal(env: &AppEnv, status: &str) {
    let arguments = json!({"status": status, "reason": "tests pass"}).to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_goal", "update_goal", &arguments),
        chunk::finish("tool_calls"),
        chunk::usage(10, 5),
    ]));
    answer(env, "done with the goal");
}

/// Every message up to and including the `turns`-th `turn/completed`.
async fn until_turns_completed(client: &mut AppClient, turns: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut completed = 0;
    while completed < turns {
        let message = client
            .read(READ_DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e:#}\nseen: {out:#?}\nstderr:\n{}", client.stderr()));
        if message["method"] == "turn/completed" {
            completed += 1;
        }
        out.push(message);
    }
    out
}

fn goal_updates(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "thread/goal/updated")
        .map(|m| &m["params"])
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_goal_runs_turns_until_the_model_marks_it_complete() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    answer(&env, "made a start");
    mark_goal(&env, "complete");

    let set = client
        .ok(
            "thread/goal/set",
            json!({"threadId": thread_id, "objective": "Make the tests pass", "status": "active"}),
        )
        .await;
    assert_eq!(set["goal"]["objective"], "Make the tests pass");
    assert_eq!(set["goal"]["status"], "active");
    assert_eq!(set["goal"]["threadId"], thread_id.as_str());
    assert_eq!(set["goal"]["tokensUsed"], 0);

    let messages = until_turns_completed(&mut client, 2).await;
    let updates = goal_updates(&messages);
    assert_eq!(updates[0]["turnId"], Value::Null, "{updates:#?}");
    let last = updates.last().expect("an update");
    assert_eq!(last["goal"]["status"], "complete", "{updates:#?}");
    let turn_ids: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "turn/started")
        .map(|m| &m["params"]["turn"]["id"])
        .collect();
    assert_eq!(turn_ids.len(), 2, "{messages:#?}");
    assert_eq!(&last["turnId"], turn_ids[1]);
    // The first goal update comes before the first goal turn.
    let first_update = messages
        .iter()
        .position(|m| m["method"] == "thread/goal/updated")
        .unwrap();
    let first_turn = messages
        .iter()
        .position(|m| m["method"] == "turn/started")
        .unwrap();
    assert!(first_update < first_turn);

    // The first turn's 15 tokens were counted, and the objective reached the model with
    // the tool that ends it.
    let got = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(got["goal"]["status"], "complete");
    assert!(got["goal"]["tokensUsed"].as_i64().unwrap() >= 15, "{got}");
    let requests = env.model.requests();
    assert_eq!(requests.len(), 3, "no turn after the goal is complete");
    assert!(requests[0].to_string().contains("Make the tests pass"));
    assert!(tool_names(&requests[0]).contains(&"update_goal".to_string()));
    env.model.assert_invariants();

    // A plain turn now: the goal is over, but the tool stays offered (the tool list
    // is the start of every request; changing it would throw away the server's prompt
    // cache), and a call says there is no active goal. The mock checks the prefix.
    answer(&env, "plain");
    client.start_turn(&thread_id, "hello").await;
    client.until_turn_completed().await;
    let requests = env.model.requests();
    assert!(tool_names(requests.last().unwrap()).contains(&"update_goal".to_string()));
    env.model.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_token_budget_stops_the_goal() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    answer(&env, "step one");
    answer(&env, "step two");
    client
        .ok(
            "thread/goal/set",
            json!({"threadId": thread_id, "objective": "Refactor", "tokenBudget": 20}),
        )
        .await;
    let messages = until_turns_completed(&mut client, 2).await;
    let last = *goal_updates(&messages).last().unwrap();
    assert_eq!(last["goal"]["status"], "budgetLimited", "{messages:#?}");
    assert_eq!(last["goal"]["tokensUsed"], 30);
    assert_eq!(last["goal"]["tokenBudget"], 20);
    // Nothing more runs: a third turn would ask the model again.
    let got = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(got["goal"]["status"], "budgetLimited");
    assert_eq!(env.model.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_goal_survives_a_restart_and_clears() {
    let env = AppEnv::new().await;
    let thread_id = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        for bad in [
            json!({"threadId": thread_id, "status": "active"}),
            json!({"threadId": thread_id, "objective": "   "}),
            json!({"threadId": thread_id, "objective": "x", "tokenBudget": 0}),
        ] {
            let answer = client.call("thread/goal/set", bad).await;
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
        }
        let set = client
            .ok(
                "thread/goal/set",
                json!({"threadId": thread_id, "objective": "Later", "status": "paused"}),
            )
            .await;
        assert_eq!(set["goal"]["status"], "paused");
        // Paused: no turn starts. The budget can be set and removed.
        let budget = client
            .ok(
                "thread/goal/set",
                json!({"threadId": thread_id, "tokenBudget": 500}),
            )
            .await;
        assert_eq!(budget["goal"]["tokenBudget"], 500);
        let unbudgeted = client
            .ok(
                "thread/goal/set",
                json!({"threadId": thread_id, "tokenBudget": null}),
            )
            .await;
        assert_eq!(unbudgeted["goal"]["tokenBudget"], Value::Null);
        assert_eq!(unbudgeted["goal"]["objective"], "Later");
        thread_id
    };
    assert!(env.model.requests().is_empty());

    let mut client = env.spawn();
    client.initialize().await;
    let got = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(got["goal"]["objective"], "Later", "{got}");
    assert_eq!(got["goal"]["status"], "paused");
    let cleared = client
        .ok("thread/goal/clear", json!({"threadId": thread_id}))
        .await;
    assert_eq!(cleared, json!({"cleared": true}));
    let note = client.notification("thread/goal/cleared").await;
    assert_eq!(note["params"], json!({"threadId": thread_id}));
    let again = client
        .ok("thread/goal/clear", json!({"threadId": thread_id}))
        .await;
    assert_eq!(again, json!({"cleared": false}));
    let got = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(got["goal"], Value::Null);
    let unknown = client
        .call(
            "thread/goal/get",
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32600, "{unknown}");
}

/// A hostile (or stuck) model that never calls `update_goal` cannot keep a goal running:
/// after 20 turns the server started on its own, the goal is paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_ends_its_goal_is_paused_after_twenty_turns() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    for n in 0..25 {
        answer(&env, &format!("still going {n}"));
    }
    client
        .ok(
            "thread/goal/set",
            json!({"threadId": thread_id, "objective": "Never finish"}),
        )
        .await;
    let messages = until_turns_completed(&mut client, 20).await;
    let paused = client
        .read_until(|m| {
            m["method"] == "thread/goal/updated" && m["params"]["goal"]["status"] == "paused"
        })
        .await;
    assert_eq!(paused["params"]["turnId"], Value::Null, "{paused}");
    assert!(
        goal_updates(&messages)
            .iter()
            .all(|u| u["goal"]["status"] == "active")
    );
    let got = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(got["goal"]["status"], "paused");
    assert_eq!(env.model.requests().len(), 20);
}
