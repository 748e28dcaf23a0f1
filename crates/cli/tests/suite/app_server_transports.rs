//! `interpreter app-server` over WebSocket (TCP) and WebSocket over a Unix socket: the
//! same protocol, one message per text frame; the capability token on every listener
//! unless `--no-auth` (loopback only); the socket file's mode, a live socket never taken
//! over, and the socket refusing the agent's own sandboxed commands.

use crate::app_server_support;

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE, trace, wait_for_stderr};
use interpreter_test_support::process::JsonLinesProcess;
use pretty_assertions::assert_eq;
use serde_json::json;

/// A 64 MiB line gets a JSON-RPC error (`-32600`, `id: null`), the server goes on
/// serving, and its peak memory grows by less than the line: the line is dropped as it
/// arrives past the 16 MiB bound, never held whole (measured before: 143 MiB on
/// app-server, 140 MiB on ACP). The same bound and answer on every stdio server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_line_on_stdio_is_refused_with_bounded_memory() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let app_server_support::Wire::Stdio(process) = &mut client.wire else {
        panic!("a stdio client");
    };
    let (answer, grew_kib) = process
        .huge_line_answer(64 * 1024 * 1024, READ_DEADLINE)
        .await
        .expect("an answer to the huge line");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], serde_json::Value::Null, "{answer}");
    assert!(grew_kib < 48 * 1024, "peak memory grew by {grew_kib} KiB");
    let listed = client.call("thread/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
}

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

/// The WebSocket upgrade at `url` with `token` (or none) must be refused with 401.
async fn upgrade_is_unauthorized(url: &str, token: Option<&str>) {
    upgrade_is_refused(url, token, &[], 401).await;
}

/// The WebSocket upgrade at `url` with `token` and `headers` must be refused with `status`.
async fn upgrade_is_refused(url: &str, token: Option<&str>, headers: &[(&str, &str)], status: u16) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut request = url.into_client_request().expect("request");
    if let Some(token) = token {
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
    }
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(axum_header_name(name), value.parse().expect("header value"));
    }
    let result = tokio::time::timeout(READ_DEADLINE, tokio_tungstenite::connect_async(request))
        .await
        .expect("deadline");
    match result {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), status, "{headers:?}");
        }
        other => panic!("expected {status}, got {other:?}"),
    }
}

