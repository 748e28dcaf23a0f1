//! `wire_api = "messages"` through the real binary: a turn with thinking and a shell call
//! against the mock's `/v1/messages`, the blocks it sends back (checked by the mock's
//! Messages invariants on every request), cache usage in `turn.completed`, and a resumed
//! thread whose thinking blocks still go back verbatim after the process restarted.

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::messages_event::MessageEvents;
use pretty_assertions::assert_eq;
use serde_json::json;

fn messages_env(env: &TestEnv) {
    env.write_raw_config(&env.server.config_toml(
        "model_reasoning_effort = \"low\"",
        "wire_api = \"messages\"\nrequest_max_retries = 0\nstream_max_retries = 0",
        "",
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thinking_turn_with_a_command_runs_and_resumes_on_the_messages_wire() {
    let env = TestEnv::new().await;
    messages_env(&env);
    let shell = json!({"command": "echo hello > greeting.txt"}).to_string();
    env.server.push(MockResponse::messages(
        MessageEvents::new("msg_1")
            .thinking("I will write the file.", "sig-first")
            .text("Writing it.")
            .tool_use("toolu_shell", "shell", &shell)
            .end_with_usage(
                "tool_use",
                json!({"input_tokens": 50, "cache_read_input_tokens": 0,
                       "cache_creation_input_tokens": 900, "output_tokens": 20}),
            ),
    ));
    env.server.push(MockResponse::messages(
        MessageEvents::new("msg_2")
            .thinking("It worked.", "sig-second")
            .text("Done.")
            .end_with_usage(
                "end_turn",
                json!({"input_tokens": 30, "cache_read_input_tokens": 900,
                       "cache_creation_input_tokens": 60, "output_tokens": 4}),
            ),
    ));
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "write greeting.txt",
        ])
        .await;
    out.assert_success();
    assert_eq!(
        std::fs::read_to_string(env.work_path().join("greeting.txt")).unwrap_or_default(),
        "hello\n"
    );
    let events = out.events();
    assert_eq!(
        events.last(),
        Some(
            &json!({"type": "turn.completed", "usage": {"input_tokens": 1940,
            "cached_input_tokens": 900, "cache_write_input_tokens": 960,
            "output_tokens": 24, "reasoning_output_tokens": 0}})
        ),
        "stderr:\n{}",
        out.stderr
    );
    let answer = events
        .iter()
        .rev()
        .find(|event| event["item"]["type"] == json!("agent_message"));
    assert_eq!(
        answer.map(|event| &event["item"]["text"]),
        Some(&json!("Done."))
    );

    // The process is gone; the thread's next turn sends both thinking blocks back as
    // they came, each before what it preceded.
    env.server.push(MockResponse::messages(
        MessageEvents::new("msg_3")
            .text("Still here.")
            .end("end_turn", 10, 2),
    ));
    let thread_id = out.thread_id();
    let resumed = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "resume",
            &thread_id,
            "and now?",
        ])
        .await;
    resumed.assert_success();

    env.server.assert_invariants();
    let requests = env.server.requests();
    assert_eq!(requests.len(), 3);
    let assistant: Vec<&serde_json::Value> = requests[2]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == json!("assistant"))
        .collect();
    assert_eq!(
        assistant[0]["content"],
        json!([
            {"type": "thinking", "thinking": "I will write the file.", "signature": "sig-first"},
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "toolu_shell", "name": "shell",
             "input": {"command": "echo hello > greeting.txt"}}
        ])
    );
    assert_eq!(
        assistant[1]["content"],
        json!([
            {"type": "thinking", "thinking": "It worked.", "signature": "sig-second"},
            {"type": "text", "text": "Done."}
        ])
    );
    for request in &requests {
        assert_eq!(request["thinking"]["budget_tokens"], json!(4096));
        assert!(
            request["system"][0]["text"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
    }
    // Each request repeats the one before it as a prefix: what prompt caching needs.
    for pair in requests.windows(2) {
        let before = pair[0]["messages"].as_array().map_or(0, Vec::len);
        let (old, new) = (&pair[0]["messages"], &pair[1]["messages"]);
        for at in 0..before.saturating_sub(1) {
            assert_eq!(old[at], new[at], "message {at} changed between requests");
        }
    }
}
