//! `interpreter mcp-server` protocol rules over raw JSON-RPC: the handshake, the method
//! table, tool definitions, malformed and oversized input, and exit on EOF.

use std::time::Duration;

use crate::mcp_support::{McpClient, McpEnv, READ_DEADLINE};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[tokio::test]
async fn handshake_rules() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let init = client.initialize(json!({})).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "interpreter");
    assert_eq!(
        init["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(init["result"]["capabilities"]["tools"].is_object());

    let again = client
        .call("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
        .await;
    assert_eq!(again["error"]["code"], -32600);
    assert_eq!(
        again["error"]["message"],
        "initialize called more than once"
    );

    assert_eq!(client.call("ping", json!({})).await["result"], json!({}));
    let unknown = client.call("frobnicate", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601);
    assert_eq!(
        client.call("resources/list", json!({})).await["result"]["resources"],
        json!([])
    );
    assert_eq!(
        client.call("resources/templates/list", json!({})).await["result"]["resourceTemplates"],
        json!([])
    );
    assert_eq!(
        client.call("prompts/list", json!({})).await["result"]["prompts"],
        json!([])
    );
    // Legacy era: the 2025-11-25 "resource not found" code (2026-07-28 moved it to -32602).
    assert_eq!(
        client.call("resources/read", json!({"uri": "x:y"})).await["error"]["code"],
        -32002
    );

    let discover = client
        .call(
            "server/discover",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    assert!(
        discover["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28")) && v.contains(&json!("2025-11-25"))),
        "{discover}"
    );
    assert_eq!(discover["result"]["resultType"], "complete");
    let bad_version = client
        .call(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}}),
        )
        .await;
    assert_eq!(bad_version["error"]["code"], -32022, "{bad_version}");
}

#[tokio::test]
async fn unknown_protocol_version_gets_latest_legacy() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    let init = client
        .call("initialize", json!({"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

#[tokio::test]
async fn tools_list_matches_reference_schemas() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let list = client.call("tools/list", json!({})).await;
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["codex", "codex-reply", "codex-status", "codex-wait"]
    );
    let output_schema = json!({
        "type": "object",
        "properties": {
            "threadId": {"type": "string"},
            "content": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "waiting_for_approval", "completed", "failed", "interrupted", "idle"]}
        },
        "required": ["threadId", "content"]
    });
    for tool in &tools {
        assert!(
            tool["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty() && d.len() < 2048)
        );
        assert_eq!(tool["outputSchema"], output_schema);
    }
    // Honest hints, so hosts that ask before unannotated tools (Codex CLI) can run the
    // read-only ones unasked.
    for (tool, read_only) in tools.iter().zip([false, false, true, true]) {
        assert_eq!(tool["annotations"]["readOnlyHint"], read_only, "{tool}");
    }
    assert_eq!(tools[0]["annotations"]["destructiveHint"], true);
    let mut codex = tools[0]["inputSchema"].clone();
    strip_descriptions(&mut codex);
    assert_eq!(tools[0]["name"], "codex");
    assert_eq!(
        codex,
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["prompt"],
            "properties": {
                "prompt": {"type": "string"},
                "model": {"type": "string"},
                "cwd": {"type": "string"},
                "approval-policy": {"type": "string", "enum": ["untrusted", "on-request", "never"]},
                "sandbox": {"type": "string", "enum": ["read-only", "workspace-write", "danger-full-access"]},
                "config": {"type": "object", "additionalProperties": true},
                "base-instructions": {"type": "string"},
                "developer-instructions": {"type": "string"},
                "compact-prompt": {"type": "string"},
                "background": {"type": "boolean"}
            }
        })
    );
    let mut reply = tools[1]["inputSchema"].clone();
    strip_descriptions(&mut reply);
    assert_eq!(tools[1]["name"], "codex-reply");
    assert_eq!(
        reply,
        json!({
            "type": "object",
            "required": ["prompt"],
            "properties": {
                "threadId": {"type": "string"},
                "conversationId": {"type": "string"},
                "prompt": {"type": "string"}
            }
        })
    );
}

/// Write `bytes` as they are and read the next message the server sends.
/// A 64 MiB line gets a JSON-RPC error (`-32600`, `id: null`), the server goes on
/// serving, and its peak memory grows by less than the line: the line is dropped as it
/// arrives past the 16 MiB bound, never held whole (measured before: 143 MiB on
/// app-server, 140 MiB on ACP). The same bound and answer on every stdio server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_line_is_refused_with_bounded_memory() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    let (answer, grew_kib) = client
        .process
        .huge_line_answer(64 * 1024 * 1024, READ_DEADLINE)
        .await
        .expect("an answer to the huge line");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert!(grew_kib < 48 * 1024, "peak memory grew by {grew_kib} KiB");
    assert_eq!(client.call("ping", json!({})).await["result"], json!({}));
}

async fn answer_to_raw(client: &mut McpClient, bytes: &[u8]) -> Value {
    client.process.write_raw(bytes).await.expect("write");
    client
        .process
        .read_json(READ_DEADLINE)
        .await
        .expect("an answer to the raw line")
}

