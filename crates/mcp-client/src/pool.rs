//! One pool of MCP server connections per process, shared by every thread.
//!
//! A server is identified by its [`LaunchSpec`]: everything that changes what runs or
//! where we connect (stdio: program, arguments, the complete child environment, working
//! directory; HTTP: URL and every header, the bearer token included). Threads whose
//! entries resolve to the same spec share one connection, whatever they call the server;
//! any difference gives a separate instance. Per-thread settings that do not change the
//! process (tool filters, timeouts, `required`) are applied by each thread's view
//! ([`crate::McpConnectionManager`]) and are not part of the key.
//!
//! Life cycle of one entry: started on first use by a spawned task (so a caller that
//! gives up waiting does not cancel the start for everybody else), shared while
//! `Ready`, restarted on the next use after it failed or died, no sooner than an
//! exponential backoff allows, and stopped once no thread has held it for
//! [`PoolOptions::idle_timeout`].

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::oauth::FileCredentialStore;
use crate::sdk::{self, RawTool, SdkConnection};

/// How long closing one server may take before it is killed.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(8);

/// A connection that stayed up at least this long counts as healthy: when it dies, the
/// restart backoff starts over.
const HEALTHY_UPTIME: Duration = Duration::from_secs(60);

/// Tunables of a [`McpPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// A server no thread has used for this long is stopped.
    pub idle_timeout: Duration,
    /// Wait before the first restart of a server that failed or died.
    pub restart_backoff_initial: Duration,
    /// The backoff doubles per consecutive failure up to this.
    pub restart_backoff_max: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(300),
            restart_backoff_initial: Duration::from_secs(1),
            restart_backoff_max: Duration::from_secs(60),
        }
    }
}

/// What is started (or connected to) for a server entry, fully resolved: the pool key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum LaunchSpec {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        /// `http_headers` then `env_http_headers`, resolved.
        headers: Vec<(String, String)>,
        /// The token of `bearer_token_env_var`.
        bearer: Option<String>,
        /// Stored OAuth tokens to use (`interpreter mcp login`), when there are any and
        /// no bearer token is configured.
        oauth: Option<FileCredentialStore>,
    },
}

/// The process-wide set of MCP server connections. Cheap to clone (a handle).
#[derive(Clone, Default)]
pub struct McpPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for McpPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpPool")
            .field("entries", &self.inner.lock_entries().len())
            .finish()
    }
}

#[derive(Default)]
struct PoolInner {
    options: PoolOptions,
    entries: Mutex<HashMap<LaunchSpec, Arc<Entry>>>,
    /// Set by [`McpPool::shutdown`]: nothing starts any more, so threads still holding
    /// leases cannot leave servers running that nobody would stop.
    closed: std::sync::atomic::AtomicBool,
}

impl PoolInner {
    fn lock_entries(&self) -> std::sync::MutexGuard<'_, HashMap<LaunchSpec, Arc<Entry>>> {
        // A panic while holding this lock cannot leave the map inconsistent (every
        // critical section is a single insert/remove), so a poisoned lock is still usable.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl McpPool {
    pub fn new(options: PoolOptions) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                options,
                ..Default::default()
            }),
        }
    }

    pub fn options(&self) -> PoolOptions {
        self.inner.options
    }

    /// Number of distinct server instances the pool knows (running or not).
    pub fn len(&self) -> usize {
        self.inner.lock_entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry for `spec`, created when missing, with a lease taken under the same lock
    /// so that an idle stop cannot remove it in between.
    pub(crate) fn lease(&self, spec: LaunchSpec, label: &str) -> Lease {
        let mut entries = self.inner.lock_entries();
        let entry = entries
            .entry(spec.clone())
            .or_insert_with(|| {
                Arc::new(Entry {
                    spec,
                    label: label.to_string(),
                    pool: Arc::downgrade(&self.inner),
                    state: watch::Sender::new(State::Idle),
                    leases: AtomicUsize::new(0),
                    lease_epoch: AtomicU64::new(0),
                })
            })
            .clone();
        entry.leases.fetch_add(1, Ordering::SeqCst);
        entry.lease_epoch.fetch_add(1, Ordering::SeqCst);
        Lease { entry }
    }

    /// The entry for `spec` when the pool has one, without creating it or taking a lease:
    /// looking at a server must not start it or keep it alive.
    pub(crate) fn peek(&self, spec: &LaunchSpec) -> Option<Arc<Entry>> {
        self.inner.lock_entries().get(spec).cloned()
    }

    /// Stops every server (each within a grace period, then killed) and empties the pool.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let entries: Vec<Arc<Entry>> = self.inner.lock_entries().drain().map(|(_, e)| e).collect();
        futures::future::join_all(entries.iter().map(|entry| entry.stop())).await;
    }
}

