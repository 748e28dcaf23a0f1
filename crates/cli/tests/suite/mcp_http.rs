//! `interpreter mcp-server --listen http://…`: the bearer token, Origin and Host checks,
//! and both eras on one endpoint (a legacy session and a stateless 2026-07-28 request),
//! driven over real HTTP with every wait bounded.

use std::time::Duration;

use crate::mcp_support::{McpClient, McpEnv, READ_DEADLINE};
use serde_json::{Value, json};

struct HttpServer {
    /// Kept so the server process lives as long as the test needs it.
    process: McpClient,
    url: String,
    token: Option<String>,
}

/// Start the server on a free port; wait (bounded) for its `listening on` line.
async fn start(env: &McpEnv, extra: &[&str]) -> HttpServer {
    let mut args = vec!["--listen", "http://127.0.0.1:0/mcp"];
    args.extend_from_slice(extra);
    let client = env.spawn_with_args(&args);
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    loop {
        let stderr = client.process.stderr();
        // Only whole lines: a line may arrive in more than one write.
        let stderr = stderr[..stderr.rfind('\n').map_or(0, |end| end + 1)].to_string();
        if let Some(line) = stderr.lines().find(|l| l.starts_with("listening on ")) {
            let url = line.trim_start_matches("listening on ").trim().to_string();
            let token = stderr
                .lines()
                .find_map(|l| l.strip_prefix("bearer token file: "))
                .map(|path| {
                    std::fs::read_to_string(path.trim())
                        .unwrap()
                        .trim()
                        .to_string()
                });
            return HttpServer {
                process: client,
                url,
                token,
            };
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server did not start: {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(READ_DEADLINE)
        .build()
        .unwrap()
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "0"},
    })
}

/// The JSON-RPC message in a response body: plain JSON, or the last `data:` event of SSE.
fn message_of(body: &str) -> Value {
    if let Ok(value) = serde_json::from_str(body) {
        return value;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|m| m.get("id").is_some() && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no JSON-RPC response in body: {body}"))
}

async fn post(
    server: &HttpServer,
    body: &Value,
    headers: &[(&str, &str)],
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, String) {
    let mut request = http()
        .post(&server.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (status, headers, text)
}

/// Open a legacy session: `initialize` with `version` and `capabilities`, then
/// `notifications/initialized`. Returns the session id and the `initialize` body.
async fn legacy_session(
    server: &HttpServer,
    version: &str,
    capabilities: Value,
) -> (String, String) {
    let (status, headers, body) = post(
        server,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "0"}}}),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(message_of(&body)["result"]["protocolVersion"], version);
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a legacy session id")
        .to_string();
    let (status, _, _) = post(
        server,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", version),
        ],
    )
    .await;
    assert!(status.is_success(), "{status}");
    (session, body)
}

fn bearer(server: &HttpServer) -> String {
    format!("Bearer {}", server.token.as_deref().unwrap())
}

