//! What a rollout line holds: the record types, the on-disk line shape, which events are
//! worth persisting, and how model history is rebuilt from records.

use std::path::PathBuf;

use chrono::{DateTime, SecondsFormat, Utc};
use interpreter_protocol::{
    AskForApproval, EventMsg, ReasoningEffort, ResponseItem, SandboxPolicy, SessionSource, ThreadId,
};
use serde::{Deserialize, Serialize};

/// One record of a rollout. On disk: `{"timestamp": ..., "type": "<variant>", "payload": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload", rename_all = "snake_case")]
pub enum RolloutItem {
    /// Always the first line of a rollout.
    SessionMeta(SessionMeta),
    /// Settings snapshot written at the start of each turn.
    TurnContext(TurnContextItem),
    /// Model-visible history, verbatim.
    ResponseItem(ResponseItem),
    /// The persisted subset of events (see [`should_persist_event`]).
    EventMsg(EventMsg),
    /// A compaction checkpoint: the model history from here on starts from
    /// `replacement_history` instead of everything recorded before.
    Compacted(CompactedItem),
    /// What one patch changed on disk, for `thread/revert` with `revertFiles` to undo.
    FileEdits(FileEditsItem),
    /// The thread was reverted: turn `before_turn_id` and every later turn recorded
    /// before this line are no longer part of the thread (see [`apply_reverts`]).
    Reverted(RevertedItem),
}

/// The files one applied patch changed, in the order it changed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEditsItem {
    pub turn_id: String,
    pub call_id: String,
    pub edits: Vec<RecordedFileEdit>,
}

/// One file a patch wrote, created or removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedFileEdit {
    /// Absolute, as the patch named it (lexically normalised).
    pub path: PathBuf,
    /// Where `path` led when the patch wrote it, symlinks resolved: a revert refuses a
    /// path that leads elsewhere by then.
    pub resolved: PathBuf,
    pub before: RecordedContent,
    pub after: RecordedContent,
}

