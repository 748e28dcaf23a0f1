//! What every network listener of the agent shares (the app-server's WebSocket and Unix
//! socket, the MCP server's streamable HTTP): token files checked for owner and mode, Unix
//! sockets that are private and never taken over from a live server, peer checks on the
//! socket, and an accept loop that holds against floods.
//!
//! Why our own accept loop instead of `axum::serve`: `axum::serve` gives hyper no timer
//! (so no header-read timeout: a client trickling a header holds its connection forever)
//! and accepts without bound (idle connections exhaust the descriptors). Here each
//! connection is served by hyper's HTTP/1 builder with a header-read timeout, which also
//! closes idle keep-alive connections (hyper restarts it when it waits for the next
//! request), and a table of open connections caps how many are open at once.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A connection that has not sent complete request headers within this time is closed
/// (slowloris). The same timer closes a keep-alive connection idle this long between
/// requests. Upgraded WebSocket connections and streaming responses are not affected.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// At most this many HTTP connections are open at once on one listener. At the cap a new
/// connection takes the place of the oldest one that has no request in flight (reading a
/// header, or idle between requests); when every open connection is serving a request,
/// the new one is accepted and closed at once, so it neither waits in the kernel's
/// backlog nor takes a descriptor from the connections being served. Lowered when the
/// process's descriptor limit is too small to hold it (see [`connection_cap`]).
pub const MAX_CONNECTIONS: usize = 1024;

/// Descriptors kept for everything else the server opens (rollouts, the thread index,
/// commands' pipes, MCP servers) when the connection cap is derived from the fd limit.
const FD_RESERVE: u64 = 256;

/// How long open connections get to finish when the listener stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Pause after a failed `accept` (e.g. EMFILE), so the loop does not spin while
/// descriptors are short.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long connecting to an existing socket path may take before we treat it as live.
const LIVENESS_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    #[error("token file {}: {message}", path.display())]
    TokenFile { path: PathBuf, message: String },
    #[error(
        "another server is listening on {}: stop it first or choose another path (--listen unix://PATH)",
        .0.display()
    )]
    SocketInUse(PathBuf),
    #[error("{} exists and is not a socket; refusing to remove it", .0.display())]
    NotASocket(PathBuf),
    #[error(
        "{} is a socket owned by uid {owner}, not by uid {me} that this server runs as; refusing to remove it",
        path.display()
    )]
    SocketNotOurs { path: PathBuf, owner: u32, me: u32 },
    #[error("socket directory {}: {message}", path.display())]
    SocketDir { path: PathBuf, message: String },
    #[error(
        "cannot read this process's PID namespace ({source}); the Unix socket's peer checks need /proc"
    )]
    OwnPidNamespace {
        #[source]
        source: std::io::Error,
    },
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Raise this process's soft limit on open files to its hard limit, so a flood of
/// connections meets the connection cap before it meets EMFILE. Called by every listener
/// front end (through [`serve`]); idempotent. Returns the soft limit in force afterwards
/// (`None`: unlimited).
pub fn raise_fd_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => return limit.maximum,
            Err(err) => tracing::warn!("could not raise the open-file limit: {err}"),
        }
    }
    limit.current
}

/// The connection cap for a process whose descriptor limit is `fd_limit`.
pub fn connection_cap(fd_limit: Option<u64>) -> usize {
    match fd_limit {
        None => MAX_CONNECTIONS,
        Some(limit) => {
            let room = usize::try_from(limit.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
            room.clamp(1, MAX_CONNECTIONS)
        }
    }
}

/// Refuse a secret file that another user owns (they choose the token) or that group or
/// others may read or write (the token is no secret). `meta` is the opened file's.
fn check_private_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    if !meta.is_file() {
        return Err("is not a regular file".to_string());
    }
    let me = effective_uid();
    let mode = meta.mode() & 0o7777;
    if meta.uid() != me {
        return Err(format!(
            "is owned by uid {}, not by uid {me} that this server runs as (mode {mode:04o}): \
             whoever owns it chooses the token. Use a file of your own: delete it to get a fresh \
             token, or `chown {me}` it and run `chmod 600 {}`",
            meta.uid(),
            path.display()
        ));
    }
    if mode & 0o077 != 0 {
        return Err(format!(
            "has mode {mode:04o} (owner uid {}): group or other users can read or write it, so \
             the token is not a secret. Run `chmod 600 {}` (or delete it to get a fresh token)",
            meta.uid(),
            path.display()
        ));
    }
    Ok(())
}

