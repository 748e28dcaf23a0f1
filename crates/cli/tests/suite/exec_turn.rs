//! A full exec turn against the mock model: a shell command, a patch, a final message,
//! checked as the exact JSONL sequence and on disk.

use crate::exec_support;

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_then_patch_then_answer_emits_exact_jsonl() {
    let env = TestEnv::new().await;
    let shell_args =
        json!({"command": "echo hello > greeting.txt && cat greeting.txt"}).to_string();
    let patch_args = json!({
        "input": "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n"
    })
    .to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_shell", "shell", &shell_args),
        chunk::finish("tool_calls"),
        chunk::usage(10, 5),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_patch", "apply_patch", &patch_args),
        chunk::finish("tool_calls"),
        chunk::usage(20, 6),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("All "),
        chunk::text("done."),
        chunk::finish("stop"),
        chunk::usage(30, 7),
    ]));

    let last_message = env.work_path().join("last.txt");
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "-o",
            last_message.to_str().expect("utf-8 path"),
            "make the files",
        ])
        .await;
    out.assert_success();

    let work = env.work_path();
    assert_eq!(
        std::fs::read_to_string(work.join("greeting.txt")).expect("greeting.txt"),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).expect("notes.txt"),
        "hi\n"
    );
    assert_eq!(
        std::fs::read_to_string(&last_message).expect("last message file"),
        "All done."
    );

    let thread_id = out.thread_id();
    let command = "bash -lc 'echo hello > greeting.txt && cat greeting.txt'";
    let notes = work.join("notes.txt").display().to_string();
    let expected = vec![
        json!({"type": "thread.started", "thread_id": thread_id}),
        json!({"type": "turn.started"}),
        json!({"type": "item.started", "item": {"id": "item_0", "type": "command_execution",
            "command": command, "aggregated_output": "", "exit_code": null,
            "status": "in_progress"}}),
        json!({"type": "item.completed", "item": {"id": "item_0", "type": "command_execution",
            "command": command, "aggregated_output": "hello\n", "exit_code": 0,
            "status": "completed"}}),
        json!({"type": "item.started", "item": {"id": "item_1", "type": "file_change",
            "changes": [{"path": notes, "kind": "add"}], "status": "in_progress"}}),
        json!({"type": "item.completed", "item": {"id": "item_1", "type": "file_change",
            "changes": [{"path": notes, "kind": "add"}], "status": "completed"}}),
        json!({"type": "item.completed", "item": {"id": "item_2", "type": "agent_message",
            "text": "All done."}}),
        json!({"type": "turn.completed", "usage": {"input_tokens": 60,
            "cached_input_tokens": 0, "cache_write_input_tokens": 0, "output_tokens": 18,
            "reasoning_output_tokens": 0}}),
    ];
    assert_eq!(out.events(), expected, "stderr:\n{}", out.stderr);

    assert_eq!(env.server.requests().len(), 3);
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_mode_prints_only_the_answer_on_stdout() {
    let env = TestEnv::new().await;
    env.server.push(MockResponse::sse(vec![
        chunk::text("The answer is 42."),
        chunk::finish("stop"),
        chunk::usage(12, 3),
    ]));
    let out = env
        .run_with_stdin(
            &["exec", "--skip-git-repo-check", "what is it?"],
            Some("some piped context"),
        )
        .await;
    out.assert_success();
    assert_eq!(out.stdout, "The answer is 42.\n");
    assert!(out.stderr.contains("model: mock-model"), "{}", out.stderr);
    assert!(out.stderr.contains("session id:"), "{}", out.stderr);
    // Found by the peer tests: a fresh home's first thread was reported as an index repair.
    assert!(!out.stderr.contains("thread index"), "{}", out.stderr);
    let request = &env.server.requests()[0];
    assert!(
        exec_support::request_mentions(
            request,
            "what is it?\\n\\n<stdin>\\nsome piped context\\n</stdin>"
        ),
        "prompt with stdin not found in {request}"
    );
    env.server.assert_invariants();
}

/// Found by a new user in the default read-only sandbox: a refused `apply_patch` showed in
/// neither output, and the model was told the file lay outside the writable roots. The
/// refusal now shows in both outputs with its real reason, which the model gets too.
#[tokio::test]
async fn a_refused_patch_shows_its_real_reason() {
    let env = TestEnv::new().await;
    let patch_args = json!({
        "input": "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n"
    })
    .to_string();
    for _ in 0..2 {
        env.server.push(MockResponse::sse(vec![
            chunk::tool_call(0, "call_patch", "apply_patch", &patch_args),
            chunk::finish("tool_calls"),
        ]));
        env.server.push(MockResponse::sse(vec![
            chunk::text("Could not write."),
            chunk::finish("stop"),
        ]));
    }
    let json_run = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "read-only",
            "write notes",
        ])
        .await;
    json_run.assert_success();
    assert!(!env.work_path().join("notes.txt").exists());
    let change = json_run
        .events()
        .into_iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "file_change")
        .unwrap_or_else(|| panic!("no file_change item: {}", json_run.stdout));
    assert_eq!(change["item"]["status"], "failed", "{change}");
    let told = env.server.requests()[1].to_string();
    assert!(told.contains("the sandbox is read-only"), "{told}");
    assert!(
        !told.contains("outside the sandbox's writable roots"),
        "{told}"
    );

    let human = env
        .run(&[
            "exec",
            "--skip-git-repo-check",
            "-s",
            "read-only",
            "write notes",
        ])
        .await;
    human.assert_success();
    assert!(
        human.stderr.contains("read-only"),
        "the refusal shows in human output: {}",
        human.stderr
    );
}

/// `--full-auto` is the workspace-write sandbox: the same patch that a read-only run
/// refuses is applied.
#[tokio::test]
async fn full_auto_lets_the_agent_edit_the_workspace() {
    let env = TestEnv::new().await;
    let patch_args = json!({
        "input": "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** End Patch\n"
    })
    .to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_patch", "apply_patch", &patch_args),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("Wrote it."),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&[
            "exec",
            "--skip-git-repo-check",
            "--full-auto",
            "write notes",
        ])
        .await;
    out.assert_success();
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("notes.txt")).unwrap_or_default(),
        "hi\n"
    );
    let conflict = env
        .run(&["exec", "--full-auto", "-s", "read-only", "x"])
        .await;
    assert_eq!(conflict.code, Some(2), "{}", conflict.stderr);
}
