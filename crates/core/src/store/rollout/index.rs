//! `$HOME/state.sqlite`: an index of thread metadata for lookup by id, "latest thread in
//! this directory" and paged listing. It is a cache: the JSONL rollouts are the source of
//! truth, and the index heals itself from them:
//!
//! * opening rebuilds it from `sessions/` when it is missing, empty, or unreadable (garbage,
//!   not SQLite, wrong schema); an unreadable file is moved aside, never deleted;
//! * [`find_rollout`] scans `sessions/` for an id the index does not know and indexes it;
//! * [`find_latest`] first indexes rollouts the index is behind on, and skips threads
//!   whose rollout file is gone.
//!
//! Each healing step is described by an [`IndexRepair`]; the engine shows those made while
//! a thread starts as that thread's `warning` events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use interpreter_protocol::{SessionSource, ThreadId};
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, TransactionBehavior, params};

use super::item::format_timestamp;
use super::reader::{RolloutSummary, read_summary};
use crate::store::StoreError;

pub const STATE_DB_FILE: &str = "state.sqlite";
/// Beside the index: every archive/unarchive decision, one JSON line each, so that the
/// decisions survive a rebuild of the index from the rollouts.
pub const ARCHIVE_LOG_FILE: &str = "archived_threads.jsonl";
/// Where thread names are recorded, beside the index (which is a cache).
pub const NAME_LOG_FILE: &str = "thread_names.jsonl";
/// Where each thread's git metadata (`thread/metadata/update`) is recorded, beside the
/// index, so that a rebuilt index keeps it.
pub(crate) const GIT_INFO_LOG_FILE: &str = "thread_git_info.jsonl";
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
    /// The rollout file, for a store that keeps one.
    pub rollout_path: Option<PathBuf>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub cwd: PathBuf,
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub source: SessionSource,
    /// The first user message, truncated to [`PREVIEW_MAX_CHARS`].
    pub preview: Option<String>,
    /// The name a user gave the thread (`thread/name/set`), if any.
    pub name: Option<String>,
    /// The git metadata recorded for the thread, if any.
    pub git_info: Option<ThreadGitInfo>,
}

/// Git metadata of a thread (branch, commit, origin). Absent fields are unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadGitInfo {
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub sha: Option<String>,
    #[serde(default)]
    pub origin_url: Option<String>,
}

impl ThreadGitInfo {
    /// Whether nothing is known (stored as no git metadata at all).
    pub fn is_empty(&self) -> bool {
        self.branch.is_none() && self.sha.is_none() && self.origin_url.is_none()
    }
}

impl ThreadRecord {
    /// Cursor that makes [`ThreadIndex::list`] continue after this record.
    pub fn cursor(&self) -> String {
        format!("{}|{}", format_timestamp(&self.updated_at), self.id)
    }

    /// Builds a record from a rollout file (for repairing the index). The file's
    /// modification time stands for the last update: every record appends to it.
    pub(crate) fn from_file(path: &Path) -> Result<Self, StoreError> {
        let RolloutSummary {
            meta,
            first_user_message,
        } = read_summary(path)?;
        let updated_at = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map(DateTime::<Utc>::from)
            .unwrap_or(meta.timestamp);
        Ok(Self {
            id: meta.id,
            rollout_path: Some(path.to_path_buf()),
            created_at: meta.timestamp,
            updated_at,
            cwd: meta.cwd,
            model_provider: meta.model_provider,
            model: meta.model,
            source: meta.source,
            preview: first_user_message.as_deref().map(truncate_preview),
            name: None,
            git_info: None,
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
pub(crate) struct ThreadIndex {
    conn: Connection,
    path: PathBuf,
}

const SELECT_COLUMNS: &str = "id, rollout_path, created_at, updated_at, cwd, model_provider, \
     model, source, preview, name, git_info";
/// The columns of the first release: an index that lacks these is not ours. (Later
/// columns are added in place by [`migrate`], so they must not fail this check.)
const BASE_COLUMNS: &str =
    "id, rollout_path, created_at, updated_at, cwd, model_provider, model, source, preview";

/// What healing the index did; its `Display` is one line for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexRepair {
    /// The whole index was rebuilt from `sessions/`.
    Rebuilt {
        db: PathBuf,
        cause: RebuildCause,
        indexed: usize,
        /// Rollouts that could not be read (0 bytes, no metadata, I/O error).
        skipped: Vec<PathBuf>,
    },
    /// Rollouts on disk that the index did not know were added to it.
    CaughtUp {
        indexed: usize,
        skipped: Vec<PathBuf>,
    },
}

/// Why the index was rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildCause {
    /// No `state.sqlite` existed while `sessions/` held rollouts.
    Missing,
    /// `state.sqlite` existed but held no thread table (e.g. a 0-byte file).
    Empty,
    /// `state.sqlite` could not be used; it was moved to `moved_to`.
    Unreadable { reason: String, moved_to: PathBuf },
}

impl std::fmt::Display for IndexRepair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let skipped = match self {
            Self::Rebuilt {
                db,
                cause,
                indexed,
                skipped,
            } => {
                let db = db.display();
                let plural = if *indexed == 1 { "" } else { "s" };
                match cause {
                    RebuildCause::Missing => write!(
                        f,
                        "thread index {db} was missing; rebuilt it from {indexed} rollout{plural} in {SESSIONS_DIR}/"
                    )?,
                    RebuildCause::Empty => write!(
                        f,
                        "thread index {db} was empty; rebuilt it from {indexed} rollout{plural} in {SESSIONS_DIR}/"
                    )?,
                    RebuildCause::Unreadable { reason, moved_to } => write!(
                        f,
                        "thread index {db} was unreadable ({reason}); moved it to {} and rebuilt it from {indexed} rollout{plural} in {SESSIONS_DIR}/",
                        moved_to.display()
                    )?,
                }
                skipped
            }
            Self::CaughtUp {
                indexed: 0,
                skipped,
            } if !skipped.is_empty() => {
                // Nothing was behind, only unreadable files that can never be indexed.
                return write!(
                    f,
                    "thread index: {} unreadable rollout{} in {SESSIONS_DIR}/ cannot be indexed (first: {}); `interpreter doctor` lists them",
                    skipped.len(),
                    if skipped.len() == 1 { "" } else { "s" },
                    skipped[0].display()
                );
            }
            Self::CaughtUp { indexed, skipped } => {
                write!(
                    f,
                    "thread index was behind {SESSIONS_DIR}/; indexed {indexed} rollout{} it did not know",
                    if *indexed == 1 { "" } else { "s" }
                )?;
                skipped
            }
        };
        if let Some(first) = skipped.first() {
            write!(
                f,
                "; skipped {} unreadable rollout{} (first: {})",
                skipped.len(),
                if skipped.len() == 1 { "" } else { "s" },
                first.display()
            )?;
        }
        Ok(())
    }
}

