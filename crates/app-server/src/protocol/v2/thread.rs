//! `thread/*`: start, resume, fork, read, list, archive.

use super::*;

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
