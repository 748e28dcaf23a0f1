//! The `fs/*` methods: a client reads, writes, lists, copies, removes and watches files on
//! the server's machine (`fs/readFile`, `fs/writeFile`, `fs/createDirectory`,
//! `fs/getMetadata`, `fs/readDirectory`, `fs/remove`, `fs/copy`, `fs/watch`,
//! `fs/unwatch`, and the `fs/changed` notification), with Codex's shapes.
//!
//! Clients are not trusted any more than the model is: a client may be driven by what the
//! model wrote, and the model may have planted symlinks in the workspace. So every path
//! goes through the engine's one rule for client file access
//! ([`interpreter_core::config::FileAccessRule`], built from the server's config on every
//! request so a changed `sandbox_mode` applies at once) and the work is then done on the
//! *resolved* path it returns, reached from the root's open directory without following
//! any symlink ([`interpreter_tools::beneath`]): a directory swapped for a symlink after
//! the check fails the request instead of redirecting it. Reads open regular files
//! without blocking, writes go to a temporary file beside the target that is renamed over
//! it (never through a symlink or a hard link planted at the target), removals remove the
//! entry itself, copies walk and create trees through descriptors, and whole trees that
//! would be removed or replaced are checked for roots and protected paths inside them.
//!
//! Watches belong to the connection that made them: one native watcher per connection,
//! bounded in number, dropped by `fs/unwatch` and when the connection closes.

use std::collections::{HashMap, HashSet};
use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use interpreter_core::config::{Config, FileAccess, FileAccessRule, PathRefused};
use interpreter_tools::beneath::{BeneathError, Target};
use interpreter_tools::regular_file::RegularFileError;
use interpreter_tools::sandbox::{PROTECTED_DIR_NAMES, resolve_for_write};
use notify::Watcher as _;
use rustix::fs::FileType;
use tokio::sync::mpsc;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::protocol::notification_names;
use crate::protocol::v2;
use crate::state::{Reply, ServerState};

/// The largest file `fs/readFile` returns and `fs/writeFile` accepts (decoded). The whole
/// file travels in one JSON message, base64 on top: past this it is a mistake or an attack
/// on the server's memory, not an edit.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Entries `fs/readDirectory` lists and `fs/copy` copies at most: a directory or tree past
/// this is refused rather than held in memory (or copied for minutes).
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// Watches one connection may hold at once; each costs a native watch (inotify's are a
/// per-user resource shared with every other program).
pub(crate) const MAX_WATCHES_PER_CONNECTION: usize = 64;

/// How long one file-system request may take before the client gets an error (a hung
/// network mount must not hold a request forever).
const FS_DEADLINE: Duration = Duration::from_secs(120);

/// Changes under a watch are gathered this long and sent as one `fs/changed`, as Codex
/// (one edit is often several native events: write, rename, attributes).
const CHANGE_DEBOUNCE: Duration = Duration::from_millis(200);

/// Native events queued per connection before later ones are dropped (a client only needs
/// "something changed under this watch"; a flood must not grow memory).
const EVENT_QUEUE: usize = 1024;

