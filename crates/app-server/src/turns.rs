//! The `turn/*` methods: start (or join the running turn), steer, interrupt.

use futures::future::BoxFuture;
use interpreter_core::goal::NextTurn;
use std::path::PathBuf;
use std::sync::Arc;

use interpreter_protocol::{Op, ThreadId};
use interpreter_telemetry::W3cTraceContext;

use crate::connection::Connection;
use crate::driver;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::state::{ActiveTurn, LoadedThread, Reply, ServerState, parse_thread_id};

pub(crate) async fn start(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::TurnStartParams,
    trace: Option<W3cTraceContext>,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let items = user_inputs(&params.input)?;
    let mode = params
        .collaboration_mode
        .as_ref()
        .map(mapping::collaboration_mode_in);
    let mut loaded = state.load_for_turn(thread_id).await?;
    loaded.subscribe(connection);
    if loaded.active_turn().is_none() {
        loaded = state.apply_turn_settings(loaded, &params).await?;
    }
    // Before the input: a turn this input starts runs in the new mode; a running turn
    // keeps its own, and the mode holds from the next turn on.
    if let Some(mode) = mode {
        loaded
            .thread
            .submit(Op::SetCollaborationMode { mode })
            .await?;
    }
    // A turn is running: the input joins it (as the reference's start_or_steer).
    if let Some(active) = loaded.active_turn() {
        loaded.thread.submit(Op::UserInput { items }).await?;
        return Reply::new(&v2::TurnStartResponse {
            turn: pending_turn(&active.turn_id),
        });
    }
    let (turn_id, release) = run_turn(
        state,
        connection,
        loaded,
        Op::UserInput { items },
        params.client_user_message_id,
        trace,
    )
    .await?;
    Ok(Reply::new(&v2::TurnStartResponse {
        turn: pending_turn(&turn_id),
    })?
    .then(release))
}

/// Start a turn of `op` on an idle loaded thread, owned by `connection`, and drive its
/// events to the thread's subscribers. Returns the turn id and what releases the events:
/// call it once the response is on its way, so they follow it on the wire.
pub(crate) async fn run_turn(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    loaded: Arc<LoadedThread>,
    op: Op,
    client_user_message_id: Option<String>,
    trace: Option<W3cTraceContext>,
) -> Result<(String, impl FnOnce() + Send + 'static), AppServerError> {
    let slot = tokio::select! {
        slot = loaded.thread.turn_slot() => slot,
        () = connection.closed.cancelled() => {
            return Err(AppServerError::InvalidRequest("connection closed".into()));
        }
    };
    let turn_id = loaded.thread.submit_traced(op, trace).await?;
    if let Ok(mut active) = loaded.active.lock() {
        *active = Some(ActiveTurn {
            turn_id: turn_id.clone(),
            owner: connection.clone(),
        });
    }
    let (gate, released) = tokio::sync::oneshot::channel::<()>();
    let state = state.clone();
    let owner = connection.clone();
    let id = turn_id.clone();
    tokio::spawn(async move {
        let _ = released.await;
        driver::drive(&state, &loaded, &id, client_user_message_id, slot).await;
        // Already done when the turn finished normally; this covers a drive that ended
        // otherwise (the thread stopped).
        loaded.end_turn(&id);
        // A thread with an active goal goes on with its next turn.
        continue_after_turn(state.clone(), owner, loaded.clone()).await;
        state.retire_idle(loaded.id()).await;
    });
    Ok((turn_id, move || {
        let _ = gate.send(());
    }))
}

/// `review/start`: a review turn on the thread, answered with the turn once the review
/// is prepared (its diff taken), so a target that cannot be reviewed is this request's
/// error and no model call is made.
pub(crate) async fn review_start(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    params: v2::ReviewStartParams,
    trace: Option<W3cTraceContext>,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let target = mapping::review_target_in(params.target);
    let loaded = state.load_for_turn(thread_id).await?;
    loaded.subscribe(connection);
    if loaded.active_turn().is_some() {
        return Err(AppServerError::InvalidRequest(
            "a turn is running on this thread; start the review after it ends".into(),
        ));
    }
    let request = loaded.thread.prepare_review(target).await?;
    let (turn_id, release) = run_turn(
        state,
        connection,
        loaded,
        Op::Review { request },
        None,
        trace,
    )
    .await?;
    Ok(Reply::new(&v2::ReviewStartResponse {
        turn: pending_turn(&turn_id),
        review_thread_id: params.thread_id,
    })?
    .then(release))
}

pub(crate) async fn steer(
    state: &Arc<ServerState>,
    params: v2::TurnSteerParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let items = user_inputs(&params.input)?;
    let (loaded, active) =
        expected_active_turn(state, thread_id, &params.expected_turn_id, "steer")?;
    loaded.thread.submit(Op::UserInput { items }).await?;
    Reply::new(&v2::TurnSteerResponse {
        turn_id: active.turn_id,
    })
}

pub(crate) async fn interrupt(
    state: &Arc<ServerState>,
    params: v2::TurnInterruptParams,
) -> Result<Reply, AppServerError> {
    let thread_id = parse_thread_id(&params.thread_id)?;
    let (loaded, _) = expected_active_turn(state, thread_id, &params.turn_id, "interrupt")?;
    loaded.thread.submit(Op::Interrupt).await?;
    Reply::new(&v2::EmptyResponse {})
}

