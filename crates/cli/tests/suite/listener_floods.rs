//! The network listeners (app-server WebSocket, mcp-server streamable HTTP) under a flood
//! of connections that trickle a header or sit idle, and against another local user.
//! Loopback only; the flood is bounded (2,000 connections) and every wait has a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE, wait_for_stderr};
use crate::mcp_support::McpEnv;
use interpreter_test_support::process::JsonLinesProcess;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

const FLOOD: usize = 2_000;

/// The test process holds the flood's descriptors: raise its own soft limit.
fn raise_own_fd_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    );
}

struct Flood {
    idle: Vec<tokio::net::TcpStream>,
    stop: CancellationToken,
    trickling: tokio::task::JoinSet<()>,
}

/// Open `FLOOD` connections to `addr`: half send a partial request header one byte every
/// half second, half send nothing. Connections the server closes at once are fine.
async fn flood(addr: SocketAddr) -> Flood {
    let stop = CancellationToken::new();
    let mut trickling = tokio::task::JoinSet::new();
    let mut idle = Vec::new();
    for batch in 0..FLOOD / 100 {
        let mut connects = tokio::task::JoinSet::new();
        for _ in 0..100 {
            connects.spawn(tokio::time::timeout(
                Duration::from_secs(10),
                tokio::net::TcpStream::connect(addr),
            ));
        }
        while let Some(joined) = connects.join_next().await {
            let Ok(Ok(Ok(mut stream))) = joined else {
                continue;
            };
            if batch % 2 == 0 {
                let stop = stop.clone();
                trickling.spawn(async move {
                    if stream
                        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                    loop {
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        }
                        if stream.write_all(b"X").await.is_err() {
                            return;
                        }
                    }
                });
            } else {
                idle.push(stream);
            }
        }
    }
    Flood {
        idle,
        stop,
        trickling,
    }
}

impl Flood {
    /// The idle connections are closed by the server, not left open. The newest ones are
    /// checked: the older ones made room for later connections at the cap, the newest stay
    /// until the header-read timeout closes them.
    async fn idle_ones_are_closed(&mut self) {
        assert!(!self.idle.is_empty(), "no idle connection was opened");
        for stream in self.idle.iter_mut().rev().take(20) {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(READ_DEADLINE, stream.read(&mut byte))
                .await
                .expect("an idle connection was never closed");
            assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        }
    }

    async fn stop(mut self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(READ_DEADLINE, async {
            while self.trickling.join_next().await.is_some() {}
        })
        .await;
    }
}

/// Retry `attempt` until it succeeds; only a hang reaches the deadline.
async fn eventually<F, Fut>(what: &str, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(15), attempt()).await {
            Ok(Ok(())) => return,
            Ok(Err(err)) => last = err,
            Err(_) => last = "attempt timed out".into(),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{what} was never served; last: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_server_websocket_serves_its_client_through_a_flood() {
    raise_own_fd_limit();
    let env = AppEnv::new().await;
    let server =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://127.0.0.1:0"])).expect("spawn");
    let addr: SocketAddr = wait_for_stderr(&server, "listening on ws://")
        .await
        .parse()
        .expect("addr");
    let token_file = wait_for_stderr(&server, "capability token file: ").await;
    let token = std::fs::read_to_string(token_file.trim())
        .expect("token")
        .trim()
        .to_string();
    let mut flood = flood(addr).await;
    let url = format!("ws://{addr}/");
    eventually("the token holder's WebSocket", || {
        let url = url.clone();
        let token = token.clone();
        async move {
            use futures::{SinkExt as _, StreamExt as _};
            use tokio_tungstenite::tungstenite::Message;
            use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
            let mut request = url.into_client_request().map_err(|e| e.to_string())?;
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().map_err(|_| "header")?,
            );
            let (mut socket, _) = tokio_tungstenite::connect_async(request)
                .await
                .map_err(|e| e.to_string())?;
            let init = json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "0"}}});
            socket
                .send(Message::Text(init.to_string().into()))
                .await
                .map_err(|e| e.to_string())?;
            match socket.next().await {
                Some(Ok(Message::Text(text))) if text.contains("serverInfo") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    flood.idle_ones_are_closed().await;
    flood.stop().await;
    // The server is still healthy afterwards.
    let mut client = AppClient::connect_ws(server, &url, Some(&token)).await;
    client.initialize().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_http_serves_its_client_through_a_flood() {
    raise_own_fd_limit();
    let env = McpEnv::new().await;
    let server = env.spawn_with_args(&["--listen", "http://127.0.0.1:0/mcp"]);
    server.wait_for_stderr("listening on http://").await;
    let stderr = server.process.stderr();
    let url = stderr
        .lines()
        .find_map(|l| l.strip_prefix("listening on "))
        .expect("url")
        .trim()
        .to_string();
    let token_file = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bearer token file: "))
        .expect("token file")
        .trim()
        .to_string();
    let token = std::fs::read_to_string(token_file)
        .expect("token")
        .trim()
        .to_string();
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("addr");
    let mut flood = flood(addr).await;
    eventually("the token holder's tools/list", || {
        let url = url.clone();
        let token = token.clone();
        async move { tools_list(&url, Some(&token)).await.map(drop) }
    })
    .await;
    flood.idle_ones_are_closed().await;
    flood.stop().await;
    assert_eq!(tools_list(&url, None).await.ok(), None);
}

/// A modern-era `tools/list`; `Err` unless 200. A fresh client per call, so no connection
/// from before the flood is reused.
async fn tools_list(url: &str, token: Option<&str>) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| e.to_string())?;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "flood-test", "version": "0"},
    });
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/list")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}),
        );
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if status == 200 {
        Ok(body)
    } else {
        Err(format!("{status}: {body}"))
    }
}

