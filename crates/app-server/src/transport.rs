//! Transports: newline-delimited JSON on stdio, and WebSocket (one JSON-RPC message per
//! text frame) over TCP or a Unix socket. They move messages between a client and the
//! [`MessageProcessor`]; nothing else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::processor::MessageProcessor;

/// Where the server listens (`--listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Stdio,
    WebSocket(SocketAddr),
    Unix(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("unsupported listen URL `{0}`: expected stdio://, ws://IP:PORT or unix://[PATH]")]
    UnsupportedUrl(String),
    #[error("expected `ws://IP:PORT`, got `{0}`")]
    BadWsAddress(String),
    #[error(
        "listening on non-loopback address {0} requires a capability token: pass --ws-token-file PATH"
    )]
    TokenRequired(SocketAddr),
    #[error("token file {}: {message}", path.display())]
    TokenFile { path: PathBuf, message: String },
    #[error("failed to {action} {what}: {source}")]
    Io {
        action: &'static str,
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Default Unix socket under the home.
pub fn default_socket_path(home: &Path) -> PathBuf {
    home.join("app-server-control")
        .join("app-server-control.sock")
}

impl Listen {
    pub fn parse(url: &str, home: &Path, cwd: &Path) -> Result<Self, TransportError> {
        if url == "stdio://" || url == "stdio" {
            return Ok(Self::Stdio);
        }
        if let Some(addr) = url.strip_prefix("ws://") {
            let addr = addr.trim_end_matches('/');
            return addr
                .parse::<SocketAddr>()
                .map(Self::WebSocket)
                .map_err(|_| TransportError::BadWsAddress(url.to_string()));
        }
        if let Some(path) = url.strip_prefix("unix://") {
            return Ok(Self::Unix(if path.is_empty() {
                default_socket_path(home)
            } else {
                cwd.join(path)
            }));
        }
        Err(TransportError::UnsupportedUrl(url.to_string()))
    }
}

/// Serve one client on stdin/stdout until stdin closes or `stop` fires.
pub async fn serve_stdio(processor: &MessageProcessor, stop: CancellationToken) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let connection = processor.connect(Arc::new(tx));
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(message) = rx.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let mut lines = StdioLines::new(tokio::io::BufReader::new(tokio::io::stdin()));
    loop {
        let line = tokio::select! {
            line = lines.next_message() => line,
            () = stop.cancelled() => break,
        };
        match line {
            Some(Ok(value)) => processor.handle_incoming(&connection, value),
            Some(Err(err)) => processor.handle_unparsable(&connection, &err),
            None => break,
        }
    }
    processor.disconnect(&connection);
    // Give queued responses a moment to reach stdout; the writer ends when every sender
    // (connection and in-flight handlers) is gone.
    drop(connection);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

/// The stdio framing: one JSON value per line (`\n`-terminated, a trailing `\r` and
/// surrounding whitespace ignored), blank lines skipped.
pub struct StdioLines<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> StdioLines<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }

    /// The next message, or why its line is not JSON (the client gets a parse error and
    /// the connection goes on; a line that is not UTF-8 is such a line, not the end of
    /// the input). `None` at the end of input or when reading fails (logged). Cancel safe:
    /// a partly read line stays buffered for the next call.
    pub async fn next_message(&mut self) -> Option<Result<Value, String>> {
        loop {
            match self.reader.read_until(b'\n', &mut self.line).await {
                Ok(0) if self.line.is_empty() => return None,
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!("reading stdin failed: {err}");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            if line.trim_ascii().is_empty() {
                continue;
            }
            return Some(serde_json::from_slice::<Value>(&line).map_err(|err| err.to_string()));
        }
    }
}

#[derive(Clone)]
struct WsState {
    processor: MessageProcessor,
    /// `Some` = clients must send `Authorization: Bearer <token>`.
    token: Option<Arc<String>>,
    stop: CancellationToken,
}

fn router(state: WsState) -> Router {
    Router::new()
        .route("/", get(upgrade))
        .route("/readyz", get(|| async { StatusCode::OK }))
        .route("/healthz", get(health))
        .with_state(state)
}

