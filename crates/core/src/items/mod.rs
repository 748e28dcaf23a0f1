//! The one item model: what a turn is made of (a user message, the agent's answer, its
//! reasoning, a command, a patch, an MCP call, a compaction, …), as every front end shows
//! it, live and read back.
//!
//! Two halves, one set of rules:
//! - the engine stamps every item event with its id as it emits it, and before a turn's
//!   end closes the tool calls the turn left open with real events ([`ItemLedger`]);
//!   both are persisted, so the rollout holds every item's id and every call's end;
//! - [`ItemProjector`] is a pure fold from engine events to [`ItemEvent`]s (an item
//!   started, a piece of it streamed, it completed). Front ends feed it the live events;
//!   replay ([`crate::store::turns_from_rollout`]) feeds it the stored ones. Live equals
//!   stored because both run through the same projector over the same ids. The one
//!   exception is deliberate: text of an answer that never completed (its stream failed
//!   for good, or the turn was interrupted mid-answer) is completed live with what
//!   streamed and is not kept, as the model's history does not keep it.
//!
//! A front end maps a [`TurnItem`] to its wire in one pure function and never keeps its
//! own open/closed bookkeeping.

mod ledger;
mod projector;
mod recap;

use std::path::PathBuf;

use interpreter_protocol::{
    EventMsg, ExecCommandEndEvent, ExecCommandSource, ExecCommandStatus, FileChanges,
    McpInvocation, McpToolCallEndEvent, ParsedCommand, PatchApplyEndEvent,
};

pub(crate) use ledger::ItemLedger;
pub use projector::ItemProjector;
pub use recap::{CommandRecap, TurnRecap};

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    InProgress,
    Completed,
    Failed,
    /// Not run: the user (or the policy, or the approval deadline) said no.
    Declined,
}

/// A shell command the agent (or the user's shell) ran, or asked to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandItem {
    /// The tool call's id.
    pub id: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// What the command does, for display.
    pub parsed: Vec<ParsedCommand>,
    pub source: ExecCommandSource,
    pub status: ItemStatus,
    /// Everything it printed (empty while it runs: the output streams as deltas).
    pub output: String,
    /// `None` while it runs, when it never ran, or when a signal ended it.
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
}

/// A patch the agent applied, or asked to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct FileChangeItem {
    /// The tool call's id.
    pub id: String,
    pub changes: FileChanges,
    pub status: ItemStatus,
    /// What applying it printed (its summary, or why it failed); empty until it ends.
    pub output: String,
}

/// A call to a tool of an MCP server the thread uses.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallItem {
    /// The tool call's id.
    pub id: String,
    pub invocation: McpInvocation,
    pub status: ItemStatus,
    /// The MCP `CallToolResult` as JSON, or the error text; `None` while it runs.
    pub result: Option<Result<serde_json::Value, String>>,
    pub duration_ms: Option<u64>,
}

/// One item of a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnItem {
    UserMessage {
        id: String,
        text: String,
    },
    AgentMessage {
        id: String,
        text: String,
    },
    Reasoning {
        id: String,
        /// What a reader is shown: the raw reasoning, else the summary's parts.
        text: String,
        /// The summary's parts and the raw text's parts, when the server kept them apart.
        summary: Vec<String>,
        content: Vec<String>,
    },
    /// The plan a Plan-mode answer proposed (its `<proposed_plan>` block).
    Plan {
        id: String,
        text: String,
    },
    /// A review turn started; `review` says what it reviews.
    EnteredReview {
        id: String,
        review: String,
    },
    /// A review turn ended with this review.
    ExitedReview {
        id: String,
        review: String,
    },
    Command(CommandItem),
    FileChange(FileChangeItem),
    McpToolCall(McpCallItem),
    /// The conversation so far was replaced by a summary.
    Compaction {
        id: String,
        items_before: usize,
        items_after: usize,
    },
}

