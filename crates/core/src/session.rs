//! One thread's session: the state a thread's turns read and write (history, config,
//! the store writer and its lease, approvals, grants, goal, MCP servers) and how it
//! starts (new, or resumed from the store).
//!
//! It is the context every turn runs in, and sits below everything that runs turns:
//! [`crate::turn`], the tool handlers and [`crate::op_loop`] use it; it uses none of them.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use crate::goal::SharedGoal;
use chrono::Utc;
use interpreter_mcp_client::{McpConnectionManager, McpPool, StartupStatus, StartupUpdate};
use interpreter_model_client::ModelClient;
use interpreter_protocol::{
    CollaborationMode, CollaborationModeKind, Event, EventMsg, GoalClearedEvent, GoalUpdatedEvent,
    GrantScope, McpStartupStatus, McpStartupUpdateEvent, PermissionGrant, PermissionsDecision,
    ResponseItem, ReviewDecision, SessionConfiguredEvent, SessionSource, ThreadGoal, ThreadId,
    TokenUsage, UserInputResponse,
};
use interpreter_tools::apply_patch::{PatchPlan, TurnDiff};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::elicitation::ElicitationBroker;
use crate::error::CoreError;
use crate::items::ItemLedger;
use crate::pending::PendingAnswers;
use crate::project_doc;
use crate::revert::{self, RevertOutcome, RevertReplies};
use crate::store::{self, RolloutItem, SessionMeta, StoreError, ThreadStore, ThreadWriter};
use crate::workspace_files::WorkspaceFiles;

pub(crate) enum SessionInit {
    New {
        config: Config,
        source: SessionSource,
    },
    Resume {
        config: Config,
        thread_id: ThreadId,
        /// What finding the thread turned up for the user (an index repair, lines a fork
        /// could not copy), shown with the thread's start-up warnings.
        warnings: Vec<String>,
        /// The caller changed the thread's settings: they are recorded (a turn context
        /// with no turn), so a process that resumes the thread later, before any turn ran
        /// with them, starts from them too.
        record_settings: bool,
    },
}

pub(crate) struct Started {
    pub thread_id: ThreadId,
    pub session_configured: SessionConfiguredEvent,
    /// The first submission (and so turn) id this session hands out: past every turn id
    /// the rollout already holds, so turn ids stay unique within a thread across resumes.
    pub first_submission_id: u64,
    /// The thread's goal (restored from the rollout on resume).
    pub goal: SharedGoal,
    /// The session, for what clients ask of it directly (its MCP servers). Weak: the
    /// session ends with its loop, not with a handle.
    pub session: std::sync::Weak<Session>,
    /// Where the session answers reverts.
    pub revert_replies: RevertReplies,
}

/// State shared between the session loop and its running turn.
pub(crate) struct Session {
    pub thread_id: ThreadId,
    pub config: Config,
    pub client: ModelClient,
    /// The MCP servers this thread uses as a client (`[mcp_servers.*]`), if any.
    pub mcp: Option<McpConnectionManager>,
    /// Where patches read and write their files.
    pub files: Arc<dyn WorkspaceFiles>,
    pub instructions: String,
    /// The skills found when the thread started or resumed: what its instructions list
    /// (for a new thread) and what `$name` mentions load.
    pub skills: Arc<crate::skills::Skills>,
    /// The hooks found when the thread started or resumed.
    pub hooks: Arc<crate::hooks::HookSet>,
    /// `SessionStart` sources waiting for their hooks to run, oldest first: `startup`
    /// for a new thread or `resume` for one resumed, until its first turn; `compact`
    /// after each compaction, until the turn goes on (or the next one starts).
    pub(crate) session_start: std::sync::Mutex<std::collections::VecDeque<&'static str>>,
    /// Context tool hooks added while a call ran, recorded after its output.
    pub(crate) hook_context: std::sync::Mutex<Vec<String>>,
    tx_event: mpsc::UnboundedSender<Event>,
    /// Stamps item ids on events and closes a turn's open items before its end.
    items: std::sync::Mutex<ItemLedger>,
    /// Where the thread is kept; `None` for an ephemeral thread.
    pub(crate) recorder: Option<Arc<dyn ThreadWriter>>,
    /// Cancelled for good once another process took the thread over (an append was
    /// fenced): every turn's token is a child of it, so the running turn stops at once
    /// instead of running commands whose results can no longer be recorded.
    pub(crate) fence: CancellationToken,
    store: Arc<dyn ThreadStore>,
    /// Model-visible history, in order. The single source of what the model sees.
    pub history: Mutex<Vec<ResponseItem>>,
    /// Input that arrived while a turn was running; the turn picks it up before its next
    /// model call.
    pub pending_input: Mutex<Vec<ResponseItem>>,
    /// Whether the running turn still takes input into `pending_input`. Written only
    /// with that lock held: a turn closes it when it has made its last model call, so
    /// input that arrives after that starts a turn of its own, under its own id, instead
    /// of trailing the turn that already ended for the front end.
    accepting_input: std::sync::atomic::AtomicBool,
    /// Questions of the thread's MCP servers waiting for the front end's answer.
    pub(crate) elicitations: ElicitationBroker,
    /// Approval requests waiting for an answer, by call id.
    pub approvals: PendingAnswers<ReviewDecision>,
    /// `request_user_input` calls waiting for the user's answers, by call id.
    pub user_input: PendingAnswers<UserInputResponse>,
    /// `request_permissions` calls waiting for the client's grant, by call id.
    pub permission_requests: PendingAnswers<PermissionsDecision>,
    /// Permissions granted for the session (the running turn's are in its
    /// [`TurnState`]); both widen the sandbox only through
    /// [`Session::turn_sandbox_policy`].
    session_grant: std::sync::Mutex<PermissionGrant>,
    /// Commands (shell-joined) and patch path sets approved for the rest of the session.
    approved_for_session: Mutex<HashSet<String>>,
    pub total_usage: Mutex<TokenUsage>,
    /// Prompt size of the most recent model request, to decide on compaction.
    pub last_input_tokens: Mutex<Option<u64>>,
    /// What is known about the model's context window and how to estimate a prompt.
    pub context: Mutex<ContextState>,
    /// History length before the running turn's input: what a turn that fails on
    /// context overflow rolls back to (moved by compaction).
    pub turn_base_len: Mutex<usize>,
    /// Servers whose tools the caps cut, already reported to the user.
    pub tools_cut_reported: Mutex<HashSet<String>>,
    /// What lives as long as the running turn: a new one when a turn begins, dropped
    /// when it ends.
    turn: std::sync::Mutex<Arc<TurnState>>,
    /// The thread's goal, shared with its handle (see [`crate::goal`]).
    pub goal: SharedGoal,
    /// The collaboration mode the next turn starts in (`Op::SetCollaborationMode`). A
    /// loaded thread starts in Default mode: a mode is the client's choice for its
    /// session with the thread, not part of the thread.
    pub(crate) collaboration_mode: std::sync::Mutex<CollaborationMode>,
    /// Callers of `Thread::revert` waiting for the result, by submission id.
    pub(crate) revert_replies: RevertReplies,
    /// The writable roots this session decided on, kept open: every command's sandbox
    /// and every file the agent writes for the model start from these directories, so a
    /// command that renames one (or plants a symlink where it was) changes nothing.
    pub(crate) root_anchors: interpreter_tools::sandbox::RootAnchors,
}

