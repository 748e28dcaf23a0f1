//! Transports: newline-delimited JSON on stdio, and WebSocket (one JSON-RPC message per
//! text frame) over TCP or a Unix socket. They move messages between a client and the
//! [`MessageProcessor`]; nothing else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use interpreter_transport::access::{self, HostPolicy};
use interpreter_transport::jsonrpc::{self, Unservable};
use interpreter_transport::lines::{BoundedLines, Line};
use interpreter_transport::listener;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
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
    #[error("{0}: use the capability token (--ws-token-file PATH, or the default file)")]
    NoAuthOffLoopback(#[from] access::NoAuthOffLoopback),
    #[error(transparent)]
    Listener(#[from] listener::ListenerError),
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
    let mut lines = BoundedLines::new(tokio::io::BufReader::new(tokio::io::stdin()));
    loop {
        let line = tokio::select! {
            line = lines.next() => line,
            () = stop.cancelled() => break,
        };
        match line {
            Ok(Some(Line::Message(bytes))) => match jsonrpc::decode(&bytes) {
                Ok(value) => processor.handle_incoming(&connection, value),
                Err(unservable) => processor.handle_unservable(&connection, &unservable),
            },
            Ok(Some(Line::TooLong)) => {
                tracing::warn!("refusing a message longer than the line bound");
                processor.handle_unservable(&connection, &Unservable::TooLong);
            }
            Ok(None) => break,
            Err(err) => {
                tracing::warn!("reading stdin failed: {err}");
                break;
            }
        }
    }
    processor.disconnect(&connection);
    // Give queued responses a moment to reach stdout; the writer ends when every sender
    // (connection and in-flight handlers) is gone.
    drop(connection);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

#[derive(Clone)]
struct WsState {
    processor: MessageProcessor,
    /// `Some` = clients must send `Authorization: Bearer <token>`.
    token: Option<Arc<String>>,
    /// Which `Host` and `Origin` headers are served.
    hosts: Arc<HostPolicy>,
    stop: CancellationToken,
}

fn router(state: WsState) -> Router {
    Router::new()
        .route("/", get(upgrade))
        .merge(listener::probe_routes("/"))
        .merge(listener::metrics_route(
            state.token.clone(),
            state.hosts.clone(),
        ))
        .with_state(state)
}

async fn upgrade(
    State(state): State<WsState>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // Browsers always send Origin; a page must not drive the agent.
    if let Err(refusal) = state.hosts.check(&headers) {
        return (StatusCode::FORBIDDEN, refusal.to_string()).into_response();
    }
    if let Some(token) = &state.token
        && !access::bearer_matches(&headers, token)
    {
        return (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
    }
    // One message is bounded as one stdio line is.
    ws.max_message_size(interpreter_transport::lines::MAX_LINE_BYTES)
        .on_upgrade(move |socket| serve_socket(state, socket))
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
            Some(Ok(Message::Text(text))) => match jsonrpc::decode(text.as_bytes()) {
                Ok(value) => state.processor.handle_incoming(&connection, value),
                Err(unservable) => state.processor.handle_unservable(&connection, &unservable),
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

/// Who a WebSocket listener on TCP lets in.
#[derive(Debug, Clone, Default)]
pub struct WsAccess {
    /// `None` (`--no-auth`): no token; refused off loopback.
    pub token: Option<String>,
    /// `--allow-host`: names accepted in `Host` besides `localhost` and IP addresses.
    pub allow_hosts: Vec<String>,
}

/// Serve WebSocket clients on `addr` until `stop` fires. `on_listening` gets the bound
/// address (port 0 picks one).
pub async fn serve_ws(
    processor: MessageProcessor,
    addr: SocketAddr,
    WsAccess { token, allow_hosts }: WsAccess,
    stop: CancellationToken,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), TransportError> {
    access::require_auth_off_loopback(addr, token.is_some())?;
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
        hosts: Arc::new(HostPolicy::new(local, &allow_hosts, &[])),
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
        hosts: Arc::new(HostPolicy::unix_socket()),
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
}
