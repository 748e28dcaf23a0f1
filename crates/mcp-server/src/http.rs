//! Streamable HTTP: rmcp's [`StreamableHttpService`] (both eras on one endpoint: legacy
//! sessions with `Mcp-Session-Id`, SSE streams and DELETE; stateless 2026-07-28 requests)
//! mounted in axum behind our bearer-token layer.
//!
//! Defences, all on by default:
//! * a bearer token (`Authorization: Bearer …`), kept in a file of mode 0600 owned by this
//!   user, whose path is printed at start; only `--no-auth` on a loopback address turns it
//!   off. A request another fleet replica forwarded carries a signature under the fleet's
//!   replica key instead ([`crate::replica_auth`]), checked whatever the token setting;
//! * `Host` and `Origin` validation, the policy every listener applies
//!   ([`HostPolicy`]: this machine's loopback names, the listen address and
//!   `--allow-host`; the server's own origin and `--allow-origin`);
//! * a header-read timeout, a cap on open connections and a raised fd limit (the shared
//!   accept loop in `interpreter_transport::listener`);
//! * SSE keep-alives, and a closed request stream cancels its turn (the 2026 rule; rmcp
//!   cancels the request's token, and a waiting `codex` call interrupts its turn);
//! * bounded POST bodies, no priming events for clients older than 2025-11-25, and an
//!   unreadable answer settling its request at once ([`crate::http_filters`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use interpreter_transport::access::{self, HostPolicy};
use interpreter_transport::listener;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::handler::AgentServer;
use crate::http_filters;
use crate::mrtr::RequestStates;
use crate::replica_auth::{Refusal, ReplicaKeys, ReplicaVerifier, SIGNATURE_HEADER};
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
pub(crate) enum HttpAuth {
    /// Requests need this bearer token.
    Token(String),
    /// No token (loopback only).
    None,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on `{0}`: expected http://IP:PORT/PATH, e.g. http://127.0.0.1:8765/mcp")]
    BadListen(String),
    #[error(transparent)]
    NoAuthOffLoopback(#[from] access::NoAuthOffLoopback),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("token file {}: {reason}", path.display())]
    TokenFile { path: PathBuf, reason: String },
    #[error("HTTP server stopped: {0}")]
    Serve(std::io::Error),
}

/// Read the token from `path`, or create the file with a fresh token (mode 0600).
/// An existing file owned by another user (who would choose the token), or that group or
/// others can read or write (the token would not be a secret), is refused.
pub(crate) fn load_or_create_token(path: &Path) -> Result<String, HttpError> {
    listener::load_or_create_token(path, |bytes| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    })
    .map_err(|err| match err {
        listener::ListenerError::TokenFile { path, message } => HttpError::TokenFile {
            path,
            reason: message,
        },
        other => HttpError::TokenFile {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    })
}

/// rmcp answers a session `DELETE` with 202; clients (the Python SDK among them) expect
/// 200 or 204 and log a failed termination otherwise. The session is closed either way.
async fn delete_answers_no_content(request: Request, next: Next) -> Response {
    let is_delete = request.method() == http::Method::DELETE;
    let mut response = next.run(request).await;
    if is_delete && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::NO_CONTENT;
    }
    response
}

/// Who the listener lets in: callers with the token (or anyone, with `--no-auth`), and
/// requests other replicas forwarded with a valid signature.
struct Gate {
    token: Option<String>,
    /// `None` off a fleet: then no signature is accepted.
    replicas: Option<ReplicaVerifier>,
}

