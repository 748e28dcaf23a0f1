//! A thread's op loop: the task that takes the thread's [`Op`]s from its submission
//! queue, one at a time, and runs its turns.
//!
//! The loop selects over the submission queue and the running turn. A turn runs as its
//! own task so that `Interrupt` and approval answers are handled while the turn is
//! blocked on the model or a child process; the turn observes a [`CancellationToken`] at
//! every await. The loop sits above the turn machinery ([`crate::turn`]) and the session
//! state it drives ([`crate::session`]), which know nothing of it.

use std::sync::Arc;

use base64::prelude::*;
use interpreter_protocol::{EventMsg, Op, ResponseItem, UserInput};
use interpreter_telemetry::W3cTraceContext;
use interpreter_telemetry::context::parent_context;
use interpreter_telemetry::spans;
use opentelemetry::trace::FutureExt as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::CoreError;
use crate::session::Session;
use crate::submission::Submission;
use crate::turn::{self, TurnKind};

/// Whether the thread is idle, waiting first for a turn that no longer takes input (it
/// is only finishing its bookkeeping).
async fn idle_or_finishing(session: &Session, running: &mut Option<RunningTurn>) -> bool {
    if running.is_some()
        && !session.takes_input().await
        && let Some(turn) = running.take()
    {
        let _ = turn.handle.await;
    }
    running.is_none()
}