/// Logs repairs made outside a thread's start (listing, lookups by id), for `RUST_LOG`
/// users. Those made while a thread starts are its warnings (see `session::start`).
fn log_repairs(repairs: &[IndexRepair]) {
    for repair in repairs {
        tracing::warn!("{repair}");
    }
}

/// Why connecting to an existing database failed.
enum ConnectFailure {
    /// The file is not a usable index: move it aside and start over.
    Unreadable(String),
    /// Anything else (locked, permissions, disk full): not the file's fault.
    Other(rusqlite::Error),
}

/// Errors that mean the file itself is bad, as opposed to the moment (busy, locked) or
/// the environment (permissions, disk full), where moving it aside would lose data.
fn is_bad_file(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}

fn classify(err: rusqlite::Error) -> ConnectFailure {
    if is_bad_file(&err) {
        ConnectFailure::Unreadable(err.to_string())
    } else {
        ConnectFailure::Other(err)
    }
}

impl ThreadIndex {
    /// Opens `<home>/state.sqlite`, creating the home directory and schema if needed and
    /// healing the index (see the module doc). Repairs are logged; the engine, which shows
    /// them to the user as a thread's warnings, calls [`ThreadIndex::open_with_repairs`].
    pub(crate) fn open(home: &Path) -> Result<Self, StoreError> {
        let (index, repairs) = Self::open_with_repairs(home)?;
        log_repairs(&repairs);
        Ok(index)
    }

    /// [`ThreadIndex::open`], returning what was repaired instead of logging it.
    pub(crate) fn open_with_repairs(home: &Path) -> Result<(Self, Vec<IndexRepair>), StoreError> {
        interpreter_private_fs::create_dir_all(home)
            .map_err(|source| StoreError::io("create directory", home, source))?;
        let path = home.join(STATE_DB_FILE);
        let existed = path.exists();
        make_private(&path)?;
        let (conn, created, cause) = match connect(&path) {
            Ok((conn, created)) => {
                let cause = if existed {
                    RebuildCause::Empty
                } else {
                    RebuildCause::Missing
                };
                (conn, created, cause)
            }
            Err(ConnectFailure::Unreadable(reason)) => {
                let moved_to = move_aside(&path)?;
                tracing::debug!("moved unreadable thread index to {}", moved_to.display());
                make_private(&path)?;
                let (conn, created) = connect(&path).map_err(|failure| match failure {
                    ConnectFailure::Unreadable(message) => StoreError::IndexValue {
                        path: path.clone(),
                        message,
                    },
                    ConnectFailure::Other(source) => StoreError::Index {
                        path: path.clone(),
                        source,
                    },
                })?;
                (conn, created, RebuildCause::Unreadable { reason, moved_to })
            }
            Err(ConnectFailure::Other(source)) => {
                return Err(StoreError::Index { path, source });
            }
        };
        // The journal files SQLite just created took the database's mode; older ones may
        // not have.
        make_private(&path)?;
        let index = Self { conn, path };
        let mut repairs = Vec::new();
        if created {
            let files = list_rollout_files(&home.join(SESSIONS_DIR))?;
            let must_report = matches!(cause, RebuildCause::Unreadable { .. }) || !files.is_empty();
            let (indexed, skipped) = index.index_files(&files)?;
            index.apply_archive_log()?;
            index.apply_name_log()?;
            index.apply_git_info_log()?;
            if must_report {
                repairs.push(IndexRepair::Rebuilt {
                    db: index.path.clone(),
                    cause,
                    indexed,
                    skipped,
                });
            }
        }
        Ok((index, repairs))
    }

    /// Opens an existing index without creating, rebuilding or moving anything (for
    /// `interpreter doctor`, which only reads). Errors if the file is unusable.
    pub(crate) fn open_without_repair(home: &Path) -> Result<Self, StoreError> {
        let path = home.join(STATE_DB_FILE);
        match connect(&path) {
            Ok((conn, _)) => Ok(Self { conn, path }),
            Err(ConnectFailure::Unreadable(message)) => {
                Err(StoreError::IndexValue { path, message })
            }
            Err(ConnectFailure::Other(source)) => Err(StoreError::Index { path, source }),
        }
    }

