//! v2 methods, notifications and approval requests.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// initialize

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    #[serde(default)]
    pub experimental_api: bool,
    /// Notification methods this connection does not want (exact names).
    #[serde(default)]
    pub opt_out_notification_methods: Option<Vec<String>>,
    /// Ours: approvals arrive as the v1 `execCommandApproval` / `applyPatchApproval`
    /// requests instead of the v2 `item/*/requestApproval` ones.
    #[serde(default)]
    pub legacy_approvals: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    #[serde(default)]
    pub capabilities: Option<InitializeCapabilities>,
    /// Ours: `1` asks for v1 approval requests (same as `capabilities.legacyApprovals`).
    #[serde(default)]
    pub protocol_version: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    pub server_info: ServerInfo,
    pub user_agent: String,
    /// Absolute path of the agent home.
    pub codex_home: String,
    pub platform_family: String,
    pub platform_os: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

// ---------------------------------------------------------------------------------------
// shared values

/// `AskForApproval` (kebab-case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AskForApproval {
    Untrusted,
    OnRequest,
    Never,
    /// `{"granular": {sandbox_approval, rules, mcp_elicitations, …}}`: on-request with
    /// each kind of question on or off.
    Granular(interpreter_protocol::GranularApproval),
}

/// `SandboxMode` (kebab-case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

/// `SandboxPolicy` (tag `type`, camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SandboxPolicy {
    DangerFullAccess,
    /// The client runs this agent inside its own sandbox: commands run without ours.
    #[serde(rename_all = "camelCase")]
    ExternalSandbox {
        #[serde(default)]
        network_access: NetworkAccess,
    },
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        #[serde(default)]
        network_access: bool,
    },
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default)]
        network_access: bool,
        #[serde(default)]
        exclude_tmpdir_env_var: bool,
        #[serde(default)]
        exclude_slash_tmp: bool,
    },
}

