//! Reading rollout files. This module depends only on the record types, so both the
//! index (which rebuilds itself from rollouts) and the recorder can use it without
//! depending on each other in both directions: `item` ← `reader` ← `index` ← `recorder`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::item::{RolloutItem, RolloutLine, SessionMeta};
use crate::store::StoreError;

/// The longest rollout line read. The recorder writes one record a line, and a record
/// is bounded by the model's context; a line past this is damage or an attack, and
/// reading it whole could take the memory of the machine (a rollout is read in one piece
/// by `threads show`, resume and the app server).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Reads every record of a rollout, in order, one line at a time in bounded memory. A
/// line that does not parse (typically the last one, cut short by a crash) or is longer
/// than [`MAX_LINE_BYTES`] is skipped and logged; the rest is never lost. Resuming a
/// thread uses [`read_resumable`], and showing one [`read_rollout_with_notes`], which
/// report skipped lines to the user instead.
#[cfg(test)]
pub(crate) fn read_rollout(path: &Path) -> Result<Vec<RolloutItem>, StoreError> {
    let read = read_rollout_with_notes(path)?;
    if let Some(skipped) = read.skipped {
        tracing::warn!("{skipped}");
    }
    Ok(read.items)
}

/// A rollout line that was over [`MAX_LINE_BYTES`] and was left out unread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OversizedLine {
    /// 1-based.
    pub line: usize,
    /// The whole line's length, newline excluded.
    pub bytes: u64,
}

impl std::fmt::Display for OversizedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} skipped: {}, over the {} limit",
            self.line,
            human_bytes(self.bytes),
            human_bytes(MAX_LINE_BYTES as u64)
        )
    }
}

/// `50 MiB`, `8 MiB`, `1.5 KiB`, `12 bytes`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            let whole = bytes / size;
            let tenths = (bytes % size) * 10 / size;
            return if tenths == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenths} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// A rollout's records and what was left out of it.
#[derive(Debug, Clone)]
pub struct RolloutRead {
    pub items: Vec<RolloutItem>,
    /// Every line left out, unreadable or over-long alike.
    pub skipped: Option<SkippedLines>,
    /// The over-long ones among them, with their sizes, for a note each.
    pub oversized: Vec<OversizedLine>,
}

/// Reads a rollout like [`read_rollout`], returning the lines it left out instead of
/// logging them, so a front end can tell the user.
pub(crate) fn read_rollout_with_notes(path: &Path) -> Result<RolloutRead, StoreError> {
    let file = File::open(path).map_err(|source| StoreError::io("open", path, source))?;
    read_rollout_from(path, BufReader::new(file))
}

/// The records of a rollout's content and the lines left out; `path` only names the file
/// in [`SkippedLines`] (the fuzz target reads content from memory through this).
pub(crate) fn parse_rollout_bytes(
    path: &Path,
    bytes: &[u8],
) -> (Vec<RolloutItem>, Option<SkippedLines>) {
    match read_rollout_from(path, bytes) {
        Ok(read) => (read.items, read.skipped),
        // Reading from memory cannot fail.
        Err(_) => (Vec::new(), None),
    }
}

/// One line as a database hands it over: its text, or only its size when it is over
/// [`MAX_LINE_BYTES`] and was left in the database unread.
pub(crate) enum StoredLine {
    Text(String),
    TooLong { bytes: u64 },
}

/// [`read_rollout_with_notes`] of the lines a database holds, in order; `label` names the
/// thread in notes.
pub(crate) fn read_stored_lines(
    label: &Path,
    lines: impl IntoIterator<Item = StoredLine>,
) -> RolloutRead {
    let mut read = ReadLines::new(label);
    for line in lines {
        // A row is a whole line: none is cut short like a file's last line can be.
        read.push(match &line {
            StoredLine::Text(text) => Line::Complete {
                text: text.as_bytes(),
                at_end: false,
            },
            StoredLine::TooLong { bytes } => Line::TooLong {
                bytes: *bytes,
                at_end: false,
            },
        });
    }
    read.finish()
}

/// [`read_rollout_with_notes`] of an open rollout; `path` names it in errors and notes.
fn read_rollout_from(path: &Path, reader: impl BufRead) -> Result<RolloutRead, StoreError> {
    let mut lines = BoundedLines::new(reader, MAX_LINE_BYTES);
    let mut read = ReadLines::new(path);
    while let Some(line) = lines
        .next_line()
        .map_err(|source| StoreError::io("read", path, source))?
    {
        read.push(line);
    }
    Ok(read.finish())
}

/// A [`RolloutRead`] being put together one line at a time, whatever holds the lines.
struct ReadLines<'a> {
    path: &'a Path,
    read: RolloutRead,
    number: usize,
}

impl<'a> ReadLines<'a> {
    fn new(path: &'a Path) -> Self {
        Self {
            path,
            read: RolloutRead {
                items: Vec::new(),
                skipped: None,
                oversized: Vec::new(),
            },
            number: 0,
        }
    }