    /// Indexes every rollout in `files` in one transaction (so rebuilding thousands of
    /// threads is one fsync, not thousands). Returns how many were indexed and which
    /// could not be read.
    fn index_files(&self, files: &[PathBuf]) -> Result<(usize, Vec<PathBuf>), StoreError> {
        // Read outside the transaction: the write lock is held only for the inserts.
        let mut records = Vec::with_capacity(files.len());
        let mut skipped = Vec::new();
        for file in files {
            match ThreadRecord::from_file(file) {
                Ok(record) => records.push(record),
                Err(err) => {
                    tracing::debug!("not indexing {}: {err}", file.display());
                    skipped.push(file.clone());
                }
            }
        }
        if records.is_empty() {
            return Ok((0, skipped));
        }
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        for record in &records {
            self.upsert(record)?;
        }
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok((records.len(), skipped))
    }

    /// Indexes one rollout file (e.g. one just written by a fork or an import).
    pub(crate) fn index_file(&self, path: &Path) -> Result<(), StoreError> {
        self.upsert(&ThreadRecord::from_file(path)?)
    }

    /// Indexes rollouts in `sessions/` that the index does not know (or knows under
    /// another path), e.g. written while the index was unusable or by an older version.
    pub(crate) fn catch_up(&self, home: &Path) -> Result<Option<IndexRepair>, StoreError> {
        let files = list_rollout_files(&home.join(SESSIONS_DIR))?;
        let known = self.known_paths()?;
        let behind: Vec<PathBuf> = files
            .into_iter()
            .filter(|file| {
                let id = thread_id_from_file_name(file).map(|id| id.to_string());
                match id.and_then(|id| known.get(&id)) {
                    Some(indexed) => Path::new(indexed) != file.as_path(),
                    None => true,
                }
            })
            .collect();
        if behind.is_empty() {
            return Ok(None);
        }
        let (indexed, skipped) = self.index_files(&behind)?;
        Ok(Some(IndexRepair::CaughtUp { indexed, skipped }))
    }

