//! Where the engine reads and writes the files it edits (patches), so a front end whose
//! peer holds the files can take that over: an editor over ACP serves its unsaved
//! buffers and saves through its own buffers. Commands still run on the local disk.
//!
//! The engine decides what may be written (sandbox roots, approvals) before it asks; an
//! implementation only moves the bytes.

use std::future::Future;
use std::io;
use std::pin::Pin;

use interpreter_protocol::ThreadId;
pub use interpreter_tools::beneath::Target;

/// A boxed future, so the trait stays object-safe (one implementation is chosen per
/// process at run time).
pub type FileFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Reads and writes of patch targets. `thread` is the thread the patch belongs to (a
/// front end may route by it). A [`Target`] is a path the engine already checked: an
/// editor is asked about [`Target::resolved`] (where the path really leads, which is what
/// the approval named), and the local disk is reached the way the target says, from a
/// directory the engine holds open, so a name changed after the check changes nothing.
pub trait WorkspaceFiles: Send + Sync {
    /// The file's text. A file that does not exist is `ErrorKind::NotFound`.
    fn read_text<'a>(&'a self, thread: ThreadId, target: &'a Target) -> FileFuture<'a, String>;
    /// Create or replace the file with `contents`, and any missing parent directories.
    fn write_text<'a>(
        &'a self,
        thread: ThreadId,
        target: &'a Target,
        contents: &'a str,
    ) -> FileFuture<'a, ()>;
}

/// The local disk, with apply_patch's own rules (regular files only, size cap, no
/// blocking on FIFOs, no symlink followed after the check), off the async threads.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFiles;

impl WorkspaceFiles for LocalFiles {
    fn read_text<'a>(&'a self, _thread: ThreadId, target: &'a Target) -> FileFuture<'a, String> {
        let target = target.clone();
        Box::pin(async move {
            blocking(move || interpreter_tools::apply_patch::read_text(&target)).await
        })
    }

    fn write_text<'a>(
        &'a self,
        _thread: ThreadId,
        target: &'a Target,
        contents: &'a str,
    ) -> FileFuture<'a, ()> {
        let target = target.clone();
        let contents = contents.to_string();
        Box::pin(async move {
            blocking(move || interpreter_tools::apply_patch::write_text(&target, &contents)).await
        })
    }
}

pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("file task stopped: {e}")))?
}

/// Reads every target through `files`, keeping each one's own error, by the path the
/// patch named.
pub(crate) async fn read_sources(
    files: &dyn WorkspaceFiles,
    thread: ThreadId,
    targets: &[Target],
) -> interpreter_tools::Sources {
    let mut sources = interpreter_tools::Sources::new();
    for target in targets {
        let contents = files.read_text(thread, target).await;
        sources.insert(target.path.clone(), contents);
    }
    sources
}
