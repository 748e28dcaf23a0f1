//! [`LocalStore`]: threads as JSONL rollouts under `<home>/sessions/`, found and listed
//! through the `<home>/state.sqlite` index, which heals itself from the rollouts (see
//! `crate::store::rollout`). One machine's threads; several processes on that machine
//! may share a home.
//!
//! The file and SQLite work is blocking, so it runs on tokio's blocking pool, each call
//! under [`LOCAL_DEADLINE`]. The index connection is opened once per store and shared.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use interpreter_protocol::ThreadId;

use super::{
    CreatedThread, Imported, OpenedThread, StoreError, StoreStatus, ThreadStore, ThreadWriter,
};
use crate::store::rollout::{
    self, ListPage, ListQuery, RolloutItem, RolloutRead, RolloutRecorder, SessionMeta,
    ThreadGitInfo, ThreadIndex, ThreadRecord,
};

pub use crate::store::rollout::{
    ARCHIVE_LOG_FILE, IndexHealth, IndexRepair, NAME_LOG_FILE, RebuildCause, SESSIONS_DIR,
    STATE_DB_FILE, list_rollout_files, write_rollout,
};

/// The thread id a rollout file is named after (`rollout-<time>-<id>.jsonl`).
pub fn thread_id_of_rollout(path: &Path) -> Option<ThreadId> {
    rollout::thread_id_from_file_name(path)
}

/// Deadline of one call into the files or the index: a stuck disk is an error, not a
/// hung request.
const LOCAL_DEADLINE: Duration = Duration::from_secs(30);

/// Threads under one home directory.
#[derive(Debug, Clone)]
pub struct LocalStore {
    home: PathBuf,
    /// Opened (and healed) on first use, then shared by this store's calls.
    index: Arc<Mutex<Option<ThreadIndex>>>,
}

impl LocalStore {
    pub fn new(home: PathBuf) -> Self {
        Self {
            home,
            index: Arc::default(),
        }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Runs `work` on the blocking pool under the deadline.
    async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Path) -> Result<T, StoreError> + Send + 'static,
    {
        let home = self.home.clone();
        let label = home.join(SESSIONS_DIR);
        let task = tokio::task::spawn_blocking(move || work(&home));
        match tokio::time::timeout(LOCAL_DEADLINE, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join_err)) => Err(StoreError::WriterFailed {
                path: label,
                message: join_err.to_string(),
            }),
            Err(_) => Err(StoreError::WriteTimeout {
                path: label,
                seconds: LOCAL_DEADLINE.as_secs(),
            }),
        }
    }

    /// Runs `work` on the shared index connection.
    async fn with_index<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&ThreadIndex, &Path) -> Result<T, StoreError> + Send + 'static,
    {
        let index = Arc::clone(&self.index);
        self.blocking(move |home| {
            let mut guard = index.lock().map_err(|_| StoreError::WriterFailed {
                path: home.join(STATE_DB_FILE),
                message: "a previous index call panicked".into(),
            })?;
            let index = match guard.take() {
                Some(index) => index,
                None => ThreadIndex::open(home)?,
            };
            let result = work(&index, home);
            *guard = Some(index);
            result
        })
        .await
    }

    /// Compares the index with the rollouts without repairing anything (doctor).
    pub async fn index_health(&self) -> Result<IndexHealth, StoreError> {
        self.blocking(|home| ThreadIndex::open_without_repair(home)?.compare_with_disk(home))
            .await
    }
}

#[async_trait]
impl ThreadStore for LocalStore {
    fn describe(&self) -> String {
        format!("local ({})", self.home.display())
    }

    async fn create(&self, meta: SessionMeta) -> Result<CreatedThread, StoreError> {
        let (recorder, repairs) = RolloutRecorder::create(&self.home, meta).await?;
        Ok(CreatedThread {
            writer: Arc::new(recorder),
            notices: repairs.iter().map(ToString::to_string).collect(),
        })
    }

    async fn open(&self, id: ThreadId) -> Result<OpenedThread, StoreError> {
        let (path, items, notices) = self
            .blocking(move |home| {
                let (path, repairs) = rollout::find_rollout_with_repairs(home, id)?;
                let path = path.ok_or(StoreError::NotFound(id))?;
                let read = rollout::read_resumable(&path)?;
                let notices = repairs
                    .iter()
                    .map(ToString::to_string)
                    .chain(read.skipped.map(|skipped| skipped.to_string()))
                    .collect();
                Ok((path, read.items, notices))
            })
            .await?;
        let recorder = RolloutRecorder::open_existing(&path).await?;
        Ok(OpenedThread {
            items,
            notices,
            writer: Arc::new(recorder),
        })
    }