/// Where an entry is in its life cycle.
#[derive(Clone)]
pub(crate) enum State {
    /// Never started, or stopped.
    Idle,
    Starting,
    Ready(Arc<Live>),
    /// The last start failed (or the connection died); no new start before `retry_at`.
    Failed {
        error: StartFailure,
        failures: u32,
        retry_at: Instant,
    },
}

/// Why an instance is not available.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StartFailure {
    pub message: String,
    /// The start ran out of time (as opposed to failing outright).
    pub timed_out: bool,
    /// Set while a backoff delays the next attempt.
    pub retry_in: Option<Duration>,
}

impl StartFailure {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            timed_out: false,
            retry_in: None,
        }
    }
}

/// A running, initialized connection and the tools it listed when it started.
pub(crate) struct Live {
    pub conn: SdkConnection,
    pub tools: Vec<RawTool>,
    since: Instant,
    /// Consecutive failures before this start, carried over if it dies young.
    failures_before: u32,
}

impl Live {
    pub(crate) fn is_alive(&self) -> bool {
        !self.conn.is_closed()
    }
}

pub(crate) struct Entry {
    spec: LaunchSpec,
    /// Name of the first entry that used this instance, for logs.
    label: String,
    pool: Weak<PoolInner>,
    state: watch::Sender<State>,
    leases: AtomicUsize,
    /// Bumped on every lease, so an idle timer armed earlier knows it is stale.
    lease_epoch: AtomicU64,
}

/// How one caller wants a start to happen when it is the one that triggers it.
#[derive(Debug, Clone)]
pub(crate) struct StartRequest {
    pub timeout: Duration,
    pub name: String,
}

impl Entry {
    /// The current state, without starting anything.
    pub(crate) fn snapshot(&self) -> State {
        self.state.borrow().clone()
    }

    /// A live connection: the running one, or a new one started now (or joined, when a
    /// start is under way). A failed instance is not retried before its backoff ends;
    /// that is an immediate error. The caller bounds the wait.
    pub(crate) async fn connection(
        self: &Arc<Self>,
        request: &StartRequest,
    ) -> Result<Arc<Live>, StartFailure> {
        let mut rx = self.state.subscribe();
        loop {
            if self.pool_closed() {
                return Err(StartFailure::new("the MCP connection pool was shut down"));
            }
            let current = rx.borrow_and_update().clone();
            match current {
                State::Ready(live) if live.is_alive() => return Ok(live),
                State::Ready(dead) => self.mark_dead(&dead),
                State::Starting => {
                    if rx.changed().await.is_err() {
                        return Err(StartFailure::new("the MCP connection pool was shut down"));
                    }
                }
                State::Failed {
                    error, retry_at, ..
                } if Instant::now() < retry_at => {
                    let mut error = error;
                    error.retry_in = Some(retry_at.saturating_duration_since(Instant::now()));
                    return Err(error);
                }
                State::Failed { .. } | State::Idle => self.begin_start(request),
            }
        }
    }

    /// Starts the instance in the background when it is idle, failed with its backoff
    /// over, or dead; otherwise does nothing. Never waits.
    pub(crate) fn kick(self: &Arc<Self>, request: &StartRequest) {
        if self.pool_closed() {
            return;
        }
        let current = self.snapshot();
        match current {
            State::Ready(live) if !live.is_alive() => {
                self.mark_dead(&live);
                self.begin_start(request);
            }
            State::Idle | State::Failed { .. } => self.begin_start(request),
            State::Ready(_) | State::Starting => {}
        }
    }

    /// Moves `Idle`/`Failed` (backoff over) to `Starting` and spawns the start. Only one
    /// caller wins; the others see `Starting` and wait.
    fn begin_start(self: &Arc<Self>, request: &StartRequest) {
        let mut failures_before = 0;
        let won = self.state.send_if_modified(|state| match state {
            State::Idle => {
                *state = State::Starting;
                true
            }
            State::Failed {
                failures, retry_at, ..
            } if Instant::now() >= *retry_at => {
                failures_before = *failures;
                *state = State::Starting;
                true
            }
            _ => false,
        });
        if !won {
            return;
        }
        let entry = self.clone();
        let request = request.clone();
        tokio::spawn(async move {
            let outcome = tokio::time::timeout(
                request.timeout,
                connect_and_list(&entry.spec, &request.name),
            )
            .await;
            let next = match outcome {
                Ok(Ok((conn, tools))) => State::Ready(Arc::new(Live {
                    conn,
                    tools,
                    since: Instant::now(),
                    failures_before,
                })),
                Ok(Err(error)) => entry.failed(StartFailure::new(error), failures_before + 1),
                Err(_) => entry.failed(
                    StartFailure {
                        message: format!(
                            "timed out after {} seconds",
                            request.timeout.as_secs_f64()
                        ),
                        timed_out: true,
                        retry_in: None,
                    },
                    failures_before + 1,
                ),
            };
            // Every thread using the server is told through its `McpStartupUpdate`
            // event, which each front end shows (exec on stderr or as a JSON item, the
            // servers as notifications); a warning here would say it twice.
            if let State::Failed { error, .. } = &next {
                tracing::info!(
                    server = %entry.label,
                    "MCP server failed to start: {}",
                    error.message
                );
            }
            entry.state.send_replace(next);
        });
    }

