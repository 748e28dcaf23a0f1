//! Where threads are kept: the one seam between the engine and its storage.
//!
//! A thread is its ordered list of records ([`RolloutItem`]: the session metadata, a
//! settings snapshot per turn, every model-visible item, the persisted events, patches'
//! edits and revert markers) plus an index entry ([`ThreadRecord`]) used to find and list
//! it. [`ThreadStore`] owns creating, appending, reading, listing, archiving, naming and
//! deleting threads, and which process may append to a running one. Two stores implement
//! it:
//!
//! - [`LocalStore`]: one JSONL rollout per thread under `<home>/sessions/` plus the
//!   `<home>/state.sqlite` index, healed from the rollouts (the default);
//! - `PgStore` (`thread_store = "postgres://…"`): the same records as rows in PostgreSQL,
//!   shared by every replica of a fleet, with a lease and an epoch per running thread.
//!
//! Every front end asks the store (through [`crate::ThreadManager::store`] or
//! [`open`]); none reads files itself. The record types are the rollout's, re-exported
//! here, so both stores hold the same JSON.

mod error;
pub mod local;
mod location;
pub mod postgres;
pub(crate) mod rollout;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use interpreter_protocol::ThreadId;

pub use error::{RUNS_ELSEWHERE_CODE, RUNS_ELSEWHERE_RETRY_AFTER_MS, RunsElsewhere, StoreError};
pub use local::LocalStore;
pub use location::{LOCAL_STORE, StoreLocation};
pub use postgres::{PgStore, Replica};

pub use rollout::{
    CompactedItem, FileEditsItem, ListDirection, ListPage, ListQuery, ListSortKey, MAX_LINE_BYTES,
    OversizedLine, PREVIEW_MAX_CHARS, RecordedContent, RecordedFileEdit, RevertedItem, RolloutItem,
    RolloutRead, SessionMeta, SkippedLines, ThreadGitInfo, ThreadRecord, TurnContextItem,
    TurnEntry, TurnOutcome, TurnRecord, apply_reverts, history_from_rollout, human_bytes,
    items_through_turn, last_turn_context, should_persist_event, turn_start, turns_from_rollout,
};

/// A thread just created: where to append its records, and what healing the store on
/// the way repaired (one line each, for the user).
#[derive(Debug)]
pub struct CreatedThread {
    pub writer: Arc<dyn ThreadWriter>,
    pub notices: Vec<String>,
}

/// A recorded thread opened to continue it (resume): its records, lines that could not be
/// read (one line each, for the user), and where to append.
#[derive(Debug)]
pub struct OpenedThread {
    pub items: Vec<RolloutItem>,
    pub notices: Vec<String>,
    pub writer: Arc<dyn ThreadWriter>,
}

/// The result of [`ThreadStore::import`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    Created,
    /// A thread with that id was already there; nothing was written.
    AlreadyPresent,
}

/// How a store is doing, for `interpreter doctor` and readiness probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    /// `local (/home/me/.interpreter)` or `postgres (db.internal:5432/interpreter)`.
    pub description: String,
    /// Threads recorded.
    pub threads: u64,
    /// What a store shared by several processes knows of them (`None` for a local home).
    pub fleet: Option<FleetStatus>,
}

/// The processes sharing a store, as its leases and heartbeats say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetStatus {
    /// Threads whose turn runs now (a live lease).
    pub running: u64,
    /// Other processes that heartbeat within the lease time (replicas, `exec` runs).
    pub other_processes: u64,
}

/// Thread storage. Every method has a deadline inside (a stuck disk or database is an
/// error, not a hung request) and is safe to call from many tasks at once.
#[async_trait]
pub trait ThreadStore: Send + Sync + std::fmt::Debug {
    /// Where the threads are, for messages: `local (<home>)`, `postgres (host/db)`.
    fn describe(&self) -> String;

    /// Records a new thread whose first record is `meta`, and takes it for this process.
    async fn create(&self, meta: SessionMeta) -> Result<CreatedThread, StoreError>;

    /// Opens a recorded thread to continue it, taking it for this process. A thread with
    /// no readable metadata is an error naming it: continuing would silently start an
    /// empty thread under an old id.
    async fn open(&self, id: ThreadId) -> Result<OpenedThread, StoreError>;

    /// Every readable record of a thread, in order, and what was left out; `None` when
    /// there is no such thread.
    async fn read(&self, id: ThreadId) -> Result<Option<RolloutRead>, StoreError>;

    /// The index entry of a thread.
    async fn get(&self, id: ThreadId) -> Result<Option<ThreadRecord>, StoreError>;

    /// The most recently updated thread (in `cwd` when given), and what healing the
    /// store on the way repaired.
    async fn latest(
        &self,
        cwd: Option<PathBuf>,
    ) -> Result<(Option<ThreadRecord>, Vec<String>), StoreError>;

