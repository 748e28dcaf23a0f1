//! Thread methods of `interpreter app-server` that change a thread after the fact, as
//! Codex 0.171 serves them: `thread/metadata/update`, `thread/shellCommand`, `thread/inject_items`.

use crate::app_server_support::{AppEnv, READ_DEADLINE};
use serde_json::{Value, json};

/// Whether `interpreter sandbox check` finds a working sandbox (Landlock) on this machine.
async fn sandbox_supported(env: &AppEnv) -> bool {
    let check = tokio::time::timeout(
        READ_DEADLINE,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["sandbox", "check", "--json"])
            .env("INTERPRETER_HOME", env.home.path())
            .output(),
    )
    .await
    .expect("deadline")
    .expect("sandbox check");
    let support: Value = serde_json::from_slice(&check.stdout).expect("sandbox check --json");
    support["supported"] == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_update_patches_git_info_and_survives_a_restart_and_a_rebuilt_index() {
    let env = AppEnv::new().await;
    env.script_text("hello");
    let thread_id = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        client.start_turn(&thread_id, "hi").await;
        client.until_turn_completed().await;

        let updated = client
            .ok(
                "thread/metadata/update",
                json!({"threadId": thread_id, "gitInfo": {
                    "branch": "main", "sha": "abc123", "originUrl": "https://example.com/r.git"
                }}),
            )
            .await;
        assert_eq!(
            updated["thread"]["gitInfo"],
            json!({"branch": "main", "sha": "abc123", "originUrl": "https://example.com/r.git"})
        );
        assert_eq!(updated["thread"]["id"], thread_id);

        // Absent: unchanged; null: cleared; string: replaced.
        let patched = client
            .ok(
                "thread/metadata/update",
                json!({"threadId": thread_id, "gitInfo": {"branch": "topic", "sha": null}}),
            )
            .await;
        assert_eq!(
            patched["thread"]["gitInfo"],
            json!({"branch": "topic", "sha": null, "originUrl": "https://example.com/r.git"})
        );
        let listed = client.ok("thread/list", json!({})).await;
        assert_eq!(listed["data"][0]["gitInfo"]["branch"], "topic");

        for bad in [
            json!({"threadId": thread_id, "gitInfo": {"branch": "  "}}),
            json!({"threadId": thread_id}),
            json!({"threadId": "0190f1b2-0000-7000-8000-000000000000", "gitInfo": {"sha": "x"}}),
        ] {
            let answer = client.call("thread/metadata/update", bad).await;
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
        }
        thread_id
    };

    // A new server reads it from the index.
    {
        let mut client = env.spawn();
        client.initialize().await;
        let read = client
            .ok("thread/read", json!({"threadId": thread_id}))
            .await;
        assert_eq!(read["thread"]["gitInfo"]["branch"], "topic");
        assert_eq!(read["thread"]["gitInfo"]["sha"], Value::Null);
        let resumed = client
            .ok("thread/resume", json!({"threadId": thread_id}))
            .await;
        assert_eq!(
            resumed["thread"]["gitInfo"]["originUrl"],
            "https://example.com/r.git"
        );
    }

    // The index is a cache: rebuilt from the rollouts, it takes the metadata back from
    // the decision log.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(env.home.path().join(format!("state.sqlite{suffix}")));
    }
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["thread"]["gitInfo"]["branch"], "topic", "{read}");

    // Clearing every field stores no metadata at all.
    let cleared = client
        .ok(
            "thread/metadata/update",
            json!({"threadId": thread_id, "gitInfo": {"branch": null, "originUrl": null}}),
        )
        .await;
    assert_eq!(cleared["thread"]["gitInfo"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_command_streams_a_user_shell_item_and_the_model_sees_it_next_turn() {
    let env = AppEnv::with_config("sandbox_mode = \"danger-full-access\"").await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let done = client
        .ok(
            "thread/shellCommand",
            json!({"threadId": thread_id, "command": "echo user-said | tr a-z A-Z"}),
        )
        .await;
    assert_eq!(done, json!({}));
    let seen = client.until_turn_completed().await;
    let method = |m: &Value| m["method"].as_str().unwrap_or_default().to_string();
    assert!(
        seen.iter().any(|m| method(m) == "turn/started"),
        "{seen:#?}"
    );
    let started = seen
        .iter()
        .find(|m| method(m) == "item/started")
        .expect("item/started");
    assert_eq!(started["params"]["item"]["type"], "commandExecution");
    assert_eq!(started["params"]["item"]["source"], "userShell");
    assert!(
        seen.iter()
            .any(|m| method(m) == "item/commandExecution/outputDelta"),
        "{seen:#?}"
    );
    let completed = seen
        .iter()
        .find(|m| method(m) == "item/completed")
        .expect("item/completed");
    assert_eq!(completed["params"]["item"]["source"], "userShell");
    assert_eq!(completed["params"]["item"]["exitCode"], 0);
    assert!(
        completed["params"]["item"]["aggregatedOutput"]
            .as_str()
            .unwrap_or_default()
            .contains("USER-SAID"),
        "{completed}"
    );
    // The model was not asked anything for the command itself.
    assert_eq!(env.model.requests().len(), 0);

    env.script_text("noted");
    client.start_turn(&thread_id, "what did I run?").await;
    client.until_turn_completed().await;
    let requests = env.model.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].to_string();
    assert!(body.contains("<user_shell_command>"), "{body}");
    assert!(body.contains("echo user-said"), "{body}");
    assert!(body.contains("USER-SAID"), "{body}");

    // The recorded turn keeps the item's source.
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let items = read["thread"]["turns"][0]["items"].to_string();
    assert!(items.contains("userShell"), "{read}");

    for (bad, code) in [
        (json!({"threadId": thread_id, "command": "  "}), -32600),
        (
            json!({"threadId": thread_id, "command": "true", "timeoutMs": -1}),
            -32602,
        ),
    ] {
        let answer = client.call("thread/shellCommand", bad).await;
        assert_eq!(answer["error"]["code"], code, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_command_is_refused_while_a_turn_runs() {
    let env = AppEnv::with_config("sandbox_mode = \"danger-full-access\"").await;
    env.script_command("c1", "sleep 3");
    env.script_text("slept");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "never"}))
        .await;
    client.start_turn(&thread_id, "sleep").await;
    client
        .read_until(|m| {
            m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    let answer = client
        .call(
            "thread/shellCommand",
            json!({"threadId": thread_id, "command": "touch ran"}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    client.until_turn_completed().await;
    assert!(!env.work_path().join("ran").exists());
}

/// Hostile: Codex runs `thread/shellCommand` with full access; here a workspace-write
/// thread's command stays inside the sandbox, so it cannot write outside the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_command_under_workspace_write_cannot_write_outside_the_workspace() {
    let probe = AppEnv::new().await;
    if !sandbox_supported(&probe).await {
        eprintln!("skipped: no working sandbox (Landlock) on this kernel");
        return;
    }
    let env = AppEnv::with_config(
        "sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nexclude_slash_tmp = true\n",
    )
    .await;
    let outside = tempfile::TempDir::new().expect("outside dir");
    let target = outside.path().join("escaped");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let command = format!("echo inside > inside.txt; echo out > {}", target.display());
    client
        .ok(
            "thread/shellCommand",
            json!({"threadId": thread_id, "command": command}),
        )
        .await;
    let seen = client.until_turn_completed().await;
    assert!(
        !target.exists(),
        "the user shell command escaped the sandbox"
    );
    assert!(
        env.work_path().join("inside.txt").exists(),
        "the workspace stays writable: {seen:#?}"
    );
    let completed = seen
        .iter()
        .find(|m| m["method"] == "item/completed")
        .expect("item/completed");
    assert_ne!(completed["params"]["item"]["exitCode"], 0, "{completed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_items_reach_the_model_and_survive_a_resume() {
    let env = AppEnv::new().await;
    env.script_text("first");
    let thread_id = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        client.start_turn(&thread_id, "hello").await;
        client.until_turn_completed().await;
        let done = client
            .ok(
                "thread/inject_items",
                json!({"threadId": thread_id, "items": [
                    {"type": "message", "role": "user", "id": "msg_1",
                     "content": [{"type": "input_text", "text": "INJECTED-NOTE"}]},
                    {"type": "function_call", "name": "shell", "call_id": "inj1",
                     "arguments": "{\"command\":\"true\"}"},
                    {"type": "function_call_output", "call_id": "inj1", "output": "INJECTED-OUTPUT"}
                ]}),
            )
            .await;
        assert_eq!(done, json!({}));
        env.script_text("second");
        client.start_turn(&thread_id, "go on").await;
        client.until_turn_completed().await;
        let body = env.model.requests()[1].to_string();
        assert!(body.contains("INJECTED-NOTE"), "{body}");
        assert!(body.contains("INJECTED-OUTPUT"), "{body}");
        let (note, next) = (body.find("INJECTED-NOTE"), body.find("go on"));
        assert!(note < next, "injected before the next input: {body}");
        thread_id
    };
    // A new server resumes the thread from its rollout: the items are still there.
    let mut client = env.spawn();
    client.initialize().await;
    client
        .ok("thread/resume", json!({"threadId": thread_id}))
        .await;
    env.script_text("third");
    client.start_turn(&thread_id, "again").await;
    client.until_turn_completed().await;
    let body = env.model.requests()[2].to_string();
    assert!(body.contains("INJECTED-NOTE"), "{body}");
}

/// Hostile: malformed, unknown, unpaired and huge payloads are refused, nothing of them
/// reaches the history, and the thread still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_items_refuses_malformed_or_huge_payloads_and_the_thread_still_works() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let good = json!({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "SHOULD-NOT-ARRIVE"}]});
    let huge = "x".repeat(1024 * 1024 + 1);
    let cases = [
        (
            json!([good, {"type": "web_search_call", "id": "w"}]),
            "items[1]",
        ),
        (
            json!([good, {"type": "message", "role": "user"}]),
            "items[1]",
        ),
        (json!([good, 42]), "items[1]"),
        (
            json!([good, {"type": "function_call", "name": "shell", "call_id": "c", "arguments": "{}"}]),
            "function_call `c`",
        ),
        (
            json!([good, {"type": "function_call_output", "call_id": "nobody", "output": "x"}]),
            "items[1]",
        ),
        (
            json!([good, {"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": huge}]}]),
            "1048576 bytes",
        ),
        (json!([]), "empty"),
    ];
    for (items, named) in cases {
        let answer = client
            .call(
                "thread/inject_items",
                json!({"threadId": thread_id, "items": items}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{named}: {message}");
    }
    env.script_text("still fine");
    client.start_turn(&thread_id, "are you there?").await;
    let seen = client.until_turn_completed().await;
    assert!(seen.iter().any(|m| m["method"] == "turn/completed"));
    let body = env.model.requests()[0].to_string();
    assert!(!body.contains("SHOULD-NOT-ARRIVE"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_items_is_refused_while_a_turn_runs() {
    let env = AppEnv::with_config("sandbox_mode = \"danger-full-access\"").await;
    env.script_command("c1", "sleep 3");
    env.script_text("slept");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "never"}))
        .await;
    client.start_turn(&thread_id, "sleep").await;
    client
        .read_until(|m| {
            m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    let answer = client
        .call(
            "thread/inject_items",
            json!({"threadId": thread_id, "items": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "mid-turn"}]}]}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    client.until_turn_completed().await;
}