    async fn read(&self, id: ThreadId) -> Result<Option<RolloutRead>, StoreError> {
        self.blocking(move |home| match rollout::find_rollout(home, id)? {
            Some(path) => rollout::read_rollout_with_notes(&path).map(Some),
            None => Ok(None),
        })
        .await
    }

    async fn get(&self, id: ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        if let Some(record) = self.with_index(move |index, _| index.get(id)).await? {
            return Ok(Some(record));
        }
        // Not indexed (yet): finding the rollout indexes it.
        let found = self
            .blocking(move |home| rollout::find_rollout(home, id))
            .await?;
        if found.is_none() {
            return Ok(None);
        }
        self.with_index(move |index, _| index.get(id)).await
    }

    async fn latest(
        &self,
        cwd: Option<PathBuf>,
    ) -> Result<(Option<ThreadRecord>, Vec<String>), StoreError> {
        self.blocking(move |home| {
            let (latest, repairs) = rollout::find_latest(home, cwd.as_deref())?;
            Ok((latest, repairs.iter().map(ToString::to_string).collect()))
        })
        .await
    }

    async fn list(&self, query: ListQuery) -> Result<ListPage, StoreError> {
        self.with_index(move |index, _| index.list_page(&query))
            .await
    }

    async fn set_archived(&self, id: ThreadId, archived: bool) -> Result<bool, StoreError> {
        self.with_index(move |index, _| index.set_archived(id, archived))
            .await
    }

    async fn is_archived(&self, id: ThreadId) -> Result<Option<bool>, StoreError> {
        self.with_index(move |index, _| index.is_archived(id)).await
    }

    async fn set_name(&self, id: ThreadId, name: Option<String>) -> Result<bool, StoreError> {
        self.with_index(move |index, _| index.set_name(id, name.as_deref()))
            .await
    }

    async fn set_git_info(
        &self,
        id: ThreadId,
        info: Option<ThreadGitInfo>,
    ) -> Result<bool, StoreError> {
        self.with_index(move |index, _| index.set_git_info(id, info.as_ref()))
            .await
    }

    async fn delete(&self, id: ThreadId) -> Result<bool, StoreError> {
        self.blocking(move |home| rollout::delete_thread(home, id))
            .await
    }

    async fn import(
        &self,
        meta: SessionMeta,
        items: Vec<RolloutItem>,
        updated_at: Option<DateTime<Utc>>,
    ) -> Result<Imported, StoreError> {
        self.with_index(move |index, home| {
            if rollout::find_rollout(home, meta.id)?.is_some() {
                return Ok(Imported::AlreadyPresent);
            }
            let path = rollout::write_rollout(home, &meta, &items)?;
            if let Some(at) = updated_at {
                // The index takes a rollout's last update from its modification time.
                std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(at.into()))
                    .map_err(|source| StoreError::io("set the time of", &path, source))?;
            }
            // Registered now, so listing and resuming find it without a rescan.
            index.index_file(&path)?;
            Ok(Imported::Created)
        })
        .await
    }

    async fn export(&self, id: ThreadId) -> Result<Option<Vec<u8>>, StoreError> {
        self.blocking(move |home| match rollout::find_rollout(home, id)? {
            Some(path) => std::fs::read(&path)
                .map(Some)
                .map_err(|source| StoreError::io("read", &path, source)),
            None => Ok(None),
        })
        .await
    }

    async fn refresh(&self) -> Result<Vec<String>, StoreError> {
        let repair = self.with_index(|index, home| index.catch_up(home)).await?;
        Ok(repair.iter().map(ToString::to_string).collect())
    }

    async fn status(&self) -> Result<StoreStatus, StoreError> {
        let threads = self.with_index(|index, _| index.count()).await?;
        Ok(StoreStatus {
            description: self.describe(),
            threads,
            fleet: None,
        })
    }
}

#[async_trait]
impl ThreadWriter for RolloutRecorder {
    async fn append(&self, items: &[RolloutItem]) -> Result<(), StoreError> {
        self.record(items).await
    }

    fn path(&self) -> Option<&Path> {
        Some(RolloutRecorder::path(self))
    }
}
