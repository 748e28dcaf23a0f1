//! Every notification the server sends, by name: one table, from which the schema's
//! `methods.json` is written and against which every send is checked (a name is never
//! spelled out where it is sent).

pub(crate) const THREAD_STARTED: &str = "thread/started";
pub(crate) const THREAD_ARCHIVED: &str = "thread/archived";
pub(crate) const THREAD_UNARCHIVED: &str = "thread/unarchived";
pub(crate) const THREAD_DELETED: &str = "thread/deleted";
pub(crate) const THREAD_CLOSED: &str = "thread/closed";
pub(crate) const THREAD_REVERTED: &str = "thread/reverted";
pub(crate) const THREAD_NAME_UPDATED: &str = "thread/name/updated";
pub(crate) const THREAD_COMPACTED: &str = "thread/compacted";
pub(crate) const ITEM_FILE_CHANGE_OUTPUT_DELTA: &str = "item/fileChange/outputDelta";
pub(crate) const THREAD_GOAL_UPDATED: &str = "thread/goal/updated";
pub(crate) const THREAD_GOAL_CLEARED: &str = "thread/goal/cleared";
pub(crate) const THREAD_STATUS_CHANGED: &str = "thread/status/changed";
pub(crate) const THREAD_TOKEN_USAGE_UPDATED: &str = "thread/tokenUsage/updated";
pub(crate) const TURN_STARTED: &str = "turn/started";
pub(crate) const TURN_COMPLETED: &str = "turn/completed";
pub(crate) const TURN_PLAN_UPDATED: &str = "turn/plan/updated";
pub(crate) const TURN_DIFF_UPDATED: &str = "turn/diff/updated";
pub(crate) const CONFIG_WARNING: &str = "configWarning";
pub(crate) const ITEM_STARTED: &str = "item/started";
pub(crate) const ITEM_COMPLETED: &str = "item/completed";
pub(crate) const ITEM_AGENT_MESSAGE_DELTA: &str = "item/agentMessage/delta";
pub(crate) const ITEM_REASONING_TEXT_DELTA: &str = "item/reasoning/textDelta";
pub(crate) const ITEM_REASONING_SUMMARY_PART_ADDED: &str = "item/reasoning/summaryPartAdded";
pub(crate) const ITEM_REASONING_SUMMARY_TEXT_DELTA: &str = "item/reasoning/summaryTextDelta";
pub(crate) const ITEM_PLAN_DELTA: &str = "item/plan/delta";
pub(crate) const ITEM_COMMAND_EXECUTION_OUTPUT_DELTA: &str = "item/commandExecution/outputDelta";
pub(crate) const ITEM_MCP_TOOL_CALL_PROGRESS: &str = "item/mcpToolCall/progress";
pub(crate) const COMMAND_EXEC_OUTPUT_DELTA: &str = "command/exec/outputDelta";
pub(crate) const SERVER_REQUEST_RESOLVED: &str = "serverRequest/resolved";
pub(crate) const ERROR: &str = "error";
pub(crate) const WARNING: &str = "warning";
pub(crate) const HOOK_STARTED: &str = "hook/started";
pub(crate) const HOOK_COMPLETED: &str = "hook/completed";
pub(crate) const ACCOUNT_UPDATED: &str = "account/updated";
pub(crate) const ACCOUNT_LOGIN_COMPLETED: &str = "account/login/completed";
pub(crate) const FUZZY_FILE_SEARCH_SESSION_UPDATED: &str = "fuzzyFileSearch/sessionUpdated";
pub(crate) const FUZZY_FILE_SEARCH_SESSION_COMPLETED: &str = "fuzzyFileSearch/sessionCompleted";
pub(crate) const FS_CHANGED: &str = "fs/changed";
pub(crate) const MCP_SERVER_STARTUP_STATUS_UPDATED: &str = "mcpServer/startupStatus/updated";
pub(crate) const MCP_SERVER_OAUTH_LOGIN_COMPLETED: &str = "mcpServer/oauthLogin/completed";

