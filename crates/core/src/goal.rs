//! Goals: an objective a thread works toward over several turns, until the model marks it
//! complete or blocked, its token budget is spent, or it is paused.
//!
//! This module owns the goal rules: what a change may do ([`apply_update`]), what a turn
//! costs a goal and when that stops it ([`account_turn`]), whether another turn runs and
//! what the model is told in it ([`GoalSlot::next_turn`]), and the `update_goal` tool the
//! model ends a goal with. The session records every change in the rollout (so a resumed
//! thread has its goal back); front ends start the turns `next_turn` asks for, since they
//! are the ones that follow a turn's events.

use std::sync::Arc;

use interpreter_model_client::ToolSpec;
use interpreter_protocol::{GoalStatus, ThreadGoal};
use serde::Deserialize;
use serde_json::json;

/// Turns a goal runs on its own after it was last set active; then it is paused, so a
/// model that never calls `update_goal` cannot run a machine (or a bill) forever.
pub const MAX_AUTOMATIC_TURNS: u32 = 20;

/// The longest objective taken, in characters: it is repeated in every goal turn.
pub const MAX_OBJECTIVE_CHARS: usize = 4_000;

pub(crate) const UPDATE_GOAL_TOOL: &str = "update_goal";

/// A thread's goal and how many turns it has run on its own, shared by the session and
/// the thread's handle.
#[derive(Debug, Default)]
pub struct GoalSlot {
    pub goal: Option<ThreadGoal>,
    automatic_turns: u32,
}

pub(crate) type SharedGoal = Arc<std::sync::Mutex<GoalSlot>>;

/// A change a client asks for. `None` leaves a field as it is; `token_budget:
/// Some(None)` removes the budget.
#[derive(Debug, Clone, Default)]
pub struct GoalUpdate {
    pub objective: Option<String>,
    pub status: Option<GoalStatus>,
    pub token_budget: Option<Option<i64>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    #[error("the thread has no goal yet: give an objective")]
    NoObjective,
    #[error("the objective is empty")]
    EmptyObjective,
    #[error("the objective is longer than {MAX_OBJECTIVE_CHARS} characters")]
    ObjectiveTooLong,
    #[error("tokenBudget must be a positive number of tokens")]
    BadBudget,
}

/// What the next goal turn is, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextTurn {
    /// Run a turn with this input.
    Run(String),
    /// The automatic-turn cap was reached: the goal is now paused (record it).
    Paused(ThreadGoal),
    /// No active goal.
    Idle,
}

/// The goal after `update`, applied to `current` at `now` (Unix seconds). A new objective
/// starts a new goal (fresh counters, active unless told otherwise).
pub fn apply_update(
    current: Option<&ThreadGoal>,
    update: GoalUpdate,
    now: i64,
) -> Result<ThreadGoal, GoalError> {
    let objective = match update.objective.as_deref().map(str::trim) {
        Some("") => return Err(GoalError::EmptyObjective),
        Some(text) if text.chars().count() > MAX_OBJECTIVE_CHARS => {
            return Err(GoalError::ObjectiveTooLong);
        }
        other => other.map(str::to_string),
    };
    if let Some(Some(budget)) = update.token_budget
        && budget <= 0
    {
        return Err(GoalError::BadBudget);
    }
    let mut goal = match (current, objective) {
        (Some(goal), Some(objective)) if goal.objective != objective => fresh(objective, now),
        (Some(goal), _) => goal.clone(),
        (None, Some(objective)) => fresh(objective, now),
        (None, None) => return Err(GoalError::NoObjective),
    };
    if let Some(status) = update.status {
        goal.status = status;
    }
    if let Some(budget) = update.token_budget {
        goal.token_budget = budget;
    }
    goal.updated_at = now;
    Ok(goal)
}

fn fresh(objective: String, now: i64) -> ThreadGoal {
    ThreadGoal {
        objective,
        status: GoalStatus::Active,
        token_budget: None,
        tokens_used: 0,
        time_used_seconds: 0,
        created_at: now,
        updated_at: now,
    }
}

impl GoalSlot {
    /// Replace the goal; a goal (re)activated gets its full run of automatic turns.
    pub fn set(&mut self, goal: Option<ThreadGoal>) {
        let reactivated = goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active)
            && self
                .goal
                .as_ref()
                .is_none_or(|g| g.status != GoalStatus::Active);
        if reactivated || goal.is_none() {
            self.automatic_turns = 0;
        }
        self.goal = goal;
    }

    /// Whether the thread has a goal, in any status.
    pub fn has_goal(&self) -> bool {
        self.goal.is_some()
    }

    pub fn is_active(&self) -> bool {
        self.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active)
    }

    /// Whether another turn should run for the goal, and with what input.
    pub fn next_turn(&mut self, now: i64) -> NextTurn {
        let Some(goal) = self
            .goal
            .as_mut()
            .filter(|g| g.status == GoalStatus::Active)
        else {
            return NextTurn::Idle;
        };
        if self.automatic_turns >= MAX_AUTOMATIC_TURNS {
            goal.status = GoalStatus::Paused;
            goal.updated_at = now;
            return NextTurn::Paused(goal.clone());
        }
        self.automatic_turns += 1;
        NextTurn::Run(turn_input(&goal.objective, self.automatic_turns == 1))
    }
}

