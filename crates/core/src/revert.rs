//! Reverting a thread: dropping a turn and every later one from its history, and (when
//! asked) undoing the file changes those turns' patches made.
//!
//! The history part is a [`RevertedItem`] appended to the rollout; every reader applies
//! it (see [`rollout::apply_reverts`]), so the thread reads, lists, resumes and forks as
//! the prefix before that turn, and the model's next request is built from that prefix.
//!
//! The file part is opt-in and conservative. When a patch is applied, each file's content
//! before and after is recorded ([`FileEditsItem`]). A revert undoes the dropped turns'
//! records newest first, and restores a file only if its content now is exactly what the
//! turn left, it still resolves to where the patch wrote it, it is not a symlink, and it
//! lies in the thread's writable roots as its config computes them now. Anything else is
//! skipped and reported. Commands' side effects are never undone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use interpreter_protocol::EventMsg;
use interpreter_tools::restore::{self, RestoreRefusal};
use interpreter_tools::sandbox;
use tokio::sync::oneshot;

use crate::error::CoreError;
use crate::store::rollout::{
    self, FileEditsItem, RecordedContent, RecordedFileEdit, RevertedItem, RolloutItem,
};

/// What a revert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertOutcome {
    /// The turns dropped, oldest first.
    pub dropped_turn_ids: Vec<String>,
    /// What happened to the files, when the revert was asked to undo file changes.
    pub files: Option<FileRevertReport>,
}

/// The files a revert restored and the ones it left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileRevertReport {
    /// In the order they were restored (newest change first).
    pub restored: Vec<PathBuf>,
    pub skipped: Vec<SkippedFile>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: PathBuf,
    pub reason: String,
}

/// Where the session answers a [`crate::Thread::revert`], by submission id.
pub(crate) type RevertReplies =
    Arc<std::sync::Mutex<HashMap<String, oneshot::Sender<Result<RevertOutcome, CoreError>>>>>;

/// Most bytes of file content, as the rollout line encodes it (JSON-escaped), one
/// patch's record keeps, before and after together. A rollout line past
/// [`rollout::MAX_LINE_BYTES`] is not read back, so larger changes are recorded without
/// their content and cannot be undone.
const MAX_RECORDED_BYTES: usize = 6 * 1024 * 1024;

/// A revert worked out, before anything is changed.
pub(crate) struct RevertPlan {
    /// Where the kept prefix of the items ends.
    pub cut: usize,
    pub marker: RevertedItem,
    /// The dropped turns' file edits, newest first.
    pub edits_newest_first: Vec<RecordedFileEdit>,
}

