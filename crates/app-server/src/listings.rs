//! Listings clients show in their pickers that have nothing to do with one thread: the
//! permission profiles (our sandbox presets), and what this agent does
//! not have (skills, hooks, feature flags, managed requirements), answered honestly
//! empty.

use std::sync::Arc;

use crate::error::AppServerError;
use crate::protocol::v2;
use crate::state::{Reply, ServerState, offset_page};

/// The sandbox presets under Codex's profile ids, so clients that map those ids to their
/// modes (codex-acp) find them.
const PERMISSION_PROFILES: &[(&str, &str)] = &[
    (
        ":read-only",
        "Read files; every write and network use is asked for",
    ),
    (
        ":workspace",
        "Read files, and write inside the project and its writable roots",
    ),
    (
        ":danger-full-access",
        "No sandbox: commands run with the agent's own rights",
    ),
];

pub(crate) fn permission_profiles(
    params: v2::PermissionProfileListParams,
) -> Result<Reply, AppServerError> {
    let all: Vec<v2::PermissionProfileSummary> = PERMISSION_PROFILES
        .iter()
        .map(|(id, description)| v2::PermissionProfileSummary {
            id: (*id).to_string(),
            description: Some((*description).to_string()),
            allowed: true,
        })
        .collect();
    let (data, next_cursor) = offset_page(&all, params.cursor.as_deref(), params.limit)?;
    Reply::new(&v2::PermissionProfileListResponse { data, next_cursor })
}

/// An honest empty list per directory: this agent has no skills (its instructions come
/// from AGENTS.md files, which `thread/start` reports).
pub(crate) fn skills(
    state: &Arc<ServerState>,
    params: v2::SkillsListParams,
) -> Result<Reply, AppServerError> {
    let cwds = if params.cwds.is_empty() {
        vec![state.inputs.cwd.to_string_lossy().into_owned()]
    } else {
        params.cwds
    };
    Reply::new(&v2::SkillsListResponse {
        data: cwds
            .into_iter()
            .map(|cwd| v2::SkillsListEntry {
                cwd,
                skills: Vec::new(),
                errors: Vec::new(),
            })
            .collect(),
    })
}

pub(crate) fn experimental_features() -> Result<Reply, AppServerError> {
    Reply::new(&v2::ExperimentalFeatureListResponse {
        data: Vec::new(),
        next_cursor: None,
    })
}

pub(crate) fn hooks(
    state: &Arc<ServerState>,
    params: v2::HooksListParams,
) -> Result<Reply, AppServerError> {
    let cwds = if params.cwds.is_empty() {
        vec![state.inputs.cwd.to_string_lossy().into_owned()]
    } else {
        params.cwds
    };
    Reply::new(&v2::HooksListResponse {
        data: cwds
            .into_iter()
            .map(|cwd| v2::HooksListEntry {
                cwd,
                hooks: Vec::new(),
                errors: Vec::new(),
                warnings: Vec::new(),
            })
            .collect(),
    })
}

pub(crate) fn config_requirements() -> Result<Reply, AppServerError> {
    Reply::new(&v2::ConfigRequirementsReadResponse { requirements: None })
}
