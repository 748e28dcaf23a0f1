//! 2026-07-28 approvals as Multi Round-Trip Requests.
//!
//! That revision has no server→client requests: a `tools/call` that needs an approval
//! ends with `InputRequiredResult` holding the `elicitation/create` in `inputRequests` and
//! an opaque `requestState`, and the client retries the call with `inputResponses`.
//! The turn itself stays suspended on the server, waiting for the decision.
//!
//! `requestState` is attacker-controlled input, so it is sealed with rmcp's
//! [`RequestStateCodec`] (HMAC-SHA256), bound to the tool, carrying the thread and the
//! pending approval's one-time id, with an expiry. A forged, tampered, expired or foreign
//! state fails to open; a replayed one opens but finds its approval already redeemed.
//! Either way nothing runs.
//!
//! The key exists only in this process unless `mcp_server.request_state_key_file` names
//! a keyring every replica of a fleet loads, so a retry that a load balancer sends to
//! another replica still opens there (and is forwarded to the turn's owner). The file
//! holds one `<id> <hex key>` per line: the first line seals, every line opens, which is
//! the staged rotation rmcp's keyring allows (add the new key second everywhere, then
//! move it first everywhere, then drop the old one once its states expired).

use std::path::Path;
use std::time::Duration;

use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};

/// The key of our one entry in `inputRequests` / `inputResponses`.
pub(crate) const APPROVAL_INPUT_KEY: &str = "approval";

/// What a sealed `requestState` carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SuspendedApproval {
    /// The thread whose turn waits.
    pub thread: String,
    /// One-time id of the pending approval in that turn.
    pub approval: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MrtrError {
    #[error("could not create the request-state key: {0}")]
    Key(String),
    #[error("request-state key file {}: {reason}", path.display())]
    KeyFile {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("requestState was refused: {0}")]
    Refused(#[from] RequestStateError),
}

/// The process's request-state sealer.
pub(crate) struct RequestStates {
    codec: RequestStateCodec,
}

impl RequestStates {
    /// A codec with a fresh random key; states sealed by another process never open here.
    pub(crate) fn new() -> Result<Self, MrtrError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| MrtrError::Key(e.to_string()))?;
        let codec = RequestStateCodec::try_new(key.to_vec())?;
        Ok(Self { codec })
    }

    /// A codec over the keyring in `path` (see [`crate::keyring`]: created with one
    /// fresh key when missing, readable only by its owner; a file others may read is
    /// refused).
    pub(crate) fn from_key_file(path: &Path) -> Result<Self, MrtrError> {
        let fail = |reason: String| MrtrError::KeyFile {
            path: path.to_path_buf(),
            reason,
        };
        let keys = crate::keyring::load(path).map_err(fail)?;
        let active = keys
            .first()
            .map(|(id, _)| id.clone())
            .ok_or_else(|| fail("holds no key".to_string()))?;
        let codec =
            RequestStateCodec::new_with_keyring(active, keys).map_err(|e| fail(e.to_string()))?;
        Ok(Self { codec })
    }

    fn associated_data(tool: &str) -> Vec<u8> {
        format!("interpreter/mcp-server/approval|{tool}").into_bytes()
    }

    pub(crate) fn seal(
        &self,
        state: &SuspendedApproval,
        tool: &str,
        ttl: Duration,
    ) -> Result<String, MrtrError> {
        let context = Self::associated_data(tool);
        Ok(self.codec.seal_json_with(
            state,
            &SealOptions::new().associated_data(&context).ttl(ttl),
        )?)
    }

    pub(crate) fn open(&self, sealed: &str, tool: &str) -> Result<SuspendedApproval, MrtrError> {
        let context = Self::associated_data(tool);
        Ok(self.codec.open_json_with(sealed, &context)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SuspendedApproval {
        SuspendedApproval {
            thread: "t".to_string(),
            approval: 7,
        }
    }

    #[test]
    fn sealed_state_opens_only_for_its_tool_and_process() {
        let states = RequestStates::new().unwrap_or_else(|e| panic!("{e}"));
        let sealed = states
            .seal(&state(), "codex", Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(states.open(&sealed, "codex").ok(), Some(state()));
        assert!(states.open(&sealed, "codex-reply").is_err());
        let other = RequestStates::new().unwrap_or_else(|e| panic!("{e}"));
        assert!(other.open(&sealed, "codex").is_err());
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(states.open(&tampered, "codex").is_err());
        assert!(states.open("garbage", "codex").is_err());
        assert!(states.open("", "codex").is_err());
    }

    fn write_private(path: &Path, text: &str) {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .unwrap_or_else(|e| panic!("{e}"));
        file.write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn replicas_sharing_a_key_file_open_each_others_states() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("keys");
        let first = RequestStates::from_key_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let second = RequestStates::from_key_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let sealed = first
            .seal(&state(), "codex", Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(second.open(&sealed, "codex").ok(), Some(state()));
        let fresh = RequestStates::new().unwrap_or_else(|e| panic!("{e}"));
        assert!(fresh.open(&sealed, "codex").is_err());
    }

    #[test]
    fn staged_rotation_keeps_every_state_open() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let old = format!("old {}", "a".repeat(64));
        let new = format!("new {}", "b".repeat(64));
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            write_private(&path, text);
            RequestStates::from_key_file(&path).unwrap_or_else(|e| panic!("{e}"))
        };
        let before = file("before", &format!("{old}\n"));
        let staged = file("staged", &format!("# rotating\n{old}\n{new}\n"));
        let promoted = file("promoted", &format!("{new}\n{old}\n"));
        let after = file("after", &format!("{new}\n"));
        let seal = |states: &RequestStates| {
            states
                .seal(&state(), "codex", Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let by_old = seal(&before);
        let by_new = seal(&promoted);
        assert!(staged.open(&by_old, "codex").is_ok());
        assert!(staged.open(&by_new, "codex").is_ok());
        assert!(promoted.open(&by_old, "codex").is_ok());
        assert!(after.open(&by_new, "codex").is_ok());
        assert!(after.open(&by_old, "codex").is_err());
    }

    #[test]
    fn weak_or_exposed_key_files_are_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (name, text) in [
            ("short", "k1 abcd\n"),
            ("not-hex", &format!("k1 {}\n", "zz".repeat(32))),
            (
                "no-key",
                "# nothing here but a comment that is long enough\n",
            ),
            ("no-id", &format!("{}\n", "a".repeat(64))),
        ] {
            let path = dir.path().join(name);
            write_private(&path, text);
            assert!(RequestStates::from_key_file(&path).is_err(), "{name}");
        }
        let exposed = dir.path().join("exposed");
        std::fs::write(&exposed, format!("k1 {}\n", "a".repeat(64)))
            .unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&exposed, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(RequestStates::from_key_file(&exposed).is_err());
    }

    #[test]
    fn expired_state_is_refused() {
        let states = RequestStates::new().unwrap_or_else(|e| panic!("{e}"));
        let sealed = states
            .seal(&state(), "codex", Duration::from_millis(1))
            .unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(
            states.open(&sealed, "codex"),
            Err(MrtrError::Refused(RequestStateError::Expired))
        ));
    }
}
