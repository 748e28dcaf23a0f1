//! `$HOME/state.sqlite`: an index of thread metadata for lookup by id, "latest thread in
//! this directory" and paged listing. It is a cache: the JSONL rollouts are the source of
//! truth, and [`find_rollout`] falls back to scanning `sessions/` (repairing the index)
//! so a lost or corrupt database never loses a thread.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use interpreter_protocol::{SessionSource, ThreadId};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::error::RolloutError;
use super::item::{RolloutItem, first_user_message, format_timestamp};
use super::recorder::read_rollout;

pub const STATE_DB_FILE: &str = "state.sqlite";
/// Directory under the home that holds the rollouts.
pub const SESSIONS_DIR: &str = "sessions";
/// Longest preview kept, in characters.
pub const PREVIEW_MAX_CHARS: usize = 200;
/// How long a statement waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Metadata of one thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    pub id: ThreadId,
    pub rollout_path: PathBuf,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub cwd: PathBuf,
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub source: SessionSource,
    /// The first user message, truncated to [`PREVIEW_MAX_CHARS`].
    pub preview: Option<String>,
}

impl ThreadRecord {
    /// Cursor that makes [`ThreadIndex::list`] continue after this record.
    pub fn cursor(&self) -> String {
        format!("{}|{}", format_timestamp(&self.updated_at), self.id)
    }

    /// Builds a record from a rollout's items (for repairing the index).
    pub(crate) fn from_rollout(path: &Path, items: &[RolloutItem]) -> Option<Self> {
        let meta = items.iter().find_map(|item| match item {
            RolloutItem::SessionMeta(meta) => Some(meta),
            _ => None,
        })?;
        let updated_at = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map(DateTime::<Utc>::from)
            .unwrap_or(meta.timestamp);
        Some(Self {
            id: meta.id,
            rollout_path: path.to_path_buf(),
            created_at: meta.timestamp,
            updated_at,
            cwd: meta.cwd.clone(),
            model_provider: meta.model_provider.clone(),
            model: meta.model.clone(),
            source: meta.source,
            preview: first_user_message(items).map(truncate_preview),
        })
    }
}