    /// id → rollout path of every indexed thread.
    fn known_paths(&self) -> Result<HashMap<String, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, rollout_path FROM threads")
            .map_err(|e| self.db_err(e))?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(|e| self.db_err(e))?;
        let mut known = HashMap::new();
        for row in rows {
            let (id, path): (String, String) = row.map_err(|e| self.db_err(e))?;
            known.insert(id, path);
        }
        Ok(known)
    }

    /// Compares the index with `sessions/` (for `interpreter doctor`).
    pub(crate) fn compare_with_disk(&self, home: &Path) -> Result<IndexHealth, StoreError> {
        let files = list_rollout_files(&home.join(SESSIONS_DIR))?;
        let known = self.known_paths()?;
        let mut not_indexed = Vec::new();
        let mut unreadable = Vec::new();
        for file in &files {
            let id = thread_id_from_file_name(file).map(|id| id.to_string());
            let indexed = id
                .and_then(|id| known.get(&id))
                .is_some_and(|indexed| Path::new(indexed) == file.as_path());
            if !indexed {
                not_indexed.push(file.clone());
            }
            // Reading only the head keeps this cheap; 0-byte files cost a stat.
            if read_summary(file).is_err() {
                unreadable.push(file.clone());
            }
        }
        let mut missing_files: Vec<PathBuf> = known
            .values()
            .map(PathBuf::from)
            .filter(|path| !path.is_file())
            .collect();
        missing_files.sort();
        Ok(IndexHealth {
            indexed: known.len(),
            on_disk: files.len(),
            not_indexed,
            missing_files,
            unreadable,
        })
    }

    fn db_err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Index {
            path: self.path.clone(),
            source,
        }
    }

    /// Inserts or replaces a record; an existing preview is kept when the new one is empty.
    pub(crate) fn upsert(&self, record: &ThreadRecord) -> Result<(), StoreError> {
        // Cached: a rebuild runs this once per rollout inside one transaction.
        self.conn
            .prepare_cached(
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
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    record.id.to_string(),
                    record
                        .rollout_path
                        .as_deref()
                        .map(|path| path.to_string_lossy())
                        .unwrap_or_default(),
                    format_timestamp(&record.created_at),
                    format_timestamp(&record.updated_at),
                    record.cwd.to_string_lossy(),
                    record.model_provider,
                    record.model,
                    source_to_text(record.source),
                    record.preview,
                ])
            })
            .map_err(|e| self.db_err(e))?;
        Ok(())
    }

    /// Marks a thread as updated, and sets its preview if it has none yet.
    pub(crate) fn touch(
        &self,
        id: ThreadId,
        updated_at: DateTime<Utc>,
        preview: Option<&str>,
    ) -> Result<(), StoreError> {
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

    pub(crate) fn get(&self, id: ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let sql = format!("SELECT {SELECT_COLUMNS} FROM threads WHERE id = ?1");
        self.query_one(&sql, params![id.to_string()])
    }

    /// The most recently updated thread whose rollout file still exists, optionally only
    /// among those started in `cwd`. A thread whose file was deleted is skipped (not
    /// removed: the file may be on a mount that is away for now).
    pub(crate) fn latest(&self, cwd: Option<&Path>) -> Result<Option<ThreadRecord>, StoreError> {
        let mut raws = Vec::new();
        {
            let (sql, cwd_text) = match cwd {
                Some(cwd) => (
                    format!(
                        "SELECT {SELECT_COLUMNS} FROM threads WHERE cwd = ?1
                         ORDER BY updated_at DESC, id DESC"
                    ),
                    Some(cwd.to_string_lossy().into_owned()),
                ),
                None => (
                    format!(
                        "SELECT {SELECT_COLUMNS} FROM threads WHERE ?1 IS NULL
                         ORDER BY updated_at DESC, id DESC"
                    ),
                    None,
                ),
            };
            let mut stmt = self.conn.prepare(&sql).map_err(|e| self.db_err(e))?;
            let mut rows = stmt
                .query_map(params![cwd_text], raw_row)
                .map_err(|e| self.db_err(e))?;
            // Rows are read lazily, so the usual case reads one row.
            for row in rows.by_ref() {
                let raw = row.map_err(|e| self.db_err(e))?;
                if Path::new(&raw.rollout_path).is_file() {
                    raws.push(raw);
                    break;
                }
                tracing::debug!(
                    "skipping thread {}: rollout {} is gone",
                    raw.id,
                    raw.rollout_path
                );
            }
        }
        raws.pop().map(|raw| self.parse(raw)).transpose()
    }

    /// Up to `limit` threads, most recently updated first, starting after `cursor` (a
    /// [`ThreadRecord::cursor`] of the previous page's last record).
    #[cfg(test)]
    pub(crate) fn list(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = Vec::new();
        match cursor {
            Some(cursor) => {
                let (updated_at, id) =
                    cursor
                        .split_once('|')
                        .ok_or_else(|| StoreError::IndexValue {
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

    /// Marks a thread archived (hidden from default listings) or not. Returns whether the
    /// index knows the thread. The index is a cache, so the decision is also appended to
    /// `<home>/archived_threads.jsonl`, from which a rebuilt index takes it back.
    pub(crate) fn set_archived(&self, id: ThreadId, archived: bool) -> Result<bool, StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE threads SET archived = ?2 WHERE id = ?1",
                params![id.to_string(), archived],
            )
            .map_err(|e| self.db_err(e))?;
        if changed > 0 {
            self.append_decision(ARCHIVE_LOG_FILE, id, "archived", archived.into())?;
        }
        Ok(changed > 0)
    }

    /// Re-applies the archive decisions of `archived_threads.jsonl` (the last line per
    /// thread wins) to a freshly built index. Unreadable lines are skipped.
    fn apply_archive_log(&self) -> Result<(), StoreError> {
        for (id, archived) in self.latest_decisions(ARCHIVE_LOG_FILE, "archived")? {
            let Some(archived) = archived.as_bool() else {
                continue;
            };
            self.conn
                .execute(
                    "UPDATE threads SET archived = ?2 WHERE id = ?1",
                    params![id, archived],
                )
                .map_err(|e| self.db_err(e))?;
        }
        Ok(())
    }

    /// Appends one decision about thread `id` (`field` = `value`) to the log `file`
    /// beside the index. The index is a cache; these logs are what a rebuilt index takes
    /// user decisions (archiving, names) back from.
    fn append_decision(
        &self,
        file: &str,
        id: ThreadId,
        field: &str,
        value: serde_json::Value,
    ) -> Result<(), StoreError> {
        let log = self.path.with_file_name(file);
        let mut entry = serde_json::Map::new();
        entry.insert("id".into(), id.to_string().into());
        entry.insert(field.into(), value);
        entry.insert("at".into(), format_timestamp(&Utc::now()).into());
        let line = serde_json::Value::Object(entry).to_string() + "\n";
        interpreter_private_fs::open(&log, std::fs::OpenOptions::new().create(true).append(true))
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()))
            .map_err(|source| StoreError::io("append to", &log, source))
    }

    /// The last `field` value per thread id in the decision log `file` (empty when the
    /// log does not exist). Unreadable lines are skipped.
    fn latest_decisions(
        &self,
        file: &str,
        field: &str,
    ) -> Result<HashMap<String, serde_json::Value>, StoreError> {
        let log = self.path.with_file_name(file);
        let text = match std::fs::read_to_string(&log) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
            Err(source) => return Err(StoreError::io("read", &log, source)),
        };
        let mut latest = HashMap::new();
        for line in text.lines() {
            let Ok(serde_json::Value::Object(mut entry)) = serde_json::from_str(line) else {
                continue;
            };
            if let (Some(serde_json::Value::String(id)), Some(value)) =
                (entry.remove("id"), entry.remove(field))
            {
                latest.insert(id, value);
            }
        }
        Ok(latest)
    }

    /// Forgets thread `id`; returns whether the index knew it.
    pub(crate) fn remove(&self, id: ThreadId) -> Result<bool, StoreError> {
        let removed = self
            .conn
            .execute("DELETE FROM threads WHERE id = ?1", params![id.to_string()])
            .map_err(|e| self.db_err(e))?;
        Ok(removed > 0)
    }

    /// Names a thread (`None` or an empty name clears it). Returns whether the index
    /// knows the thread. Like archiving, the name is also appended to
    /// `<home>/thread_names.jsonl`, from which a rebuilt index takes it back.
    pub(crate) fn set_name(&self, id: ThreadId, name: Option<&str>) -> Result<bool, StoreError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty());
        let changed = self
            .conn
            .execute(
                "UPDATE threads SET name = ?2 WHERE id = ?1",
                params![id.to_string(), name],
            )
            .map_err(|e| self.db_err(e))?;
        if changed > 0 {
            self.append_decision(NAME_LOG_FILE, id, "name", name.into())?;
        }
        Ok(changed > 0)
    }

    /// Re-applies `thread_names.jsonl` (the last line per thread wins) to a freshly
    /// built index. Unreadable lines are skipped.
    fn apply_name_log(&self) -> Result<(), StoreError> {
        for (id, name) in self.latest_decisions(NAME_LOG_FILE, "name")? {
            self.conn
                .execute(
                    "UPDATE threads SET name = ?2 WHERE id = ?1",
                    params![id, name.as_str()],
                )
                .map_err(|e| self.db_err(e))?;
        }
        Ok(())
    }

    /// Stores (or with `None`, or an empty value, clears) a thread's git metadata.
    /// Returns whether the index knows the thread. Like names, every change is also
    /// appended to `<home>/thread_git_info.jsonl`, from which a rebuilt index takes it back.
    pub(crate) fn set_git_info(
        &self,
        id: ThreadId,
        git_info: Option<&ThreadGitInfo>,
    ) -> Result<bool, StoreError> {
        let git_info = git_info.filter(|info| !info.is_empty());
        let text = git_info.map(git_info_to_text).transpose()?;
        let changed = self
            .conn
            .execute(
                "UPDATE threads SET git_info = ?2 WHERE id = ?1",
                params![id.to_string(), text],
            )
            .map_err(|e| self.db_err(e))?;
        if changed > 0 {
            let value = match git_info {
                Some(info) => serde_json::to_value(info).map_err(|e| StoreError::IndexValue {
                    path: self.path.clone(),
                    message: e.to_string(),
                })?,
                None => serde_json::Value::Null,
            };
            self.append_decision(GIT_INFO_LOG_FILE, id, "gitInfo", value)?;
        }
        Ok(changed > 0)
    }

    /// Re-applies `thread_git_info.jsonl` (the last line per thread wins) to a freshly
    /// built index. Lines that do not hold git metadata are skipped.
    fn apply_git_info_log(&self) -> Result<(), StoreError> {
        for (id, value) in self.latest_decisions(GIT_INFO_LOG_FILE, "gitInfo")? {
            let info = match value {
                serde_json::Value::Null => None,
                value => match serde_json::from_value::<ThreadGitInfo>(value) {
                    Ok(info) if !info.is_empty() => Some(info),
                    Ok(_) => None,
                    Err(_) => continue,
                },
            };
            let text = info.as_ref().map(git_info_to_text).transpose()?;
            self.conn
                .execute(
                    "UPDATE threads SET git_info = ?2 WHERE id = ?1",
                    params![id, text],
                )
                .map_err(|e| self.db_err(e))?;
        }
        Ok(())
    }

    /// How many threads the index holds.
    pub(crate) fn count(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM threads", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|count| u64::try_from(count).unwrap_or_default())
            .map_err(|e| self.db_err(e))
    }

    /// Whether a thread is archived (`None` when the index does not know it).
    pub(crate) fn is_archived(&self, id: ThreadId) -> Result<Option<bool>, StoreError> {
        self.conn
            .query_row(
                "SELECT archived FROM threads WHERE id = ?1",
                params![id.to_string()],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.db_err(e))
    }

    /// One page of threads matching `query`, and the cursor of the next page (`None` on
    /// the last one). Keyset pagination on `(timestamp, id)`: threads added while a client
    /// pages do not shift the pages it has not read yet.
    pub(crate) fn list_page(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        let column = match query.sort_key {
            ListSortKey::CreatedAt => "created_at",
            ListSortKey::UpdatedAt => "updated_at",
        };
        let (order, compare) = match query.direction {
            ListDirection::Desc => ("DESC", "<"),
            ListDirection::Asc => ("ASC", ">"),
        };
        let mut conditions = vec!["archived = ?".to_string()];
        let mut values: Vec<rusqlite::types::Value> =
            vec![rusqlite::types::Value::Integer(i64::from(query.archived))];
        if query.require_preview {
            conditions.push("preview IS NOT NULL AND preview <> ''".to_string());
        }
        if let Some(cursor) = &query.cursor {
            let cursor = ListCursor::parse(cursor)?;
            conditions.push(format!("({column}, id) {compare} (?, ?)"));
            values.push(rusqlite::types::Value::Text(cursor.anchor.to_string()));
            values.push(rusqlite::types::Value::Text(cursor.id.to_string()));
        }
        let mut any_of = |column: &str, texts: &[String]| {
            if texts.is_empty() {
                return;
            }
            let marks = vec!["?"; texts.len()].join(", ");
            conditions.push(format!("{column} IN ({marks})"));
            values.extend(
                texts
                    .iter()
                    .map(|t| rusqlite::types::Value::Text(t.clone())),
            );
        };
        let cwds: Vec<String> = query
            .cwds
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        any_of("cwd", &cwds);
        let sources: Vec<String> = query.sources.iter().map(|s| source_to_text(*s)).collect();
        any_of("source", &sources);
        any_of("model_provider", &query.model_providers);
        let ids: Vec<String> = query.ids.iter().map(ToString::to_string).collect();
        any_of("id", &ids);
        if !query.excluded_ids.is_empty() {
            let marks = vec!["?"; query.excluded_ids.len()].join(", ");
            conditions.push(format!("id NOT IN ({marks})"));
            values.extend(
                query
                    .excluded_ids
                    .iter()
                    .map(|id| rusqlite::types::Value::Text(id.to_string())),
            );
        }
        if let Some(term) = query.search_term.as_deref().filter(|t| !t.is_empty()) {
            conditions.push("instr(preview, ?) > 0".to_string());
            values.push(rusqlite::types::Value::Text(term.to_string()));
        }
        let limit = query.limit.max(1);
        values.push(rusqlite::types::Value::Integer(
            i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1),
        ));
        let sql = format!(
            "SELECT {SELECT_COLUMNS} FROM threads WHERE {} ORDER BY {column} {order}, id {order} LIMIT ?",
            conditions.join(" AND ")
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        let mapped = stmt
            .query_map(rusqlite::params_from_iter(values), raw_row)
            .map_err(|e| self.db_err(e))?;
        let mut raws = Vec::new();
        for row in mapped {
            raws.push(row.map_err(|e| self.db_err(e))?);
        }
        let more = raws.len() > limit;
        raws.truncate(limit);
        let records = raws
            .into_iter()
            .map(|raw| self.parse(raw))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListPage::of_records(records, more, query.sort_key))
    }

    fn query_one(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<ThreadRecord>, StoreError> {
        let raw = self
            .conn
            .query_row(sql, params, raw_row)
            .optional()
            .map_err(|e| self.db_err(e))?;
        raw.map(|raw| self.parse(raw)).transpose()
    }

    fn parse(&self, raw: RawRow) -> Result<ThreadRecord, StoreError> {
        let invalid = |message: String| StoreError::IndexValue {
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
            rollout_path: Some(PathBuf::from(raw.rollout_path)),
            created_at: timestamp(&raw.created_at)?,
            updated_at: timestamp(&raw.updated_at)?,
            cwd: PathBuf::from(raw.cwd),
            model_provider: raw.model_provider,
            model: raw.model,
            source: source_from_text(&raw.source),
            preview: raw.preview,
            name: raw.name,
            // A value this version cannot read (another version's shape) shows as unknown
            // rather than making the whole thread unreadable.
            git_info: raw
                .git_info
                .as_deref()
                .and_then(|text| serde_json::from_str::<ThreadGitInfo>(text).ok())
                .filter(|info| !info.is_empty()),
        })
    }
}

