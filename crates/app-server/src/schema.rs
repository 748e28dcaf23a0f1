//! The protocol's JSON Schema, derived from the wire types: one file per type under
//! `v2/` and `v1/` (the layout SDKs read, e.g. `v2/TurnStartParams.json`), plus
//! `methods.json` naming each method's params and result types and each notification's
//! params type.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::protocol::notification_names;
use crate::protocol::{v1, v2};

/// Every file of the schema: relative path → JSON text.
pub fn schema_files() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut add = |dir: &str, name: &str, schema: Value| {
        let text = serde_json::to_string_pretty(&sorted(schema)).unwrap_or_default() + "\n";
        files.insert(format!("{dir}/{name}.json"), text);
    };
    macro_rules! v2 {
        ($($t:ident),* $(,)?) => {$(
            add("v2", stringify!($t), serde_json::to_value(schemars::schema_for!(v2::$t)).unwrap_or(Value::Null));
        )*};
    }
    macro_rules! v1 {
        ($($t:ident),* $(,)?) => {$(
            add("v1", stringify!($t), serde_json::to_value(schemars::schema_for!(v1::$t)).unwrap_or(Value::Null));
        )*};
    }
    v2!(
        InitializeParams,
        InitializeResponse,
        ThreadStartParams,
        ThreadStartResponse,
        ThreadResumeParams,
        ThreadForkParams,
        ThreadReadParams,
        ThreadReadResponse,
        ThreadListParams,
        ThreadListResponse,
        ThreadIdParams,
        ThreadUnarchiveResponse,
        EmptyResponse,
        TurnStartParams,
        TurnStartResponse,
        ReviewStartParams,
        ReviewStartResponse,
        TurnSteerParams,
        TurnSteerResponse,
        TurnInterruptParams,
        AccountReadParams,
        AccountReadResponse,
        LoginAccountParams,
        LoginAccountResponse,
        CancelLoginAccountParams,
        CancelLoginAccountResponse,
        GetAccountRateLimitsResponse,
        ConfigReadParams,
        ConfigReadResponse,
        ConfigValueWriteParams,
        ConfigBatchWriteParams,
        ConfigWriteResponse,
        ConfigWriteErrorCode,
        ModelListParams,
        ModelListResponse,
        CollaborationModeListParams,
        CollaborationModeListResponse,
        Thread,
        Turn,
        ThreadItem,
        UserInput,
        ThreadStartedNotification,
        ThreadIdNotification,
        ThreadStatusChangedNotification,
        TurnStartedNotification,
        TurnCompletedNotification,
        ItemStartedNotification,
        ItemCompletedNotification,
        ItemDeltaNotification,
        McpToolCallProgressNotification,
        McpServerToolCallParams,
        McpServerOauthLoginParams,
        McpServerOauthLoginResponse,
        McpServerOauthLoginCompletedNotification,
        ModelProviderCapabilitiesReadParams,
        ModelProviderCapabilitiesReadResponse,
        ModelProviderDefaultSetParams,
        ModelProviderConfigWriteParams,
        ModelProviderConfigWriteResponse,
        McpServerToolCallResponse,
        McpResourceReadParams,
        McpResourceReadResponse,
        ReasoningTextDeltaNotification,
        ReasoningSummaryPartAddedNotification,
        ReasoningSummaryTextDeltaNotification,
        PlanDeltaNotification,
        TurnPlanUpdatedNotification,
        TurnDiffUpdatedNotification,
        ConfigWarningNotification,
        ThreadTokenUsageUpdatedNotification,
        ErrorNotification,
        WarningNotification,
        HookRunNotification,
        ServerRequestResolvedNotification,
        AccountUpdatedNotification,
        AccountLoginCompletedNotification,
        CommandExecutionRequestApprovalParams,
        CommandExecutionRequestApprovalResponse,
        FileChangeRequestApprovalParams,
        FileChangeRequestApprovalResponse,
        ThreadSetNameParams,
        ThreadNameUpdatedNotification,
        ContextCompactedNotification,
        ThreadMetadataUpdateParams,
        ThreadMetadataUpdateResponse,
        ThreadShellCommandParams,
        ThreadInjectItemsParams,
        ThreadRevertParams,
        ThreadRevertResponse,
        ThreadUnsubscribeResponse,
        ThreadLoadedListParams,
        ThreadLoadedListResponse,
        ThreadTurnsListParams,
        ThreadTurnsListResponse,
        ThreadItemsListParams,
        ThreadItemsListResponse,
        PermissionProfileListParams,
        PermissionProfileListResponse,
        SkillsListParams,
        SkillsListResponse,
        SkillsConfigWriteParams,
        SkillsConfigWriteResponse,
        ModelProviderListResponse,
        ExperimentalFeatureListParams,
        ExperimentalFeatureListResponse,
        HooksListParams,
        HooksListResponse,
        ConfigRequirementsReadResponse,
        ThreadGoalGetResponse,
        ThreadGoalSetParams,
        ThreadGoalSetResponse,
        ThreadGoalClearParams,
        ThreadGoalClearResponse,
        ThreadGoalUpdatedNotification,
        ThreadBackgroundTerminalsListParams,
        ThreadBackgroundTerminalsListResponse,
        FsReadFileParams,
        FsReadFileResponse,
        FsWriteFileParams,
        FsWriteFileResponse,
        FsCreateDirectoryParams,
        FsCreateDirectoryResponse,
        FsGetMetadataParams,
        FsGetMetadataResponse,
        FsReadDirectoryParams,
        FsReadDirectoryResponse,
        FsRemoveParams,
        FsRemoveResponse,
        FsCopyParams,
        FsCopyResponse,
        FsWatchParams,
        FsWatchResponse,
        FsUnwatchParams,
        FsUnwatchResponse,
        FsChangedNotification,
        CommandExecParams,
        CommandExecResponse,
        CommandExecWriteParams,
        CommandExecTerminateParams,
        CommandExecResizeParams,
        CommandExecOutputDeltaNotification,
        ListMcpServerStatusParams,
        ListMcpServerStatusResponse,
        McpServerRefreshResponse,
        McpServerStatusUpdatedNotification,
        McpServerElicitationRequestParams,
        McpServerElicitationRequestResponse,
        ToolRequestUserInputParams,
        ToolRequestUserInputResponse,
        PermissionsRequestApprovalParams,
        PermissionsRequestApprovalResponse,
    );
    v1!(
        GetConversationSummaryParams,
        GetConversationSummaryResponse,
        GetAuthStatusParams,
        GetAuthStatusResponse,
        GitDiffToRemoteParams,
        GitDiffToRemoteResponse,
        FuzzyFileSearchParams,
        FuzzyFileSearchResponse,
        FuzzyFileSearchSessionStartParams,
        FuzzyFileSearchSessionUpdateParams,
        FuzzyFileSearchSessionStopParams,
        FuzzyFileSearchSessionUpdatedNotification,
        FuzzyFileSearchSessionCompletedNotification,
        ExecCommandApprovalParams,
        ApplyPatchApprovalParams,
        ReviewDecisionResponse,
    );
    let text = serde_json::to_string_pretty(&sorted(methods())).unwrap_or_default() + "\n";
    files.insert("methods.json".to_string(), text);
    files
}

