//! The 2026-07-28 Tasks extension (`io.modelcontextprotocol/tasks`) for `codex` and
//! `codex-reply`: a caller that declares it on a request gets a task handle at once
//! (`resultType: "task"`) and polls `tasks/get`; approvals surface as the task's
//! `inputRequests` and come back through `tasks/update`; `tasks/cancel` interrupts.
//!
//! A task is one turn of one thread, and its id names both (`<threadId>.<turnId>`), so
//! the durable thread store backs it: after a server restart `tasks/get` reads the
//! turn's outcome from the thread's rollout (rmcp's own `TaskManager` is in-memory and
//! would lose it).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use interpreter_core::store::{self, TurnOutcome};
use interpreter_protocol::ThreadId;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ErrorData, GetTaskResult, InputRequest,
    InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::json;

use crate::approval::spec_elicitation_params;
use crate::result::{self, TurnStatus};
use crate::turns::{Answer, Registry, RunState, TurnRun};

/// How often we suggest clients poll.
const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Prefix of the `inputRequests` keys of a task's approvals (unique per task lifetime:
/// the suffix is the process-wide approval id).
const APPROVAL_KEY_PREFIX: &str = "approval-";

fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The id of the task that is turn `turn_id` of `thread_id`.
pub(crate) fn task_id(thread_id: ThreadId, turn_id: &str) -> String {
    format!("{thread_id}.{turn_id}")
}

/// The thread task `task_id` is a turn of, if the id is one of ours.
pub(crate) fn thread_of(task_id: &str) -> Option<ThreadId> {
    parse_task_id(task_id).ok().map(|(thread, _)| thread)
}

fn parse_task_id(task_id: &str) -> Result<(ThreadId, &str), ErrorData> {
    let unknown = || ErrorData::invalid_params(format!("unknown task {task_id}"), None);
    let (thread, turn) = task_id.split_once('.').ok_or_else(unknown)?;
    let thread = thread.parse::<ThreadId>().map_err(|_| unknown())?;
    if turn.is_empty() {
        return Err(unknown());
    }
    Ok((thread, turn))
}

fn base_task(task_id: &str, created: DateTime<Utc>) -> Task {
    Task::new(
        task_id,
        TaskStatus::Working,
        timestamp(created),
        timestamp(Utc::now()),
    )
    .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64)
}

/// The `CreateTaskResult` for a run that just started.
pub(crate) fn created(run: &TurnRun) -> CreateTaskResult {
    let mut task = base_task(&task_id(run.thread_id, &run.turn_id), run.created);
    task.status_message = Some("the turn is running".to_string());
    CreateTaskResult::new(task)
}

fn completed(task: Task, result: &CallToolResult) -> DetailedTask {
    let result: JsonObject = serde_json::to_value(result)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    DetailedTask::new(task, TaskPayload::Completed { result })
}

/// `tasks/get`.
pub(crate) async fn get(registry: &Registry, task_id: &str) -> Result<GetTaskResult, ErrorData> {
    let (thread_id, turn_id) = parse_task_id(task_id)?;
    if let Some(run) = registry
        .latest_run(thread_id)
        .filter(|r| r.turn_id == turn_id)
    {
        return Ok(GetTaskResult::new(live(&run, task_id)));
    }
    from_rollout(registry, thread_id, turn_id, task_id)
        .await
        .map(GetTaskResult::new)
}

fn live(run: &Arc<TurnRun>, task_id: &str) -> DetailedTask {
    let mut task = base_task(task_id, run.created);
    match run.state() {
        RunState::Finished { result, status } => {
            task.status_message = Some(format!("the turn {}", status_word(status)));
            completed(task, &result)
        }
        RunState::Running { step, .. } => {
            task.status_message = Some(step);
            // Approvals nobody has taken are offered to the task's poller; ones already
            // offered stay outstanding until `tasks/update` answers them.
            while let Some(approval) = run.take_pending() {
                run.offer(approval);
            }
            let mut requests = InputRequests::new();
            for approval in run.offered_approvals() {
                let request = json!({
                    "method": "elicitation/create",
                    "params": spec_elicitation_params(&approval.params, approval.is_question),
                });
                if let Ok(request) = serde_json::from_value::<InputRequest>(request) {
                    requests.insert(format!("{APPROVAL_KEY_PREFIX}{}", approval.id), request);
                }
            }
            if requests.is_empty() {
                DetailedTask::new(task, TaskPayload::Working)
            } else {
                DetailedTask::new(
                    task,
                    TaskPayload::InputRequired {
                        input_requests: requests,
                    },
                )
            }
        }
    }
}

