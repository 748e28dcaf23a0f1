//! Thread methods that change a thread after the fact: `thread/metadata/update`,
//! `thread/shellCommand`, `thread/inject_items`, `thread/revert`.

use std::collections::HashSet;
use std::sync::Arc;

use interpreter_core::CoreError;
use interpreter_core::revert::FileRevertReport;
use interpreter_core::store::ThreadGitInfo;
use interpreter_protocol::{Op, ResponseItem};

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2::{self, ThreadStatus};
use crate::state::{Reply, ServerState, parse_thread_id};

/// `thread/metadata/update`: patches the thread's stored git metadata (absent field =
/// unchanged, `null` = cleared, string = replaced) and answers with the thread.
pub(crate) async fn metadata_update(
    state: &Arc<ServerState>,
    params: v2::ThreadMetadataUpdateParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let Some(patch) = params.git_info else {
        return Err(AppServerError::InvalidRequest(
            "gitInfo must be provided".into(),
        ));
    };
    let record = state.required_record(thread_id).await?;
    let mut info = record.git_info.clone().unwrap_or_default();
    apply_field(&mut info.branch, patch.branch, "branch")?;
    apply_field(&mut info.sha, patch.sha, "sha")?;
    apply_field(&mut info.origin_url, patch.origin_url, "originUrl")?;
    let stored: Option<ThreadGitInfo> = (!info.is_empty()).then_some(info);
    let known = state.store().await?.set_git_info(thread_id, stored).await?;
    if !known {
        return Err(AppServerError::ThreadNotFound(thread_id.to_string()));
    }
    let thread = match state.loaded(thread_id) {
        Some(loaded) => state.thread_object(&loaded).await?,
        None => {
            let record = state.required_record(thread_id).await?;
            mapping::thread_from_record(&record, ThreadStatus::NotLoaded)
        }
    };
    Reply::new(&v2::ThreadMetadataUpdateResponse { thread })
}

/// Applies one field of the patch. An empty string is refused rather than stored: the
/// schema asks for a non-empty one, and `null` is how a field is cleared.
fn apply_field(
    stored: &mut Option<String>,
    patch: Option<Option<String>>,
    name: &str,
) -> Result<(), AppServerError> {
    match patch {
        None => {}
        Some(None) => *stored = None,
        Some(Some(value)) => {
            let value = value.trim();
            if value.is_empty() {
                return Err(AppServerError::InvalidRequest(format!(
                    "gitInfo.{name} must not be empty (use null to clear it)"
                )));
            }
            *stored = Some(value.to_string());
        }
    }
    Ok(())
}

/// `thread/shellCommand`: runs the user's shell command string in the thread's working
/// directory as a turn of its own (`turn/started`, a `commandExecution` item with
/// `source: "userShell"`, `turn/completed`); the model sees the command and its output
/// in later turns. Refused (`-32600`) while a turn runs rather than queued: the client
/// knows at once that nothing ran, and nothing runs later that it no longer expects.
pub(crate) async fn shell_command(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadShellCommandParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    if params.command.trim().is_empty() {
        return Err(AppServerError::InvalidRequest(
            "command must not be empty".into(),
        ));
    }
    let timeout_ms =
        match params.timeout_ms {
            None => None,
            Some(ms) => Some(u64::try_from(ms).map_err(|_| {
                AppServerError::InvalidParams("timeoutMs must not be negative".into())
            })?),
        };
    let loaded = state
        .load_idle(thread_id, connection, "run the command")
        .await?;
    let op = Op::RunUserShellCommand {
        command: params.command,
        timeout_ms,
    };
    let (_turn_id, release) =
        crate::turns::run_turn(state, connection, loaded, op, None, None).await?;
    Ok(Reply::new(&v2::EmptyResponse {})?.then(release))
}