    fn pool_closed(&self) -> bool {
        self.pool
            .upgrade()
            .is_none_or(|pool| pool.closed.load(Ordering::SeqCst))
    }

    fn failed(&self, error: StartFailure, failures: u32) -> State {
        let options = self
            .pool
            .upgrade()
            .map(|pool| pool.options)
            .unwrap_or_default();
        State::Failed {
            error,
            failures,
            retry_at: Instant::now() + backoff(&options, failures),
        }
    }

    /// A `Ready` connection found closed: the server exited or the connection broke.
    /// Record it as a failure so the next start waits out the backoff when it keeps
    /// dying young.
    fn mark_dead(&self, dead: &Arc<Live>) {
        let failures = if dead.since.elapsed() >= HEALTHY_UPTIME {
            0
        } else {
            dead.failures_before + 1
        };
        tracing::warn!(server = %self.label, "MCP server connection closed; it will be restarted on next use");
        self.state.send_if_modified(|state| match state {
            State::Ready(live) if Arc::ptr_eq(live, dead) => {
                *state = if failures == 0 {
                    State::Idle
                } else {
                    self.failed(StartFailure::new("the server exited"), failures)
                };
                true
            }
            _ => false,
        });
    }

    /// Stops the connection (graceful close within a deadline) and leaves the entry idle.
    async fn stop(&self) {
        let previous = self.state.send_replace(State::Idle);
        if let State::Ready(live) = previous {
            match Arc::try_unwrap(live) {
                Ok(live) => live.conn.shutdown(SHUTDOWN_DEADLINE).await,
                // Calls still hold it; dropping the last reference closes the session,
                // and the child process dies with it (kill on drop).
                Err(shared) => drop(shared),
            }
        }
    }

    fn release(self: &Arc<Self>) {
        if self.leases.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let epoch = self.lease_epoch.load(Ordering::SeqCst);
        let idle = pool.options.idle_timeout;
        let entry = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(idle).await;
            let Some(pool) = entry.pool.upgrade() else {
                return;
            };
            let remove = {
                let mut entries = pool.lock_entries();
                let unused = entry.leases.load(Ordering::SeqCst) == 0
                    && entry.lease_epoch.load(Ordering::SeqCst) == epoch;
                let current = entries
                    .get(&entry.spec)
                    .is_some_and(|e| Arc::ptr_eq(e, &entry));
                if unused && current {
                    entries.remove(&entry.spec);
                }
                unused && current
            };
            if remove {
                tracing::debug!(server = %entry.label, "stopping idle MCP server");
                entry.stop().await;
            }
        });
    }
}

/// A thread's claim on a pool entry; while any lease is held the entry is not stopped
/// for idleness.
pub(crate) struct Lease {
    pub entry: Arc<Entry>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.entry.release();
    }
}

fn backoff(options: &PoolOptions, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    options
        .restart_backoff_initial
        .saturating_mul(1 << exponent)
        .min(options.restart_backoff_max)
}

async fn connect_and_list(
    spec: &LaunchSpec,
    name: &str,
) -> Result<(SdkConnection, Vec<RawTool>), String> {
    let conn = match spec {
        LaunchSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => sdk::connect_stdio(name, command, args, env, cwd.as_deref()).await?,
        LaunchSpec::Http {
            url,
            headers,
            bearer,
            oauth,
        } => sdk::connect_http(name, url, bearer.clone(), headers, oauth.clone()).await?,
    };
    let tools = conn.list_tools().await?;
    Ok((conn, tools))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let options = PoolOptions {
            restart_backoff_initial: Duration::from_secs(1),
            restart_backoff_max: Duration::from_secs(5),
            ..Default::default()
        };
        let waits: Vec<u64> = (1..=5).map(|n| backoff(&options, n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
    }
}
