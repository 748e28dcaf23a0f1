//! Reading and writing patch targets without trusting what the path names.
//!
//! The model picks the paths, so a target can be a symlink to `/dev/zero` (a read that
//! never ends and fills memory), a FIFO (an open that blocks until someone writes to it)
//! or a socket or device. Only regular files are edited: the type is checked through
//! symlinks before opening, the open cannot block (`O_NONBLOCK`; a FIFO opened that way
//! returns at once), and the opened file is checked again (`fstat`), so a path swapped
//! between the check and the open is refused too. Reads are capped at
//! [`MAX_FILE_BYTES`].

use std::fs::{Metadata, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::regular_file::{self, RegularFileError};

/// The largest file apply_patch reads. A patch edits source text; a target past this
/// is a mistake or an attack, and it would be held in memory several times over (old
/// contents, new contents, the diff).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The contents of the regular file at `path` (symlinks followed), as UTF-8.
pub(super) fn read_regular(path: &Path) -> io::Result<String> {
    ensure_readable(&std::fs::metadata(path)?)?;
    // The path is resolved now, so its last component must not turn into a symlink
    // before the open.
    let resolved = std::fs::canonicalize(path)?;
    let bytes = regular_file::read_capped(&resolved, MAX_FILE_BYTES).map_err(|e| match e {
        RegularFileError::NotRegular { kind } => not_regular(kind),
        RegularFileError::TooLarge { bytes } => too_large(bytes),
        RegularFileError::Io(e) => e,
    })?;
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "it is not UTF-8 text; apply_patch only edits text files",
        )
    })
}

/// Writes `contents` to `path`, creating it if missing; an existing path must be a
/// regular file (symlinks followed).
pub(super) fn write_regular(path: &Path, contents: &str) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(metadata) => ensure_regular(&metadata)?,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let mut options = OpenOptions::new();
    // Not `truncate`: nothing is cut before the opened file is known to be regular.
    options.write(true).create(true);
    non_blocking(&mut options);
    let mut file = options.open(path)?;
    ensure_regular(&file.metadata()?)?;
    file.set_len(0)?;
    file.write_all(contents.as_bytes())?;
    file.flush()
}

fn ensure_regular(metadata: &Metadata) -> io::Result<()> {
    if !metadata.is_file() {
        return Err(not_regular(regular_file::kind(metadata)));
    }
    Ok(())
}

fn not_regular(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {kind}, not a regular file; apply_patch only edits regular files"),
    )
}

fn ensure_readable(metadata: &Metadata) -> io::Result<()> {
    ensure_regular(metadata)?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_large(metadata.len()));
    }
    Ok(())
}

fn too_large(bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "it is {} MiB, over the {} MiB limit for a file apply_patch edits; edit it with a command instead",
            bytes.div_ceil(1024 * 1024),
            MAX_FILE_BYTES / (1024 * 1024)
        ),
    )
}

/// A write that cannot block on a FIFO planted at the target.
#[cfg(unix)]
fn non_blocking(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt as _;
    options.custom_flags(libc::O_NONBLOCK);
}

#[cfg(not(unix))]
fn non_blocking(_options: &mut OpenOptions) {}
