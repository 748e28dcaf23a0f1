//! `interpreter app-server` over WebSocket (TCP) and WebSocket over a Unix socket: the
//! same protocol, one message per text frame; the capability token on non-loopback
//! listeners; the socket file's mode.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod app_server_support;

use app_server_support::{AppClient, AppEnv, READ_DEADLINE, trace, wait_for_stderr};
use interpreter_test_support::process::JsonLinesProcess;
use pretty_assertions::assert_eq;
use serde_json::json;

async fn run_a_turn(client: &mut AppClient, env: &AppEnv) {
    client.initialize().await;
    env.script_command_then_text("call_1", "echo over-socket", "done");
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "never", "sandbox": "danger-full-access"}))
        .await;
    client.start_turn(&thread_id, "hello").await;
    let messages = client.until_turn_completed().await;
    let order = trace(&messages);
    assert!(
        order.contains(&"item/commandExecution/outputDelta".to_string()),
        "{order:?}"
    );
    assert_eq!(
        messages
            .last()
            .map(|m| m["params"]["turn"]["status"].clone()),
        Some(json!("completed"))
    );
    let list = client.ok("thread/list", json!({})).await;
    assert_eq!(list["data"][0]["id"], thread_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_on_loopback_serves_the_protocol() {
    let env = AppEnv::new().await;
    let server =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://127.0.0.1:0"])).expect("spawn");
    let addr = wait_for_stderr(&server, "listening on ws://").await;
    // Health endpoints, and Origin refused.
    let http = reqwest::Client::builder()
        .timeout(READ_DEADLINE)
        .build()
        .expect("client");
    let ready = http
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status().as_u16(), 200);
    let browser = http
        .get(format!("http://{addr}/healthz"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("healthz");
    assert_eq!(browser.status().as_u16(), 403);
    let mut client = AppClient::connect_ws(server, &format!("ws://{addr}/"), None).await;
    run_a_turn(&mut client, &env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_loopback_websocket_requires_the_token() {
    let env = AppEnv::new().await;
    // Without a token file the server refuses to start on a non-loopback address.
    let mut refused =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://0.0.0.0:0"])).expect("spawn");
    let status = refused.wait_exit(READ_DEADLINE).await.expect("exit");
    assert!(!status.success());
    assert!(
        refused.stderr().contains("requires a capability token"),
        "{}",
        refused.stderr()
    );

    let token_file = env.home.path().join("ws.token");
    let server = JsonLinesProcess::spawn(env.command(&[
        "--listen",
        "ws://0.0.0.0:0",
        "--ws-token-file",
        token_file.to_str().unwrap(),
    ]))
    .expect("spawn");
    let addr = wait_for_stderr(&server, "listening on ws://").await;
    let port = addr.rsplit(':').next().expect("port");
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_string();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&token_file)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let url = format!("ws://127.0.0.1:{port}/");
    // No token, and a wrong token: the upgrade is refused with 401.
    for bad in [None, Some("not-the-token-at-all")] {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
        let mut request = url.as_str().into_client_request().expect("request");
        if let Some(bad) = bad {
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {bad}").parse().expect("header"),
            );
        }
        let result = tokio::time::timeout(READ_DEADLINE, tokio_tungstenite::connect_async(request))
            .await
            .expect("deadline");
        match result {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 401);
            }
            other => panic!("expected 401, got {other:?}"),
        }
    }
    let mut client = AppClient::connect_ws(server, &url, Some(&token)).await;
    run_a_turn(&mut client, &env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_serves_websocket_with_a_private_socket() {
    let env = AppEnv::new().await;
    let socket = env.home.path().join("control").join("app.sock");
    let server = JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&socket)
            .expect("socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut client = AppClient::connect_unix(server, &socket).await;
    run_a_turn(&mut client, &env).await;
    // Two clients at once: the second sees the first's thread in the list.
    let server_ref = client.server.take().expect("server");
    let mut second = AppClient::connect_unix(server_ref, &socket).await;
    second.initialize().await;
    let list = second.ok("thread/list", json!({})).await;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
}