/// What an `fs/*` request can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FsError {
    /// The confinement rule refused the path.
    #[error(transparent)]
    Refused(#[from] PathRefused),
    #[error("dataBase64 is not valid base64: {0}")]
    InvalidBase64(String),
    #[error(
        "{path} is {} MiB, over the {} MiB limit of fs/readFile and fs/writeFile",
        .bytes.div_ceil(1024 * 1024),
        MAX_FILE_BYTES / (1024 * 1024)
    )]
    TooLarge { path: PathBuf, bytes: u64 },
    /// A request that cannot be carried out as asked (`-32600`, like Codex's
    /// invalid-input errors).
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl From<FsError> for AppServerError {
    fn from(err: FsError) -> Self {
        // Codex answers an I/O error with -32603 unless it is about the input; refusals
        // and bad input are -32600.
        match &err {
            FsError::Io { source, .. } if source.kind() != io::ErrorKind::InvalidInput => {
                AppServerError::Internal(err.to_string())
            }
            _ => AppServerError::InvalidRequest(err.to_string()),
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> FsError + '_ {
    move |source| FsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Run blocking file-system work off the async workers, with a deadline. The work gets
/// the rule of the server's current config.
async fn with_rule<T: Send + 'static>(
    state: &ServerState,
    what: &'static str,
    work: impl FnOnce(&FileAccessRule) -> Result<T, FsError> + Send + 'static,
) -> Result<T, AppServerError> {
    let config: Config = state.base_config().await?;
    let task = tokio::task::spawn_blocking(move || work(&config.file_access_rule()));
    match tokio::time::timeout(FS_DEADLINE, task).await {
        Err(_) => Err(AppServerError::Internal(format!(
            "{what} did not finish within {} s",
            FS_DEADLINE.as_secs()
        ))),
        Ok(Err(join)) => Err(AppServerError::Internal(format!("{what} stopped: {join}"))),
        Ok(Ok(result)) => result.map_err(AppServerError::from),
    }
}

pub(crate) async fn read_file(
    state: &ServerState,
    params: v2::FsReadFileParams,
) -> Result<Reply, AppServerError> {
    let bytes = with_rule(state, "fs/readFile", move |rule| {
        let target = rule.target(Path::new(&params.path), FileAccess::Read)?;
        target
            .read_capped(MAX_FILE_BYTES)
            .map_err(beneath_error(&target.resolved))
    })
    .await?;
    Reply::new(&v2::FsReadFileResponse {
        data_base64: BASE64.encode(bytes),
    })
}

pub(crate) async fn write_file(
    state: &ServerState,
    params: v2::FsWriteFileParams,
) -> Result<Reply, AppServerError> {
    // Refuse an oversized payload before decoding it (4 base64 characters per 3 bytes).
    let encoded = params.data_base64.len() as u64;
    if encoded / 4 * 3 > MAX_FILE_BYTES {
        return Err(FsError::TooLarge {
            path: PathBuf::from(&params.path),
            bytes: encoded / 4 * 3,
        }
        .into());
    }
    let bytes = BASE64
        .decode(params.data_base64.as_bytes())
        .map_err(|e| FsError::InvalidBase64(e.to_string()))?;
    with_rule(state, "fs/writeFile", move |rule| {
        let target = rule.target(Path::new(&params.path), FileAccess::Write)?;
        target
            .replace(&bytes)
            .map_err(beneath_error(&target.resolved))
    })
    .await?;
    Reply::new(&v2::FsWriteFileResponse {})
}

pub(crate) async fn create_directory(
    state: &ServerState,
    params: v2::FsCreateDirectoryParams,
) -> Result<Reply, AppServerError> {
    with_rule(state, "fs/createDirectory", move |rule| {
        let target = rule.target(Path::new(&params.path), FileAccess::Write)?;
        target
            .create_dir(params.recursive.unwrap_or(true))
            .map_err(beneath_error(&target.resolved))
    })
    .await?;
    Reply::new(&v2::FsCreateDirectoryResponse {})
}

pub(crate) async fn get_metadata(
    state: &ServerState,
    params: v2::FsGetMetadataParams,
) -> Result<Reply, AppServerError> {
    let response = with_rule(state, "fs/getMetadata", move |rule| {
        let path = Path::new(&params.path);
        let resolved = rule.check(path, FileAccess::Read)?;
        // The rule resolved every symlink: whether the path itself is one is read from
        // the link (its directory resolved, its own name kept).
        let is_symlink = link_entry(path)
            .is_some_and(|entry| std::fs::symlink_metadata(entry).is_ok_and(|m| m.is_symlink()));
        let metadata = std::fs::metadata(&resolved).map_err(io_error(&resolved))?;
        Ok(v2::FsGetMetadataResponse {
            is_directory: metadata.is_dir(),
            is_file: metadata.is_file(),
            is_symlink,
            created_at_ms: unix_ms(metadata.created()),
            modified_at_ms: unix_ms(metadata.modified()),
        })
    })
    .await?;
    Reply::new(&response)
}

pub(crate) async fn read_directory(
    state: &ServerState,
    params: v2::FsReadDirectoryParams,
) -> Result<Reply, AppServerError> {
    let entries = with_rule(state, "fs/readDirectory", move |rule| {
        let resolved = rule.check(Path::new(&params.path), FileAccess::Read)?;
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&resolved).map_err(io_error(&resolved))? {
            let entry = entry.map_err(io_error(&resolved))?;
            if entries.len() == MAX_ENTRIES {
                return Err(FsError::Invalid(format!(
                    "{} has more than {MAX_ENTRIES} entries, the limit of fs/readDirectory",
                    resolved.display()
                )));
            }
            // What a symlink leads to is only looked at when the client could read it:
            // the type of a file outside the roots is not the client's to learn.
            let metadata = match entry.file_type() {
                Ok(kind) if kind.is_symlink() => rule
                    .check(&entry.path(), FileAccess::Read)
                    .ok()
                    .and_then(|target| std::fs::metadata(target).ok()),
                Ok(_) => entry.metadata().ok(),
                Err(_) => None,
            };
            entries.push(v2::FsReadDirectoryEntry {
                file_name: entry.file_name().to_string_lossy().into_owned(),
                is_directory: metadata.as_ref().is_some_and(Metadata::is_dir),
                is_file: metadata.as_ref().is_some_and(Metadata::is_file),
            });
        }
        entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
        Ok(entries)
    })
    .await?;
    Reply::new(&v2::FsReadDirectoryResponse { entries })
}

pub(crate) async fn remove(
    state: &ServerState,
    params: v2::FsRemoveParams,
) -> Result<Reply, AppServerError> {
    with_rule(state, "fs/remove", move |rule| {
        // Refused unless what the path leads to is writable (so a link to outside the
        // roots is refused too) and is no root and holds nothing protected; what is
        // removed is the entry itself: a symlink goes, not its target.
        let entry = rule.entry_target(Path::new(&params.path))?;
        let removed = entry
            .remove_entry(params.recursive.unwrap_or(true))
            .map_err(beneath_error(&entry.resolved))?;
        if !removed && !params.force.unwrap_or(true) {
            return Err(io_error(&entry.resolved)(io::Error::from(
                io::ErrorKind::NotFound,
            )));
        }
        Ok(())
    })
    .await?;
    Reply::new(&v2::FsRemoveResponse {})
}

pub(crate) async fn copy(
    state: &ServerState,
    params: v2::FsCopyParams,
) -> Result<Reply, AppServerError> {
    with_rule(state, "fs/copy", move |rule| {
        let source = rule.target(Path::new(&params.source_path), FileAccess::Read)?;
        let destination = rule.target(Path::new(&params.destination_path), FileAccess::Write)?;
        let kind = source.kind().map_err(beneath_error(&source.resolved))?;
        match kind {
            Some(FileType::RegularFile) => {
                let mut from = source
                    .open_existing(false)
                    .map_err(beneath_error(&source.resolved))?;
                destination
                    .replace_from(&mut from)
                    .map_err(beneath_error(&destination.resolved))
            }
            Some(FileType::Directory) if params.recursive => copy_tree(rule, &source, &destination),
            Some(FileType::Directory) => Err(FsError::Invalid(format!(
                "{} is a directory; fs/copy needs `recursive: true` to copy a directory",
                source.resolved.display()
            ))),
            Some(other) => Err(FsError::Invalid(format!(
                "{} is {}; fs/copy copies regular files and directories",
                source.resolved.display(),
                interpreter_tools::beneath::describe_kind(other)
            ))),
            None => Err(io_error(&source.resolved)(io::Error::from(
                io::ErrorKind::NotFound,
            ))),
        }
    })
    .await?;
    Reply::new(&v2::FsCopyResponse {})
}

/// A directory copy into a new destination: every entry is listed (and checked) first,
/// then created, all through descriptors (see [`interpreter_tools::beneath`]). Symlinks
/// are copied as symlinks (never followed, so a link to outside the roots copies no
/// outside file); FIFOs, sockets and devices are refused, and so are `.git`, `.agents`
/// and `.interpreter` entries (a copied `.git` would be a repository whose config and
/// hooks run at the user's next git command there).
fn copy_tree(rule: &FileAccessRule, source: &Target, destination: &Target) -> Result<(), FsError> {
    if destination.resolved.starts_with(&source.resolved) {
        return Err(FsError::Invalid(format!(
            "{} is inside {}; a directory cannot be copied into itself",
            destination.resolved.display(),
            source.resolved.display()
        )));
    }
    if std::fs::symlink_metadata(&destination.resolved).is_ok() {
        return Err(FsError::Invalid(format!(
            "{} already exists; fs/copy copies a directory only to a new path",
            destination.resolved.display()
        )));
    }
    // A protected path that does not exist yet (an agent home inside the workspace)
    // must not be created by the copy, and one inside the source not copied out.
    rule.check_tree(&destination.resolved)?;
    rule.check_tree_readable(&source.resolved)?;
    destination
        .copy_tree_from(source, MAX_ENTRIES, &PROTECTED_DIR_NAMES)
        .map_err(beneath_error(&destination.resolved))
}

/// Where the last component of the absolute `path` lies: its directory resolved, its own
/// name kept (for a symlink, the link itself rather than its target).
fn link_entry(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    Some(resolve_for_write(path.parent()?)?.join(name))
}

/// An anchored operation's refusal as the client reads it.
fn beneath_error(path: &Path) -> impl FnOnce(BeneathError) -> FsError + '_ {
    move |err| match err {
        BeneathError::NotRegular(RegularFileError::NotRegular { kind }) => {
            FsError::Invalid(format!("{} is {kind}, not a regular file", path.display()))
        }
        BeneathError::NotRegular(RegularFileError::TooLarge { bytes }) => FsError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        },
        BeneathError::Refused(message) => FsError::Invalid(message),
        BeneathError::Changed(_) | BeneathError::Protected(_) => FsError::Invalid(err.to_string()),
        BeneathError::NotRegular(RegularFileError::Io(e)) | BeneathError::Io(e) => {
            io_error(path)(e)
        }
    }
}

