//! How fleet replicas authenticate to each other: with a key of their own, never with
//! the caller's token.
//!
//! A replica forwards a request about a thread another replica runs to the URL that
//! replica wrote in the thread store ([`crate::fleet`]). Whoever can write the store can
//! change that URL, so what goes there must be worth nothing anywhere else. The
//! forwarder sends no `Authorization`; it signs the request with the fleet's replica key
//! (a keyring file every replica holds, [`crate::keyring`]) in the
//! [`SIGNATURE_HEADER`]:
//!
//! ```text
//! interpreter-replica-signature: v1;key=k1;ts=1767225600;nonce=<32 hex>;mac=<64 hex>
//! ```
//!
//! `mac` is HMAC-SHA256 under key `k1` over the method, the URL the request was sent to,
//! the SHA-256 of the body, the timestamp, the nonce, the key id and the protocol headers
//! the forward carries (the loop guard [`crate::fleet::FORWARDED_HEADER`] among them).
//! The receiving replica checks the MAC against its own advertised URL, so a request a
//! listener received at its URL does not verify at any replica's; it accepts a
//! timestamp within [`SIGNATURE_WINDOW`] of its clock and each nonce once within that
//! window. A request that verifies is authenticated (the fleet shares one caller token,
//! so every caller may ask every replica alike); one that does not is refused with 401
//! and the reason on stderr.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::fleet;

/// The header a forwarded request carries its signature in.
pub const SIGNATURE_HEADER: &str = "interpreter-replica-signature";

/// How far a signature's timestamp may be from the receiver's clock, either way. Also
/// how long a nonce is remembered after its timestamp.
pub(crate) const SIGNATURE_WINDOW: Duration = Duration::from_secs(30);

/// Nonces remembered at most; a replica that would need more within one window refuses
/// the surplus rather than forget one early (which would let it be replayed).
const MAX_REMEMBERED_NONCES: usize = 100_000;

/// Separates this MAC from any other the same key could make.
const DOMAIN: &[u8] = b"interpreter-replica-forward/v1\n";

/// Random bytes in a nonce (hex-encoded in the header).
const NONCE_BYTES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, thiserror::Error)]
pub enum ReplicaKeyError {
    #[error("fleet key file {}: {reason}", path.display())]
    KeyFile { path: PathBuf, reason: String },
    #[error("cannot sign a forwarded request: {0}")]
    Sign(String),
}

/// The fleet's replica keys: the first signs, every one verifies.
pub struct ReplicaKeys {
    keys: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for ReplicaKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("ReplicaKeys").field("ids", &ids).finish()
    }
}

/// What a signature covers besides its own fields.
pub struct SignedRequest<'a> {
    pub method: &'a str,
    /// The URL the request is sent to (the receiver's advertised internal URL).
    pub url: &'a str,
    /// Only the headers [`fleet::signed_header`] names count.
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

impl ReplicaKeys {
    /// The keyring in `path`, created with one fresh key when missing.
    pub fn from_key_file(path: &Path) -> Result<Self, ReplicaKeyError> {
        let keys = crate::keyring::load(path).map_err(|reason| ReplicaKeyError::KeyFile {
            path: path.to_path_buf(),
            reason,
        })?;
        Ok(Self { keys })
    }

    /// The signature header's value for `request`, now, with a fresh nonce.
    pub fn sign(&self, request: &SignedRequest<'_>) -> Result<String, ReplicaKeyError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|e| ReplicaKeyError::Sign(e.to_string()))?;
        let nonce = interpreter_transport::listener::hex(&nonce);
        self.sign_at(unix_now(), &nonce, request)
    }

    /// The signature header's value for `request` at `unix_secs` with `nonce` (32 hex
    /// digits). Public so tests can make the signatures an attacker would try.
    pub fn sign_at(
        &self,
        unix_secs: u64,
        nonce: &str,
        request: &SignedRequest<'_>,
    ) -> Result<String, ReplicaKeyError> {
        let (id, key) = self
            .keys
            .first()
            .ok_or_else(|| ReplicaKeyError::Sign("the fleet key file holds no key".to_string()))?;
        let url = normalized_url(request.url)
            .ok_or_else(|| ReplicaKeyError::Sign(format!("`{}` is not a URL", request.url)))?;
        let tag = mac(key, id, unix_secs, nonce, request, &url)
            .ok_or_else(|| ReplicaKeyError::Sign(format!("key `{id}` is not an HMAC key")))?
            .finalize()
            .into_bytes();
        Ok(format!(
            "v1;key={id};ts={unix_secs};nonce={nonce};mac={}",
            interpreter_transport::listener::hex(&tag)
        ))
    }