    fn push(&mut self, line: Line<'_>) {
        self.number += 1;
        let (error, at_end) = match line {
            Line::Complete { text, at_end } => {
                // Lossy decoding keeps a line cut inside a multi-byte character from
                // failing the file.
                let text = String::from_utf8_lossy(text);
                let text = text.trim();
                if text.is_empty() {
                    return;
                }
                match serde_json::from_str::<RolloutLine>(text) {
                    Ok(parsed) => {
                        self.read.items.push(parsed.item);
                        return;
                    }
                    Err(err) => (err.to_string(), at_end),
                }
            }
            Line::TooLong { bytes, at_end } => {
                let oversized = OversizedLine {
                    line: self.number,
                    bytes,
                };
                let error = format!(
                    "{}, over the {} line limit",
                    human_bytes(bytes),
                    human_bytes(MAX_LINE_BYTES as u64)
                );
                self.read.oversized.push(oversized);
                (error, at_end)
            }
        };
        let skipped = self.read.skipped.get_or_insert_with(|| SkippedLines {
            path: self.path.to_path_buf(),
            lines: Vec::new(),
            includes_last: false,
            first_error: error,
        });
        skipped.lines.push(self.number);
        skipped.includes_last = at_end;
    }

    fn finish(mut self) -> RolloutRead {
        // Every reader sees the thread as its reverts left it.
        self.read.items = super::item::apply_reverts(self.read.items);
        self.read
    }
}

/// One line of a [`BoundedLines`] reader.
enum Line<'a> {
    /// The line without its newline; `at_end` when the file ends inside it (no newline:
    /// a write cut short).
    Complete { text: &'a [u8], at_end: bool },
    /// A line over the limit, read past without being kept.
    TooLong { bytes: u64, at_end: bool },
}

/// Lines of a reader, none kept longer than `max` bytes: the rest of a longer line is
/// read past in buffer-sized steps and only counted, so memory stays bounded whatever
/// the file holds.
struct BoundedLines<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> BoundedLines<R> {
    fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            buf: Vec::new(),
        }
    }

    fn next_line(&mut self) -> std::io::Result<Option<Line<'_>>> {
        self.buf.clear();
        // One byte over the limit tells a line of exactly `max` bytes from a longer one.
        let limit = u64::try_from(self.max)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)?;
        if read == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            return Ok(Some(Line::Complete {
                text: &self.buf,
                at_end: false,
            }));
        }
        if self.buf.len() <= self.max {
            // The file ends without a newline.
            return Ok(Some(Line::Complete {
                text: &self.buf,
                at_end: true,
            }));
        }
        let mut bytes = self.buf.len() as u64;
        self.buf = Vec::new();
        let ended_by_newline = loop {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                break false;
            }
            match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    bytes += at as u64;
                    self.reader.consume(at + 1);
                    break true;
                }
                None => {
                    let len = chunk.len();
                    bytes += len as u64;
                    self.reader.consume(len);
                }
            }
        };
        Ok(Some(Line::TooLong {
            bytes,
            at_end: !ended_by_newline,
        }))
    }
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
pub(crate) struct ResumableRollout {
    pub items: Vec<RolloutItem>,
    pub skipped: Option<SkippedLines>,
}

pub(super) fn parse_rollout(
    path: &Path,
) -> Result<(Vec<RolloutItem>, Option<SkippedLines>), StoreError> {
    let read = read_rollout_with_notes(path)?;
    Ok((read.items, read.skipped))
}

/// Reads a rollout that is about to be resumed. Unlike [`read_rollout`], a file without
/// a readable `session_meta` record (0 bytes, or only garbage) is an error naming the
/// file: resuming it would silently start an empty thread under an old id. Skipped lines
/// are returned, not logged: the engine shows them as a warning on the resumed thread.
pub(crate) fn read_resumable(path: &Path) -> Result<ResumableRollout, StoreError> {
    ensure_not_empty(path)?;
    let (items, skipped) = parse_rollout(path)?;
    if !items
        .iter()
        .any(|item| matches!(item, RolloutItem::SessionMeta(_)))
    {
        return Err(StoreError::Unusable {
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
pub(crate) fn read_summary(path: &Path) -> Result<RolloutSummary, StoreError> {
    ensure_not_empty(path)?;
    let file = File::open(path).map_err(|source| StoreError::io("open", path, source))?;
    summary_from_reader(path, BufReader::new(file))
}

/// [`read_summary`] of an open rollout; `path` names it in errors.
pub(crate) fn summary_from_reader(
    path: &Path,
    reader: impl BufRead,
) -> Result<RolloutSummary, StoreError> {
    let mut lines = BoundedLines::new(reader, MAX_LINE_BYTES);
    let mut meta = None;
    while let Some(line) = lines
        .next_line()
        .map_err(|source| StoreError::io("read", path, source))?
    {
        let Line::Complete { text, .. } = line else {
            // Over-long lines are reported when the thread is read in full.
            continue;
        };
        let text = String::from_utf8_lossy(text);
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
        None => Err(StoreError::Unusable {
            path: path.to_path_buf(),
            reason: "it has no readable session_meta record".into(),
        }),
    }
}

fn ensure_not_empty(path: &Path) -> Result<(), StoreError> {
    let len = std::fs::metadata(path)
        .map_err(|source| StoreError::io("read", path, source))?
        .len();
    if len == 0 {
        return Err(StoreError::Unusable {
            path: path.to_path_buf(),
            reason: "the file is empty (0 bytes)".into(),
        });
    }
    Ok(())
}