async fn health(headers: HeaderMap) -> StatusCode {
    if headers.contains_key(header::ORIGIN) {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::OK
    }
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from timing.
fn same_token(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn upgrade(
    State(state): State<WsState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // Browsers always send Origin; a page must not drive the agent.
    if headers.contains_key(header::ORIGIN) {
        return (
            StatusCode::FORBIDDEN,
            "requests with an Origin header are refused",
        )
            .into_response();
    }
    if let Some(token) = &state.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same_token(given, token) {
            return (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
        }
    }
    ws.on_upgrade(move |socket| serve_socket(state, socket))
}

async fn serve_socket(state: WsState, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let connection = state.processor.connect(Arc::new(tx));
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            if sink
                .send(Message::Text(message.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let frame = tokio::select! {
            frame = stream.next() => frame,
            () = state.stop.cancelled() => break,
            () = connection.closed.cancelled() => break,
        };
        match frame {
            Some(Ok(Message::Text(text))) => match serde_json::from_str::<Value>(&text) {
                Ok(value) => state.processor.handle_incoming(&connection, value),
                Err(err) => state
                    .processor
                    .handle_unparsable(&connection, &err.to_string()),
            },
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
            // Binary frames carry no JSON-RPC; pings are answered by the library.
            Some(Ok(_)) => {}
        }
    }
    state.processor.disconnect(&connection);
    drop(connection);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

/// Serve WebSocket clients on `addr` until `stop` fires. `on_listening` gets the bound
/// address (port 0 picks one).
pub async fn serve_ws(
    processor: MessageProcessor,
    addr: SocketAddr,
    token: Option<String>,
    stop: CancellationToken,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), TransportError> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(TransportError::TokenRequired(addr));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| TransportError::Io {
            action: "listen on",
            what: addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| TransportError::Io {
        action: "read the address of",
        what: addr.to_string(),
        source,
    })?;
    on_listening(local);
    let state = WsState {
        processor,
        token: token.map(Arc::new),
        stop: stop.clone(),
    };
    axum::serve(listener, router(state))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|source| TransportError::Io {
            action: "serve",
            what: local.to_string(),
            source,
        })
}

/// Serve WebSocket clients on a Unix socket (mode 0600) until `stop` fires.
pub async fn serve_unix(
    processor: MessageProcessor,
    path: PathBuf,
    stop: CancellationToken,
    on_listening: impl FnOnce(&Path),
) -> Result<(), TransportError> {
    let io = |action: &'static str, source: std::io::Error| TransportError::Io {
        action,
        what: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
    }
    // A socket left by a server that died is stale; anything else is not ours to delete.
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        use std::os::unix::fs::FileTypeExt as _;
        if meta.file_type().is_socket() {
            std::fs::remove_file(&path).map_err(|e| io("remove the stale socket", e))?;
        }
    }
    let listener = tokio::net::UnixListener::bind(&path).map_err(|e| io("listen on", e))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io("restrict", e))?;
    }
    on_listening(&path);
    let state = WsState {
        processor,
        // The file mode is the access control: only this user can connect.
        token: None,
        stop: stop.clone(),
    };
    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|e| io("serve", e));
    let _ = std::fs::remove_file(&path);
    served
}

/// The capability token in `path`: read when the file exists (it must not be readable by
/// group or others), else created with a fresh random token and mode 0600.
pub fn load_or_create_token(path: &Path) -> Result<String, TransportError> {
    let fail = |message: String| TransportError::TokenFile {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(path)
                .map_err(|e| fail(e.to_string()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(fail(format!(
                    "mode {:o} lets other users read it; chmod 600 it",
                    mode & 0o777
                )));
            }
            let token = text.trim().to_string();
            if token.len() < 16 {
                return Err(fail("the token must be at least 16 characters".into()));
            }
            Ok(token)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| fail(e.to_string()))?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
            }
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            let mut file = options.open(path).map_err(|e| fail(e.to_string()))?;
            std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())
                .map_err(|e| fail(e.to_string()))?;
            Ok(token)
        }
        Err(err) => Err(fail(err.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdio_lines_skip_blanks_and_survive_lines_that_are_not_json_or_not_utf8() {
        let input: &[u8] =
            b"\n  \r\n\xff\xfe\n{\"id\": 1, \"method\": \"a\"}\r\nnot json\n{\"id\": 2, \"method\": \"b\"}";
        let mut lines = StdioLines::new(input);
        let mut got = Vec::new();
        while let Some(message) = lines.next_message().await {
            got.push(message.map(|value| value["id"].clone()).is_ok());
        }
        // Before, the bytes that are not UTF-8 ended the input and nothing after them was read.
        assert_eq!(got, vec![false, true, false, true]);
    }

    #[test]
    fn listen_urls() {
        let home = Path::new("/h");
        let cwd = Path::new("/w");
        assert_eq!(
            Listen::parse("stdio://", home, cwd).ok(),
            Some(Listen::Stdio)
        );
        assert_eq!(
            Listen::parse("ws://127.0.0.1:4500", home, cwd).ok(),
            Some(Listen::WebSocket(([127, 0, 0, 1], 4500).into()))
        );
        assert_eq!(
            Listen::parse("unix://", home, cwd).ok(),
            Some(Listen::Unix(default_socket_path(home)))
        );
        assert_eq!(
            Listen::parse("unix://s.sock", home, cwd).ok(),
            Some(Listen::Unix(PathBuf::from("/w/s.sock")))
        );
        assert!(Listen::parse("ws://localhost", home, cwd).is_err());
        assert!(Listen::parse("http://127.0.0.1:1", home, cwd).is_err());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abcdef", "abcdef"));
        assert!(!same_token("abcdeg", "abcdef"));
        assert!(!same_token("abc", "abcdef"));
        assert!(!same_token("", "abcdef"));
    }

    #[test]
    fn token_files_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t");
        let token = load_or_create_token(&path).expect("create");
        assert_eq!(token.len(), 64);
        assert_eq!(load_or_create_token(&path).expect("read"), token);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(load_or_create_token(&path).is_err());
    }
}
