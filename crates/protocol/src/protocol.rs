//! The queue pair: [`Op`]s go into a thread, [`Event`]s come out.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{
    AskForApproval, CollaborationMode, FileChanges, ParsedCommand, ReasoningEffort, SandboxPolicy,
    ThreadId, TokenUsage, UpdatePlanArgs,
};

/// Input from a front end to a running thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Start a turn with this user input (or add it to the running turn).
    UserInput { items: Vec<UserInput> },
    /// Stop the running turn as soon as possible; children are killed, the partial turn
    /// is recorded, and `turn_aborted` is emitted.
    Interrupt,
    /// Answer to an `exec_approval_request` with the same `call_id`.
    ExecApproval {
        id: String,
        decision: ReviewDecision,
    },
    /// Answer to an `apply_patch_approval_request` with the same `call_id`.
    PatchApproval {
        id: String,
        decision: ReviewDecision,
    },
    /// Answer to an `elicitation_request` with the same `id`.
    ResolveElicitation {
        id: String,
        response: ElicitationResponse,
    },
    /// Answer to a `user_input_request` with the same `call_id`.
    ResolveUserInput {
        id: String,
        response: crate::UserInputResponse,
    },
    /// Answer to a `permissions_request` with the same `call_id`.
    ResolvePermissions {
        id: String,
        decision: crate::PermissionsDecision,
    },
    /// Summarise the conversation now, as a turn of its own (`task_started`,
    /// `context_compacted`, `task_complete`). Refused with an `error` event while a turn
    /// runs.
    Compact,
    /// Run a shell command string the user typed (not the model) in the thread's working
    /// directory, as a turn of its own: `task_started`, the command's `exec_command_*`
    /// events (source `user_shell`), `task_complete`. The command and its output are
    /// added to the model-visible history. Refused with an `error` event while a turn
    /// runs. Sandboxed by the thread's policy unless that is `danger-full-access`.
    /// Append items to the model-visible history (and the rollout, so a resumed thread
    /// keeps them), without a turn. Refused with an `error` event while a turn runs.
    InjectItems {
        items: Vec<crate::models::ResponseItem>,
    },
    RunUserShellCommand {
        command: String,
        /// `None`: the default of one hour.
        timeout_ms: Option<u64>,
    },
    /// Record the thread's goal as it now is (`None`: cleared). The goal itself is
    /// changed through the thread's handle, which applies the engine's goal rules and
    /// queues this op; the session writes it to the rollout and emits `goal_updated` or
    /// `goal_cleared`.
    SetGoal { goal: Option<ThreadGoal> },
    /// Set the collaboration mode of the thread's next turns (the running turn keeps the
    /// mode it started with). In Plan mode a turn is read-only whatever the sandbox
    /// policy, and the model's `<proposed_plan>` block comes out as `proposed_plan_*`
    /// events.
    SetCollaborationMode { mode: CollaborationMode },
    /// Run a review turn: read-only whatever the sandbox policy, with the review
    /// instructions, on the request a thread's `prepare_review` made (the diff is taken
    /// before any model call, so a bad target fails there). Emits
    /// `entered_review_mode`, the model's work, then `exited_review_mode` with the review.
    /// Refused with an `error` event while a turn runs.
    Review { request: ReviewRequest },
    /// Drop turn `before_turn_id` and every later turn from the thread's durable history
    /// and from what the model sees next; with `revert_files`, also undo, newest first,
    /// the file changes those turns' patches made where that can be done cleanly. The
    /// result goes to the caller of `Thread::revert`, which is how this op is sent.
    RevertThread {
        before_turn_id: String,
        revert_files: bool,
    },
    /// Finish the running turn's bookkeeping and stop the thread's task.
    Shutdown,
}

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReviewTarget {
    /// The working tree against `HEAD`: staged, unstaged and untracked files.
    UncommittedChanges,
    /// The current branch against where it left `branch` (their merge base).
    BaseBranch { branch: String },
    /// The changes one commit made; `title` only labels it for people.
    Commit { sha: String, title: Option<String> },
    /// Free-form instructions; no diff is taken.
    Custom { instructions: String },
}

/// A review, ready to run: what front ends show and what the model is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewRequest {
    pub target: ReviewTarget,
    /// What is under review, for people (`entered_review_mode`).
    pub description: String,
    /// The model's request: what to review, and the diff (bounded).
    pub prompt: String,
}

