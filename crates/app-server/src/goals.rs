//! `thread/goal/*`: goal mode. The engine owns the goal and its rules
//! (`interpreter_core::goal`); this family maps it to the wire, tells the thread's
//! followers about changes, and starts the turns the goal asks for, one after another,
//! until the engine says it is over (complete, blocked, paused, out of budget, or at the
//! automatic-turn cap).

use std::sync::Arc;

use interpreter_core::goal::GoalUpdate;
use interpreter_protocol::GoalStatus;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::state::{Reply, ServerState, parse_thread_id};
use crate::threads::followers_and;
use crate::{mapping, turns};

pub(crate) async fn get(
    state: &Arc<ServerState>,
    params: v2::ThreadIdParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let loaded = state.load_for_turn(thread_id).await?;
    Reply::new(&v2::ThreadGoalGetResponse {
        goal: loaded
            .thread
            .goal()
            .map(|goal| mapping::wire_goal(thread_id, goal)),
    })
}

/// Create or change the goal; a goal left active on an idle thread starts its first
/// turn right after the response (then `thread/goal/updated`, then `turn/started`).
pub(crate) async fn set(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadGoalSetParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let loaded = state.load_for_turn(thread_id).await?;
    loaded.subscribe(connection);
    let goal = loaded
        .thread
        .set_goal(GoalUpdate {
            objective: params.objective,
            status: params.status.map(core_status),
            token_budget: params.token_budget,
        })
        .await?;
    let active = goal.status == GoalStatus::Active;
    let goal = mapping::wire_goal(thread_id, goal);
    let notify_to = followers_and(Some(loaded.clone()), connection);
    let updated = v2::ThreadGoalUpdatedNotification {
        thread_id: params.thread_id,
        turn_id: None,
        goal: goal.clone(),
    };
    let mut reply = Reply::new(&v2::ThreadGoalSetResponse { goal })?.then(move || {
        for connection in notify_to {
            connection.notify(notification_names::THREAD_GOAL_UPDATED, &updated);
        }
    });
    if active
        && loaded.active_turn().is_none()
        && let Some(release) = turns::start_goal_turn(state, connection, loaded).await?
    {
        reply = reply.then(release);
    }
    Ok(reply)
}

pub(crate) async fn clear(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadGoalClearParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let loaded = state.load_for_turn(thread_id).await?;
    let cleared = loaded.thread.clear_goal().await?;
    let reply = Reply::new(&v2::ThreadGoalClearResponse { cleared })?;
    if !cleared {
        return Ok(reply);
    }
    let notify_to = followers_and(Some(loaded), connection);
    let notification = v2::ThreadIdNotification {
        thread_id: params.thread_id,
    };
    Ok(reply.then(move || {
        for connection in notify_to {
            connection.notify(notification_names::THREAD_GOAL_CLEARED, &notification);
        }
    }))
}

fn core_status(status: v2::ThreadGoalStatus) -> GoalStatus {
    match status {
        v2::ThreadGoalStatus::Active => GoalStatus::Active,
        v2::ThreadGoalStatus::Paused => GoalStatus::Paused,
        v2::ThreadGoalStatus::Blocked => GoalStatus::Blocked,
        v2::ThreadGoalStatus::UsageLimited => GoalStatus::UsageLimited,
        v2::ThreadGoalStatus::BudgetLimited => GoalStatus::BudgetLimited,
        v2::ThreadGoalStatus::Complete => GoalStatus::Complete,
    }
}
