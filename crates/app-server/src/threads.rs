//! The `thread/*` methods: start, resume, fork, read, list, archive.

use std::path::PathBuf;
use std::sync::Arc;

use interpreter_core::rollout::{ListDirection, ListQuery, ListSortKey};

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::v2::{self, ThreadStatus};
use crate::state::{Reply, ServerState, normalize_dir, parse_thread_id, read_turns};

pub(crate) async fn start(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadStartParams,
) -> Result<Reply, AppServerError> {
    let mut settings = params.settings;
    let ephemeral = params.ephemeral.unwrap_or(false);
    let config = state.session_config(&mut settings, ephemeral, None).await?;
    let new = state
        .thread_manager
        .start_thread(config, state.session_source)
        .await?;
    let loaded = state.register(new.thread, ephemeral, None);
    loaded.subscribe(connection);
    let response = state.start_response(&loaded, Vec::new()).await?;
    let thread = response.thread.clone();
    let notify_to = connection.clone();
    Ok(Reply::new(&response)?.then(move || {
        notify_to.notify("thread/started", &v2::ThreadStartedNotification { thread });
    }))
}

pub(crate) async fn resume(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadResumeParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let loaded = match state.loaded(thread_id) {
        Some(loaded) => loaded,
        None => {
            let record = state.record(thread_id).await?;
            let mut settings = params.settings;
            let config = state
                .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
                .await?;
            let resumed = match state.thread_manager.resume_thread(config, thread_id).await {
                Ok(resumed) => resumed.thread,
                // Another front end in this process has it live (MCP connection).
                Err(interpreter_core::CoreError::ThreadAlreadyLive(_)) => state
                    .thread_manager
                    .get_thread(thread_id)
                    .await
                    .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?,
                Err(e) => return Err(e.into()),
            };
            state.register(resumed, false, None)
        }
    };
    loaded.subscribe(connection);
    let turns = state.recorded_turns(&loaded.thread).await?;
    let response = state.start_response(&loaded, turns).await?;
    Reply::new(&response)
}

pub(crate) async fn fork(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadForkParams,
) -> Result<Reply, AppServerError> {
    let source = parse_thread_id(&params.thread_id)?;
    if let Some(last) = &params.last_turn_id
        && let Some(loaded) = state.loaded(source)
        && loaded.active_turn().is_some_and(|t| &t.turn_id == last)
    {
        return Err(AppServerError::InvalidRequest(format!(
            "cannot fork at turn `{last}`: it is still in progress"
        )));
    }
    let record = state.record(source).await?;
    let mut settings = params.settings;
    let config = state
        .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
        .await?;
    let new = state
        .thread_manager
        .fork_thread(config, source, params.last_turn_id, state.session_source)
        .await?;
    let loaded = state.register(new.thread, false, Some(source));
    loaded.subscribe(connection);
    let turns = state.recorded_turns(&loaded.thread).await?;
    let response = state.start_response(&loaded, turns).await?;
    let mut thread = response.thread.clone();
    thread.turns = Vec::new();
    let notify_to = connection.clone();
    Ok(Reply::new(&response)?.then(move || {
        notify_to.notify("thread/started", &v2::ThreadStartedNotification { thread });
    }))
}

pub(crate) async fn read(
    state: &Arc<ServerState>,
    params: v2::ThreadReadParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let mut thread = match state.loaded(thread_id) {
        Some(loaded) => state.thread_object(&loaded).await?,
        None => {
            let record = state
                .record(thread_id)
                .await?
                .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?;
            mapping::thread_from_record(&record, ThreadStatus::NotLoaded)
        }
    };
    if params.include_turns
        && let Some(path) = &thread.path
    {
        thread.turns = read_turns(PathBuf::from(path)).await?;
    }
    Reply::new(&v2::ThreadReadResponse { thread })
}

pub(crate) async fn list(
    state: &Arc<ServerState>,
    params: v2::ThreadListParams,
) -> Result<Reply, AppServerError> {
    let limit = params.limit.unwrap_or(25).clamp(1, 100) as usize;
    let direction = match params.sort_direction {
        Some(v2::SortDirection::Asc) => ListDirection::Asc,
        _ => ListDirection::Desc,
    };
    let cwds = match params.cwd {
        None => Vec::new(),
        Some(v2::CwdFilter::One(one)) => vec![one],
        Some(v2::CwdFilter::Many(many)) => many,
    };
    let query = ListQuery {
        limit,
        cursor: params.cursor,
        sort_key: match params.sort_key {
            Some(v2::ThreadSortKey::UpdatedAt) => ListSortKey::UpdatedAt,
            _ => ListSortKey::CreatedAt,
        },
        direction,
        archived: params.archived.unwrap_or(false),
        cwds: cwds
            .iter()
            .map(|cwd| normalize_dir(&state.inputs.cwd, cwd))
            .collect(),
        sources: params
            .source_kinds
            .unwrap_or_default()
            .into_iter()
            .map(mapping::source_kind)
            .collect(),
        model_providers: params.model_providers.unwrap_or_default(),
        search_term: params.search_term,
        require_preview: true,
    };
    let page = state
        .with_index(move |index| index.list_page(&query))
        .await?;
    let data = page
        .records
        .iter()
        .map(|record| {
            let status = state
                .loaded(record.id)
                .map_or(ThreadStatus::NotLoaded, |l| l.status());
            mapping::thread_from_record(record, status)
        })
        .collect();
    Reply::new(&v2::ThreadListResponse {
        data,
        next_cursor: page.next_cursor,
        backwards_cursor: page.backwards_cursor,
    })
}

pub(crate) async fn archive(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadIdParams,
    archived: bool,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    // Make sure the index knows the thread (a rollout it has not seen yet).
    let record = state
        .record(thread_id)
        .await?
        .ok_or_else(|| AppServerError::ThreadNotFound(thread_id.to_string()))?;
    state
        .with_index(move |index| index.set_archived(thread_id, archived))
        .await?;
    let notification = v2::ThreadIdNotification {
        thread_id: thread_id.to_string(),
    };
    let notify_to = connection.clone();
    let method = if archived {
        "thread/archived"
    } else {
        "thread/unarchived"
    };
    let reply = if archived {
        Reply::new(&v2::EmptyResponse {})?
    } else {
        Reply::new(&v2::ThreadUnarchiveResponse {
            thread: mapping::thread_from_record(&record, ThreadStatus::NotLoaded),
        })?
    };
    Ok(reply.then(move || notify_to.notify(method, &notification)))
}