/// `bytes` as lower-case hex, the form of the secrets written to token and key files.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The token in `path`: read when the file exists (owned by this uid, mode 0600 or
/// stricter, at least 16 characters), else created with mode 0600 holding `fresh` applied
/// to 32 bytes from the OS random source. The checks are made on the opened file, so the
/// file read is the file checked.
pub fn load_or_create_token(
    path: &Path,
    fresh: impl FnOnce(&[u8; 32]) -> String,
) -> Result<String, ListenerError> {
    use std::io::{Read as _, Write as _};
    let fail = |message: String| ListenerError::TokenFile {
        path: path.to_path_buf(),
        message,
    };
    let read = |mut file: std::fs::File| {
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        check_private_file(path, &meta).map_err(fail)?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| fail(e.to_string()))?;
        let token = text.trim().to_string();
        if token.len() < 16 {
            return Err(fail("holds no token of at least 16 characters".to_string()));
        }
        Ok(token)
    };
    match std::fs::File::open(path) {
        Ok(file) => read(file),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| fail(e.to_string()))?;
            let token = fresh(&bytes);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                interpreter_private_fs::create_dir_all(dir)
                    .map_err(|e| fail(format!("creating its directory: {e}")))?;
            }
            // Written whole to a private (0600) file beside it, then linked into place
            // only if nothing is there yet: another process sharing the file (a fleet
            // replica starting at the same moment) sees either no file or the whole
            // secret, never an empty or half-written one.
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut staged = interpreter_private_fs::temp_file_in(dir, ".token-")
                .map_err(|e| fail(e.to_string()))?;
            staged
                .write_all(format!("{token}\n").as_bytes())
                .and_then(|()| staged.as_file().sync_all())
                .map_err(|e| fail(e.to_string()))?;
            match staged.persist_noclobber(path) {
                Ok(_) => Ok(token),
                // Another process created it first: use its secret, so both hold the
                // same one.
                Err(err) if err.error.kind() == std::io::ErrorKind::AlreadyExists => {
                    read(std::fs::File::open(path).map_err(|e| fail(e.to_string()))?)
                }
                Err(err) => Err(fail(err.error.to_string())),
            }
        }
        Err(err) => Err(fail(err.to_string())),
    }
}

