//! 2026-07-28 approvals as Multi Round-Trip Requests.
//!
//! That revision has no server→client requests: a `tools/call` that needs an approval
//! ends with `InputRequiredResult` holding the `elicitation/create` in `inputRequests` and
//! an opaque `requestState`, and the client retries the call with `inputResponses`.
//! The turn itself stays suspended on the server, waiting for the decision.
//!
//! `requestState` is attacker-controlled input, so it is sealed with rmcp's
//! [`RequestStateCodec`] (HMAC-SHA256) under a key that exists only in this process,
//! bound to the tool, carrying the thread and the pending approval's one-time id, with an
//! expiry. A forged, tampered, expired or foreign state fails to open; a replayed one
//! opens but finds its approval already redeemed. Either way nothing runs.

use std::time::Duration;

use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};

/// The key of our one entry in `inputRequests` / `inputResponses`.
pub const APPROVAL_INPUT_KEY: &str = "approval";

/// What a sealed `requestState` carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuspendedApproval {
    /// The thread whose turn waits.
    pub thread: String,
    /// One-time id of the pending approval in that turn.
    pub approval: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MrtrError {
    #[error("could not create the request-state key: {0}")]
    Key(String),
    #[error("requestState was refused: {0}")]
    Refused(#[from] RequestStateError),
}

/// The process's request-state sealer.
pub struct RequestStates {
    codec: RequestStateCodec,
}

impl RequestStates {
    /// A codec with a fresh random key; states sealed by another process never open here.
    pub fn new() -> Result<Self, MrtrError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| MrtrError::Key(e.to_string()))?;
        let codec = RequestStateCodec::try_new(key.to_vec())?;
        Ok(Self { codec })
    }

    fn associated_data(tool: &str) -> Vec<u8> {
        format!("interpreter/mcp-server/approval|{tool}").into_bytes()
    }

    pub fn seal(
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

    pub fn open(&self, sealed: &str, tool: &str) -> Result<SuspendedApproval, MrtrError> {
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
