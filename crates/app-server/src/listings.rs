//! Listings clients show in their pickers that have nothing to do with one thread: the
//! permission profiles (our sandbox presets), the skills and hooks of a directory (the
//! engine's discovery), and what this agent does not have (feature flags, managed
//! requirements), answered honestly empty.

use std::sync::Arc;

use interpreter_core::hooks::{HookSet, HookSources};
use interpreter_core::skills::{self, SkillScope, SkillSources, Skills};

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

/// The skills of each directory (the engine's discovery, with the user config's
/// settings for that directory).
pub(crate) async fn skills(
    state: &Arc<ServerState>,
    params: v2::SkillsListParams,
) -> Result<Reply, AppServerError> {
    let cwds = if params.cwds.is_empty() {
        vec![state.inputs.cwd.to_string_lossy().into_owned()]
    } else {
        params.cwds
    };
    let mut data = Vec::with_capacity(cwds.len());
    for cwd in cwds {
        let found = skills_of(state, &cwd).await?;
        data.push(v2::SkillsListEntry {
            cwd,
            skills: found
                .skills
                .iter()
                .map(|skill| v2::SkillMetadata {
                    name: skill.name.clone(),
                    description: skill.description.clone(),
                    short_description: skill.short_description.clone(),
                    path: skill.path.to_string_lossy().into_owned(),
                    scope: match skill.scope {
                        SkillScope::Repo => v2::SkillScope::Repo,
                        SkillScope::User => v2::SkillScope::User,
                    },
                    enabled: skill.enabled,
                })
                .collect(),
            errors: found
                .problems
                .iter()
                .map(|problem| v2::SkillErrorInfo {
                    path: problem.path.to_string_lossy().into_owned(),
                    message: problem.message.clone(),
                })
                .collect(),
        });
    }
    Reply::new(&v2::SkillsListResponse { data })
}

/// `skills/config/write`: one skill on or off in the user config, chosen by path or by
/// name (among the server's working directory's skills).
pub(crate) async fn skills_config_write(
    state: &Arc<ServerState>,
    params: v2::SkillsConfigWriteParams,
) -> Result<Reply, AppServerError> {
    let cwd = state.inputs.cwd.to_string_lossy().into_owned();
    let found = skills_of(state, &cwd).await?;
    let skill = match (&params.path, &params.name) {
        (Some(path), None) => found
            .skills
            .iter()
            .find(|skill| skill.path == std::path::Path::new(path))
            .or_else(|| {
                let resolved = std::fs::canonicalize(path).ok()?;
                found.skills.iter().find(|skill| skill.path == resolved)
            }),
        (None, Some(name)) => found.skills.iter().find(|skill| &skill.name == name),
        _ => {
            return Err(AppServerError::InvalidParams(
                "name exactly one of `path` or `name`".into(),
            ));
        }
    }
    .ok_or_else(|| {
        AppServerError::InvalidParams(format!(
            "no skill {} among those of {cwd}",
            params
                .path
                .as_deref()
                .or(params.name.as_deref())
                .unwrap_or_default()
        ))
    })?;
    let path = skill.path.clone();
    let inputs = state.inputs.clone();
    let enabled = params.enabled;
    tokio::task::spawn_blocking(move || skills::write_enabled(&inputs, &path, enabled))
        .await
        .map_err(|e| AppServerError::Internal(e.to_string()))??;
    let after = skills_of(state, &cwd).await?;
    let effective_enabled = after
        .skills
        .iter()
        .find(|found| found.path == skill.path)
        .is_some_and(|found| found.enabled);
    Reply::new(&v2::SkillsConfigWriteResponse { effective_enabled })
}

async fn skills_of(state: &Arc<ServerState>, cwd: &str) -> Result<Skills, AppServerError> {
    discover_for(state, cwd, |config| {
        Skills::discover(&config.cwd, &SkillSources::of(config))
    })
    .await
}

/// What the engine finds for a thread started in `cwd` (the server's config with that
/// cwd), read off the blocking pool.
async fn discover_for<T: Send + 'static>(
    state: &Arc<ServerState>,
    cwd: &str,
    discover: impl FnOnce(&interpreter_core::config::Config) -> T + Send + 'static,
) -> Result<T, AppServerError> {
    let mut inputs = state.inputs.clone();
    inputs.overrides.cwd = Some(cwd.into());
    tokio::task::spawn_blocking(move || {
        let config = interpreter_core::config::load_config(inputs)?;
        Ok::<_, AppServerError>(discover(&config))
    })
    .await
    .map_err(|e| AppServerError::Internal(e.to_string()))?
}

pub(crate) fn experimental_features() -> Result<Reply, AppServerError> {
    Reply::new(&v2::ExperimentalFeatureListResponse {
        data: Vec::new(),
        next_cursor: None,
    })
}

/// The hooks of each directory (every configured one, with its trust status), as the
/// engine finds them for a thread started there.
pub(crate) async fn hooks(
    state: &Arc<ServerState>,
    params: v2::HooksListParams,
) -> Result<Reply, AppServerError> {
    let cwds = if params.cwds.is_empty() {
        vec![state.inputs.cwd.to_string_lossy().into_owned()]
    } else {
        params.cwds
    };
    let mut data = Vec::with_capacity(cwds.len());
    for cwd in cwds {
        let set = discover_for(state, &cwd, |config| {
            HookSet::discover(&config.cwd, &HookSources::of(config))
        })
        .await?;
        data.push(crate::hooks::list_entry(cwd, &set));
    }
    Reply::new(&v2::HooksListResponse { data })
}

pub(crate) fn config_requirements() -> Result<Reply, AppServerError> {
    Reply::new(&v2::ConfigRequirementsReadResponse { requirements: None })
}