async fn authenticate(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    if request.headers().contains_key(SIGNATURE_HEADER) {
        return match gate.forwarded(request).await {
            Ok(request) => next.run(request).await,
            Err(refused) => refused,
        };
    }
    let Some(token) = &gate.token else {
        return next.run(request).await;
    };
    if access::bearer_matches(request.headers(), token) {
        next.run(request).await
    } else {
        (
            http::StatusCode::UNAUTHORIZED,
            [(http::header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required: send `Authorization: Bearer <token>` with the token from the file `interpreter mcp-server` printed at start\n",
        )
            .into_response()
    }
}

/// Refuses what the listener's [`HostPolicy`] refuses, before anything else runs.
async fn hosts_allowed(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => (http::StatusCode::FORBIDDEN, format!("{refusal}\n")).into_response(),
    }
}

impl Gate {
    /// The request, rebuilt around its (bounded) body, when its replica signature
    /// verifies; else the refusal, whose reason is also logged.
    async fn forwarded(&self, request: Request) -> Result<Request, Response> {
        let (parts, body) = request.into_parts();
        let verified = match &self.replicas {
            None => Err(Refusal::Unauthorized(
                "this server is not a fleet replica (no shared thread store, no \
                 mcp_server.fleet_key_file)"
                    .to_string(),
            )),
            Some(verifier) => {
                match axum::body::to_bytes(body, http_filters::MAX_BODY_BYTES).await {
                    Err(_) => Err(Refusal::Unauthorized(format!(
                        "its body is larger than {} bytes or could not be read",
                        http_filters::MAX_BODY_BYTES
                    ))),
                    Ok(bytes) => verifier
                        .verify(&parts.method, &parts.headers, &bytes)
                        .map(|()| bytes),
                }
            }
        };
        match verified {
            Ok(bytes) => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
            Err(refusal) => {
                eprintln!("warning: refused a forwarded request: {refusal}");
                let status = match refusal {
                    Refusal::Unauthorized(_) => http::StatusCode::UNAUTHORIZED,
                    Refusal::Busy(_) => http::StatusCode::SERVICE_UNAVAILABLE,
                };
                Err((
                    status,
                    format!(
                        "the replica signature of this forwarded request was refused: {refusal}\n"
                    ),
                )
                    .into_response())
            }
        }
    }
}

/// What the HTTP listener is, and whom it lets in.
pub(crate) struct HttpServe {
    pub listen: HttpListen,
    pub auth: HttpAuth,
    /// Browser origins allowed besides this address's own.
    pub allowed_origins: Vec<String>,
    /// `Host` names allowed besides this machine's loopback names and bound address.
    pub allowed_hosts: Vec<String>,
    /// `--internal-url`: the address other replicas reach this one at. `None`: the
    /// bound URL, unless the address is a wildcard (which names no machine).
    pub internal_url: Option<String>,
    /// The fleet's replica key, when this server is a fleet replica.
    pub replica_keys: Option<Arc<ReplicaKeys>>,
}

/// Serve MCP over streamable HTTP until `shutdown` fires. Calls `ready` with the bound
/// URL and the internal URL advertised to other replicas, once accepting.
pub(crate) async fn serve(
    HttpServe {
        listen,
        auth,
        allowed_origins,
        allowed_hosts: extra_hosts,
        internal_url,
        replica_keys,
    }: HttpServe,
    registry: Arc<Registry>,
    states: Arc<RequestStates>,
    shutdown: CancellationToken,
    ready: impl FnOnce(&str, Option<&str>),
) -> Result<(), HttpError> {
    access::require_auth_off_loopback(listen.addr, matches!(auth, HttpAuth::Token(_)))?;
    let tcp = tokio::net::TcpListener::bind(listen.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: listen.addr,
            source,
        })?;
    let bound = tcp.local_addr().map_err(|source| HttpError::Bind {
        addr: listen.addr,
        source,
    })?;
    let url = format!("http://{bound}{}", listen.path);
    let advertised = internal_url.or_else(|| (!bound.ip().is_unspecified()).then(|| url.clone()));
    // The one policy of every listener, as a layer in front of rmcp's service; rmcp's own
    // checks (a narrower Host list, laxer origins) stay off so one rule decides.
    let policy = Arc::new(HostPolicy::new(bound, &extra_hosts, &allowed_origins));
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_cancellation_token(shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(AgentServer::new(registry.clone(), states.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new()
        .route_service(&listen.path, service)
        .layer(axum::middleware::from_fn(delete_answers_no_content))
        .layer(axum::middleware::from_fn(
            http_filters::priming_only_for_polling_clients,
        ))
        .layer(axum::middleware::from_fn(
            http_filters::unreadable_answers_settle,
        ));
    let token = match auth {
        HttpAuth::Token(token) => Some(token),
        HttpAuth::None => None,
    };
    let metrics = (listen.path != "/metrics")
        .then(|| listener::metrics_route(token.clone().map(Arc::new), policy.clone()));
    let gate = Gate {
        token,
        replicas: replica_keys.map(|keys| ReplicaVerifier::new(keys, advertised.as_deref())),
    };
    router = router.layer(axum::middleware::from_fn_with_state(
        Arc::new(gate),
        authenticate,
    ));
    // Host and Origin first, then the token.
    router = router.layer(axum::middleware::from_fn_with_state(policy, hosts_allowed));
    // Added after both, so a balancer's and an orchestrator's health checks (sent to the
    // replica's own address, whatever `Host` it carries) need neither.
    let mut router = router.merge(listener::probe_routes(&listen.path));
    if let Some(metrics) = metrics {
        router = router.merge(metrics);
    }
    ready(&url, advertised.as_deref());
    // The shared accept loop: header-read timeout, connection cap, fd limit raised.
    listener::serve(listener::Acceptor::Tcp(tcp), router, shutdown)
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
}