/// Which timestamp [`ThreadIndex::list_page`] sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListSortKey {
    #[default]
    CreatedAt,
    UpdatedAt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListDirection {
    #[default]
    Desc,
    Asc,
}

/// What [`ThreadIndex::list_page`] selects. Empty filter lists mean "any".
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub limit: usize,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    pub sort_key: ListSortKey,
    pub direction: ListDirection,
    /// Archived threads only (`true`) or unarchived only (`false`).
    pub archived: bool,
    pub cwds: Vec<PathBuf>,
    pub sources: Vec<SessionSource>,
    pub model_providers: Vec<String>,
    /// Case-sensitive substring of the preview.
    pub search_term: Option<String>,
    /// Skip threads with no user message yet.
    pub require_preview: bool,
    /// Only these threads (any when empty).
    pub ids: Vec<ThreadId>,
    /// Never these threads.
    pub excluded_ids: Vec<ThreadId>,
}

/// One page of [`ThreadIndex::list_page`].
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    pub records: Vec<ThreadRecord>,
    pub next_cursor: Option<String>,
    /// Anchored at the page's first record: with the opposite direction it lists what
    /// comes before this page. `None` for an empty page.
    pub backwards_cursor: Option<String>,
}

impl ListPage {
    /// A page of `records` in listing order, `more` when the listing goes on past them;
    /// the cursors anchor at its last and first record by `sort_key`.
    pub(crate) fn of_records(
        records: Vec<ThreadRecord>,
        more: bool,
        sort_key: ListSortKey,
    ) -> Self {
        let cursor_of = |record: &ThreadRecord| {
            let at = match sort_key {
                ListSortKey::CreatedAt => &record.created_at,
                ListSortKey::UpdatedAt => &record.updated_at,
            };
            format!("{}|{}", format_timestamp(at), record.id)
        };
        Self {
            next_cursor: if more {
                records.last().map(cursor_of)
            } else {
                None
            },
            backwards_cursor: records.first().map(cursor_of),
            records,
        }
    }
}