/// `value` with every object's keys in sorted order. JSON maps keep insertion order in a
/// build where some crate turns on serde_json's `preserve_order` (the ACP SDK does), and
/// sort themselves otherwise: the schema files must read the same either way.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let entries: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Method → its params and result types (paths into this schema).
fn methods() -> Value {
    json!({
        "clientRequests": {
            "initialize": ["v2/InitializeParams", "v2/InitializeResponse"],
            "thread/start": ["v2/ThreadStartParams", "v2/ThreadStartResponse"],
            "thread/resume": ["v2/ThreadResumeParams", "v2/ThreadStartResponse"],
            "thread/fork": ["v2/ThreadForkParams", "v2/ThreadStartResponse"],
            "thread/read": ["v2/ThreadReadParams", "v2/ThreadReadResponse"],
            "thread/list": ["v2/ThreadListParams", "v2/ThreadListResponse"],
            "thread/archive": ["v2/ThreadIdParams", "v2/EmptyResponse"],
            "thread/unarchive": ["v2/ThreadIdParams", "v2/ThreadUnarchiveResponse"],
            "thread/name/set": ["v2/ThreadSetNameParams", "v2/EmptyResponse"],
            "thread/metadata/update": ["v2/ThreadMetadataUpdateParams", "v2/ThreadMetadataUpdateResponse"],
            "thread/shellCommand": ["v2/ThreadShellCommandParams", "v2/EmptyResponse"],
            "thread/inject_items": ["v2/ThreadInjectItemsParams", "v2/EmptyResponse"],
            "thread/revert": ["v2/ThreadRevertParams", "v2/ThreadRevertResponse"],
            "thread/compact/start": ["v2/ThreadIdParams", "v2/EmptyResponse"],
            "thread/unsubscribe": ["v2/ThreadIdParams", "v2/ThreadUnsubscribeResponse"],
            "thread/loaded/list": ["v2/ThreadLoadedListParams", "v2/ThreadLoadedListResponse"],
            "thread/delete": ["v2/ThreadIdParams", "v2/EmptyResponse"],
            "thread/turns/list": ["v2/ThreadTurnsListParams", "v2/ThreadTurnsListResponse"],
            "thread/items/list": ["v2/ThreadItemsListParams", "v2/ThreadItemsListResponse"],
            "permissionProfile/list": ["v2/PermissionProfileListParams", "v2/PermissionProfileListResponse"],
            "skills/list": ["v2/SkillsListParams", "v2/SkillsListResponse"],
            "skills/config/write": ["v2/SkillsConfigWriteParams", "v2/SkillsConfigWriteResponse"],
            "hooks/list": ["v2/HooksListParams", "v2/HooksListResponse"],
            "modelProvider/list": [null, "v2/ModelProviderListResponse"],
            "experimentalFeature/list": ["v2/ExperimentalFeatureListParams", "v2/ExperimentalFeatureListResponse"],
            "configRequirements/read": [null, "v2/ConfigRequirementsReadResponse"],
            "thread/goal/get": ["v2/ThreadIdParams", "v2/ThreadGoalGetResponse"],
            "thread/goal/set": ["v2/ThreadGoalSetParams", "v2/ThreadGoalSetResponse"],
            "thread/goal/clear": ["v2/ThreadGoalClearParams", "v2/ThreadGoalClearResponse"],
            "thread/backgroundTerminals/list": ["v2/ThreadBackgroundTerminalsListParams", "v2/ThreadBackgroundTerminalsListResponse"],
            "turn/start": ["v2/TurnStartParams", "v2/TurnStartResponse"],
            "turn/steer": ["v2/TurnSteerParams", "v2/TurnSteerResponse"],
            "turn/interrupt": ["v2/TurnInterruptParams", "v2/EmptyResponse"],
            "review/start": ["v2/ReviewStartParams", "v2/ReviewStartResponse"],
            "command/exec": ["v2/CommandExecParams", "v2/CommandExecResponse"],
            "command/exec/write": ["v2/CommandExecWriteParams", "v2/EmptyResponse"],
            "command/exec/terminate": ["v2/CommandExecTerminateParams", "v2/EmptyResponse"],
            "command/exec/resize": ["v2/CommandExecResizeParams", "v2/EmptyResponse"],
            "account/read": ["v2/AccountReadParams", "v2/AccountReadResponse"],
            "account/login/start": ["v2/LoginAccountParams", "v2/LoginAccountResponse"],
            "account/login/cancel": ["v2/CancelLoginAccountParams", "v2/CancelLoginAccountResponse"],
            "account/logout": [null, "v2/EmptyResponse"],
            "account/rateLimits/read": [null, "v2/GetAccountRateLimitsResponse"],
            "config/read": ["v2/ConfigReadParams", "v2/ConfigReadResponse"],
            "config/value/write": ["v2/ConfigValueWriteParams", "v2/ConfigWriteResponse"],
            "config/batchWrite": ["v2/ConfigBatchWriteParams", "v2/ConfigWriteResponse"],
            "model/list": ["v2/ModelListParams", "v2/ModelListResponse"],
            "collaborationMode/list": ["v2/CollaborationModeListParams", "v2/CollaborationModeListResponse"],
            "getConversationSummary": ["v1/GetConversationSummaryParams", "v1/GetConversationSummaryResponse"],
            "getAuthStatus": ["v1/GetAuthStatusParams", "v1/GetAuthStatusResponse"],
            "gitDiffToRemote": ["v1/GitDiffToRemoteParams", "v1/GitDiffToRemoteResponse"],
            "fuzzyFileSearch": ["v1/FuzzyFileSearchParams", "v1/FuzzyFileSearchResponse"],
            "fuzzyFileSearch/sessionStart": ["v1/FuzzyFileSearchSessionStartParams", "v2/EmptyResponse"],
            "fuzzyFileSearch/sessionUpdate": ["v1/FuzzyFileSearchSessionUpdateParams", "v2/EmptyResponse"],
            "fuzzyFileSearch/sessionStop": ["v1/FuzzyFileSearchSessionStopParams", "v2/EmptyResponse"],
            "fs/readFile": ["v2/FsReadFileParams", "v2/FsReadFileResponse"],
            "fs/writeFile": ["v2/FsWriteFileParams", "v2/FsWriteFileResponse"],
            "fs/createDirectory": ["v2/FsCreateDirectoryParams", "v2/FsCreateDirectoryResponse"],
            "fs/getMetadata": ["v2/FsGetMetadataParams", "v2/FsGetMetadataResponse"],
            "fs/readDirectory": ["v2/FsReadDirectoryParams", "v2/FsReadDirectoryResponse"],
            "fs/remove": ["v2/FsRemoveParams", "v2/FsRemoveResponse"],
            "fs/copy": ["v2/FsCopyParams", "v2/FsCopyResponse"],
            "fs/watch": ["v2/FsWatchParams", "v2/FsWatchResponse"],
            "fs/unwatch": ["v2/FsUnwatchParams", "v2/FsUnwatchResponse"],
            "mcpServerStatus/list": ["v2/ListMcpServerStatusParams", "v2/ListMcpServerStatusResponse"],
            "config/mcpServer/reload": [null, "v2/McpServerRefreshResponse"],
            "modelProvider/capabilities/read": ["v2/ModelProviderCapabilitiesReadParams", "v2/ModelProviderCapabilitiesReadResponse"],
            "modelProvider/default/set": ["v2/ModelProviderDefaultSetParams", "v2/ModelProviderListResponse"],
            "modelProvider/config/write": ["v2/ModelProviderConfigWriteParams", "v2/ModelProviderConfigWriteResponse"],
            "mcpServer/oauth/login": ["v2/McpServerOauthLoginParams", "v2/McpServerOauthLoginResponse"],
            "mcpServer/tool/call": ["v2/McpServerToolCallParams", "v2/McpServerToolCallResponse"],
            "mcpServer/resource/read": ["v2/McpResourceReadParams", "v2/McpResourceReadResponse"]
        },
        "serverNotifications": server_notifications(),
        "serverRequests": {
            "item/commandExecution/requestApproval": ["v2/CommandExecutionRequestApprovalParams", "v2/CommandExecutionRequestApprovalResponse"],
            "item/fileChange/requestApproval": ["v2/FileChangeRequestApprovalParams", "v2/FileChangeRequestApprovalResponse"],
            "execCommandApproval": ["v1/ExecCommandApprovalParams", "v1/ReviewDecisionResponse"],
            "applyPatchApproval": ["v1/ApplyPatchApprovalParams", "v1/ReviewDecisionResponse"],
            "mcpServer/elicitation/request": ["v2/McpServerElicitationRequestParams", "v2/McpServerElicitationRequestResponse"],
            "item/tool/requestUserInput": ["v2/ToolRequestUserInputParams", "v2/ToolRequestUserInputResponse"],
            "item/permissions/requestApproval": ["v2/PermissionsRequestApprovalParams", "v2/PermissionsRequestApprovalResponse"]
        }
    })
}