#[tokio::test]
async fn token_and_origin_are_enforced() {
    let env = McpEnv::new().await;
    let server = start(&env, &[]).await;
    let token_file = env.home.path().join("mcp-server.token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}});

    let (status, _, _) = post(
        &server,
        &list,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(status, 401);
    let (status, _, _) = post(
        &server,
        &list,
        &[
            ("Authorization", "Bearer wrong-token-wrong-token"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(status, 401);

    let auth = bearer(&server);
    let (status, _, _) = post(
        &server,
        &list,
        &[
            ("Authorization", auth.as_str()),
            ("Origin", "http://evil.example"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(status, 403);

    // The server's own origin is not a rebinding attempt.
    let own = server.url.trim_end_matches("/mcp").to_string();
    let (status, _, body) = post(
        &server,
        &list,
        &[
            ("Authorization", auth.as_str()),
            ("Origin", own.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let (status, _, body) = post(
        &server,
        &list,
        &[
            ("Authorization", auth.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let message = message_of(&body);
    assert_eq!(message["result"]["tools"][0]["name"], "codex", "{message}");
    assert!(message["result"]["ttlMs"].is_number(), "{message}");
}

#[tokio::test]
async fn a_legacy_session_runs_a_turn_over_http() {
    let env = McpEnv::new().await;
    let server = start(&env, &["--no-auth"]).await;
    assert!(server.token.is_none());
    let (session, _) = legacy_session(&server, "2025-11-25", json!({})).await;
    let session_headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];

    env.script_text("Hello over HTTP.");
    let (status, _, body) = post(
        &server,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "codex", "arguments": {"prompt": "hi", "approval-policy": "never"}}}),
        &session_headers,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let message = message_of(&body);
    assert_eq!(
        message["result"]["structuredContent"]["content"], "Hello over HTTP.",
        "{message}"
    );
    // A 2025-11-25 client polls SSE streams: its call stream opens with a priming event.
    assert!(
        priming_events(&body) > 0,
        "no priming event for 2025-11-25: {body}"
    );
}

/// SSE events with fields but no data: the priming events of 2025-11-25's SSE polling.
fn priming_events(body: &str) -> usize {
    body.split("\n\n")
        .filter(|event| {
            let fields: Vec<&str> = event
                .lines()
                .filter(|line| !line.is_empty() && !line.starts_with(':'))
                .collect();
            !fields.is_empty()
                && !fields.iter().any(|line| {
                    line.strip_prefix("data:")
                        .is_some_and(|data| !data.trim().is_empty())
                })
        })
        .count()
}

/// Found by Gemini CLI 0.61.0, a 2025-06-18 client that never opens the optional GET
/// stream and parses every SSE event's data as JSON: the server's empty-data priming
/// events broke its client ("Unexpected end of JSON input"), and the approval question of
/// a running `codex` call went only to the GET stream, so it waited out the approval
/// deadline. Now it sees no priming event, gets the question on its call's own stream,
/// and its answer decides the command.
#[tokio::test]
async fn gemini_cli_legacy_client_without_get_stream_gets_its_approval_on_the_call() {
    use futures::StreamExt;

    let env = McpEnv::new().await;
    // A --no-auth listener's calls get no sandbox above the server's own.
    let server = start(
        &env,
        &["--no-auth", "-c", "sandbox_mode=\"danger-full-access\""],
    )
    .await;
    let (session, body) = legacy_session(&server, "2025-06-18", json!({"elicitation": {}})).await;
    assert_eq!(
        priming_events(&body),
        0,
        "a priming event for 2025-06-18: {body}"
    );
    let session_headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];

    env.script_command_then_text("call_a", "touch approved.txt", "Finished.");
    let mut call = http()
        .post(&server.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream");
    for (name, value) in session_headers {
        call = call.header(name, value);
    }
    let response = call
        .json(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "codex", "arguments": {"prompt": "make a file", "approval-policy": "untrusted",
            "sandbox": "danger-full-access"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut body = String::new();
    let mut answered = false;
    let result = loop {
        let chunk = tokio::time::timeout(READ_DEADLINE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("the call stream went quiet: {body}"))
            .unwrap_or_else(|| panic!("the call stream ended without a result: {body}"))
            .unwrap();
        body.push_str(&String::from_utf8_lossy(&chunk));
        let messages: Vec<Value> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .collect();
        if !answered
            && let Some(question) = messages
                .iter()
                .find(|m| m["method"] == "elicitation/create")
        {
            let (status, _, text) = post(
                &server,
                &json!({"jsonrpc": "2.0", "id": question["id"],
                    "result": {"action": "accept", "content": {"decision": "approved"}}}),
                &session_headers,
            )
            .await;
            assert!(status.is_success(), "{status}: {text}");
            answered = true;
        }
        if let Some(result) = messages
            .iter()
            .find(|m| m["id"] == 2 && m.get("method").is_none())
        {
            break result.clone();
        }
    };
    assert!(
        answered,
        "the approval never came on the call's stream: {body}"
    );
    assert_eq!(
        priming_events(&body),
        0,
        "a priming event for 2025-06-18: {body}"
    );
    assert_eq!(
        result["result"]["structuredContent"]["content"], "Finished.",
        "{result}"
    );
    assert!(
        env.work_path().join("approved.txt").exists(),
        "the approved command did not run"
    );
}

#[tokio::test]
async fn no_auth_is_refused_off_loopback() {
    let env = McpEnv::new().await;
    let mut client = env.spawn_with_args(&["--listen", "http://0.0.0.0:0/mcp", "--no-auth"]);
    let status = client
        .process
        .wait_exit(READ_DEADLINE)
        .await
        .expect("the server refuses to start");
    assert!(!status.success(), "{status:?}: {}", client.process.stderr());
    client
        .wait_for_stderr("only allowed on a loopback address")
        .await;
}

#[tokio::test]
async fn token_files_of_others_or_open_to_others_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = McpEnv::new().await;
    let token_file = env.home.path().join("mcp-server.token");
    std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o604)).unwrap();
    let path = token_file.display().to_string();
    let mut client = env.spawn_with_args(&["--listen", "http://127.0.0.1:0/mcp"]);
    let status = client.process.wait_exit(READ_DEADLINE).await.unwrap();
    assert!(!status.success());
    for needle in [path.as_str(), "0604", "chmod 600"] {
        client.wait_for_stderr(needle).await;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("note: not root, so the token file owned by another user is not tried");
        return;
    }
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    rustix::fs::chown(
        &token_file,
        Some(rustix::process::Uid::from_raw(65534)),
        None,
    )
    .unwrap();
    let mut client = env.spawn_with_args(&["--listen", "http://127.0.0.1:0/mcp"]);
    let status = client.process.wait_exit(READ_DEADLINE).await.unwrap();
    assert!(!status.success());
    for needle in [path.as_str(), "owned by uid 65534", "chmod 600"] {
        client.wait_for_stderr(needle).await;
    }
}

/// A replica told where other replicas reach it (`--internal-url`) but left on its local
/// home's store (e.g. `thread_store` written below a table of config.toml) says so at
/// start-up: the others would never see its threads.
#[tokio::test]
async fn an_internal_url_on_a_local_store_is_a_warning() {
    let env = McpEnv::new().await;
    let client = env.spawn_with_args(&[
        "--listen",
        "http://127.0.0.1:0/mcp",
        "--internal-url",
        "http://10.0.0.5:8765/mcp",
    ]);
    client.wait_for_stderr("thread store: local (").await;
    client
        .wait_for_stderr(
            "warning: --internal-url is set but the thread store is this machine's home",
        )
        .await;
    client.wait_for_stderr("listening on ").await;
}

/// A load balancer's health checks carry no token: `GET /readyz`, `GET /livez` and
/// `GET /healthz` answer 200 without one (and `/livez`, `/healthz` 403 to a web page's
/// `Origin`), saying nothing else, while the MCP endpoint still wants the token.
#[tokio::test]
async fn health_probes_answer_without_the_token() {
    let env = McpEnv::new().await;
    let server = start(&env, &[]).await;
    assert!(server.token.is_some());
    let base = server.url.trim_end_matches("/mcp").to_string();
    let client = http();
    for path in ["/readyz", "/livez", "/healthz"] {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(response.text().await.unwrap().is_empty(), "{path}");
    }
    for path in ["/livez", "/healthz"] {
        let page = client
            .get(format!("{base}{path}"))
            .header("Origin", "https://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 403, "{path}");
    }
    let unauthenticated = client
        .post(&server.url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
}

/// A request that says another fleet replica forwarded it gets in without the bearer
/// token only with a signature under the fleet's replica key, made for this server's
/// own URL, within the time window, and never seen before. Everything else is 401 and
/// the server says why on stderr.
#[tokio::test]
async fn adversarial_forged_expired_or_replayed_replica_signatures_are_refused() {
    use interpreter_mcp_server::{ReplicaKeys, SIGNATURE_HEADER, SignedRequest};
    use reqwest::header::{HeaderMap, HeaderValue};

    let env = McpEnv::with_config("mcp_server.fleet_key_file = \"fleet.keys\"").await;
    let server = start(&env, &[]).await;
    let key_file = env.home.path().join("fleet.keys");
    server
        .process
        .wait_for_stderr(&format!("fleet key file: {}", key_file.display()))
        .await;
    let fleet = ReplicaKeys::from_key_file(&key_file).unwrap();
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger = ReplicaKeys::from_key_file(&stranger_dir.path().join("keys")).unwrap();

    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}).to_string();
    let mut plain = HeaderMap::new();
    for (name, value) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("interpreter-forwarded", "1"),
    ] {
        plain.insert(name, HeaderValue::from_static(value));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut nonces = 0u32;
    let mut signed = |keys: &ReplicaKeys, at: u64, url: &str, body: &str| {
        nonces += 1;
        let signature = keys
            .sign_at(
                at,
                &format!("{nonces:032x}"),
                &SignedRequest {
                    method: "POST",
                    url,
                    headers: &plain,
                    body: body.as_bytes(),
                },
            )
            .unwrap();
        let mut headers = plain.clone();
        headers.insert(SIGNATURE_HEADER, HeaderValue::from_str(&signature).unwrap());
        headers
    };
    let send = |headers: HeaderMap, body: String| {
        let url = server.url.clone();
        async move {
            let response = http()
                .post(url)
                .headers(headers)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.text().await.unwrap())
        }
    };

    // A replica's request: let in, answered.
    let genuine = signed(&fleet, now, &server.url, &body);
    let (status, text) = send(genuine.clone(), body.clone()).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(message_of(&text)["result"]["tools"][0]["name"], "codex");

    let refusals = [
        ("replayed", genuine, body.clone(), "it is a replay"),
        (
            "altered",
            signed(&fleet, now, &server.url, &body),
            body.replace("tools/list", "tools/lisT"),
            "its signature does not match",
        ),
        (
            "made for another address",
            signed(&fleet, now, "http://127.0.0.1:9/mcp", &body),
            body.clone(),
            "its signature does not match",
        ),
        (
            "forged with another key",
            signed(&stranger, now, &server.url, &body),
            body.clone(),
            "its signature does not match",
        ),
        (
            "expired",
            signed(&fleet, now - 120, &server.url, &body),
            body.clone(),
            "its signature expired",
        ),
    ];
    for (what, headers, body, why) in refusals {
        let (status, text) = send(headers, body).await;
        assert_eq!(status, 401, "{what}: {text}");
        assert!(text.contains(why), "{what}: {text}");
        server
            .process
            .wait_for_stderr(&format!("warning: refused a forwarded request: {why}"))
            .await;
    }
}

/// A `--no-auth` listener can be called by any local process (a sandboxed command with
/// network among them), so its calls never run above the server's own sandbox, whatever
/// `max_sandbox` allows: with `-c sandbox_mode=read-only` a call asking for
/// workspace-write is refused, and nothing runs.
#[tokio::test]
async fn adversarial_a_no_auth_listener_never_runs_above_its_own_sandbox() {
    let env = McpEnv::with_config("mcp_server.max_sandbox = \"danger-full-access\"").await;
    env.script_command_then_text("call_w", "touch written.txt", "done");
    let server = start(&env, &["--no-auth", "-c", "sandbox_mode=\"read-only\""]).await;
    server
        .process
        .wait_for_stderr("calls may run at most `read-only, no network`")
        .await;
    let call = |sandbox: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "codex", "_meta": modern_meta(),
            "arguments": {"prompt": "write", "approval-policy": "never", "sandbox": sandbox}}})
    };
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "codex"),
    ];
    for sandbox in ["workspace-write", "danger-full-access"] {
        let (status, _, body) = post(&server, &call(sandbox), &headers).await;
        assert_eq!(status, 200, "{body}");
        let result = &message_of(&body)["result"];
        assert_eq!(result["isError"], true, "{sandbox}: {result}");
        let text = result["structuredContent"]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("--no-auth"), "{sandbox}: {text}");
        assert!(text.contains("`read-only`"), "{sandbox}: {text}");
    }
    assert!(env.model.requests().is_empty(), "a refused call ran");
    assert!(!env.work_path().join("written.txt").exists());
}
