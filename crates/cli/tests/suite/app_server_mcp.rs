//! `interpreter app-server` over stdio: the MCP servers the agent itself uses, as a client
//! sees them: `mcpServerStatus/list` (a ready server, a failing one, a disabled one, paging,
//! never starting a server by listing it), `config/mcpServer/reload` picking up a server
//! added to the config, and `mcpServer/startupStatus/updated` during a turn; a server's
//! question forwarded as `mcpServer/elicitation/request` and answered accept / decline /
//! never (declined at the deadline) / with garbage or content that does not fit the form
//! (declined).

use std::path::PathBuf;

use crate::app_server_support::{AppClient, AppEnv};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
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

/// A thread whose model calls the mock server's `ask` tool, then says "done"; returns the
/// client with the `mcpServer/elicitation/request` it got, and the thread id.
async fn asked(env: &AppEnv) -> (AppClient, Value, String) {
    append_config(
        env,
        &format!(
            "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
            mock_mcp_server().display()
        ),
    );
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(
            0,
            "call_ask",
            "mcp__mock__ask",
            r#"{"message":"which branch?"}"#,
        ),
        chunk::finish("tool_calls"),
    ]));
    env.script_text("done");
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(serde_json::from_str(NO_APPROVALS).unwrap())
        .await;
    let turn_id = client.start_turn(&thread_id, "ask").await;
    let request = client.server_request("mcpServer/elicitation/request").await;
    let params = &request["params"];
    assert_eq!(params["serverName"], "mock");
    assert_eq!(params["threadId"], thread_id.as_str());
    assert_eq!(params["turnId"], turn_id.as_str());
    assert_eq!(params["mode"], "form");
    // The engine says which of the agent's servers asks.
    assert_eq!(params["message"], "MCP server `mock` asks: which branch?");
    assert_eq!(
        params["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );
    (client, request, thread_id)
}

/// What the server's `ask` tool returned to the model (its output, in the second request).
fn tool_output(env: &AppEnv) -> String {
    let requests = env.model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    requests[1].to_string()
}

async fn answered(answer: Value) -> String {
    let env = AppEnv::new().await;
    let (mut client, request, _) = asked(&env).await;
    client.respond(&request["id"], answer).await;
    let messages = client.until_turn_completed().await;
    assert!(
        messages
            .iter()
            .any(|m| m["method"] == "serverRequest/resolved"
                && m["params"]["requestId"] == request["id"]),
        "{messages:#?}"
    );
    tool_output(&env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_elicitation_reaches_the_server_with_its_content() {
    let output = answered(json!({"action": "accept", "content": {"name": "main"}})).await;
    assert!(output.contains(r#"\"action\":\"accept\""#), "{output}");
    assert!(output.contains(r#"\"name\":\"main\""#), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_elicitation_is_declined() {
    let output = answered(json!({"action": "decline"})).await;
    assert!(output.contains(r#"\"action\":\"decline\""#), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_elicitation_answers_are_declined() {
    for answer in [
        // Not a response at all.
        json!("yes"),
        json!({"action": "approve"}),
        json!({"content": {"name": "main"}}),
        // Accepted, but the content does not fit the requested form.
        json!({"action": "accept", "content": {"name": 42}}),
        json!({"action": "accept", "content": {"name": "main", "admin": true}}),
        json!({"action": "accept", "content": "main"}),
        json!({"action": "accept"}),
    ] {
        let output = answered(answer.clone()).await;
        assert!(
            output.contains(r#"\"action\":\"decline\""#),
            "{answer} → {output}"
        );
        assert!(
            !output.contains(r#"\"action\":\"accept\""#),
            "{answer} → {output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_declines() {
    let env = AppEnv::new().await;
    let (mut client, request, _) = asked(&env).await;
    client
        .respond_error(&request["id"], -32601, "no forms here")
        .await;
    client.until_turn_completed().await;
    let output = tool_output(&env);
    assert!(output.contains(r#"\"action\":\"decline\""#), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_elicitation_is_declined_at_the_deadline() {
    let env = AppEnv::with_config("approval_timeout_sec = 1").await;
    let (mut client, request, _) = asked(&env).await;
    // Never answered: the turn goes on after the deadline, with a decline.
    let messages = client.until_turn_completed().await;
    assert!(
        messages
            .iter()
            .any(|m| m["method"] == "serverRequest/resolved"
                && m["params"]["requestId"] == request["id"]),
        "{messages:#?}"
    );
    let output = tool_output(&env);
    assert!(output.contains(r#"\"action\":\"decline\""#), "{output}");
    // A late answer changes nothing.
    client
        .respond(
            &request["id"],
            json!({"action": "accept", "content": {"name": "x"}}),
        )
        .await;
}

/// A client that started a thread using the `mock` server (no turn yet); its thread id.
async fn thread_with_mock_server(env: &AppEnv) -> (AppClient, String) {
    append_config(
        env,
        &format!(
            "\n[mcp_servers.mock]\ncommand = \"{}\"\n",
            mock_mcp_server().display()
        ),
    );
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(serde_json::from_str(NO_APPROVALS).unwrap())
        .await;
    (client, thread_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_calls_a_thread_servers_tool_and_reads_its_resource() {
    let env = AppEnv::new().await;
    let (mut client, thread_id) = thread_with_mock_server(&env).await;

    let result = client
        .ok(
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "mock", "tool": "echo",
                   "arguments": {"text": "from the client"}}),
        )
        .await;
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "from the client"}])
    );
    assert_eq!(result["isError"], false);
    let failed = client
        .ok(
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "mock", "tool": "fail"}),
        )
        .await;
    assert_eq!(
        failed["isError"], true,
        "an error result is the tool's answer"
    );

    let read = client
        .ok(
            "mcpServer/resource/read",
            json!({"threadId": thread_id, "server": "mock", "uri": "mock://notes"}),
        )
        .await;
    assert_eq!(read["contents"][0]["uri"], "mock://notes", "{read}");
    assert!(read["contents"][0]["text"].is_string(), "{read}");

    // Neither is part of the thread: the model never sees them, and nothing is recorded.
    let items = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    assert_eq!(items["thread"]["turns"], json!([]), "{items}");
    assert!(env.model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tool_calls_and_reads_are_refused_when_they_cannot_be_served() {
    let env = AppEnv::new().await;
    let (mut client, thread_id) = thread_with_mock_server(&env).await;
    let refused = [
        (
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "mock", "tool": "nope"}),
            -32600,
            "unknown MCP tool",
        ),
        (
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "ghost", "tool": "echo"}),
            -32600,
            "unknown MCP tool",
        ),
        (
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "mock", "tool": "echo", "arguments": [1]}),
            -32600,
            "must be a JSON object",
        ),
        (
            "mcpServer/tool/call",
            json!({"threadId": "00000000-0000-7000-8000-000000000000", "server": "mock",
                   "tool": "echo"}),
            -32600,
            "thread not loaded",
        ),
        (
            "mcpServer/tool/call",
            json!({"threadId": thread_id, "server": "mock", "tool": "echo",
                   "environmentId": "remote"}),
            -32602,
            "environment",
        ),
        (
            "mcpServer/resource/read",
            json!({"server": "mock", "uri": "mock://notes"}),
            -32602,
            "threadId is required",
        ),
        (
            "mcpServer/resource/read",
            json!({"threadId": thread_id, "server": "mock", "uri": "mock://notes",
                   "connectorId": "drive"}),
            -32602,
            "hosted connectors",
        ),
        (
            "mcpServer/resource/read",
            json!({"threadId": thread_id, "server": "ghost", "uri": "mock://notes"}),
            -32600,
            "unknown MCP server",
        ),
    ];
    for (method, params, code, message) in refused {
        let answer = client.call(method, params.clone()).await;
        assert_eq!(answer["error"]["code"], code, "{method} {params}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{method} {params}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_progress_reaches_the_client_while_its_tool_runs() {
    let env = AppEnv::new().await;
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, "call_progress", "mcp__mock__progress", r#"{"steps":3}"#),
        chunk::finish("tool_calls"),
    ]));
    env.script_text("done");
    let (mut client, thread_id) = thread_with_mock_server(&env).await;
    let turn_id = client.start_turn(&thread_id, "make progress").await;
    let messages = client.until_turn_completed().await;

    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "item/mcpToolCall/progress")
        .collect();
    assert!(!progress.is_empty(), "{messages:#?}");
    for note in &progress {
        let params = &note["params"];
        assert_eq!(params["threadId"], thread_id.as_str());
        assert_eq!(params["turnId"], turn_id.as_str());
        assert_eq!(params["itemId"], "call_progress");
        let message = params["message"].as_str().unwrap();
        assert!(
            message.starts_with("step ") && message.ends_with(" of 3"),
            "{message}"
        );
    }
    // Between the item's start and its completion, never after.
    let position = |pred: &dyn Fn(&Value) -> bool| messages.iter().position(pred).unwrap();
    let started = position(&|m| {
        m["method"] == "item/started" && m["params"]["item"]["id"] == "call_progress"
    });
    let completed = position(&|m| {
        m["method"] == "item/completed" && m["params"]["item"]["id"] == "call_progress"
    });
    let first = position(&|m| m["method"] == "item/mcpToolCall/progress");
    let last = messages
        .iter()
        .rposition(|m| m["method"] == "item/mcpToolCall/progress")
        .unwrap();
    assert!(started < first && last < completed, "{messages:#?}");
    assert!(tool_output(&env).contains("done 3 steps"));
}

/// An OAuth-protected MCP endpoint and its authorization server on loopback, approving
/// every request at once (dynamic registration, PKCE, code exchange): enough for a login
/// to finish without a browser. Its MCP endpoint only ever answers 401.
async fn oauth_server() -> String {
    use axum::response::IntoResponse;
    use axum::routing::{any, get, post};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let b = base.clone();
    let app = axum::Router::new()
        .route(
            "/mcp",
            any(move || {
                let b = b.clone();
                async move {
                    (
                        axum::http::StatusCode::UNAUTHORIZED,
                        [(
                            "www-authenticate",
                            format!(
                                "Bearer resource_metadata=\"{b}/.well-known/oauth-protected-resource\""
                            ),
                        )],
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get({
                let b = base.clone();
                move || async move {
                    axum::Json(json!({"resource": format!("{b}/mcp"),
                                      "authorization_servers": [b]}))
                }
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get({
                let b = base.clone();
                move || async move {
                    axum::Json(json!({
                        "issuer": b,
                        "authorization_endpoint": format!("{b}/authorize"),
                        "token_endpoint": format!("{b}/token"),
                        "registration_endpoint": format!("{b}/register"),
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "refresh_token"],
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["none"],
                    }))
                }
            }),
        )
        .route(
            "/register",
            post(|axum::Json(body): axum::Json<Value>| async move {
                (
                    axum::http::StatusCode::CREATED,
                    axum::Json(json!({"client_id": "test-client",
                                      "redirect_uris": body["redirect_uris"],
                                      "token_endpoint_auth_method": "none"})),
                )
            }),
        )
        .route(
            "/authorize",
            get(|axum::extract::RawQuery(query): axum::extract::RawQuery| async move {
                let url = format!("http://x/?{}", query.unwrap_or_default());
                let q: std::collections::HashMap<String, String> = reqwest::Url::parse(&url)
                    .unwrap()
                    .query_pairs()
                    .into_owned()
                    .collect();
                let target = format!(
                    "{}?code=test-code&state={}",
                    q["redirect_uri"],
                    q.get("state").cloned().unwrap_or_default()
                );
                axum::response::Redirect::to(&target)
            }),
        )
        .route(
            "/token",
            post(|| async {
                axum::Json(json!({"access_token": "test-token", "token_type": "Bearer",
                                  "expires_in": 3600, "refresh_token": "test-refresh"}))
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_login_answers_with_the_url_and_completes_when_the_browser_comes_back() {
    let env = AppEnv::new().await;
    let base = oauth_server().await;
    append_config(
        &env,
        &format!(
            "\n[mcp_servers.docs]\nurl = \"{base}/mcp\"\n\n[mcp_servers.local]\ncommand = \"true\"\n"
        ),
    );
    let mut client = env.spawn();
    client.initialize().await;

    let answer = client
        .ok("mcpServer/oauth/login", json!({"name": "docs"}))
        .await;
    let url = answer["authorizationUrl"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("{base}/authorize?")), "{url}");
    let login_id = answer["loginId"].clone();
    assert!(login_id.is_string(), "{answer}");

    // The "browser": follows the redirect to the agent's loopback listener.
    let page = reqwest::get(&url).await.unwrap();
    assert!(page.status().is_success(), "{}", page.status());
    let completed = client.notification("mcpServer/oauthLogin/completed").await;
    assert_eq!(
        completed["params"],
        json!({"name": "docs", "success": true, "error": null, "loginId": login_id,
               "threadId": null})
    );
    let list = client.ok("mcpServerStatus/list", json!({})).await;
    assert_eq!(by_name(&list)["docs"]["authStatus"], "oAuth", "{list}");
    let saved = std::fs::read_to_string(env.home.path().join("mcp-credentials.json")).unwrap();
    assert!(saved.contains("test-token"));

    // Refused before anything is started.
    for (params, message) in [
        (json!({"name": "ghost"}), "unknown MCP server"),
        (json!({"name": "local"}), "streamable HTTP"),
        (json!({"name": "docs", "timeoutSecs": 0}), "timeoutSecs"),
        (
            json!({"name": "docs", "clientRegistration": "dcr"}),
            "not served",
        ),
    ] {
        let refused = client.call("mcpServer/oauth/login", params.clone()).await;
        let text = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{params}: {refused}");
    }
}