    fn key(&self, id: &str) -> Option<&[u8]> {
        self.keys
            .iter()
            .find(|(key_id, _)| key_id == id)
            .map(|(_, key)| key.as_slice())
    }
}

/// The MAC over everything a signature covers. `url` is already normalized. `None`
/// only for a key HMAC refuses (it takes keys of any length).
fn mac(
    key: &[u8],
    key_id: &str,
    unix_secs: u64,
    nonce: &str,
    request: &SignedRequest<'_>,
    url: &str,
) -> Option<HmacSha256> {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).ok()?;
    let body_digest = Sha256::digest(request.body);
    for part in [
        key_id.as_bytes(),
        unix_secs.to_string().as_bytes(),
        nonce.as_bytes(),
        request.method.as_bytes(),
        url.as_bytes(),
        interpreter_transport::listener::hex(&body_digest).as_bytes(),
    ] {
        mac.update(DOMAIN);
        mac.update(part);
    }
    let mut headers: Vec<(&str, &[u8])> = request
        .headers
        .iter()
        .filter(|(name, _)| fleet::signed_header(name.as_str()))
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    headers.sort_unstable();
    for (name, value) in headers {
        // Names are lower-case tokens and values hold no newline (HTTP forbids both
        // otherwise), so `name:value\n` lines cannot run into each other.
        mac.update(name.as_bytes());
        mac.update(b":");
        mac.update(value);
        mac.update(b"\n");
    }
    Some(mac)
}

/// A URL as both sides compare it: parsed and printed back (`HTTP://Host:80/mcp` and
/// `http://host/mcp` are one URL).
pub(crate) fn normalized_url(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok().map(|url| url.to_string())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a forwarded request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The signature is not one this replica accepts (401).
    Unauthorized(String),
    /// Too many forwarded requests within the window to remember their nonces (503).
    Busy(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unauthorized(why) | Self::Busy(why) => f.write_str(why),
        }
    }
}

/// The receiving side: checks the signatures of requests forwarded to this replica.
pub(crate) struct ReplicaVerifier {
    keys: std::sync::Arc<ReplicaKeys>,
    /// This replica's advertised internal URL, normalized: the only URL a signature
    /// verifies for here. `None`: it advertises none, so nothing is forwarded to it.
    own_url: Option<String>,
    /// Nonces seen, with the time (unix seconds) after which their signature has
    /// expired and they need not be remembered.
    seen: Mutex<HashMap<String, u64>>,
}

/// The parts of a signature header.
struct Signature<'a> {
    key_id: &'a str,
    unix_secs: u64,
    nonce: &'a str,
    mac: Vec<u8>,
}

fn parse_signature(value: &str) -> Result<Signature<'_>, String> {
    let malformed = || {
        format!(
            "the {SIGNATURE_HEADER} header is not `v1;key=ID;ts=UNIX_SECONDS;nonce=HEX;mac=HEX`"
        )
    };
    let mut fields = value.split(';');
    if fields.next() != Some("v1") {
        return Err(malformed());
    }
    let mut field = |name: &str| {
        fields
            .next()
            .and_then(|f| f.strip_prefix(name))
            .and_then(|f| f.strip_prefix('='))
            .ok_or_else(malformed)
    };
    let key_id = field("key")?;
    let unix_secs = field("ts")?.parse::<u64>().map_err(|_| malformed())?;
    let nonce = field("nonce")?;
    let mac = field("mac")?;
    if fields.next().is_some()
        || !crate::keyring::valid_key_id(key_id)
        || nonce.len() != NONCE_BYTES * 2
        || !nonce.bytes().all(|b| b.is_ascii_hexdigit())
        || mac.len() != 64
    {
        return Err(malformed());
    }
    let mac = (0..mac.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&mac[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| malformed())?;
    Ok(Signature {
        key_id,
        unix_secs,
        nonce,
        mac,
    })
}

impl ReplicaVerifier {
    pub(crate) fn new(keys: std::sync::Arc<ReplicaKeys>, own_url: Option<&str>) -> Self {
        Self {
            keys,
            own_url: own_url.and_then(normalized_url),
            seen: Mutex::default(),
        }
    }

    /// Whether a request carrying [`SIGNATURE_HEADER`] is a replica's, sent to this one,
    /// within the window, and not seen before.
    pub(crate) fn verify(
        &self,
        method: &http::Method,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), Refusal> {
        self.verify_at(unix_now(), method, headers, body)
    }

