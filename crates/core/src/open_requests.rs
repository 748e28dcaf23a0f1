//! The engine's clock is the only one on a request to a person.
//!
//! An approval, a question, a permission request or an MCP server's question is timed by
//! the engine alone (`approval_timeout_sec`): when it passes, the engine resolves the
//! request itself (timed out) and emits [`EventMsg::RequestExpired`]. A front end that
//! put the request to its client opens it here and waits on the token [`OpenRequests::open`]
//! gives, next to its client's answer, instead of a timer of its own; on
//! `RequestExpired` it calls [`OpenRequests::expire`] and withdraws the request on its wire.
//!
//! [`EventMsg::RequestExpired`]: interpreter_protocol::EventMsg::RequestExpired

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// The requests a front end has open with its client, by the engine's request id.
#[derive(Debug, Clone, Default)]
pub struct OpenRequests {
    tokens: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl OpenRequests {
    /// Open request `id`; the token fires when the engine resolves it without an answer.
    /// Call it in the handler of the request's event (events arrive in order, so the
    /// request is open before its expiry can be seen).
    pub fn open(&self, id: &str) -> CancellationToken {
        self.lock().entry(id.to_string()).or_default().clone()
    }

    /// The engine resolved request `id` itself: fire its token.
    pub fn expire(&self, id: &str) {
        if let Some(token) = self.lock().remove(id) {
            token.cancel();
        }
    }

    /// Request `id` got its answer (or the front end gave up on it): forget it.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_request_fires_its_token_and_only_its_own() {
        let open = OpenRequests::default();
        let a = open.open("a");
        let b = open.open("b");
        open.expire("a");
        assert!(a.is_cancelled());
        assert!(!b.is_cancelled());
        open.close("b");
        open.expire("b");
        assert!(!b.is_cancelled(), "a closed request is not withdrawn");
        open.expire("never-opened");
        assert!(open.lock().is_empty());
    }
}
