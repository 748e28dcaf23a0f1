//! Thread methods that change a thread after the fact: `thread/metadata/update`,
//! `thread/shellCommand`.

use std::sync::Arc;

use interpreter_core::rollout::ThreadGitInfo;
use interpreter_protocol::Op;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
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
    let known = state
        .with_index(move |index| index.set_git_info(thread_id, stored.as_ref()))
        .await?;
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
    let loaded = state.load_for_turn(thread_id).await?;
    loaded.subscribe(connection);
    if loaded.active_turn().is_some() {
        return Err(AppServerError::InvalidRequest(
            "a turn is running; run the command after it ends".into(),
        ));
    }
    let op = Op::RunUserShellCommand {
        command: params.command,
        timeout_ms,
    };
    let (_turn_id, release) = crate::turns::run_turn(state, connection, loaded, op, None).await?;
    Ok(Reply::new(&v2::EmptyResponse {})?.then(release))
}
