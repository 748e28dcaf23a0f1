//! Fleet mode: several replicas behind a load balancer, one thread store.
//!
//! A thread runs on one replica at a time (the store's lease says which). A 2026-07-28
//! request about a thread another live replica runs (`codex-reply`, `codex-status`,
//! `codex-wait`, an MRTR retry, `tasks/*`) is forwarded to that replica's internal URL
//! and its answer relayed, because the running turn, its pending approvals and their
//! one-time ids exist only in the owner's memory. Everything else about a thread (an idle
//! one, a finished task) is served wherever the request lands, from the store.
//!
//! A request that cannot be forwarded (a legacy-era session, whose approvals ride its own
//! connection; an owner that advertised no URL or does not answer; a request that was
//! itself forwarded, so two replicas that disagree cannot bounce it between them) is
//! refused with the retryable [`RUNS_ELSEWHERE_CODE`] error naming the owner: nothing ran.
//!
//! The owner's URL comes from the thread store, which is not where the operator decides
//! who belongs to the fleet: a URL outside `mcp_server.fleet_forward_allow` is never
//! contacted, and what is sent carries no credential of the caller's, only a signature
//! under the fleet's replica key that verifies at that URL alone
//! ([`crate::replica_auth`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use interpreter_core::config::ForwardAllow;
use interpreter_core::store::{RUNS_ELSEWHERE_CODE, RemoteOwner, RunsElsewhere};
use interpreter_protocol::ThreadId;
use rmcp::RoleServer;
use rmcp::model::{ErrorCode, ErrorData, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::replica_auth::{ReplicaKeys, SIGNATURE_HEADER, SignedRequest};
use crate::turns::Registry;

/// Marks a request one replica forwarded to another; such a request is never forwarded
/// again.
pub(crate) const FORWARDED_HEADER: &str = "interpreter-forwarded";

/// How long the owner has to accept the forwarded connection. The call itself may then
/// run as long as the turn does: it ends with the answer or with the caller's cancel.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a forwarded call that is still waiting checks the owner is alive.
const OWNER_CHECK: Duration = Duration::from_secs(5);

/// Headers a forwarded request keeps from the caller's: the protocol's own (the owner
/// validates them against the body, as the first replica did). Never the caller's
/// credentials: the owner is whatever the store names, and the forward is
/// authenticated by the replica key instead.
fn kept_header(name: &str) -> bool {
    // The caller's trace goes along, so the replica that runs the turn parents it there.
    name == "traceparent"
        || name == "tracestate"
        || name == "mcp-protocol-version"
        || name == "mcp-method"
        || name == "mcp-name"
        || name.starts_with("mcp-param-")
}

/// Headers a forward's signature covers: the kept ones, the loop guard and the body's
/// type.
pub(crate) fn signed_header(name: &str) -> bool {
    kept_header(name) || name == FORWARDED_HEADER || name == "content-type"
}

/// What this replica needs to forward: the fleet's replica key, and where it may send
/// it. Set once the listener knows its own address.
#[derive(Debug)]
pub(crate) struct Peers {
    pub keys: Arc<ReplicaKeys>,
    pub allow: ForwardAllow,
}

/// The retryable refusal for a request about a thread `owner` runs; `data.reason` says
/// why it was not forwarded.
pub(crate) fn runs_elsewhere(thread_id: ThreadId, owner: &str, why: &str) -> ErrorData {
    let data = serde_json::to_value(RunsElsewhere::new(thread_id, owner))
        .ok()
        .map(|mut data| {
            if let Some(object) = data.as_object_mut() {
                object.insert("reason".to_string(), json!(why));
            }
            data
        });
    ErrorData::new(
        ErrorCode(RUNS_ELSEWHERE_CODE),
        format!(
            "thread {thread_id} is running on replica {owner} ({why}); nothing ran here: retry \
             in a moment, or once its turn ends"
        ),
        data,
    )
}

/// The answer when the owner stopped while a forwarded request waited on it. Unlike
/// [`runs_elsewhere`] something may have run (the owner's turn, up to where it stopped,
/// is saved); sending the request again continues from there on a live replica.
fn owner_lost(thread_id: ThreadId, owner: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "replica {owner}, which ran thread {thread_id}, stopped answering while this \
             request waited on it; what it did is saved in the thread: send the request \
             again to continue on another replica"
        ),
        Some(json!({"threadId": thread_id.to_string(), "owner": owner, "retryable": true})),
    )
}

/// The one HTTP client forwards go through, so connections to each owner are reused.
fn client() -> Result<&'static reqwest::Client, ErrorData> {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let built = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        // A redirect would lead to an address the allow list never saw.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ErrorData::internal_error(format!("forwarding client: {e}"), None))?;
    Ok(CLIENT.get_or_init(|| built))
}

/// Whether `ctx` is an HTTP request another replica forwarded here.
fn was_forwarded(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.extensions
        .get::<http::request::Parts>()
        .is_some_and(|parts| parts.headers.contains_key(FORWARDED_HEADER))
}

