//! Requests of the running turn that wait for the front end's answer: approvals,
//! questions to the user and permission requests. One mechanism for all of them, so
//! each fails closed the same way.
//!
//! A request is registered under its tool call's id before its event goes out; the
//! session loop hands an answer to whoever waits on that id, and drops an answer for an
//! id nobody waits on. The waiting side ([`PendingAnswers::wait`]) also ends at the
//! deadline or when the turn is cancelled (an interrupt), with the "no" the caller named
//! for each case: nothing waits forever and nothing is granted by default.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::{Mutex, oneshot};
use tokio_util::sync::CancellationToken;

/// How a wait ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// Nobody answered within the deadline.
    TimedOut,
    /// The turn was interrupted while waiting.
    Cancelled,
    /// The session stopped listening (the request was dropped without an answer).
    Dropped,
}

/// Answers awaited by tool call id.
pub(crate) struct PendingAnswers<T> {
    waiting: Mutex<HashMap<String, oneshot::Sender<T>>>,
    /// What the answers are, for the log line of an answer nobody waits for.
    kind: &'static str,
}

impl<T> PendingAnswers<T> {
    pub(crate) fn new(kind: &'static str) -> Self {
        Self {
            waiting: Mutex::new(HashMap::new()),
            kind,
        }
    }

    /// Start waiting for the answer to `call_id`; the receiver yields it.
    pub(crate) async fn register(&self, call_id: &str) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().await.insert(call_id.to_string(), tx);
        rx
    }

    pub(crate) async fn forget(&self, call_id: &str) {
        self.waiting.lock().await.remove(call_id);
    }

    /// Hand `answer` to whoever waits for `call_id`; an answer for a request nobody
    /// waits for (unknown, already answered, timed out) is dropped.
    pub(crate) async fn resolve(&self, call_id: &str, answer: T) {
        match self.waiting.lock().await.remove(call_id) {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => tracing::warn!(
                call_id,
                kind = self.kind,
                "answer for no pending request; ignored"
            ),
        }
    }

    /// Wait for the answer registered as `answer` under `call_id`, at most `timeout`,
    /// and no longer than the turn (`cancel`).
    pub(crate) async fn wait(
        &self,
        call_id: &str,
        answer: oneshot::Receiver<T>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<T, NoAnswer> {
        let outcome = tokio::select! {
            answer = answer => answer.map_err(|_| NoAnswer::Dropped),
            () = tokio::time::sleep(timeout) => Err(NoAnswer::TimedOut),
            () = cancel.cancelled() => Err(NoAnswer::Cancelled),
        };
        if outcome.is_err() {
            self.forget(call_id).await;
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_reaches_its_waiter_and_only_its_own() {
        let pending = PendingAnswers::<u32>::new("test");
        let rx = pending.register("a").await;
        pending.resolve("b", 2).await;
        pending.resolve("a", 1).await;
        let cancel = CancellationToken::new();
        assert_eq!(
            pending
                .wait("a", rx, Duration::from_secs(60), &cancel)
                .await,
            Ok(1)
        );
    }

    #[tokio::test]
    async fn cancellation_and_deadline_end_the_wait_and_forget_the_request() {
        let pending = PendingAnswers::<u32>::new("test");
        let cancel = CancellationToken::new();
        cancel.cancel();
        let rx = pending.register("a").await;
        assert_eq!(
            pending
                .wait("a", rx, Duration::from_secs(60), &cancel)
                .await,
            Err(NoAnswer::Cancelled)
        );
        assert!(pending.waiting.lock().await.is_empty());

        let rx = pending.register("b").await;
        let live = CancellationToken::new();
        assert_eq!(
            pending.wait("b", rx, Duration::ZERO, &live).await,
            Err(NoAnswer::TimedOut)
        );
        assert!(pending.waiting.lock().await.is_empty());
    }
}