/// The running turn of a thread, which must be the one the client names (`turn/steer`,
/// `turn/interrupt`); `verb` words the error when none runs.
fn expected_active_turn(
    state: &Arc<ServerState>,
    thread_id: ThreadId,
    expected: &str,
    verb: &str,
) -> Result<(Arc<LoadedThread>, ActiveTurn), AppServerError> {
    let active = state
        .loaded(thread_id)
        .and_then(|l| l.active_turn().map(|a| (l, a)));
    let Some((loaded, active)) = active else {
        return Err(AppServerError::InvalidRequest(format!(
            "no active turn to {verb}"
        )));
    };
    if active.turn_id != expected {
        return Err(AppServerError::InvalidRequest(format!(
            "expected active turn id `{expected}` but found `{}`",
            active.turn_id
        )));
    }
    Ok((loaded, active))
}

fn pending_turn(id: &str) -> v2::Turn {
    v2::Turn {
        id: id.to_string(),
        items: Vec::new(),
        items_view: v2::ItemsView::NotLoaded,
        status: v2::TurnStatus::InProgress,
        error: None,
        started_at: None,
        completed_at: None,
        duration_ms: None,
    }
}

/// Wire input → engine input, with the reference's size limit.
fn user_inputs(
    input: &[v2::UserInput],
) -> Result<Vec<interpreter_protocol::UserInput>, AppServerError> {
    let total: usize = input
        .iter()
        .map(|item| match item {
            v2::UserInput::Text { text, .. } => text.chars().count(),
            _ => 0,
        })
        .sum();
    if total > crate::error::MAX_INPUT_CHARS {
        return Err(AppServerError::InputTooLarge { actual: total });
    }
    let mut items = Vec::new();
    for item in input {
        match item {
            v2::UserInput::Text { text, .. } => {
                items.push(interpreter_protocol::UserInput::Text { text: text.clone() });
            }
            v2::UserInput::LocalImage { path, .. } => {
                items.push(interpreter_protocol::UserInput::LocalImage {
                    path: PathBuf::from(path),
                });
            }
            // A mention names a file; the model gets its path as text.
            v2::UserInput::Mention { name, path } => {
                items.push(interpreter_protocol::UserInput::Text {
                    text: format!("{name}: {path}"),
                });
            }
            // A skill is loaded by the engine from its own discovery, by name: the path
            // is the client's word, and only a skill the engine found is ever read.
            v2::UserInput::Skill { name, .. } => {
                items.push(interpreter_protocol::UserInput::Text {
                    text: format!("${name}"),
                });
            }
            v2::UserInput::Image {
                url: Some(url),
                file_id: None,
                ..
            } => {
                items.push(interpreter_protocol::UserInput::Image {
                    image_url: url.clone(),
                });
            }
            v2::UserInput::Image { .. } => {
                return Err(AppServerError::InvalidParams(
                    "an image needs exactly one of `url` or `fileId`, and `fileId` (an OpenAI files upload) is not supported here; send a `url` (http(s) or data:) or a `localImage`".into(),
                ));
            }
            v2::UserInput::Audio { .. } | v2::UserInput::LocalAudio { .. } => {
                return Err(AppServerError::InvalidParams(
                    "audio input is not supported: the model endpoints served here take text and images".into(),
                ));
            }
        }
    }
    if items.is_empty() {
        return Err(AppServerError::InvalidParams("input is empty".into()));
    }
    Ok(items)
}

/// After a turn of `loaded` ends: the goal's next turn, if it wants one and no other
/// turn took the thread meanwhile. Boxed: it starts a turn whose end calls it again.
pub(crate) fn continue_after_turn(
    state: Arc<ServerState>,
    connection: Arc<Connection>,
    loaded: Arc<LoadedThread>,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        if loaded.active_turn().is_some() || connection.is_closed() {
            return;
        }
        match start_goal_turn(&state, &connection, loaded).await {
            Ok(Some(release)) => release(),
            Ok(None) => {}
            Err(e) => tracing::warn!("the goal's next turn did not start: {e}"),
        }
    })
}

/// Start the turn the goal asks for, owned by `connection`; what releases its events.
pub(crate) async fn start_goal_turn(
    state: &Arc<ServerState>,
    connection: &Arc<Connection>,
    loaded: Arc<LoadedThread>,
) -> Result<Option<Box<dyn FnOnce() + Send>>, AppServerError> {
    match loaded.thread.next_goal_turn().await? {
        NextTurn::Run(text) => {
            let op = Op::UserInput {
                items: vec![interpreter_protocol::UserInput::Text { text }],
            };
            let (_, release) = run_turn(state, connection, loaded, op, None, None).await?;
            Ok(Some(Box::new(release)))
        }
        NextTurn::Paused(goal) => {
            let thread_id = loaded.id();
            loaded.broadcast(
                notification_names::THREAD_GOAL_UPDATED,
                &v2::ThreadGoalUpdatedNotification {
                    thread_id: thread_id.to_string(),
                    turn_id: None,
                    goal: mapping::wire_goal(thread_id, goal),
                },
            );
            Ok(None)
        }
        NextTurn::Idle => Ok(None),
    }
}