fn unix_ms(time: io::Result<SystemTime>) -> i64 {
    time.ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

// ---------------------------------------------------------------------------------------
// Watches

/// Every connection's watches, by connection id.
#[derive(Default)]
pub(crate) struct FsWatches {
    connections: Mutex<HashMap<u64, Arc<ConnectionWatches>>>,
}

/// One connection's watches: one native watcher and the watched paths by watch id. Watches
/// sharing a native watch share it until the last one ends.
struct ConnectionWatches {
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    by_id: Mutex<HashMap<String, Watched>>,
}

/// What one watch follows (resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    path: PathBuf,
    directory: bool,
}

impl Watched {
    /// What is watched natively: a directory itself, or a file's directory. A file is
    /// often replaced by a rename (as `fs/writeFile` does), which a watch on the file's
    /// own inode would stop seeing after the first time.
    fn native(&self) -> &Path {
        match (self.directory, self.path.parent()) {
            (false, Some(parent)) => parent,
            _ => &self.path,
        }
    }

    /// Whether a change of `changed` concerns this watch: the path itself, or for a
    /// directory what sits directly in it (watches are not recursive, as Codex's).
    fn covers(&self, changed: &Path) -> bool {
        changed == self.path || (self.directory && changed.parent() == Some(&self.path))
    }
}

