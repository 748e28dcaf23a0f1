//! Approvals as server→client requests: who is asked, the request in the client's
//! protocol version (v2 `item/*/requestApproval`, v1 `execCommandApproval` and
//! `applyPatchApproval`), the fail-closed decoding of the answer, and how a settled
//! request is announced (`serverRequest/resolved`) and answered to the engine. The
//! engine's clock is the only one: a request it expires is withdrawn here.

use std::sync::Arc;

use interpreter_core::config::ElicitationFallback;
use interpreter_protocol::approval_answer::decode_approval_answer;
use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, ExecApprovalRequestEvent, Op, ReviewDecision,
};
use tokio_util::sync::CancellationToken;

use crate::connection::{ClientAnswer, Connection};
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v1;
use crate::protocol::v2;
use crate::protocol::{METHOD_NOT_FOUND, RequestId, now_ms};
use crate::state::LoadedThread;

/// The turn a request belongs to, as the wire names it.
pub(crate) struct TurnRef<'a> {
    pub thread_id: &'a str,
    pub turn_id: &'a str,
}

/// Who is asked: the connection that started the turn, else any live follower.
pub(crate) fn approver(loaded: &LoadedThread) -> Option<Arc<Connection>> {
    let owner = loaded
        .active_turn()
        .map(|turn| turn.owner)
        .filter(|c| !c.is_closed());
    owner.or_else(|| loaded.subscribers().into_iter().next())
}

pub(crate) fn ask_exec_approval(
    loaded: &Arc<LoadedThread>,
    turn: &TurnRef<'_>,
    request: ExecApprovalRequestEvent,
    turn_over: &CancellationToken,
) {
    let Some(connection) = approver(loaded) else {
        answer_later(loaded, None, ReviewDecision::Denied, move |d| {
            Op::ExecApproval {
                id: request.call_id,
                decision: d,
            }
        });
        return;
    };
    let (method, params) = if connection.legacy_approvals() {
        (
            "execCommandApproval",
            serde_json::to_value(v1::ExecCommandApprovalParams {
                conversation_id: turn.thread_id.to_string(),
                call_id: request.call_id.clone(),
                approval_id: None,
                command: request.command.clone(),
                cwd: request.cwd.to_string_lossy().into_owned(),
                reason: request.reason.clone(),
                parsed_cmd: request
                    .parsed_cmd
                    .iter()
                    .filter_map(|p| serde_json::to_value(p).ok())
                    .collect(),
            }),
        )
    } else {
        (
            "item/commandExecution/requestApproval",
            serde_json::to_value(v2::CommandExecutionRequestApprovalParams {
                thread_id: turn.thread_id.to_string(),
                turn_id: turn.turn_id.to_string(),
                item_id: request.call_id.clone(),
                started_at_ms: now_ms(),
                environment_id: None,
                reason: request.reason.clone(),
                command: Some(interpreter_tools::display_command(&request.command)),
                cwd: Some(request.cwd.to_string_lossy().into_owned()),
                command_actions: Some(mapping::command_actions(&request.parsed_cmd)),
            }),
        )
    };
    let params = params.unwrap_or_default();
    let op = |id, decision| Op::ExecApproval { id, decision };
    spawn_approval(
        loaded,
        connection,
        (method, params),
        turn_over,
        request.call_id,
        op,
    );
}

pub(crate) fn ask_patch_approval(
    loaded: &Arc<LoadedThread>,
    turn: &TurnRef<'_>,
    request: ApplyPatchApprovalRequestEvent,
    turn_over: &CancellationToken,
) {
    let Some(connection) = approver(loaded) else {
        answer_later(loaded, None, ReviewDecision::Denied, move |d| {
            Op::PatchApproval {
                id: request.call_id,
                decision: d,
            }
        });
        return;
    };
    let grant_root = request
        .grant_root
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let (method, params) = if connection.legacy_approvals() {
        (
            "applyPatchApproval",
            serde_json::to_value(v1::ApplyPatchApprovalParams {
                conversation_id: turn.thread_id.to_string(),
                call_id: request.call_id.clone(),
                file_changes: request
                    .changes
                    .iter()
                    .filter_map(|(path, change)| {
                        serde_json::to_value(change)
                            .ok()
                            .map(|v| (path.to_string_lossy().into_owned(), v))
                    })
                    .collect(),
                reason: request.reason.clone(),
                grant_root,
            }),
        )
    } else {
        (
            "item/fileChange/requestApproval",
            serde_json::to_value(v2::FileChangeRequestApprovalParams {
                thread_id: turn.thread_id.to_string(),
                turn_id: turn.turn_id.to_string(),
                item_id: request.call_id.clone(),
                started_at_ms: now_ms(),
                reason: request.reason.clone(),
                grant_root,
            }),
        )
    };
    let params = params.unwrap_or_default();
    let op = |id, decision| Op::PatchApproval { id, decision };
    spawn_approval(
        loaded,
        connection,
        (method, params),
        turn_over,
        request.call_id,
        op,
    );
}