/// Each notification and the schema path of its params.
pub(crate) const SERVER_NOTIFICATIONS: &[(&str, &str)] = &[
    (THREAD_STARTED, "v2/ThreadStartedNotification"),
    (THREAD_ARCHIVED, "v2/ThreadIdNotification"),
    (THREAD_UNARCHIVED, "v2/ThreadIdNotification"),
    (THREAD_DELETED, "v2/ThreadIdNotification"),
    (THREAD_CLOSED, "v2/ThreadIdNotification"),
    (THREAD_REVERTED, "v2/ThreadIdNotification"),
    (THREAD_NAME_UPDATED, "v2/ThreadNameUpdatedNotification"),
    (THREAD_COMPACTED, "v2/ContextCompactedNotification"),
    (ITEM_FILE_CHANGE_OUTPUT_DELTA, "v2/ItemDeltaNotification"),
    (THREAD_GOAL_UPDATED, "v2/ThreadGoalUpdatedNotification"),
    (THREAD_GOAL_CLEARED, "v2/ThreadIdNotification"),
    (THREAD_STATUS_CHANGED, "v2/ThreadStatusChangedNotification"),
    (
        THREAD_TOKEN_USAGE_UPDATED,
        "v2/ThreadTokenUsageUpdatedNotification",
    ),
    (TURN_STARTED, "v2/TurnStartedNotification"),
    (TURN_COMPLETED, "v2/TurnCompletedNotification"),
    (TURN_PLAN_UPDATED, "v2/TurnPlanUpdatedNotification"),
    (TURN_DIFF_UPDATED, "v2/TurnDiffUpdatedNotification"),
    (CONFIG_WARNING, "v2/ConfigWarningNotification"),
    (ITEM_STARTED, "v2/ItemStartedNotification"),
    (ITEM_COMPLETED, "v2/ItemCompletedNotification"),
    (ITEM_AGENT_MESSAGE_DELTA, "v2/ItemDeltaNotification"),
    (
        ITEM_REASONING_TEXT_DELTA,
        "v2/ReasoningTextDeltaNotification",
    ),
    (
        ITEM_REASONING_SUMMARY_PART_ADDED,
        "v2/ReasoningSummaryPartAddedNotification",
    ),
    (
        ITEM_REASONING_SUMMARY_TEXT_DELTA,
        "v2/ReasoningSummaryTextDeltaNotification",
    ),
    (ITEM_PLAN_DELTA, "v2/PlanDeltaNotification"),
    (
        ITEM_COMMAND_EXECUTION_OUTPUT_DELTA,
        "v2/ItemDeltaNotification",
    ),
    (
        ITEM_MCP_TOOL_CALL_PROGRESS,
        "v2/McpToolCallProgressNotification",
    ),
    (
        COMMAND_EXEC_OUTPUT_DELTA,
        "v2/CommandExecOutputDeltaNotification",
    ),
    (
        SERVER_REQUEST_RESOLVED,
        "v2/ServerRequestResolvedNotification",
    ),
    (ERROR, "v2/ErrorNotification"),
    (WARNING, "v2/WarningNotification"),
    (HOOK_STARTED, "v2/HookRunNotification"),
    (HOOK_COMPLETED, "v2/HookRunNotification"),
    (ACCOUNT_UPDATED, "v2/AccountUpdatedNotification"),
    (
        ACCOUNT_LOGIN_COMPLETED,
        "v2/AccountLoginCompletedNotification",
    ),
    (
        FUZZY_FILE_SEARCH_SESSION_UPDATED,
        "v1/FuzzyFileSearchSessionUpdatedNotification",
    ),
    (
        FUZZY_FILE_SEARCH_SESSION_COMPLETED,
        "v1/FuzzyFileSearchSessionCompletedNotification",
    ),
    (FS_CHANGED, "v2/FsChangedNotification"),
    (
        MCP_SERVER_STARTUP_STATUS_UPDATED,
        "v2/McpServerStatusUpdatedNotification",
    ),
    (
        MCP_SERVER_OAUTH_LOGIN_COMPLETED,
        "v2/McpServerOauthLoginCompletedNotification",
    ),
];
