//! v1 helper methods old clients still call: `getConversationSummary`,
//! `getAuthStatus`, `gitDiffToRemote`, and `fuzzyFileSearch` with its sessions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use interpreter_core::store::{self, RolloutItem};
use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Matcher, Utf32Str};
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v1;
use crate::protocol::v2::EmptyResponse;
use crate::state::{Reply, ServerState, parse_thread_id};

/// Results returned by one fuzzy search.
const FUZZY_MAX_RESULTS: usize = 50;
/// Files looked at per root, so a search under `/` stays bounded.
const FUZZY_MAX_FILES: usize = 50_000;
/// Deadline of each git command of `gitDiffToRemote`.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// `getConversationSummary`, by thread id or by rollout path. A path is only ever read
/// for the thread id in its file name (`rollout-…-<id>.jsonl`), and the thread is then
/// read from the store: the client names a thread, never a file to open, so any store
/// can answer and no path outside the store is read.
pub(crate) async fn conversation_summary(
    state: &ServerState,
    params: v1::GetConversationSummaryParams,
) -> Result<Reply, AppServerError> {
    let (id, named) = match params {
        v1::GetConversationSummaryParams::RolloutPath { rollout_path } => {
            let id =
                store::local::thread_id_of_rollout(Path::new(&rollout_path)).ok_or_else(|| {
                    AppServerError::InvalidRequest(format!(
                        "{rollout_path} is not a rollout file name (rollout-…-<thread id>.jsonl)"
                    ))
                })?;
            (id, rollout_path)
        }
        v1::GetConversationSummaryParams::ThreadId { conversation_id } => {
            (parse_thread_id(&conversation_id)?, conversation_id)
        }
    };
    let store = state.store().await?;
    let (Some(record), Some(read)) = (store.get(id).await?, store.read(id).await?) else {
        return Err(AppServerError::ThreadNotFound(named));
    };
    let items = read.items;
    let Some(RolloutItem::SessionMeta(meta)) = items.first() else {
        return Err(AppServerError::InvalidRequest(format!(
            "thread {id} has no session metadata"
        )));
    };
    let preview = items
        .iter()
        .find_map(|item| match item {
            RolloutItem::EventMsg(interpreter_protocol::EventMsg::UserMessage(m)) => {
                Some(m.message.clone())
            }
            _ => None,
        })
        .unwrap_or_default();
    Reply::new(&v1::GetConversationSummaryResponse {
        summary: v1::ConversationSummary {
            conversation_id: meta.id.to_string(),
            path: record
                .rollout_path
                .as_ref()
                .map(|path| path.to_string_lossy().into_owned())
                .unwrap_or_default(),
            preview,
            timestamp: Some(meta.timestamp.to_rfc3339()),
            updated_at: Some(record.updated_at.to_rfc3339()),
            model_provider: meta.model_provider.clone().unwrap_or_default(),
            cwd: meta.cwd.to_string_lossy().into_owned(),
            cli_version: meta.cli_version.clone(),
            source: mapping::core_source_name(meta.source),
            git_info: None,
        },
    })
}

pub(crate) async fn auth_status(
    state: &ServerState,
    params: v1::GetAuthStatusParams,
) -> Result<Reply, AppServerError> {
    let key = crate::accounts::current_key(state).await?;
    Reply::new(&v1::GetAuthStatusResponse {
        auth_method: key.as_ref().map(|_| "apikey".to_string()),
        auth_token: key.filter(|_| params.include_token == Some(true)),
        requires_openai_auth: Some(false),
    })
}

/// Git through the one hardened runner: the repository may be one the model planted.
async fn git(cwd: &Path, args: &[&str]) -> Result<String, AppServerError> {
    interpreter_tools::git::run(cwd, args, GIT_TIMEOUT)
        .await
        .map_err(|error| match error {
            interpreter_tools::git::GitError::Failed { .. }
            | interpreter_tools::git::GitError::Refused { .. } => {
                AppServerError::InvalidRequest(error.to_string())
            }
            _ => AppServerError::Internal(error.to_string()),
        })
}

/// The commit the branch shares with its remote, and the diff of the working tree
/// against it (what a reviewer of a push would see, plus uncommitted changes).
pub(crate) async fn git_diff_to_remote(
    params: v1::GitDiffToRemoteParams,
) -> Result<Reply, AppServerError> {
    let cwd = PathBuf::from(&params.cwd);
    let base = match git(&cwd, &["merge-base", "HEAD", "@{upstream}"]).await {
        Ok(sha) => sha,
        // No upstream: the newest commit any remote branch has in common with HEAD.
        Err(_) => match git(&cwd, &["merge-base", "HEAD", "--remotes"]).await {
            Ok(sha) if !sha.trim().is_empty() => sha,
            _ => git(&cwd, &["rev-parse", "HEAD"]).await?,
        },
    };
    let sha = base.trim().to_string();
    let diff = git(&cwd, &["diff", "--no-color", "--binary", &sha]).await?;
    Reply::new(&v1::GitDiffToRemoteResponse { sha, diff })
}