impl ConnectionWatches {
    /// The ids of the watches that `changed` concerns.
    fn ids_for(&self, changed: &Path) -> Vec<String> {
        let Ok(by_id) = self.by_id.lock() else {
            return Vec::new();
        };
        by_id
            .iter()
            .filter(|(_, watched)| watched.covers(changed))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn stop(&self) {
        if let Ok(mut by_id) = self.by_id.lock() {
            by_id.clear();
        }
        // Dropping the watcher removes its native watches and ends its event thread.
        if let Ok(mut watcher) = self.watcher.lock() {
            watcher.take();
        }
    }
}

impl FsWatches {
    /// The connection went away: its watches end.
    pub(crate) fn stop_connection(&self, connection: u64) {
        let removed = self
            .connections
            .lock()
            .ok()
            .and_then(|mut map| map.remove(&connection));
        if let Some(watches) = removed {
            watches.stop();
        }
    }

    /// The connection's watch set, created (with its native watcher and its forwarding
    /// task) on first use.
    fn for_connection(
        &self,
        connection: &Arc<Connection>,
    ) -> Result<Arc<ConnectionWatches>, FsError> {
        let mut map = self
            .connections
            .lock()
            .map_err(|_| FsError::Invalid("watch table lock poisoned".into()))?;
        if let Some(existing) = map.get(&connection.id) {
            return Ok(existing.clone());
        }
        let (tx, rx) = mpsc::channel::<notify::Event>(EVENT_QUEUE);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                // Full queue: drop the event; the client is told "changed" by the next.
                let _ = tx.try_send(event);
            }
        })
        .map_err(|e| FsError::Invalid(format!("cannot start a file watcher: {e}")))?;
        let watches = Arc::new(ConnectionWatches {
            watcher: Mutex::new(Some(watcher)),
            by_id: Mutex::default(),
        });
        // Checked under the table's lock: a connection that closed before this point is
        // refused, one that closes after it finds the entry and stops it.
        if connection.is_closed() {
            return Err(FsError::Invalid("the connection is closing".into()));
        }
        map.insert(connection.id, watches.clone());
        tokio::spawn(forward_changes(connection.clone(), watches.clone(), rx));
        Ok(watches)
    }
}