/// The context window as far as it is known, and the calibration of the prompt estimate.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContextState {
    /// Smallest window any source named (config, the server, an overflow error).
    pub window: Option<u64>,
    /// Where `window` came from, for messages.
    pub window_source: Option<String>,
    /// The server has been asked (once per thread).
    pub probed: bool,
    /// The server can count a prompt's tokens exactly (llama.cpp); asked once, for the
    /// first estimate, before any usage arrives.
    pub server_counts_tokens: bool,
    /// Real prompt tokens per request byte, from the server's usage of an earlier
    /// request; `None` until the server reported usage.
    pub tokens_per_byte: Option<f64>,
}

impl ContextState {
    /// Takes `window` if it is the first or a smaller one.
    pub(crate) fn learn_window(&mut self, window: u64, source: &str) {
        if window > 0 && self.window.is_none_or(|known| window < known) {
            self.window = Some(window);
            self.window_source = Some(source.to_string());
        }
    }
}

/// The state of one turn, dropped with it: its mode, what was granted for it, the plans
/// its answers proposed, the files its patches changed. Nothing of a turn outlives it
/// into the next.
#[derive(Default)]
pub(crate) struct TurnState {
    /// A Plan-mode turn: nothing it runs may write.
    plan: bool,
    /// A review: nothing it runs may write.
    review: bool,
    /// Plans the turn's answers proposed so far (for their ids).
    plans: std::sync::atomic::AtomicU32,
    /// Permissions granted for the rest of the turn.
    grant: std::sync::Mutex<PermissionGrant>,
    /// The files the turn's patches changed, with the turn's id.
    diff: Mutex<Option<(String, TurnDiff)>>,
}

impl Session {
    /// The running turn's state (a fresh, empty one between turns).
    fn turn(&self) -> Arc<TurnState> {
        match self.turn.lock() {
            Ok(turn) => turn.clone(),
            // A poisoned lock is not a reason to lift a read-only turn's restrictions.
            Err(_) => Arc::new(TurnState {
                plan: true,
                ..TurnState::default()
            }),
        }
    }