fn status_word(status: TurnStatus) -> &'static str {
    match status {
        TurnStatus::Completed => "completed",
        TurnStatus::Failed => "failed",
        TurnStatus::Interrupted => "was interrupted",
        TurnStatus::Running | TurnStatus::WaitingForApproval | TurnStatus::Idle => "is running",
    }
}

/// A task whose turn is no longer in memory (the server restarted, or the thread was
/// retired): its outcome as the rollout recorded it.
async fn from_rollout(
    registry: &Registry,
    thread_id: ThreadId,
    turn_id: &str,
    task_id: &str,
) -> Result<DetailedTask, ErrorData> {
    let unknown = || ErrorData::invalid_params(format!("unknown task {task_id}"), None);
    let items = match registry.store().await {
        Ok(store) => store.read(thread_id).await.ok().flatten(),
        Err(err) => {
            tracing::warn!("reading task {task_id}: {err}");
            None
        }
    }
    .ok_or_else(unknown)?
    .items;
    // The turn as every front end reads a past turn back, its recap included.
    let turn = store::turns_from_rollout(&items)
        .into_iter()
        .find(|turn| turn.id == turn_id)
        .ok_or_else(unknown)?;
    let task = base_task(task_id, Utc::now());
    let result = match turn.outcome {
        TurnOutcome::Completed | TurnOutcome::Failed => {
            let failure = turn.failure();
            let (text, status) =
                result::turn_outcome(turn.last_agent_message.as_deref(), failure.as_deref());
            let short = failure.is_some() || turn.output_limit;
            result::finished_turn(thread_id, &text, status, short.then_some(&turn.recap))
        }
        TurnOutcome::Interrupted => result::finished_turn(
            thread_id,
            &format!(
                "The turn was interrupted. Send `codex-reply` with threadId {thread_id} to continue."
            ),
            TurnStatus::Interrupted,
            Some(&turn.recap),
        ),
        // Started, never finished, and not running here: the server stopped mid-turn.
        TurnOutcome::InProgress => result::finished_turn(
            thread_id,
            &format!(
                "The server stopped while this turn ran; what it did so far is saved. Send `codex-reply` with threadId {thread_id} to continue."
            ),
            TurnStatus::Interrupted,
            Some(&turn.recap),
        ),
    };
    Ok(completed(task, &result))
}

/// `tasks/update`: answers to the approvals the task asked for.
pub(crate) fn update(
    registry: &Registry,
    task_id: &str,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    let (thread_id, turn_id) = parse_task_id(task_id)?;
    let run = registry
        .latest_run(thread_id)
        .filter(|r| r.turn_id == turn_id)
        .ok_or_else(|| {
            ErrorData::invalid_params(format!("task {task_id} is not waiting for input"), None)
        })?;
    for (key, answer) in responses {
        let Some(id) = key
            .strip_prefix(APPROVAL_KEY_PREFIX)
            .and_then(|id| id.parse::<u64>().ok())
        else {
            continue;
        };
        // Eventually consistent: an answer for an approval that already ended is ignored.
        if let Some(approval) = run.redeem(id) {
            approval.resolve(Answer::Client(answer.clone()));
        }
    }
    Ok(())
}

/// `tasks/cancel`: interrupt the turn (cooperative; the task may still complete).
pub(crate) fn cancel(registry: &Registry, task_id: &str) -> Result<(), ErrorData> {
    let (thread_id, turn_id) = parse_task_id(task_id)?;
    match registry
        .latest_run(thread_id)
        .filter(|r| r.turn_id == turn_id)
    {
        Some(run) => {
            run.interrupt();
            Ok(())
        }
        None => Err(ErrorData::invalid_params(
            format!("task {task_id} is not running"),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_name_thread_and_turn() {
        let thread = ThreadId::new();
        let id = task_id(thread, "7");
        let (parsed, turn) = parse_task_id(&id).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((parsed, turn), (thread, "7"));
        assert!(parse_task_id("nope").is_err());
        assert!(parse_task_id(&format!("{thread}.")).is_err());
        assert!(parse_task_id("x.1").is_err());
    }
}
