//! Writing and reading rollout files.
//!
//! Writes happen on tokio's blocking pool (`spawn_blocking`) under a mutex, one
//! `write_all` per record line on an unbuffered file, so every record reaches the OS as
//! soon as `record` returns and a crash loses at most the line being written. Callers
//! that need records in order await each `record` call before the next (the engine's
//! turn loop does). Each write has a deadline, so a stuck filesystem surfaces as an error
//! instead of a hung turn.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{Local, Utc};
use interpreter_protocol::ThreadId;

use super::index::{
    IndexRepair, SESSIONS_DIR, ThreadIndex, ThreadRecord, thread_id_from_file_name,
};
use super::item::{RolloutItem, RolloutLine, SessionMeta, first_user_message};
use crate::store::StoreError;

/// Deadline of one blocking file operation.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Appends records to one thread's rollout file and keeps its index entry current.
#[derive(Debug, Clone)]
pub(crate) struct RolloutRecorder {
    path: PathBuf,
    state: Arc<Mutex<WriterState>>,
}

#[derive(Debug)]
struct WriterState {
    file: File,
    /// `None` when the index could not be opened or the file is outside a home's
    /// `sessions/` tree; the rollout is still written.
    index: Option<ThreadIndex>,
    thread_id: Option<ThreadId>,
    has_preview: bool,
}

impl RolloutRecorder {
    /// Creates `<home>/sessions/YYYY/MM/DD/rollout-<local time>-<id>.jsonl`, writes the
    /// `session_meta` line, and registers the thread in the index. Returns what healing
    /// the index repaired on the way, for the engine to tell the user.
    pub(crate) async fn create(
        home: &Path,
        meta: SessionMeta,
    ) -> Result<(Self, Vec<IndexRepair>), StoreError> {
        let home = home.to_path_buf();
        let label = home.join(SESSIONS_DIR);
        run_blocking(&label, move || create_blocking(&home, meta)).await
    }

    /// Opens an existing rollout for appending (resuming a thread). A last line cut short
    /// by a crash is terminated first, so the next record starts on its own line.
    pub(crate) async fn open_existing(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let label = path.clone();
        run_blocking(&label, move || open_existing_blocking(path)).await
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `items`, one line each, and updates the thread's index entry.
    pub(crate) async fn record(&self, items: &[RolloutItem]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let now = Utc::now();
        let mut lines = Vec::with_capacity(items.len());
        for item in items {
            let line = RolloutLine {
                timestamp: now,
                item: item.clone(),
            };
            let mut text =
                serde_json::to_string(&line).map_err(|source| StoreError::Serialize {
                    path: self.path.clone(),
                    source,
                })?;
            text.push('\n');
            lines.push(text);
        }
        let preview = first_user_message(items).map(str::to_string);
        let state = Arc::clone(&self.state);
        let path = self.path.clone();
        run_blocking(&self.path, move || {
            let mut state = state.lock().map_err(|_| StoreError::WriterFailed {
                path: path.clone(),
                message: "a previous write panicked".into(),
            })?;
            for line in &lines {
                state
                    .file
                    .write_all(line.as_bytes())
                    .map_err(|source| StoreError::io("append to", &path, source))?;
            }
            state
                .file
                .flush()
                .map_err(|source| StoreError::io("flush", &path, source))?;
            state.touch_index(now, preview.as_deref());
            Ok(())
        })
        .await
    }
}

impl WriterState {
    fn touch_index(&mut self, now: chrono::DateTime<Utc>, preview: Option<&str>) {
        let (Some(index), Some(id)) = (&self.index, self.thread_id) else {
            return;
        };
        let preview = if self.has_preview { None } else { preview };
        match index.touch(id, now, preview) {
            Ok(()) => self.has_preview |= preview.is_some(),
            Err(err) => tracing::warn!("failed to update the thread index: {err}"),
        }
    }
}

async fn run_blocking<T, F>(label: &Path, work: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, StoreError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    match tokio::time::timeout(WRITE_TIMEOUT, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join_err)) => Err(StoreError::WriterFailed {
            path: label.to_path_buf(),
            message: join_err.to_string(),
        }),
        Err(_) => Err(StoreError::WriteTimeout {
            path: label.to_path_buf(),
            seconds: WRITE_TIMEOUT.as_secs(),
        }),
    }
}

/// Creates the rollout file of a new thread in the date layout and writes `items` after
/// its `session_meta` line. Does not touch the index.
fn create_file(
    home: &Path,
    meta: &SessionMeta,
    items: &[RolloutItem],
) -> Result<(File, PathBuf), StoreError> {
    let local = meta.timestamp.with_timezone(&Local);
    let dir = home
        .join(SESSIONS_DIR)
        .join(local.format("%Y").to_string())
        .join(local.format("%m").to_string())
        .join(local.format("%d").to_string());
    interpreter_private_fs::create_dir_all(&dir)
        .map_err(|source| StoreError::io("create directory", &dir, source))?;
    let path = dir.join(format!(
        "rollout-{}-{}.jsonl",
        local.format("%Y-%m-%dT%H-%M-%S"),
        meta.id
    ));
    // Private: a rollout holds every command's output and every file the model read.
    let mut file =
        interpreter_private_fs::open(&path, OpenOptions::new().create_new(true).append(true))
            .map_err(|source| StoreError::io("create", &path, source))?;

    // One write for the whole content: a new file is either complete or cut in its
    // last line, which reading tolerates.
    let now = Utc::now();
    let mut text = String::new();
    for item in std::iter::once(RolloutItem::SessionMeta(meta.clone())).chain(items.iter().cloned())
    {
        let line = RolloutLine {
            timestamp: now,
            item,
        };
        text.push_str(
            &serde_json::to_string(&line).map_err(|source| StoreError::Serialize {
                path: path.clone(),
                source,
            })?,
        );
        text.push('\n');
    }
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|source| StoreError::io("write", &path, source))?;
    Ok((file, path))
}

