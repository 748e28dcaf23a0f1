//! Listings: providers, features, hooks, requirements, goals.

use super::*;

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
pub(super) fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
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
    /// Every configured hook, those that do not run (untrusted, disabled) included.
    pub hooks: Vec<HookMetadata>,
    /// Hooks files that could not be read, with the reason.
    pub errors: Vec<HookErrorInfo>,
    pub warnings: Vec<String>,
}

/// One configured hook as `hooks/list` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookMetadata {
    /// What `[hooks.state."KEY"]` (trust, enabled) is recorded under.
    pub key: String,
    pub event_name: HookEventName,
    /// Always `command`: the only handler type run here.
    pub handler_type: HookHandlerType,
    pub command: String,
    #[serde(rename = "async")]
    pub run_async: bool,
    pub matcher: Option<String>,
    pub timeout_sec: u64,
    pub status_message: Option<String>,
    pub source: HookSource,
    pub source_path: String,
    pub display_order: i64,
    pub enabled: bool,
    pub is_managed: bool,
    pub current_hash: String,
    pub trust_status: HookTrustStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HookTrustStatus {
    Managed,
    Untrusted,
    Trusted,
    Modified,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookErrorInfo {
    pub path: String,
    pub message: String,
}

/// The lifecycle events (Codex's set; the ones this agent never raises are listed so
/// the enum matches what clients expect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HookEventName {
    PreModelRequest,
    PostModelRequest,
    PreToolUse,
    PermissionRequest,
    PostToolUse,
    PreCompact,
    PostCompact,
    SessionStart,
    SessionEnd,
    UserPromptSubmit,
    SubagentStart,
    SubagentStop,
    Stop,
    Interrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HookSource {
    System,
    User,
    Project,
    Mdm,
    SessionFlags,
    Plugin,
    CloudRequirements,
    CloudManagedConfig,
    LegacyManagedConfigFile,
    LegacyManagedConfigMdm,
    Unknown,
}

/// `hook/started` and `hook/completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRunNotification {
    pub thread_id: String,
    pub turn_id: Option<String>,
    pub run: HookRunSummary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRunSummary {
    pub id: String,
    pub event_name: HookEventName,
    pub handler_type: HookHandlerType,
    pub execution_mode: HookExecutionMode,
    pub scope: HookScope,
    pub source: HookSource,
    pub source_path: String,
    pub display_order: i64,
    pub status: HookRunStatus,
    pub status_message: Option<String>,
    pub started_at: i64,
    pub completed_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub entries: Vec<HookOutputEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookOutputEntry {
    pub kind: HookOutputEntryKind,
    pub text: String,
}

macro_rules! camel_enum {
    ($name:ident { $($variant:ident),* $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub enum $name { $($variant),* }
    };
}

camel_enum!(HookHandlerType {
    Command,
    McpTool,
    Prompt,
    Agent
});
camel_enum!(HookExecutionMode { Sync, Async });
camel_enum!(HookScope { Thread, Turn });
camel_enum!(HookRunStatus {
    Running,
    Completed,
    Failed,
    Blocked,
    Stopped
});
camel_enum!(HookOutputEntryKind {
    Warning,
    Stop,
    Feedback,
    Context,
    Error
});

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
pub(super) fn present_or_null<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
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
