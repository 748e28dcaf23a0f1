//! Streamable HTTP: rmcp's [`StreamableHttpService`] (both eras on one endpoint: legacy
//! sessions with `Mcp-Session-Id`, SSE streams and DELETE; stateless 2026-07-28 requests)
//! mounted in axum behind our bearer-token layer.
//!
//! Defences, all on by default:
//! * a bearer token (`Authorization: Bearer …`), kept in a file of mode 0600 whose path is
//!   printed at start; only `--no-auth` on a loopback address turns it off;
//! * `Host` validation against the addresses we listen on (DNS rebinding), and `Origin`
//!   validation: a request carrying an `Origin` header is refused unless that origin was
//!   allowed with `--allow-origin`;
//! * SSE keep-alives, and a closed request stream cancels its turn (the 2026 rule; rmcp
//!   cancels the request's token, and a waiting `codex` call interrupts its turn).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::handler::AgentServer;
use crate::mrtr::RequestStates;
use crate::turns::Registry;

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct HttpListen {
    pub addr: SocketAddr,
    /// The endpoint path, e.g. `/mcp`.
    pub path: String,
}

impl HttpListen {
    /// Parse `http://IP:PORT/PATH` (port 0 picks a free one; the path defaults to `/mcp`).
    pub fn parse(url: &str) -> Result<Self, HttpError> {
        let bad = || HttpError::BadListen(url.to_string());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/mcp"),
        };
        let authority = if authority.starts_with("localhost:") {
            authority.replacen("localhost", "127.0.0.1", 1)
        } else {
            authority.to_string()
        };
        let addr: SocketAddr = authority.parse().map_err(|_| bad())?;
        let path = if path.is_empty() || path == "/" {
            "/mcp".to_string()
        } else {
            path.trim_end_matches('/').to_string()
        };
        Ok(Self { addr, path })
    }
}

/// Who may call.
#[derive(Debug, Clone)]
pub enum HttpAuth {
    /// Requests need this bearer token.
    Token(String),
    /// No token (loopback only).
    None,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on `{0}`: expected http://IP:PORT/PATH, e.g. http://127.0.0.1:8765/mcp")]
    BadListen(String),
    #[error(
        "--no-auth is only allowed on a loopback address; {0} is reachable from other machines"
    )]
    NoAuthOffLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("token file {path}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("HTTP server stopped: {0}")]
    Serve(std::io::Error),
}

/// Read the token from `path`, or create the file with a fresh token (mode 0600).
/// An existing file that others can read is refused: the token would not be a secret.
pub fn load_or_create_token(path: &Path) -> Result<String, HttpError> {
    let err = |reason: String| HttpError::TokenFile {
        path: path.to_path_buf(),
        reason,
    };
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(err(
                "is readable by other users; run `chmod 600` on it or delete it to get a new token"
                    .to_string(),
            ));
        }
        let token = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let token = token.trim().to_string();
        if token.len() >= 16 {
            return Ok(token);
        }
        return Err(err("holds no token of at least 16 characters".to_string()));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| err(e.to_string()))?;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| err(e.to_string()))?;
    }
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| err(e.to_string()))?;
    file.write_all(token.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .map_err(|e| err(e.to_string()))?;
    Ok(token)
}

/// Compare without an early exit, so timing does not leak how much of a guess matched.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn require_token(State(token): State<Arc<String>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(presented) if same_secret(presented.as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        _ => (
            http::StatusCode::UNAUTHORIZED,
            [(http::header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required: send `Authorization: Bearer <token>` with the token from the file `interpreter mcp-server` printed at start\n",
        )
            .into_response(),
    }
}

/// Serve MCP over streamable HTTP until `shutdown` fires. Calls `ready` with the bound
/// address once accepting.
pub async fn serve(
    listen: HttpListen,
    auth: HttpAuth,
    allowed_origins: Vec<String>,
    registry: Arc<Registry>,
    states: Arc<RequestStates>,
    shutdown: CancellationToken,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), HttpError> {
    if matches!(auth, HttpAuth::None) && !listen.addr.ip().is_loopback() {
        return Err(HttpError::NoAuthOffLoopback(listen.addr));
    }
    let listener = tokio::net::TcpListener::bind(listen.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: listen.addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| HttpError::Bind {
        addr: listen.addr,
        source,
    })?;
    let mut allowed_hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "[::1]".to_string(),
    ];
    allowed_hosts.push(bound.ip().to_string());
    allowed_hosts.push(bound.to_string());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_allowed_origins(allowed_origins)
        .enforce_origin_validation()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(AgentServer::new(registry.clone(), states.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new().route_service(&listen.path, service);
    if let HttpAuth::Token(token) = auth {
        router = router.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            require_token,
        ));
    }
    ready(bound);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(HttpError::Serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls_parse() {
        let l = HttpListen::parse("http://127.0.0.1:8765/mcp").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.addr.port(), 8765);
        assert_eq!(l.path, "/mcp");
        let l = HttpListen::parse("http://localhost:0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.path, "/mcp");
        assert!(l.addr.ip().is_loopback());
        let l = HttpListen::parse("http://[::1]:9/x/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.path, "/x");
        assert!(HttpListen::parse("https://127.0.0.1:1/mcp").is_err());
        assert!(HttpListen::parse("http://example.com:80/mcp").is_err());
    }

    #[test]
    fn tokens_are_created_private_and_reused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sub/token");
        let first = load_or_create_token(&path).unwrap_or_else(|e| panic!("{e}"));
        let again = load_or_create_token(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first, again);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_default();
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(load_or_create_token(&path).is_err());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"ab"));
    }
}