    fn replace_turn(&self, state: TurnState) {
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Arc::new(state);
        }
    }

    /// The mode a turn starting now runs in; marks the turn as a Plan-mode or review one
    /// (or neither) for the tools it calls. A review turn runs in Default mode: its
    /// instructions are the review's.
    pub(crate) fn begin_turn_mode(&self, review: bool) -> CollaborationMode {
        if review {
            self.replace_turn(TurnState {
                review: true,
                ..TurnState::default()
            });
            return CollaborationMode::default();
        }
        // A poisoned lock is not a reason to lift Plan mode's restrictions: treat it as
        // Plan mode without custom instructions.
        let mode = self.collaboration_mode.lock().map_or_else(
            |_| CollaborationMode {
                kind: CollaborationModeKind::Plan,
                developer_instructions: None,
            },
            |slot| slot.clone(),
        );
        self.replace_turn(TurnState {
            plan: mode.kind == CollaborationModeKind::Plan,
            ..TurnState::default()
        });
        mode
    }

    /// The id of the running turn's next proposed plan: `<turn>-plan` (Codex's), then
    /// `<turn>-plan-2` and on for later answers of the same turn.
    pub(crate) fn next_plan_id(&self, sub_id: &str) -> String {
        match self.turn().plans.load(std::sync::atomic::Ordering::Acquire) {
            0 => format!("{sub_id}-plan"),
            n => format!("{sub_id}-plan-{}", n + 1),
        }
    }

    /// An answer of the running turn proposed its plan.
    pub(crate) fn count_plan(&self) {
        self.turn()
            .plans
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The running turn ended: its tools' restrictions, and what was granted for it,
    /// end with it.
    pub(crate) fn end_turn_mode(&self) {
        self.replace_turn(TurnState::default());
    }

    /// Whether the running turn is in Plan mode.
    pub(crate) fn is_plan_turn(&self) -> bool {
        self.turn().plan
    }

    /// Whether the running turn is a review (`Op::Review`).
    pub(crate) fn is_review_turn(&self) -> bool {
        self.turn().review
    }

    /// Whether nothing the running turn runs may write: Plan mode and reviews.
    pub(crate) fn is_read_only_turn(&self) -> bool {
        self.is_plan_turn() || self.is_review_turn()
    }

    /// The sandbox policy the running turn's commands and patches run under: the
    /// thread's, widened by what the user granted for the session and this turn
    /// (`request_permissions`), or read-only in a read-only turn (Plan mode, reviews)
    /// whatever the thread's is. The one place a grant takes effect.
    pub(crate) fn turn_sandbox_policy(&self) -> interpreter_protocol::SandboxPolicy {
        if self.is_read_only_turn() {
            interpreter_protocol::SandboxPolicy::ReadOnly {
                network_access: false,
            }
        } else {
            crate::permissions::widened(&self.config.sandbox_policy, &self.granted())
        }
    }

    /// What the running turn may write and how the agent reaches it: the turn's sandbox
    /// policy over this session's anchored roots.
    pub(crate) fn write_scope(&self) -> interpreter_tools::sandbox::WriteScope {
        interpreter_tools::sandbox::WriteScope::new(
            &self.root_anchors,
            &self.turn_sandbox_policy(),
            &self.config.cwd,
            &self.config.command_env(),
            &self.config.sandbox_protected_paths(),
        )
    }

    /// The engine's deadline on request `id` passed and it resolved it: front ends
    /// withdraw it from their clients ([`crate::open_requests`]).
    pub(crate) async fn request_expired(
        &self,
        sub_id: &str,
        id: &str,
        timeout: std::time::Duration,
    ) {
        self.emit(
            sub_id,
            EventMsg::RequestExpired(interpreter_protocol::RequestExpiredEvent {
                id: id.to_string(),
                timeout_sec: timeout.as_secs(),
            }),
        )
        .await;
    }

    /// A warning for the user (every front end shows it), as part of `sub_id`.
    pub(crate) async fn warn(&self, sub_id: &str, message: String) {
        self.emit(
            sub_id,
            EventMsg::Warning(interpreter_protocol::WarningEvent { message }),
        )
        .await;
    }

    /// Send an event to the front end, and persist it when it belongs in the rollout.
    /// Item events get their ids here ([`crate::items`]); an event that ends a turn is
    /// preceded by the events closing what the turn left open.
    pub(crate) async fn emit(&self, sub_id: &str, msg: EventMsg) {
        let events = match self.items.lock() {
            Ok(mut ledger) => ledger.prepare(sub_id, msg),
            // A panic elsewhere while stamping: the event still goes out, without an id.
            Err(_) => vec![msg],
        };
        for msg in events {
            if store::should_persist_event(&msg) {
                self.persist(&[RolloutItem::EventMsg(bounded_for_rollout(&msg))])
                    .await;
            }
            // A closed receiver means the front end is gone; the turn still finishes and
            // is persisted, so there is nothing else to do with the error.
            let _ = self.tx_event.send(Event {
                id: sub_id.to_string(),
                msg,
            });
        }
    }

    /// Append items to the model history and the rollout.
    pub(crate) async fn record_items(&self, items: &[ResponseItem]) {
        if items.is_empty() {
            return;
        }
        self.history.lock().await.extend(items.iter().cloned());
        let rollout_items: Vec<RolloutItem> = items
            .iter()
            .cloned()
            .map(RolloutItem::ResponseItem)
            .collect();
        self.persist(&rollout_items).await;
    }

    /// Takes the running turn's items out of the history again (and records that, so a
    /// resumed thread does not see them either): after a turn failed because the
    /// conversation no longer fits, keeping its input would make every later turn fail
    /// the same way.
    pub(crate) async fn roll_back_turn(&self, note: String) {
        let base = *self.turn_base_len.lock().await;
        let replacement = {
            let mut history = self.history.lock().await;
            if history.len() <= base {
                return;
            }
            history.truncate(base);
            history.clone()
        };
        self.persist(&[RolloutItem::Compacted(store::CompactedItem {
            message: note,
            replacement_history: replacement,
        })])
        .await;
    }

    /// Replace the whole model history (after compaction) and record the checkpoint.
    pub(crate) async fn replace_history(&self, summary: String, replacement: Vec<ResponseItem>) {
        *self.history.lock().await = replacement.clone();
        self.persist(&[RolloutItem::Compacted(store::CompactedItem {
            message: summary,
            replacement_history: replacement,
        })])
        .await;
    }

    /// Drops turn `before_turn_id` and every later one (`Op::RevertThread`, on an idle
    /// thread): records the marker, rebuilds what the model sees next from the kept
    /// prefix, and with `revert_files` undoes the dropped turns' patches where that can
    /// be done cleanly.
    pub(crate) async fn revert(
        &self,
        before_turn_id: &str,
        revert_files: bool,
    ) -> Result<RevertOutcome, CoreError> {
        let Some(recorder) = &self.recorder else {
            return Err(CoreError::ThreadNotPersisted(self.thread_id));
        };
        let items = self
            .store
            .read(self.thread_id)
            .await?
            .ok_or(CoreError::ThreadNotFound(self.thread_id))?
            .items;
        let plan = revert::plan(&items, before_turn_id).ok_or_else(|| CoreError::TurnNotFound {
            thread_id: self.thread_id,
            turn_id: before_turn_id.to_string(),
        })?;
        // The marker first: a revert that cannot be recorded changes nothing.
        recorder
            .append(&[RolloutItem::Reverted(plan.marker.clone())])
            .await?;
        let kept = &items[..plan.cut];
        *self.history.lock().await = store::history_from_rollout(kept);
        *self.total_usage.lock().await = last_total_usage(kept);
        *self.last_input_tokens.lock().await = None;
        *self.turn().diff.lock().await = None;
        let goal = last_goal(kept);
        if let Ok(mut slot) = self.goal.lock()
            && slot.goal != goal
        {
            slot.set(goal);
        }
        let files = if revert_files {
            let roots = revert::WritableRoots {
                scope: interpreter_tools::sandbox::WriteScope::new(
                    &self.root_anchors,
                    &self.config.sandbox_policy,
                    &self.config.cwd,
                    &self.config.command_env(),
                    &self.config.sandbox_protected_paths(),
                ),
            };
            let edits = plan.edits_newest_first;
            Some(
                tokio::task::spawn_blocking(move || revert::restore_files(&edits, &roots))
                    .await
                    .map_err(|e| {
                        CoreError::Internal(format!("restoring the files stopped: {e}"))
                    })?,
            )
        } else {
            None
        };
        Ok(RevertOutcome {
            dropped_turn_ids: plan.marker.dropped_turn_ids,
            files,
        })
    }

    pub(crate) async fn persist(&self, items: &[RolloutItem]) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        // A `store.write` span per durable append inside a turn: where a turn's time goes
        // when the store (a fleet's PostgreSQL) is slow. Writes outside a turn (a thread
        // starting) would each be a trace of their own, and are not traced.
        let appended = if opentelemetry::trace::TraceContextExt::has_active_span(
            &opentelemetry::Context::current(),
        ) {
            use opentelemetry::trace::FutureExt as _;
            let span = interpreter_telemetry::spans::start_internal(
                "store.write",
                false,
                vec![opentelemetry::KeyValue::new(
                    "interpreter.store.items",
                    i64::try_from(items.len()).unwrap_or(i64::MAX),
                )],
            );
            let appended = recorder.append(items).with_context(span.clone()).await;
            interpreter_telemetry::spans::end_internal(
                &span,
                Vec::new(),
                appended.as_ref().err().map(|_| "store_write_failed"),
            );
            appended
        } else {
            recorder.append(items).await
        };
        if let Err(err) = appended {
            if matches!(err, StoreError::Fenced { .. }) {
                self.fence.cancel();
            }
            // Losing durability must be visible, but must not kill the turn.
            tracing::error!(thread_id = %self.thread_id, "failed to write rollout: {err}");
            let _ = self.tx_event.send(Event {
                id: String::new(),
                msg: EventMsg::Warning(interpreter_protocol::WarningEvent {
                    message: format!("failed to persist the thread: {err}"),
                }),
            });
        }
    }

    /// Takes the thread for a turn (or another write) about to start; on failure the
    /// submission gets an error saying why and nothing starts. With a shared store the
    /// thread may have been continued, or be running, in another process.
    pub(crate) async fn take_for_turn(&self, sub_id: &str) -> bool {
        let Some(recorder) = &self.recorder else {
            return true;
        };
        // A writer that was fenced refuses at once, with the same error.
        match recorder.reacquire().await {
            Ok(()) => true,
            Err(err) => {
                if matches!(err, StoreError::Fenced { .. }) {
                    self.fence.cancel();
                }
                self.emit(
                    sub_id,
                    EventMsg::Error(interpreter_protocol::ErrorEvent {
                        message: err.to_string(),
                        kind: None,
                    }),
                )
                .await;
                false
            }
        }
    }

    /// The rollout file, for a store that keeps one (a hook's `transcript_path`).
    pub(crate) fn rollout_path(&self) -> Option<&Path> {
        self.recorder.as_ref().and_then(|recorder| recorder.path())
    }

    /// Takes the oldest waiting `SessionStart` source.
    pub(crate) fn take_session_start(&self) -> Option<&'static str> {
        self.session_start
            .lock()
            .ok()
            .and_then(|mut waiting| waiting.pop_front())
    }

    /// `SessionStart` hooks run again with `source` before the model is next asked (a
    /// compaction dropped what they added).
    pub(crate) fn queue_session_start(&self, source: &'static str) {
        if let Ok(mut waiting) = self.session_start.lock() {
            waiting.push_back(source);
        }
    }

    /// Context tool hooks added, taken for recording.
    pub(crate) fn take_hook_context(&self) -> Vec<String> {
        self.hook_context
            .lock()
            .map(|mut context| std::mem::take(&mut *context))
            .unwrap_or_default()
    }

    pub(crate) async fn writer_is_stale(&self) -> bool {
        match &self.recorder {
            Some(recorder) => self.fence.is_cancelled() || recorder.is_stale().await,
            None => false,
        }
    }

    /// Lets go of the thread while it is idle, so any process sharing the store may run
    /// its next turn.
    pub(crate) async fn release_when_idle(&self) {
        if let Some(recorder) = &self.recorder
            && !self.fence.is_cancelled()
            && let Err(err) = recorder.release().await
        {
            tracing::warn!(thread_id = %self.thread_id, "failed to release the thread: {err}");
        }
    }

    /// Add `items` to the running turn's input if it still takes input (they are moved
    /// out); whether it did.
    pub(crate) async fn offer_input(&self, items: &mut Vec<ResponseItem>) -> bool {
        let mut pending = self.pending_input.lock().await;
        let open = self
            .accepting_input
            .load(std::sync::atomic::Ordering::SeqCst);
        if open {
            pending.append(items);
        }
        open
    }

    /// A new turn starts taking input; what was left over from the last one.
    pub(crate) async fn open_input(&self) -> Vec<ResponseItem> {
        let mut pending = self.pending_input.lock().await;
        self.accepting_input
            .store(true, std::sync::atomic::Ordering::SeqCst);
        std::mem::take(&mut *pending)
    }

    /// Whether the running turn still takes input.
    pub(crate) async fn takes_input(&self) -> bool {
        let _pending = self.pending_input.lock().await;
        self.accepting_input
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Take input again, keeping what is waiting.
    pub(crate) async fn reopen_input(&self) {
        let _pending = self.pending_input.lock().await;
        self.accepting_input
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The running turn takes no more input. With `only_if_none_waiting`, only when none
    /// is waiting (the turn would otherwise have to make another model call); whether
    /// it closed.
    pub(crate) async fn close_input(&self, only_if_none_waiting: bool) -> bool {
        let pending = self.pending_input.lock().await;
        if only_if_none_waiting && !pending.is_empty() {
            return false;
        }
        self.accepting_input
            .store(false, std::sync::atomic::Ordering::SeqCst);
        true
    }

    /// Make `goal` the thread's goal (if it is not already), write it to the rollout and
    /// tell the front end.
    pub(crate) async fn record_goal(&self, sub_id: &str, goal: Option<ThreadGoal>) {
        if let Ok(mut slot) = self.goal.lock()
            && slot.goal != goal
        {
            slot.set(goal.clone());
        }
        let msg = match goal {
            Some(goal) => EventMsg::GoalUpdated(GoalUpdatedEvent { goal }),
            None => EventMsg::GoalCleared(GoalClearedEvent {}),
        };
        self.emit(sub_id, msg).await;
    }

    /// What turn `sub_id` cost the thread's active goal (see [`crate::goal::account_turn`]).
    pub(crate) async fn account_goal_turn(
        &self,
        sub_id: &str,
        tokens: i64,
        seconds: i64,
        interrupted: bool,
    ) {
        let changed = self.goal.lock().ok().and_then(|mut slot| {
            let goal = slot.goal.as_mut()?;
            crate::goal::account_turn(goal, tokens, seconds, interrupted, Utc::now().timestamp())
                .then(|| goal.clone())
        });
        if let Some(goal) = changed {
            self.record_goal(sub_id, Some(goal)).await;
        }
    }

    /// Take in a patch turn `sub_id` applied; the turn's whole diff so far. A new turn
    /// id starts a new diff (one turn runs at a time).
    pub(crate) async fn record_turn_diff(&self, sub_id: &str, plan: &PatchPlan) -> String {
        let turn = self.turn();
        let mut current = turn.diff.lock().await;
        let diff = match current.as_mut() {
            Some((turn, diff)) if turn == sub_id => diff,
            _ => &mut current.insert((sub_id.to_string(), TurnDiff::default())).1,
        };
        diff.record(plan);
        diff.unified_diff(&self.config.cwd)
    }

    /// One warning per server whose tools the caps left out, the first time it happens
    /// in this thread (the cut is the same on every request after that).
    pub(crate) async fn warn_tools_left_out(
        &self,
        sub_id: &str,
        left_out: &[interpreter_mcp_client::ToolsLeftOut],
    ) {
        let mut reported = self.tools_cut_reported.lock().await;
        let fresh: Vec<String> = left_out
            .iter()
            .filter(|cut| reported.insert(cut.server.clone()))
            .map(|cut| format!("{cut}; the model is told they are missing"))
            .collect();
        drop(reported);
        for message in fresh {
            self.warn(sub_id, message).await;
        }
    }

    /// Before each model request: the first waits until the thread's MCP servers have
    /// started or failed (each within its startup timeout; an interrupt ends the wait),
    /// so their tools are in it; every request restarts, in the background, servers
    /// that died or failed and whose backoff is over.
    pub(crate) async fn prepare_mcp(&self, cancel: &CancellationToken) {
        if let Some(mcp) = &self.mcp {
            tokio::select! {
                () = mcp.wait_settled() => {}
                () = cancel.cancelled() => {}
            }
            mcp.revive();
        }
    }

    pub(crate) async fn is_approved_for_session(&self, key: &str) -> bool {
        self.approved_for_session.lock().await.contains(key)
    }

    pub(crate) async fn approve_for_session(&self, key: String) {
        self.approved_for_session.lock().await.insert(key);
    }

    /// Apply a grant the client gave for `scope`.
    pub(crate) fn grant(&self, permissions: &PermissionGrant, scope: GrantScope) {
        let turn = self.turn();
        let slot = match scope {
            GrantScope::Turn => &turn.grant,
            GrantScope::Session => &self.session_grant,
        };
        if let Ok(mut grant) = slot.lock() {
            grant.extend(permissions);
        }
        // A granted directory is decided on (opened) now, as it was checked and shown,
        // not when the next command happens to need it.
        let anchored = self.root_anchors.anchor(
            &self.turn_sandbox_policy(),
            &self.config.cwd,
            &self.config.command_env(),
            &self.config.sandbox_protected_paths(),
        );
        for refusal in anchored.refused {
            tracing::warn!(%refusal, "a granted directory is not writable");
        }
    }

    /// Everything granted that is in force now: the session's and the running turn's.
    /// A poisoned lock grants nothing.
    pub(crate) fn granted(&self) -> PermissionGrant {
        let mut granted = self
            .session_grant
            .lock()
            .map(|grant| grant.clone())
            .unwrap_or_default();
        if let Ok(turn) = self.turn().grant.lock() {
            granted.extend(&turn);
        }
        granted
    }
}

/// The settings `config` gives a turn, as recorded: for `turn_id`, or with none for what
/// the thread's next turn runs with (its settings changed between turns).
pub(crate) fn turn_context(
    config: &Config,
    turn_id: Option<String>,
    collaboration_mode: Option<interpreter_protocol::CollaborationModeKind>,
) -> RolloutItem {
    RolloutItem::TurnContext(store::TurnContextItem {
        turn_id,
        cwd: config.cwd.clone(),
        approval_policy: config.approval_policy,
        sandbox_policy: config.sandbox_policy.clone(),
        model: config.model.clone(),
        effort: config.model_reasoning_effort,
        collaboration_mode,
    })
}

/// The provider, model and effort a thread last ran with: the rollout's metadata, then
/// its latest turn's settings.
fn recorded_model(items: &[RolloutItem]) -> crate::config::RecordedModel {
    let mut recorded = crate::config::RecordedModel::default();
    for item in items {
        match item {
            RolloutItem::SessionMeta(meta) => {
                recorded.provider = meta.model_provider.clone();
                recorded.model = meta.model.clone();
            }
            RolloutItem::TurnContext(turn) => {
                recorded.model = Some(turn.model.clone());
                recorded.effort = Some(turn.effort);
            }
            _ => {}
        }
    }
    recorded
}

pub(crate) async fn start(
    init: SessionInit,
    store: Arc<dyn ThreadStore>,
    mcp_pool: &McpPool,
    files: Arc<dyn WorkspaceFiles>,
    tx_event: mpsc::UnboundedSender<Event>,
) -> Result<(Started, Arc<Session>), CoreError> {
    // What the user must hear about this thread's start, emitted as `warning` events once
    // the session exists: the only path such notices take to every front end.
    let mut startup_warnings = Vec::new();
    let mut restored_goal = None;
    let (config, thread_id, history, total_usage, recorder, is_new, first_submission_id) =
        match init {
            SessionInit::New { config, source } => {
                let thread_id = ThreadId::new();
                let recorder = if config.ephemeral {
                    None
                } else {
                    let created = store
                        .create(SessionMeta {
                            id: thread_id,
                            timestamp: Utc::now(),
                            cwd: config.cwd.clone(),
                            originator: "interpreter".to_string(),
                            cli_version: env!("CARGO_PKG_VERSION").to_string(),
                            source,
                            model_provider: Some(config.model_provider_id.clone()),
                            model: Some(config.model.clone()),
                            base_instructions: config.base_instructions.clone(),
                            forked_from_id: None,
                        })
                        .await?;
                    startup_warnings.extend(created.notices);
                    Some(created.writer)
                };
                (
                    config,
                    thread_id,
                    Vec::new(),
                    TokenUsage::default(),
                    recorder,
                    true,
                    1,
                )
            }
            SessionInit::Resume {
                config,
                thread_id,
                warnings,
                record_settings,
            } => {
                startup_warnings.extend(warnings);
                let opened = store.open(thread_id).await?;
                startup_warnings.extend(opened.notices);
                let mut items = opened.items;
                // A turn the last process did not finish (it crashed, or its replica
                // died) is recorded as interrupted and never run again: its commands
                // may have had effects, and repeating them is not safe.
                if let Some(turn) = store::turns_from_rollout(&items)
                    .into_iter()
                    .last()
                    .filter(|turn| turn.outcome == store::TurnOutcome::InProgress)
                {
                    let aborted = RolloutItem::EventMsg(EventMsg::TurnAborted(
                        interpreter_protocol::TurnAbortedEvent {
                            turn_id: turn.id.clone(),
                            reason: interpreter_protocol::TurnAbortReason::Interrupted,
                        },
                    ));
                    opened.writer.append(std::slice::from_ref(&aborted)).await?;
                    items.push(aborted);
                    startup_warnings.push(format!(
                        "turn {} was interrupted when the process running it stopped; it \
                         was recorded as interrupted and is not run again",
                        turn.id
                    ));
                }
                let history = store::history_from_rollout(&items);
                let total_usage = last_total_usage(&items);
                let first_submission_id = next_turn_number(&items);
                restored_goal = last_goal(&items);
                let recorder = opened.writer;
                // The thread goes on with the model it ran with, unless the caller
                // picked another for this run.
                let mut config = config;
                startup_warnings.extend(config.continue_with(&recorded_model(&items)));
                if record_settings {
                    recorder
                        .append(&[turn_context(&config, None, None)])
                        .await?;
                }
                (
                    config,
                    thread_id,
                    history,
                    total_usage,
                    Some(recorder),
                    false,
                    first_submission_id,
                )
            }
        };

    let client = ModelClient::new(
        config.model_provider_id.clone(),
        config.model_provider.clone(),
        config.model.clone(),
        config.model_reasoning_effort,
        &config.env,
    )?;

    // Taken from the process's pool: servers already running for other threads are
    // shared, missing ones start in the background. Only `required` servers are waited
    // for here (their failure fails the thread start); the others settle while the thread
    // goes on, and the first model request waits for them (see `Session::prepare_mcp`).
    // Config warnings first: they were found first.
    startup_warnings.splice(0..0, config.warnings.iter().cloned());
    // The roots are decided now, before the first command can rename anything: a root
    // that does not exist is created, and one that may not be a root says why.
    let root_anchors = interpreter_tools::sandbox::RootAnchors::new();
    let anchored = root_anchors.anchor(
        &config.sandbox_policy,
        &config.cwd,
        &config.command_env(),
        &config.sandbox_protected_paths(),
    );
    startup_warnings.extend(anchored.refused.iter().map(ToString::to_string));
    let elicitations = ElicitationBroker::new(
        tx_event.clone(),
        config.approval_timeout,
        config
            .approval_policy
            .may_ask(interpreter_protocol::Question::McpElicitation),
    );
    let mcp = if config.mcp_servers.values().any(|server| server.enabled) {
        let (mut manager, report) = McpConnectionManager::connect(
            mcp_pool,
            &config.mcp_servers,
            &config.env,
            config.sandbox_exe.as_deref(),
            Some(&config.cwd),
            Some(&config.home),
        )
        .await?;
        startup_warnings.extend(report.warnings);
        manager.set_elicitation_sink(Arc::new(elicitations.clone()));
        Some(manager)
    } else {
        None
    };

    let instructions = config
        .base_instructions
        .clone()
        .unwrap_or_else(|| include_str!("prompts/base_instructions.md").to_string());

    let skills = {
        let cwd = config.cwd.clone();
        let sources = crate::skills::SkillSources::of(&config);
        Arc::new(
            tokio::task::spawn_blocking(move || crate::skills::Skills::discover(&cwd, &sources))
                .await
                .unwrap_or_default(),
        )
    };

    let hooks = {
        let cwd = config.cwd.clone();
        let sources = crate::hooks::HookSources::of(&config);
        Arc::new(
            tokio::task::spawn_blocking(move || crate::hooks::HookSet::discover(&cwd, &sources))
                .await
                .unwrap_or_default(),
        )
    };
    startup_warnings.extend(hooks.warnings.iter().cloned());
    startup_warnings.extend(
        hooks
            .errors
            .iter()
            .map(|(path, why)| format!("hooks file {} not used: {why}", path.display())),
    );

    let session_configured = SessionConfiguredEvent {
        session_id: thread_id,
        thread_id,
        model: config.model.clone(),
        model_provider_id: config.model_provider_id.clone(),
        approval_policy: config.approval_policy,
        sandbox_policy: config.sandbox_policy.clone(),
        cwd: config.cwd.clone(),
        reasoning_effort: config.model_reasoning_effort,
        rollout_path: recorder
            .as_ref()
            .and_then(|r| r.path().map(Path::to_path_buf)),
    };

    let config_window = config.model_context_window;
    let session = Arc::new(Session {
        thread_id,
        config,
        client,
        mcp,
        files,
        instructions,
        skills,
        hooks,
        session_start: std::sync::Mutex::new(std::collections::VecDeque::from([if is_new {
            "startup"
        } else {
            "resume"
        }])),
        hook_context: std::sync::Mutex::new(Vec::new()),
        tx_event,
        items: std::sync::Mutex::new(ItemLedger::default()),
        recorder,
        fence: CancellationToken::new(),
        store,
        history: Mutex::new(history),
        pending_input: Mutex::new(Vec::new()),
        accepting_input: std::sync::atomic::AtomicBool::new(false),
        elicitations,
        approvals: PendingAnswers::new("approval"),
        user_input: PendingAnswers::new("user input"),
        permission_requests: PendingAnswers::new("permissions"),
        session_grant: std::sync::Mutex::new(PermissionGrant::default()),
        approved_for_session: Mutex::new(HashSet::new()),
        total_usage: Mutex::new(total_usage),
        last_input_tokens: Mutex::new(None),
        context: Mutex::new(ContextState {
            window: config_window,
            window_source: config_window.map(|_| "model_context_window".to_string()),
            ..Default::default()
        }),
        turn_base_len: Mutex::new(0),
        tools_cut_reported: Mutex::new(HashSet::new()),
        turn: std::sync::Mutex::new(Arc::new(TurnState::default())),
        goal: Arc::default(),
        collaboration_mode: std::sync::Mutex::new(CollaborationMode::default()),
        revert_replies: RevertReplies::default(),
        root_anchors,
    });
    if let Ok(mut slot) = session.goal.lock() {
        slot.set(restored_goal);
    }

    // Read before the warnings go out, so that a truncated AGENTS.md is among them. A
    // resumed thread keeps the context it started with, so only a new one reads it.
    let initial_context =
        is_new.then(|| project_doc::initial_context(&session.config, &session.skills));
    if let Some(context) = &initial_context {
        startup_warnings.extend(context.warnings.iter().cloned());
    }
    for message in startup_warnings {
        session.warn("", message).await;
    }

    if session.mcp.is_some() {
        tokio::spawn(settle_mcp(session.clone()));
    }

    if let Some(context) = initial_context {
        // The initial context is part of the durable history, so a resumed thread sees
        // exactly what the model saw the first time.
        session.record_items(&context.items).await;
    } else {
        // A thread resumed under other settings (sandbox, approval policy, cwd, network)
        // tells the model what is in force now; otherwise it would plan for the old ones.
        let current = project_doc::environment_context(&session.config);
        let last = session
            .history
            .lock()
            .await
            .iter()
            .rev()
            .filter_map(interpreter_protocol::ResponseItem::message_text)
            .find(|text| text.starts_with(project_doc::ENVIRONMENT_CONTEXT_OPEN));
        if last.as_deref() != Some(current.as_str()) {
            session
                .record_items(&[interpreter_protocol::ResponseItem::user_text(current)])
                .await;
        }
    }

    let goal = session.goal.clone();
    let weak = Arc::downgrade(&session);
    let revert_replies = session.revert_replies.clone();
    Ok((
        Started {
            thread_id,
            session_configured,
            first_submission_id,
            goal,
            session: weak,
            revert_replies,
        },
        session,
    ))
}

/// One past the highest numeric turn id recorded (reverted turns included), so a resumed
/// thread never reuses one.
fn next_turn_number(items: &[RolloutItem]) -> u64 {
    items
        .iter()
        .flat_map(|item| match item {
            RolloutItem::EventMsg(EventMsg::TaskStarted(e)) => vec![e.turn_id.as_str()],
            RolloutItem::EventMsg(EventMsg::TaskComplete(e)) => vec![e.turn_id.as_str()],
            RolloutItem::EventMsg(EventMsg::TurnAborted(e)) => vec![e.turn_id.as_str()],
            RolloutItem::TurnContext(c) => c.turn_id.as_deref().into_iter().collect(),
            RolloutItem::Reverted(r) => r.dropped_turn_ids.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        })
        .filter_map(|id| id.parse::<u64>().ok())
        .max()
        .map_or(1, |highest| highest.saturating_add(1))
}

/// Follows the start of the thread's MCP servers, reporting each one's progress as
/// `mcp_startup_update` events.
async fn settle_mcp(session: Arc<Session>) {
    let Some(mcp) = &session.mcp else {
        return;
    };
    let tx_event = session.tx_event.clone();
    let on_update = move |update: StartupUpdate| {
        let status = match update.status {
            StartupStatus::Starting => McpStartupStatus::Starting,
            StartupStatus::Ready { tools } => McpStartupStatus::Ready { tools },
            StartupStatus::Failed { error } => McpStartupStatus::Failed { error },
        };
        // Not persisted (startup progress is not part of the thread's record), so it
        // can be sent synchronously from inside the start-up futures.
        let _ = tx_event.send(Event {
            id: String::new(),
            msg: EventMsg::McpStartupUpdate(McpStartupUpdateEvent {
                server: update.server,
                status,
            }),
        });
    };
    // Failures are in the `failed` updates; a warning as well would say it twice.
    mcp.settle(&on_update).await;
}

/// The thread's cumulative usage as last recorded, so totals continue across restarts.
fn last_total_usage(items: &[RolloutItem]) -> TokenUsage {
    items
        .iter()
        .rev()
        .find_map(|item| match item {
            RolloutItem::EventMsg(EventMsg::TokenCount(count)) => {
                count.info.as_ref().map(|info| info.total_token_usage)
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The goal the rollout ends with: the last one recorded, unless cleared after it.
fn last_goal(items: &[RolloutItem]) -> Option<interpreter_protocol::ThreadGoal> {
    items.iter().rev().find_map(|item| match item {
        RolloutItem::EventMsg(EventMsg::GoalUpdated(updated)) => Some(Some(updated.goal.clone())),
        RolloutItem::EventMsg(EventMsg::GoalCleared(_)) => Some(None),
        _ => None,
    })?
}

/// The most of an MCP tool result a rollout keeps. The live event carries the whole
/// result; the history keeps what fits here, so one huge answer cannot make the thread
/// slow to read back (the model saw a capped form anyway).
const PERSISTED_MCP_RESULT_MAX_BYTES: usize = 64 * 1024;

/// `msg` as the rollout keeps it: an MCP result past [`PERSISTED_MCP_RESULT_MAX_BYTES`]
/// becomes its text, head and tail, with images and structured content named, not kept.
fn bounded_for_rollout(msg: &EventMsg) -> EventMsg {
    let EventMsg::McpToolCallEnd(end) = msg else {
        return msg.clone();
    };
    let size = match &end.result {
        Ok(value) => serde_json::to_string(value).map_or(usize::MAX, |s| s.len()),
        Err(message) => message.len(),
    };
    if size <= PERSISTED_MCP_RESULT_MAX_BYTES {
        return msg.clone();
    }
    let max = PERSISTED_MCP_RESULT_MAX_BYTES - 1024;
    let result = match &end.result {
        Err(message) => Err(crate::tool_output::cap_tool_result(message.clone(), max)),
        Ok(value) => {
            let mut text = Vec::new();
            for block in value
                .get("content")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
            {
                match block.get("text").and_then(serde_json::Value::as_str) {
                    Some(t) => text.push(t.to_string()),
                    None => text.push(format!(
                        "[{} block not kept in the history]",
                        block
                            .get("type")
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or("non-text")
                    )),
                }
            }
            if value.get("structuredContent").is_some() {
                text.push("[structured content not kept in the history]".to_string());
            }
            let mut kept = serde_json::json!({
                "content": [{
                    "type": "text",
                    "text": crate::tool_output::cap_tool_result(text.join("\n"), max),
                }],
            });
            if let Some(is_error) = value.get("isError") {
                kept["isError"] = is_error.clone();
            }
            Ok(kept)
        }
    };
    EventMsg::McpToolCallEnd(interpreter_protocol::McpToolCallEndEvent {
        result,
        ..end.clone()
    })
}