/// `thread/revert`: drops turn `beforeTurnId` and every later turn from the thread's
/// durable history (the engine records it; see `interpreter_core::revert`), answers with
/// the thread (no turns) and the cursors to read what is left backwards, and tells the
/// thread's followers with `thread/reverted`. With `revertFiles` (ours), the dropped
/// turns' patches are also undone where that can be done cleanly, and `fileRevert` says
/// what was restored and skipped. Refused (`-32600`, nothing changed) while a turn runs,
/// for a turn the thread does not have, and for an ephemeral thread.
pub(crate) async fn revert(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadRevertParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    // A turn that ended for the client may still be finishing in the engine, which
    // waits for it; one that is running is refused.
    let loaded = state.load_idle(thread_id, connection, "revert").await?;
    let before_turn_id = params.before_turn_id;
    let outcome = loaded
        .thread
        .revert(&before_turn_id, params.revert_files.unwrap_or(false))
        .await
        .map_err(|err| match err {
            CoreError::ThreadBusy(_) => {
                AppServerError::InvalidRequest("a turn is running; revert after it ends".into())
            }
            CoreError::TurnNotFound { .. } => AppServerError::InvalidRequest(format!(
                "turn not found: {before_turn_id} is not a turn of thread {thread_id}"
            )),
            CoreError::ThreadNotPersisted(_) => AppServerError::InvalidRequest(format!(
                "thread {thread_id} is ephemeral: it has no durable history to revert"
            )),
            other => other.into(),
        })?;
    let mut thread = state.thread_object(&loaded).await?;
    thread.turns = Vec::new();
    let turns = state.recorded_turns(&loaded.thread).await?;
    let has_items = turns.iter().any(|turn| !turn.items.is_empty());
    // Offsets from the newest end, the cursors `thread/turns/list` and
    // `thread/items/list` take in descending order.
    let newest_first = |any: bool| any.then(|| "0".to_string());
    let response = v2::ThreadRevertResponse {
        thread,
        items_backwards_cursor: newest_first(has_items),
        turns_backwards_cursor: newest_first(!turns.is_empty()),
        file_revert: outcome.files.map(file_revert),
    };
    let notification = v2::ThreadIdNotification {
        thread_id: thread_id.to_string(),
    };
    let notify_to = crate::threads::followers_and(Some(loaded), connection);
    Ok(Reply::new(&response)?.then(move || {
        for connection in notify_to {
            connection.notify(notification_names::THREAD_REVERTED, &notification);
        }
    }))
}

fn file_revert(report: FileRevertReport) -> v2::FileRevert {
    v2::FileRevert {
        restored: report
            .restored
            .iter()
            .map(|path| path.to_string_lossy().into_owned())
            .collect(),
        skipped: report
            .skipped
            .into_iter()
            .map(|skipped| v2::FileRevertSkipped {
                path: skipped.path.to_string_lossy().into_owned(),
                reason: skipped.reason,
            })
            .collect(),
    }
}

/// Most bytes (as JSON) one `thread/inject_items` may add to the history: every item is
/// sent to the model on every later request, so an unbounded one would make the thread
/// unusable.
pub(crate) const MAX_INJECT_BYTES: usize = 1024 * 1024;

/// `thread/inject_items`: appends Responses API items to the model-visible history (and
/// the rollout, so a resume keeps them) without a turn. Every item must parse as one of
/// the item kinds the engine keeps (`message`, `reasoning`, `function_call`,
/// `function_call_output`); the first that does not is named (`-32602`). Refused while
/// a turn runs (`-32600`).
pub(crate) async fn inject_items(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadInjectItemsParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let items = parse_items(params.items)?;
    let loaded = state
        .load_idle(thread_id, connection, "inject items")
        .await?;
    if loaded.thread.is_busy() {
        return Err(AppServerError::InvalidRequest(
            "a turn is running; inject items after it ends".into(),
        ));
    }
    loaded.thread.submit(Op::InjectItems { items }).await?;
    Reply::new(&v2::EmptyResponse {})
}

/// The items as the engine keeps them, or the first problem, naming the item's index.
fn parse_items(raw: Vec<serde_json::Value>) -> Result<Vec<ResponseItem>, AppServerError> {
    if raw.is_empty() {
        return Err(AppServerError::InvalidParams(
            "items must not be empty".into(),
        ));
    }
    let mut total = 0usize;
    let mut items = Vec::with_capacity(raw.len());
    for (index, value) in raw.into_iter().enumerate() {
        total = total.saturating_add(value.to_string().len());
        if total > MAX_INJECT_BYTES {
            return Err(AppServerError::InvalidParams(format!(
                "items exceed the cap of {MAX_INJECT_BYTES} bytes (as JSON) at items[{index}]"
            )));
        }
        let item: ResponseItem = serde_json::from_value(value).map_err(|e| {
            AppServerError::InvalidParams(format!("items[{index}] is not a supported item: {e}"))
        })?;
        items.push(item);
    }
    // The history's invariant: every tool call has exactly one output and every output
    // answers a call. Half a pair would make every later request fail at the provider.
    let mut open: HashSet<String> = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        match item {
            ResponseItem::FunctionCall { call_id, .. } => {
                if !open.insert(call_id.clone()) {
                    return Err(AppServerError::InvalidParams(format!(
                        "items[{index}]: call_id `{call_id}` is used twice"
                    )));
                }
            }
            ResponseItem::FunctionCallOutput { call_id, .. } => {
                if !open.remove(call_id) {
                    return Err(AppServerError::InvalidParams(format!(
                        "items[{index}]: output for `{call_id}` answers no function_call before it in items"
                    )));
                }
            }
            ResponseItem::Message { .. } | ResponseItem::Reasoning { .. } => {}
        }
    }
    if let Some(call_id) = open.into_iter().next() {
        return Err(AppServerError::InvalidParams(format!(
            "function_call `{call_id}` has no function_call_output in items"
        )));
    }
    Ok(items)
}
