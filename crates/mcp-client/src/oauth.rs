//! OAuth for streamable HTTP servers: `interpreter mcp login` / `logout`, and the
//! credential store the connections use (tokens refreshed by the SDK as they expire).
//!
//! Discovery (RFC 9728 protected resource metadata, then RFC 8414 / OpenID
//! configuration), client registration (pre-registered `oauth.client_id`, otherwise
//! dynamic registration), PKCE, the token exchange and refresh are the SDK's
//! (`rmcp::transport::auth`). This module adds what the SDK leaves to applications: the
//! loopback redirect listener, the browser, and where tokens are kept.
//!
//! Tokens live in `$INTERPRETER_HOME/mcp-credentials.json` (mode 0600, replaced
//! atomically), one entry per server name, bound to the server's URL: an entry whose URL
//! no longer matches the configuration is ignored.
//!
//! Step-up: a request the server refuses with `403 insufficient_scope` cannot be
//! re-authorized in the middle of a turn (that needs a browser), so the connection
//! records the scope the server asked for in the server's entry and the call fails with
//! a message naming `interpreter mcp login NAME`; the next login asks for the union of
//! the scopes granted before, the ones discovery selects and the recorded ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::config::{McpServerConfig, McpTransport};

/// File name of the credential store under the agent home.
pub const CREDENTIALS_FILE: &str = "mcp-credentials.json";

/// How long `mcp login` waits for the browser to come back to the redirect URI.
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(300);

/// Deadline for each network step of the login (discovery, registration, exchange).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest redirect request we read from the loopback socket.
const MAX_CALLBACK_REQUEST: usize = 16 * 1024;

/// Why a login or logout failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("OAuth login is only supported for streamable HTTP servers")]
    NotHttp,
    #[error("invalid server entry: {0}")]
    InvalidEntry(String),
    #[error("OAuth discovery failed for {url}: {source}")]
    Discovery { url: String, source: Box<AuthError> },
    #[error(
        "the authorization server metadata of {url} names issuer {received}, not {expected}: {reason}"
    )]
    IssuerMismatch {
        url: String,
        expected: String,
        received: String,
        reason: String,
    },
    #[error("{url} does not support OAuth (no authorization server metadata)")]
    NoAuthorizationSupport { url: String },
    #[error("client registration failed: {0}")]
    Registration(Box<AuthError>),
    #[error("the authorization server answered the redirect with `{error}`: {description}")]
    Provider { error: String, description: String },
    #[error("timed out {0}")]
    Timeout(&'static str),
    #[error("the loopback redirect listener failed: {0}")]
    Listener(std::io::Error),
    #[error("following the authorization URL failed: {0}")]
    Follow(String),
    #[error("exchanging the authorization code failed: {0}")]
    Exchange(Box<AuthError>),
    #[error("the credential store {path} failed: {message}")]
    Store { path: PathBuf, message: String },
}

/// Options of [`login`].
#[derive(Debug, Clone, Default)]
pub struct LoginOptions {
    /// Scopes to ask for; empty: `oauth.scopes`, else the SDK's selection (the
    /// challenge's, then the server's `scopes_supported`).
    pub scopes: Vec<String>,
    /// Instead of waiting for a browser, request the authorization URL ourselves and
    /// follow its redirects to our own listener. Only useful with authorization servers
    /// that approve without a user (test servers); nothing is shown to anyone.
    pub follow_redirect: bool,
    /// How long to wait for the browser to come back; `None`: [`CALLBACK_TIMEOUT`].
    pub callback_timeout: Option<Duration>,
}

/// The server entry as a login target: its URL and static headers.
fn http_url(config: &McpServerConfig) -> Result<String, OAuthError> {
    match config.transport().map_err(OAuthError::InvalidEntry)? {
        McpTransport::StreamableHttp { url } => Ok(url),
        McpTransport::Stdio { .. } => Err(OAuthError::NotHttp),
    }
}