/// An objective a thread works toward over several turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadGoal {
    pub objective: String,
    pub status: GoalStatus,
    /// Tokens the goal may use in all; `None` is no limit.
    pub token_budget: Option<i64>,
    pub tokens_used: i64,
    pub time_used_seconds: i64,
    /// Unix seconds.
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Turns run until the model marks it complete or blocked.
    Active,
    /// Stopped by the user (or interrupted, or at the automatic-turn cap); setting it
    /// active again resumes it.
    Paused,
    /// The model says it cannot go on without the user.
    Blocked,
    /// Not produced here (the reference's account usage limits); accepted from clients.
    UsageLimited,
    /// The token budget is spent.
    BudgetLimited,
    Complete,
}

/// What the user (or the front end on their behalf) answers to an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitationResponse {
    pub action: ElicitationAction,
    /// The form's values; only with `accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
}

impl ElicitationResponse {
    pub fn decline() -> Self {
        Self {
            action: ElicitationAction::Decline,
            content: None,
        }
    }
}

/// The MCP elicitation actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationAction {
    Accept,
    Decline,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserInput {
    Text {
        text: String,
    },
    /// A local image file to attach.
    LocalImage {
        path: PathBuf,
    },
    /// An image the front end already holds, as a `data:` URL (editors send the bytes,
    /// not a path).
    Image {
        image_url: String,
    },
}

/// A decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewDecision {
    /// Run / apply this once.
    Approved,
    /// Approve, and do not ask again for the same command in this thread.
    ApprovedForSession,
    /// Do not run; the model is told and the turn goes on.
    #[default]
    Denied,
    /// Do not run, and stop the turn.
    Abort,
    /// Nobody answered before the deadline; treated as denied.
    TimedOut,
}

impl ReviewDecision {
    pub fn is_approved(&self) -> bool {
        matches!(self, Self::Approved | Self::ApprovedForSession)
    }
}

/// Where a thread was started from; recorded in the rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    Cli,
    Exec,
    Mcp,
    AppServer,
    /// `interpreter acp`: an editor over the Agent Client Protocol.
    Acp,
    #[default]
    Unknown,
}

/// One event from a thread. `id` is the id of the submission (turn) it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    pub msg: EventMsg,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventMsg {
    SessionConfigured(SessionConfiguredEvent),
    #[serde(alias = "turn_started")]
    TaskStarted(TaskStartedEvent),
    #[serde(alias = "turn_complete")]
    TaskComplete(TaskCompleteEvent),
    TurnAborted(TurnAbortedEvent),
    /// A fatal error for the current turn. The turn then ends with `task_complete`.
    Error(ErrorEvent),
    /// Something the user should know that does not stop the turn.
    Warning(WarningEvent),
    /// The model stream failed and is being retried.
    StreamError(StreamErrorEvent),
    UserMessage(UserMessageEvent),
    AgentMessageDelta(DeltaEvent),
    AgentMessage(AgentMessageEvent),
    AgentReasoningDelta(DeltaEvent),
    /// A new part of the reasoning summary begins (servers that summarise their
    /// reasoning: the Responses API).
    AgentReasoningSummaryPartAdded(ReasoningSummaryPartEvent),
    /// A piece of one part of the reasoning summary.
    AgentReasoningSummaryDelta(ReasoningSummaryDeltaEvent),
    AgentReasoning(AgentReasoningEvent),
    ExecCommandBegin(ExecCommandBeginEvent),
    ExecCommandOutputDelta(ExecCommandOutputDeltaEvent),
    ExecCommandEnd(ExecCommandEndEvent),
    ExecApprovalRequest(ExecApprovalRequestEvent),
    ApplyPatchApprovalRequest(ApplyPatchApprovalRequestEvent),
    PatchApplyBegin(PatchApplyBeginEvent),
    PatchApplyEnd(PatchApplyEndEvent),
    /// A lifecycle hook (`[hooks]`, `hooks.json`) started running.
    HookStarted(HookRunEvent),
    /// A lifecycle hook finished: how, and what it said.
    HookCompleted(HookRunEvent),
    /// The thread's goal changed (set, accounted after a turn, or marked by the model).
    GoalUpdated(GoalUpdatedEvent),
    GoalCleared(GoalClearedEvent),
    /// Every file the running turn's patches changed, as one diff from before the turn;
    /// sent again after each patch that was applied.
    TurnDiff(TurnDiffEvent),
    PlanUpdate(UpdatePlanArgs),
    /// Text of the proposed plan a Plan-mode answer is writing (its `<proposed_plan>`
    /// block), as it streams.
    ProposedPlanDelta(ProposedPlanDeltaEvent),
    /// The proposed plan of a Plan-mode answer, complete; authoritative over the deltas.
    ProposedPlan(ProposedPlanEvent),
    /// A review turn started; says what it reviews.
    EnteredReviewMode(ReviewModeEvent),
    /// A review turn ended; carries the review (empty when the turn gave none).
    ExitedReviewMode(ReviewModeEvent),
    McpToolCallBegin(McpToolCallBeginEvent),
    /// What an MCP server says of a call still running (its `notifications/progress`),
    /// paced: the newest line, a few times a second at most.
    McpToolCallProgress(McpToolCallProgressEvent),
    McpToolCallEnd(McpToolCallEndEvent),
    /// Progress of starting one of the thread's MCP servers.
    McpStartupUpdate(McpStartupUpdateEvent),
    /// An MCP server the thread uses asks the user something (MCP elicitation); answer
    /// with `Op::ResolveElicitation` before the deadline, or it is declined.
    ElicitationRequest(ElicitationRequestEvent),
    /// The model asks the user questions (`request_user_input`); answer with
    /// `Op::ResolveUserInput` before the deadline.
    UserInputRequest(crate::UserInputRequestEvent),
    /// The model asks for more sandbox permissions (`request_permissions`); answer with
    /// `Op::ResolvePermissions` before the deadline, or nothing is granted.
    PermissionsRequest(crate::PermissionsRequestEvent),
    /// The engine's deadline for a request it made (an approval, a question, a
    /// permission request, an MCP server's question) passed with no answer: it resolved
    /// the request itself (timed out: declined, nothing granted). Front ends withdraw the
    /// question from their client; the engine's clock is the only one.
    RequestExpired(RequestExpiredEvent),
    TokenCount(TokenCountEvent),
    /// The conversation was summarised to fit the model's context window.
    ContextCompacted(ContextCompactedEvent),
    ShutdownComplete,
}

