//! `codex` / `codex-reply` over raw JSON-RPC against the mock model: results, events,
//! progress, continuation, resume after a restart, and concurrency.

use std::time::Duration;

use crate::mcp_support::{McpEnv, assert_valid_result, codex_events, progress_values, thread_id};
use serde_json::json;

#[tokio::test]
async fn call_runs_a_command_and_reply_continues_the_thread() {
    let env = McpEnv::new().await;
    env.script_command_then_text("call_1", "echo hello > made.txt", "Created made.txt.");
    env.script_text("Second answer.");
    let mut client = env.spawn();
    client.initialize(json!({})).await;

    let id = client
        .start_tool(
            "codex",
            json!({"prompt": "make a file", "sandbox": "danger-full-access", "approval-policy": "never"}),
        )
        .await;
    let response = client.response(id).await;
    let result = &response["result"];
    assert_valid_result(result);
    assert_eq!(
        result["structuredContent"]["content"], "Created made.txt.",
        "{result}"
    );
    assert_ne!(result["isError"], true, "{result}");
    let thread = thread_id(result);
    assert!(!thread.is_empty());
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("made.txt")).unwrap_or_default(),
        "hello\n"
    );

    let seen = client.take_seen();
    let events = codex_events(&seen, id);
    let types: Vec<&str> = events
        .iter()
        .filter_map(|e| e["params"]["msg"]["type"].as_str())
        .collect();
    for expected in [
        "session_configured",
        "task_started",
        "exec_command_begin",
        "exec_command_end",
        "task_complete",
    ] {
        assert!(types.contains(&expected), "missing {expected} in {types:?}");
    }
    assert!(
        events
            .iter()
            .all(|e| e["params"]["_meta"]["threadId"] == thread.as_str())
    );
    let progress = progress_values(&seen, &format!("progress-{id}"));
    assert!(progress.len() >= 3, "progress: {progress:?}");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "not strictly increasing: {progress:?}"
    );
    assert!(
        seen.iter().any(|m| m["method"] == "notifications/progress"
            && m["params"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("echo hello"))),
        "no progress message names the command"
    );

    let reply = client
        .tool(
            "codex-reply",
            json!({"threadId": thread, "prompt": "and now?"}),
        )
        .await;
    assert_valid_result(&reply);
    assert_eq!(reply["structuredContent"]["content"], "Second answer.");
    assert_eq!(thread_id(&reply), thread);
    let requests = env.model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[2]["messages"].to_string().contains("make a file"),
        "reply lost the history"
    );
    env.model.assert_invariants();
}

#[tokio::test]
async fn model_failure_and_bad_arguments_are_tool_errors() {
    let env = McpEnv::new().await;
    env.model
        .push(interpreter_test_support::MockResponse::status(
            400,
            "{\"error\":{\"message\":\"no such model\"}}",
        ));
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let failed = client.tool("codex", json!({"prompt": "hi"})).await;
    assert_valid_result(&failed);
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(!thread_id(&failed).is_empty());
    // The provider's one-line message, once, as exec prints it; then that nothing ran.
    assert_eq!(
        failed["content"][0]["text"],
        format!(
            "model provider `mock` answered 400 Bad Request to POST {}/chat/completions: no \
             such model; run `interpreter doctor` to check the model and provider settings\n\n\
             Before it stopped, the turn ran no command and changed no file.",
            env.model.base_url()
        )
        .as_str(),
        "{failed}"
    );

    let bad = client
        .tool("codex", json!({"prompt": "hi", "profile": "work"}))
        .await;
    assert_valid_result(&bad);
    assert_eq!(bad["isError"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("profile")
    );

    let unknown = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    let missing = client
        .tool("codex-reply", json!({"threadId": unknown, "prompt": "hi"}))
        .await;
    assert_valid_result(&missing);
    assert_eq!(missing["isError"], true);
    assert!(
        missing["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains(unknown)
    );
}

/// The calling agent must decide whether to continue, retry or undo: a turn whose model
/// server fails after a command ran and a file changed says both, in the text and in
/// `structuredContent.recap`, live and through `codex-wait` alike.
#[tokio::test]
async fn a_part_failed_turn_names_the_command_it_ran_and_the_file_it_changed() {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::chunk;
    let env = McpEnv::new().await;
    let shell = json!({"command": "echo part-one"}).to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_cmd", "shell", &shell),
        chunk::finish("tool_calls"),
    ]));
    let patch = json!({
        "input": "*** Begin Patch\n*** Add File: notes.txt\n+half done\n*** End Patch\n"
    })
    .to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_patch", "apply_patch", &patch),
        chunk::finish("tool_calls"),
    ]));
    env.model.push(MockResponse::status(
        400,
        "{\"error\":{\"message\":\"the server fell over\"}}",
    ));
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let failed = client
        .tool(
            "codex",
            json!({"prompt": "do two things", "sandbox": "danger-full-access", "approval-policy": "never"}),
        )
        .await;
    assert_valid_result(&failed);
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(failed["structuredContent"]["status"], "failed");
    let text = failed["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("the server fell over"), "{text}");
    // The command as it ran (the shell the tool wraps it in included).
    assert!(
        text.lines().any(|line| line.starts_with("- ran `")
            && line.contains("echo part-one")
            && line.ends_with("(exit 0)")),
        "{text}"
    );
    let notes = env.work_path().join("notes.txt");
    assert!(
        text.contains(&format!("- changed {}", notes.display())),
        "{text}"
    );
    let recap = &failed["structuredContent"]["recap"];
    assert!(
        recap["commands"][0]["command"]
            .as_str()
            .is_some_and(|command| command.contains("echo part-one")),
        "{recap}"
    );
    assert_eq!(recap["commands"][0]["exitCode"], 0);
    assert_eq!(recap["commands"][0]["status"], "completed");
    assert_eq!(
        recap["filesChanged"][0],
        notes.display().to_string().as_str()
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap_or_default(),
        "half done\n"
    );

    // codex-wait on the finished turn gives the same result.
    let thread = thread_id(&failed);
    let waited = client
        .tool("codex-wait", json!({"threadId": thread, "timeoutSec": 5}))
        .await;
    assert_eq!(waited["structuredContent"]["recap"], *recap, "{waited}");
}