struct RunningTurn {
    sub_id: String,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// Whether the thread is idle for an op that needs it so (`what` names the op in the
/// error otherwise). A turn that no longer takes input is only finishing its bookkeeping,
/// so it is waited for rather than refused.
async fn idle_for(
    session: &Session,
    running: &mut Option<RunningTurn>,
    sub_id: &str,
    what: &str,
) -> bool {
    if !idle_or_finishing(session, running).await {
        session
            .emit(
                sub_id,
                EventMsg::Error(interpreter_protocol::ErrorEvent {
                    message: format!("a turn is running; {what} after it ends"),
                    kind: None,
                }),
            )
            .await;
        return false;
    }
    true
}

pub(crate) async fn run_loop(session: Arc<Session>, rx_sub: mpsc::Receiver<Submission>) {
    let instruments = interpreter_telemetry::metrics::instruments();
    instruments.thread_loaded();
    serve_submissions(&session, rx_sub).await;
    instruments.thread_unloaded();
    // The thread is over; give its MCP servers back to the pool, which stops them once
    // no thread has used them for its idle timeout.
    if let Ok(session) = Arc::try_unwrap(session)
        && let Some(mcp) = session.mcp
    {
        mcp.shutdown().await;
    }
}

async fn serve_submissions(session: &Arc<Session>, mut rx_sub: mpsc::Receiver<Submission>) {
    let mut running: Option<RunningTurn> = None;
    session.release_when_idle().await;
    loop {
        let turn_finished = async {
            match running.as_mut() {
                Some(turn) => {
                    let _ = (&mut turn.handle).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            sub = rx_sub.recv() => {
                let Some(sub) = sub else {
                    // Every handle is gone: stop the turn so children die and the rollout
                    // records the abort.
                    if let Some(turn) = running.take() {
                        turn.cancel.cancel();
                        let _ = turn.handle.await;
                    }
                    return;
                };
                match sub.op {
                    Op::UserInput { items } => {
                        let mut items = user_input_to_items(items);
                        let joined = running.is_some() && session.offer_input(&mut items).await;
                        if !joined {
                            // A turn that no longer takes input is only finishing its
                            // bookkeeping: wait for it, then this input is a turn of its own.
                            if let Some(turn) = running.take() {
                                let _ = turn.handle.await;
                            }
                            if !session.take_for_turn(&sub.id).await {
                                continue;
                            }
                            let mut input = session.open_input().await;
                            input.append(&mut items);
                            let cancel = session.fence.child_token();
                            let handle = spawn_turn(
                                session,
                                &sub.id,
                                "turn",
                                sub.trace.as_ref(),
                                turn::run_turn(
                                    session.clone(),
                                    sub.id.clone(),
                                    TurnKind::Input(input),
                                    cancel.clone(),
                                ),
                            );
                            running = Some(RunningTurn { sub_id: sub.id, cancel, handle });
                        }
                    }
                    Op::Compact => {
                        if idle_for(session, &mut running, &sub.id, "compact").await
                            && session.take_for_turn(&sub.id).await
                        {
                            // Input sent during the compaction waits for it, then runs
                            // as a turn of its own.
                            session.reopen_input().await;
                            let cancel = session.fence.child_token();
                            let handle = spawn_turn(
                                session,
                                &sub.id,
                                "compact",
                                sub.trace.as_ref(),
                                turn::run_compact_turn(
                                    session.clone(),
                                    sub.id.clone(),
                                    cancel.clone(),
                                ),
                            );
                            running = Some(RunningTurn { sub_id: sub.id, cancel, handle });
                        }
                    }
                    Op::Review { request } => {
                        if idle_for(session, &mut running, &sub.id, "start the review").await
                            && session.take_for_turn(&sub.id).await
                        {
                            // Input sent during the review waits for it, then runs as a
                            // turn of its own.
                            session.reopen_input().await;
                            let cancel = session.fence.child_token();
                            let handle = spawn_turn(
                                session,
                                &sub.id,
                                "review",
                                sub.trace.as_ref(),
                                turn::run_turn(
                                    session.clone(),
                                    sub.id.clone(),
                                    TurnKind::Review(request),
                                    cancel.clone(),
                                ),
                            );
                            running = Some(RunningTurn { sub_id: sub.id, cancel, handle });
                        }
                    }
                    Op::InjectItems { items } => {
                        if idle_for(session, &mut running, &sub.id, "inject items").await
                            && session.take_for_turn(&sub.id).await
                        {
                            session.record_items(&items).await;
                            session.release_when_idle().await;
                        }
                    }
                    Op::RunUserShellCommand { command, timeout_ms } => {
                        if idle_for(session, &mut running, &sub.id, "run the command").await
                            && session.take_for_turn(&sub.id).await
                        {
                            session.reopen_input().await;
                            let timeout = timeout_ms
                                .map(std::time::Duration::from_millis)
                                .unwrap_or(crate::handlers::USER_SHELL_DEFAULT_TIMEOUT);
                            let cancel = session.fence.child_token();
                            let handle = spawn_turn(
                                session,
                                &sub.id,
                                "shell",
                                sub.trace.as_ref(),
                                turn::run_user_shell_turn(
                                    session.clone(),
                                    sub.id.clone(),
                                    command,
                                    timeout,
                                    cancel.clone(),
                                ),
                            );
                            running = Some(RunningTurn { sub_id: sub.id, cancel, handle });
                        }
                    }
                    Op::Interrupt => {
                        if let Some(turn) = &running {
                            tracing::debug!(turn = %turn.sub_id, "interrupt requested");
                            turn.cancel.cancel();
                        }
                    }
                    Op::ExecApproval { id, decision } | Op::PatchApproval { id, decision } => {
                        session.approvals.resolve(&id, decision).await;
                    }
                    Op::ResolveUserInput { id, response } => {
                        session.user_input.resolve(&id, response).await;
                    }
                    Op::ResolvePermissions { id, decision } => {
                        session.permission_requests.resolve(&id, decision).await;
                    }
                    Op::ResolveElicitation { id, response } => {
                        session.elicitations.resolve(&id, response);
                    }
                    Op::SetGoal { goal } => session.record_goal(&sub.id, goal).await,
                    Op::SetCollaborationMode { mode } => {
                        if let Ok(mut slot) = session.collaboration_mode.lock() {
                            *slot = mode;
                        }
                    }
                    Op::RevertThread { before_turn_id, revert_files } => {
                        let reply = session
                            .revert_replies
                            .lock()
                            .ok()
                            .and_then(|mut replies| replies.remove(&sub.id));
                        // Only `Thread::revert` sends it, holding the turn slot; an op
                        // queued some other way, or whose caller gave up, changes nothing.
                        let Some(reply) = reply else {
                            tracing::warn!(sub = %sub.id, "revert with no caller waiting; ignored");
                            continue;
                        };
                        let result = if idle_or_finishing(session, &mut running).await {
                            match session.recorder.as_ref().map(Arc::clone) {
                                Some(recorder) => match recorder.reacquire().await {
                                    Ok(()) => {
                                        let reverted =
                                            session.revert(&before_turn_id, revert_files).await;
                                        session.release_when_idle().await;
                                        reverted
                                    }
                                    Err(err) => Err(err.into()),
                                },
                                None => session.revert(&before_turn_id, revert_files).await,
                            }
                        } else {
                            Err(CoreError::ThreadBusy(session.thread_id))
                        };
                        let _ = reply.send(result);
                    }
                    Op::Shutdown => {
                        if let Some(turn) = running.take() {
                            turn.cancel.cancel();
                            let _ = turn.handle.await;
                        }
                        session.release_when_idle().await;
                        session.emit(&sub.id, EventMsg::ShutdownComplete).await;
                        return;
                    }
                }
            }
            () = turn_finished => {
                running = None;
                // Input the turn took but did not use (it stopped first) starts a new
                // turn.
                let leftover = session.open_input().await;
                if !leftover.is_empty() {
                    let cancel = session.fence.child_token();
                    let sub_id = format!("{}-followup", session.thread_id);
                    let handle = spawn_turn(
                        session,
                        &sub_id,
                        "turn",
                        None,
                        turn::run_turn(
                            session.clone(),
                            sub_id.clone(),
                            TurnKind::Input(leftover),
                            cancel.clone(),
                        ),
                    );
                    running = Some(RunningTurn { sub_id, cancel, handle });
                } else {
                    session.release_when_idle().await;
                }
            }
        }
    }
}

/// Runs a turn as its own task under its `invoke_agent` span, a child of the caller's
/// trace when the op carried one; the span ends with the turn's outcome and the tokens
/// the turn used, and the turns metric counts it.
fn spawn_turn(
    session: &Arc<Session>,
    sub_id: &str,
    kind: &'static str,
    trace: Option<&W3cTraceContext>,
    turn: impl Future<Output = turn::TurnReport> + Send + 'static,
) -> JoinHandle<()> {
    let config = &session.config;
    let thread_id = session.thread_id.to_string();
    let cx = spans::start_turn(
        &parent_context(trace),
        &spans::TurnStart {
            thread_id: &thread_id,
            turn_id: sub_id,
            kind,
            provider: &config.model_provider_id,
            model: &config.model,
            sandbox: config.sandbox_policy.mode().as_str(),
            approval_policy: config.approval_policy.as_str(),
        },
    );
    let session = session.clone();
    let run = async move {
        let before = *session.total_usage.lock().await;
        let started = std::time::Instant::now();
        let report = turn.await;
        let after = *session.total_usage.lock().await;
        let usage = spans::Usage {
            input_tokens: after.input_tokens.saturating_sub(before.input_tokens),
            cached_input_tokens: after
                .cached_input_tokens
                .saturating_sub(before.cached_input_tokens),
            cache_write_input_tokens: after
                .cache_write_input_tokens
                .saturating_sub(before.cache_write_input_tokens),
            output_tokens: after.output_tokens.saturating_sub(before.output_tokens),
            reasoning_output_tokens: after
                .reasoning_output_tokens
                .saturating_sub(before.reasoning_output_tokens),
        };
        let cx = opentelemetry::Context::current();
        spans::end_turn(&cx, report.outcome, &usage, report.error.as_deref());
        interpreter_telemetry::metrics::instruments().record_turn(
            &session.config.model_provider_id,
            &session.config.model,
            report.outcome,
            started.elapsed(),
        );
    };
    tokio::spawn(run.with_context(cx))
}

fn user_input_to_items(items: Vec<UserInput>) -> Vec<ResponseItem> {
    let mut content = Vec::new();
    for item in items {
        match item {
            UserInput::Text { text } => {
                content.push(interpreter_protocol::ContentItem::InputText { text })
            }
            UserInput::LocalImage { path } => match image_data_url(&path) {
                Ok(url) => {
                    content.push(interpreter_protocol::ContentItem::InputImage { image_url: url })
                }
                Err(err) => content.push(interpreter_protocol::ContentItem::InputText {
                    text: format!("[image {} could not be attached: {err}]", path.display()),
                }),
            },
            UserInput::Image { image_url } => {
                content.push(interpreter_protocol::ContentItem::InputImage { image_url })
            }
        }
    }
    vec![ResponseItem::Message {
        role: interpreter_protocol::Role::User,
        content,
    }]
}

fn image_data_url(path: &std::path::Path) -> Result<String, std::io::Error> {
    let bytes = std::fs::read(path)?;
    let mime = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "application/octet-stream",
    };
    Ok(format!(
        "data:{mime};base64,{}",
        BASE64_STANDARD.encode(bytes)
    ))
}