/// The other live replica that runs `thread_id`, if one does. A store that cannot say
/// (unreachable) answers `None`: the request then goes the local way, where the lease
/// is checked again and the store's own error reported.
pub(crate) async fn owner_elsewhere(
    registry: &Registry,
    thread_id: ThreadId,
) -> Option<RemoteOwner> {
    let store = registry.store().await.ok()?;
    match store.owner_elsewhere(thread_id).await {
        Ok(owner) => owner,
        Err(err) => {
            tracing::warn!("asking the thread store who runs {thread_id}: {err}");
            None
        }
    }
}

/// Sends `method` with `params` to `owner` and returns its JSON-RPC `result`, or its
/// error as is. `modern` says whether the caller speaks 2026-07-28 (only such requests
/// stand alone, so only they can be forwarded).
pub(crate) async fn forward(
    registry: &Registry,
    owner: &RemoteOwner,
    thread_id: ThreadId,
    method: &str,
    mut params: Value,
    modern: bool,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    let refuse = |why: &str| runs_elsewhere(thread_id, &owner.replica, why);
    if !modern {
        return Err(refuse(
            "a legacy-era session's turn is followed on its own replica; route its requests \
             there (sticky sessions)",
        ));
    }
    if was_forwarded(ctx) {
        return Err(refuse("this request was already forwarded once"));
    }
    let Some(url) = owner.internal_url.as_deref() else {
        return Err(refuse("it advertised no internal URL"));
    };
    let Some(peers) = registry.peers.get() else {
        return Err(refuse(
            "this replica has no fleet replica key to forward with (an HTTP listener on a \
             shared thread store loads one)",
        ));
    };
    let target = match allowed_target(&peers.allow, url) {
        Ok(target) => target,
        Err(why) => {
            // The store named an address the operator did not allow: whoever wrote it,
            // it is not contacted.
            eprintln!(
                "warning: not forwarding {method} for thread {thread_id} to replica {}: {why}",
                owner.replica
            );
            return Err(refuse(&why));
        }
    };
    if let Some(object) = params.as_object_mut()
        && !object.contains_key("_meta")
        && let Ok(meta) = serde_json::to_value(&ctx.meta)
    {
        object.insert("_meta".to_string(), meta);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let body = serde_json::to_vec(&body)
        .map_err(|e| ErrorData::internal_error(format!("forwarded request: {e}"), None))?;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(FORWARDED_HEADER, http::HeaderValue::from_static("1"));
    if let Some(parts) = ctx.extensions.get::<http::request::Parts>() {
        for (name, value) in &parts.headers {
            if kept_header(name.as_str()) {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    let signature = peers
        .keys
        .sign(&SignedRequest {
            method: "POST",
            url: target.as_str(),
            headers: &headers,
            body: &body,
        })
        .map_err(|e| refuse(&e.to_string()))?;
    let signature = http::HeaderValue::from_str(&signature)
        .map_err(|e| refuse(&format!("the signature is not a header value: {e}")))?;
    headers.insert(SIGNATURE_HEADER, signature);
    let request = client()?.post(target).headers(headers).body(body);
    tracing::info!(
        "forwarding {method} for thread {thread_id} to {}",
        owner.replica
    );
    // The call may rightly take as long as the turn. What ends it early is the owner
    // itself stopping (dead, or paused) while we wait: its heartbeat in the store goes
    // stale, and no answer is coming.
    let owner_stopped = async {
        let Ok(store) = registry.store().await else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(OWNER_CHECK).await;
            if let Ok(false) = store.replica_alive(&owner.replica).await {
                return;
            }
        }
    };
    // Dropping the request (the caller cancelled: its stream closed) closes the
    // forwarded stream, which the owner takes as the same cancel.
    let answer = tokio::select! {
        answer = exchange(request, &ctx.peer) => answer,
        () = owner_stopped => return Err(owner_lost(thread_id, &owner.replica)),
        () = ctx.ct.cancelled() => return Err(ErrorData::internal_error("the request was cancelled", None)),
    };
    match answer {
        Ok(message) => {
            if let Some(error) = message.get("error") {
                return Err(serde_json::from_value(error.clone()).unwrap_or_else(|_| {
                    ErrorData::internal_error(format!("the owner answered {error}"), None)
                }));
            }
            message
                .get("result")
                .cloned()
                .ok_or_else(|| ErrorData::internal_error("the owner answered no result", None))
        }
        Err(why) => {
            tracing::warn!("forwarding to {} at {url}: {why}", owner.replica);
            Err(refuse(&format!("it could not be reached: {why}")))
        }
    }
}

/// Whether `url` may be contacted: an `http`/`https` URL without credentials in it,
/// whose host and port the allow list admits. The error says why not.
fn allowed_target(allow: &ForwardAllow, url: &str) -> Result<reqwest::Url, String> {
    // The URL is whatever the store holds: shown bounded and escaped.
    let shown: String = url.chars().take(200).collect();
    let not = |why: &str| format!("its internal URL {shown:?} {why}");
    let parsed = reqwest::Url::parse(url).map_err(|e| not(&format!("is not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(not("is not http:// or https://"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(not("carries credentials, which no replica advertises"));
    }
    let allowed = match (parsed.host_str(), parsed.port_or_known_default()) {
        (Some(host), Some(port)) => allow.allows(host, port),
        _ => return Err(not("names no host")),
    };
    if !allowed {
        return Err(not(&format!(
            "is not an address this replica forwards to ({}); set \
             mcp_server.fleet_forward_allow to the fleet's addresses",
            allow.describe()
        )));
    }
    Ok(parsed)
}

/// One POST: the JSON-RPC response to it, from a JSON body or the SSE stream. Progress
/// the owner reports on the stream (for the caller's own progress token, which the
/// forwarded request carries) is relayed to the caller as it comes.
async fn exchange(
    request: reqwest::RequestBuilder,
    caller: &rmcp::Peer<RoleServer>,
) -> Result<Value, String> {
    let mut response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let is_stream = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_stream {
        let text = response.text().await.map_err(|e| e.to_string())?;
        return serde_json::from_str::<Value>(&text)
            .ok()
            .filter(|v| v.get("result").is_some() || v.get("error").is_some())
            .ok_or_else(|| {
                format!(
                    "HTTP {status}: {}",
                    text.chars().take(200).collect::<String>()
                )
            });
    }
    let mut events = SseLines::default();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        for data in events.push(&chunk) {
            let Ok(message) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if message.get("id").is_some()
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                return Ok(message);
            }
            if message.get("method").and_then(Value::as_str) == Some("notifications/progress")
                && let Some(progress) = message
                    .get("params")
                    .cloned()
                    .and_then(|p| serde_json::from_value::<ProgressNotificationParam>(p).ok())
                && let Err(e) = caller.notify_progress(progress).await
            {
                tracing::debug!("could not relay progress: {e}");
            }
        }
    }
    Err("the owner's stream ended without an answer".to_string())
}

/// Splits an SSE byte stream into the `data` of each event.
#[derive(Default)]
struct SseLines {
    pending: Vec<u8>,
    data: String,
}

/// An event larger than this is not an answer we can relay (a tool result is capped far
/// below it); its bytes are dropped rather than held.
const MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

impl SseLines {
    fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut done = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    done.push(std::mem::take(&mut self.data));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if self.pending.len() + self.data.len() > MAX_EVENT_BYTES {
            self.pending.clear();
            self.data.clear();
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks() {
        let mut lines = SseLines::default();
        assert!(lines.push(b"id: 1\ndata: {\"a\"").is_empty());
        assert_eq!(
            lines.push(b":1}\n\ndata: x\r\n"),
            vec!["{\"a\":1}".to_string()]
        );
        assert_eq!(lines.push(b"data: y\n\n"), vec!["x\ny".to_string()]);
    }

    #[test]
    fn only_allowed_plain_urls_are_contacted() {
        let allow = ForwardAllow::default_for(Some(("10.0.0.11", 8765)));
        assert!(allowed_target(&allow, "http://10.0.0.12:8765/mcp").is_ok());
        assert!(allowed_target(&allow, "http://127.0.0.1:1/mcp").is_ok());
        for (url, why) in [
            ("http://10.0.1.12:8765/mcp", "fleet_forward_allow"),
            ("http://10.0.0.12:22/mcp", "fleet_forward_allow"),
            ("http://evil.example:8765/mcp", "fleet_forward_allow"),
            ("http://user:pw@127.0.0.1:1/mcp", "credentials"),
            ("file:///etc/passwd", "http://"),
            ("unix:/run/x", "http://"),
            ("not a url", "is not a URL"),
        ] {
            let error = allowed_target(&allow, url).err().unwrap_or_default();
            assert!(error.contains(why), "{url}: {error}");
        }
        // 0x7f000001 is 127.0.0.1 to the URL parser and to the connection alike.
        assert!(allowed_target(&allow, "http://0x7f000001:1/").is_ok());
        let long = format!("http://{}/", "a".repeat(10_000));
        assert!(
            allowed_target(&allow, &long)
                .err()
                .unwrap_or_default()
                .len()
                < 1_000
        );
    }

    #[test]
    fn only_protocol_headers_are_kept() {
        for kept in [
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
            "mcp-param-threadid",
        ] {
            assert!(kept_header(kept), "{kept}");
        }
        for dropped in [
            "authorization",
            "proxy-authorization",
            "host",
            "cookie",
            "mcp-session-id",
            FORWARDED_HEADER,
            "x-forwarded-for",
        ] {
            assert!(!kept_header(dropped), "{dropped}");
        }
    }
}