    fn verify_at(
        &self,
        now: u64,
        method: &http::Method,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), Refusal> {
        let refuse = |why: String| Err(Refusal::Unauthorized(why));
        let mut values = headers.get_all(SIGNATURE_HEADER).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return refuse(format!("it carries no single {SIGNATURE_HEADER} header"));
        };
        let Ok(value) = value.to_str() else {
            return refuse(format!("the {SIGNATURE_HEADER} header is not text"));
        };
        let signature = match parse_signature(value) {
            Ok(signature) => signature,
            Err(why) => return refuse(why),
        };
        let Some(own_url) = &self.own_url else {
            return refuse(
                "this replica advertises no internal URL, so no replica forwards to it".to_string(),
            );
        };
        let Some(key) = self.keys.key(signature.key_id) else {
            return refuse(format!(
                "it is signed with key `{}`, which this replica's fleet key file does not hold",
                signature.key_id
            ));
        };
        let window = SIGNATURE_WINDOW.as_secs();
        if now > signature.unix_secs.saturating_add(window) {
            return refuse(format!(
                "its signature expired: made {} s ago, accepted for {window} s",
                now - signature.unix_secs
            ));
        }
        if signature.unix_secs > now.saturating_add(window) {
            return refuse(format!(
                "its signature is dated {} s in the future (are the replicas' clocks in sync?)",
                signature.unix_secs - now
            ));
        }
        if !headers.contains_key(fleet::FORWARDED_HEADER) {
            return refuse(format!(
                "it lacks the {} header every forwarded request carries",
                fleet::FORWARDED_HEADER
            ));
        }
        let request = SignedRequest {
            method: method.as_str(),
            url: own_url,
            headers,
            body,
        };
        let Some(expected) = mac(
            key,
            signature.key_id,
            signature.unix_secs,
            signature.nonce,
            &request,
            own_url,
        ) else {
            return refuse(format!("key `{}` is not an HMAC key", signature.key_id));
        };
        // Constant time: no early exit that would tell how much of a guess matched.
        if expected.verify_slice(&signature.mac).is_err() {
            return refuse(format!(
                "its signature does not match: signed with another key, for another URL than \
                 this replica's {own_url} (a request sent to one address and replayed to \
                 another), or altered on the way"
            ));
        }
        self.first_use(
            signature.nonce,
            signature.unix_secs.saturating_add(window),
            now,
        )
    }

    /// Remembers `nonce` until `forget_after`; refuses one already remembered.
    fn first_use(&self, nonce: &str, forget_after: u64, now: u64) -> Result<(), Refusal> {
        let Ok(mut seen) = self.seen.lock() else {
            return Err(Refusal::Busy("the nonce table is unusable".to_string()));
        };
        if seen.contains_key(nonce) {
            return Err(Refusal::Unauthorized(
                "it is a replay: a request with its nonce was already accepted".to_string(),
            ));
        }
        if seen.len() >= MAX_REMEMBERED_NONCES {
            seen.retain(|_, expiry| *expiry >= now);
        }
        if seen.len() >= MAX_REMEMBERED_NONCES {
            return Err(Refusal::Busy(format!(
                "more than {MAX_REMEMBERED_NONCES} forwarded requests arrived within {} s",
                SIGNATURE_WINDOW.as_secs()
            )));
        }
        seen.insert(nonce.to_string(), forget_after);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const URL: &str = "http://10.0.0.12:8765/mcp";
    const NONCE: &str = "00112233445566778899aabbccddeeff";

    fn keys(text: &str) -> Arc<ReplicaKeys> {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("keys");
        {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .unwrap_or_else(|e| panic!("{e}"));
            file.write_all(text.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        Arc::new(ReplicaKeys::from_key_file(&path).unwrap_or_else(|e| panic!("{e}")))
    }

    fn forwarded_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(fleet::FORWARDED_HEADER, http::HeaderValue::from_static("1"));
        headers.insert("mcp-method", http::HeaderValue::from_static("tools/call"));
        headers
    }

    fn signed(keys: &ReplicaKeys, at: u64, nonce: &str, url: &str, body: &[u8]) -> HeaderMap {
        let mut headers = forwarded_headers();
        let value = keys
            .sign_at(
                at,
                nonce,
                &SignedRequest {
                    method: "POST",
                    url,
                    headers: &headers,
                    body,
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        headers.insert(
            SIGNATURE_HEADER,
            http::HeaderValue::from_str(&value).unwrap_or_else(|e| panic!("{e}")),
        );
        headers
    }

    fn refused(result: Result<(), Refusal>) -> String {
        match result {
            Err(Refusal::Unauthorized(why)) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_signature_verifies_once_for_its_url_body_and_headers_only() {
        let fleet = keys(&format!("k1 {}\n", "a".repeat(64)));
        let verifier = ReplicaVerifier::new(fleet.clone(), Some(URL));
        let now = 1_000_000;
        let post = http::Method::POST;
        let headers = signed(&fleet, now, NONCE, URL, b"{}");
        assert_eq!(verifier.verify_at(now + 5, &post, &headers, b"{}"), Ok(()));
        let why = refused(verifier.verify_at(now + 5, &post, &headers, b"{}"));
        assert!(why.contains("replay"), "{why}");

        let other = NONCE.replace('0', "f");
        let headers = signed(&fleet, now, &other, URL, b"{}");
        let why = refused(verifier.verify_at(now, &post, &headers, b"{\"x\":1}"));
        assert!(why.contains("does not match"), "{why}");
        let mut altered = headers.clone();
        altered.insert("mcp-name", http::HeaderValue::from_static("codex"));
        assert!(verifier.verify_at(now, &post, &altered, b"{}").is_err());
        let mut unguarded = headers.clone();
        unguarded.remove(fleet::FORWARDED_HEADER);
        let why = refused(verifier.verify_at(now, &post, &unguarded, b"{}"));
        assert!(why.contains(fleet::FORWARDED_HEADER), "{why}");
        // A host name's case and a default port do not make another URL.
        let same = ReplicaVerifier::new(fleet.clone(), Some("HTTP://10.0.0.12:8765/mcp"));
        assert_eq!(same.verify_at(now, &post, &headers, b"{}"), Ok(()));
    }

    #[test]
    fn a_request_signed_for_one_replica_is_refused_by_another() {
        let fleet = keys(&format!("k1 {}\n", "a".repeat(64)));
        let listener = "http://127.0.0.1:9/mcp";
        let headers = signed(&fleet, 1_000, NONCE, listener, b"{}");
        let replica = ReplicaVerifier::new(fleet, Some(URL));
        let why = refused(replica.verify_at(1_000, &http::Method::POST, &headers, b"{}"));
        assert!(why.contains("another URL"), "{why}");
    }

    #[test]
    fn stale_future_foreign_and_malformed_signatures_are_refused() {
        let fleet = keys(&format!("k1 {}\n", "a".repeat(64)));
        let verifier = ReplicaVerifier::new(fleet.clone(), Some(URL));
        let post = http::Method::POST;
        let headers = signed(&fleet, 1_000, NONCE, URL, b"");
        let why = refused(verifier.verify_at(1_031, &post, &headers, b""));
        assert!(why.contains("expired"), "{why}");
        let why = refused(verifier.verify_at(969, &post, &headers, b""));
        assert!(why.contains("future"), "{why}");
        let stranger = keys(&format!("k1 {}\n", "b".repeat(64)));
        let forged = signed(&stranger, 1_000, NONCE, URL, b"");
        let why = refused(verifier.verify_at(1_000, &post, &forged, b""));
        assert!(why.contains("does not match"), "{why}");
        let unknown = keys(&format!("k9 {}\n", "a".repeat(64)));
        let why = refused(verifier.verify_at(
            1_000,
            &post,
            &signed(&unknown, 1_000, NONCE, URL, b""),
            b"",
        ));
        assert!(why.contains("`k9`"), "{why}");
        for bad in [
            "v2;key=k1;ts=1;nonce=00;mac=00",
            "v1;key=k1;ts=x;nonce=00112233445566778899aabbccddeeff;mac=00",
            "v1;ts=1;key=k1;nonce=00112233445566778899aabbccddeeff;mac=00",
            "",
        ] {
            let mut headers = forwarded_headers();
            headers.insert(
                SIGNATURE_HEADER,
                http::HeaderValue::from_str(bad).unwrap_or_else(|e| panic!("{e}")),
            );
            let why = refused(verifier.verify_at(1_000, &post, &headers, b""));
            assert!(why.contains("is not `v1"), "{bad}: {why}");
        }
        let nowhere = ReplicaVerifier::new(fleet, None);
        let why = refused(nowhere.verify_at(1_000, &post, &headers, b""));
        assert!(why.contains("advertises no internal URL"), "{why}");
    }

    #[test]
    fn a_rotation_verifies_old_and_new_keys() {
        let old = format!("old {}", "a".repeat(64));
        let new = format!("new {}", "b".repeat(64));
        let before = keys(&format!("{old}\n"));
        let staged = keys(&format!("{old}\n{new}\n"));
        let promoted = keys(&format!("{new}\n{old}\n"));
        let verifier = ReplicaVerifier::new(staged, Some(URL));
        let post = http::Method::POST;
        let by_old = signed(&before, 1_000, NONCE, URL, b"");
        assert_eq!(verifier.verify_at(1_000, &post, &by_old, b""), Ok(()));
        let by_new = signed(&promoted, 1_000, &NONCE.replace('0', "1"), URL, b"");
        assert_eq!(verifier.verify_at(1_000, &post, &by_new, b""), Ok(()));
    }
}