#[tokio::test]
async fn reply_after_server_restart_resumes_from_disk() {
    let env = McpEnv::new().await;
    env.script_text("First.");
    env.script_text("After restart.");
    let mut first = env.spawn();
    first.initialize(json!({})).await;
    let result = first
        .tool("codex", json!({"prompt": "remember the word kiwi"}))
        .await;
    let thread = thread_id(&result);
    first.process.close_stdin();
    first
        .process
        .wait_exit(Duration::from_secs(30))
        .await
        .expect("first server exits");

    let mut second = env.spawn();
    second.initialize(json!({})).await;
    // The legacy `conversationId` spelling still works.
    let reply = second
        .tool(
            "codex-reply",
            json!({"conversationId": thread, "prompt": "what was the word?"}),
        )
        .await;
    assert_valid_result(&reply);
    assert_eq!(
        reply["structuredContent"]["content"], "After restart.",
        "{reply}"
    );
    let requests = env.model.requests();
    assert!(requests[1]["messages"].to_string().contains("kiwi"));
}

#[tokio::test]
async fn twenty_concurrent_calls_each_get_their_own_thread() {
    let env = McpEnv::new().await;
    for _ in 0..20 {
        env.script_text("Done.");
    }
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(
            client
                .start_tool("codex", json!({"prompt": format!("task {n}")}))
                .await,
        );
    }
    let mut threads = std::collections::HashSet::new();
    for id in ids {
        let response = client.response(id).await;
        let result = &response["result"];
        assert_valid_result(result);
        assert_eq!(result["structuredContent"]["content"], "Done.", "{result}");
        threads.insert(thread_id(result));
    }
    assert_eq!(threads.len(), 20);
}

#[tokio::test]
async fn idle_threads_leave_memory_and_come_back_from_disk() {
    let env = McpEnv::new().await;
    // More threads than the server keeps live (32), then a reply to the oldest one.
    const THREADS: usize = 36;
    for n in 0..THREADS {
        env.script_text(&format!("answer {n}"));
    }
    env.script_text("Back from disk.");
    let mut client = env.spawn_with_args(&[]);
    client.initialize(json!({})).await;
    let mut first = None;
    for n in 0..THREADS {
        let result = client
            .tool("codex", json!({"prompt": format!("remember {n}")}))
            .await;
        assert_valid_result(&result);
        first.get_or_insert_with(|| thread_id(&result));
    }
    let first = first.unwrap();
    let stderr = client.process.stderr();
    assert!(
        stderr.contains(&format!("retired idle thread {first}")),
        "the oldest thread left memory: {stderr}"
    );
    let result = client
        .tool(
            "codex-reply",
            json!({"threadId": first, "prompt": "what was it?"}),
        )
        .await;
    assert_valid_result(&result);
    assert_eq!(result["structuredContent"]["threadId"], first.as_str());
    assert_eq!(result["structuredContent"]["content"], "Back from disk.");
    // The reply's request carried the first thread's history, reloaded from its rollout.
    let last = env.model.requests().last().cloned().unwrap().to_string();
    assert!(last.contains("remember 0"), "{last}");
}

