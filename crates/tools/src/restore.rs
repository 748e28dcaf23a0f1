//! Putting a file back the way it was before a patch, without trusting the path: the
//! model wrote the patch, and it (or a command it ran) may have swapped a file or a
//! directory for a symlink since. Each operation here opens the final component without
//! following a symlink (`O_NOFOLLOW`), never blocks on a FIFO (`O_NONBLOCK`), checks that
//! the opened file is a regular file, and (on Linux) that it is the file at `resolved`,
//! where the patch wrote it, before anything is written; the content check and the write
//! go through the same open file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why a file was left as it is.
#[derive(Debug, thiserror::Error)]
pub enum RestoreRefusal {
    #[error("it is a symlink now; a revert never writes through one")]
    Symlink,
    #[error("it is {kind} now, not a regular file")]
    NotRegular { kind: &'static str },
    #[error("it changed since the turn that is reverted")]
    Changed,
    #[error("it exists again since the turn that is reverted removed it")]
    Exists,
    #[error("it is gone since the turn that is reverted wrote it")]
    Missing,
    #[error("it now leads to {}, not where the patch wrote it", now.display())]
    Moved { now: PathBuf },
    #[error("where it leads could not be confirmed: {0}")]
    Unconfirmed(io::Error),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Replaces the content of the regular file at `path` with `contents`, if it is exactly
/// `expected` now.
pub fn replace_if_unchanged(
    path: &Path,
    resolved: &Path,
    expected: &str,
    contents: &str,
) -> Result<(), RestoreRefusal> {
    let mut file = open_existing(path, resolved, true)?;
    ensure_content(&mut file, expected)?;
    file.seek(SeekFrom::Start(0))?;
    file.set_len(0)?;
    file.write_all(contents.as_bytes())?;
    file.flush()?;
    Ok(())
}

/// Removes the regular file at `path`, if its content is exactly `expected` now. The
/// removal unlinks the name only: even a symlink swapped in after the check is removed
/// itself, never its target.
pub fn remove_if_unchanged(
    path: &Path,
    resolved: &Path,
    expected: &str,
) -> Result<(), RestoreRefusal> {
    let mut file = open_existing(path, resolved, false)?;
    ensure_content(&mut file, expected)?;
    drop(file);
    std::fs::remove_file(path)?;
    Ok(())
}

/// Creates the file at `path` with `contents`; there must be nothing there now.
pub fn create_absent(path: &Path, resolved: &Path, contents: &str) -> Result<(), RestoreRefusal> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => return Err(RestoreRefusal::Exists),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err.into()),
    }
    let mut options = OpenOptions::new();
    // `create_new` is O_EXCL: a symlink planted at the last moment fails the open
    // instead of being followed.
    options.write(true).create_new(true);
    no_follow(&mut options);
    let mut file = options.open(path).map_err(|err| match err.kind() {
        io::ErrorKind::AlreadyExists => RestoreRefusal::Exists,
        _ => RestoreRefusal::Io(err),
    })?;
    if let Err(refusal) = confirm_location(&file, resolved) {
        // Created in a directory that is not where the patch wrote: take it back.
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(refusal);
    }
    file.write_all(contents.as_bytes())?;
    file.flush()?;
    Ok(())
}

fn open_existing(path: &Path, resolved: &Path, write: bool) -> Result<File, RestoreRefusal> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => return Err(RestoreRefusal::Symlink),
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(RestoreRefusal::Missing),
        Err(err) => return Err(err.into()),
    }
    let mut options = OpenOptions::new();
    options.read(true).write(write);
    no_follow(&mut options);
    let file = options.open(path).map_err(|err| {
        if is_symlink_refusal(&err) {
            RestoreRefusal::Symlink
        } else if err.kind() == io::ErrorKind::NotFound {
            RestoreRefusal::Missing
        } else {
            RestoreRefusal::Io(err)
        }
    })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(RestoreRefusal::NotRegular {
            kind: crate::regular_file::kind(&metadata),
        });
    }
    confirm_location(&file, resolved)?;
    Ok(file)
}

/// The file's content is exactly `expected` (read at most one byte past it).
fn ensure_content(file: &mut File, expected: &str) -> Result<(), RestoreRefusal> {
    let mut bytes = Vec::with_capacity(expected.len());
    file.take(expected.len() as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes != expected.as_bytes() {
        return Err(RestoreRefusal::Changed);
    }
    Ok(())
}

/// The open file is the one at `resolved`: no directory on the way was swapped for a
/// symlink between the caller's check and the open.
#[cfg(target_os = "linux")]
fn confirm_location(file: &File, resolved: &Path) -> Result<(), RestoreRefusal> {
    use std::os::fd::AsRawFd as _;
    let now = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(RestoreRefusal::Unconfirmed)?;
    if now != resolved {
        return Err(RestoreRefusal::Moved { now });
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn confirm_location(_file: &File, _resolved: &Path) -> Result<(), RestoreRefusal> {
    Ok(())
}

#[cfg(unix)]
fn no_follow(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt as _;
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
}

#[cfg(not(unix))]
fn no_follow(_options: &mut OpenOptions) {}

/// `O_NOFOLLOW` on a symlink fails with `ELOOP`.
fn is_symlink_refusal(err: &io::Error) -> bool {
    #[cfg(unix)]
    {
        err.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = err;
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// The resolution checks of the caller are left out here: each operation refuses on
    /// its own, so a swap after those checks still cannot redirect a write.
    #[test]
    fn a_symlink_at_the_file_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("target.txt"), "after").unwrap();
        symlink(root.join("target.txt"), root.join("link.txt")).unwrap();
        let link = root.join("link.txt");
        assert!(matches!(
            replace_if_unchanged(&link, &link, "after", "before"),
            Err(RestoreRefusal::Symlink)
        ));
        assert!(matches!(
            remove_if_unchanged(&link, &link, "after"),
            Err(RestoreRefusal::Symlink)
        ));
        symlink(root.join("planted.txt"), root.join("dangling")).unwrap();
        let dangling = root.join("dangling");
        assert!(matches!(
            create_absent(&dangling, &dangling, "x"),
            Err(RestoreRefusal::Exists)
        ));
        assert_eq!(
            std::fs::read_to_string(root.join("target.txt")).unwrap(),
            "after"
        );
        assert!(!root.join("planted.txt").exists());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_is_caught_at_the_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("elsewhere/f.txt"), "after").unwrap();
        symlink(root.join("elsewhere"), root.join("sub")).unwrap();
        let path = root.join("sub/f.txt");
        let recorded = root.join("sub/f.txt");
        assert!(matches!(
            replace_if_unchanged(&path, &recorded, "after", "before"),
            Err(RestoreRefusal::Moved { .. })
        ));
        assert!(matches!(
            create_absent(&root.join("sub/new.txt"), &root.join("sub/new.txt"), "x"),
            Err(RestoreRefusal::Moved { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(root.join("elsewhere/f.txt")).unwrap(),
            "after"
        );
        assert!(!root.join("elsewhere/new.txt").exists());
    }

    #[test]
    fn only_the_content_the_turn_left_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap().join("f.txt");
        std::fs::write(&path, "after, and more").unwrap();
        assert!(matches!(
            replace_if_unchanged(&path, &path, "after", "before"),
            Err(RestoreRefusal::Changed)
        ));
        std::fs::write(&path, "after").unwrap();
        replace_if_unchanged(&path, &path, "after", "before").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
    }
}
