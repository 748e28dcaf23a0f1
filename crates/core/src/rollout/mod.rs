//! Durable threads: one append-only JSONL rollout per thread under
//! `<home>/sessions/YYYY/MM/DD/`, plus the `<home>/state.sqlite` index used to find and
//! list threads.
//!
//! The rollout is the source of truth: it holds the session metadata, a settings snapshot
//! per turn, every model-visible [`interpreter_protocol::ResponseItem`] (so a resumed
//! thread sends the model exactly the history it had), and the persisted subset of events.
//! The index is a rebuildable cache.

mod error;
mod index;
mod item;
mod recorder;
#[cfg(test)]
mod tests;

pub use error::RolloutError;
pub use index::{
    PREVIEW_MAX_CHARS, SESSIONS_DIR, STATE_DB_FILE, ThreadIndex, ThreadRecord, find_rollout,
};
pub use item::{
    CompactedItem, RolloutItem, SessionMeta, TurnContextItem, history_from_rollout,
    should_persist_event,
};
pub use recorder::{RolloutRecorder, read_rollout};