/// The revert of `items` (the thread as its rollout holds it, reverts applied) before
/// `before_turn_id`; `None` when the thread has no such turn.
pub(crate) fn plan(items: &[RolloutItem], before_turn_id: &str) -> Option<RevertPlan> {
    let cut = rollout::turn_start(items, before_turn_id)?;
    let dropped = &items[cut..];
    let mut dropped_turn_ids: Vec<String> = Vec::new();
    for item in dropped {
        if let RolloutItem::EventMsg(EventMsg::TaskStarted(started)) = item
            && !dropped_turn_ids.contains(&started.turn_id)
        {
            dropped_turn_ids.push(started.turn_id.clone());
        }
    }
    let edits_newest_first = dropped
        .iter()
        .rev()
        .filter_map(|item| match item {
            RolloutItem::FileEdits(record) => Some(record.edits.iter().rev().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    Some(RevertPlan {
        cut,
        marker: RevertedItem {
            before_turn_id: before_turn_id.to_string(),
            dropped_turn_ids,
        },
        edits_newest_first,
    })
}

/// What decides whether a file may be written, from the thread's config as it is now,
/// over the session's anchored roots.
pub(crate) struct WritableRoots {
    pub scope: sandbox::WriteScope,
}

/// Undoes `edits` (newest first) on the local disk where that can be done cleanly.
/// Blocking.
pub(crate) fn restore_files(edits: &[RecordedFileEdit], roots: &WritableRoots) -> FileRevertReport {
    let mut report = FileRevertReport::default();
    for edit in edits {
        match restore_one(edit, roots) {
            Ok(true) => report.restored.push(edit.path.clone()),
            Ok(false) => {}
            Err(reason) => report.skipped.push(SkippedFile {
                path: edit.path.clone(),
                reason,
            }),
        }
    }
    report
}

/// Whether the file was changed back; `Err` says why it was left alone.
fn restore_one(edit: &RecordedFileEdit, roots: &WritableRoots) -> Result<bool, String> {
    let refused = |refusal: RestoreRefusal| refusal.to_string();
    for content in [&edit.before, &edit.after] {
        if let RecordedContent::NotKept { reason } = content {
            return Err(format!("the change was not kept for a revert ({reason})"));
        }
    }
    if !edit.path.is_absolute() {
        return Err("the recorded path is not absolute".to_string());
    }
    match sandbox::resolve_for_write(&edit.path) {
        Some(now) if now == edit.resolved => {}
        Some(now) => {
            return Err(refused(RestoreRefusal::Moved { now }));
        }
        None => return Err("where it leads cannot be resolved".to_string()),
    }
    // Reached beneath its root from here on, as the path resolved just now: nothing
    // renamed after this check can move the write elsewhere.
    let target = roots
        .scope
        .target_resolved(
            edit.path.clone(),
            edit.resolved.clone(),
            sandbox::Purpose::Write,
        )
        .ok_or_else(|| "it is outside the thread's writable roots".to_string())?;
    match (&edit.before, &edit.after) {
        (RecordedContent::Text { text: before }, RecordedContent::Text { text: after }) => {
            restore::replace_if_unchanged(&target, after, before).map_err(refused)?;
        }
        (RecordedContent::Absent, RecordedContent::Text { text: after }) => {
            restore::remove_if_unchanged(&target, after).map_err(refused)?;
        }
        (RecordedContent::Text { text: before }, RecordedContent::Absent) => {
            restore::create_absent(&target, before).map_err(refused)?;
        }
        // Nothing was there before or after.
        _ => return Ok(false),
    }
    Ok(true)
}

/// Builds the record of one patch's edits as they are made, within the size budget.
pub(crate) struct EditRecorder {
    record: FileEditsItem,
    budget: usize,
}

impl EditRecorder {
    pub(crate) fn new(turn_id: &str, call_id: &str) -> Self {
        Self {
            record: FileEditsItem {
                turn_id: turn_id.to_string(),
                call_id: call_id.to_string(),
                edits: Vec::new(),
            },
            budget: MAX_RECORDED_BYTES,
        }
    }

    /// One file changed from `before` to `after` (`None`: no file). `before` is what
    /// reading it just before the write gave.
    pub(crate) fn push(
        &mut self,
        path: &Path,
        resolved: PathBuf,
        before: std::io::Result<String>,
        after: Option<&str>,
    ) {
        let before = match before {
            Ok(text) => RecordedContent::Text { text },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => RecordedContent::Absent,
            Err(err) => RecordedContent::NotKept {
                reason: format!("it could not be read before the patch: {err}"),
            },
        };
        let after = match after {
            Some(text) => RecordedContent::Text {
                text: text.to_string(),
            },
            None => RecordedContent::Absent,
        };
        let size = content_len(&before) + content_len(&after);
        let (before, after) = if size > self.budget {
            let reason = "too large to keep in the thread's history".to_string();
            (
                RecordedContent::NotKept {
                    reason: reason.clone(),
                },
                RecordedContent::NotKept { reason },
            )
        } else {
            self.budget -= size;
            (before, after)
        };
        self.record.edits.push(RecordedFileEdit {
            path: path.to_path_buf(),
            resolved,
            before,
            after,
        });
    }

    /// The record, unless nothing was changed.
    pub(crate) fn finish(self) -> Option<RolloutItem> {
        (!self.record.edits.is_empty()).then_some(RolloutItem::FileEdits(self.record))
    }
}

/// The bytes `content` takes in the rollout line.
fn content_len(content: &RecordedContent) -> usize {
    match content {
        RecordedContent::Text { text } => text.chars().map(escaped_len).sum(),
        RecordedContent::Absent | RecordedContent::NotKept { .. } => 0,
    }
}

/// How many bytes JSON makes of `c` in a string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

#[cfg(test)]
mod tests {
    use interpreter_protocol::{TaskCompleteEvent, TaskStartedEvent};

    use super::*;

    fn started(id: &str) -> RolloutItem {
        RolloutItem::EventMsg(EventMsg::TaskStarted(TaskStartedEvent {
            turn_id: id.into(),
            model_context_window: None,
        }))
    }

    fn completed(id: &str) -> RolloutItem {
        RolloutItem::EventMsg(EventMsg::TaskComplete(TaskCompleteEvent {
            turn_id: id.into(),
            last_agent_message: None,
            error: None,
            output_limit: false,
        }))
    }

    #[test]
    fn the_recorded_size_is_the_escaped_size_and_past_the_budget_nothing_is_kept() {
        let text = "a\"\\\n\u{1}é\u{1F600}";
        assert_eq!(
            content_len(&RecordedContent::Text { text: text.into() }),
            serde_json::to_string(text).unwrap().len() - 2
        );
        let mut record = EditRecorder::new("1", "c");
        let small = "x".repeat(1024);
        let huge = "\u{1}".repeat(MAX_RECORDED_BYTES / 6 + 1);
        record.push(
            Path::new("/w/a"),
            "/w/a".into(),
            Ok(small.clone()),
            Some("y"),
        );
        record.push(Path::new("/w/b"), "/w/b".into(), Ok(huge), Some("y"));
        let Some(RolloutItem::FileEdits(item)) = record.finish() else {
            panic!("a record");
        };
        assert_eq!(item.edits[0].before, RecordedContent::Text { text: small });
        assert!(matches!(
            item.edits[1].before,
            RecordedContent::NotKept { .. }
        ));
        assert!(matches!(
            item.edits[1].after,
            RecordedContent::NotKept { .. }
        ));
    }

    #[test]
    fn a_revert_drops_the_turn_and_later_ones_and_stays_applied() {
        let mut items = vec![
            started("1"),
            completed("1"),
            started("2"),
            completed("2"),
            started("3"),
            completed("3"),
        ];
        let plan = plan(&items, "2").expect("turn 2 exists");
        assert_eq!(plan.cut, 2);
        assert_eq!(plan.marker.dropped_turn_ids, vec!["2", "3"]);
        items.push(RolloutItem::Reverted(plan.marker));
        items.push(started("4"));
        let effective = rollout::apply_reverts(items);
        let ids: Vec<String> = rollout::turns_from_rollout(&effective)
            .into_iter()
            .map(|turn| turn.id)
            .collect();
        assert_eq!(ids, vec!["1", "4"]);
        assert!(super::plan(&effective, "3").is_none());
    }
}