/// Found by Gemini CLI, which adds `wait_for_previous` to every tool's arguments: the
/// call failed with "unknown field". A host's own argument is dropped; the thread runs
/// and `codex-reply` (given the same extra argument) continues it.
#[tokio::test]
async fn gemini_cli_wait_for_previous_does_not_fail_the_call() {
    let env = McpEnv::new().await;
    env.script_text("First answer.");
    env.script_text("Second answer.");
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let first = client
        .tool(
            "codex",
            json!({"prompt": "hi", "approval-policy": "never", "wait_for_previous": true}),
        )
        .await;
    assert_valid_result(&first);
    assert_eq!(
        first["structuredContent"]["content"], "First answer.",
        "{first}"
    );
    let second = client
        .tool(
            "codex-reply",
            json!({"threadId": thread_id(&first), "prompt": "again", "wait_for_previous": false}),
        )
        .await;
    assert_eq!(
        second["structuredContent"]["content"], "Second answer.",
        "{second}"
    );
}

/// Found running the MCP hosts: every new thread probed the model server (`/props`,
/// `/v1/models`, `/api/show`) before its first request. The server is asked once per
/// process.
#[tokio::test]
async fn the_model_server_is_probed_once_per_process() {
    let env = McpEnv::new().await;
    env.script_text("One.");
    env.script_text("Two.");
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    for prompt in ["first thread", "second thread"] {
        let result = client
            .tool(
                "codex",
                json!({"prompt": prompt, "approval-policy": "never"}),
            )
            .await;
        assert_ne!(result["isError"], true, "{result}");
    }
    let probes = env.model.record().probes;
    assert!(!probes.is_empty(), "the server was never probed");
    let mut once = probes.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        probes.len(),
        once.len(),
        "probed more than once: {probes:?}"
    );
}

/// The ids a host sees live in `codex/event` are the ids `thread/read` gives back on
/// the same connection, in the same order, for a turn with reasoning, a command, a patch
/// and a declined command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_event_ids_are_the_item_ids_read_back() {
    use interpreter_test_support::MockResponse;
    use interpreter_test_support::mock_model::chunk;

    let env = McpEnv::new().await;
    let call = |id: &str, name: &str, arguments: serde_json::Value| {
        MockResponse::sse(vec![
            chunk::tool_call(0, id, name, &arguments.to_string()),
            chunk::finish("tool_calls"),
        ])
    };
    env.model.push(MockResponse::sse(vec![
        chunk::reasoning("Look, then write."),
        chunk::tool_call(0, "call_ls", "shell", &json!({"command": "ls"}).to_string()),
        chunk::finish("tool_calls"),
    ]));
    env.model.push(call(
        "call_patch",
        "apply_patch",
        json!({"input": "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n"}),
    ));
    // Outside the sandbox needs an approval; this host cannot be asked: declined.
    env.model.push(call(
        "call_no",
        "shell",
        json!({"command": "touch escalated.txt", "sandbox_permissions": "require_escalated", "justification": "need it"}),
    ));
    env.script_text("wrote the notes");
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let id = client
        .start_tool(
            "codex",
            json!({"prompt": "take notes", "sandbox": "workspace-write", "approval-policy": "on-request"}),
        )
        .await;
    let response = client.response(id).await;
    let thread = thread_id(&response["result"]);
    assert!(env.work_path().join("notes.txt").is_file());
    assert!(!env.work_path().join("escalated.txt").exists());
    let seen = client.take_seen();
    let live: Vec<String> = codex_events(&seen, id)
        .iter()
        .filter_map(|event| {
            let msg = &event["params"]["msg"];
            let key = match msg["type"].as_str()? {
                "user_message" | "agent_reasoning" | "agent_message" => "item_id",
                "exec_command_end" | "patch_apply_end" => "call_id",
                _ => return None,
            };
            msg[key].as_str().map(str::to_string)
        })
        .collect();
    let read = client
        .call(
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    let items = read["result"]["thread"]["turns"][0]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{read}"));
    let stored: Vec<String> = items
        .iter()
        .filter_map(|item| item["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(live, stored, "live (left) and read back (right) differ");
    assert_eq!(stored.len(), 6, "{stored:?}");
    let declined = items
        .iter()
        .find(|item| item["id"] == "call_no")
        .unwrap_or_else(|| panic!("{read}"));
    assert_eq!(declined["status"], "declined", "{declined}");
}