/// As another local user (nobody): read the token file, then call `url` without a token.
/// Prints `READ` or `UNREADABLE`, then the HTTP status.
const OTHER_USER: &str = r#"
import sys, http.client
try:
    open(sys.argv[1]).read()
    print("READ")
except OSError:
    print("UNREADABLE")
c = http.client.HTTPConnection(sys.argv[2], int(sys.argv[3]), timeout=20)
headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}
if sys.argv[4] == "GET":
    c.request("GET", "/", headers=headers)
else:
    c.request("POST", sys.argv[5], body='{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}', headers=headers)
print(c.getresponse().status)
"#;

async fn as_nobody(args: &[&str]) -> Vec<String> {
    let out = tokio::time::timeout(
        READ_DEADLINE,
        tokio::process::Command::new("runuser")
            .args(["-u", "nobody", "--", "/usr/bin/python3", "-c", OTHER_USER])
            .args(args)
            .current_dir("/")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("deadline")
    .expect("runuser");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn second_uid_available() -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("note: not root; the second-user test needs runuser and is skipped");
        return false;
    }
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("note: no /usr/bin/python3 for the second user; skipped");
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_user_cannot_drive_the_listeners() {
    if !second_uid_available() {
        return;
    }
    let env = AppEnv::new().await;
    let server =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://127.0.0.1:0"])).expect("spawn");
    let addr: SocketAddr = wait_for_stderr(&server, "listening on ws://")
        .await
        .parse()
        .expect("addr");
    let token_file = wait_for_stderr(&server, "capability token file: ").await;
    let seen = as_nobody(&[
        token_file.trim(),
        "127.0.0.1",
        &addr.port().to_string(),
        "GET",
    ])
    .await;
    assert_eq!(seen, ["UNREADABLE", "401"]);

    let mcp = McpEnv::new().await;
    let server = mcp.spawn_with_args(&["--listen", "http://127.0.0.1:0/mcp"]);
    server.wait_for_stderr("listening on http://").await;
    let stderr = server.process.stderr();
    let url = stderr
        .lines()
        .find_map(|l| l.strip_prefix("listening on "))
        .expect("url")
        .trim()
        .to_string();
    let token_file = stderr
        .lines()
        .find_map(|l| l.strip_prefix("bearer token file: "))
        .expect("token file")
        .trim()
        .to_string();
    let addr: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("addr");
    let seen = as_nobody(&[
        &token_file,
        "127.0.0.1",
        &addr.port().to_string(),
        "POST",
        "/mcp",
    ])
    .await;
    assert_eq!(seen, ["UNREADABLE", "401"]);
}