/// The socket's directory: created 0700 when missing; an existing one must belong to us
/// or root, and must not let others replace entries (group/other-writable without the
/// sticky bit, as `/tmp` has).
fn prepare_socket_dir(dir: &Path) -> Result<(), ListenerError> {
    use std::os::unix::fs::MetadataExt as _;
    let bad = |message: String| ListenerError::SocketDir {
        path: dir.to_path_buf(),
        message,
    };
    match std::fs::metadata(dir) {
        Ok(meta) => {
            let me = effective_uid();
            if !meta.is_dir() {
                return Err(bad("is not a directory".into()));
            }
            if meta.uid() != me && meta.uid() != 0 {
                return Err(bad(format!(
                    "is owned by uid {}, not by uid {me} or root",
                    meta.uid()
                )));
            }
            let mode = meta.mode();
            if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                return Err(bad(format!(
                    "has mode {:04o}: other users could replace the socket; run `chmod 700` on it",
                    mode & 0o7777
                )));
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            interpreter_private_fs::create_dir_all(dir).map_err(|source| ListenerError::Io {
                action: "create the directory",
                path: dir.to_path_buf(),
                source,
            })
        }
        Err(source) => Err(ListenerError::Io {
            action: "inspect the directory",
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Remove what is at `path` only if it is a stale socket of ours: a socket, owned by this
/// uid, and nothing answers a connect (refused). A live server is never taken over;
/// anything ambiguous refuses.
async fn clear_stale_socket(path: &Path) -> Result<(), ListenerError> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ListenerError::Io {
                action: "inspect",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if !meta.file_type().is_socket() {
        return Err(ListenerError::NotASocket(path.to_path_buf()));
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(ListenerError::SocketNotOurs {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    match tokio::time::timeout(LIVENESS_DEADLINE, UnixStream::connect(path)).await {
        // Something accepts (or is too busy to answer in time): a live server.
        Ok(Ok(_)) | Err(_) => Err(ListenerError::SocketInUse(path.to_path_buf())),
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).map_err(|source| ListenerError::Io {
                action: "remove the stale socket",
                path: path.to_path_buf(),
                source,
            })
        }
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(Err(source)) => Err(ListenerError::Io {
            action: "check whether a server is listening on",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A listening Unix socket that only this uid, in this PID namespace, may use.
pub struct PrivateUnixListener {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file we created, to remove only that one when we stop.
    identity: (u64, u64),
    peers: PeerPolicy,
}

impl PrivateUnixListener {
    /// Bind `path`: its directory private, a stale socket of ours replaced, a live one
    /// refused, the socket created with mode 0600.
    pub async fn bind(path: &Path) -> Result<Self, ListenerError> {
        use std::os::unix::fs::MetadataExt as _;
        let peers = PeerPolicy::current()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            prepare_socket_dir(dir)?;
        }
        clear_stale_socket(path).await?;
        let io = |action: &'static str| {
            let path = path.to_path_buf();
            move |source| ListenerError::Io {
                action,
                path,
                source,
            }
        };
        // The socket file takes its mode from the umask at bind(2); a chmod afterwards
        // would leave a window in which others may connect. The umask is process-wide;
        // this runs at start-up, before the server creates other files.
        let previous = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
        let bound = UnixListener::bind(path);
        rustix::process::umask(previous);
        let listener = bound.map_err(io("listen on"))?;
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(io("restrict"))?;
        }
        let meta = std::fs::symlink_metadata(path).map_err(io("inspect"))?;
        Ok(Self {
            listener,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            peers,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateUnixListener {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt as _;
        let ours = std::fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.identity)
            .unwrap_or(false);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Who may connect to the Unix socket: a process of this uid in this PID namespace. The
/// agent's sandboxed commands run in a PID namespace of their own, so a command of ours
/// is refused however it reached the socket.
#[derive(Debug, Clone)]
struct PeerPolicy {
    uid: u32,
    pid_namespace: OsString,
}

fn pid_namespace_of(pid: &str) -> std::io::Result<OsString> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).map(PathBuf::into_os_string)
}

impl PeerPolicy {
    fn current() -> Result<Self, ListenerError> {
        Ok(Self {
            uid: effective_uid(),
            pid_namespace: pid_namespace_of("self")
                .map_err(|source| ListenerError::OwnPidNamespace { source })?,
        })
    }

    /// `Err(why)` refuses the peer. Anything we cannot establish refuses too.
    fn check(&self, stream: &UnixStream) -> Result<(), String> {
        let cred = stream
            .peer_cred()
            .map_err(|e| format!("no peer credentials: {e}"))?;
        if cred.uid() != self.uid {
            return Err(format!(
                "peer runs as uid {}, this server as uid {}",
                cred.uid(),
                self.uid
            ));
        }
        // Pid 0 (or none): the peer is in a namespace we cannot see into.
        let pid = match cred.pid() {
            Some(pid) if pid > 0 => pid,
            other => return Err(format!("peer pid {other:?} is not visible from here")),
        };
        let theirs = pid_namespace_of(&pid.to_string())
            .map_err(|e| format!("cannot read the PID namespace of peer pid {pid}: {e}"))?;
        if theirs != self.pid_namespace {
            return Err(format!(
                "peer pid {pid} runs in another PID namespace ({}; ours is {})",
                theirs.to_string_lossy(),
                self.pid_namespace.to_string_lossy()
            ));
        }
        Ok(())
    }
}

/// What a listener accepts from.
pub enum Acceptor {
    Tcp(TcpListener),
    Unix(PrivateUnixListener),
}

/// The open connections of one listener, oldest first, for the connection cap.
struct Slots {
    cap: usize,
    open: std::sync::Mutex<std::collections::VecDeque<Slot>>,
    next_id: AtomicU64,
}

#[derive(Clone)]
struct Slot {
    id: u64,
    /// Requests of this connection in flight (from its headers to the end of its response
    /// body). Zero: it is reading a header or idle between requests.
    busy: Arc<AtomicUsize>,
    evict: CancellationToken,
}

/// Held by a connection's task; gives its slot back when the connection ends.
struct SlotGuard {
    slots: Arc<Slots>,
    slot: Slot,
}

enum Admission {
    Admitted(SlotGuard),
    /// Admitted after closing the oldest connection that had no request in flight.
    Evicted(SlotGuard),
    /// Every open connection is serving a request: the new one is closed.
    Full,
}

impl Slots {
    fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            open: std::sync::Mutex::new(std::collections::VecDeque::new()),
            next_id: AtomicU64::new(0),
        })
    }

    /// A slot for a new connection. At the cap, the oldest connection that is only
    /// reading a header or sitting idle is closed to make room: a flood of such
    /// connections then cannot keep a client that sends its request at once from being
    /// served, while connections serving a request (an authorized call, a stream) are
    /// never closed for a newcomer.
    fn admit(self: &Arc<Self>) -> Admission {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut evicted = false;
        if open.len() >= self.cap {
            let Some(oldest_idle) = open
                .iter()
                .position(|slot| slot.busy.load(Ordering::Acquire) == 0)
            else {
                return Admission::Full;
            };
            if let Some(slot) = open.remove(oldest_idle) {
                slot.evict.cancel();
            }
            evicted = true;
        }
        let slot = Slot {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            busy: Arc::new(AtomicUsize::new(0)),
            evict: CancellationToken::new(),
        };
        open.push_back(slot.clone());
        let guard = SlotGuard {
            slots: Arc::clone(self),
            slot,
        };
        if evicted {
            Admission::Evicted(guard)
        } else {
            Admission::Admitted(guard)
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = open.iter().position(|slot| slot.id == self.slot.id) {
            open.remove(index);
        }
    }
}

/// One request in flight on a connection, until dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(busy: &Arc<AtomicUsize>) -> Self {
        busy.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(busy))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until it is sent or
/// dropped (a streaming response keeps its connection busy).
struct TrackedBody {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The probes every HTTP listener answers without a token, for load balancers and
/// orchestrators: `GET /readyz` (200 while the listener accepts), and `GET /livez` and
/// `GET /healthz` (200 while the process serves, or 403 when the request has an `Origin`
/// header: a web page has no business here). They say nothing but the status. Paths
/// `taken` by the listener's own service are left to it.
pub fn probe_routes<S: Clone + Send + Sync + 'static>(taken: &str) -> Router<S> {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::routing::get;
    async fn health(headers: HeaderMap) -> StatusCode {
        if headers.contains_key(header::ORIGIN) {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::OK
        }
    }
    let mut router = Router::new();
    if taken != "/readyz" {
        router = router.route("/readyz", get(|| async { StatusCode::OK }));
    }
    for path in ["/livez", "/healthz"] {
        if taken != path {
            router = router.route(path, get(health));
        }
    }
    router
}

/// `GET /metrics`: the process's metrics in Prometheus' text format, for a scraper. Behind
/// the listener's own rules: its `Host`/`Origin` policy and, when it has one, its bearer
/// token (a scraper sends it with `authorization` in its scrape config). 404 when the
/// process keeps no metrics.
pub fn metrics_route<S: Clone + Send + Sync + 'static>(
    token: Option<Arc<String>>,
    hosts: Arc<crate::access::HostPolicy>,
) -> Router<S> {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse as _;
    let serve = move |headers: HeaderMap| {
        let token = token.clone();
        let hosts = hosts.clone();
        async move {
            if let Err(refusal) = hosts.check(&headers) {
                return (StatusCode::FORBIDDEN, refusal.to_string()).into_response();
            }
            if let Some(token) = &token
                && !crate::access::bearer_matches(&headers, token)
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "missing or wrong bearer token",
                )
                    .into_response();
            }
            metrics_text()
        }
    };
    Router::new().route("/metrics", axum::routing::get(serve))
}

fn metrics_text() -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse as _;
    match interpreter_telemetry::scrape::render() {
        Some(Ok(text)) => (
            [(
                header::CONTENT_TYPE,
                interpreter_telemetry::scrape::CONTENT_TYPE,
            )],
            text,
        )
            .into_response(),
        Some(Err(err)) => (StatusCode::INTERNAL_SERVER_ERROR, err).into_response(),
        None => (StatusCode::NOT_FOUND, "this process keeps no metrics").into_response(),
    }
}

/// `--metrics-listen ADDR`: `/metrics` (and the probes) alone on a loopback port of their
/// own, without a token, for a scraper on the same machine while the main listener keeps
/// its token. Anything but a loopback address is refused: metrics name models and counts
/// that a network should not read without a token.
pub struct MetricsListener {
    tcp: TcpListener,
    bound: std::net::SocketAddr,
}

impl MetricsListener {
    pub async fn bind(addr: std::net::SocketAddr) -> Result<Self, std::io::Error> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--metrics-listen must be a loopback address, not {addr}"),
            ));
        }
        let tcp = TcpListener::bind(addr).await?;
        let bound = tcp.local_addr()?;
        Ok(Self { tcp, bound })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.bound
    }

    /// Serves until `stop` fires.
    pub async fn serve(self, stop: CancellationToken) -> Result<(), std::io::Error> {
        let hosts = Arc::new(crate::access::HostPolicy::new(self.bound, &[], &[]));
        let router = metrics_route(None, hosts).merge(probe_routes("/metrics"));
        serve(Acceptor::Tcp(self.tcp), router, stop).await
    }
}

