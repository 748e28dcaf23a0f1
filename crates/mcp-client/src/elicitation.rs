//! Elicitations: a server asking the user something (`elicitation/create`, or an MRTR
//! `input_required` round in the 2026-07-28 era, which the SDK turns into the same
//! handler call).
//!
//! Connections are shared by threads, so a request has to be routed to the thread it is
//! meant for. Servers do not say which call a request belongs to on stdio, so the rule is:
//! the request goes to the thread that has a tool call in progress on that connection.
//! When no call is in progress, or calls of several threads are, it is declined with a
//! message instead of being shown to someone it may not concern.
//!
//! A call's `tool_timeout_sec` measures the server's time, not the user's: while a
//! question routed to the calling thread waits for an answer, the deadline of every call
//! it may belong to (that thread's calls on the connection) is paused. The question has
//! a deadline of its own (the engine's), so a pause cannot last forever.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationAnswer {
    pub action: ElicitationAction,
    /// The form's values, with `Accept` only.
    pub content: Option<serde_json::Value>,
}

impl ElicitationAnswer {
    pub fn decline() -> Self {
        Self {
            action: ElicitationAction::Decline,
            content: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitationAction {
    Accept,
    Decline,
    Cancel,
}

/// Where one thread's elicitations go: the engine, which asks its front end. The future
/// must end on its own (the engine puts a deadline on it).
pub trait ElicitationSink: Send + Sync + 'static {
    /// `server` is the thread's name for the server; `request` the `elicitation/create`
    /// params as the server sent them.
    fn elicit(
        &self,
        server: String,
        request: serde_json::Value,
    ) -> BoxFuture<'static, ElicitationAnswer>;
}

struct Caller {
    id: u64,
    server: String,
    sink: Arc<dyn ElicitationSink>,
    pause: Arc<Pause>,
}

/// How many questions a call is waiting on; its deadline runs only while none is.
struct Pause {
    pending: watch::Sender<usize>,
}

impl Pause {
    fn new() -> Self {
        Self {
            pending: watch::Sender::new(0),
        }
    }

    fn hold(self: &Arc<Self>) -> PauseGuard {
        self.pending.send_modify(|n| *n += 1);
        PauseGuard(self.clone())
    }

    /// Ends once `timeout` has passed with no question pending.
    async fn elapsed(&self, timeout: Duration) {
        let mut pending = self.pending.subscribe();
        let mut remaining = timeout;
        loop {
            if *pending.borrow_and_update() > 0 {
                // `self` keeps the sender alive, so this only returns on a change.
                let _ = pending.changed().await;
                continue;
            }
            let started = tokio::time::Instant::now();
            tokio::select! {
                () = tokio::time::sleep(remaining) => return,
                _ = pending.changed() => {
                    remaining = remaining.saturating_sub(started.elapsed());
                }
            }
        }
    }
}

/// A question in progress; the deadline resumes when the last one is dropped.
struct PauseGuard(Arc<Pause>);

impl Drop for PauseGuard {
    fn drop(&mut self) {
        self.0.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The threads with a tool call in progress on one connection.
#[derive(Default)]
pub(crate) struct Callers {
    next_id: AtomicU64,
    entries: std::sync::Mutex<Vec<Caller>>,
}

impl Callers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Caller>> {
        // Every critical section is one push, retain or clone: a panic cannot leave the
        // list half updated, so a poisoned lock is still usable.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a call in progress; it counts until the guard is dropped.
    pub(crate) fn enter(
        self: &Arc<Self>,
        server: &str,
        sink: Arc<dyn ElicitationSink>,
    ) -> CallerGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pause = Arc::new(Pause::new());
        self.lock().push(Caller {
            id,
            server: server.to_string(),
            sink,
            pause: pause.clone(),
        });
        CallerGuard {
            callers: self.clone(),
            id,
            pause,
        }
    }

    /// Routes one request (see the module comment).
    pub(crate) async fn elicit(&self, request: serde_json::Value) -> ElicitationAnswer {
        let target = {
            let entries = self.lock();
            match entries.first() {
                None => Err("no tool call is in progress on this connection"),
                Some(first) if entries.iter().all(|c| Arc::ptr_eq(&c.sink, &first.sink)) => {
                    // Every call in progress is the thread's: any may be the one asking.
                    let paused: Vec<PauseGuard> = entries.iter().map(|c| c.pause.hold()).collect();
                    Ok((first.server.clone(), first.sink.clone(), paused))
                }
                Some(_) => Err("calls of several threads are in progress on this connection"),
            }
        };
        match target {
            Ok((server, sink, _paused)) => sink.elicit(server, request).await,
            Err(reason) => {
                tracing::warn!("declining an MCP elicitation: {reason}");
                ElicitationAnswer::decline()
            }
        }
    }
}

pub(crate) struct CallerGuard {
    callers: Arc<Callers>,
    id: u64,
    pause: Arc<Pause>,
}

impl CallerGuard {
    /// Ends once the call has run for `timeout`, not counting the time questions it may
    /// have asked were waiting for an answer.
    pub(crate) async fn deadline(&self, timeout: Duration) {
        self.pause.elapsed(timeout).await;
    }
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        let id = self.id;
        self.callers.lock().retain(|c| c.id != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(ElicitationAction);

    impl ElicitationSink for Fixed {
        fn elicit(&self, _: String, _: serde_json::Value) -> BoxFuture<'static, ElicitationAnswer> {
            let action = self.0;
            Box::pin(async move {
                ElicitationAnswer {
                    action,
                    content: None,
                }
            })
        }
    }

    #[tokio::test]
    async fn requests_go_to_the_only_calling_thread_or_are_declined() {
        let callers = Arc::new(Callers::default());
        let request = serde_json::json!({"message": "name?"});
        assert_eq!(
            callers.elicit(request.clone()).await.action,
            ElicitationAction::Decline
        );
        let accept: Arc<dyn ElicitationSink> = Arc::new(Fixed(ElicitationAction::Accept));
        let first = callers.enter("s", accept.clone());
        let second = callers.enter("s", accept);
        assert_eq!(
            callers.elicit(request.clone()).await.action,
            ElicitationAction::Accept
        );
        let other = callers.enter("s", Arc::new(Fixed(ElicitationAction::Cancel)));
        assert_eq!(
            callers.elicit(request.clone()).await.action,
            ElicitationAction::Decline,
            "ambiguous: two threads"
        );
        drop((first, second));
        assert_eq!(
            callers.elicit(request).await.action,
            ElicitationAction::Cancel
        );
        drop(other);
    }
}