fn axum_header_name(name: &str) -> tokio_tungstenite::tungstenite::http::HeaderName {
    tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).expect("name")
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
    let live = http
        .get(format!("http://{addr}/livez"))
        .send()
        .await
        .expect("livez");
    assert_eq!(live.status().as_u16(), 200);
    let browser = http
        .get(format!("http://{addr}/healthz"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("healthz");
    assert_eq!(browser.status().as_u16(), 403);
    // Loopback needs the token too: other local users reach loopback.
    let token_file = env.home.path().join("app-server-ws.token");
    assert_eq!(
        wait_for_stderr(&server, "capability token file: ").await,
        token_file.display().to_string()
    );
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_string();
    // `/metrics`: Prometheus text, behind the same token and Host policy.
    let metrics_url = format!("http://{addr}/metrics");
    let without = http.get(&metrics_url).send().await.expect("metrics");
    assert_eq!(without.status().as_u16(), 401);
    let rebound = http
        .get(&metrics_url)
        .bearer_auth(&token)
        .header("host", "rebound.example:80")
        .send()
        .await
        .expect("metrics");
    assert_eq!(rebound.status().as_u16(), 403);
    let metrics = http
        .get(&metrics_url)
        .bearer_auth(&token)
        .send()
        .await
        .expect("metrics");
    assert_eq!(metrics.status().as_u16(), 200);
    assert!(
        metrics
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/plain; version=0.0.4"))
    );
    let text = metrics.text().await.expect("metrics text");
    assert!(text.contains("target_info"), "{text}");
    let url = format!("ws://{addr}/");
    upgrade_is_unauthorized(&url, None).await;
    upgrade_is_unauthorized(&url, Some("not-the-token-at-all")).await;
    // DNS rebinding: a page on a name rebound to loopback sends its own name as Host;
    // a page's Origin is refused even with the token.
    upgrade_is_refused(&url, Some(&token), &[("host", "rebound.example:80")], 403).await;
    upgrade_is_refused(
        &url,
        Some(&token),
        &[("origin", "http://evil.example")],
        403,
    )
    .await;
    let mut client = AppClient::connect_ws(server, &url, Some(&token)).await;
    run_a_turn(&mut client, &env).await;
}

/// `--allow-host` adds a name to those the WebSocket listener answers to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_host_name_is_served_and_others_are_not() {
    let env = AppEnv::new().await;
    let server = JsonLinesProcess::spawn(env.command(&[
        "--listen",
        "ws://127.0.0.1:0",
        "--no-auth",
        "--allow-host",
        "devbox.lan",
    ]))
    .expect("spawn");
    let addr = wait_for_stderr(&server, "listening on ws://").await;
    let url = format!("ws://{addr}/");
    upgrade_is_refused(&url, None, &[("host", "other.lan")], 403).await;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut request = url.as_str().into_client_request().expect("request");
    request.headers_mut().insert(
        "host",
        format!("devbox.lan:{}", addr.rsplit(':').next().unwrap_or("0"))
            .parse()
            .expect("host"),
    );
    let connected = tokio::time::timeout(READ_DEADLINE, tokio_tungstenite::connect_async(request))
        .await
        .expect("deadline");
    assert!(connected.is_ok(), "{connected:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_is_explicit_and_loopback_only() {
    let env = AppEnv::new().await;
    let mut refused =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://0.0.0.0:0", "--no-auth"]))
            .expect("spawn");
    let status = refused.wait_exit(READ_DEADLINE).await.expect("exit");
    assert!(!status.success());
    wait_for_stderr(&refused, "--no-auth is only allowed on a loopback address").await;
    let server =
        JsonLinesProcess::spawn(env.command(&["--listen", "ws://127.0.0.1:0", "--no-auth"]))
            .expect("spawn");
    let addr = wait_for_stderr(&server, "listening on ws://").await;
    let mut client = AppClient::connect_ws(server, &format!("ws://{addr}/"), None).await;
    client.initialize().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_loopback_websocket_requires_the_token() {
    let env = AppEnv::new().await;
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
    upgrade_is_unauthorized(&url, None).await;
    upgrade_is_unauthorized(&url, Some("not-the-token-at-all")).await;
    let mut client = AppClient::connect_ws(server, &url, Some(&token)).await;
    run_a_turn(&mut client, &env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_files_of_others_or_open_to_others_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = AppEnv::new().await;
    let token_file = env.home.path().join("ws.token");
    std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").expect("write");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let args = [
        "--listen",
        "ws://127.0.0.1:0",
        "--ws-token-file",
        token_file.to_str().unwrap(),
    ];
    let mut refused = JsonLinesProcess::spawn(env.command(&args)).expect("spawn");
    assert!(
        !refused
            .wait_exit(READ_DEADLINE)
            .await
            .expect("exit")
            .success()
    );
    // Read once the whole line is there: stderr is collected as the process writes it.
    let line = wait_for_stderr(&refused, "token file ").await;
    assert!(line.contains(&token_file.display().to_string()), "{line}");
    assert!(line.contains("0640"), "{line}");
    assert!(line.contains("chmod 600"), "{line}");
    if !rustix::process::geteuid().is_root() {
        eprintln!("note: not root, so the token file owned by another user is not tried");
        return;
    }
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // nobody's file: whoever owns it chooses the token.
    rustix::fs::chown(
        &token_file,
        Some(rustix::process::Uid::from_raw(65534)),
        None,
    )
    .expect("chown");
    let mut refused = JsonLinesProcess::spawn(env.command(&args)).expect("spawn");
    assert!(
        !refused
            .wait_exit(READ_DEADLINE)
            .await
            .expect("exit")
            .success()
    );
    let line = wait_for_stderr(&refused, "token file ").await;
    assert!(line.contains(&token_file.display().to_string()), "{line}");
    assert!(line.contains("owned by uid 65534"), "{line}");
    assert!(line.contains("chmod 600"), "{line}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_socket_is_never_taken_over() {
    let env = AppEnv::new().await;
    let socket = env.home.path().join("control").join("app.sock");
    let url = format!("unix://{}", socket.display());
    let server = JsonLinesProcess::spawn(env.command(&["--listen", &url])).expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    let mut second = JsonLinesProcess::spawn(env.command(&["--listen", &url])).expect("spawn");
    assert!(
        !second
            .wait_exit(READ_DEADLINE)
            .await
            .expect("exit")
            .success()
    );
    wait_for_stderr(&second, "another server is listening on").await;
    // The first server still owns the path and serves.
    let mut client = AppClient::connect_unix(server, &socket).await;
    client.initialize().await;
    // Something that is not a socket is never removed.
    let file = env.home.path().join("not-a-socket");
    std::fs::write(&file, "keep").expect("write");
    let mut refused =
        JsonLinesProcess::spawn(env.command(&["--listen", &format!("unix://{}", file.display())]))
            .expect("spawn");
    assert!(
        !refused
            .wait_exit(READ_DEADLINE)
            .await
            .expect("exit")
            .success()
    );
    wait_for_stderr(&refused, "not a socket").await;
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), "keep");
}

/// Connects to the socket in argv[1], sends a WebSocket upgrade and `initialize`, and
/// prints `ANSWERED <bytes>` or `CLOSED` (end of stream or reset), bounded by a timeout.
const SOCKET_PROBE: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
try:
    s.connect(sys.argv[1])
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    data = s.recv(4096)
except (ConnectionResetError, BrokenPipeError):
    data = b""
except socket.timeout:
    print("TIMEOUT")
    sys.exit(0)
print("ANSWERED " + data.decode(errors="replace") if data else "CLOSED")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxed_commands_cannot_use_the_socket() {
    let env = AppEnv::new().await;
    let check = tokio::time::timeout(
        READ_DEADLINE,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["sandbox", "check", "--json"])
            .env("INTERPRETER_HOME", env.home.path())
            .output(),
    )
    .await
    .expect("deadline")
    .expect("sandbox check");
    let support: serde_json::Value =
        serde_json::from_slice(&check.stdout).expect("sandbox check --json");
    if support["pid_namespace"] != json!(true) || support["supported"] != json!(true) {
        eprintln!("note: no sandbox with a PID namespace on this machine; skipping");
        return;
    }
    let socket = env.home.path().join("control").join("app.sock");
    let server = JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    let work = env.work_path();
    let probe = |sandboxed: bool| {
        let mut command = if sandboxed {
            let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
            c.args([
                "sandbox",
                "linux",
                "--policy-json",
                r#"{"type":"workspace-write","network_access":true}"#,
                "--cwd",
                work.to_str().unwrap(),
                "--",
                "python3",
            ]);
            c
        } else {
            tokio::process::Command::new("python3")
        };
        command
            .args(["-c", SOCKET_PROBE, socket.to_str().unwrap()])
            .current_dir(&work)
            .env("INTERPRETER_HOME", env.home.path())
            .kill_on_drop(true);
        command
    };
    let run = |mut command: tokio::process::Command| async move {
        let out = tokio::time::timeout(READ_DEADLINE, command.output())
            .await
            .expect("deadline")
            .expect("probe");
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // From inside the sandbox (same uid, another PID namespace): closed, no answer.
    let (stdout, stderr) = run(probe(true)).await;
    assert_eq!(stdout.trim(), "CLOSED", "stderr: {stderr}");
    wait_for_stderr(&server, "another PID namespace").await;
    // The same probe outside the sandbox gets the upgrade.
    let (stdout, stderr) = run(probe(false)).await;
    assert!(
        stdout.starts_with("ANSWERED HTTP/1.1 101"),
        "{stdout} {stderr}"
    );
    let mut client = AppClient::connect_unix(server, &socket).await;
    client.initialize().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_uid_is_refused_on_the_socket_even_when_its_mode_allows() {
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("note: needs root (runuser) and /usr/bin/python3; skipped");
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let env = AppEnv::new().await;
    // A directory the other user can traverse, so only the socket's checks stand.
    let dir = tempfile::TempDir::new().expect("dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let socket = dir.path().join("app.sock");
    let server = JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    let probe = |socket: &std::path::Path| {
        let mut command = tokio::process::Command::new("runuser");
        command
            .args(["-u", "nobody", "--", "/usr/bin/python3", "-c", SOCKET_PROBE])
            .arg(socket)
            .current_dir("/")
            .kill_on_drop(true);
        command
    };
    // The socket's mode (0600) keeps the other user out.
    let out = tokio::time::timeout(READ_DEADLINE, probe(&socket).output())
        .await
        .expect("deadline")
        .expect("runuser");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PermissionError"),
        "{out:?}"
    );
    // Loosen the mode by hand: the peer check still refuses the other uid.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = tokio::time::timeout(READ_DEADLINE, probe(&socket).output())
        .await
        .expect("deadline")
        .expect("runuser");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "CLOSED",
        "{out:?}"
    );
    wait_for_stderr(&server, "peer runs as uid 65534").await;
    let mut client = AppClient::connect_unix(server, &socket).await;
    client.initialize().await;
}