/// Sends `fs/changed` for the connection's watches: native events gathered for
/// [`CHANGE_DEBOUNCE`], per watch id, sorted. Ends when the connection closes or its
/// watcher is dropped.
async fn forward_changes(
    connection: Arc<Connection>,
    watches: Arc<ConnectionWatches>,
    mut rx: mpsc::Receiver<notify::Event>,
) {
    loop {
        let first = tokio::select! {
            _ = connection.closed.cancelled() => return,
            event = rx.recv() => match event {
                Some(event) => event,
                None => return,
            },
        };
        let mut changed: HashSet<PathBuf> = first.paths.into_iter().collect();
        let window = tokio::time::sleep(CHANGE_DEBOUNCE);
        tokio::pin!(window);
        loop {
            tokio::select! {
                _ = connection.closed.cancelled() => return,
                _ = &mut window => break,
                event = rx.recv() => match event {
                    Some(event) => changed.extend(event.paths),
                    None => break,
                },
            }
        }
        let mut by_watch: HashMap<String, Vec<String>> = HashMap::new();
        for path in changed {
            for id in watches.ids_for(&path) {
                by_watch
                    .entry(id)
                    .or_default()
                    .push(path.to_string_lossy().into_owned());
            }
        }
        // Sent while the id is still registered (checked under the lock `fs/unwatch`
        // takes), so no `fs/changed` follows the `fs/unwatch` response.
        let Ok(by_id) = watches.by_id.lock() else {
            return;
        };
        for (watch_id, mut changed_paths) in by_watch {
            if !by_id.contains_key(&watch_id) {
                continue;
            }
            changed_paths.sort();
            connection.notify(
                notification_names::FS_CHANGED,
                &v2::FsChangedNotification {
                    watch_id,
                    changed_paths,
                },
            );
        }
    }
}

pub(crate) async fn watch(
    state: &ServerState,
    watches: &FsWatches,
    connection: &Arc<Connection>,
    params: v2::FsWatchParams,
) -> Result<Reply, AppServerError> {
    let path = params.path.clone();
    let watched = with_rule(state, "fs/watch", move |rule| {
        let resolved = rule.check(Path::new(&path), FileAccess::Read)?;
        let metadata = std::fs::metadata(&resolved).map_err(io_error(&resolved))?;
        Ok(Watched {
            path: resolved,
            directory: metadata.is_dir(),
        })
    })
    .await?;
    let watches = watches.for_connection(connection)?;
    {
        let mut by_id = watches
            .by_id
            .lock()
            .map_err(|_| AppServerError::Internal("watch lock poisoned".into()))?;
        if by_id.contains_key(&params.watch_id) {
            return Err(AppServerError::InvalidRequest(format!(
                "watchId already exists: {}",
                params.watch_id
            )));
        }
        if by_id.len() >= MAX_WATCHES_PER_CONNECTION {
            return Err(AppServerError::InvalidRequest(format!(
                "a connection may hold at most {MAX_WATCHES_PER_CONNECTION} watches; unwatch one first"
            )));
        }
        let native = watched.native();
        if !by_id.values().any(|other| other.native() == native) {
            let mut watcher = watches
                .watcher
                .lock()
                .map_err(|_| AppServerError::Internal("watcher lock poisoned".into()))?;
            let Some(watcher) = watcher.as_mut() else {
                return Err(AppServerError::InvalidRequest(
                    "the connection is closing".into(),
                ));
            };
            watcher
                .watch(native, notify::RecursiveMode::NonRecursive)
                .map_err(|e| {
                    AppServerError::Internal(format!("cannot watch {}: {e}", native.display()))
                })?;
        }
        by_id.insert(params.watch_id, watched.clone());
    }
    Reply::new(&v2::FsWatchResponse {
        path: watched.path.to_string_lossy().into_owned(),
    })
}

/// Ends a watch; an unknown id is not an error (as Codex). No `fs/changed` for it is sent
/// after the response.
pub(crate) fn unwatch(
    watches: &FsWatches,
    connection: &Arc<Connection>,
    params: v2::FsUnwatchParams,
) -> Result<Reply, AppServerError> {
    let watches = watches
        .connections
        .lock()
        .ok()
        .and_then(|map| map.get(&connection.id).cloned());
    if let Some(watches) = watches
        && let Ok(mut by_id) = watches.by_id.lock()
        && let Some(watched) = by_id.remove(&params.watch_id)
        && !by_id
            .values()
            .any(|other| other.native() == watched.native())
        && let Ok(mut watcher) = watches.watcher.lock()
        && let Some(watcher) = watcher.as_mut()
    {
        // The path may be gone already (its native watch went with it).
        let _ = watcher.unwatch(watched.native());
    }
    Reply::new(&v2::FsUnwatchResponse {})
}
