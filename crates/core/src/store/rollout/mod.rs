//! Durable threads: one append-only JSONL rollout per thread under
//! `<home>/sessions/YYYY/MM/DD/`, plus the `<home>/state.sqlite` index used to find and
//! list threads.
//!
//! The rollout is the source of truth: it holds the session metadata, a settings snapshot
//! per turn, every model-visible [`interpreter_protocol::ResponseItem`] (so a resumed
//! thread sends the model exactly the history it had), the persisted subset of events,
//! what each applied patch changed, and revert records, which every reader applies
//! (`apply_reverts`), so a reverted thread reads everywhere as the prefix it kept.
//! The index is a rebuildable cache that heals itself from the rollouts (see `index`).
//!
//! Module dependencies point one way: `item` ← `reader` ← `index` ← `recorder`.

mod index;
mod item;
#[cfg(test)]
mod live_and_stored;
mod reader;
mod recorder;
#[cfg(test)]
mod tests;
mod turns;

pub use index::{
    ARCHIVE_LOG_FILE, IndexHealth, IndexRepair, ListDirection, ListPage, ListQuery, ListSortKey,
    NAME_LOG_FILE, PREVIEW_MAX_CHARS, RebuildCause, SESSIONS_DIR, STATE_DB_FILE, ThreadGitInfo,
    ThreadRecord, list_rollout_files,
};
pub(crate) use index::{
    ListCursor, ThreadIndex, delete_thread, find_latest, find_rollout, find_rollout_with_repairs,
    source_from_text, source_to_text, thread_id_from_file_name, truncate_preview,
};
pub use item::{
    CompactedItem, FileEditsItem, RecordedContent, RecordedFileEdit, RevertedItem, RolloutItem,
    SessionMeta, TurnContextItem, apply_reverts, history_from_rollout, last_turn_context,
    should_persist_event, turn_start,
};
pub(crate) use item::{RolloutLine, first_user_message};
#[cfg(test)]
pub(crate) use reader::read_rollout;
pub use reader::{MAX_LINE_BYTES, OversizedLine, RolloutRead, SkippedLines, human_bytes};
pub(crate) use reader::{
    StoredLine, parse_rollout_bytes, read_resumable, read_rollout_with_notes, read_stored_lines,
    summary_from_reader,
};
pub(crate) use recorder::RolloutRecorder;
pub use recorder::write_rollout;
pub use turns::{TurnEntry, TurnOutcome, TurnRecord, items_through_turn, turns_from_rollout};
