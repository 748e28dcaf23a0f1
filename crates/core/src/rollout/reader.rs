//! Reading rollout files. This module depends only on the record types, so both the
//! index (which rebuilds itself from rollouts) and the recorder can use it without
//! depending on each other in both directions: `item` ← `reader` ← `index` ← `recorder`.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::error::RolloutError;
use super::item::{RolloutItem, RolloutLine, SessionMeta};

/// Reads every record of a rollout, in order. A line that does not parse (typically the
/// last one, cut short by a crash) is skipped and logged; the rest is never lost. Resuming
/// a thread uses [`read_resumable`], which reports skipped lines to the user instead.
pub fn read_rollout(path: &Path) -> Result<Vec<RolloutItem>, RolloutError> {
    let (items, skipped) = parse_rollout(path)?;
    if let Some(skipped) = skipped {
        tracing::warn!("{skipped}");
    }
    Ok(items)
}

/// Lines of one rollout that could not be read and were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLines {
    pub path: PathBuf,
    /// 1-based line numbers.
    pub lines: Vec<usize>,
    /// Whether the last one is the file's last line (cut short by a crash, typically).
    pub includes_last: bool,
    /// Why the first one did not parse.
    pub first_error: String,
}

impl std::fmt::Display for SkippedLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match self.lines.as_slice() {
            [line] if self.includes_last => write!(
                f,
                "{path}: skipped truncated last line {line} ({})",
                self.first_error
            ),
            [line] => write!(
                f,
                "{path}: skipped unreadable line {line} ({})",
                self.first_error
            ),
            lines => {
                let numbers: Vec<String> = lines.iter().map(usize::to_string).collect();
                write!(
                    f,
                    "{path}: skipped {} unreadable lines ({}; first: {})",
                    lines.len(),
                    numbers.join(", "),
                    self.first_error
                )
            }
        }
    }
}

/// A rollout read for resuming: its records, and the lines that were left out.
#[derive(Debug, Clone)]
pub struct ResumableRollout {
    pub items: Vec<RolloutItem>,
    pub skipped: Option<SkippedLines>,
}

pub(super) fn parse_rollout(
    path: &Path,
) -> Result<(Vec<RolloutItem>, Option<SkippedLines>), RolloutError> {
    let bytes = std::fs::read(path).map_err(|source| RolloutError::io("read", path, source))?;
    Ok(parse_rollout_bytes(path, &bytes))
}

/// The records of a rollout's content and the lines left out; `path` only names the file
/// in [`SkippedLines`].
pub(crate) fn parse_rollout_bytes(
    path: &Path,
    bytes: &[u8],
) -> (Vec<RolloutItem>, Option<SkippedLines>) {
    // Lossy decoding keeps a line cut inside a multi-byte character from failing the file.
    let text = String::from_utf8_lossy(bytes);
    let mut items = Vec::new();
    let mut skipped: Option<SkippedLines> = None;
    let lines: Vec<&str> = text.split('\n').collect();
    let last_index = lines.len().saturating_sub(1);
    for (index, line) in lines.iter().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<RolloutLine>(line) {
            Ok(parsed) => items.push(parsed.item),
            Err(err) => {
                let skipped = skipped.get_or_insert_with(|| SkippedLines {
                    path: path.to_path_buf(),
                    lines: Vec::new(),
                    includes_last: false,
                    first_error: err.to_string(),
                });
                skipped.lines.push(index + 1);
                skipped.includes_last = index == last_index;
            }
        }
    }
    (items, skipped)
}

/// Reads a rollout that is about to be resumed. Unlike [`read_rollout`], a file without
/// a readable `session_meta` record (0 bytes, or only garbage) is an error naming the
/// file: resuming it would silently start an empty thread under an old id. Skipped lines
/// are returned, not logged: the engine shows them as a warning on the resumed thread.
pub fn read_resumable(path: &Path) -> Result<ResumableRollout, RolloutError> {
    ensure_not_empty(path)?;
    let (items, skipped) = parse_rollout(path)?;
    if !items
        .iter()
        .any(|item| matches!(item, RolloutItem::SessionMeta(_)))
    {
        return Err(RolloutError::Unusable {
            path: path.to_path_buf(),
            reason: "it has no readable session_meta record".into(),
        });
    }
    Ok(ResumableRollout { items, skipped })
}

/// What the index needs from a rollout: its metadata and first user message.
#[derive(Debug, Clone)]
pub(crate) struct RolloutSummary {
    pub meta: SessionMeta,
    pub first_user_message: Option<String>,
}

/// Reads a rollout only as far as needed for [`RolloutSummary`], so rebuilding the index
/// from thousands of long rollouts reads little more than their first lines.
pub(crate) fn read_summary(path: &Path) -> Result<RolloutSummary, RolloutError> {
    ensure_not_empty(path)?;
    let file = File::open(path).map_err(|source| RolloutError::io("open", path, source))?;
    summary_from_reader(path, BufReader::new(file))
}

/// [`read_summary`] of an open rollout; `path` names it in errors.
pub(crate) fn summary_from_reader(
    path: &Path,
    mut reader: impl BufRead,
) -> Result<RolloutSummary, RolloutError> {
    let mut meta = None;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| RolloutError::io("read", path, source))?;
        if read == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&buf);
        let Ok(line) = serde_json::from_str::<RolloutLine>(text.trim()) else {
            // Damaged lines are reported when the thread is read in full.
            continue;
        };
        match line.item {
            RolloutItem::SessionMeta(found) if meta.is_none() => meta = Some(found),
            RolloutItem::EventMsg(interpreter_protocol::EventMsg::UserMessage(event)) => {
                if let Some(meta) = meta {
                    return Ok(RolloutSummary {
                        meta,
                        first_user_message: Some(event.message),
                    });
                }
            }
            _ => {}
        }
    }
    match meta {
        Some(meta) => Ok(RolloutSummary {
            meta,
            first_user_message: None,
        }),
        None => Err(RolloutError::Unusable {
            path: path.to_path_buf(),
            reason: "it has no readable session_meta record".into(),
        }),
    }
}

fn ensure_not_empty(path: &Path) -> Result<(), RolloutError> {
    let len = std::fs::metadata(path)
        .map_err(|source| RolloutError::io("read", path, source))?
        .len();
    if len == 0 {
        return Err(RolloutError::Unusable {
            path: path.to_path_buf(),
            reason: "the file is empty (0 bytes)".into(),
        });
    }
    Ok(())
}
