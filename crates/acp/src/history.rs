//! A saved thread replayed as the updates a live session would have sent: what
//! `session/load` sends before it answers, so the editor shows the whole conversation,
//! tool calls included, after a restart.

use interpreter_core::store::{self, ThreadStore, TurnEntry};
use interpreter_protocol::ThreadId;

use crate::error::AcpError;
use crate::update::Update;
use crate::wire;

pub(crate) async fn replay(store: &dyn ThreadStore, id: ThreadId) -> Result<Vec<Update>, AcpError> {
    let items = store
        .read(id)
        .await?
        .map(|read| read.items)
        .unwrap_or_default();
    Ok(store::turns_from_rollout(&items)
        .iter()
        .flat_map(|turn| turn.entries.iter().filter_map(update_of))
        .collect())
}

fn update_of(entry: &TurnEntry) -> Option<Update> {
    match entry {
        TurnEntry::Item(item) => wire::replayed(item),
        // The turn's error was the prompt's error answer; it is not part of the talk.
        TurnEntry::Error { .. } => None,
    }
}
