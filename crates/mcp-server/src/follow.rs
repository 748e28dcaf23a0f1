//! Following a turn from one `tools/call`: forward its events (`codex/event`, progress
//! heartbeats), resolve the approvals it raises the way this client can answer them, and
//! end with its result — or earlier, with an MRTR `InputRequiredResult`, a cancellation,
//! or the caller's wait limit.

use std::sync::Arc;
use std::time::Duration;

use interpreter_core::config::ElicitationFallback;
use interpreter_protocol::{Event, ReviewDecision, ThreadId};
use rmcp::model::{
    CallToolResult, CustomNotification, InputRequest, InputRequests, InputRequiredResult,
    ProgressNotificationParam, ProgressToken, RequestId, ServerNotification,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::approval::{self, ElicitOutcome, spec_elicitation_params};
use crate::mrtr::{APPROVAL_INPUT_KEY, RequestStates, SuspendedApproval};
use crate::turns::{Answer, PendingApproval, RunState, TurnRun};

/// How this caller answers the approvals a turn raises.
#[derive(Clone)]
pub(crate) enum Asker {
    /// Legacy era, client declared elicitation: `elicitation/create` on its connection,
    /// tied to the `tools/call` that is asking (`origin`) so streamable HTTP sends it on
    /// that call's own response stream.
    Elicit {
        peer: Peer<RoleServer>,
        origin: RequestId,
    },
    /// 2026-07-28, client declared elicitation: end the call with `InputRequiredResult`.
    Mrtr { tool: String },
    /// The client cannot be asked: the configured fallback decides, and says so.
    Fallback(ElicitationFallback),
}

/// Where following ended.
pub(crate) enum FollowEnd {
    Finished(CallToolResult),
    NeedsInput(InputRequiredResult),
    /// The request was cancelled (the caller decides whether the turn stops too).
    Cancelled,
    /// The caller's wait limit passed with the turn still running.
    StillRunning,
}

/// One caller following a turn.
pub(crate) struct Follower {
    pub peer: Peer<RoleServer>,
    pub progress_token: Option<ProgressToken>,
    /// Forward every event as a `codex/event` notification (legacy era, opted in).
    pub codex_events: bool,
    /// The `tools/call` id, for `codex/event`'s `_meta.requestId`.
    pub request_id: Value,
    pub cancel: CancellationToken,
    /// Fires when the connection is going away: notifications are no longer sent (rmcp
    /// stops delivering them, and waiting on one would hold up the shutdown).
    pub closing: CancellationToken,
    pub asker: Asker,
    pub heartbeat: Duration,
    progress: f64,
    started: tokio::time::Instant,
}

impl Follower {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        progress_token: Option<ProgressToken>,
        codex_events: bool,
        request_id: Value,
        cancel: CancellationToken,
        closing: CancellationToken,
        asker: Asker,
        heartbeat: Duration,
    ) -> Self {
        Self {
            peer,
            progress_token,
            codex_events,
            request_id,
            cancel,
            closing,
            asker,
            heartbeat: heartbeat.max(Duration::from_millis(200)),
            progress: 0.0,
            started: tokio::time::Instant::now(),
        }
    }

    /// Follow `run` until it finishes, needs client input, is cancelled, or `limit`
    /// passes.
    pub(crate) async fn follow(
        &mut self,
        run: &Arc<TurnRun>,
        states: &RequestStates,
        limit: Option<tokio::time::Instant>,
    ) -> FollowEnd {
        let mut events = run.subscribe_events();
        let mut state = run.watch_state();
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + self.heartbeat, self.heartbeat);
        loop {
            while let Some(approval) = run.take_pending() {
                if let Some(end) = self.ask(run, approval, states) {
                    return end;
                }
            }
            let current = state.borrow_and_update().clone();
            let step = match current {
                RunState::Finished { result, .. } => {
                    // Deliver the events that preceded the end before the result.
                    self.drain_events(run.thread_id, &mut events).await;
                    return FollowEnd::Finished(result);
                }
                RunState::Running { step, .. } => step,
            };
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return FollowEnd::Cancelled,
                () = sleep_until_opt(limit) => return FollowEnd::StillRunning,
                event = events.recv() => match event {
                    Ok(event) => self.forward(run.thread_id, &event).await,
                    Err(RecvError::Lagged(skipped)) => {
                        tracing::debug!("a slow follower skipped {skipped} event(s)");
                    }
                    // The run ended; its state says how.
                    Err(RecvError::Closed) => {}
                },
                changed = state.changed() => {
                    if changed.is_err() {
                        // The run is gone without a final state: cannot happen while we
                        // hold it, but never spin.
                        return FollowEnd::StillRunning;
                    }
                }
                _ = heartbeat.tick() => {
                    let message = format!("{step} (turn running for {}s)", self.started.elapsed().as_secs());
                    self.progress(message).await;
                }
            }
        }
    }

    async fn drain_events(
        &mut self,
        thread_id: ThreadId,
        events: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    ) {
        while let Ok(event) = events.try_recv() {
            self.forward(thread_id, &event).await;
        }
    }

    async fn forward(&mut self, thread_id: ThreadId, event: &Event) {
        if self.codex_events {
            self.codex_event(thread_id, event).await;
        }
        if let Some(step) = crate::turns::step_of(&event.msg) {
            self.progress(step).await;
        }
    }

    /// `codex/event`, the reference's stream of every engine event.
    pub(crate) async fn codex_event(&self, thread_id: ThreadId, event: &Event) {
        let Ok(msg) = serde_json::to_value(&event.msg) else {
            return;
        };
        let params = json!({
            "_meta": {"requestId": self.request_id, "threadId": thread_id.to_string()},
            "id": event.id,
            "msg": msg,
        });
        let notification = ServerNotification::CustomNotification(CustomNotification::new(
            "codex/event",
            Some(params),
        ));
        tokio::select! {
            sent = self.peer.send_notification(notification) => {
                if let Err(e) = sent {
                    tracing::debug!("could not send codex/event: {e}");
                }
            }
            () = self.closing.cancelled() => {}
        }
    }

    /// `notifications/progress`, strictly increasing, only for a caller that sent a token.
    async fn progress(&mut self, message: String) {
        let Some(token) = self.progress_token.clone() else {
            return;
        };
        self.progress += 1.0;
        let mut param = ProgressNotificationParam::new(token, self.progress);
        param.message = Some(message);
        tokio::select! {
            sent = self.peer.notify_progress(param) => {
                if let Err(e) = sent {
                    tracing::debug!("could not send progress: {e}");
                }
            }
            () = self.closing.cancelled() => {}
        }
    }

    /// Resolve one approval, or end the call to ask the client (MRTR).
    fn ask(
        &self,
        run: &Arc<TurnRun>,
        approval: Arc<PendingApproval>,
        states: &RequestStates,
    ) -> Option<FollowEnd> {
        match &self.asker {
            Asker::Elicit { peer, origin } => {
                let peer = peer.clone();
                let origin = origin.clone();
                let run = run.clone();
                // The question outlives this caller (a `codex-wait` may return meanwhile);
                // the turn's end or the engine's deadline bounds it.
                tokio::spawn(async move {
                    let outcome = approval::elicit(
                        &peer,
                        origin,
                        approval.params.clone(),
                        &approval.expired,
                        run.approval_timeout,
                        &run.stopping(),
                    )
                    .await;
                    match outcome {
                        ElicitOutcome::ClientError => run.note(format!(
                            "the request to {} was denied: the client could not answer the approval request",
                            approval.what
                        )),
                        // Noted where the engine's expiry is seen (`park_approval`).
                        ElicitOutcome::TimedOut => {}
                        ElicitOutcome::Answered(_) | ElicitOutcome::Cancelled => {}
                    }
                    approval.resolve(outcome.answer());
                });
                None
            }
            Asker::Mrtr { tool } => {
                let ttl = run.approval_timeout;
                let state = SuspendedApproval {
                    thread: run.thread_id.to_string(),
                    approval: approval.id,
                };
                let sealed = match states.seal(&state, tool, ttl) {
                    Ok(sealed) => sealed,
                    Err(e) => {
                        tracing::warn!("could not seal an approval request: {e}");
                        run.note(format!(
                            "the request to {} was denied: the approval could not be sent",
                            approval.what
                        ));
                        approval.resolve(Answer::Decided(ReviewDecision::Denied));
                        return None;
                    }
                };
                let request = json!({
                    "method": "elicitation/create",
                    "params": spec_elicitation_params(&approval.params, approval.is_question),
                });
                let request: InputRequest = match serde_json::from_value(request) {
                    Ok(request) => request,
                    Err(e) => {
                        tracing::warn!("could not build an elicitation request: {e}");
                        approval.resolve(Answer::Decided(ReviewDecision::Denied));
                        return None;
                    }
                };
                run.offer(approval);
                let mut requests = InputRequests::new();
                requests.insert(APPROVAL_INPUT_KEY.to_string(), request);
                Some(FollowEnd::NeedsInput(InputRequiredResult::new(
                    Some(requests),
                    Some(sealed),
                )))
            }
            // A downstream server's question is never answered for the user: declined.
            Asker::Fallback(_) if approval.is_question => {
                run.note(format!(
                    "the request to {} was declined: this client does not support elicitation",
                    approval.what
                ));
                approval.resolve(Answer::Decided(ReviewDecision::Denied));
                None
            }
            Asker::Fallback(fallback) => {
                let (decision, verb, key) = match fallback {
                    ElicitationFallback::Deny => (ReviewDecision::Denied, "denied", "deny"),
                    ElicitationFallback::Approve => {
                        (ReviewDecision::Approved, "approved", "approve")
                    }
                };
                run.note(format!(
                    "the request to {} was {verb} automatically: this client does not support elicitation (mcp_server.elicitation_fallback = \"{key}\")",
                    approval.what
                ));
                approval.resolve(Answer::Decided(decision));
                None
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