/// Logs in to server `name`: discovery, registration, authorization (in the browser, or
/// by following the redirect), code exchange; the tokens are saved under `home`.
/// `show_url` receives the authorization URL before the wait starts.
pub async fn login(
    name: &str,
    config: &McpServerConfig,
    env: &std::collections::HashMap<String, String>,
    home: &Path,
    options: &LoginOptions,
    show_url: &(dyn Fn(&str) + Send + Sync),
) -> Result<(), OAuthError> {
    let url = http_url(config)?;
    crate::sdk::install_crypto_provider();
    let store = FileCredentialStore::new(home, name, &url);
    let discovery_error = |source| OAuthError::Discovery {
        url: url.clone(),
        source: Box::new(source),
    };
    let mut manager = step(AuthorizationManager::new(url.as_str()))
        .await?
        .map_err(discovery_error)?;
    manager.set_credential_store(store.clone());
    // The challenge of an unauthenticated request names the resource metadata (RFC 9728)
    // and possibly the scopes wanted; without one, discovery falls back to well-known URLs.
    let challenge = crate::sdk::auth_challenge(&url).await;
    let metadata = step(discover(&manager, &url, challenge.as_deref())).await??;
    manager.set_metadata(metadata);
    let earlier = store.entry().await;

    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(OAuthError::Listener)?;
    let port = listener.local_addr().map_err(OAuthError::Listener)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_client_name("interpreter")
        .with_initial_scope_selection();
    let oauth = config.oauth.clone().unwrap_or_default();
    // The SDK uses the document's URL as client id only when the authorization server
    // advertises `client_id_metadata_document_supported`, and registers otherwise.
    if let Some(document) = &oauth.client_metadata_url {
        request = request.with_client_metadata_url(document.clone());
    }
    if let Some(client_id) = &oauth.client_id {
        request = request.with_preregistered_client(client_id.clone());
        if let Some(var) = &oauth.client_secret_env_var {
            let secret = env
                .get(var)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| {
                    OAuthError::InvalidEntry(format!(
                        "environment variable {var} (oauth.client_secret_env_var) is not set"
                    ))
                })?;
            request = request.with_client_secret(secret.clone());
        }
    }
    let mut scopes = if options.scopes.is_empty() {
        oauth.scopes.clone().unwrap_or_default()
    } else {
        options.scopes.clone()
    };
    if let Some(earlier) = earlier.filter(|e| !e.step_up_scopes.is_empty()) {
        // Step-up (SEP-2350): what was granted before, what discovery selects (or was
        // asked for), and what the server said was missing. Not the SDK's
        // `request_scope_upgrade`: it reuses the previous client registration and
        // redirect URI, while each login listens on a new loopback port (and a
        // registered client is bound to its redirect), so a login is a whole new
        // authorization session with these scopes spelled out.
        if scopes.is_empty() {
            scopes = manager.select_initial_scopes(&[]).await;
        }
        let granted = earlier
            .credentials
            .map(|c| c.granted_scopes)
            .unwrap_or_default();
        scopes = union(granted, union(scopes, earlier.step_up_scopes));
    }
    if !scopes.is_empty() {
        request = request.with_scopes(scopes);
    }
    let session = step(AuthorizationSession::new(manager, request))
        .await?
        .map_err(|(_, error)| match error {
            AuthError::NoAuthorizationSupport => {
                OAuthError::NoAuthorizationSupport { url: url.clone() }
            }
            other => OAuthError::Registration(Box::new(other)),
        })?;
    let auth_url = session.get_authorization_url().to_string();
    show_url(&auth_url);

    let wait = wait_for_callback(
        &listener,
        port,
        options.callback_timeout.unwrap_or(CALLBACK_TIMEOUT),
    );
    let callback = if options.follow_redirect {
        let follow = follow_authorization_url(&auth_url);
        let (callback, followed) = tokio::join!(wait, follow);
        followed?;
        callback?
    } else {
        wait.await?
    };
    step(session.handle_callback_url(&callback))
        .await?
        .map_err(|error| OAuthError::Exchange(Box::new(error)))?;
    store.set_step_up(Vec::new()).await?;
    Ok(())
}

