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

use crate::listener;
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
        "--no-auth is only allowed on a loopback address; {0} is reachable from other machines: use the capability token (--ws-token-file PATH, or the default file)"
    )]
    NoAuthOffLoopback(SocketAddr),
    #[error(transparent)]
    Listener(#[from] crate::listener::ListenerError),
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
        .merge(listener::probe_routes("/"))
        .with_state(state)
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
/// address (port 0 picks one). `token: None` (`--no-auth`) is refused off loopback.
pub async fn serve_ws(
    processor: MessageProcessor,
    addr: SocketAddr,
    token: Option<String>,
    stop: CancellationToken,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), TransportError> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(TransportError::NoAuthOffLoopback(addr));
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
    listener::serve(listener::Acceptor::Tcp(listener), router(state), stop)
        .await
        .map_err(|source| TransportError::Io {
            action: "serve",
            what: local.to_string(),
            source,
        })
}

/// Serve WebSocket clients on a Unix socket until `stop` fires. The socket (mode 0600, in
/// a private directory) is its access control, with peer checks on accept: only this uid,
/// in this PID namespace (so not the agent's own sandboxed commands). A live server's
/// socket is never taken over.
pub async fn serve_unix(
    processor: MessageProcessor,
    path: PathBuf,
    stop: CancellationToken,
    on_listening: impl FnOnce(&Path),
) -> Result<(), TransportError> {
    let socket = listener::PrivateUnixListener::bind(&path).await?;
    on_listening(socket.path());
    let state = WsState {
        processor,
        token: None,
        stop: stop.clone(),
    };
    // Dropping the listener (inside `serve`) removes the socket file it created.
    listener::serve(listener::Acceptor::Unix(socket), router(state), stop)
        .await
        .map_err(|source| TransportError::Io {
            action: "serve",
            what: path.display().to_string(),
            source,
        })
}

/// The capability token in `path`: read when the file exists (owned by this uid, not
/// readable or writable by group or others), else created with a fresh random token and
/// mode 0600.
pub fn load_or_create_token(path: &Path) -> Result<String, TransportError> {
    Ok(listener::load_or_create_token(path, |bytes| {
        listener::hex(bytes)
    })?)
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
}