impl TurnItem {
    /// The item's id: unique within its thread.
    pub fn id(&self) -> &str {
        match self {
            Self::UserMessage { id, .. }
            | Self::AgentMessage { id, .. }
            | Self::Reasoning { id, .. }
            | Self::Plan { id, .. }
            | Self::EnteredReview { id, .. }
            | Self::ExitedReview { id, .. }
            | Self::Compaction { id, .. } => id,
            Self::Command(item) => &item.id,
            Self::FileChange(item) => &item.id,
            Self::McpToolCall(item) => &item.id,
        }
    }
}

/// Which part of an item a delta extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    /// The agent's answer.
    AgentText,
    /// The raw reasoning text.
    ReasoningText,
    /// A new part of the reasoning summary begins (the delta's text is empty).
    ReasoningSummaryPart { index: i64 },
    /// Text of one part of the reasoning summary.
    ReasoningSummaryText { index: i64 },
    /// The proposed plan's text.
    PlanText,
    /// A command's output.
    CommandOutput,
    /// What applying a patch printed.
    FileChangeOutput,
    /// What an MCP server says of a call still running.
    McpProgress,
}

/// A piece of an item, as it streams.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemDelta {
    pub item_id: String,
    pub kind: DeltaKind,
    pub text: String,
}

/// What a front end shows of a turn's items: each item starts once, may stream, and
/// ends once (completed, or unfinished); every item started ends before its turn does.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemEvent {
    Started(TurnItem),
    Delta(ItemDelta),
    Completed(TurnItem),
    /// An answer, reasoning or plan the turn ended before it finished (its stream
    /// failed for good, or the turn was interrupted), with what streamed. Not an answer:
    /// a front end that takes the last answer as the result must not take this one. It
    /// is not kept with the thread.
    Unfinished(TurnItem),
}

/// What a call that was still open when its turn ended reports as its result.
pub(crate) const ENDED_WITH_THE_TURN: &str = "the turn ended before the call finished";

/// The event that ends `item` of turn `sub_id` when the turn ends with it still open: the
/// one rule for how a turn's end closes an item. A command never answered or never
/// finished was not run (declined); a patch or an MCP call failed. The engine emits and
/// records these ([`ItemLedger`]); a projector whose events stopped short of them ends
/// its open calls the same way ([`ItemProjector::finish`]). `None` for text, which ends
/// unfinished instead.
pub(crate) fn closing_event(sub_id: &str, item: &TurnItem) -> Option<EventMsg> {
    Some(match item {
        TurnItem::Command(command) => EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            call_id: command.id.clone(),
            turn_id: sub_id.to_string(),
            command: command.command.clone(),
            cwd: command.cwd.clone(),
            exit_code: None,
            aggregated_output: String::new(),
            duration_ms: 0,
            status: ExecCommandStatus::Declined,
            source: command.source,
            parsed_cmd: command.parsed.clone(),
        }),
        TurnItem::FileChange(change) => EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: change.id.clone(),
            turn_id: sub_id.to_string(),
            stdout: String::new(),
            stderr: String::new(),
            success: false,
            changes: change.changes.clone(),
        }),
        TurnItem::McpToolCall(call) => EventMsg::McpToolCallEnd(McpToolCallEndEvent {
            call_id: call.id.clone(),
            invocation: call.invocation.clone(),
            duration_ms: 0,
            result: Err(ENDED_WITH_THE_TURN.to_string()),
        }),
        // Text from an answer that did not complete (its stream failed, or the turn was
        // interrupted) is not an answer: no event may present it as one (exec and the
        // MCP tools take the last agent message as the result), and the model's history
        // does not hold it either. Front ends complete such an item live with what
        // streamed ([`ItemProjector::finish`]); the thread read back leaves it out.
        TurnItem::AgentMessage { .. } | TurnItem::Reasoning { .. } | TurnItem::Plan { .. } => {
            return None;
        }
        // Complete the moment they start; never open.
        TurnItem::UserMessage { .. }
        | TurnItem::EnteredReview { .. }
        | TurnItem::ExitedReview { .. }
        | TurnItem::Compaction { .. } => return None,
    })
}