/// Writes a complete rollout for `meta` under `<home>/sessions/` in the layout and line
/// format the recorder uses, without registering it in the index: for importing threads
/// and for tests that need many rollouts quickly. The index learns them when it heals.
pub fn write_rollout(
    home: &Path,
    meta: &SessionMeta,
    items: &[RolloutItem],
) -> Result<PathBuf, StoreError> {
    create_file(home, meta, items).map(|(_, path)| path)
}

fn create_blocking(
    home: &Path,
    meta: SessionMeta,
) -> Result<(RolloutRecorder, Vec<IndexRepair>), StoreError> {
    // The index is opened (and healed) before the new rollout exists: opened after, a
    // fresh home's first thread looked like a rollout the index had lost, and its
    // creation was reported as a repair.
    let (index, repairs) = match ThreadIndex::open_with_repairs(home) {
        Ok((index, repairs)) => (Ok(index), repairs),
        Err(err) => (Err(err), Vec::new()),
    };
    let (file, path) = create_file(home, &meta, &[])?;

    let record = ThreadRecord {
        id: meta.id,
        rollout_path: Some(path.clone()),
        created_at: meta.timestamp,
        updated_at: meta.timestamp,
        cwd: meta.cwd,
        model_provider: meta.model_provider,
        model: meta.model,
        source: meta.source,
        preview: None,
        name: None,
        git_info: None,
    };
    let index = match index.and_then(|index| {
        index.upsert(&record)?;
        Ok(index)
    }) {
        Ok(index) => Some(index),
        Err(err) => {
            tracing::warn!("thread {} not registered in the index: {err}", meta.id);
            None
        }
    };
    let recorder = RolloutRecorder {
        path,
        state: Arc::new(Mutex::new(WriterState {
            file,
            index,
            thread_id: Some(meta.id),
            has_preview: false,
        })),
    };
    Ok((recorder, repairs))
}

fn open_existing_blocking(path: PathBuf) -> Result<RolloutRecorder, StoreError> {
    let mut file = interpreter_private_fs::open(&path, OpenOptions::new().read(true).append(true))
        .map_err(|source| StoreError::io("open", &path, source))?;
    let len = file
        .metadata()
        .map_err(|source| StoreError::io("inspect", &path, source))?
        .len();
    if len > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1))
            .and_then(|_| file.read_exact(&mut last))
            .map_err(|source| StoreError::io("read", &path, source))?;
        if last[0] != b'\n' {
            tracing::warn!(
                "{} ends with an incomplete line; starting a new line",
                path.display()
            );
            file.write_all(b"\n")
                .map_err(|source| StoreError::io("append to", &path, source))?;
        }
    }

    let thread_id = thread_id_from_file_name(&path);
    let (index, has_preview) = match (home_of_rollout(&path), thread_id) {
        (Some(home), Some(id)) => open_index_for(&home, id, &path),
        _ => (None, false),
    };
    Ok(RolloutRecorder {
        path,
        state: Arc::new(Mutex::new(WriterState {
            file,
            index,
            thread_id,
            has_preview,
        })),
    })
}

/// Opens the index for a resumed thread, re-registering it from the rollout when the
/// index lost it.
fn open_index_for(home: &Path, id: ThreadId, path: &Path) -> (Option<ThreadIndex>, bool) {
    let index = match ThreadIndex::open(home) {
        Ok(index) => index,
        Err(err) => {
            tracing::warn!("thread index unavailable: {err}");
            return (None, false);
        }
    };
    let record = match index.get(id) {
        Ok(Some(record)) => Some(record),
        Ok(None) => ThreadRecord::from_file(path)
            .map_err(|err| tracing::warn!("thread {id} not re-registered: {err}"))
            .ok()
            .filter(|record| {
                index
                    .upsert(record)
                    .map_err(|err| tracing::warn!("failed to re-register thread {id}: {err}"))
                    .is_ok()
            }),
        Err(err) => {
            tracing::warn!("thread index lookup failed: {err}");
            None
        }
    };
    let has_preview = record.is_some_and(|r| r.preview.is_some());
    (Some(index), has_preview)
}

/// `<home>/sessions/YYYY/MM/DD/<file>` → `<home>`.
fn home_of_rollout(path: &Path) -> Option<PathBuf> {
    let sessions = path.ancestors().nth(4)?;
    (sessions.file_name()? == SESSIONS_DIR)
        .then(|| sessions.parent().map(Path::to_path_buf))
        .flatten()
}