/// A listing cursor, `<timestamp>|<thread id>`: the sort value and id of the record a
/// page continues after (every store pages by that pair).
pub(crate) struct ListCursor<'a> {
    /// The timestamp as written in the cursor.
    pub anchor: &'a str,
    pub at: DateTime<Utc>,
    /// The thread id as written in the cursor.
    pub id: &'a str,
}

impl<'a> ListCursor<'a> {
    /// Refuses a cursor no listing produced.
    pub(crate) fn parse(cursor: &'a str) -> Result<Self, StoreError> {
        cursor
            .split_once('|')
            .and_then(|(anchor, id)| {
                let at = DateTime::parse_from_rfc3339(anchor).ok()?;
                ThreadId::from_str(id).ok()?;
                Some(Self {
                    anchor,
                    at: at.with_timezone(&Utc),
                    id,
                })
            })
            .ok_or_else(|| StoreError::InvalidCursor(cursor.to_string()))
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
    name: Option<String>,
    git_info: Option<String>,
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
        name: row.get(9)?,
        git_info: row.get(10)?,
    })
}

fn git_info_to_text(info: &ThreadGitInfo) -> Result<String, StoreError> {
    serde_json::to_string(info).map_err(|e| StoreError::IndexValue {
        path: PathBuf::new(),
        message: format!("git metadata not serialisable: {e}"),
    })
}