fn turn_input(objective: &str, first: bool) -> String {
    let lead = if first {
        "Work toward this goal over as many turns as it takes:"
    } else {
        "Continue working toward the goal:"
    };
    format!(
        "{lead}\n\n{objective}\n\nWhen the goal is achieved, call `{UPDATE_GOAL_TOOL}` with status \
         \"complete\". If you cannot make progress without the user, call it with status \
         \"blocked\" and say why. Otherwise another turn follows this one."
    )
}

/// What a finished turn cost an active goal. Returns whether the goal changed: an
/// interrupted turn pauses it (the user stopped the work), a spent budget stops it.
pub fn account_turn(
    goal: &mut ThreadGoal,
    tokens: i64,
    seconds: i64,
    interrupted: bool,
    now: i64,
) -> bool {
    if goal.status != GoalStatus::Active {
        return false;
    }
    goal.tokens_used = goal.tokens_used.saturating_add(tokens.max(0));
    goal.time_used_seconds = goal.time_used_seconds.saturating_add(seconds.max(0));
    if interrupted {
        goal.status = GoalStatus::Paused;
    } else if goal
        .token_budget
        .is_some_and(|budget| goal.tokens_used >= budget)
    {
        goal.status = GoalStatus::BudgetLimited;
    }
    goal.updated_at = now;
    true
}

/// The model's `update_goal` call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateGoalArgs {
    pub status: ModelGoalStatus,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The two ends a model may give a goal; pausing and budgets are the user's.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ModelGoalStatus {
    Complete,
    Blocked,
}

impl From<ModelGoalStatus> for GoalStatus {
    fn from(status: ModelGoalStatus) -> Self {
        match status {
            ModelGoalStatus::Complete => Self::Complete,
            ModelGoalStatus::Blocked => Self::Blocked,
        }
    }
}

/// Offered once the thread has a goal (an ended goal keeps it, so the tool list stays
/// the same; the call then says there is no active goal).
pub(crate) fn tool_spec() -> ToolSpec {
    ToolSpec {
        name: UPDATE_GOAL_TOOL.to_string(),
        description: "End the thread's goal: status \"complete\" when it is achieved, \
                      \"blocked\" when you cannot make progress without the user (say why in \
                      `reason`). Until then, each turn is followed by another."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["complete", "blocked"]},
                "reason": {"type": "string", "description": "Why, in a sentence."}
            },
            "required": ["status"],
            "additionalProperties": false
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn update(objective: Option<&str>, status: Option<GoalStatus>) -> GoalUpdate {
        GoalUpdate {
            objective: objective.map(str::to_string),
            status,
            token_budget: None,
        }
    }

    #[test]
    fn a_goal_needs_an_objective_and_a_new_one_starts_afresh() {
        assert_eq!(
            apply_update(None, update(None, Some(GoalStatus::Active)), 1),
            Err(GoalError::NoObjective)
        );
        assert_eq!(
            apply_update(None, update(Some("  "), None), 1),
            Err(GoalError::EmptyObjective)
        );
        let mut goal = apply_update(None, update(Some(" fix it "), None), 1).unwrap();
        assert_eq!(goal.objective, "fix it");
        assert_eq!(goal.status, GoalStatus::Active);
        goal.tokens_used = 50;
        let paused = apply_update(Some(&goal), update(None, Some(GoalStatus::Paused)), 2).unwrap();
        assert_eq!((paused.tokens_used, paused.created_at), (50, 1));
        let other = apply_update(Some(&paused), update(Some("other"), None), 3).unwrap();
        assert_eq!((other.tokens_used, other.status), (0, GoalStatus::Active));
        let budget = GoalUpdate {
            token_budget: Some(Some(0)),
            ..GoalUpdate::default()
        };
        assert_eq!(
            apply_update(Some(&goal), budget, 4),
            Err(GoalError::BadBudget)
        );
    }

    #[test]
    fn automatic_turns_stop_at_the_cap_and_restart_when_set_active_again() {
        let goal = apply_update(None, update(Some("g"), None), 1).unwrap();
        let mut slot = GoalSlot::default();
        slot.set(Some(goal.clone()));
        for _ in 0..MAX_AUTOMATIC_TURNS {
            assert!(matches!(slot.next_turn(2), NextTurn::Run(_)));
        }
        let NextTurn::Paused(paused) = slot.next_turn(3) else {
            panic!("not paused at the cap");
        };
        assert_eq!(paused.status, GoalStatus::Paused);
        assert_eq!(slot.next_turn(4), NextTurn::Idle);
        slot.set(Some(goal));
        assert!(matches!(slot.next_turn(5), NextTurn::Run(_)));
    }

    #[test]
    fn turns_are_counted_and_a_spent_budget_or_an_interrupt_stops_the_goal() {
        let mut goal = apply_update(
            None,
            GoalUpdate {
                objective: Some("g".into()),
                status: None,
                token_budget: Some(Some(100)),
            },
            1,
        )
        .unwrap();
        assert!(account_turn(&mut goal, 60, 3, false, 2));
        assert_eq!(goal.status, GoalStatus::Active);
        assert!(account_turn(&mut goal, 60, 3, false, 3));
        assert_eq!(
            (goal.status, goal.tokens_used, goal.time_used_seconds),
            (GoalStatus::BudgetLimited, 120, 6)
        );
        assert!(!account_turn(&mut goal, 10, 1, false, 4));
        let mut other = apply_update(None, update(Some("h"), None), 1).unwrap();
        assert!(account_turn(&mut other, 1, 1, true, 2));
        assert_eq!(other.status, GoalStatus::Paused);
    }
}
