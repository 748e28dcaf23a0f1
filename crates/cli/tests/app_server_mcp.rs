//! `interpreter app-server` over stdio: the MCP servers the agent itself uses, as a client
//! sees them: `mcpServerStatus/list` (a ready server, a failing one, a disabled one, paging,
//! never starting a server by listing it), `config/mcpServer/reload` picking up a server
//! added to the config, and `mcpServer/startupStatus/updated` during a turn.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod app_server_support;

use std::path::PathBuf;

use app_server_support::AppEnv;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NO_APPROVALS: &str = r#"{"approvalPolicy": "never", "sandbox": "danger-full-access"}"#;

/// The `mock-mcp-server` binary of the test-support package, built next to `interpreter`.
fn mock_mcp_server() -> PathBuf {
    interpreter_test_support::bins::mock_mcp_server(
        std::path::Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .expect("mock-mcp-server")
}

fn servers_config() -> String {
    let m = mock_mcp_server();
    let m = m.display();
    format!(
        "\n[mcp_servers.mock]\ncommand = \"{m}\"\n\
         \n[mcp_servers.crashy]\ncommand = \"{m}\"\nargs = [\"--crash\"]\n\
         \n[mcp_servers.off]\ncommand = \"{m}\"\nenabled = false\n"
    )
}

/// `[mcp_servers.*]` go after the provider table; appended, they are tables of their own.
fn append_config(env: &AppEnv, extra: &str) {
    let path = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&path).expect("read config");
    text.push_str(extra);
    std::fs::write(&path, text).expect("write config");
}

fn by_name(list: &Value) -> std::collections::BTreeMap<String, Value> {
    list["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|s| (s["name"].as_str().expect("name").to_string(), s.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_reports_configured_servers_without_starting_them_then_their_state() {
    let env = AppEnv::new().await;
    append_config(&env, &servers_config());
    let mut client = env.spawn();
    client.initialize().await;

    // Nothing has used them: listed as not started, and listing does not start them.
    for _ in 0..2 {
        let list = client.ok("mcpServerStatus/list", json!({})).await;
        let servers = by_name(&list);
        assert_eq!(
            servers.keys().cloned().collect::<Vec<_>>(),
            ["crashy", "mock", "off"]
        );
        assert_eq!(servers["mock"]["runtimeStatus"], "notStarted");
        assert_eq!(servers["mock"]["authStatus"], "unsupported");
        assert_eq!(servers["mock"]["tools"], json!({}));
        assert_eq!(servers["mock"]["resources"], json!([]));
        assert_eq!(servers["crashy"]["runtimeStatus"], "notStarted");
        assert_eq!(servers["off"]["runtimeStatus"], "disabled");
        assert_eq!(list["nextCursor"], Value::Null);
    }

    // A thread uses them; after its turn they have settled.
    let thread_id = client
        .start_thread(serde_json::from_str(NO_APPROVALS).unwrap())
        .await;
    env.script_text("hi");
    client.start_turn(&thread_id, "hello").await;
    let messages = client.until_turn_completed().await;
    let updates: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["method"] == "mcpServer/startupStatus/updated")
        .map(|m| {
            assert_eq!(m["params"]["threadId"], thread_id.as_str());
            (
                m["params"]["name"].as_str().unwrap().to_string(),
                m["params"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        updates.contains(&("mock".into(), "ready".into())),
        "{updates:?}"
    );
    assert!(
        updates.contains(&("crashy".into(), "failed".into())),
        "{updates:?}"
    );
    let failed = messages
        .iter()
        .find(|m| {
            m["method"] == "mcpServer/startupStatus/updated" && m["params"]["status"] == "failed"
        })
        .unwrap();
    assert!(
        failed["params"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("crashy")),
        "{failed}"
    );

    for params in [json!({}), json!({"threadId": thread_id})] {
        let list = client.ok("mcpServerStatus/list", params).await;
        let servers = by_name(&list);
        assert_eq!(servers["mock"]["runtimeStatus"], "connected");
        assert_eq!(servers["mock"]["toolsError"], Value::Null);
        let echo = &servers["mock"]["tools"]["echo"];
        assert_eq!(echo["name"], "echo");
        assert_eq!(echo["inputSchema"]["type"], "object");
        assert_eq!(servers["crashy"]["runtimeStatus"], "failed");
        assert_eq!(servers["crashy"]["tools"], json!({}));
        assert!(
            servers["crashy"]["toolsError"]
                .as_str()
                .is_some_and(|e| e.contains("crashy")),
            "{list}"
        );
    }

    // One server by name; pages of one.
    let one = client
        .ok("mcpServerStatus/list", json!({"serverName": "mock"}))
        .await;
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let page = client
            .ok(
                "mcpServerStatus/list",
                json!({"limit": 1, "cursor": cursor, "detail": "toolsAndAuthOnly"}),
            )
            .await;
        let data = page["data"].as_array().unwrap();
        assert_eq!(data.len(), 1);
        names.push(data[0]["name"].as_str().unwrap().to_string());
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(names, ["crashy", "mock", "off"]);
    let bad = client
        .call("mcpServerStatus/list", json!({"cursor": "nope"}))
        .await;
    assert_eq!(bad["error"]["code"], -32600, "{bad}");
    let unknown = client
        .call(
            "mcpServerStatus/list",
            json!({"threadId": "00000000-0000-7000-8000-000000000000"}),
        )
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_picks_up_a_server_added_to_the_config() {
    let env = AppEnv::new().await;
    let m = mock_mcp_server();
    append_config(
        &env,
        &format!("\n[mcp_servers.mock]\ncommand = \"{}\"\n", m.display()),
    );
    let mut client = env.spawn();
    client.initialize().await;
    let before = by_name(&client.ok("mcpServerStatus/list", json!({})).await);
    assert_eq!(before.keys().cloned().collect::<Vec<_>>(), ["mock"]);

    append_config(
        &env,
        &format!(
            "\n[mcp_servers.added]\ncommand = \"{}\"\nenv = {{ MARK = \"added\" }}\n",
            m.display()
        ),
    );
    let reloaded = client.ok("config/mcpServer/reload", json!(null)).await;
    assert_eq!(reloaded, json!({}));
    let after = by_name(&client.ok("mcpServerStatus/list", json!({})).await);
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), ["added", "mock"]);
    assert_eq!(after["added"]["runtimeStatus"], "notStarted");

    // A new thread uses the new set.
    let thread_id = client
        .start_thread(serde_json::from_str(NO_APPROVALS).unwrap())
        .await;
    env.script_text("hi");
    client.start_turn(&thread_id, "hello").await;
    let messages = client.until_turn_completed().await;
    assert!(
        messages
            .iter()
            .any(|m| m["method"] == "mcpServer/startupStatus/updated"
                && m["params"]["name"] == "added"
                && m["params"]["status"] == "ready"),
        "{messages:#?}"
    );
    let listed = by_name(
        &client
            .ok("mcpServerStatus/list", json!({"threadId": thread_id}))
            .await,
    );
    assert_eq!(listed["added"]["runtimeStatus"], "connected");

    // A config that no longer loads is reported, not half-applied.
    append_config(&env, "\n[mcp_servers.broken\n");
    let broken = client.call("config/mcpServer/reload", json!(null)).await;
    assert!(broken.get("error").is_some(), "{broken}");
}
