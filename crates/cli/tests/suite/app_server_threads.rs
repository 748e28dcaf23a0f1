//! The thread administration methods of `interpreter app-server` that Codex 0.171 serves
//! and its clients call: names, compaction, paged turns, loaded threads, unsubscribe,
//! delete, and the listings codex-acp asks for before it starts a session.

use crate::app_server_support;

use crate::app_server_support::{AppEnv, trace};
use serde_json::{Value, json};

/// A thread with two finished turns ("first answer", "second answer").
async fn thread_with_two_turns(env: &AppEnv, client: &mut app_server_support::AppClient) -> String {
    env.script_text("first answer");
    env.script_text("second answer");
    let thread_id = client.start_thread(json!({})).await;
    for text in ["one", "two"] {
        client.start_turn(&thread_id, text).await;
        client.until_turn_completed().await;
    }
    thread_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_set_name_names_the_thread_and_says_so() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;
    let done = client
        .ok(
            "thread/name/set",
            json!({"threadId": thread_id, "name": "  Fix the build  "}),
        )
        .await;
    assert_eq!(done, json!({}));
    let updated = client.notification("thread/name/updated").await;
    assert_eq!(
        updated["params"],
        json!({"threadId": thread_id, "threadName": "Fix the build"})
    );
    let read = client
        .ok("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["thread"]["name"], "Fix the build");
    assert_eq!(read["thread"]["projectId"], Value::Null);
    assert!(
        read["thread"]
            .as_object()
            .is_some_and(|t| t.contains_key("projectId"))
    );
    assert_eq!(read["thread"]["historyMode"], "legacy");
    let listed = client.ok("thread/list", json!({})).await;
    assert_eq!(listed["data"][0]["name"], "Fix the build");

    let blank = client
        .call(
            "thread/name/set",
            json!({"threadId": thread_id, "name": " "}),
        )
        .await;
    assert_eq!(blank["error"]["code"], -32600, "{blank}");
    let missing = client
        .call(
            "thread/name/set",
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000", "name": "x"}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32600, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_compact_summarises_as_a_turn_of_its_own() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;
    env.script_text("SUMMARY: two greetings");
    env.script_text("after the summary");
    let done = client
        .ok("thread/compact/start", json!({"threadId": thread_id}))
        .await;
    assert_eq!(done, json!({}));
    let messages = client.until_turn_completed().await;
    let order = trace(&messages);
    assert!(order.iter().any(|m| m == "turn/started"), "{order:?}");
    assert!(
        order.iter().any(|m| m.contains("contextCompaction")),
        "{order:?}"
    );
    // Clients that predate the item read the deprecated notification, after the item.
    let compacted = order.iter().position(|m| m == "thread/compacted");
    let item = order
        .iter()
        .position(|m| m == "item/completed:contextCompaction");
    assert!(compacted.is_some() && compacted > item, "{order:?}");
    let completed = messages
        .iter()
        .find(|m| m["method"] == "turn/completed")
        .expect("turn/completed");
    assert_eq!(completed["params"]["turn"]["status"], "completed");

    client.start_turn(&thread_id, "go on").await;
    client.until_turn_completed().await;
    let requests = env.model.requests();
    let last = requests.last().map(Value::to_string).unwrap_or_default();
    assert!(last.contains("SUMMARY: two greetings"), "{last}");
    assert!(!last.contains("first answer"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_list_pages_newest_first_with_the_asked_detail() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;

    let page = client
        .ok(
            "thread/turns/list",
            json!({"threadId": thread_id, "limit": 1, "itemsView": "notLoaded"}),
        )
        .await;
    let turns = page["data"].as_array().expect("data");
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["itemsView"], "notLoaded");
    assert_eq!(turns[0]["items"], json!([]));
    let next = page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let second = client
        .ok(
            "thread/turns/list",
            json!({"threadId": thread_id, "cursor": next, "itemsView": "full"}),
        )
        .await;
    assert_eq!(second["nextCursor"], Value::Null);
    let oldest = &second["data"][0];
    assert!(oldest.to_string().contains("first answer"), "{oldest}");

    let ascending = client
        .ok(
            "thread/turns/list",
            json!({"threadId": thread_id, "sortDirection": "asc"}),
        )
        .await;
    let texts = ascending["data"].to_string();
    let first_at = texts.find("first answer").expect("first");
    let second_at = texts.find("second answer").expect("second");
    assert!(first_at < second_at, "{texts}");
    assert_eq!(ascending["data"][0]["itemsView"], "summary");

    let bad = client
        .call(
            "thread/turns/list",
            json!({"threadId": thread_id, "cursor": "nonsense"}),
        )
        .await;
    assert_eq!(bad["error"]["code"], -32600, "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_list_pages_items_across_turns_both_ways() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;

    let all = client
        .ok("thread/items/list", json!({"threadId": thread_id}))
        .await;
    let entries = all["data"].as_array().expect("data");
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["item"]["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        ["userMessage", "agentMessage", "userMessage", "agentMessage"],
        "{all}"
    );
    assert_eq!(all["nextCursor"], Value::Null);
    let second_turn = entries[2]["turnId"].as_str().expect("turnId").to_string();
    assert_ne!(entries[0]["turnId"], second_turn.as_str());
    assert!(entries[3].to_string().contains("second answer"));
    assert!(entries.iter().all(|e| {
        e.as_object()
            .is_some_and(|o| o.contains_key("startedAtMs") && o.contains_key("completedAtMs"))
    }));

    // Newest first, one at a time, then back the other way from the second page.
    let first = client
        .ok(
            "thread/items/list",
            json!({"threadId": thread_id, "sortDirection": "desc", "limit": 1}),
        )
        .await;
    assert!(
        first["data"][0].to_string().contains("second answer"),
        "{first}"
    );
    let next = first["nextCursor"].as_str().expect("next").to_string();
    let second = client
        .ok(
            "thread/items/list",
            json!({"threadId": thread_id, "sortDirection": "desc", "limit": 1, "cursor": next}),
        )
        .await;
    assert_eq!(second["data"][0]["item"]["type"], "userMessage", "{second}");
    let back = second["backwardsCursor"]
        .as_str()
        .expect("back")
        .to_string();
    let forward = client
        .ok(
            "thread/items/list",
            json!({"threadId": thread_id, "cursor": back}),
        )
        .await;
    assert_eq!(
        forward["data"].as_array().map(Vec::len),
        Some(1),
        "{forward}"
    );
    assert!(forward["data"][0].to_string().contains("second answer"));

    // One turn, after an item of it.
    let anchor = entries[2]["item"]["id"].clone();
    let after = client
        .ok(
            "thread/items/list",
            json!({
                "threadId": thread_id,
                "turnId": second_turn,
                "cursor": {"type": "item", "itemId": anchor},
            }),
        )
        .await;
    assert_eq!(after["data"].as_array().map(Vec::len), Some(1), "{after}");
    assert_eq!(after["data"][0]["item"]["type"], "agentMessage");

    for bad in [
        json!({"threadId": thread_id, "cursor": {"type": "item", "itemId": anchor}}),
        json!({"threadId": thread_id, "turnId": "no-such-turn"}),
        json!({"threadId": thread_id, "cursor": "99"}),
    ] {
        let answer = client.call("thread/items/list", bad).await;
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_list_unsubscribe_and_delete() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;

    let loaded = client.ok("thread/loaded/list", json!({})).await;
    assert_eq!(loaded["data"], json!([thread_id]), "{loaded}");
    let status = |v: &Value| v["status"].as_str().unwrap_or_default().to_string();
    let first = client
        .ok("thread/unsubscribe", json!({"threadId": thread_id}))
        .await;
    assert_eq!(status(&first), "unsubscribed");
    let again = client
        .ok("thread/unsubscribe", json!({"threadId": thread_id}))
        .await;
    assert_eq!(status(&again), "notSubscribed");
    let unknown = client
        .ok(
            "thread/unsubscribe",
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000"}),
        )
        .await;
    assert_eq!(status(&unknown), "notLoaded");

    let rollout = client
        .ok("thread/read", json!({"threadId": thread_id}))
        .await["thread"]["path"]
        .as_str()
        .expect("path")
        .to_string();
    client
        .ok("thread/delete", json!({"threadId": thread_id}))
        .await;
    let deleted = client.notification("thread/deleted").await;
    assert_eq!(deleted["params"]["threadId"], thread_id.as_str());
    assert!(!std::path::Path::new(&rollout).exists());
    let gone = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await;
    assert!(gone.get("error").is_some(), "{gone}");
    let listed = client.ok("thread/list", json!({})).await;
    assert_eq!(listed["data"], json!([]), "{listed}");
    let loaded = client.ok("thread/loaded/list", json!({})).await;
    assert_eq!(loaded["data"], json!([]));
    let twice = client
        .call("thread/delete", json!({"threadId": thread_id}))
        .await;
    assert!(twice.get("error").is_some(), "{twice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_listings_permission_profiles_and_skills() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let profiles = client
        .ok(
            "permissionProfile/list",
            json!({"cwd": env.work_path(), "cursor": null}),
        )
        .await;
    let ids: Vec<&str> = profiles["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, [":read-only", ":workspace", ":danger-full-access"]);
    assert!(
        profiles["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|p| p["allowed"] == true)
    );
    assert_eq!(profiles["nextCursor"], Value::Null);

    let work = env.work_path().to_string_lossy().into_owned();
    let skills = client.ok("skills/list", json!({"cwds": [work]})).await;
    assert_eq!(
        skills,
        json!({"data": [{"cwd": work, "skills": [], "errors": []}]})
    );
    let hooks = client.ok("hooks/list", json!({"cwds": [work]})).await;
    assert_eq!(
        hooks,
        json!({"data": [{"cwd": work, "hooks": [], "errors": [], "warnings": []}]})
    );
    let features = client.ok("experimentalFeature/list", json!({})).await;
    assert_eq!(features, json!({"data": [], "nextCursor": null}));
    let requirements = client.ok("configRequirements/read", Value::Null).await;
    assert_eq!(requirements, json!({"requirements": null}));

    let providers = client.ok("modelProvider/list", json!({})).await;
    assert_eq!(providers["defaultProviderId"], "mock");
    assert_eq!(providers["canChangeDefault"], true);
    let mock = providers["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|p| p["id"] == "mock")
        .expect("the configured provider is listed");
    assert_eq!(
        mock["settings"],
        json!({"type": "customGateway", "auth": {"mode": "environmentVariable", "envKey": "MOCK_API_KEY"}})
    );
    assert!(
        providers["data"]
            .as_array()
            .expect("data")
            .iter()
            .any(|p| p["id"] == "ollama"),
        "{providers}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_acp_goal_and_background_terminals_say_none() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;
    let goal = client
        .ok("thread/goal/get", json!({"threadId": thread_id}))
        .await;
    assert_eq!(goal, json!({"goal": null}));
    // Experimental in Codex: closed to this client, open to one that asks.
    let gated = client
        .call(
            "thread/backgroundTerminals/list",
            json!({"threadId": thread_id}),
        )
        .await;
    assert_eq!(gated["error"]["code"], -32600, "{gated}");
    let mut experimental = env.spawn();
    experimental
        .initialize_with(json!({"experimentalApi": true}))
        .await;
    let terminals = experimental
        .ok(
            "thread/backgroundTerminals/list",
            json!({"threadId": thread_id}),
        )
        .await;
    assert_eq!(terminals, json!({"data": [], "nextCursor": null}));
    let missing = client
        .call(
            "thread/goal/get",
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000"}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32600, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_inputs_images_by_url_reach_the_model_and_audio_is_refused_clearly() {
    let env = AppEnv::new().await;
    env.script_text("a red pixel");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let pixel = "data:image/png;base64,iVBORw0KGgo=";
    client
        .ok(
            "turn/start",
            json!({"threadId": thread_id, "input": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "url": pixel}
            ]}),
        )
        .await;
    client.until_turn_completed().await;
    let sent = env.model.requests()[0].to_string();
    assert!(sent.contains(pixel), "{sent}");

    for (input, says) in [
        (json!({"type": "image", "fileId": "file-123"}), "fileId"),
        (json!({"type": "image"}), "url"),
        (
            json!({"type": "audio", "url": "https://example.com/a.wav"}),
            "audio",
        ),
        (json!({"type": "localAudio", "path": "/tmp/a.wav"}), "audio"),
    ] {
        let refused = client
            .call(
                "turn/start",
                json!({"threadId": thread_id, "input": [input]}),
            )
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(says),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_list_keys_recency_and_sub_agent_kinds_are_accepted() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = thread_with_two_turns(&env, &mut client).await;
    for key in ["recency_at", "section_position"] {
        let listed = client.ok("thread/list", json!({"sortKey": key})).await;
        assert_eq!(
            listed["data"][0]["id"],
            thread_id.as_str(),
            "{key}: {listed}"
        );
    }
    let sub_agents = client
        .ok(
            "thread/list",
            json!({"sourceKinds": ["subAgent", "subAgentReview"]}),
        )
        .await;
    assert_eq!(sub_agents["data"], json!([]), "{sub_agents}");
    let mixed = client
        .ok(
            "thread/list",
            json!({"sourceKinds": ["subAgent", "appServer"]}),
        )
        .await;
    assert_eq!(mixed["data"][0]["id"], thread_id.as_str(), "{mixed}");
}

/// Found by `python_sdk_compact_summarises_as_a_turn_of_its_own` failing under load: a
/// request sent the moment `turn/completed` arrived found the finished turn still
/// running (a compaction was refused; a `turn/start` would have been taken as steering
/// into it). Each request here goes out as soon as the previous turn completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_on_turn_completed_finds_the_thread_idle() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let mut turn_ids = Vec::new();
    for n in 0..5 {
        env.script_text(&format!("answer {n}"));
        let turn_id = client
            .start_turn(&thread_id, &format!("question {n}"))
            .await;
        let messages = client.until_turn_completed().await;
        let completed = messages
            .iter()
            .find(|m| m["method"] == "turn/completed")
            .expect("turn/completed");
        assert_eq!(completed["params"]["turn"]["id"], turn_id.as_str());
        turn_ids.push(turn_id);
        if n == 2 {
            env.script_text("SUMMARY: three questions");
            client
                .ok("thread/compact/start", json!({"threadId": thread_id}))
                .await;
            client.until_turn_completed().await;
        }
    }
    let distinct: std::collections::HashSet<&String> = turn_ids.iter().collect();
    assert_eq!(distinct.len(), 5, "{turn_ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_list_filters_and_exclude_turns_are_applied() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let first = thread_with_two_turns(&env, &mut client).await;
    env.script_text("another");
    let second = client.start_thread(json!({})).await;
    client.start_turn(&second, "hello").await;
    client.until_turn_completed().await;

    let ids = |listed: &Value| -> Vec<String> {
        listed["data"]
            .as_array()
            .expect("data")
            .iter()
            .filter_map(|t| t["id"].as_str().map(str::to_string))
            .collect()
    };
    let only = client
        .ok("thread/list", json!({"includedThreadIds": [first]}))
        .await;
    assert_eq!(ids(&only), std::slice::from_ref(&first));
    let without = client
        .ok("thread/list", json!({"excludedThreadIds": [first]}))
        .await;
    assert_eq!(ids(&without), std::slice::from_ref(&second));
    let ours = client
        .ok("thread/list", json!({"originators": ["interpreter"]}))
        .await;
    assert_eq!(ids(&ours).len(), 2);
    for nothing in [
        json!({"originators": ["codex_vscode"]}),
        json!({"sectionId": "pinned"}),
        json!({"includedThreadIds": []}),
    ] {
        let listed = client.ok("thread/list", nothing.clone()).await;
        assert_eq!(listed["data"], json!([]), "{nothing}: {listed}");
    }
    let bad = client
        .call("thread/list", json!({"excludedThreadIds": ["nope"]}))
        .await;
    assert!(bad.get("error").is_some(), "{bad}");

    let mut other = env.spawn();
    other.initialize().await;
    let resumed = other
        .ok(
            "thread/resume",
            json!({"threadId": first, "excludeTurns": true}),
        )
        .await;
    assert_eq!(resumed["thread"]["turns"], json!([]), "{resumed}");
    let resumed = other.ok("thread/resume", json!({"threadId": first})).await;
    assert_eq!(resumed["thread"]["turns"].as_array().map(Vec::len), Some(2));
}

/// Past 32 idle loaded threads the least recently used one is unloaded; its followers
/// hear `thread/closed`, and `thread/resume` loads it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_thread_unloaded_for_room_is_announced_closed() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let mut threads = Vec::new();
    let mut closed = Vec::new();
    for n in 0..34 {
        env.script_text(&format!("answer {n}"));
        let thread_id = client.start_thread(json!({})).await;
        client
            .start_turn(&thread_id, &format!("question {n}"))
            .await;
        closed.extend(
            client
                .until_turn_completed()
                .await
                .into_iter()
                .filter(|m| m["method"] == "thread/closed")
                .map(|m| {
                    m["params"]["threadId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                }),
        );
        threads.push(thread_id);
    }
    // The rest may still be on the way: the last turn's retirement follows its end.
    while closed.len() < 2 {
        let message = client.notification("thread/closed").await;
        closed.push(
            message["params"]["threadId"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_eq!(closed[..2], threads[..2], "{closed:?}");
    let loaded = client.ok("thread/loaded/list", json!({})).await;
    let loaded = loaded["data"].to_string();
    assert!(!loaded.contains(&threads[0]), "{loaded}");
    assert!(loaded.contains(&threads[33]), "{loaded}");
    let resumed = client
        .ok("thread/resume", json!({"threadId": threads[0]}))
        .await;
    assert_eq!(resumed["thread"]["turns"].as_array().map(Vec::len), Some(1));
}

/// A config problem reaches a client as Codex tells it: `configWarning` after the
/// handshake (it used to surface only as agent text in the first turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_problems_are_config_warnings_after_initialize() {
    let env = AppEnv::with_config("frobnicate_the_model = true").await;
    let mut client = env.spawn();
    client.initialize().await;
    let warning = client.notification("configWarning").await;
    let summary = warning["params"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("frobnicate_the_model"), "{warning}");
    assert!(
        warning["params"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("config.toml")),
        "{warning}"
    );
}