/// Whether a request of server `name` at `url` was refused for lack of scope since the
/// last login (see the module comment).
pub fn step_up_pending(home: &Path, name: &str, url: &str) -> bool {
    read_file(&home.join(CREDENTIALS_FILE))
        .ok()
        .and_then(|mut file| file.servers.remove(name))
        .is_some_and(|entry| entry.url == url && !entry.step_up_scopes.is_empty())
}

/// `first`, then the scopes of `second` it lacks.
fn union(first: Vec<String>, second: Vec<String>) -> Vec<String> {
    let mut out = first;
    for scope in second {
        if !out.contains(&scope) {
            out.push(scope);
        }
    }
    out
}

/// The authorization server metadata of the MCP server at `url`, discovered by the SDK
/// (challenge, RFC 9728, RFC 8414 / OpenID configuration, legacy endpoints), with one
/// exception the SDK cannot make: see [`same_origin_legacy_metadata`].
async fn discover(
    manager: &AuthorizationManager,
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, OAuthError> {
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => Ok(resolution.metadata),
        Err(AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        }) => same_origin_legacy_metadata(url, &expected_issuer, &received_issuer)
            .await
            .map_err(|reason| OAuthError::IssuerMismatch {
                url: url.to_string(),
                expected: expected_issuer,
                received: received_issuer,
                reason,
            }),
        Err(error) => Err(OAuthError::Discovery {
            url: url.to_string(),
            source: Box::new(error),
        }),
    }
}

