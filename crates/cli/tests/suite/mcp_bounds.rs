//! An MCP server is untrusted input too: a huge tool result is cut to head and tail
//! before the model sees it, and a server listing thousands of tools gets only so many
//! into the request, with the model and the user told what was left out.

use crate::exec_support;

use std::path::PathBuf;

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;

fn mock_mcp_server() -> PathBuf {
    interpreter_test_support::bins::mock_mcp_server(
        std::path::Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .expect("mock-mcp-server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mib_tool_result_reaches_the_model_as_head_and_tail() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
        mock_mcp_server().display()
    ));
    let args = format!(r#"{{"bytes":{}}}"#, 10 * 1024 * 1024);
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_big", "mcp__mock__big", &args),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("read it"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "call big"])
        .await;
    out.assert_success();

    let requests = env.server.requests();
    assert_eq!(requests.len(), 2, "stderr:\n{}", out.stderr);
    let tool_message = exec_support::messages(&requests[1])
        .into_iter()
        .find(|message| message["role"] == "tool")
        .expect("a tool message");
    let content = tool_message["content"].as_str().expect("text content");
    // The default `tool_output_max_bytes` is 32 KiB; the note adds a line.
    assert!(content.len() < 33 * 1024, "{} bytes", content.len());
    assert!(content.starts_with("HEAD-xxx"), "{}", &content[..40]);
    assert!(
        content.ends_with("xxx-TAIL"),
        "{}",
        &content[content.len() - 40..]
    );
    assert!(
        content.contains("[... 9.9 MiB cut from the middle of this tool result ...]"),
        "{}",
        content
            .lines()
            .find(|line| line.contains("cut"))
            .unwrap_or_default()
    );
    env.server.assert_invariants();

    // What the thread keeps is the capped output, so it reads back without skipping.
    let thread_id = out.thread_id();
    let rollout = std::fs::read_to_string(env.rollout_file(&thread_id)).expect("rollout");
    let longest = rollout.lines().map(str::len).max().unwrap_or_default();
    assert!(longest < 1024 * 1024, "a {longest}-byte rollout line");
    let shown = env.run(&["threads", "show", &thread_id]).await;
    shown.assert_success();
    assert!(!shown.stderr.contains("skipped"), "{}", shown.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_listing_20000_tools_gets_a_bounded_share_of_the_request() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.many]\ncommand = \"{}\"\nargs = [\"--many-tools\", \"20000\"]\nstartup_timeout_sec = 60\n",
        mock_mcp_server().display()
    ));
    // Two requests in one turn: the user is warned once, the model told in both.
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_1", "shell", r#"{"command":"true"}"#),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("fine"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "hi",
        ])
        .await;
    out.assert_success();

    let requests = env.server.requests();
    assert_eq!(requests.len(), 2, "stderr:\n{}", out.stderr);
    assert!(
        requests[1]
            .to_string()
            .contains("left out of this request's tool list"),
        "the second request has the note too"
    );
    let tools = requests[0]["tools"].as_array().expect("tools");
    let mcp_tools = tools
        .iter()
        .filter(|tool| tool.to_string().contains("mcp__many__"))
        .count();
    assert_eq!(mcp_tools, 200);
    let request_bytes = requests[0].to_string().len();
    assert!(request_bytes < 1024 * 1024, "{request_bytes} bytes");
    let system = exec_support::messages(&requests[0])
        .into_iter()
        .find(|message| message["role"] == "system")
        .expect("a system message")
        .to_string();
    assert!(
        system.contains(
            "Note: some MCP tools were left out of this request's tool list (tool caps): `many` 19809 of 20009."
        ),
        "{}",
        &system[system.len().saturating_sub(300)..]
    );
    let events = out.events();
    assert_eq!(
        exec_support::json_warnings(
            &events,
            "MCP server `many` offers 20009 tools; 19809 of them were left out"
        ),
        1,
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_definitions_past_the_byte_cap_are_left_out() {
    let env = TestEnv::new().await;
    // 150 tools of about 8 KiB each: under the count cap, over the 512 KiB one.
    env.write_config(&format!(
        "\n[mcp_servers.wide]\ncommand = \"{}\"\nargs = [\"--many-tools\", \"150\", \"--extra-description-bytes\", \"8192\"]\nstartup_timeout_sec = 60\n",
        mock_mcp_server().display()
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::text("fine"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    out.assert_success();

    let request = &env.server.requests()[0];
    let mcp_bytes: usize = request["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| tool.to_string())
        .filter(|tool| tool.contains("mcp__wide__"))
        .map(|tool| tool.len())
        .sum();
    // The cap counts names, descriptions and schemas; the wire adds a little per tool.
    assert!(mcp_bytes < 600 * 1024, "{mcp_bytes} bytes of MCP tools");
    assert!(mcp_bytes > 400 * 1024, "{mcp_bytes} bytes of MCP tools");
    let events = out.events();
    assert_eq!(
        exec_support::json_warnings(
            &events,
            "over the 512 KiB limit on MCP tool definitions per request"
        ),
        1,
        "{}",
        out.stdout
    );
    assert!(
        exec_support::messages(request)
            .iter()
            .any(|message| message["role"] == "system" && message.to_string().contains("`wide` ")),
        "the model is told"
    );
}