/// Bad input never stops the server, and every message that could be waiting for an
/// answer gets one. A line that is not JSON gets `-32700` with `id: null` (JSON-RPC 2.0;
/// found running the MCP hosts: rmcp dropped it without a word, and a client that sent a
/// truncated line waited forever), JSON that is not a JSON-RPC message gets `-32600`, a
/// malformed request gets `-32600` with its own id, and a line over the 16 MiB bound gets
/// `-32600`; the next request is served normally.
#[tokio::test]
async fn a_line_that_is_not_json_gets_a_parse_error() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;

    let parse_error = answer_to_raw(
        &mut client,
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"pi\n",
    )
    .await;
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    assert_eq!(parse_error["id"], Value::Null, "{parse_error}");
    assert_eq!(client.call("ping", json!({})).await["result"], json!({}));

    let batch_error = answer_to_raw(
        &mut client,
        b"[{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}]\n",
    )
    .await;
    assert_eq!(batch_error["error"]["code"], -32600, "{batch_error}");
    assert_eq!(batch_error["id"], Value::Null);

    let bad_request = answer_to_raw(
        &mut client,
        b"{\"jsonrpc\":\"2.0\",\"id\":98,\"method\":\"tools/call\",\"params\":7}\n",
    )
    .await;
    assert_eq!(bad_request["id"], 98, "{bad_request}");
    assert!(bad_request["error"]["code"].is_i64(), "{bad_request}");

    // 17 MiB without a newline, then the newline: over the 16 MiB bound.
    let huge = vec![b'x'; 17 * 1024 * 1024];
    client.process.write_raw(&huge).await.expect("write huge");
    let too_long = answer_to_raw(&mut client, b"\n").await;
    assert_eq!(too_long["error"]["code"], -32600, "{too_long}");
    assert_eq!(client.call("ping", json!({})).await["result"], json!({}));

    // A large but legal argument still works (no truncation of long lines).
    let big_prompt = "y".repeat(200 * 1024);
    let result = client
        .call(
            "tools/call",
            json!({"name": "codex", "arguments": {"prompt": big_prompt, "sandbox-mode": 1}}),
        )
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("did you mean `sandbox`"), "{text}");

    let unknown_tool = client
        .call("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown_tool["error"]["code"], -32602);
}

#[tokio::test]
async fn exits_promptly_when_stdin_closes() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    client.process.close_stdin();
    let status = client
        .process
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("server exits after EOF");
    assert!(status.success(), "{status:?}\n{}", client.process.stderr());
}

/// Found by a client that sent `notifications/initialized` before `initialize`: the
/// server closed the connection. Messages before the first request are now ignored; a
/// request before `initialize` without the 2026-07-28 `_meta` gets `-32602` naming the
/// missing fields (a dual-era server cannot tell which era it is in), and the handshake
/// still works afterwards.
#[tokio::test]
async fn early_messages_do_not_end_the_connection() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.notify("notifications/initialized", json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 77, "result": {}}))
        .await;
    let early = client.call("tools/list", json!({})).await;
    assert_eq!(early["error"]["code"], -32602, "{early}");
    assert!(
        early["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("io.modelcontextprotocol/protocolVersion")),
        "{early}"
    );
    let init = client.initialize(json!({})).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "interpreter",
        "{init}"
    );
    let tools = client.call("tools/list", json!({})).await;
    assert_eq!(tools["result"]["tools"][0]["name"], "codex", "{tools}");
}

/// A second `tools/call` reusing the id of one still running is refused instead of
/// starting a second turn (its cancellation would otherwise be ambiguous).
#[tokio::test]
async fn a_duplicate_in_flight_request_id_is_refused() {
    let env = McpEnv::new().await;
    let mut client = env.spawn();
    client.initialize(json!({})).await;
    env.script_command_then_text("call_slow", "sleep 3", "Slept.");
    let call = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": {
        "name": "codex",
        "arguments": {"prompt": "slow", "approval-policy": "never", "sandbox": "danger-full-access"}}});
    client.send(call.clone()).await;
    // Let the first call start its turn (its command runs for seconds).
    client
        .process
        .read_until(READ_DEADLINE, |m| {
            m["method"] == "codex/event" && m["params"]["msg"]["type"] == "exec_command_begin"
        })
        .await
        .expect("the first call's command starts");
    client.send(call).await;
    let refused = client.response(500).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let finished = client.response(500).await;
    assert_eq!(
        finished["result"]["structuredContent"]["content"], "Slept.",
        "{finished}"
    );
    assert_eq!(
        env.model.requests().len(),
        2,
        "one turn, two model requests"
    );
}

/// Found by a new user: `mcp-server` with no model configured exited before answering
/// `initialize`, so the MCP host showed only "connection closed". It now serves, and
/// every call says what is wrong; `-m` fixes it.
#[tokio::test]
async fn without_a_model_the_server_answers_and_each_call_says_why() {
    let env = McpEnv::new().await;
    std::fs::write(env.home.path().join("config.toml"), "").unwrap();
    let mut client = env.spawn();
    let init = client.initialize(json!({})).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "interpreter",
        "{init}"
    );
    let result = client.tool("codex", json!({"prompt": "hello"})).await;
    assert_eq!(result["isError"], true, "{result}");
    let text = result["structuredContent"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("model"), "{text}");
    client.process.close_stdin();
    client.process.wait_exit(READ_DEADLINE).await.unwrap();
    client.wait_for_stderr("does not load yet").await;

    // `-m` is accepted by mcp-server (the error message suggests it).
    let mut with_model = env.spawn_with_args(&["-m", "mock-model"]);
    let init = with_model.initialize(json!({})).await;
    assert!(init.get("result").is_some(), "{init}");
}