    /// One page of threads (keyset paging: a page's `next_cursor` continues after it).
    async fn list(&self, query: ListQuery) -> Result<ListPage, StoreError>;

    /// Archives or unarchives a thread; `false` when there is no such thread.
    async fn set_archived(&self, id: ThreadId, archived: bool) -> Result<bool, StoreError>;

    /// Whether a thread is archived; `None` when there is no such thread.
    async fn is_archived(&self, id: ThreadId) -> Result<Option<bool>, StoreError>;

    /// Names (or unnames) a thread; `false` when there is no such thread.
    async fn set_name(&self, id: ThreadId, name: Option<String>) -> Result<bool, StoreError>;

    /// Records (or clears) a thread's git metadata; `false` when there is no such thread.
    async fn set_git_info(
        &self,
        id: ThreadId,
        info: Option<ThreadGitInfo>,
    ) -> Result<bool, StoreError>;

    /// Deletes a thread for good; `false` when there was no such thread. The thread must
    /// not be running anywhere.
    async fn delete(&self, id: ThreadId) -> Result<bool, StoreError>;

    /// Writes a whole thread at once (forks, `threads migrate`): `meta` and then `items`,
    /// last updated at `updated_at` (now when `None`), so a migrated thread keeps its
    /// place in listings. Idempotent: a thread with `meta.id` already recorded is left as
    /// it is.
    async fn import(
        &self,
        meta: SessionMeta,
        items: Vec<RolloutItem>,
        updated_at: Option<DateTime<Utc>>,
    ) -> Result<Imported, StoreError>;

    /// The thread as a rollout file holds it: one JSON record per line, the first its
    /// metadata (`threads export`); `None` when there is no such thread.
    async fn export(&self, id: ThreadId) -> Result<Option<Vec<u8>>, StoreError>;

    /// Brings the store's index up to date with its records, where those can be written
    /// behind its back (rollout files copied into a home); one line per repair.
    async fn refresh(&self) -> Result<Vec<String>, StoreError>;

    /// Whether the store answers, and how many threads it holds.
    async fn status(&self) -> Result<StoreStatus, StoreError>;

    /// The other live process that runs thread `id` now, if one does (this process's own
    /// lease, an expired one or none at all is `None`). Only a store shared by several
    /// processes can say so; a local home never does.
    async fn owner_elsewhere(&self, _id: ThreadId) -> Result<Option<RemoteOwner>, StoreError> {
        Ok(None)
    }

    /// Whether the process `replica` has heartbeaten within the lease time (a process
    /// that stopped, or is paused, has not). Only meaningful for an owner
    /// [`ThreadStore::owner_elsewhere`] named.
    async fn replica_alive(&self, _replica: &str) -> Result<bool, StoreError> {
        Ok(true)
    }
}

/// Another live process holding a thread's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOwner {
    /// Its replica id.
    pub replica: String,
    /// Where it takes requests forwarded by other replicas, when it advertised one.
    pub internal_url: Option<String>,
}

/// Appends to one thread. Each append is durable when it returns (one flushed line per
/// record on disk, one committed transaction in a database); callers that need records
/// in order await each append before the next (the turn loop does).
#[async_trait]
pub trait ThreadWriter: Send + Sync + std::fmt::Debug {
    async fn append(&self, items: &[RolloutItem]) -> Result<(), StoreError>;

    /// The rollout file, for a store that keeps one (shown as the thread's `path`).
    fn path(&self) -> Option<&Path>;

    /// Takes the thread again for a new turn after [`ThreadWriter::release`]. Fails with
    /// [`StoreError::Fenced`] when another process continued the thread meanwhile (what
    /// this one holds in memory is stale: resume it from the store instead), and with
    /// [`StoreError::OwnedElsewhere`] while another process runs it.
    async fn reacquire(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Lets go of the thread between turns, so another process may continue it at once.
    async fn release(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether another process continued the thread, or runs it now, so what this
    /// process holds in memory is out of date. A store nobody else writes to never is;
    /// an error reading the answer counts as not stale (the next write checks anyway).
    async fn is_stale(&self) -> bool {
        false
    }
}

/// Opens the store at `location`. `internal_url` is where other processes sharing the
/// store reach this one with requests for threads it runs (a fleet replica's own
/// address), if it takes any; `password` is the database's when its URL has none
/// (`PGPASSWORD` of the environment `main` read).
pub async fn open(
    location: &StoreLocation,
    internal_url: Option<String>,
    password: Option<String>,
) -> Result<Arc<dyn ThreadStore>, StoreError> {
    match location {
        StoreLocation::Local { home } => Ok(Arc::new(LocalStore::new(home.clone()))),
        StoreLocation::Postgres { url } => {
            let store = PgStore::connect(
                url,
                password,
                location.to_string(),
                Replica::this_process(internal_url),
            )
            .await?;
            Ok(Arc::new(store))
        }
    }
}
