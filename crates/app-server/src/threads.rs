//! The `thread/*` methods: start, resume, fork, read, list, archive, name, compact,
//! unsubscribe, loaded list, delete, paged turns and items.

use std::sync::Arc;

use interpreter_core::store::{ListDirection, ListQuery, ListSortKey};

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2::{self, ThreadStatus};
use interpreter_protocol::Op;

use crate::state::{LoadedThread, Reply, ServerState, normalize_dir, offset_page, parse_thread_id};

/// Whether the model may ask this connection's user (`request_user_input`,
/// `request_permissions`): a v2 client is sent `item/tool/requestUserInput` and
/// `item/permissions/requestApproval`; a v1 (legacy approvals) client has no such requests.
fn can_ask_user(connection: &Connection) -> bool {
    !connection.legacy_approvals()
}

pub(crate) async fn start(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadStartParams,
) -> Result<Reply, AppServerError> {
    let mut settings = params.settings;
    let ephemeral = params.ephemeral.unwrap_or(false);
    let mut config = state.session_config(&mut settings, ephemeral, None).await?;
    config.can_ask_user = can_ask_user(connection);
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
        notify_to.notify(
            notification_names::THREAD_STARTED,
            &v2::ThreadStartedNotification { thread },
        );
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
            let mut config = state
                .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
                .await?;
            config.can_ask_user = can_ask_user(connection);
            // Another front end in this process may have it live (the MCP connection).
            let resumed = state
                .thread_manager
                .get_or_resume(thread_id, async || Ok::<_, AppServerError>(config))
                .await?;
            state.register(resumed, false, None)
        }
    };
    loaded.subscribe(connection);
    let turns = response_turns(state, &loaded, params.exclude_turns).await?;
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
    let mut config = state
        .session_config(&mut settings, false, record.as_ref().map(|r| r.cwd.clone()))
        .await?;
    config.can_ask_user = can_ask_user(connection);
    let new = state
        .thread_manager
        .fork_thread(config, source, params.last_turn_id, state.session_source)
        .await?;
    let loaded = state.register(new.thread, false, Some(source));
    loaded.subscribe(connection);
    let turns = response_turns(state, &loaded, params.exclude_turns).await?;
    let response = state.start_response(&loaded, turns).await?;
    let mut thread = response.thread.clone();
    thread.turns = Vec::new();
    let notify_to = connection.clone();
    Ok(Reply::new(&response)?.then(move || {
        notify_to.notify(
            notification_names::THREAD_STARTED,
            &v2::ThreadStartedNotification { thread },
        );
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
            let record = state.required_record(thread_id).await?;
            mapping::thread_from_record(&record, ThreadStatus::NotLoaded)
        }
    };
    if params.include_turns && !thread.ephemeral {
        thread.turns = state.read_turns(thread_id).await?;
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
    let kinds = params.source_kinds.unwrap_or_default();
    let sources: Vec<_> = kinds
        .iter()
        .filter_map(|k| mapping::source_kind(*k))
        .collect();
    let parse_ids = |ids: Option<Vec<String>>| -> Result<Vec<_>, AppServerError> {
        ids.unwrap_or_default()
            .iter()
            .map(|id| parse_thread_id(id))
            .collect()
    };
    let included = params.included_thread_ids.clone();
    let ids = parse_ids(params.included_thread_ids)?;
    let excluded_ids = parse_ids(params.excluded_thread_ids)?;
    let foreign_originators = params
        .originators
        .as_ref()
        .is_some_and(|o| !o.is_empty() && !o.iter().any(|o| o == "interpreter"));
    // Filters nothing here can match: only sub-agent kinds, another originator, a
    // section, or an empty list of threads to include.
    if (!kinds.is_empty() && sources.is_empty())
        || foreign_originators
        || params.section_id.is_some()
        || included.is_some_and(|i| i.is_empty())
    {
        return Reply::new(&v2::ThreadListResponse {
            data: Vec::new(),
            next_cursor: None,
            backwards_cursor: None,
        });
    }
    let query = ListQuery {
        limit,
        cursor: params.cursor,
        sort_key: match params.sort_key {
            Some(
                v2::ThreadSortKey::UpdatedAt
                | v2::ThreadSortKey::RecencyAt
                | v2::ThreadSortKey::SectionPosition,
            ) => ListSortKey::UpdatedAt,
            Some(v2::ThreadSortKey::CreatedAt) | None => ListSortKey::CreatedAt,
        },
        direction,
        archived: params.archived.unwrap_or(false),
        cwds: cwds
            .iter()
            .map(|cwd| normalize_dir(&state.inputs.cwd, cwd))
            .collect(),
        sources,
        model_providers: params.model_providers.unwrap_or_default(),
        search_term: params.search_term,
        require_preview: true,
        ids,
        excluded_ids,
    };
    let page = state.store().await?.list(query).await?;
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
    let record = state.required_record(thread_id).await?;
    state
        .store()
        .await?
        .set_archived(thread_id, archived)
        .await?;
    let notification = v2::ThreadIdNotification {
        thread_id: thread_id.to_string(),
    };
    let notify_to = connection.clone();
    let method = if archived {
        notification_names::THREAD_ARCHIVED
    } else {
        notification_names::THREAD_UNARCHIVED
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

/// `thread/goal/get`: goal mode does not exist here yet, so no thread has a goal.
/// `thread/backgroundTerminals/list` (experimental in Codex): none exist here.
pub(crate) async fn background_terminals(
    state: &Arc<ServerState>,
    params: v2::ThreadBackgroundTerminalsListParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    state.require_known(thread_id).await?;
    Reply::new(&v2::ThreadBackgroundTerminalsListResponse {
        data: Vec::new(),
        next_cursor: None,
    })
}

/// The recorded turns a `thread/resume`/`thread/fork` answer carries: none with
/// `excludeTurns`.
async fn response_turns(
    state: &ServerState,
    loaded: &LoadedThread,
    exclude_turns: bool,
) -> Result<Vec<v2::Turn>, AppServerError> {
    if exclude_turns {
        return Ok(Vec::new());
    }
    state.recorded_turns(&loaded.thread).await
}

/// Who hears about a change to a thread: its followers and the client that made it.
pub(crate) fn followers_and(
    loaded: Option<Arc<LoadedThread>>,
    caller: &Arc<Connection>,
) -> Vec<Arc<Connection>> {
    let mut notify_to = loaded.map(|l| l.subscribers()).unwrap_or_default();
    if !notify_to.iter().any(|c| c.id == caller.id) {
        notify_to.push(caller.clone());
    }
    notify_to
}

/// How long a deleted thread that is running may take to stop.
const DELETE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn name_set(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadSetNameParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let name = params.name.trim().to_string();
    if name.is_empty() {
        return Err(AppServerError::InvalidRequest(
            "thread name must not be empty".into(),
        ));
    }
    state.required_record(thread_id).await?;
    let stored = name.clone();
    state
        .store()
        .await?
        .set_name(thread_id, Some(stored))
        .await?;
    let notification = v2::ThreadNameUpdatedNotification {
        thread_id: thread_id.to_string(),
        thread_name: Some(name),
    };
    let notify_to = followers_and(state.loaded(thread_id), connection);
    Ok(Reply::new(&v2::EmptyResponse {})?.then(move || {
        for connection in notify_to {
            connection.notify(notification_names::THREAD_NAME_UPDATED, &notification);
        }
    }))
}

/// `thread/compact/start`: a turn that summarises the conversation (its events are
/// `turn/started`, a `contextCompaction` item and `turn/completed`).
pub(crate) async fn compact_start(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadIdParams,
    trace: Option<interpreter_telemetry::W3cTraceContext>,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let loaded = state.load_idle(thread_id, connection, "compact").await?;
    let (_turn_id, release) =
        crate::turns::run_turn(state, connection, loaded, Op::Compact, None, trace).await?;
    Ok(Reply::new(&v2::EmptyResponse {})?.then(release))
}

pub(crate) fn unsubscribe(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadIdParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let status = match state.loaded(thread_id) {
        None => v2::ThreadUnsubscribeStatus::NotLoaded,
        Some(loaded) if loaded.unsubscribe(connection) => v2::ThreadUnsubscribeStatus::Unsubscribed,
        Some(_) => v2::ThreadUnsubscribeStatus::NotSubscribed,
    };
    Reply::new(&v2::ThreadUnsubscribeResponse { status })
}

pub(crate) fn loaded_list(
    state: &Arc<ServerState>,
    params: v2::ThreadLoadedListParams,
) -> Result<Reply, AppServerError> {
    let ids: Vec<String> = state.loaded_ids().iter().map(ToString::to_string).collect();
    let (data, next_cursor) = offset_page(&ids, params.cursor.as_deref(), params.limit)?;
    Reply::new(&v2::ThreadLoadedListResponse { data, next_cursor })
}

/// `thread/delete`: stop the thread if it runs, then remove its history for good.
pub(crate) async fn delete(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ThreadIdParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let notify_to = followers_and(state.unload(thread_id), connection);
    state
        .thread_manager
        .delete_thread(&state.base_config().await?, thread_id, DELETE_GRACE)
        .await?;
    let notification = v2::ThreadIdNotification {
        thread_id: thread_id.to_string(),
    };
    Ok(Reply::new(&v2::EmptyResponse {})?.then(move || {
        for connection in notify_to {
            connection.notify(notification_names::THREAD_DELETED, &notification);
        }
    }))
}

/// `thread/turns/list`: the recorded turns, a page at a time (offset cursors).
/// Every recorded turn of a thread, loaded or not.
async fn thread_turns(
    state: &Arc<ServerState>,
    thread_id: &str,
) -> Result<Vec<v2::Turn>, AppServerError> {
    let thread_id = parse_thread_id(thread_id)?;
    match state.loaded(thread_id) {
        Some(loaded) => state.recorded_turns(&loaded.thread).await,
        None => {
            state.require_known(thread_id).await?;
            state.read_turns(thread_id).await
        }
    }
}

pub(crate) async fn turns_list(
    state: &Arc<ServerState>,
    params: v2::ThreadTurnsListParams,
) -> Result<Reply, AppServerError> {
    let mut turns = thread_turns(state, &params.thread_id).await?;
    if params.sort_direction != Some(v2::SortDirection::Asc) {
        turns.reverse();
    }
    let total = turns.len();
    let (mut data, next_cursor) = offset_page(&turns, params.cursor.as_deref(), params.limit)?;
    let start = params
        .cursor
        .as_deref()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let backwards_cursor = (!data.is_empty()).then(|| (total - start).to_string());
    let view = params.items_view.unwrap_or(v2::ItemsView::Summary);
    for turn in &mut data {
        match view {
            v2::ItemsView::Full => {}
            v2::ItemsView::Summary => turn.items.retain(|item| {
                matches!(
                    item,
                    v2::ThreadItem::UserMessage { .. } | v2::ThreadItem::AgentMessage { .. }
                )
            }),
            v2::ItemsView::NotLoaded => turn.items.clear(),
        }
        turn.items_view = view;
    }
    Reply::new(&v2::ThreadTurnsListResponse {
        data,
        next_cursor,
        backwards_cursor,
    })
}

/// `thread/items/list`: the thread's items (or one turn's) as one list, paged in either
/// direction. Cursors are offsets into the list in the requested direction, so a page's
/// `backwardsCursor` is where the same list read the other way resumes before it.
pub(crate) async fn items_list(
    state: &Arc<ServerState>,
    params: v2::ThreadItemsListParams,
) -> Result<Reply, AppServerError> {
    let turns = thread_turns(state, &params.thread_id).await?;
    if let Some(turn_id) = &params.turn_id
        && !turns.iter().any(|turn| &turn.id == turn_id)
    {
        return Err(AppServerError::InvalidRequest(format!(
            "turn not found: {turn_id}"
        )));
    }
    let mut entries: Vec<v2::ThreadItemEntry> = turns
        .into_iter()
        .filter(|turn| params.turn_id.as_ref().is_none_or(|id| *id == turn.id))
        .flat_map(|turn| {
            let turn_id = turn.id;
            turn.items.into_iter().map(move |item| v2::ThreadItemEntry {
                turn_id: turn_id.clone(),
                item,
                started_at_ms: None,
                completed_at_ms: None,
            })
        })
        .collect();
    if params.sort_direction == Some(v2::SortDirection::Desc) {
        entries.reverse();
    }
    let start = match &params.cursor {
        None => 0,
        Some(v2::ThreadItemsListCursor::Opaque(text)) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= entries.len())
            .ok_or_else(|| AppServerError::InvalidRequest(format!("invalid cursor: {text}")))?,
        Some(v2::ThreadItemsListCursor::Anchor(v2::ThreadItemsListAnchor::Item { item_id })) => {
            if params.turn_id.is_none() {
                return Err(AppServerError::InvalidRequest(
                    "an item anchor needs turnId".to_string(),
                ));
            }
            entries
                .iter()
                .position(|entry| entry.item.id() == item_id)
                .map(|at| at + 1)
                .ok_or_else(|| {
                    AppServerError::InvalidRequest(format!("item not found: {item_id}"))
                })?
        }
    };
    let total = entries.len();
    let cursor = start.to_string();
    let (data, next_cursor) = offset_page(&entries, Some(&cursor), params.limit)?;
    let backwards_cursor = (!data.is_empty()).then(|| (total - start).to_string());
    Reply::new(&v2::ThreadItemsListResponse {
        data,
        next_cursor,
        backwards_cursor,
    })
}