/// Ask `connection`, wait (until the engine expires request `call_id`, the turn's end
/// or the connection's end), decode with the shared fail-closed decoder, answer the
/// engine, and tell followers the request is resolved.
fn spawn_approval(
    loaded: &Arc<LoadedThread>,
    connection: Arc<Connection>,
    (method, params): (&'static str, serde_json::Value),
    turn_over: &CancellationToken,
    call_id: String,
    answer: fn(String, ReviewDecision) -> Op,
) {
    let config = loaded.thread.config();
    let expired = loaded.open_requests.open(&call_id);
    let fallback = match config.app_server.approval_fallback {
        ElicitationFallback::Deny => ReviewDecision::Denied,
        ElicitationFallback::Approve => ReviewDecision::Approved,
    };
    let (request_id, reply) = connection.request(method, &params);
    let turn_over = turn_over.clone();
    let loaded = loaded.clone();
    tokio::spawn(async move {
        let decision = tokio::select! {
            answer = reply => match answer {
                Ok(answer) => decide(answer, fallback),
                // The connection closed under us.
                Err(_) => ReviewDecision::Denied,
            },
            () = expired.cancelled() => {
                tracing::info!("approval request {request_id} got no answer before the engine's deadline (approval_timeout_sec); timed out");
                ReviewDecision::TimedOut
            }
            () = turn_over.cancelled() => ReviewDecision::Abort,
            () = connection.closed.cancelled() => ReviewDecision::Denied,
        };
        loaded.open_requests.close(&call_id);
        connection.forget_request(&request_id);
        answer_later(&loaded, Some(request_id), decision, move |d| {
            answer(call_id, d)
        });
    });
}

fn decide(answer: ClientAnswer, fallback: ReviewDecision) -> ReviewDecision {
    match answer {
        Ok(value) => decode_approval_answer(&value),
        // The client does not implement approvals: the configured fallback, which is
        // not the user declining.
        Err(error) if error.code == METHOD_NOT_FOUND => fallback,
        Err(_) => ReviewDecision::Denied,
    }
}

fn answer_later(
    loaded: &Arc<LoadedThread>,
    request_id: Option<RequestId>,
    decision: ReviewDecision,
    answer: impl FnOnce(ReviewDecision) -> Op + Send + 'static,
) {
    // A request the engine expired is already decided (timed out) there.
    let answer = (decision != ReviewDecision::TimedOut).then(|| answer(decision));
    settle_request(
        loaded.clone(),
        request_id,
        answer,
        "submitting an approval decision",
    );
}

/// A server request is settled: its followers hear `serverRequest/resolved` (when it
/// went out as one), then the thread gets `answer` (none when the engine resolved the
/// request itself, at its deadline). `what` words the log line if the thread is gone.
pub(crate) fn settle_request(
    loaded: Arc<LoadedThread>,
    request_id: Option<RequestId>,
    answer: Option<Op>,
    what: &'static str,
) {
    tokio::spawn(async move {
        if let Some(request_id) = request_id {
            loaded.broadcast(
                notification_names::SERVER_REQUEST_RESOLVED,
                &v2::ServerRequestResolvedNotification {
                    thread_id: loaded.id().to_string(),
                    request_id,
                },
            );
        }
        if let Some(answer) = answer
            && let Err(e) = loaded.thread.submit(answer).await
        {
            tracing::debug!("{what} failed: {e}");
        }
    });
}
