//! Progress of tool calls: a server's `notifications/progress` during a `tools/call`,
//! handed to the caller as one short line of text.
//!
//! The SDK puts a progress token of its own on every request and does not say which, so
//! a notification cannot be matched to its call by token. The rule is the one
//! elicitations follow: progress goes to the call in progress on the connection when
//! there is exactly one; with none or several it is dropped (it is only informational,
//! and shown on the wrong call it would mislead).
//!
//! A server may send progress as fast as it likes: the caller holds only the newest line
//! (a `watch` channel), so a flood costs one string, and what reaches a user is paced by
//! the engine.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// Where a call's progress goes: the newest line, `None` until the first.
pub type ProgressSender = watch::Sender<Option<String>>;

/// Longest progress line passed on, in characters; the rest is cut with `…`.
pub const MAX_PROGRESS_CHARS: usize = 300;

/// The calls in progress on one connection that want progress.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    next_id: AtomicU64,
    calls: std::sync::Mutex<Vec<(u64, ProgressSender)>>,
    /// Calls in progress, whether or not they want progress: routing needs the count.
    in_progress: std::sync::Mutex<Vec<u64>>,
}

impl ProgressRoutes {
    fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        // Every critical section is one push, retain or lookup: a panic cannot leave
        // the list half updated, so a poisoned lock is still usable.
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a call in progress; it counts until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>, sender: Option<ProgressSender>) -> ProgressGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Self::lock(&self.in_progress).push(id);
        if let Some(sender) = sender {
            Self::lock(&self.calls).push((id, sender));
        }
        ProgressGuard {
            routes: self.clone(),
            id,
        }
    }

    /// Passes one notification on (see the module comment).
    pub(crate) fn deliver(&self, message: Option<&str>, progress: f64, total: Option<f64>) {
        let only = match Self::lock(&self.in_progress).as_slice() {
            [only] => *only,
            _ => {
                tracing::debug!("dropping an MCP progress notification: not one call in progress");
                return;
            }
        };
        let line = progress_line(message, progress, total);
        if let Some((_, sender)) = Self::lock(&self.calls).iter().find(|(id, _)| *id == only) {
            sender.send_replace(Some(line));
        }
    }
}

pub(crate) struct ProgressGuard {
    routes: Arc<ProgressRoutes>,
    id: u64,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        let id = self.id;
        ProgressRoutes::lock(&self.routes.in_progress).retain(|c| *c != id);
        ProgressRoutes::lock(&self.routes.calls).retain(|(c, _)| *c != id);
    }
}

/// The server's message, or `progress/total` without one; one line of printable text,
/// at most [`MAX_PROGRESS_CHARS`] long (the server is not trusted to keep it short).
fn progress_line(message: Option<&str>, progress: f64, total: Option<f64>) -> String {
    let text = match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(message) => message.to_string(),
        None => match total {
            Some(total) => format!("{}/{}", number(progress), number(total)),
            None => number(progress),
        },
    };
    let mut line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_PROGRESS_CHARS)
        .collect();
    if text.chars().nth(MAX_PROGRESS_CHARS).is_some() {
        line.pop();
        line.push('…');
    }
    line
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_short_printable_and_fall_back_to_the_numbers() {
        assert_eq!(progress_line(Some(" step 2 "), 2.0, Some(5.0)), "step 2");
        assert_eq!(progress_line(None, 2.0, Some(5.0)), "2/5");
        assert_eq!(progress_line(Some(""), 0.5, None), "0.5");
        assert_eq!(progress_line(Some("a\nb\u{1b}[2J"), 1.0, None), "a b [2J");
        let long = "x".repeat(10_000);
        let line = progress_line(Some(&long), 1.0, None);
        assert_eq!(line.chars().count(), MAX_PROGRESS_CHARS);
        assert!(line.ends_with('…'));
    }

    #[test]
    fn progress_reaches_the_only_call_and_is_dropped_when_ambiguous() {
        let routes = Arc::new(ProgressRoutes::default());
        let (sender, receiver) = watch::channel(None);
        let call = routes.enter(Some(sender));
        routes.deliver(Some("one"), 1.0, None);
        assert_eq!(receiver.borrow().as_deref(), Some("one"));
        let other = routes.enter(None);
        routes.deliver(Some("two"), 2.0, None);
        assert_eq!(
            receiver.borrow().as_deref(),
            Some("one"),
            "two calls: dropped"
        );
        drop(other);
        routes.deliver(Some("three"), 3.0, None);
        assert_eq!(receiver.borrow().as_deref(), Some("three"));
        drop(call);
        routes.deliver(Some("four"), 4.0, None);
        assert!(routes.calls.lock().map(|c| c.is_empty()).unwrap_or(false));
    }
}