/// Serve `router` on `acceptor` until `stop` fires, with the header-read timeout and the
/// connection cap. Raises the fd limit first.
pub async fn serve(
    acceptor: Acceptor,
    router: Router,
    stop: CancellationToken,
) -> Result<(), std::io::Error> {
    let cap = connection_cap(raise_fd_limit());
    let slots = Slots::new(cap);
    let tasks = TaskTracker::new();
    let mut refused_at_cap: u64 = 0;
    let mut evicted_at_cap: u64 = 0;
    let mut refused_peers: u64 = 0;
    loop {
        let accepted = match &acceptor {
            Acceptor::Tcp(listener) => tokio::select! {
                accepted = listener.accept() => accepted.map(|(stream, _)| Stream::Tcp(stream)),
                () = stop.cancelled() => break,
            },
            Acceptor::Unix(unix) => tokio::select! {
                accepted = unix.listener.accept() => accepted.map(|(stream, _)| Stream::Unix(stream)),
                () = stop.cancelled() => break,
            },
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(err) => {
                // Per-connection failures (reset before accept) and EMFILE alike: the
                // listener itself stays good; wait a moment and go on.
                tracing::debug!("accept failed: {err}");
                tokio::select! {
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    () = stop.cancelled() => break,
                }
            }
        };
        if let (Stream::Unix(stream), Acceptor::Unix(unix)) = (&stream, &acceptor)
            && let Err(why) = unix.peers.check(stream)
        {
            refused_peers += 1;
            // The first refusal and then powers of two: a refused peer looping on connect
            // must not flood the log.
            if refused_peers.is_power_of_two() {
                tracing::warn!(
                    "refused a connection on {} ({refused_peers} so far): {why}",
                    unix.path.display()
                );
            }
            continue;
        }
        // Logged at powers of two: a flood must not also flood the log.
        let slot = match slots.admit() {
            Admission::Admitted(slot) => slot,
            Admission::Evicted(slot) => {
                evicted_at_cap += 1;
                if evicted_at_cap.is_power_of_two() {
                    tracing::warn!(
                        "{cap} connections open: closed {evicted_at_cap} idle or header-reading connection(s) to admit new ones"
                    );
                }
                slot
            }
            Admission::Full => {
                refused_at_cap += 1;
                if refused_at_cap.is_power_of_two() {
                    tracing::warn!(
                        "{cap} connections busy: closed {refused_at_cap} new connection(s) at once"
                    );
                }
                continue;
            }
        };
        let router = router.clone();
        let stop = stop.clone();
        match stream {
            Stream::Tcp(stream) => {
                // Small frames (JSON-RPC lines) should not wait for Nagle.
                let _ = stream.set_nodelay(true);
                tasks.spawn(serve_connection(stream, router, slot, stop));
            }
            Stream::Unix(stream) => {
                tasks.spawn(serve_connection(stream, router, slot, stop));
            }
        }
    }
    tasks.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait()).await;
    drop(acceptor);
    Ok(())
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(UnixStream),
}

