//! MCP tools in a real turn: `interpreter exec` starts the configured MCP server, offers its
//! tools to the model as `mcp__<server>__<tool>`, calls one, and reports it in the JSONL.

use std::path::PathBuf;

use crate::exec_support::TestEnv;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;

/// The `mock-mcp-server` binary of the test-support package, built next to `interpreter`.
fn mock_mcp_server() -> PathBuf {
    interpreter_test_support::bins::mock_mcp_server(
        std::path::Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .expect("mock-mcp-server")
}

#[tokio::test]
async fn exec_calls_an_mcp_tool_and_reports_it() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
        mock_mcp_server().display()
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_mcp_1",
            "mcp__mock__echo",
            r#"{"text":"hello-from-mcp"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("echoed"),
        chunk::finish("stop"),
    ]));

    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "use the echo tool",
        ])
        .await;
    out.assert_success();

    let events = out.events();
    let completed = events
        .iter()
        .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "mcp_tool_call")
        .unwrap_or_else(|| panic!("no mcp_tool_call item: {}", out.stdout));
    let item = &completed["item"];
    assert_eq!(item["server"], "mock");
    assert_eq!(item["tool"], "echo");
    assert_eq!(item["status"], "completed");
    assert!(
        item["result"].to_string().contains("hello-from-mcp"),
        "{item}"
    );

    let requests = env.server.requests();
    let tools = requests[0]["tools"].to_string();
    assert!(tools.contains("mcp__mock__echo"), "{tools}");
    assert!(requests[1].to_string().contains("hello-from-mcp"));
    env.server.assert_invariants();
}

#[tokio::test]
async fn an_mcp_entry_that_would_start_interpreter_again_is_skipped() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.myself]\ncommand = \"{}\"\nargs = [\"mcp-server\"]\n",
        env!("CARGO_BIN_EXE_interpreter")
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::text("fine"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    out.assert_success();
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert!(all.contains("myself"), "the skip is reported: {all}");
    let tools = env.server.requests()[0]["tools"].to_string();
    assert!(!tools.contains("mcp__myself"), "{tools}");
}

#[tokio::test]
async fn exec_declines_a_servers_question_and_says_so() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
        mock_mcp_server().display()
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_ask",
            "mcp__mock__ask",
            r#"{"message":"which branch?"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("ok"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "ask"])
        .await;
    out.assert_success();
    assert!(
        out.stdout
            .contains("declined a question (MCP server `mock` asks: which branch?)"),
        "{}",
        out.stdout
    );
    let requests = env.server.requests();
    assert!(
        requests[1]
            .to_string()
            .contains(r#"\"action\":\"decline\""#),
        "the server got the decline: {}",
        requests[1]
    );
}

#[tokio::test]
async fn the_model_lists_and_reads_resources_and_sees_images() {
    let env = TestEnv::new().await;
    env.write_config(&format!(
        "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
        mock_mcp_server().display()
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_list", "list_mcp_resources", "{}"),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_read",
            "read_mcp_resource",
            r#"{"server":"mock","uri":"mock://notes"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_pixel",
            "read_mcp_resource",
            r#"{"server":"mock","uri":"mock://pixel.png"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::text("read them"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "read the resources",
        ])
        .await;
    out.assert_success();
    let requests = env.server.requests();
    let tools = requests[0]["tools"].to_string();
    assert!(tools.contains("list_mcp_resources"), "{tools}");
    assert!(tools.contains("read_mcp_resource"), "{tools}");
    let listed = requests[1].to_string();
    assert!(listed.contains("mock://pixel.png"), "{listed}");
    assert!(listed.contains(r#"\"server\":\"mock\""#), "{listed}");
    assert!(requests[2].to_string().contains("the notes say hello"));
    let last = requests[3].to_string();
    assert!(last.contains("image resource mock://pixel.png"), "{last}");
    assert!(
        last.contains("data:image/png;base64,iVBOR"),
        "the image follows: {last}"
    );
    env.server.assert_invariants();
}

#[tokio::test]
async fn servers_that_crash_or_hang_at_start_are_reported_and_the_turn_goes_on() {
    let env = TestEnv::new().await;
    let mock = mock_mcp_server();
    env.write_config(&format!(
        "\n[mcp_servers.crashy]\ncommand = \"{m}\"\nargs = [\"--crash\"]\n\
         \n[mcp_servers.stuck]\ncommand = \"{m}\"\nargs = [\"--hang\"]\nstartup_timeout_sec = 1\n\
         \n[mcp_servers.mock]\ncommand = \"{m}\"\n",
        m = mock.display()
    ));
    env.server.push(MockResponse::sse(vec![
        chunk::text("fine without them"),
        chunk::finish("stop"),
    ]));
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    out.assert_success();
    let events = out.events();
    let startup = |server: &str| {
        events
            .iter()
            .find(|e| {
                e["type"] == "item.completed"
                    && e["item"]["type"] == "mcp_server_startup"
                    && e["item"]["server"] == server
            })
            .unwrap_or_else(|| panic!("no startup item for {server}: {}", out.stdout))
            .clone()
    };
    assert_eq!(startup("crashy")["item"]["status"], "failed");
    let stuck = startup("stuck");
    assert_eq!(stuck["item"]["status"], "failed");
    assert!(
        stuck["item"]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out after 1 seconds"),
        "{stuck}"
    );
    assert_eq!(startup("mock")["item"]["status"], "ready");
    let tools = env.server.requests()[0]["tools"].to_string();
    assert!(tools.contains("mcp__mock__echo"), "{tools}");
    assert!(!tools.contains("mcp__stuck"), "{tools}");
}