impl EventMsg {
    /// The snake_case wire name of this event (`msg.type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::SessionConfigured(_) => "session_configured",
            Self::TaskStarted(_) => "task_started",
            Self::TaskComplete(_) => "task_complete",
            Self::TurnAborted(_) => "turn_aborted",
            Self::Error(_) => "error",
            Self::Warning(_) => "warning",
            Self::StreamError(_) => "stream_error",
            Self::UserMessage(_) => "user_message",
            Self::AgentMessageDelta(_) => "agent_message_delta",
            Self::AgentMessage(_) => "agent_message",
            Self::AgentReasoningDelta(_) => "agent_reasoning_delta",
            Self::AgentReasoningSummaryPartAdded(_) => "agent_reasoning_summary_part_added",
            Self::AgentReasoningSummaryDelta(_) => "agent_reasoning_summary_delta",
            Self::AgentReasoning(_) => "agent_reasoning",
            Self::ExecCommandBegin(_) => "exec_command_begin",
            Self::ExecCommandOutputDelta(_) => "exec_command_output_delta",
            Self::ExecCommandEnd(_) => "exec_command_end",
            Self::ExecApprovalRequest(_) => "exec_approval_request",
            Self::ApplyPatchApprovalRequest(_) => "apply_patch_approval_request",
            Self::PatchApplyBegin(_) => "patch_apply_begin",
            Self::PatchApplyEnd(_) => "patch_apply_end",
            Self::TurnDiff(_) => "turn_diff",
            Self::HookStarted(_) => "hook_started",
            Self::HookCompleted(_) => "hook_completed",
            Self::GoalUpdated(_) => "goal_updated",
            Self::GoalCleared(_) => "goal_cleared",
            Self::PlanUpdate(_) => "plan_update",
            Self::ProposedPlanDelta(_) => "proposed_plan_delta",
            Self::ProposedPlan(_) => "proposed_plan",
            Self::EnteredReviewMode(_) => "entered_review_mode",
            Self::ExitedReviewMode(_) => "exited_review_mode",
            Self::McpToolCallBegin(_) => "mcp_tool_call_begin",
            Self::McpToolCallProgress(_) => "mcp_tool_call_progress",
            Self::McpToolCallEnd(_) => "mcp_tool_call_end",
            Self::McpStartupUpdate(_) => "mcp_startup_update",
            Self::ElicitationRequest(_) => "elicitation_request",
            Self::UserInputRequest(_) => "user_input_request",
            Self::PermissionsRequest(_) => "permissions_request",
            Self::RequestExpired(_) => "request_expired",
            Self::TokenCount(_) => "token_count",
            Self::ContextCompacted(_) => "context_compacted",
            Self::ShutdownComplete => "shutdown_complete",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionConfiguredEvent {
    pub session_id: ThreadId,
    pub thread_id: ThreadId,
    pub model: String,
    pub model_provider_id: String,
    pub approval_policy: AskForApproval,
    pub sandbox_policy: SandboxPolicy,
    pub cwd: PathBuf,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub rollout_path: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalUpdatedEvent {
    pub goal: ThreadGoal,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalClearedEvent {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposedPlanDeltaEvent {
    /// The plan's id, the same in its deltas and its `proposed_plan` event.
    pub item_id: String,
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewModeEvent {
    pub item_id: String,
    /// Entering: what is under review. Exiting: the review.
    pub review: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposedPlanEvent {
    pub item_id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnDiffEvent {
    /// Git-style unified diff; paths relative to the thread's cwd.
    pub unified_diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStartedEvent {
    pub turn_id: String,
    pub model_context_window: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCompleteEvent {
    pub turn_id: String,
    pub last_agent_message: Option<String>,
    /// Set when the turn failed; the message of the `error` event that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The final answer stopped at the model's output limit (`finish_reason: "length"`),
    /// so front ends can say the turn ended on the token cap rather than by choice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_limit: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnAbortReason {
    Interrupted,
    Replaced,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnAbortedEvent {
    pub turn_id: String,
    pub reason: TurnAbortReason,
}

/// Machine-readable class of an error, for front ends that map it to exit codes or
/// protocol error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    ContextWindowExceeded,
    Unauthorized,
    BadRequest,
    ServerOverloaded,
    Connection,
    StreamIdle,
    Internal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
}

/// One run of a lifecycle hook, started or completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRunEvent {
    /// The turn it ran in; `None` for a thread-level run outside a turn.
    pub turn_id: Option<String>,
    pub run: HookRunSummary,
}

/// What front ends show of one hook run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRunSummary {
    /// `<event-kebab>:<display order>:<source path>[:<tool call id>]`.
    pub id: String,
    pub event_name: HookEventName,
    pub source: HookSource,
    /// The `hooks.json` or `config.toml` that configures it.
    pub source_path: std::path::PathBuf,
    pub display_order: i64,
    pub scope: HookScope,
    pub status: HookRunStatus,
    pub status_message: Option<String>,
    /// Unix seconds.
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub entries: Vec<HookOutputEntry>,
}

/// The lifecycle events hooks run at (Codex's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEventName {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PermissionRequest,
    PostToolUse,
    PreCompact,
    PostCompact,
    Stop,
}

/// Where a hook is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookSource {
    /// The agent home's `hooks.json` or the user `config.toml`'s `[hooks]`.
    User,
    /// A repository's `.interpreter/hooks.json`: runs only once trusted.
    Project,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookScope {
    Thread,
    Turn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookRunStatus {
    Running,
    /// Ran and decided nothing, or added context.
    Completed,
    /// Could not run, timed out, exited with an error or said something unusable: it
    /// decided nothing.
    Failed,
    /// Blocked what it ran for (a tool call, a prompt, an approval, the end of a turn).
    Blocked,
    /// Asked to stop (`"continue": false`).
    Stopped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookOutputEntry {
    pub kind: HookOutputEntryKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookOutputEntryKind {
    Warning,
    Stop,
    Feedback,
    Context,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarningEvent {
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamErrorEvent {
    pub message: String,
    pub attempt: u32,
    pub max_attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessageEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentMessageEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentReasoningEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    /// What a reader is shown: the raw reasoning when the server sent it, otherwise the
    /// summary's parts joined by newlines.
    pub text: String,
    /// The reasoning summary, one string per part (empty for servers that send raw
    /// reasoning only, and in rollouts written before summaries were kept apart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<String>,
    /// The raw reasoning text parts, when the server sent any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummaryPartEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    /// Index of the part within the reasoning item's summary, from 0.
    pub summary_index: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummaryDeltaEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    pub summary_index: i64,
    pub delta: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecCommandBeginEvent {
    pub call_id: String,
    pub turn_id: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub parsed_cmd: Vec<ParsedCommand>,
    /// Who ran it (absent in rollouts written before user shell commands: the agent).
    #[serde(default)]
    pub source: ExecCommandSource,
}

/// Who ran a command: the model through the shell tool, or the user
/// (`Op::RunUserShellCommand`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecCommandSource {
    #[default]
    Agent,
    UserShell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecOutputStream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecCommandOutputDeltaEvent {
    pub call_id: String,
    pub stream: ExecOutputStream,
    /// Output text (lossily decoded as UTF-8).
    pub chunk: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecCommandStatus {
    Completed,
    Failed,
    Declined,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecCommandEndEvent {
    pub call_id: String,
    pub turn_id: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// `None` when the command never ran (declined) or was killed by a signal.
    pub exit_code: Option<i32>,
    pub aggregated_output: String,
    pub duration_ms: u64,
    pub status: ExecCommandStatus,
    /// Who ran it (absent in rollouts written before user shell commands: the agent).
    #[serde(default)]
    pub source: ExecCommandSource,
    /// What the command does, as its begin event said (absent in rollouts written
    /// before ends carried it), so a command read back shows what it showed live.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parsed_cmd: Vec<ParsedCommand>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecApprovalRequestEvent {
    pub call_id: String,
    pub turn_id: String,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    pub reason: Option<String>,
    pub parsed_cmd: Vec<ParsedCommand>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyPatchApprovalRequestEvent {
    pub call_id: String,
    pub turn_id: String,
    pub changes: FileChanges,
    pub reason: Option<String>,
    /// A directory the user may grant write access to for the rest of the session.
    pub grant_root: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchApplyBeginEvent {
    pub call_id: String,
    pub turn_id: String,
    pub auto_approved: bool,
    pub changes: FileChanges,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchApplyEndEvent {
    pub call_id: String,
    pub turn_id: String,
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    pub changes: FileChanges,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpInvocation {
    pub server: String,
    pub tool: String,
    pub arguments: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolCallBeginEvent {
    pub call_id: String,
    pub invocation: McpInvocation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolCallProgressEvent {
    pub call_id: String,
    /// One line of printable text, short (the server's message, or `progress/total`).
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolCallEndEvent {
    pub call_id: String,
    pub invocation: McpInvocation,
    pub duration_ms: u64,
    /// The MCP `CallToolResult` as JSON, or the error text.
    pub result: Result<serde_json::Value, String>,
}

/// See [`EventMsg::RequestExpired`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestExpiredEvent {
    /// The request's id: the `call_id` of an approval, a question or a permission
    /// request, the `id` of an MCP server's question.
    pub id: String,
    /// The deadline that passed, in seconds (`approval_timeout_sec`).
    pub timeout_sec: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitationRequestEvent {
    /// Answer with `Op::ResolveElicitation { id, .. }`.
    pub id: String,
    /// The `[mcp_servers.NAME]` key of the server asking.
    pub server: String,
    /// The server's `elicitation/create` params as sent (`message`, `requestedSchema`,
    /// or `mode: "url"` with `url`).
    pub request: serde_json::Value,
    /// When nobody answers within this many seconds, the engine declines.
    pub timeout_sec: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpStartupUpdateEvent {
    /// The `[mcp_servers.NAME]` key.
    pub server: String,
    pub status: McpStartupStatus,
}

/// `{"state": "starting"}`, `{"state": "ready", "tools": 3}` or
/// `{"state": "failed", "error": "…"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum McpStartupStatus {
    Starting,
    /// Ready; `tools` is the number of its tools offered to the model.
    Ready {
        tools: usize,
    },
    Failed {
        error: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenUsageInfo {
    pub total_token_usage: TokenUsage,
    pub last_token_usage: TokenUsage,
    pub model_context_window: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenCountEvent {
    pub info: Option<TokenUsageInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextCompactedEvent {
    /// The item this belongs to, assigned once by the engine and kept in the rollout, so
    /// a live client and one reading the thread later see the same id (empty in rollouts
    /// written before items had ids).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub item_id: String,
    /// Items of model history before compaction.
    pub items_before: usize,
    /// Items of model history after compaction (initial context, summary, current request).
    pub items_after: usize,
}
