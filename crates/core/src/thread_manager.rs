//! Threads as queue pairs, and the registry of live threads.
//!
//! A [`Thread`] is a handle on one running session task: [`Thread::submit`] pushes an
//! [`Op`] into its submission queue and [`Thread::next_event`] pops the next [`Event`]
//! from its event queue. The [`ThreadManager`] starts threads, resumes them from their
//! rollout on disk, and keeps the live ones addressable by id so that any front end can
//! reach a thread another request started.
//!
//! Thread lifecycle rules every front end shares live here: one turn at a time per thread
//! ([`Thread::turn_slot`]), the settings a thread was started with ([`Thread::config`]),
//! and retiring idle threads from memory ([`ThreadManager::retire_idle`]), which resume
//! from the store when next used. Which [`ThreadStore`] a thread lives in is the
//! config's `thread_store`; the manager opens each store once ([`ThreadManager::store`]).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use interpreter_mcp_client::{McpClientError, McpPool};
use interpreter_protocol::{
    Event, Op, SessionConfiguredEvent, SessionSource, ThreadGoal, ThreadId,
};
use tokio::sync::{Mutex, OwnedMutexGuard, RwLock, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::CoreError;
use crate::goal::{self, GoalUpdate, NextTurn, SharedGoal};
use crate::op_loop;
use crate::revert::{RevertOutcome, RevertReplies};
use crate::session::{self, Session, SessionInit};
use crate::store::{self, RolloutItem, SessionMeta, StoreError, StoreLocation, ThreadStore};
pub use crate::submission::Submission;
use crate::workspace_files::{LocalFiles, WorkspaceFiles};

/// Capacity of a thread's submission queue. Ops are small and rare; a full queue means the
/// session task is wedged, and the sender then waits rather than dropping input.
const SUBMISSION_QUEUE_CAPACITY: usize = 64;

/// How long [`Thread::revert`] waits for the session: reading the rollout and restoring
/// files are bounded local work.
const REVERT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// How long [`Thread::revert`] waits for the thread's turn slot before it calls the
/// thread busy.
const REVERT_SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A handle on a running thread.
pub struct Thread {
    id: ThreadId,
    tx_sub: mpsc::Sender<Submission>,
    rx_event: Mutex<mpsc::UnboundedReceiver<Event>>,
    next_submission_id: std::sync::atomic::AtomicU64,
    /// The rollout file, for a store that keeps one.
    rollout_path: Option<PathBuf>,
    /// Whether the thread is recorded (not ephemeral).
    persisted: bool,
    config: Arc<Config>,
    turn_slot: Arc<Mutex<()>>,
    goal: SharedGoal,
    session: std::sync::Weak<Session>,
    revert_replies: RevertReplies,
}

impl Thread {
    /// How long a front end waits for the engine to confirm an interrupt (the turn's
    /// `turn_aborted` or `task_complete`) before it reports the turn interrupted itself:
    /// one value for every front end.
    pub const INTERRUPT_CONFIRM_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// The rollout file, for a store that keeps one (shown as the thread's `path`).
    pub fn rollout_path(&self) -> Option<&PathBuf> {
        self.rollout_path.as_ref()
    }

    /// Whether the thread is recorded in its store (ephemeral threads are not).
    pub fn is_persisted(&self) -> bool {
        self.persisted
    }

    /// The configuration the thread was started or resumed with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The skills found when the thread started or resumed (empty once it has stopped):
    /// what front ends offer as commands and what `$name` in a prompt loads.
    pub fn skills(&self) -> Arc<crate::skills::Skills> {
        self.session
            .upgrade()
            .map(|session| session.skills.clone())
            .unwrap_or_default()
    }

    /// Wait until no other turn holds the thread, and hold it until the guard drops: one
    /// turn at a time per thread, whichever front end started it, so a thread's event
    /// stream has exactly one reader.
    pub async fn turn_slot(&self) -> OwnedMutexGuard<()> {
        self.turn_slot.clone().lock_owned().await
    }

    /// Whether another process sharing the store continued this thread since it was
    /// loaded here (see [`crate::store::ThreadWriter::is_stale`]).
    async fn is_stale(&self) -> bool {
        match self.session.upgrade() {
            Some(session) => session.writer_is_stale().await,
            None => false,
        }
    }

    /// Whether a turn holds the thread right now.
    pub fn is_busy(&self) -> bool {
        self.turn_slot.try_lock().is_err()
    }

    fn next_id(&self) -> String {
        self.next_submission_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string()
    }

    /// Queue an op; returns the submission id that the resulting events carry.
    pub async fn submit(&self, op: Op) -> Result<String, CoreError> {
        self.submit_traced(op, None).await
    }

    /// [`Self::submit`] on behalf of a caller that sent its trace context: the turn the
    /// op starts (if it starts one) is a child of the caller's span.
    pub async fn submit_traced(
        &self,
        op: Op,
        trace: Option<interpreter_telemetry::W3cTraceContext>,
    ) -> Result<String, CoreError> {
        let id = self.next_id();
        self.tx_sub
            .send(Submission {
                id: id.clone(),
                op,
                trace,
            })
            .await
            .map_err(|_| CoreError::ThreadClosed(self.id))?;
        Ok(id)
    }

    /// The review of `target` in the thread's working directory, with its diff taken now
    /// (see [`crate::review`]); submit it as `Op::Review`. A directory outside git, a bad
    /// ref or an empty target is an error here, before any model call.
    pub async fn prepare_review(
        &self,
        target: interpreter_protocol::ReviewTarget,
    ) -> Result<interpreter_protocol::ReviewRequest, CoreError> {
        Ok(crate::review::prepare(&self.config.cwd, target).await?)
    }

    /// Drop turn `before_turn_id` and every later turn from the thread, durably (see
    /// [`crate::revert`]); with `revert_files`, also undo those turns' patches where that
    /// can be done cleanly. Refused, with nothing changed, by [`CoreError::ThreadBusy`]
    /// while a turn runs, [`CoreError::TurnNotFound`] for a turn the thread does not
    /// have, and [`CoreError::ThreadNotPersisted`] for an ephemeral thread.
    pub async fn revert(
        &self,
        before_turn_id: &str,
        revert_files: bool,
    ) -> Result<RevertOutcome, CoreError> {
        if !self.persisted {
            return Err(CoreError::ThreadNotPersisted(self.id));
        }
        // Held throughout, so no front end starts a turn meanwhile. A turn that has ended
        // for its front end may still hold the slot for its last bookkeeping: that is
        // waited for, briefly; a turn still running is refused.
        let Ok(_slot) =
            tokio::time::timeout(REVERT_SLOT_WAIT, self.turn_slot.clone().lock_owned()).await
        else {
            return Err(CoreError::ThreadBusy(self.id));
        };
        let id = self.next_id();
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.revert_replies
            .lock()
            .map_err(|_| CoreError::Internal("revert state poisoned".into()))?
            .insert(id.clone(), reply);
        let op = Op::RevertThread {
            before_turn_id: before_turn_id.to_string(),
            revert_files,
        };
        if self
            .tx_sub
            .send(Submission {
                id: id.clone(),
                op,
                trace: None,
            })
            .await
            .is_err()
        {
            self.forget_revert(&id);
            return Err(CoreError::ThreadClosed(self.id));
        }
        match tokio::time::timeout(REVERT_DEADLINE, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CoreError::ThreadClosed(self.id)),
            Err(_) => {
                self.forget_revert(&id);
                Err(CoreError::Internal(format!(
                    "the revert did not finish within {} s; read the thread to see whether it happened",
                    REVERT_DEADLINE.as_secs()
                )))
            }
        }
    }

    fn forget_revert(&self, id: &str) {
        if let Ok(mut replies) = self.revert_replies.lock() {
            replies.remove(id);
        }
    }

    /// The thread's goal, if it has one.
    pub fn goal(&self) -> Option<ThreadGoal> {
        self.goal.lock().ok().and_then(|slot| slot.goal.clone())
    }

    /// Change the thread's goal under the engine's goal rules; the change is recorded
    /// (and `goal_updated` emitted) through the op queue. Returns the goal as it now is.
    pub async fn set_goal(&self, update: GoalUpdate) -> Result<ThreadGoal, CoreError> {
        let goal = {
            let mut slot = self
                .goal
                .lock()
                .map_err(|_| CoreError::Internal("goal state poisoned".into()))?;
            let goal = goal::apply_update(slot.goal.as_ref(), update, Utc::now().timestamp())?;
            slot.set(Some(goal.clone()));
            goal
        };
        self.submit(Op::SetGoal {
            goal: Some(goal.clone()),
        })
        .await?;
        Ok(goal)
    }

    /// Remove the thread's goal; whether it had one.
    pub async fn clear_goal(&self) -> Result<bool, CoreError> {
        let had = self
            .goal
            .lock()
            .map_err(|_| CoreError::Internal("goal state poisoned".into()))?
            .goal
            .take()
            .is_some();
        self.submit(Op::SetGoal { goal: None }).await?;
        Ok(had)
    }

    /// Whether the goal wants another turn, and its input. Front ends call this when a
    /// turn of the thread ends and start the turn it names; a goal that reached the
    /// automatic-turn cap is paused here (and recorded).
    pub async fn next_goal_turn(&self) -> Result<NextTurn, CoreError> {
        let next = self
            .goal
            .lock()
            .map_err(|_| CoreError::Internal("goal state poisoned".into()))?
            .next_turn(Utc::now().timestamp());
        if let NextTurn::Paused(goal) = &next {
            self.submit(Op::SetGoal {
                goal: Some(goal.clone()),
            })
            .await?;
        }
        Ok(next)
    }

    /// Calls tool `tool` of the thread's MCP server `server` for a client, not the model:
    /// no approval (the client speaks for the user), not recorded in the thread's
    /// history. Only tools the thread offers the model can be called (the config's tool
    /// filters hold here too), within the server's `tool_timeout_sec` and `cancel`. The
    /// value is the `CallToolResult` as JSON.
    pub async fn call_mcp_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, CoreError> {
        let session = self.live_session()?;
        let mcp = session.mcp.as_ref().ok_or_else(|| no_server(server))?;
        session.prepare_mcp(cancel).await;
        let qualified = mcp
            .tools()
            .into_iter()
            .find(|t| t.server == server && t.tool == tool)
            .map(|t| t.qualified_name)
            .ok_or_else(|| {
                CoreError::Mcp(McpClientError::UnknownTool(format!("{server}/{tool}")))
            })?;
        Ok(mcp.call_tool(&qualified, arguments, cancel, None).await?)
    }

    /// `resources/read` of `uri` on the thread's MCP server `server`, for a client: the
    /// `ReadResourceResult` as JSON.
    pub async fn read_mcp_resource(
        &self,
        server: &str,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, CoreError> {
        let session = self.live_session()?;
        let mcp = session.mcp.as_ref().ok_or_else(|| no_server(server))?;
        session.prepare_mcp(cancel).await;
        Ok(mcp.read_resource(server, uri, cancel).await?)
    }

    fn live_session(&self) -> Result<Arc<Session>, CoreError> {
        self.session
            .upgrade()
            .ok_or(CoreError::ThreadClosed(self.id))
    }

    /// The next event. Errors once the session task has ended and the queue is drained.
    /// Not cancel-unsafe: dropping the future loses no event.
    pub async fn next_event(&self) -> Result<Event, CoreError> {
        self.rx_event
            .lock()
            .await
            .recv()
            .await
            .ok_or(CoreError::ThreadClosed(self.id))
    }
}

/// What [`ThreadManager::start_thread`] and [`ThreadManager::resume_thread`] return.
pub struct NewThread {
    pub thread_id: ThreadId,
    pub thread: Arc<Thread>,
    pub session_configured: SessionConfiguredEvent,
}

/// Starts, resumes and tracks threads. Cheap to share behind an `Arc`.
///
/// It also owns the process's [`McpPool`]: every thread it starts takes its MCP servers
/// from there, so a server configured the same way for many threads runs once.
pub struct ThreadManager {
    threads: RwLock<HashMap<ThreadId, Arc<Thread>>>,
    /// Live threads, least recently used first (see [`ThreadManager::retire_idle`]).
    recently_used: std::sync::Mutex<VecDeque<ThreadId>>,
    mcp_pool: McpPool,
    /// Where patches read and write files; the local disk unless a front end says.
    files: Arc<dyn WorkspaceFiles>,
    /// The stores threads were started in, opened once each.
    stores: Mutex<HashMap<StoreLocation, Arc<dyn ThreadStore>>>,
    /// Where other processes sharing a store forward requests for threads this one runs.
    internal_url: std::sync::OnceLock<String>,
}

impl Default for ThreadManager {
    fn default() -> Self {
        Self::with_mcp_pool(McpPool::default())
    }
}

impl ThreadManager {
    /// Idle threads a serving front end keeps live (see [`Self::retire_idle`]).
    pub const MAX_LIVE_IDLE_THREADS: usize = 32;

    pub fn new() -> Self {
        Self::default()
    }

    /// A manager whose threads use `pool` for their MCP servers.
    pub fn with_mcp_pool(pool: McpPool) -> Self {
        Self {
            threads: RwLock::default(),
            recently_used: std::sync::Mutex::default(),
            mcp_pool: pool,
            files: Arc::new(LocalFiles),
            stores: Mutex::default(),
            internal_url: std::sync::OnceLock::new(),
        }
    }

    /// Tells stores opened from now on that other processes reach this one at `url` (a
    /// fleet replica's own address). Set once, before the first store opens; a later
    /// call changes nothing.
    pub fn advertise_internal_url(&self, url: String) {
        let _ = self.internal_url.set(url);
    }

    /// This manager's threads read and write the files they patch through `files`.
    pub fn with_workspace_files(mut self, files: Arc<dyn WorkspaceFiles>) -> Self {
        self.files = files;
        self
    }

    /// The MCP servers shared by this manager's threads.
    pub fn mcp_pool(&self) -> &McpPool {
        &self.mcp_pool
    }

    /// The MCP servers a thread started with `config` would use, each with what the
    /// process's pool knows of it (status, tools once ready). Looking never starts a
    /// server: one no thread uses yet is reported as not started.
    pub fn mcp_inventory(
        &self,
        config: &crate::config::Config,
    ) -> Vec<interpreter_mcp_client::ServerInventory> {
        self.mcp_pool.inventory(
            &config.mcp_servers,
            &config.env,
            config.sandbox_exe.as_deref(),
            Some(&config.cwd),
            Some(&config.home),
        )
    }

    /// The store `config` names (`thread_store`), opened on first use and shared by every
    /// thread and front end of this manager.
    pub async fn store(&self, config: &Config) -> Result<Arc<dyn ThreadStore>, CoreError> {
        let mut stores = self.stores.lock().await;
        if let Some(store) = stores.get(&config.thread_store) {
            return Ok(Arc::clone(store));
        }
        let password = config.env.get("PGPASSWORD").cloned();
        let store = store::open(
            &config.thread_store,
            self.internal_url.get().cloned(),
            password,
        )
        .await?;
        stores.insert(config.thread_store.clone(), Arc::clone(&store));
        Ok(store)
    }

    /// Start a new thread. Its rollout is on disk before this returns, so the id can be
    /// resumed even if the process dies before the first model call.
    pub async fn start_thread(
        &self,
        config: Config,
        source: SessionSource,
    ) -> Result<NewThread, CoreError> {
        self.spawn(SessionInit::New { config, source }).await
    }

    /// Load a thread from its rollout and make it live again. Errors with
    /// [`CoreError::ThreadNotFound`] for an id that has no rollout.
    pub async fn resume_thread(
        &self,
        config: Config,
        thread_id: ThreadId,
    ) -> Result<NewThread, CoreError> {
        self.resume(config, thread_id, Vec::new()).await
    }

    async fn resume(
        &self,
        config: Config,
        thread_id: ThreadId,
        warnings: Vec<String>,
    ) -> Result<NewThread, CoreError> {
        if let Some(thread) = self.get_thread(thread_id).await {
            return Err(CoreError::ThreadAlreadyLive(thread.id()));
        }
        self.spawn(SessionInit::Resume {
            config,
            thread_id,
            warnings,
            record_settings: false,
        })
        .await
    }

    /// Resume the newest thread (in `cwd` when given) whose rollout still exists, healing
    /// the index first; `Ok(None)` when there is none. What the healing repaired is shown
    /// as a warning on the resumed thread.
    pub async fn resume_latest(
        &self,
        config: Config,
        cwd: Option<PathBuf>,
    ) -> Result<Option<NewThread>, CoreError> {
        let (latest, notices) = self.store(&config).await?.latest(cwd).await?;
        let Some(latest) = latest else {
            return Ok(None);
        };
        self.resume(config, latest.id, notices).await.map(Some)
    }

    /// Copy thread `source` into a new thread (through turn `last_turn_id` when given, else
    /// everything recorded so far) and make the copy live. The copy records where it came
    /// from (`forked_from_id`); the source is untouched. A turn the source is still running
    /// is not copied past what its rollout holds. Lines of the source's rollout that cannot
    /// be read are left out, and the copy's start warns about them; a source rollout with
    /// no readable metadata is an error naming the file, as for a resume.
    pub async fn fork_thread(
        &self,
        config: Config,
        source: ThreadId,
        last_turn_id: Option<String>,
        session_source: SessionSource,
    ) -> Result<NewThread, CoreError> {
        let store = self.store(&config).await?;
        // Lines of the source that cannot be read are not copied: the fork says so.
        let read = store
            .read(source)
            .await?
            .ok_or(CoreError::ThreadNotFound(source))?;
        let warnings: Vec<String> = read.skipped.iter().map(ToString::to_string).collect();
        let Some((RolloutItem::SessionMeta(old_meta), rest)) = read.items.split_first() else {
            return Err(CoreError::Store(StoreError::Unusable {
                path: PathBuf::from(source.to_string()),
                reason: "it has no readable session_meta record".into(),
            }));
        };
        let copied = match &last_turn_id {
            Some(turn_id) => {
                store::items_through_turn(rest, turn_id).ok_or_else(|| CoreError::TurnNotFound {
                    thread_id: source,
                    turn_id: turn_id.clone(),
                })?
            }
            None => rest.to_vec(),
        };
        let meta = SessionMeta {
            id: ThreadId::new(),
            timestamp: chrono::Utc::now(),
            cwd: config.cwd.clone(),
            originator: old_meta.originator.clone(),
            cli_version: env!("CARGO_PKG_VERSION").to_string(),
            source: session_source,
            model_provider: Some(config.model_provider_id.clone()),
            model: Some(config.model.clone()),
            base_instructions: old_meta.base_instructions.clone(),
            forked_from_id: Some(source),
        };
        let new_id = meta.id;
        store.import(meta, copied, None).await?;
        self.spawn(SessionInit::Resume {
            config,
            thread_id: new_id,
            warnings,
            record_settings: false,
        })
        .await
    }

    /// Delete thread `id` for good (its history and index entry). A live thread is first
    /// interrupted and shut down, within `grace`. Errors with
    /// [`CoreError::ThreadNotFound`] when there is no such thread.
    pub async fn delete_thread(
        &self,
        config: &Config,
        id: ThreadId,
        grace: std::time::Duration,
    ) -> Result<(), CoreError> {
        if let Some(thread) = self.remove_thread(id).await {
            let _ = thread.submit(Op::Interrupt).await;
            shut_down(&thread, grace).await;
        }
        if self.store(config).await?.delete(id).await? {
            Ok(())
        } else {
            Err(CoreError::ThreadNotFound(id))
        }
    }

    /// A live thread by id. An idle one that another process sharing the store has
    /// continued since (or runs now) is out of date: it is shut down and forgotten, and
    /// `None` sends the caller to resume it from the store.
    pub async fn get_thread(&self, id: ThreadId) -> Option<Arc<Thread>> {
        let thread = self.threads.read().await.get(&id).cloned()?;
        if thread.is_busy() || !thread.is_stale().await {
            return Some(thread);
        }
        tracing::info!("thread {id} was continued elsewhere; it resumes from the store");
        self.remove_thread(id).await;
        self.forget_recent(id);
        let _ = thread.submit(Op::Shutdown).await;
        None
    }

    /// Forget a thread (its session task ends once the handle is dropped everywhere).
    pub async fn remove_thread(&self, id: ThreadId) -> Option<Arc<Thread>> {
        self.threads.write().await.remove(&id)
    }

    /// The live thread `id`, or the saved one resumed with the config `config` makes
    /// (only made when the thread must be resumed). A thread another front end of this
    /// process resumed meanwhile is the one returned.
    pub async fn get_or_resume<E: From<CoreError>>(
        &self,
        id: ThreadId,
        config: impl AsyncFnOnce() -> Result<Config, E>,
    ) -> Result<Arc<Thread>, E> {
        if let Some(thread) = self.get_thread(id).await {
            return Ok(thread);
        }
        let config = config().await?;
        match self.resume_thread(config, id).await {
            Ok(resumed) => Ok(resumed.thread),
            Err(CoreError::ThreadAlreadyLive(_)) => self
                .get_thread(id)
                .await
                .ok_or_else(|| E::from(CoreError::ThreadNotFound(id))),
            Err(error) => Err(error.into()),
        }
    }

    /// Mark `just_used` as the most recent thread, then shut down and forget the least
    /// recently used idle threads beyond [`Self::MAX_LIVE_IDLE_THREADS`]. A thread running
    /// a turn, or with no rollout to come back from (ephemeral), stays. Returns the
    /// retired ids; their next use resumes them from disk. Long-running front ends call
    /// this after each turn so memory does not grow with every thread they ever ran.
    pub async fn retire_idle(&self, just_used: ThreadId) -> Vec<ThreadId> {
        let keep_live = Self::MAX_LIVE_IDLE_THREADS;
        let candidates: Vec<ThreadId> = {
            let Ok(mut recent) = self.recently_used.lock() else {
                return Vec::new();
            };
            recent.retain(|id| *id != just_used);
            recent.push_back(just_used);
            let excess = recent.len().saturating_sub(keep_live);
            recent.iter().take(excess).copied().collect()
        };
        let mut retired = Vec::new();
        for id in candidates {
            let Some(thread) = self.get_thread(id).await else {
                self.forget_recent(id);
                continue;
            };
            if thread.is_busy() || !thread.is_persisted() {
                continue;
            }
            self.remove_thread(id).await;
            self.forget_recent(id);
            if let Err(e) = thread.submit(Op::Shutdown).await {
                tracing::debug!("thread {id} was already closed: {e}");
            }
            tracing::info!("retired idle thread {id} from memory; it resumes from disk");
            retired.push(id);
        }
        retired
    }

    fn forget_recent(&self, id: ThreadId) {
        if let Ok(mut recent) = self.recently_used.lock() {
            recent.retain(|other| *other != id);
        }
    }

    /// Change the settings of a live, idle thread between turns: the thread is shut down
    /// (its rollout complete on disk) and resumed from that rollout with `config`. The
    /// history carries over; approvals granted "for this session" do not, since the new
    /// settings may be stricter. `grace` bounds the wait for the shutdown. The new
    /// settings are recorded at once, so a process that resumes the thread before its
    /// next turn (an editor's agent started afresh) goes on with them.
    ///
    /// Settings such as the model, the approval policy or the sandbox are fixed for a
    /// session's lifetime (the model client is built from them), so a restart is how they
    /// change. Errors with [`CoreError::ThreadBusy`] while a turn runs and
    /// [`CoreError::ThreadNotPersisted`] for an ephemeral thread, which has nothing to
    /// resume from; the thread is left running in both cases.
    pub async fn reconfigure_thread(
        &self,
        thread_id: ThreadId,
        config: Config,
        grace: std::time::Duration,
    ) -> Result<NewThread, CoreError> {
        let thread = self
            .get_thread(thread_id)
            .await
            .ok_or(CoreError::ThreadNotFound(thread_id))?;
        if !thread.is_persisted() {
            return Err(CoreError::ThreadNotPersisted(thread_id));
        }
        // Held through the restart so no other front end starts a turn meanwhile.
        let Ok(_slot) = thread.turn_slot.clone().try_lock_owned() else {
            return Err(CoreError::ThreadBusy(thread_id));
        };
        self.remove_thread(thread_id).await;
        self.forget_recent(thread_id);
        shut_down(&thread, grace).await;
        // The settings given here are the caller's for the thread's next turns, model
        // included: nothing is taken back from the record.
        let mut config = config;
        config.model_chosen = crate::config::ModelChoice {
            model: true,
            provider: true,
            effort: true,
        };
        self.spawn(SessionInit::Resume {
            config,
            thread_id,
            warnings: Vec::new(),
            record_settings: true,
        })
        .await
    }

    /// Interrupt every running turn and wait (bounded) for the sessions to record it,
    /// then stop the MCP servers.
    pub async fn shutdown_all(&self, grace: std::time::Duration) {
        let threads: Vec<Arc<Thread>> = self.threads.read().await.values().cloned().collect();
        for thread in &threads {
            let _ = thread.submit(Op::Interrupt).await;
            let _ = thread.submit(Op::Shutdown).await;
        }
        let wait_all = async {
            for thread in &threads {
                until_shut_down(thread).await;
            }
        };
        let _ = tokio::time::timeout(grace, wait_all).await;
        self.mcp_pool.shutdown().await;
    }

    async fn spawn(&self, init: SessionInit) -> Result<NewThread, CoreError> {
        let (tx_sub, rx_sub) = mpsc::channel(SUBMISSION_QUEUE_CAPACITY);
        // Unbounded: the session must never block on a slow reader (a stalled MCP client
        // must not freeze a child process's output handling). Events are small.
        let (tx_event, rx_event) = mpsc::unbounded_channel();
        let config = Arc::new(match &init {
            SessionInit::New { config, .. } | SessionInit::Resume { config, .. } => config.clone(),
        });
        let store = self.store(&config).await?;
        let (started, session) =
            // Boxed: starting a session is a large future, and every front end's request
            // that opens a thread would otherwise carry it inline.
            Box::pin(session::start(init, store, &self.mcp_pool, self.files.clone(), tx_event))
                .await?;
        tokio::spawn(op_loop::run_loop(session, rx_sub));
        let thread = Arc::new(Thread {
            id: started.thread_id,
            tx_sub,
            rx_event: Mutex::new(rx_event),
            next_submission_id: std::sync::atomic::AtomicU64::new(started.first_submission_id),
            rollout_path: started.session_configured.rollout_path.clone(),
            persisted: !config.ephemeral,
            config,
            turn_slot: Arc::default(),
            goal: started.goal,
            session: started.session,
            revert_replies: started.revert_replies,
        });
        self.threads
            .write()
            .await
            .insert(started.thread_id, thread.clone());
        Ok(NewThread {
            thread_id: started.thread_id,
            thread,
            session_configured: started.session_configured,
        })
    }
}

fn no_server(server: &str) -> CoreError {
    CoreError::Mcp(McpClientError::UnknownServer(server.to_string()))
}

/// Ask a thread to stop and wait, within `grace`, until it confirms: its rollout is then
/// complete on disk.
async fn shut_down(thread: &Thread, grace: std::time::Duration) {
    if thread.submit(Op::Shutdown).await.is_err() {
        return;
    }
    if tokio::time::timeout(grace, until_shut_down(thread))
        .await
        .is_err()
    {
        tracing::warn!(thread_id = %thread.id(), "thread did not confirm shutdown in time");
    }
}

/// Read (and drop) the thread's events until its session reports the shutdown done, or
/// its queue ends.
async fn until_shut_down(thread: &Thread) {
    loop {
        match thread.next_event().await {
            Ok(Event {
                msg: interpreter_protocol::EventMsg::ShutdownComplete,
                ..
            })
            | Err(_) => return,
            Ok(_) => {}
        }
    }
}