async fn serve_connection<IO>(io: IO, router: Router, slot: SlotGuard, stop: CancellationToken)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let busy = Arc::clone(&slot.slot.busy);
    let router = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |request| {
        let in_flight = InFlight::new(&busy);
        let response = hyper::service::Service::call(&router, request);
        async move {
            let response = response.await?;
            Ok::<_, std::convert::Infallible>(response.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true);
    let connection = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        served = connection.as_mut() => {
            if let Err(err) = served {
                tracing::debug!("connection ended: {err}");
            }
        }
        // Closed to make room at the cap (it had no request in flight).
        () = slot.slot.evict.cancelled() => {}
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
        }
    }
    // An upgraded WebSocket lives on in its own task and no longer counts against the cap:
    // it has passed the listener's authentication.
    drop(slot);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replicas of a fleet sharing one token or key file may start together: every one
    /// of them gets the same secret, none an empty or half-written file.
    #[test]
    fn processes_creating_one_token_file_at_once_all_get_the_same_token() {
        for _ in 0..50 {
            let dir = tempfile::tempdir().expect("dir");
            let path = dir.path().join("t");
            let tokens: Vec<String> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..8)
                    .map(|_| scope.spawn(|| load_or_create_token(&path, |b| hex(b))))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread").expect("token"))
                    .collect()
            });
            assert!(tokens.iter().all(|t| *t == tokens[0]), "{tokens:?}");
            assert_eq!(tokens[0].len(), 64);
        }
    }

    #[test]
    fn token_files_must_be_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("sub").join("t");
        let token = load_or_create_token(&path, |b| hex(b)).expect("create");
        assert_eq!(token.len(), 64);
        let meta = std::fs::metadata(&path).expect("meta");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            load_or_create_token(&path, |b| hex(b)).expect("read"),
            token
        );
        for mode in [0o644, 0o620, 0o604] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = load_or_create_token(&path, |b| hex(b))
                .expect_err("refused")
                .to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(&format!("{mode:04o}")), "{err}");
            assert!(err.contains("chmod 600"), "{err}");
        }
    }

    #[test]
    fn short_tokens_are_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t");
        std::fs::write(&path, "short\n").expect("write");
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        assert!(load_or_create_token(&path, |b| hex(b)).is_err());
    }

    #[test]
    fn the_cap_leaves_room_for_other_files() {
        assert_eq!(connection_cap(None), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(1_048_576)), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(1024)), 1024 - 256);
        assert_eq!(connection_cap(Some(10)), 1);
    }

    fn admitted(admission: Admission) -> SlotGuard {
        match admission {
            Admission::Admitted(slot) => slot,
            Admission::Evicted(_) => panic!("evicted"),
            Admission::Full => panic!("full"),
        }
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let slots = Slots::new(2);
        let first = admitted(slots.admit());
        let second = admitted(slots.admit());
        let _busy = InFlight::new(&first.slot.busy);
        // `first` serves a request, so `second` (idle) is closed for the newcomer.
        let third = match slots.admit() {
            Admission::Evicted(slot) => slot,
            _ => panic!("expected an eviction"),
        };
        assert!(second.slot.evict.is_cancelled());
        assert!(!first.slot.evict.is_cancelled());
        // Every open connection busy: the newcomer is refused.
        let _also_busy = InFlight::new(&third.slot.busy);
        assert!(matches!(slots.admit(), Admission::Full));
        // A connection that ends gives its slot back.
        drop(second);
        drop(third);
        let _fourth = admitted(slots.admit());
    }

    #[tokio::test]
    async fn sockets_are_private_and_never_taken_over() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("run").join("s.sock");
        let live = PrivateUnixListener::bind(&path).await.expect("bind");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("dir")), 0o700);
        // A second server refuses while the first listens.
        let err = PrivateUnixListener::bind(&path)
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("another server is listening"), "{err}");
        assert!(path.exists());
        // A stale socket (its listener gone, the file left) is replaced.
        let stale =
            std::os::unix::net::UnixListener::bind(dir.path().join("stale.sock")).expect("stale");
        drop(stale);
        let replaced = PrivateUnixListener::bind(&dir.path().join("stale.sock"))
            .await
            .expect("stale replaced");
        drop(replaced);
        // Anything that is not a socket is left alone.
        let file = dir.path().join("file");
        std::fs::write(&file, "keep").expect("write");
        let err = PrivateUnixListener::bind(&file)
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).expect("kept"), "keep");
        drop(live);
        assert!(
            !path.exists(),
            "the socket is removed when the listener stops"
        );
    }
}