/// Every notification and its params' type, from the one table of names.
fn server_notifications() -> Value {
    Value::Object(
        notification_names::SERVER_NOTIFICATIONS
            .iter()
            .map(|(method, params)| ((*method).to_string(), json!(params)))
            .collect(),
    )
}

/// Write the schema under `out_dir` (created if needed).
pub fn write_schema(out_dir: &Path) -> std::io::Result<usize> {
    let files = schema_files();
    for (relative, text) in &files {
        let path = out_dir.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(files.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in copy under `crates/app-server/schema/` is what clients read; it must
    /// match the types. Regenerate with
    /// `interpreter app-server generate-json-schema crates/app-server/schema`.
    /// `methods.json` names exactly the methods the dispatch table serves.
    #[test]
    fn methods_json_names_every_served_method() {
        let listed: std::collections::BTreeSet<String> = methods()["clientRequests"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let served: std::collections::BTreeSet<String> = crate::processor::method_names()
            .map(str::to_string)
            .collect();
        assert_eq!(listed, served);
    }

    /// Every notification is sent by its name in the table, never spelled out where it
    /// is sent (a name typed twice drifts).
    #[test]
    fn notifications_are_sent_only_by_their_names_in_the_table() {
        use interpreter_test_support::module_graph::rust_files;

        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut spelled = Vec::new();
        for path in rust_files(&src, &[]).unwrap() {
            if path.ends_with("notification_names.rs") || path.ends_with("schema.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (method, _) in notification_names::SERVER_NOTIFICATIONS {
                // `error` and `warning` are words of JSON-RPC and config too.
                if matches!(*method, "error" | "warning") {
                    continue;
                }
                if code.contains(&format!("\"{method}\"")) {
                    spelled.push(format!("{}: {method}", path.display()));
                }
            }
        }
        assert!(
            spelled.is_empty(),
            "notification names spelled out: {spelled:?}"
        );
    }

    #[test]
    fn checked_in_schema_is_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
        let mut stale = Vec::new();
        for (relative, text) in schema_files() {
            let on_disk = std::fs::read_to_string(dir.join(&relative)).unwrap_or_default();
            if on_disk != text {
                stale.push(relative);
            }
        }
        assert!(
            stale.is_empty(),
            "schema files out of date (run `interpreter app-server generate-json-schema crates/app-server/schema`): {stale:?}"
        );
    }
}
