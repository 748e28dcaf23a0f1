//! A hostile model server against the real binary: one endless SSE line, an endless
//! answer, endless tool-call arguments, and a stream that trickles for ever each end the
//! turn with an error naming the bound or key (never out of memory, never a hang), and
//! no tool runs. A final answer that quotes tool-call markup in a code fence runs
//! nothing either.

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::{Value, json};

const KIB: usize = 1024;

/// The call each hostile stream starts with: if anything of the response were acted on,
/// the marker file would appear.
fn marker_call() -> Value {
    let arguments = json!({"command": "touch marker"}).to_string();
    chunk::tool_call(0, "call_marker", "shell", &arguments)
}

/// `len` bytes of text that never repeats within the client's loop window (a repeating
/// answer is cut short as a loop before any bound is reached).
fn varied_text(len: usize) -> String {
    let mut state: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from(b'a' + u8::try_from((state >> 16) % 26).unwrap_or(0))
        })
        .collect()
}

const EXEC: [&str; 5] = [
    "exec",
    "--json",
    "--skip-git-repo-check",
    "-s",
    "danger-full-access",
];

/// Runs one turn against the scripted server and returns the failed turn's message,
/// after checking that it failed, nothing ran and the request was not retried.
async fn failed_turn(env: &TestEnv) -> String {
    let args: Vec<&str> = EXEC.iter().copied().chain(["go"]).collect();
    let out = env.run(&args).await;
    assert_eq!(
        out.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    let events = out.events();
    let Some(last) = events.last() else {
        panic!("no events: {}", out.stderr);
    };
    assert_eq!(last["type"], "turn.failed", "{}", out.stdout);
    assert!(
        !env.work_path().join("marker").exists(),
        "a tool ran: {}",
        out.stdout
    );
    assert!(
        !events
            .iter()
            .any(|event| event["item"]["type"] == "command_execution"),
        "{}",
        out.stdout
    );
    assert_eq!(env.server.requests().len(), 1, "the request was retried");
    let Some(message) = last["error"]["message"].as_str() else {
        panic!("no error message: {last}");
    };
    message.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_server_sending_one_endless_sse_line_fails_the_turn_at_8_mib() {
    let env = TestEnv::new().await;
    // Up to 1 GiB of one line, made as it is sent; the client hangs up at 8 MiB.
    env.server.push(MockResponse::sse_then_flood(
        vec![marker_call()],
        r#"data: {"choices":[{"delta":{"content":""#,
        "a".repeat(64 * KIB),
        16 * KIB as u64,
    ));
    let message = failed_turn(&env).await;
    assert_eq!(
        message,
        "model provider `mock` sent one SSE line over 8 MiB (stream_max_event_bytes in \
         [model_providers.mock]); the answer was dropped and is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_server_sending_an_endless_answer_fails_the_turn_at_32_mib() {
    let env = TestEnv::new().await;
    let delta = format!("data: {}\n\n", chunk::text(&varied_text(64 * KIB)));
    env.server.push(MockResponse::sse_then_flood(
        vec![marker_call()],
        "",
        delta,
        16 * KIB as u64,
    ));
    let message = failed_turn(&env).await;
    assert_eq!(
        message,
        "model provider `mock` sent an answer (text, reasoning and tool calls) over 32 MiB \
         (stream_max_answer_bytes in [model_providers.mock]); the answer was dropped and is \
         not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_server_sending_endless_tool_call_arguments_fails_the_turn_at_8_mib() {
    let env = TestEnv::new().await;
    let start = chunk::tool_call(
        0,
        "call_marker",
        "shell",
        r#"{"command": "touch marker", "pad": ""#,
    );
    let fragment = json!({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "p".repeat(64 * KIB)}}
    ]}}]});
    env.server.push(MockResponse::sse_then_flood(
        vec![start],
        "",
        format!("data: {fragment}\n\n"),
        16 * KIB as u64,
    ));
    let message = failed_turn(&env).await;
    assert_eq!(
        message,
        "model provider `mock` sent the arguments of one tool call over 8 MiB \
         (stream_max_arguments_bytes in [model_providers.mock]); the answer was dropped and \
         is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_server_trickling_a_delta_every_second_fails_the_turn_at_the_deadline() {
    let env = TestEnv::new().await;
    env.write_config("stream_max_duration_ms = 3000");
    let delta = format!("data: {}\n\n", chunk::text("still thinking "));
    // Each pause is far inside the idle timeout (300 s): only the overall deadline ends it.
    env.server.push(
        MockResponse::sse_then_flood(vec![marker_call()], "", delta, 10_000)
            .with_chunk_delay(std::time::Duration::from_secs(1)),
    );
    let message = failed_turn(&env).await;
    assert_eq!(
        message,
        "model provider `mock` did not finish its answer within 3s (stream_max_duration_ms); \
         the answer was dropped and is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_markup_quoted_in_a_code_fence_of_a_final_answer_runs_nothing() {
    let call =
        r#"<tool_call>{"name": "shell", "arguments": {"command": "touch marker"}}</tool_call>"#;
    let args: Vec<&str> = EXEC.iter().copied().chain(["explain"]).collect();

    // The control: the same markup outside a fence is a call, and it runs.
    let env = TestEnv::new().await;
    env.server.push(MockResponse::sse(vec![
        chunk::text(&format!("Listing.\n{call}")),
        chunk::finish("stop"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("done"),
        chunk::finish("stop"),
    ]));
    let out = env.run(&args).await;
    out.assert_success();
    assert!(
        env.work_path().join("marker").exists(),
        "the control call did not run: {}",
        out.stdout
    );

    // Quoted in a fence, and inline, it is prose: the turn ends with it as the answer.
    for answer in [
        format!("To list files, the model would write:\n\n```\n{call}\n```\n\nThat is all."),
        format!("To list files, the model would write `{call}`."),
    ] {
        let env = TestEnv::new().await;
        env.server.push(MockResponse::sse(vec![
            chunk::text(&answer),
            chunk::finish("stop"),
        ]));
        let out = env.run(&args).await;
        out.assert_success();
        assert!(
            !env.work_path().join("marker").exists(),
            "the quoted call ran: {}",
            out.stdout
        );
        assert_eq!(env.server.requests().len(), 1, "no tool result went back");
        let events = out.events();
        assert!(
            events
                .iter()
                .any(|event| event["item"]["type"] == "agent_message"
                    && event["item"]["text"] == answer.as_str()),
            "{}",
            out.stdout
        );
    }
}