/// A file's content at one moment, as far as the rollout keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RecordedContent {
    /// There was no file.
    Absent,
    Text {
        text: String,
    },
    /// Not kept (too large for the rollout, or not text); such a change cannot be undone.
    NotKept {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RevertedItem {
    pub before_turn_id: String,
    /// The turns dropped, so their ids are never handed out again in this thread.
    pub dropped_turn_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactedItem {
    /// The summary the model wrote.
    pub message: String,
    pub replacement_history: Vec<ResponseItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: ThreadId,
    #[serde(with = "rfc3339_millis")]
    pub timestamp: DateTime<Utc>,
    pub cwd: PathBuf,
    /// Name of the client that started the thread.
    pub originator: String,
    pub cli_version: String,
    pub source: SessionSource,
    pub model_provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    pub base_instructions: Option<String>,
    /// The thread this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from_id: Option<ThreadId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnContextItem {
    #[serde(default)]
    pub turn_id: Option<String>,
    pub cwd: PathBuf,
    pub approval_policy: AskForApproval,
    pub sandbox_policy: SandboxPolicy,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// The turn's collaboration mode; absent in rollouts written before modes (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collaboration_mode: Option<interpreter_protocol::CollaborationModeKind>,
}

/// The shape of one JSONL line.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RolloutLine {
    #[serde(with = "rfc3339_millis")]
    pub timestamp: DateTime<Utc>,
    #[serde(flatten)]
    pub item: RolloutItem,
}

/// Whether an event belongs in the rollout. Deltas, begin events, approval requests and
/// the like are transient: the completed form (or the response items) carries the same
/// information, and replaying them would only duplicate output.
pub fn should_persist_event(msg: &EventMsg) -> bool {
    // Exhaustive on purpose: a new event kind must be classified here.
    match msg {
        EventMsg::UserMessage(_)
        | EventMsg::AgentMessage(_)
        | EventMsg::AgentReasoning(_)
        | EventMsg::TaskStarted(_)
        | EventMsg::TaskComplete(_)
        | EventMsg::TurnAborted(_)
        | EventMsg::TokenCount(_)
        | EventMsg::ExecCommandEnd(_)
        | EventMsg::PatchApplyEnd(_)
        | EventMsg::McpToolCallEnd(_)
        | EventMsg::ContextCompacted(_)
        | EventMsg::ProposedPlan(_)
        | EventMsg::EnteredReviewMode(_)
        | EventMsg::ExitedReviewMode(_)
        // A resumed thread takes its goal back from the last of these.
        | EventMsg::GoalUpdated(_)
        | EventMsg::GoalCleared(_)
        // What each hook decided: an audit of the thread's guardrails.
        | EventMsg::HookCompleted(_)
        | EventMsg::Error(_) => true,
        EventMsg::SessionConfigured(_)
        | EventMsg::HookStarted(_)
        | EventMsg::Warning(_)
        | EventMsg::StreamError(_)
        | EventMsg::AgentMessageDelta(_)
        | EventMsg::AgentReasoningDelta(_)
        | EventMsg::AgentReasoningSummaryPartAdded(_)
        | EventMsg::AgentReasoningSummaryDelta(_)
        | EventMsg::ProposedPlanDelta(_)
        | EventMsg::ExecCommandBegin(_)
        | EventMsg::ExecCommandOutputDelta(_)
        | EventMsg::ExecApprovalRequest(_)
        | EventMsg::ApplyPatchApprovalRequest(_)
        | EventMsg::PatchApplyBegin(_)
        // Derived from the patches, which are recorded.
        | EventMsg::TurnDiff(_)
        | EventMsg::PlanUpdate(_)
        | EventMsg::McpToolCallBegin(_)
        | EventMsg::McpToolCallProgress(_)
        | EventMsg::McpStartupUpdate(_)
        | EventMsg::ElicitationRequest(_)
        // The tool call and its output (the answers, what was granted) are recorded;
        // a grant itself ends with the session, so nothing of it is replayed.
        | EventMsg::UserInputRequest(_)
        | EventMsg::PermissionsRequest(_)
        // Like the request it ends: the decision it stood for is in the tool output.
        | EventMsg::RequestExpired(_)
        | EventMsg::ShutdownComplete => false,
    }
}

/// What the thread's last turn ran with (policy, sandbox, model, effort), as recorded; a
/// front end that keeps per-session choices of its own reads them back from it when the
/// thread is resumed in another process.
pub fn last_turn_context(items: &[RolloutItem]) -> Option<&TurnContextItem> {
    items.iter().rev().find_map(|item| match item {
        RolloutItem::TurnContext(context) => Some(context),
        _ => None,
    })
}

/// The model history a resumed thread continues from: every response item, in order,
/// restarting from the replacement history at each compaction checkpoint.
pub fn history_from_rollout(items: &[RolloutItem]) -> Vec<ResponseItem> {
    let mut history = Vec::new();
    for item in items {
        match item {
            RolloutItem::ResponseItem(item) => history.push(item.clone()),
            RolloutItem::Compacted(compacted) => {
                history = compacted.replacement_history.clone();
            }
            _ => {}
        }
    }
    history
}

/// The thread as it stands after its reverts: at each [`RevertedItem`], everything from
/// the start of the turn it names (its `task_started`) up to the marker is dropped; the
/// marker itself stays, so the dropped turn ids stay known. A marker whose turn is not
/// there (already dropped by an earlier one) drops nothing.
pub fn apply_reverts(items: Vec<RolloutItem>) -> Vec<RolloutItem> {
    if !items
        .iter()
        .any(|item| matches!(item, RolloutItem::Reverted(_)))
    {
        return items;
    }
    let mut kept: Vec<RolloutItem> = Vec::with_capacity(items.len());
    for item in items {
        if let RolloutItem::Reverted(reverted) = &item
            && let Some(cut) = turn_start(&kept, &reverted.before_turn_id)
        {
            kept.truncate(cut);
        }
        kept.push(item);
    }
    kept
}

/// Where turn `turn_id` starts in `items`: its `task_started` record.
pub fn turn_start(items: &[RolloutItem], turn_id: &str) -> Option<usize> {
    items.iter().position(|item| {
        matches!(item, RolloutItem::EventMsg(EventMsg::TaskStarted(started)) if started.turn_id == turn_id)
    })
}

/// The first user message text in `items`, used as the thread preview.
pub(crate) fn first_user_message(items: &[RolloutItem]) -> Option<&str> {
    items.iter().find_map(|item| match item {
        RolloutItem::EventMsg(EventMsg::UserMessage(event)) => Some(event.message.as_str()),
        _ => None,
    })
}

/// UTC timestamps with millisecond precision (`2026-01-02T03:04:05.678Z`), the format of
/// the reference implementation's rollouts; fixed width, so they also sort as text.
pub(crate) mod rfc3339_millis {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(value: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_timestamp(value))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

pub(crate) fn format_timestamp(value: &DateTime<Utc>) -> String {
    value.to_rfc3339_opts(SecondsFormat::Millis, true)
}