/// The 2025-03-26 back-compat rule. That revision has no protected resource metadata:
/// the MCP server's origin *is* the authorization server, and its metadata lives at
/// `<origin>/.well-known/oauth-authorization-server`. Servers of that era commonly name
/// an issuer under a path of their origin (`<origin>/oauth`), which RFC 8414 §3.3 (and
/// so the SDK) rejects, with no switch to relax it; hence this hand-written fetch.
///
/// Accepted only when the rejected document is that one (the SDK expected the bare
/// origin as issuer) and the issuer it names is on the same origin as the MCP server:
/// the origin then only vouches for itself. An issuer on any other origin, a document
/// found through resource metadata, or one that changed between the two fetches is
/// refused, as the SDK would.
async fn same_origin_legacy_metadata(
    url: &str,
    expected: &str,
    received: &str,
) -> Result<AuthorizationMetadata, String> {
    let parse = |text: &str| reqwest::Url::parse(text).map_err(|err| format!("{text}: {err}"));
    let server = parse(url)?;
    let expected_url = parse(expected)?;
    let issuer = parse(received)?;
    if expected_url.origin() != server.origin() || !matches!(expected_url.path(), "" | "/") {
        return Err("the metadata does not come from the MCP server's own origin".into());
    }
    if issuer.origin() != server.origin() {
        return Err("the issuer is on another origin than the MCP server".into());
    }
    let mut document = server.clone();
    document.set_path("/.well-known/oauth-authorization-server");
    document.set_query(None);
    document.set_fragment(None);
    let client = reqwest::Client::builder()
        .timeout(STEP_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| err.to_string())?;
    let response = client
        .get(document.clone())
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|err| format!("fetching {document}: {err}"))?;
    if !response.status().is_success() {
        return Err(format!("{document} answered {}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|err| format!("reading {document}: {err}"))?;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body)
        .map_err(|err| format!("{document} is not authorization server metadata: {err}"))?;
    if metadata.issuer.as_deref() != Some(received) {
        return Err(format!("{document} changed while it was read"));
    }
    tracing::info!(
        "MCP server {url}: accepting authorization server issuer {received} (same origin, \
         2025-03-26 metadata location) although it differs from {expected}"
    );
    Ok(metadata)
}

/// Removes the stored tokens of server `name`. `Ok(false)`: there were none.
pub fn logout(name: &str, home: &Path) -> Result<bool, OAuthError> {
    let path = home.join(CREDENTIALS_FILE);
    let mut file = read_file(&path)?;
    let removed = file.servers.remove(name).is_some();
    if removed {
        write_file(&path, &file)?;
    }
    Ok(removed)
}

/// Whether tokens are stored for server `name` at `url`.
pub fn has_credentials(home: &Path, name: &str, url: &str) -> bool {
    read_file(&home.join(CREDENTIALS_FILE))
        .ok()
        .and_then(|file| file.servers.get(name).cloned())
        .is_some_and(|entry| {
            entry.url == url
                && entry
                    .credentials
                    .as_ref()
                    .is_some_and(|c| c.token_response.is_some())
        })
}

async fn step<T>(future: impl Future<Output = T>) -> Result<T, OAuthError> {
    tokio::time::timeout(STEP_TIMEOUT, future)
        .await
        .map_err(|_| OAuthError::Timeout("talking to the authorization server"))
}

/// Requests the authorization URL and follows its redirects, which end at our listener
/// when the server approves without asking anyone.
async fn follow_authorization_url(auth_url: &str) -> Result<(), OAuthError> {
    let client = reqwest::Client::builder()
        .timeout(STEP_TIMEOUT)
        .build()
        .map_err(|err| OAuthError::Follow(err.to_string()))?;
    client
        .get(auth_url)
        .send()
        .await
        .map_err(|err| OAuthError::Follow(err.to_string()))?;
    Ok(())
}

/// Accepts connections on the loopback listener until one requests `/callback`, answers
/// it, and returns the full redirect URL (with `code` and `state`). A hand-written
/// one-request HTTP exchange: the only thing to serve is one GET line, which does not
/// justify an HTTP server dependency in this crate.
async fn wait_for_callback(
    listener: &TcpListener,
    port: u16,
    timeout: Duration,
) -> Result<String, OAuthError> {
    let accept_loop = async {
        loop {
            let (mut socket, _) = listener.accept().await.map_err(OAuthError::Listener)?;
            let target =
                match tokio::time::timeout(STEP_TIMEOUT, read_request_target(&mut socket)).await {
                    Ok(Ok(target)) => target,
                    // A client that sends nothing useful is dropped; keep waiting.
                    _ => continue,
                };
            let Some(query) = target.strip_prefix("/callback") else {
                let _ = respond(&mut socket, "404 Not Found", "Invalid OAuth callback").await;
                continue;
            };
            let url = format!("http://127.0.0.1:{port}/callback{query}");
            let params: BTreeMap<String, String> = reqwest::Url::parse(&url)
                .map(|u| u.query_pairs().into_owned().collect())
                .unwrap_or_default();
            if let Some(error) = params.get("error") {
                let _ = respond(&mut socket, "400 Bad Request", "Authorization failed.").await;
                return Err(OAuthError::Provider {
                    error: error.clone(),
                    description: params.get("error_description").cloned().unwrap_or_default(),
                });
            }
            let _ = respond(
                &mut socket,
                "200 OK",
                "Authentication complete. You may close this window.",
            )
            .await;
            return Ok(url);
        }
    };
    tokio::time::timeout(timeout, accept_loop)
        .await
        .map_err(|_| OAuthError::Timeout("waiting for the OAuth redirect"))?
}

/// The request target of an HTTP/1.x request line (`GET /callback?… HTTP/1.1`).
async fn read_request_target(socket: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < MAX_CALLBACK_REQUEST {
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Ok(target.to_string()),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a GET request",
        )),
    }
}

async fn respond(
    socket: &mut tokio::net::TcpStream,
    status: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.shutdown().await
}

/// `mcp-credentials.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialsFile {
    #[serde(default)]
    servers: BTreeMap<String, ServerCredentials>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ServerCredentials {
    /// The URL the tokens were issued for.
    url: String,
    credentials: Option<StoredCredentials>,
    /// Scopes the server asked for when it refused a request with `insufficient_scope`
    /// since the last login; the next login adds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    step_up_scopes: Vec<String>,
}