pub(crate) fn truncate_preview(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(PREVIEW_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// A connection to the thread index. Each process opens its own; WAL mode and a busy
/// timeout let several `interpreter` processes share the file.
#[derive(Debug)]
pub struct ThreadIndex {
    conn: Connection,
    path: PathBuf,
}

const SELECT_COLUMNS: &str =
    "id, rollout_path, created_at, updated_at, cwd, model_provider, model, source, preview";

impl ThreadIndex {
    /// Opens (creating the home directory and schema if needed) `<home>/state.sqlite`.
    pub fn open(home: &Path) -> Result<Self, RolloutError> {
        std::fs::create_dir_all(home)
            .map_err(|source| RolloutError::io("create directory", home, source))?;
        let path = home.join(STATE_DB_FILE);
        let db_err = |source| RolloutError::Index {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(db_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_err)?;
        // The pragma answers with the resulting mode, so it must be read as a query.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(db_err)?;
        conn.execute_batch(
            "PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS threads (
                 id TEXT PRIMARY KEY NOT NULL,
                 rollout_path TEXT NOT NULL,
                 created_at TEXT NOT NULL,
                 updated_at TEXT NOT NULL,
                 cwd TEXT NOT NULL,
                 model_provider TEXT,
                 model TEXT,
                 source TEXT NOT NULL,
                 preview TEXT
             );
             CREATE INDEX IF NOT EXISTS threads_updated ON threads (updated_at DESC, id DESC);
             CREATE INDEX IF NOT EXISTS threads_cwd_updated
                 ON threads (cwd, updated_at DESC, id DESC);",
        )
        .map_err(db_err)?;
        Ok(Self { conn, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db_err(&self, source: rusqlite::Error) -> RolloutError {
        RolloutError::Index {
            path: self.path.clone(),
            source,
        }
    }

    /// Inserts or replaces a record; an existing preview is kept when the new one is empty.
    pub fn upsert(&self, record: &ThreadRecord) -> Result<(), RolloutError> {
        self.conn
            .execute(
                "INSERT INTO threads
                     (id, rollout_path, created_at, updated_at, cwd, model_provider, model, source, preview)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT(id) DO UPDATE SET
                     rollout_path = excluded.rollout_path,
                     created_at = excluded.created_at,
                     updated_at = excluded.updated_at,
                     cwd = excluded.cwd,
                     model_provider = excluded.model_provider,
                     model = excluded.model,
                     source = excluded.source,
                     preview = COALESCE(excluded.preview, threads.preview)",
                params![
                    record.id.to_string(),
                    record.rollout_path.to_string_lossy(),
                    format_timestamp(&record.created_at),
                    format_timestamp(&record.updated_at),
                    record.cwd.to_string_lossy(),
                    record.model_provider,
                    record.model,
                    source_to_text(record.source),
                    record.preview,
                ],
            )
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    /// Marks a thread as updated, and sets its preview if it has none yet.
    pub fn touch(
        &self,
        id: ThreadId,
        updated_at: DateTime<Utc>,
        preview: Option<&str>,
    ) -> Result<(), RolloutError> {
        self.conn
            .execute(
                "UPDATE threads SET updated_at = ?2, preview = COALESCE(preview, ?3) WHERE id = ?1",
                params![
                    id.to_string(),
                    format_timestamp(&updated_at),
                    preview.map(truncate_preview)
                ],
            )
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    pub fn get(&self, id: ThreadId) -> Result<Option<ThreadRecord>, RolloutError> {
        let sql = format!("SELECT {SELECT_COLUMNS} FROM threads WHERE id = ?1");
        self.query_one(&sql, params![id.to_string()])
    }

    /// The most recently updated thread, optionally only among those started in `cwd`.
    pub fn latest(&self, cwd: Option<&Path>) -> Result<Option<ThreadRecord>, RolloutError> {
        match cwd {
            Some(cwd) => {
                let sql = format!(
                    "SELECT {SELECT_COLUMNS} FROM threads WHERE cwd = ?1
                     ORDER BY updated_at DESC, id DESC LIMIT 1"
                );
                self.query_one(&sql, params![cwd.to_string_lossy()])
            }
            None => {
                let sql = format!(
                    "SELECT {SELECT_COLUMNS} FROM threads ORDER BY updated_at DESC, id DESC LIMIT 1"
                );
                self.query_one(&sql, [])
            }
        }
    }

    /// Up to `limit` threads, most recently updated first, starting after `cursor` (a
    /// [`ThreadRecord::cursor`] of the previous page's last record).
    pub fn list(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Vec<ThreadRecord>, RolloutError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = Vec::new();
        match cursor {
            Some(cursor) => {
                let (updated_at, id) =
                    cursor
                        .split_once('|')
                        .ok_or_else(|| RolloutError::IndexValue {
                            path: self.path.clone(),
                            message: format!("invalid cursor `{cursor}`"),
                        })?;
                let sql = format!(
                    "SELECT {SELECT_COLUMNS} FROM threads WHERE (updated_at, id) < (?1, ?2)
                     ORDER BY updated_at DESC, id DESC LIMIT ?3"
                );
                let mut stmt = self.conn.prepare(&sql).map_err(|e| self.db_err(e))?;
                let mapped = stmt
                    .query_map(params![updated_at, id, limit], raw_row)
                    .map_err(|e| self.db_err(e))?;
                for row in mapped {
                    rows.push(row.map_err(|e| self.db_err(e))?);
                }
            }
            None => {
                let sql = format!(
                    "SELECT {SELECT_COLUMNS} FROM threads ORDER BY updated_at DESC, id DESC LIMIT ?1"
                );
                let mut stmt = self.conn.prepare(&sql).map_err(|e| self.db_err(e))?;
                let mapped = stmt
                    .query_map(params![limit], raw_row)
                    .map_err(|e| self.db_err(e))?;
                for row in mapped {
                    rows.push(row.map_err(|e| self.db_err(e))?);
                }
            }
        }
        rows.into_iter().map(|raw| self.parse(raw)).collect()
    }

    fn query_one(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<ThreadRecord>, RolloutError> {
        let raw = self
            .conn
            .query_row(sql, params, raw_row)
            .optional()
            .map_err(|e| self.db_err(e))?;
        raw.map(|raw| self.parse(raw)).transpose()
    }

    fn parse(&self, raw: RawRow) -> Result<ThreadRecord, RolloutError> {
        let invalid = |message: String| RolloutError::IndexValue {
            path: self.path.clone(),
            message,
        };
        let timestamp = |text: &str| {
            DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| invalid(format!("bad timestamp `{text}`: {e}")))
        };
        Ok(ThreadRecord {
            id: ThreadId::from_str(&raw.id).map_err(|e| invalid(e.to_string()))?,
            rollout_path: PathBuf::from(raw.rollout_path),
            created_at: timestamp(&raw.created_at)?,
            updated_at: timestamp(&raw.updated_at)?,
            cwd: PathBuf::from(raw.cwd),
            model_provider: raw.model_provider,
            model: raw.model,
            source: source_from_text(&raw.source),
            preview: raw.preview,
        })
    }
}

struct RawRow {
    id: String,
    rollout_path: String,
    created_at: String,
    updated_at: String,
    cwd: String,
    model_provider: Option<String>,
    model: Option<String>,
    source: String,
    preview: Option<String>,
}

fn raw_row(row: &Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: row.get(0)?,
        rollout_path: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        cwd: row.get(4)?,
        model_provider: row.get(5)?,
        model: row.get(6)?,
        source: row.get(7)?,
        preview: row.get(8)?,
    })
}

fn source_to_text(source: SessionSource) -> String {
    match serde_json::to_value(source) {
        Ok(serde_json::Value::String(text)) => text,
        _ => "unknown".to_string(),
    }
}

fn source_from_text(text: &str) -> SessionSource {
    serde_json::from_value(serde_json::Value::String(text.to_string())).unwrap_or_default()
}

/// Finds the rollout of thread `id`: through the index when it knows the thread and the
/// file is still there, otherwise by scanning `<home>/sessions/` for `*-<id>.jsonl`, in
/// which case the index is repaired. Index failures are logged, never fatal.
pub fn find_rollout(home: &Path, id: ThreadId) -> Result<Option<PathBuf>, RolloutError> {
    let index = match ThreadIndex::open(home) {
        Ok(index) => Some(index),
        Err(err) => {
            tracing::warn!("thread index unavailable, scanning sessions instead: {err}");
            None
        }
    };
    if let Some(index) = &index {
        match index.get(id) {
            Ok(Some(record)) if record.rollout_path.is_file() => {
                return Ok(Some(record.rollout_path));
            }
            Ok(_) => {}
            Err(err) => tracing::warn!("thread index lookup failed: {err}"),
        }
    }

    let suffix = format!("-{id}.jsonl");
    let Some(path) = scan_for_suffix(&home.join(SESSIONS_DIR), &suffix)? else {
        return Ok(None);
    };
    if let Some(index) = &index {
        let items = read_rollout(&path)?;
        if let Some(record) = ThreadRecord::from_rollout(&path, &items)
            && let Err(err) = index.upsert(&record)
        {
            tracing::warn!("failed to repair the thread index entry of {id}: {err}");
        }
    }
    Ok(Some(path))
}

fn scan_for_suffix(dir: &Path, suffix: &str) -> Result<Option<PathBuf>, RolloutError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RolloutError::io("list", dir, source)),
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RolloutError::io("list", dir, source))?;
        let path = entry.path();
        let file_type = entry
            .file_type()
            .map_err(|source| RolloutError::io("inspect", &path, source))?;
        if file_type.is_dir() {
            subdirs.push(path);
        } else if entry.file_name().to_string_lossy().ends_with(suffix) {
            return Ok(Some(path));
        }
    }
    // Newest dates first: a resumed thread is usually recent.
    subdirs.sort_unstable_by(|a, b| b.cmp(a));
    for subdir in subdirs {
        if let Some(found) = scan_for_suffix(&subdir, suffix)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}
