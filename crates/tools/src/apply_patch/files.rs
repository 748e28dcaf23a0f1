//! Reading and writing patch targets without trusting what the path names.
//!
//! The model picks the paths, so a target can be a symlink to `/dev/zero` (a read that
//! never ends and fills memory), a FIFO (an open that blocks until someone writes to it),
//! a socket or a device, or a name that a command running at the same moment swaps for a
//! symlink. Every read and write goes through a [`Target`] (see [`crate::beneath`]): the
//! parent directory is reached from a directory the agent holds open, without following
//! any symlink, the file is opened without following one and without blocking, and only a
//! regular file is read (at most [`MAX_FILE_BYTES`]) or written.

use std::io;

use crate::beneath::{BeneathError, Target};
use crate::regular_file::RegularFileError;

/// The largest file apply_patch reads. A patch edits source text; a target past this
/// is a mistake or an attack, and it would be held in memory several times over (old
/// contents, new contents, the diff).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The contents of the regular file at `target`, as UTF-8.
pub fn read_text(target: &Target) -> io::Result<String> {
    let bytes = target.read_capped(MAX_FILE_BYTES).map_err(explain)?;
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "it is not UTF-8 text; apply_patch only edits text files",
        )
    })
}

/// Writes `contents` to `target`, creating it (and its missing parent directories) if
/// missing; an existing file must be a regular file.
pub fn write_text(target: &Target, contents: &str) -> io::Result<()> {
    target.write(contents.as_bytes(), true).map_err(explain)
}

/// Removes the file at `target` (a symlink there is removed itself).
pub fn remove(target: &Target) -> io::Result<()> {
    target.remove_file().map_err(explain)
}

/// What a refusal means for a patch, in the words the model reads.
fn explain(error: BeneathError) -> io::Error {
    match error {
        BeneathError::NotRegular(RegularFileError::NotRegular { kind }) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("it is {kind}, not a regular file; apply_patch only edits regular files"),
        ),
        BeneathError::NotRegular(RegularFileError::TooLarge { bytes }) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {} MiB, over the {} MiB limit for a file apply_patch edits; edit it with a command instead",
                bytes.div_ceil(1024 * 1024),
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        ),
        other => other.into(),
    }
}
