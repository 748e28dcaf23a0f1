//! Where the engine reads and writes the files it edits (patches), so a front end whose
//! peer holds the files can take that over: an editor over ACP serves its unsaved
//! buffers and saves through its own buffers. Commands still run on the local disk.
//!
//! The engine decides what may be written (sandbox roots, approvals) before it asks; an
//! implementation only moves the bytes.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use interpreter_protocol::ThreadId;

/// A boxed future, so the trait stays object-safe (one implementation is chosen per
/// process at run time).
pub type FileFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Reads and writes of patch targets. `thread` is the thread the patch belongs to (a
/// front end may route by it); paths are absolute.
pub trait WorkspaceFiles: Send + Sync {
    /// The file's text. A file that does not exist is `ErrorKind::NotFound`.
    fn read_text<'a>(&'a self, thread: ThreadId, path: &'a Path) -> FileFuture<'a, String>;
    /// Create or replace the file with `contents`. Parent directories exist already.
    fn write_text<'a>(
        &'a self,
        thread: ThreadId,
        path: &'a Path,
        contents: &'a str,
    ) -> FileFuture<'a, ()>;
}

/// The local disk, with apply_patch's own rules (regular files only, size cap, no
/// blocking on FIFOs), off the async threads.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFiles;

impl WorkspaceFiles for LocalFiles {
    fn read_text<'a>(&'a self, _thread: ThreadId, path: &'a Path) -> FileFuture<'a, String> {
        let path = path.to_path_buf();
        Box::pin(async move { blocking(move || interpreter_tools::read_target(&path)).await })
    }

    fn write_text<'a>(
        &'a self,
        _thread: ThreadId,
        path: &'a Path,
        contents: &'a str,
    ) -> FileFuture<'a, ()> {
        let path = path.to_path_buf();
        let contents = contents.to_string();
        Box::pin(async move {
            blocking(move || interpreter_tools::write_target(&path, &contents)).await
        })
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("file task stopped: {e}")))?
}

/// Reads every path through `files`, keeping each one's own error.
pub(crate) async fn read_sources(
    files: &dyn WorkspaceFiles,
    thread: ThreadId,
    paths: &[PathBuf],
) -> interpreter_tools::Sources {
    let mut sources = interpreter_tools::Sources::new();
    for path in paths {
        let contents = files.read_text(thread, path).await;
        sources.insert(path.clone(), contents);
    }
    sources
}
