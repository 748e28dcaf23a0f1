//! Thread methods that change a thread after the fact: `thread/metadata/update`.

use std::sync::Arc;

use interpreter_core::rollout::ThreadGitInfo;

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