pub(crate) fn source_to_text(source: SessionSource) -> String {
    match serde_json::to_value(source) {
        Ok(serde_json::Value::String(text)) => text,
        _ => "unknown".to_string(),
    }
}

pub(crate) fn source_from_text(text: &str) -> SessionSource {
    serde_json::from_value(serde_json::Value::String(text.to_string())).unwrap_or_default()
}

/// Finds the rollout of thread `id`: through the index when it knows the thread and the
/// file is still there, otherwise by scanning `<home>/sessions/` for `*-<id>.jsonl`, in
/// which case the index is repaired. Index failures are logged, never fatal.
pub(crate) fn find_rollout(home: &Path, id: ThreadId) -> Result<Option<PathBuf>, StoreError> {
    let (found, repairs) = find_rollout_with_repairs(home, id)?;
    log_repairs(&repairs);
    Ok(found)
}

/// [`find_rollout`], returning what was repaired instead of logging it.
pub(crate) fn find_rollout_with_repairs(
    home: &Path,
    id: ThreadId,
) -> Result<(Option<PathBuf>, Vec<IndexRepair>), StoreError> {
    let (index, mut repairs) = match ThreadIndex::open_with_repairs(home) {
        Ok((index, repairs)) => (Some(index), repairs),
        Err(err) => {
            tracing::warn!("thread index unavailable, scanning sessions instead: {err}");
            (None, Vec::new())
        }
    };
    if let Some(index) = &index {
        match index.get(id) {
            Ok(Some(ThreadRecord {
                rollout_path: Some(path),
                ..
            })) if path.is_file() => {
                return Ok((Some(path), repairs));
            }
            Ok(_) => {}
            Err(err) => tracing::warn!("thread index lookup failed: {err}"),
        }
    }

    let suffix = format!("-{id}.jsonl");
    let Some(path) = scan_for_suffix(&home.join(SESSIONS_DIR), &suffix)? else {
        return Ok((None, repairs));
    };
    if let Some(index) = &index {
        // An unreadable file is still returned: resuming it reports the problem by name.
        match index.index_files(std::slice::from_ref(&path)) {
            Ok((indexed, skipped)) if indexed > 0 || !skipped.is_empty() => {
                repairs.push(IndexRepair::CaughtUp { indexed, skipped });
            }
            Ok(_) => {}
            Err(err) => tracing::warn!("failed to repair the thread index entry of {id}: {err}"),
        }
    }
    Ok((Some(path), repairs))
}

/// Deletes thread `id` for good: its rollout file, then its index entry (the file first,
/// so an index rebuilt after a crash in between cannot bring it back). Returns whether
/// there was such a thread. The thread must not be live.
pub(crate) fn delete_thread(home: &Path, id: ThreadId) -> Result<bool, StoreError> {
    let (found, repairs) = find_rollout_with_repairs(home, id)?;
    log_repairs(&repairs);
    let Some(path) = found else {
        return Ok(false);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(StoreError::io("delete", &path, source)),
    }
    match ThreadIndex::open_without_repair(home).and_then(|index| index.remove(id)) {
        Ok(_) => {}
        // The file is gone, so the next repair drops the stale entry.
        Err(err) => tracing::warn!(
            "thread {id} deleted, but its index entry stays until the next repair: {err}"
        ),
    }
    Ok(true)
}

/// The thread `resume --last` continues: the newest one (in `cwd` when given) whose
/// rollout still exists. The index is healed first and caught up with `sessions/`; when
/// it cannot be used at all, the rollouts themselves are searched.
pub(crate) fn find_latest(
    home: &Path,
    cwd: Option<&Path>,
) -> Result<(Option<ThreadRecord>, Vec<IndexRepair>), StoreError> {
    let (index, mut repairs) = match ThreadIndex::open_with_repairs(home) {
        Ok(opened) => opened,
        Err(err) => {
            tracing::warn!("thread index unavailable, scanning sessions instead: {err}");
            return Ok((latest_from_disk(home, cwd)?, Vec::new()));
        }
    };
    // A freshly rebuilt index is already current; otherwise check that it is not behind.
    if repairs.is_empty() {
        match index.catch_up(home) {
            Ok(Some(repair)) => repairs.push(repair),
            Ok(None) => {}
            Err(err) => tracing::warn!("could not compare the thread index with sessions: {err}"),
        }
    }
    Ok((index.latest(cwd)?, repairs))
}

/// The newest rollout by modification time, read straight from `sessions/`.
fn latest_from_disk(home: &Path, cwd: Option<&Path>) -> Result<Option<ThreadRecord>, StoreError> {
    let latest = list_rollout_files(&home.join(SESSIONS_DIR))?
        .iter()
        .filter_map(|file| ThreadRecord::from_file(file).ok())
        .filter(|record| cwd.is_none_or(|cwd| record.cwd == cwd))
        .max_by_key(|record| (record.updated_at, record.id.to_string()));
    Ok(latest)
}

/// How the index compares with `sessions/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexHealth {
    /// Rows in the index.
    pub indexed: usize,
    /// Rollout files in `sessions/`.
    pub on_disk: usize,
    /// Rollout files the index does not know (or knows under another path).
    pub not_indexed: Vec<PathBuf>,
    /// Indexed rollout paths that no longer exist.
    pub missing_files: Vec<PathBuf>,
    /// Rollout files without a readable thread (0 bytes, no metadata).
    pub unreadable: Vec<PathBuf>,
}