/// Walk `roots` (respecting .gitignore), score every path against `query` with a fuzzy
/// matcher, best first.
fn search(
    query: &str,
    roots: &[String],
    cancel: &CancellationToken,
) -> Vec<v1::FuzzyFileSearchResult> {
    let mut matcher = Matcher::new(nucleo_matcher::Config::DEFAULT.match_paths());
    let pattern = Pattern::parse(query, CaseMatching::Smart, Normalization::Smart);
    let mut results = Vec::new();
    let mut buf = Vec::new();
    for root in roots {
        let walk = ignore::WalkBuilder::new(root)
            .hidden(false)
            .filter_entry(|entry| entry.file_name() != ".git")
            .build();
        for entry in walk.take(FUZZY_MAX_FILES) {
            if cancel.is_cancelled() {
                return Vec::new();
            }
            let Ok(entry) = entry else { continue };
            let Ok(relative) = entry.path().strip_prefix(root) else {
                continue;
            };
            let relative = relative.to_string_lossy();
            if relative.is_empty() {
                continue;
            }
            let mut indices = Vec::new();
            let Some(score) = pattern.indices(
                Utf32Str::new(&relative, &mut buf),
                &mut matcher,
                &mut indices,
            ) else {
                continue;
            };
            indices.sort_unstable();
            indices.dedup();
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            results.push(v1::FuzzyFileSearchResult {
                root: root.clone(),
                path: relative.to_string(),
                match_type: if is_dir {
                    v1::FuzzyMatchType::Directory
                } else {
                    v1::FuzzyMatchType::File
                },
                file_name: entry.file_name().to_string_lossy().into_owned(),
                score,
                indices: Some(indices),
            });
        }
    }
    results.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.path.cmp(&b.path)));
    results.truncate(FUZZY_MAX_RESULTS);
    results
}

async fn search_blocking(
    query: String,
    roots: Vec<String>,
    cancel: CancellationToken,
) -> Result<Vec<v1::FuzzyFileSearchResult>, AppServerError> {
    tokio::task::spawn_blocking(move || search(&query, &roots, &cancel))
        .await
        .map_err(|e| AppServerError::Internal(e.to_string()))
}

/// Running searches by cancellation token, and search sessions by (connection, id).
#[derive(Default)]
pub(crate) struct FuzzySessions {
    by_token: std::sync::Mutex<HashMap<String, CancellationToken>>,
    sessions: std::sync::Mutex<HashMap<(u64, String), FuzzySession>>,
}

struct FuzzySession {
    roots: Vec<String>,
    running: Option<CancellationToken>,
}

impl FuzzySessions {
    pub(crate) fn stop_connection(&self, connection: u64) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.retain(|(owner, _), session| {
                if *owner == connection
                    && let Some(running) = &session.running
                {
                    running.cancel();
                }
                *owner != connection
            });
        }
    }
}

pub(crate) async fn fuzzy_file_search(
    fuzzy: &FuzzySessions,
    params: v1::FuzzyFileSearchParams,
) -> Result<Reply, AppServerError> {
    let cancel = CancellationToken::new();
    if let Some(token) = &params.cancellation_token
        && let Ok(mut running) = fuzzy.by_token.lock()
        && let Some(older) = running.insert(token.clone(), cancel.clone())
    {
        older.cancel();
    }
    let files = search_blocking(params.query, params.roots, cancel).await?;
    if let Some(token) = &params.cancellation_token
        && let Ok(mut running) = fuzzy.by_token.lock()
    {
        running.remove(token);
    }
    Reply::new(&v1::FuzzyFileSearchResponse { files })
}

pub(crate) fn session_start(
    fuzzy: &FuzzySessions,
    connection: &Arc<Connection>,
    params: v1::FuzzyFileSearchSessionStartParams,
) -> Result<Reply, AppServerError> {
    if let Ok(mut sessions) = fuzzy.sessions.lock() {
        sessions.insert(
            (connection.id, params.session_id),
            FuzzySession {
                roots: params.roots,
                running: None,
            },
        );
    }
    Reply::new(&EmptyResponse {})
}

/// Answers at once; the results follow as `fuzzyFileSearch/sessionUpdated` and then
/// `fuzzyFileSearch/sessionCompleted`. A newer update cancels the running one.
pub(crate) fn session_update(
    fuzzy: &FuzzySessions,
    connection: &Arc<Connection>,
    params: v1::FuzzyFileSearchSessionUpdateParams,
) -> Result<Reply, AppServerError> {
    let cancel = connection.closed.child_token();
    let roots = {
        let mut sessions = fuzzy
            .sessions
            .lock()
            .map_err(|_| AppServerError::Internal("fuzzy sessions lock poisoned".into()))?;
        let session = sessions
            .get_mut(&(connection.id, params.session_id.clone()))
            .ok_or_else(|| {
                AppServerError::InvalidRequest(format!(
                    "no fuzzy search session {}",
                    params.session_id
                ))
            })?;
        if let Some(older) = session.running.replace(cancel.clone()) {
            older.cancel();
        }
        session.roots.clone()
    };
    let connection = connection.clone();
    Ok(Reply::new(&EmptyResponse {})?.then(move || {
        tokio::spawn(async move {
            let Ok(files) = search_blocking(params.query.clone(), roots, cancel.clone()).await
            else {
                return;
            };
            if cancel.is_cancelled() {
                return;
            }
            connection.notify(
                notification_names::FUZZY_FILE_SEARCH_SESSION_UPDATED,
                &v1::FuzzyFileSearchSessionUpdatedNotification {
                    session_id: params.session_id.clone(),
                    query: params.query,
                    files,
                },
            );
            connection.notify(
                notification_names::FUZZY_FILE_SEARCH_SESSION_COMPLETED,
                &v1::FuzzyFileSearchSessionCompletedNotification {
                    session_id: params.session_id,
                },
            );
        });
    }))
}

pub(crate) fn session_stop(
    fuzzy: &FuzzySessions,
    connection: &Arc<Connection>,
    params: v1::FuzzyFileSearchSessionStopParams,
) -> Result<Reply, AppServerError> {
    if let Ok(mut sessions) = fuzzy.sessions.lock()
        && let Some(session) = sessions.remove(&(connection.id, params.session_id))
        && let Some(running) = session.running
    {
        running.cancel();
    }
    Reply::new(&EmptyResponse {})
}