fn store_error(path: &Path, message: impl ToString) -> OAuthError {
    OAuthError::Store {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn read_file(path: &Path) -> Result<CredentialsFile, OAuthError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|err| store_error(path, err)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(CredentialsFile::default()),
        Err(err) => Err(store_error(path, err)),
    }
}

/// Writes the whole file through a temporary file created with mode 0600 in the same
/// directory, renamed over the old one: never half written, never readable by others.
fn write_file(path: &Path, file: &CredentialsFile) -> Result<(), OAuthError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    interpreter_private_fs::create_dir_all(dir).map_err(|err| store_error(path, err))?;
    let text = serde_json::to_string_pretty(file).map_err(|err| store_error(path, err))?;
    interpreter_private_fs::write_atomically(path, text.as_bytes())
        .map_err(|err| store_error(path, err))
}

/// The SDK's credential store for one server: its entry in `mcp-credentials.json`.
/// Reads and writes go through a process-wide lock so that concurrent refreshes of
/// different servers do not lose each other's updates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FileCredentialStore {
    path: PathBuf,
    name: String,
    url: String,
}

static STORE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl FileCredentialStore {
    pub(crate) fn new(home: &Path, name: &str, url: &str) -> Self {
        Self {
            path: home.join(CREDENTIALS_FILE),
            name: name.to_string(),
            url: url.to_string(),
        }
    }

    fn sdk_error(error: OAuthError) -> AuthError {
        AuthError::CredentialStoreError(error.to_string())
    }

    /// The server's entry, when it is bound to this URL.
    async fn entry(&self) -> Option<ServerCredentials> {
        let _guard = STORE_LOCK.lock().await;
        read_file(&self.path)
            .ok()
            .and_then(|mut file| file.servers.remove(&self.name))
            .filter(|entry| entry.url == self.url)
    }

    /// The server's name in the configuration (and in `interpreter mcp login NAME`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Records (or, empty, forgets) the scopes the server said a request lacked.
    pub(crate) async fn set_step_up(&self, scopes: Vec<String>) -> Result<(), OAuthError> {
        let _guard = STORE_LOCK.lock().await;
        let mut file = read_file(&self.path)?;
        match file.servers.get_mut(&self.name) {
            Some(entry) if entry.url == self.url => {
                if entry.step_up_scopes == scopes {
                    return Ok(());
                }
                entry.step_up_scopes = scopes;
            }
            _ if scopes.is_empty() => return Ok(()),
            _ => {
                file.servers.insert(
                    self.name.clone(),
                    ServerCredentials {
                        url: self.url.clone(),
                        credentials: None,
                        step_up_scopes: scopes,
                    },
                );
            }
        }
        write_file(&self.path, &file)
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let _guard = STORE_LOCK.lock().await;
        let file = read_file(&self.path).map_err(Self::sdk_error)?;
        Ok(file
            .servers
            .get(&self.name)
            .filter(|entry| entry.url == self.url)
            .and_then(|entry| entry.credentials.clone()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let _guard = STORE_LOCK.lock().await;
        let mut file = read_file(&self.path).map_err(Self::sdk_error)?;
        // A refresh keeps a recorded step-up: the refreshed token has the old scopes.
        let step_up_scopes = file
            .servers
            .remove(&self.name)
            .filter(|entry| entry.url == self.url)
            .map(|entry| entry.step_up_scopes)
            .unwrap_or_default();
        file.servers.insert(
            self.name.clone(),
            ServerCredentials {
                url: self.url.clone(),
                credentials: Some(credentials),
                step_up_scopes,
            },
        );
        write_file(&self.path, &file).map_err(Self::sdk_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let _guard = STORE_LOCK.lock().await;
        let mut file = read_file(&self.path).map_err(Self::sdk_error)?;
        if file.servers.remove(&self.name).is_some() {
            write_file(&self.path, &file).map_err(Self::sdk_error)?;
        }
        Ok(())
    }
}

/// An authorization manager for a connection, loaded from the store; `None` when no
/// tokens are stored (the connection then goes without OAuth).
pub(crate) async fn runtime_manager(
    store: FileCredentialStore,
) -> Result<Option<AuthorizationManager>, String> {
    let mut manager = AuthorizationManager::new(store.url.as_str())
        .await
        .map_err(|err| format!("OAuth set-up failed: {err}"))?;
    let url = store.url.clone();
    manager.set_credential_store(store);
    // The same discovery as the login (back-compat rule included), before the SDK would
    // run its own, stricter one to refresh tokens.
    let metadata = discover(&manager, &url, None)
        .await
        .map_err(|err| format!("OAuth set-up failed: {err}"))?;
    manager.set_metadata(metadata);
    match manager.initialize_from_store().await {
        Ok(true) => Ok(Some(manager)),
        Ok(false) => Ok(None),
        Err(err) => Err(format!("stored OAuth credentials are unusable: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_store_is_private_and_bound_to_the_url() -> Result<(), Box<dyn std::error::Error>> {
        let home = tempfile::tempdir()?;
        let store = FileCredentialStore::new(home.path(), "docs", "https://a.example/mcp");
        store
            .save(StoredCredentials::new(
                "client-1".into(),
                None,
                vec![],
                None,
            ))
            .await?;
        let loaded = store.load().await?;
        assert_eq!(loaded.map(|c| c.client_id), Some("client-1".to_string()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(home.path().join(CREDENTIALS_FILE))?
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let moved = FileCredentialStore::new(home.path(), "docs", "https://b.example/mcp");
        assert!(
            moved.load().await?.is_none(),
            "another URL does not see the tokens"
        );
        assert!(logout("docs", home.path())?);
        assert!(!logout("docs", home.path())?);
        assert!(store.load().await?.is_none());
        Ok(())
    }

    #[tokio::test]
    async fn the_issuer_fallback_only_accepts_the_servers_own_origin() {
        let server = "http://127.0.0.1:9/mcp";
        let other_origin = same_origin_legacy_metadata(
            server,
            "http://127.0.0.1:9/",
            "https://auth.example/oauth",
        )
        .await;
        assert!(other_origin.is_err_and(|e| e.contains("another origin")));
        let other_port =
            same_origin_legacy_metadata(server, "http://127.0.0.1:9/", "http://127.0.0.1:10/oauth")
                .await;
        assert!(other_port.is_err_and(|e| e.contains("another origin")));
        // A mismatch in a document found elsewhere (resource metadata, a tenant path).
        let elsewhere = same_origin_legacy_metadata(
            server,
            "https://auth.example/tenant",
            "http://127.0.0.1:9/oauth",
        )
        .await;
        assert!(elsewhere.is_err_and(|e| e.contains("own origin")));
    }

    #[tokio::test]
    async fn a_recorded_step_up_survives_a_refresh_until_the_next_login()
    -> Result<(), Box<dyn std::error::Error>> {
        let home = tempfile::tempdir()?;
        let url = "https://a.example/mcp";
        let store = FileCredentialStore::new(home.path(), "docs", url);
        let credentials = StoredCredentials::new("client-1".into(), None, vec![], None);
        store.save(credentials.clone()).await?;
        assert!(!step_up_pending(home.path(), "docs", url));
        store.set_step_up(vec!["files:write".into()]).await?;
        store.save(credentials).await?;
        assert!(step_up_pending(home.path(), "docs", url));
        assert!(!step_up_pending(
            home.path(),
            "docs",
            "https://b.example/mcp"
        ));
        store.set_step_up(Vec::new()).await?;
        assert!(!step_up_pending(home.path(), "docs", url));
        assert_eq!(
            union(vec!["a".into(), "b".into()], vec!["b".into(), "c".into()]),
            ["a", "b", "c"]
        );
        Ok(())
    }
}