impl IndexHealth {
    pub fn is_consistent(&self) -> bool {
        self.not_indexed.is_empty() && self.missing_files.is_empty() && self.unreadable.is_empty()
    }
}

/// Connects to the database and makes sure it has our schema. Returns whether the
/// thread table was created now (so the caller rebuilds it from the rollouts).
fn connect(path: &Path) -> Result<(Connection, bool), ConnectFailure> {
    let conn = Connection::open(path).map_err(classify)?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(ConnectFailure::Other)?;
    // The pragma answers with the resulting mode, so it must be read as a query. It is
    // also the first statement that reads the file, so garbage shows up here.
    let _mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .map_err(classify)?;
    let existed: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'threads')",
            [],
            |row| row.get(0),
        )
        .map_err(classify)?;
    if existed {
        // A table of another shape (another program's file, a future version's schema)
        // would fail every query later; find out now, while it can still be moved aside.
        if let Err(err) = conn.prepare(&format!("SELECT {BASE_COLUMNS} FROM threads LIMIT 0")) {
            return Err(match err.sqlite_error_code() {
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
                    ConnectFailure::Other(err)
                }
                _ => ConnectFailure::Unreadable(format!("wrong schema: {err}")),
            });
        }
    }
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
    .map_err(classify)?;
    migrate(&conn).map_err(ConnectFailure::Other)?;
    Ok((conn, !existed))
}

/// Columns added after the first release, each with a default, so an index written by an
/// older version gains them in place (no rebuild) and older versions can still read it
/// (they select their own columns only).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_archived: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('threads') WHERE name = 'archived')",
        [],
        |row| row.get(0),
    )?;
    if !has_archived {
        conn.execute_batch("ALTER TABLE threads ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;")?;
    }
    let has_name: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('threads') WHERE name = 'name')",
        [],
        |row| row.get(0),
    )?;
    if !has_name {
        conn.execute_batch("ALTER TABLE threads ADD COLUMN name TEXT;")?;
    }
    let has_git_info: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('threads') WHERE name = 'git_info')",
        [],
        |row| row.get(0),
    )?;
    if !has_git_info {
        // JSON of a `ThreadGitInfo`; NULL when nothing is known.
        conn.execute_batch("ALTER TABLE threads ADD COLUMN git_info TEXT;")?;
    }
    // Paged listings filter on `archived` and sort by a timestamp; these serve both sorts.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS threads_archived_created
             ON threads (archived, created_at DESC, id DESC);
         CREATE INDEX IF NOT EXISTS threads_archived_updated
             ON threads (archived, updated_at DESC, id DESC);",
    )
}

/// The database (created empty when missing: SQLite takes an empty file for an empty
/// database) and the journal files beside it, mode 0600: the index holds every thread's
/// preview and working directory. SQLite gives the journal files it creates the mode of
/// the database, so a private database keeps them private; files left by an older
/// version are tightened here.
fn make_private(path: &Path) -> Result<(), StoreError> {
    interpreter_private_fs::ensure_file(path)
        .map_err(|source| StoreError::io("create", path, source))?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| STATE_DB_FILE.to_string());
    for suffix in ["-wal", "-shm", "-journal"] {
        let side = path.with_file_name(format!("{name}{suffix}"));
        interpreter_private_fs::restrict(&side)
            .map_err(|source| StoreError::io("restrict", &side, source))?;
    }
    Ok(())
}

/// Renames an unusable `state.sqlite` (and its WAL files, which belong to it) to
/// `state.sqlite.corrupt-<UTC time>`: it may still hold something a user wants, and the
/// index is rebuilt from the rollouts anyway.
fn move_aside(path: &Path) -> Result<PathBuf, StoreError> {
    let stamp = Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| STATE_DB_FILE.to_string());
    let target = path.with_file_name(format!("{file_name}.corrupt-{stamp}"));
    match std::fs::rename(path, &target) {
        Ok(()) => {}
        // Another process moved it first; it rebuilds, and so do we.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(StoreError::io("move aside", path, source)),
    }
    for suffix in ["-wal", "-shm"] {
        let side = path.with_file_name(format!("{file_name}{suffix}"));
        if side.exists() {
            let side_target = path.with_file_name(format!("{file_name}.corrupt-{stamp}{suffix}"));
            if let Err(err) = std::fs::rename(&side, &side_target) {
                tracing::warn!("could not move {} aside: {err}", side.display());
            }
        }
    }
    Ok(target)
}

/// Every `*.jsonl` file under `sessions/`, in no particular order. Only directory
/// entries are read, which is cheap even for thousands of rollouts.
pub fn list_rollout_files(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(StoreError::io("list", &dir, source)),
        };
        for entry in entries {
            let entry = entry.map_err(|source| StoreError::io("list", &dir, source))?;
            let path = entry.path();
            let file_type = entry
                .file_type()
                .map_err(|source| StoreError::io("inspect", &path, source))?;
            if file_type.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "jsonl") {
                files.push(path);
            }
        }
    }
    Ok(files)
}

/// `rollout-<ts>-<uuid>.jsonl` → the uuid.
pub(crate) fn thread_id_from_file_name(path: &Path) -> Option<ThreadId> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let start = stem.len().checked_sub(36)?;
    ThreadId::from_str(stem.get(start..)?).ok()
}

fn scan_for_suffix(dir: &Path, suffix: &str) -> Result<Option<PathBuf>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::io("list", dir, source)),
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", dir, source))?;
        let path = entry.path();
        let file_type = entry
            .file_type()
            .map_err(|source| StoreError::io("inspect", &path, source))?;
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
