//! Opening and reading a file whose path someone else chose (the model, a client) without
//! trusting what the path names: only a regular file is read, the open cannot block on a
//! FIFO (`O_NONBLOCK`), a symlink swapped in at the last component is not followed
//! (`O_NOFOLLOW`), the opened file is checked again (`fstat`), and reads stop at a cap.
//! `apply_patch` and the app-server's `fs/*` methods both read through here.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum RegularFileError {
    #[error("it is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    #[error("it is {bytes} bytes, over the limit")]
    TooLarge { bytes: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Opens the regular file at the already resolved path `resolved` for reading.
pub fn open(resolved: &Path) -> Result<File, RegularFileError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = options.open(resolved)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(RegularFileError::NotRegular {
            kind: kind(&metadata),
        });
    }
    Ok(file)
}

/// The bytes of the regular file at `resolved`, at most `cap`.
pub fn read_capped(resolved: &Path, cap: u64) -> Result<Vec<u8>, RegularFileError> {
    let file = open(resolved)?;
    let len = file.metadata()?.len();
    if len > cap {
        return Err(RegularFileError::TooLarge { bytes: len });
    }
    let mut bytes = Vec::new();
    // One byte past the cap tells a file that grew after the check.
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(RegularFileError::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// What kind of file `metadata` describes, for messages ("a FIFO (named pipe)").
#[cfg(unix)]
pub fn kind(metadata: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else if kind.is_symlink() {
        "a symlink"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
pub fn kind(metadata: &Metadata) -> &'static str {
    if metadata.is_dir() {
        "a directory"
    } else if metadata.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}