/// What an external sandbox lets commands reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NetworkAccess {
    #[default]
    Restricted,
    Enabled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadStatus {
    NotLoaded,
    Idle,
    SystemError,
    #[serde(rename_all = "camelCase")]
    Active {
        active_flags: Vec<ThreadActiveFlag>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadActiveFlag {
    WaitingOnApproval,
    WaitingOnUserInput,
}

/// Where a thread was started (v2 form): a known value, or `{"custom": NAME}` (threads
/// started by `interpreter mcp-server` are `{"custom": "mcp"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SessionSource {
    Known(SessionSourceValue),
    Custom { custom: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SessionSourceValue {
    Cli,
    Vscode,
    Exec,
    AppServer,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitInfo {
    pub sha: Option<String>,
    pub branch: Option<String>,
    pub origin_url: Option<String>,
}

/// A user input item. Multi-word fields inside variants are snake_case, as the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text {
        text: String,
        #[serde(default)]
        text_elements: Vec<Value>,
    },
    /// By `url` (`http(s):` or `data:`) or by an uploaded `fileId` (refused: that is an
    /// OpenAI files upload).
    Image {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, rename = "fileId", skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// Refused with a clear error: the chat endpoints served here take text and images.
    Audio {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, rename = "fileId", skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
    },
    LocalAudio {
        path: String,
    },
    LocalImage {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    Skill {
        name: String,
        path: String,
    },
    Mention {
        name: String,
        path: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CodexErrorInfo {
    ContextWindowExceeded,
    ServerOverloaded,
    InternalServerError,
    Unauthorized,
    BadRequest,
    Other,
    #[serde(rename_all = "camelCase")]
    HttpConnectionFailed {
        http_status_code: Option<u16>,
    },
    #[serde(rename_all = "camelCase")]
    ResponseStreamDisconnected {
        http_status_code: Option<u16>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    pub message: String,
    pub codex_error_info: Option<CodexErrorInfo>,
    pub additional_details: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    InProgress,
    Completed,
    Interrupted,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ItemsView {
    NotLoaded,
    Summary,
    Full,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    pub items: Vec<ThreadItem>,
    pub items_view: ItemsView,
    pub status: TurnStatus,
    pub error: Option<TurnError>,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub duration_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    pub id: String,
    pub session_id: String,
    pub forked_from_id: Option<String>,
    pub parent_thread_id: Option<String>,
    /// Usually the first user message.
    pub preview: String,
    pub ephemeral: bool,
    pub model_provider: String,
    /// Unix seconds.
    pub created_at: i64,
    pub updated_at: i64,
    pub recency_at: Option<i64>,
    pub status: ThreadStatus,
    /// The rollout file (unstable).
    pub path: Option<String>,
    pub cwd: String,
    pub cli_version: String,
    pub source: SessionSource,
    pub thread_source: Option<String>,
    pub agent_nickname: Option<String>,
    pub agent_role: Option<String>,
    pub git_info: Option<GitInfo>,
    pub name: Option<String>,
    /// Codex's project assignment; no projects here, so always `null` (required since
    /// Codex 0.163).
    pub project_id: Option<String>,
    /// How the history is served: `legacy`, every turn in `thread/read`/`thread/resume`
    /// (`thread/turns/list` pages the same turns).
    pub history_mode: ThreadHistoryMode,
    /// Filled by `thread/resume`, `thread/fork` and `thread/read` with `includeTurns`.
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum ThreadHistoryMode {
    #[default]
    Legacy,
    Paginated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandExecutionStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PatchApplyStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpToolCallStatus {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandExecutionSource {
    Agent,
    UserShell,
}

/// What a command does, for display.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum CommandAction {
    Read {
        command: String,
        name: String,
        path: String,
    },
    ListFiles {
        command: String,
        path: Option<String>,
    },
    Search {
        command: String,
        query: Option<String>,
        path: Option<String>,
    },
    Unknown {
        command: String,
    },
}

/// The kind of one file's change (`move_path` is snake_case on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum PatchChangeKind {
    Add,
    Delete,
    Update { move_path: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileUpdateChange {
    pub path: String,
    pub kind: PatchChangeKind,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallResult {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    #[serde(rename = "_meta")]
    pub meta: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallError {
    pub message: String,
}

/// One item of a turn (tag `type`; every variant has `id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadItem {
    #[serde(rename_all = "camelCase")]
    UserMessage {
        id: String,
        client_id: Option<String>,
        content: Vec<UserInput>,
    },
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        id: String,
        text: String,
        phase: Option<String>,
        memory_citation: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    Reasoning {
        id: String,
        summary: Vec<String>,
        content: Vec<String>,
    },
    /// The plan a Plan-mode turn proposed (the answer's `<proposed_plan>` block).
    /// `item/started` carries it empty; `item/completed`'s text is authoritative.
    Plan { id: String, text: String },
    /// A review turn started: `review` says what it reviews (`review/start`).
    EnteredReviewMode { id: String, review: String },
    /// A review turn ended: `review` is the review (empty when the turn gave none).
    ExitedReviewMode { id: String, review: String },
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        id: String,
        plugin_id: Option<String>,
        script_path: Option<String>,
        command: String,
        cwd: String,
        process_id: Option<String>,
        source: CommandExecutionSource,
        status: CommandExecutionStatus,
        command_actions: Vec<CommandAction>,
        aggregated_output: Option<String>,
        exit_code: Option<i32>,
        duration_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    FileChange {
        id: String,
        changes: Vec<FileUpdateChange>,
        status: PatchApplyStatus,
    },
    #[serde(rename_all = "camelCase")]
    McpToolCall {
        id: String,
        server: String,
        tool: String,
        status: McpToolCallStatus,
        arguments: Value,
        result: Option<McpToolCallResult>,
        error: Option<McpToolCallError>,
        duration_ms: Option<i64>,
    },
    #[serde(rename_all = "camelCase")]
    ContextCompaction { id: String },
}

impl ThreadItem {
    pub fn id(&self) -> &str {
        match self {
            Self::UserMessage { id, .. }
            | Self::AgentMessage { id, .. }
            | Self::Reasoning { id, .. }
            | Self::Plan { id, .. }
            | Self::EnteredReviewMode { id, .. }
            | Self::ExitedReviewMode { id, .. }
            | Self::CommandExecution { id, .. }
            | Self::FileChange { id, .. }
            | Self::McpToolCall { id, .. }
            | Self::ContextCompaction { id } => id,
        }
    }
}

// ---------------------------------------------------------------------------------------
// thread/*

/// Settings a thread can be started (or resumed, forked) with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSettingsParams {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// Dotted-key config overrides, applied like `-c key=value`.
    #[serde(default)]
    pub config: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(flatten)]
    pub settings: ThreadSettingsParams,
    #[serde(default)]
    pub ephemeral: Option<bool>,
    /// Accepted for compatibility; not used.
    #[serde(default)]
    pub service_name: Option<String>,
    /// Accepted for compatibility; not used.
    #[serde(default)]
    pub personality: Option<String>,
    /// Accepted for compatibility; not used.
    #[serde(default)]
    pub service_tier: Option<Value>,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
    #[serde(default)]
    pub thread_source: Option<String>,
    #[serde(default)]
    pub session_start_source: Option<String>,
    #[serde(default)]
    pub experimental_raw_events: Option<bool>,
}

/// The result of `thread/start`, `thread/resume` and `thread/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub service_tier: Option<String>,
    pub cwd: String,
    /// AGENTS.md-style files loaded into the context.
    pub instruction_sources: Vec<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: String,
    pub sandbox: SandboxPolicy,
    pub reasoning_effort: Option<String>,
}

pub type ThreadResumeResponse = ThreadStartResponse;
pub type ThreadForkResponse = ThreadStartResponse;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    /// Leave `thread.turns` empty (the client pages them with `thread/turns/list`).
    #[serde(default)]
    pub exclude_turns: bool,
    #[serde(flatten)]
    pub settings: ThreadSettingsParams,
    #[serde(default)]
    pub personality: Option<String>,
    #[serde(default)]
    pub service_tier: Option<Value>,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkParams {
    pub thread_id: String,
    /// Leave `thread.turns` empty.
    #[serde(default)]
    pub exclude_turns: bool,
    /// Fork through this turn (inclusive).
    #[serde(default)]
    pub last_turn_id: Option<String>,
    #[serde(flatten)]
    pub settings: ThreadSettingsParams,
    #[serde(default)]
    pub ephemeral: Option<bool>,
    #[serde(default)]
    pub service_tier: Option<Value>,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
    #[serde(default)]
    pub thread_source: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadParams {
    pub thread_id: String,
    #[serde(default)]
    pub include_turns: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadResponse {
    pub thread: Thread,
}

/// `thread/list` sort keys are snake_case on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadSortKey {
    CreatedAt,
    UpdatedAt,
    /// Last activity: the same as `updated_at` here.
    RecencyAt,
    /// Codex's manual order within a sidebar section; no sections here, so `updated_at`.
    SectionPosition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortDirection {
    Asc,
    Desc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadSourceKind {
    Cli,
    Vscode,
    Exec,
    AppServer,
    /// Codex's sub-agent threads; there are none here, so these match nothing.
    SubAgent,
    SubAgentReview,
    SubAgentCompact,
    SubAgentThreadSpawn,
    SubAgentOther,
    Mcp,
    Unknown,
}

/// One directory or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CwdFilter {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    /// Default 25, clamped to 1..=100.
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub sort_key: Option<ThreadSortKey>,
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    #[serde(default)]
    pub model_providers: Option<Vec<String>>,
    /// Omitted or empty: every source (unlike the reference, exec and MCP threads are
    /// listed too: people want to see what any front end did).
    #[serde(default)]
    pub source_kinds: Option<Vec<ThreadSourceKind>>,
    /// `true`: archived only; otherwise unarchived only.
    #[serde(default)]
    pub archived: Option<bool>,
    #[serde(default)]
    pub cwd: Option<CwdFilter>,
    /// Case-sensitive substring of the preview.
    #[serde(default)]
    pub search_term: Option<String>,
    /// Accepted; the index is always the answer.
    #[serde(default)]
    pub use_state_db_only: Option<bool>,
    /// Only these threads.
    #[serde(default)]
    pub included_thread_ids: Option<Vec<String>>,
    /// Never these threads.
    #[serde(default)]
    pub excluded_thread_ids: Option<Vec<String>>,
    /// Threads started by these originators; every thread here is `interpreter`'s.
    #[serde(default)]
    pub originators: Option<Vec<String>>,
    /// Codex's sidebar sections; there are none here, so a section matches nothing.
    #[serde(default)]
    pub section_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListResponse {
    pub data: Vec<Thread>,
    /// `null` on the last page.
    pub next_cursor: Option<String>,
    /// Pass as `cursor` with the opposite `sortDirection` to list what precedes this page;
    /// `null` for an empty page.
    pub backwards_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadIdParams {
    pub thread_id: String,
}

pub type ThreadArchiveParams = ThreadIdParams;
pub type ThreadUnarchiveParams = ThreadIdParams;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmptyResponse {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnarchiveResponse {
    pub thread: Thread,
}

// ---------------------------------------------------------------------------------------
// turn/*

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    #[serde(default)]
    pub client_user_message_id: Option<String>,
    /// Accepted; settings changes apply from the thread's next load.
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub sandbox_policy: Option<SandboxPolicy>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub personality: Option<String>,
    #[serde(default)]
    pub service_tier: Option<Value>,
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// This turn's and the next turns' collaboration mode (Codex's, experimental there);
    /// absent keeps the thread's. Its `settings.model` and `settings.reasoning_effort`
    /// take precedence over `model` and `effort`.
    #[serde(default)]
    pub collaboration_mode: Option<CollaborationMode>,
}

/// A collaboration mode with its settings (Codex's shape; `settings` is snake_case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationMode {
    pub mode: ModeKind,
    pub settings: CollaborationModeSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeSettings {
    pub model: String,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// `null`: the mode's built-in instructions.
    #[serde(default)]
    pub developer_instructions: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResponse {
    pub turn: Turn,
}

/// `review/start`: a review turn on the thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartParams {
    pub thread_id: String,
    pub target: ReviewTarget,
    /// Only `inline` (or absent): the review runs on the thread given.
    #[serde(default)]
    pub delivery: Option<ReviewDelivery>,
}

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ReviewTarget {
    /// The working tree: staged, unstaged and untracked files.
    UncommittedChanges,
    /// The current branch against where it left the base branch.
    BaseBranch { branch: String },
    /// The changes one commit made; `title` labels it for people.
    Commit {
        sha: String,
        #[serde(default)]
        title: Option<String>,
    },
    /// Free-form review instructions; no diff is taken.
    Custom { instructions: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReviewDelivery {
    Inline,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStartResponse {
    pub turn: Turn,
    /// The thread the review runs on: the one `review/start` named.
    pub review_thread_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    pub expected_turn_id: String,
    #[serde(default)]
    pub client_user_message_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerResponse {
    pub turn_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

// ---------------------------------------------------------------------------------------
// account/*

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountReadParams {
    #[serde(default)]
    pub refresh_token: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Account {
    ApiKey,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountReadResponse {
    pub account: Option<Account>,
    /// Always false: open-model providers never need an OpenAI login.
    pub requires_openai_auth: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LoginAccountParams {
    #[serde(rename_all = "camelCase")]
    ApiKey { api_key: String },
    /// Not available for open-model providers: answered with `-32600`.
    Chatgpt,
    /// Not available for open-model providers: answered with `-32600`.
    ChatgptDeviceCode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LoginAccountResponse {
    ApiKey,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelLoginAccountParams {
    pub login_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CancelLoginAccountStatus {
    Canceled,
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelLoginAccountResponse {
    pub status: CancelLoginAccountStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitWindow {
    pub used_percent: f64,
    pub window_duration_mins: Option<i64>,
    pub resets_at: Option<i64>,
}

/// Open-model providers report no limits: every field is null.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitSnapshot {
    pub limit_id: Option<String>,
    pub limit_name: Option<String>,
    pub primary: Option<RateLimitWindow>,
    pub secondary: Option<RateLimitWindow>,
    pub credits: Option<Value>,
    pub individual_limit: Option<Value>,
    pub spend_control_reached: Option<bool>,
    pub plan_type: Option<String>,
    pub rate_limit_reached_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetAccountRateLimitsResponse {
    pub rate_limits: RateLimitSnapshot,
    pub rate_limits_by_limit_id: Option<BTreeMap<String, RateLimitSnapshot>>,
    pub rate_limit_reset_credits: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountUpdatedNotification {
    pub auth_mode: Option<String>,
    pub plan_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountLoginCompletedNotification {
    pub login_id: Option<String>,
    pub success: bool,
    pub error: Option<String>,
}

// ---------------------------------------------------------------------------------------
// config/*

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReadParams {
    #[serde(default)]
    pub include_layers: bool,
    #[serde(default)]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ConfigLayerSource {
    #[serde(rename_all = "camelCase")]
    User {
        file: String,
        profile: Option<String>,
    },
    SessionFlags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigLayerMetadata {
    pub name: ConfigLayerSource,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigLayer {
    pub name: ConfigLayerSource,
    pub version: String,
    pub config: Value,
    pub disabled_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReadResponse {
    /// The effective configuration, snake_case keys as in TOML.
    pub config: Value,
    /// Dotted key → the layer that set it.
    pub origins: BTreeMap<String, ConfigLayerMetadata>,
    pub layers: Option<Vec<ConfigLayer>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MergeStrategy {
    #[default]
    Replace,
    Upsert,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigValueWriteParams {
    pub key_path: String,
    /// `null` removes the key.
    pub value: Value,
    #[serde(default)]
    pub merge_strategy: MergeStrategy,
    #[serde(default)]
    pub file_path: Option<String>,
    #[serde(default)]
    pub expected_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigEdit {
    pub key_path: String,
    pub value: Value,
    #[serde(default)]
    pub merge_strategy: MergeStrategy,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigBatchWriteParams {
    pub edits: Vec<ConfigEdit>,
    #[serde(default)]
    pub file_path: Option<String>,
    #[serde(default)]
    pub expected_version: Option<String>,
    #[serde(default)]
    pub reload_user_config: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WriteStatus {
    Ok,
    OkOverridden,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigWriteResponse {
    pub status: WriteStatus,
    pub version: String,
    pub file_path: String,
    pub overridden_metadata: Option<Value>,
}

/// `data.config_write_error_code` of a config write error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ConfigWriteErrorCode {
    ConfigLayerReadonly,
    ConfigVersionConflict,
    ConfigValidationError,
    ConfigPathNotFound,
    ConfigSchemaUnknownKey,
    UserLayerNotFound,
}

// ---------------------------------------------------------------------------------------
// model/list, collaborationMode/list

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelListParams {
    /// Decimal offset.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Default: all.
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub include_hidden: Option<bool>,
    #[serde(default)]
    pub model_provider: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEffortOption {
    pub reasoning_effort: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub model: String,
    pub upgrade: Option<String>,
    pub upgrade_info: Option<Value>,
    pub availability_nux: Option<Value>,
    pub display_name: String,
    pub description: String,
    pub model_specialty: Option<String>,
    pub hidden: bool,
    pub supported_reasoning_efforts: Vec<ReasoningEffortOption>,
    pub default_reasoning_effort: String,
    pub input_modalities: Vec<String>,
    pub supports_personality: bool,
    pub multi_agent_version: Option<String>,
    pub additional_speed_tiers: Vec<String>,
    pub service_tiers: Vec<Value>,
    pub default_service_tier: Option<String>,
    pub is_default: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelListResponse {
    pub data: Vec<Model>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeListParams {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModeKind {
    Plan,
    Default,
}

/// A preset; `null` fields leave the thread's own setting alone (`model`, `mode`,
/// `reasoning_effort` are tri-state: value, null = keep, absent never happens on output).
/// `reasoning_effort` is snake_case on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeMask {
    pub name: String,
    pub mode: Option<ModeKind>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationModeListResponse {
    pub data: Vec<CollaborationModeMask>,
}

// ---------------------------------------------------------------------------------------
// notifications

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartedNotification {
    pub thread: Thread,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadIdNotification {
    pub thread_id: String,
}

pub type ThreadArchivedNotification = ThreadIdNotification;
pub type ThreadUnarchivedNotification = ThreadIdNotification;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStatusChangedNotification {
    pub thread_id: String,
    pub status: ThreadStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartedNotification {
    pub thread_id: String,
    pub turn: Turn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompletedNotification {
    pub thread_id: String,
    pub turn: Turn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemStartedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    pub started_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemCompletedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    pub completed_at_ms: i64,
}

/// `item/agentMessage/delta`, `item/commandExecution/outputDelta` and
/// `item/fileChange/outputDelta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
}

pub type AgentMessageDeltaNotification = ItemDeltaNotification;

/// `item/plan/delta`: text of a proposed plan as it streams (Codex marks it
/// experimental). The concatenated deltas need not equal the completed item's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
}
pub type CommandExecutionOutputDeltaNotification = ItemDeltaNotification;

/// `item/mcpToolCall/progress`: what the MCP server says of a call still running (one
/// short line; the newest, a few times a second at most).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallProgressNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub message: String,
}
/// What applying the patch printed (what the model is told), once, before the item
/// completes. Codex 0.171 stopped sending it; clients written for earlier versions read it.
pub type FileChangeOutputDeltaNotification = ItemDeltaNotification;

/// `thread/compacted`: the conversation was summarised in this turn. The
/// `contextCompaction` item says the same; this is for clients that predate it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompactedNotification {
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningTextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub content_index: i64,
}

/// `item/reasoning/summaryPartAdded`: a new part of a reasoning item's summary begins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSummaryPartAddedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub summary_index: i64,
}

/// `item/reasoning/summaryTextDelta`: text of one part of a reasoning item's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSummaryTextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub summary_index: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanStep {
    pub step: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnPlanUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub explanation: Option<String>,
    pub plan: Vec<PlanStep>,
}

/// `configWarning`: a problem with the config, sent after `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigWarningNotification {
    pub summary: String,
    pub details: Option<String>,
    /// The config file.
    pub path: Option<String>,
    /// Where in the file; not known here, so `null`.
    pub range: Option<TextRange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextRange {
    pub start: TextPosition,
    pub end: TextPosition,
}

/// 1-based line and column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextPosition {
    pub line: u32,
    pub column: u32,
}

/// `turn/diff/updated`: every file the turn changed so far, as one unified diff from
/// before the turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiffUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageBreakdown {
    pub total_tokens: i64,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_input_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_output_tokens: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    pub total: TokenUsageBreakdown,
    pub last: TokenUsageBreakdown,
    pub model_context_window: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsageUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub token_usage: ThreadTokenUsage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    pub error: TurnError,
    pub will_retry: bool,
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarningNotification {
    pub thread_id: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerRequestResolvedNotification {
    pub thread_id: String,
    pub request_id: super::RequestId,
}

// ---------------------------------------------------------------------------------------
// server → client approval requests (v2)

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub started_at_ms: i64,
    pub environment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_actions: Option<Vec<CommandAction>>,
}

/// `accept`, `acceptForSession`, `decline` (do not run, the turn goes on), `cancel` (do
/// not run, stop the turn), or `{"acceptWithExecpolicyAmendment": {...}}` (accept once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionRequestApprovalResponse {
    pub decision: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub started_at_ms: i64,
    pub reason: Option<String>,
    pub grant_root: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeRequestApprovalResponse {
    pub decision: Value,
}

// ---------------------------------------------------------------------------------------
// Thread administration: names, compaction, subscriptions, deletion, paged turns.

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSetNameParams {
    pub thread_id: String,
    pub name: String,
}

/// `thread/metadata/update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMetadataUpdateParams {
    pub thread_id: String,
    /// Patch the stored Git metadata for this thread. Omit a field to leave it unchanged,
    /// set it to `null` to clear it, or provide a string to replace the stored value.
    #[serde(default)]
    pub git_info: Option<ThreadMetadataGitInfoUpdateParams>,
}

/// One field each: absent = unchanged (`None`), `null` = clear (`Some(None)`), a
/// string = replace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMetadataGitInfoUpdateParams {
    /// Omit to leave the stored branch unchanged, set to `null` to clear it, or provide a
    /// non-empty string to replace it.
    #[serde(
        default,
        deserialize_with = "present_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub branch: Option<Option<String>>,
    /// Omit to leave the stored commit unchanged, set to `null` to clear it, or provide a
    /// non-empty string to replace it.
    #[serde(
        default,
        deserialize_with = "present_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub sha: Option<Option<String>>,
    /// Omit to leave the stored origin URL unchanged, set to `null` to clear it, or provide
    /// a non-empty string to replace it.
    #[serde(
        default,
        deserialize_with = "present_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub origin_url: Option<Option<String>>,
}

/// `thread/inject_items`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadInjectItemsParams {
    pub thread_id: String,
    /// Raw Responses API items to append to the thread's model-visible history.
    pub items: Vec<Value>,
}

/// `thread/revert`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertParams {
    pub thread_id: String,
    /// Turn dropped from the thread's history, together with every later turn.
    pub before_turn_id: String,
    /// Ours, not Codex's: also undo, newest first, the file changes the dropped turns'
    /// patches made, where a file is exactly as its turn left it. Commands' side effects
    /// are never undone. Default `false`: only the history changes, as in Codex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_files: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertResponse {
    /// The thread after the revert; `turns` is always empty (read them with
    /// `thread/turns/list`).
    pub thread: Thread,
    /// Pass as `cursor` to `thread/items/list` with `sortDirection: "desc"`: the first
    /// page starts at the newest item kept. `null` when no item is left.
    pub items_backwards_cursor: Option<String>,
    /// Pass as `cursor` to `thread/turns/list` with `sortDirection: "desc"`: the first
    /// page starts at the newest turn kept. `null` when no turn is left.
    pub turns_backwards_cursor: Option<String>,
    /// Ours, not Codex's: present when `revertFiles` was `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_revert: Option<FileRevert>,
}

/// What `thread/revert` with `revertFiles` did to the files (ours, not Codex's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileRevert {
    /// Absolute paths put back as they were before the dropped turns, in the order they
    /// were restored (newest change first).
    pub restored: Vec<String>,
    /// Changes left as they are, each with why.
    pub skipped: Vec<FileRevertSkipped>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileRevertSkipped {
    pub path: String,
    pub reason: String,
}

/// `thread/shellCommand`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadShellCommandParams {
    pub thread_id: String,
    /// Shell command string evaluated by the thread's shell (pipes, redirects and
    /// quoting kept). Unlike Codex, it runs under the thread's sandbox policy unless that
    /// is `danger-full-access`.
    pub command: String,
    /// Maximum execution time in milliseconds. Defaults to one hour when omitted or null.
    /// Must be non-negative; zero requests an immediate timeout.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadMetadataUpdateResponse {
    pub thread: Thread,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadNameUpdatedNotification {
    pub thread_id: String,
    pub thread_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadUnsubscribeStatus {
    NotLoaded,
    NotSubscribed,
    Unsubscribed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeResponse {
    pub status: ThreadUnsubscribeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListResponse {
    pub data: Vec<String>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListParams {
    pub thread_id: String,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// Default descending (newest first), as Codex.
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    /// Default `summary`, as Codex.
    #[serde(default)]
    pub items_view: Option<ItemsView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListResponse {
    pub data: Vec<Turn>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListParams {
    pub thread_id: String,
    /// Only this turn's items; every turn's when absent.
    #[serde(default)]
    pub turn_id: Option<String>,
    #[serde(default)]
    pub cursor: Option<ThreadItemsListCursor>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// Default ascending (oldest first), as Codex.
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    /// Codex's per-item output deferral; every output is inline here, so it changes
    /// nothing.
    #[serde(default)]
    pub defer_output: Option<ThreadItemOutputDeferral>,
}

/// Where an item page starts: a cursor an earlier page returned, or an item of the
/// requested turn (exclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ThreadItemsListCursor {
    Opaque(String),
    Anchor(ThreadItemsListAnchor),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadItemsListAnchor {
    #[serde(rename_all = "camelCase")]
    Item { item_id: String },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadItemOutputDeferral {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListResponse {
    pub data: Vec<ThreadItemEntry>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemEntry {
    pub turn_id: String,
    pub item: ThreadItem,
    /// Unix milliseconds; not recorded per item here, so `null`.
    pub started_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionProfileListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionProfileSummary {
    pub id: String,
    pub description: Option<String>,
    pub allowed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionProfileListResponse {
    pub data: Vec<PermissionProfileSummary>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillsListParams {
    #[serde(default)]
    pub cwds: Vec<String>,
    #[serde(default)]
    pub force_reload: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillsListEntry {
    pub cwd: String,
    /// Always empty: this agent has no skills.
    pub skills: Vec<Value>,
    pub errors: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillsListResponse {
    pub data: Vec<SkillsListEntry>,
}

// ---------------------------------------------------------------------------------------
// Listings: providers, features, hooks, requirements, goals.

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderListResponse {
    pub data: Vec<ModelProviderSummary>,
    pub default_provider_id: String,
    /// `modelProvider/default/set` writes `model_provider` in the user config.toml.
    pub can_change_default: bool,
}

/// `modelProvider/capabilities/read`: what the default provider offers besides text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderCapabilitiesReadResponse {
    pub image_generation: bool,
    pub web_search: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderCapabilitiesReadParams {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderDefaultSetParams {
    /// Configured provider to use by default for new threads and unscoped model lists.
    pub provider_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelProviderConfigWriteParams {
    pub settings: ProviderSettingsPatch,
}

/// Omitted patch fields keep their values; an explicit `null` clears a nullable field.
/// Only custom gateways (any OpenAI-compatible endpoint) exist here; Codex's `bedrock`
/// and `gcp` patches are refused with a clear error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ProviderSettingsPatch {
    #[serde(rename_all = "camelCase")]
    CustomGateway {
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "Option<String>")]
        base_url: Option<Option<String>>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        #[schemars(with = "Option<String>")]
        env_key: Option<Option<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "String")]
        name: Option<String>,
        /// Omit or pass null to allocate a new custom provider id (from `name`).
        #[serde(default)]
        provider_id: Option<String>,
    },
    Bedrock {
        #[serde(flatten)]
        #[schemars(with = "serde_json::Map<String, Value>")]
        fields: serde_json::Map<String, Value>,
    },
    Gcp {
        #[serde(flatten)]
        #[schemars(with = "serde_json::Map<String, Value>")]
        fields: serde_json::Map<String, Value>,
    },
}

/// A field that was sent, `null` included: `Some(None)` for `null`, `None` when absent
/// (through `#[serde(default)]`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderConfigWriteResponse {
    pub provider: ModelProviderSummary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelProviderSummary {
    pub id: String,
    pub name: String,
    /// `null` when absent or when it carries credentials.
    pub base_url: Option<String>,
    pub can_edit: bool,
    pub settings: ProviderSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ProviderSettings {
    Openai,
    CustomGateway { auth: GatewayAuth },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum GatewayAuth {
    None,
    #[serde(rename_all = "camelCase")]
    EnvironmentVariable {
        env_key: String,
    },
    #[serde(rename_all = "camelCase")]
    ExternallyConfigured {
        env_key: Option<String>,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentalFeatureListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub thread_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentalFeatureListResponse {
    /// Always empty: no feature flags here.
    pub data: Vec<Value>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HooksListParams {
    #[serde(default)]
    pub cwds: Vec<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HooksListEntry {
    pub cwd: String,
    /// Always empty: this agent runs no hooks.
    pub hooks: Vec<Value>,
    pub errors: Vec<Value>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HooksListResponse {
    pub data: Vec<HooksListEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRequirementsReadResponse {
    /// `null`: no managed requirements (requirements.toml, MDM) exist here.
    pub requirements: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalGetResponse {
    pub goal: Option<ThreadGoal>,
}

/// An objective the thread works toward over several turns (goal mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoal {
    pub thread_id: String,
    pub objective: String,
    pub status: ThreadGoalStatus,
    pub token_budget: Option<i64>,
    pub tokens_used: i64,
    pub time_used_seconds: i64,
    /// Unix seconds.
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadGoalStatus {
    Active,
    Paused,
    Blocked,
    UsageLimited,
    BudgetLimited,
    Complete,
}

/// Who changed a goal; recorded by the reference for its own authorization rules, taken
/// and ignored here (every client that may call the method may change the goal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadGoalMutationOrigin {
    User,
    Automatic,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalSetParams {
    pub thread_id: String,
    #[serde(default)]
    pub objective: Option<String>,
    #[serde(default)]
    pub status: Option<ThreadGoalStatus>,
    /// Absent: unchanged; `null`: no budget; a number: the budget in tokens.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schemars(with = "Option<i64>")]
    pub token_budget: Option<Option<i64>>,
    #[serde(default)]
    pub origin: Option<ThreadGoalMutationOrigin>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or a value.
fn present_or_null<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalSetResponse {
    pub goal: ThreadGoal,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalClearParams {
    pub thread_id: String,
    #[serde(default)]
    pub origin: Option<ThreadGoalMutationOrigin>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalClearResponse {
    pub cleared: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGoalUpdatedNotification {
    pub thread_id: String,
    /// The turn that changed it (accounting, the model's `update_goal`); `null` for a
    /// client's `thread/goal/set`.
    pub turn_id: Option<String>,
    pub goal: ThreadGoal,
}

pub type ThreadGoalClearedNotification = ThreadIdNotification;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadBackgroundTerminalsListParams {
    pub thread_id: String,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadBackgroundTerminalsListResponse {
    /// Always empty: commands here run to completion inside their turn (or are killed
    /// with it); none is left running in the background.
    pub data: Vec<Value>,
    pub next_cursor: Option<String>,
}

// ---------------------------------------------------------------------------------------
// fs/*: the remote file-system methods. Every path is absolute and confined to what the
// server's config allows (see `fs_api`); contents travel as standard base64.

/// Read a file from the host filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadFileParams {
    /// Absolute path to read.
    pub path: String,
}

/// Base64-encoded file contents returned by `fs/readFile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadFileResponse {
    /// File contents encoded as base64.
    pub data_base64: String,
}

/// Write a file on the host filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsWriteFileParams {
    /// Absolute path to write.
    pub path: String,
    /// File contents encoded as base64.
    pub data_base64: String,
}

/// Successful response for `fs/writeFile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FsWriteFileResponse {}

/// Create a directory on the host filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsCreateDirectoryParams {
    /// Absolute directory path to create.
    pub path: String,
    /// Whether parent directories should also be created. Defaults to `true`.
    #[serde(default)]
    pub recursive: Option<bool>,
}

/// Successful response for `fs/createDirectory`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FsCreateDirectoryResponse {}

/// Request metadata for an absolute path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsGetMetadataParams {
    /// Absolute path to inspect.
    pub path: String,
}

/// Metadata returned by `fs/getMetadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsGetMetadataResponse {
    /// Whether the path resolves to a directory.
    pub is_directory: bool,
    /// Whether the path resolves to a regular file.
    pub is_file: bool,
    /// Whether the path itself is a symbolic link.
    pub is_symlink: bool,
    /// File creation time in Unix milliseconds when available, otherwise `0`.
    pub created_at_ms: i64,
    /// File modification time in Unix milliseconds when available, otherwise `0`.
    pub modified_at_ms: i64,
}

/// List direct child names for a directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadDirectoryParams {
    /// Absolute directory path to read.
    pub path: String,
}

/// A directory entry returned by `fs/readDirectory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadDirectoryEntry {
    /// Direct child entry name only, not an absolute or relative path.
    pub file_name: String,
    /// Whether this entry resolves to a directory.
    pub is_directory: bool,
    /// Whether this entry resolves to a regular file.
    pub is_file: bool,
}

/// Directory entries returned by `fs/readDirectory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsReadDirectoryResponse {
    /// Direct child entries in the requested directory.
    pub entries: Vec<FsReadDirectoryEntry>,
}

/// Remove a file or directory tree from the host filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsRemoveParams {
    /// Absolute path to remove.
    pub path: String,
    /// Whether directory removal should recurse. Defaults to `true`.
    #[serde(default)]
    pub recursive: Option<bool>,
    /// Whether missing paths should be ignored. Defaults to `true`.
    #[serde(default)]
    pub force: Option<bool>,
}

/// Successful response for `fs/remove`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FsRemoveResponse {}

/// Copy a file or directory tree on the host filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsCopyParams {
    /// Absolute source path.
    pub source_path: String,
    /// Absolute destination path.
    pub destination_path: String,
    /// Required for directory copies; ignored for file copies.
    #[serde(default)]
    pub recursive: bool,
}

/// Successful response for `fs/copy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FsCopyResponse {}

/// Start filesystem watch notifications for an absolute path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsWatchParams {
    /// Connection-scoped watch identifier used for `fs/unwatch` and `fs/changed`.
    pub watch_id: String,
    /// Absolute file or directory path to watch.
    pub path: String,
}

/// Successful response for `fs/watch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsWatchResponse {
    /// Canonicalized path associated with the watch.
    pub path: String,
}

/// Stop filesystem watch notifications for a prior `fs/watch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsUnwatchParams {
    /// Watch identifier previously provided to `fs/watch`.
    pub watch_id: String,
}

/// Successful response for `fs/unwatch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FsUnwatchResponse {}

/// Filesystem watch notification emitted for `fs/watch` subscribers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsChangedNotification {
    /// Watch identifier previously provided to `fs/watch`.
    pub watch_id: String,
    /// File or directory paths associated with this event.
    pub changed_paths: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// command/exec*

/// Run a standalone command (argv vector) in the server sandbox without creating a thread
/// or turn. The response is deferred until the process exits and follows every
/// `command/exec/outputDelta` notification of the process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecParams {
    /// Command argv vector. Empty arrays are rejected.
    pub command: Vec<String>,
    /// Client-supplied, connection-scoped process id. Required for `tty`, `streamStdin`,
    /// `streamStdoutStderr` and the follow-up `command/exec/*` calls.
    #[serde(default)]
    pub process_id: Option<String>,
    /// PTY mode; implies `streamStdin` and `streamStdoutStderr`.
    #[serde(default)]
    pub tty: bool,
    /// Allow `command/exec/write` to write stdin bytes.
    #[serde(default)]
    pub stream_stdin: bool,
    /// Stream stdout/stderr as `command/exec/outputDelta` notifications (not repeated in
    /// the response).
    #[serde(default)]
    pub stream_stdout_stderr: bool,
    /// Per-stream capture cap in bytes; the server default when omitted. The server's
    /// maximum applies whatever is asked.
    #[serde(default)]
    pub output_bytes_cap: Option<usize>,
    /// No client cap (the server's maximum still applies). Not with `outputBytesCap`.
    #[serde(default)]
    pub disable_output_cap: bool,
    /// No timeout. Not with `timeoutMs`.
    #[serde(default)]
    pub disable_timeout: bool,
    /// Timeout in milliseconds; the server default when omitted.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// Working directory; the server's cwd when omitted (relative paths are resolved
    /// against it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Overrides merged into the server-computed (scrubbed) environment; `null` unsets.
    #[serde(default)]
    pub env: Option<std::collections::HashMap<String, Option<String>>>,
    /// Initial PTY size; only with `tty`.
    #[serde(default)]
    pub size: Option<CommandExecTerminalSize>,
    /// Sandbox policy for this command; the configured one when omitted. A policy looser
    /// than the configured one is refused.
    #[serde(default)]
    pub sandbox_policy: Option<SandboxPolicy>,
    /// Codex's experimental alternative to `sandboxPolicy`. Read only to refuse it: running
    /// under the configured policy instead of the named profile could be looser than the
    /// client asked. Not in our schema (see tests/codex-schema/allowlist.json).
    #[serde(default)]
    #[schemars(skip)]
    pub permission_profile: Option<Value>,
}

/// PTY size in character cells for `command/exec` PTY sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecTerminalSize {
    /// Terminal height in character cells.
    pub rows: u16,
    /// Terminal width in character cells.
    pub cols: u16,
}

/// Final buffered result for `command/exec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecResponse {
    /// Process exit code (128 + signal when killed by one; 124 on timeout).
    pub exit_code: i32,
    /// Buffered stdout capture; empty when stdout was streamed.
    pub stdout: String,
    /// Buffered stderr capture; empty when stderr was streamed.
    pub stderr: String,
}

/// Write stdin bytes to a running `command/exec` session, close stdin, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecWriteParams {
    pub process_id: String,
    /// Base64-encoded stdin bytes to write.
    #[serde(default)]
    pub delta_base64: Option<String>,
    /// Close stdin after writing `deltaBase64`, if present.
    #[serde(default)]
    pub close_stdin: bool,
}

/// Terminate a running `command/exec` session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecTerminateParams {
    pub process_id: String,
}

/// Resize a running PTY-backed `command/exec` session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecResizeParams {
    pub process_id: String,
    /// New PTY size in character cells.
    pub size: CommandExecTerminalSize,
}

/// Stream label for `command/exec/outputDelta` notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandExecOutputStream {
    /// stdout stream. PTY mode multiplexes terminal output here.
    Stdout,
    /// stderr stream.
    Stderr,
}

/// Base64-encoded output chunk of a streaming `command/exec` (connection-scoped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecOutputDeltaNotification {
    pub process_id: String,
    pub stream: CommandExecOutputStream,
    pub delta_base64: String,
    /// `true` on the last chunk of a stream that `outputBytesCap` cut short.
    pub cap_reached: bool,
}

// ---------------------------------------------------------------------------------------
// mcpServerStatus/list, config/mcpServer/reload, mcpServer/startupStatus/updated

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStatusDetail {
    Full,
    ToolsAndAuthOnly,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusParams {
    /// Opaque pagination cursor returned by a previous call.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Controls how much MCP inventory data to fetch for each server. Defaults to `Full`
    /// when omitted.
    #[serde(default)]
    pub detail: Option<McpServerStatusDetail>,
    /// Select this environment's registration. Requires `serverName` and `threadId`. When
    /// omitted, a named request uses the same server as older clients.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// Optional page size; defaults to a server-defined value.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub limit: Option<u32>,
    /// Limit discovery to one server. With a thread ID, reuse that thread's MCP connection.
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpAuthStatus {
    Unknown,
    Unsupported,
    NotLoggedIn,
    BearerToken,
    #[serde(rename = "oAuth")]
    OAuth,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerConnectionStatus {
    NotStarted,
    Starting,
    Connected,
    AuthenticationRequired,
    Failed,
    Cancelled,
    Disabled,
}

/// Presentation metadata advertised by an initialized MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub description: Option<String>,
    pub icons: Option<Vec<Value>>,
    pub name: String,
    pub title: Option<String>,
    pub version: String,
    pub website_url: Option<String>,
}

/// Definition for a tool the client can call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub icons: Option<Vec<Value>>,
    pub input_schema: Value,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub title: Option<String>,
}

/// `mcpServer/tool/call`: a client calls a tool of a loaded thread's MCP server itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallParams {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Exact registration scope; omission preserves legacy name-only selection.
    #[serde(default)]
    pub environment_id: Option<String>,
    pub server: String,
    pub thread_id: String,
    pub tool: String,
}

/// The tool's `CallToolResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallResponse {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    pub content: Vec<Value>,
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

/// `mcpServer/oauth/login`: log in to an HTTP MCP server of the config with OAuth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginParams {
    /// Registration strategy for this login only; only `auto` (or omitted) is served.
    #[serde(default)]
    pub client_registration: Option<McpServerOauthClientRegistration>,
    #[serde(default)]
    pub environment_id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// Resolve the server as this loaded thread does (its working directory).
    #[serde(default)]
    pub thread_id: Option<String>,
    /// How long to wait for the browser to come back (default 300 s).
    #[serde(default)]
    pub timeout_secs: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerOauthClientRegistration {
    Auto,
    Cimd,
    Dcr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginResponse {
    /// Open this in a browser; the login completes when it comes back to our loopback
    /// listener.
    pub authorization_url: String,
    pub login_id: Option<String>,
}

/// `mcpServer/oauthLogin/completed`: how a login that answered with an
/// `authorizationUrl` ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerOauthLoginCompletedNotification {
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub login_id: Option<String>,
    pub name: String,
    pub success: bool,
    #[serde(default)]
    pub thread_id: Option<String>,
}

/// `mcpServer/resource/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceReadParams {
    /// Additional MCP request metadata.
    #[serde(rename = "_meta", default)]
    pub meta: Option<serde_json::Map<String, Value>>,
    /// Hosted connectors are not served: must be absent.
    #[serde(default)]
    pub connector_id: Option<String>,
    #[serde(default)]
    pub environment_id: Option<String>,
    #[serde(default)]
    pub origin_call_id: Option<String>,
    pub server: String,
    /// Hosted apps are not served: must be absent.
    #[serde(default)]
    pub target: Option<Value>,
    /// The loaded thread whose server to read from; required here (Codex allows omitting it).
    #[serde(default)]
    pub thread_id: Option<String>,
    pub uri: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceReadResponse {
    /// The server's `ReadResourceResult.contents`, as sent.
    pub contents: Vec<Value>,
    #[serde(default)]
    pub origin_call_id: Option<String>,
}

/// A known resource that the server is capable of reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResource {
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub icons: Option<Vec<Value>>,
    #[serde(default)]
    pub mime_type: Option<String>,
    pub name: String,
    #[serde(default)]
    pub size: Option<i64>,
    #[serde(default)]
    pub title: Option<String>,
    pub uri: String,
}

/// A template description for resources available on the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    pub uri_template: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub auth_status: McpAuthStatus,
    /// Environment that contributed this registration; null for a thread-wide server.
    /// Older servers omit this field.
    pub environment_id: Option<String>,
    /// HTTP origin of the effective configured endpoint, including plugin servers.
    /// Excludes credentials, path, query, and fragment; null for non-HTTP transports.
    pub http_origin: Option<String>,
    pub name: String,
    pub plugin_id: Option<String>,
    pub resource_templates: Vec<McpResourceTemplate>,
    pub resources: Vec<McpResource>,
    /// Current thread-runtime connection state; null when unavailable or the
    /// configuration changed.
    pub runtime_status: Option<McpServerConnectionStatus>,
    /// Capabilities advertised by the initialized MCP server; null when unavailable.
    pub server_capabilities: Option<Value>,
    pub server_info: Option<McpServerInfo>,
    /// Opaque `_meta` from the first page of the corresponding MCP tool catalog. Null when
    /// unavailable.
    pub tool_list_meta: Option<Value>,
    pub tools: BTreeMap<String, McpTool>,
    /// Tool discovery failed and no catalog was returned. Null when a catalog is returned,
    /// including cached or empty catalogs.
    pub tools_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusResponse {
    pub data: Vec<McpServerStatus>,
    /// Opaque cursor to pass to the next call to continue after the last item. If None,
    /// there are no more items to return.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerRefreshResponse {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStartupState {
    Starting,
    Ready,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerStartupFailureReason {
    ReauthenticationRequired,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatusUpdatedNotification {
    /// Registration scope, not necessarily the server's execution environment.
    pub environment_id: Option<String>,
    pub error: Option<String>,
    pub failure_reason: Option<McpServerStartupFailureReason>,
    pub name: String,
    pub status: McpServerStartupState,
    pub thread_id: Option<String>,
}

// ---------------------------------------------------------------------------------------
// mcpServer/elicitation/request (server → client)

/// Request input for an MCP server elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestParams {
    /// Registration scope, not necessarily the server's execution environment.
    pub environment_id: Option<String>,
    pub server_name: String,
    pub thread_id: String,
    /// Active turn when this elicitation was observed, if it could be correlated.
    pub turn_id: Option<String>,
    #[serde(flatten)]
    pub request: McpServerElicitationRequest,
}

/// The server's `elicitation/create` params, by mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode")]
pub enum McpServerElicitationRequest {
    #[serde(rename = "form", rename_all = "camelCase")]
    Form {
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        message: String,
        /// The form, as the MCP server sent it (a flat object schema of primitives).
        requested_schema: Value,
    },
    #[serde(rename = "url", rename_all = "camelCase")]
    Url {
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
        elicitation_id: String,
        message: String,
        url: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerElicitationAction {
    Accept,
    Decline,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestResponse {
    /// Optional client metadata for form-mode action handling.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    pub action: McpServerElicitationAction,
    /// Structured user input for accepted elicitations; null for decline/cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

// ---------------------------------------------------------------------------------------
// The model asks the user: `item/tool/requestUserInput` and `item/permissions/requestApproval`.

/// One choice of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequestUserInputOption {
    pub label: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequestUserInputQuestion {
    pub id: String,
    pub header: String,
    pub question: String,
    /// The person may type an answer of their own besides the options.
    #[serde(default)]
    pub is_other: bool,
    #[serde(default)]
    pub is_secret: bool,
    pub options: Option<Vec<ToolRequestUserInputOption>>,
}

/// `item/tool/requestUserInput`: the model's questions (its `request_user_input` call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequestUserInputParams {
    pub thread_id: String,
    pub turn_id: String,
    /// The tool call's id.
    pub item_id: String,
    pub questions: Vec<ToolRequestUserInputQuestion>,
    /// Always `true`: the turn waits for the answer (until `approval_timeout_sec`).
    pub is_blocking: bool,
    /// Never set.
    #[serde(default)]
    pub auto_resolution_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequestUserInputAnswer {
    pub answers: Vec<String>,
}

/// The answers by question id. An answer for a question that was not asked makes the
/// whole reply no answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolRequestUserInputResponse {
    pub answers: BTreeMap<String, ToolRequestUserInputAnswer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileSystemAccessMode {
    Read,
    Write,
    Deny,
}

/// Codex's special paths; none is granted here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileSystemSpecialPath {
    Root,
    Minimal,
    ProjectRoots {
        #[serde(default)]
        subpath: Option<String>,
    },
    Tmpdir,
    SlashTmp,
    Unknown {
        path: String,
        #[serde(default)]
        subpath: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileSystemPath {
    Path { path: String },
    GlobPattern { pattern: String },
    Special { value: FileSystemSpecialPath },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemSandboxEntry {
    pub access: FileSystemAccessMode,
    pub path: FileSystemPath,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalFileSystemPermissions {
    /// Exact directories as `{"access": "write", "path": {"type": "path", ...}}`; in a
    /// grant, other entries (read, deny, globs, special paths) grant nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<FileSystemSandboxEntry>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob_scan_max_depth: Option<u32>,
    /// Never sent: commands already read everywhere but the protected paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// The same directories as `entries`, in Codex's older field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalNetworkPermissions {
    pub enabled: Option<bool>,
}

/// What the model asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestPermissionProfile {
    pub file_system: Option<AdditionalFileSystemPermissions>,
    pub network: Option<AdditionalNetworkPermissions>,
}

/// `item/permissions/requestApproval`: the model asks for more sandbox permissions (its
/// `request_permissions` call), after the engine refused what may never be granted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub cwd: String,
    #[serde(default)]
    pub environment_id: Option<String>,
    pub permissions: RequestPermissionProfile,
    pub reason: Option<String>,
    pub started_at_ms: i64,
}

/// What the client grants (only what was also asked for applies).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantedPermissionProfile {
    pub file_system: Option<AdditionalFileSystemPermissions>,
    pub network: Option<AdditionalNetworkPermissions>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PermissionGrantScope {
    #[default]
    Turn,
    Session,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsRequestApprovalResponse {
    pub permissions: GrantedPermissionProfile,
    #[serde(default)]
    pub scope: PermissionGrantScope,
    /// There is no automatic review here: a grant that asks for one grants nothing.
    #[serde(default)]
    pub strict_auto_review: Option<bool>,
}
