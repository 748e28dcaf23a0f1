//! Putting a file back the way it was before a patch, without trusting the path: the
//! model wrote the patch, and it (or a command it ran, maybe still running) may have
//! swapped a file or a directory for a symlink since. Each operation goes through a
//! [`Target`] (see [`crate::beneath`]): the directory is reached from the writable root's
//! descriptor without following any symlink, the file itself is opened without following
//! one (`O_NOFOLLOW`) and without blocking on a FIFO, it must be a regular file, and the
//! content check and the write go through the same open file. Removing and creating are
//! `unlinkat`/`openat(O_EXCL)` on that same directory, never a name resolved again.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::beneath::{BeneathError, Target};
use crate::regular_file::RegularFileError;

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
    #[error("a directory on the way to it changed (renamed, or replaced by a symlink)")]
    WayChanged,
    #[error("it is protected now")]
    Protected,
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl From<BeneathError> for RestoreRefusal {
    fn from(error: BeneathError) -> Self {
        match error {
            BeneathError::Changed(_) => Self::WayChanged,
            BeneathError::Protected(_) => Self::Protected,
            BeneathError::Refused(message) => Self::Io(io::Error::other(message)),
            BeneathError::NotRegular(RegularFileError::NotRegular { kind: "a symlink" }) => {
                Self::Symlink
            }
            BeneathError::NotRegular(RegularFileError::NotRegular { kind }) => {
                Self::NotRegular { kind }
            }
            BeneathError::NotRegular(RegularFileError::TooLarge { .. }) => Self::Changed,
            BeneathError::NotRegular(RegularFileError::Io(error)) | BeneathError::Io(error) => {
                match error.kind() {
                    io::ErrorKind::NotFound => Self::Missing,
                    io::ErrorKind::AlreadyExists => Self::Exists,
                    _ => Self::Io(error),
                }
            }
        }
    }
}

/// Replaces the content of the regular file at `target` with `contents`, if it is exactly
/// `expected` now.
pub fn replace_if_unchanged(
    target: &Target,
    expected: &str,
    contents: &str,
) -> Result<(), RestoreRefusal> {
    let mut file = target.open_existing(true)?;
    ensure_content(&mut file, expected)?;
    file.seek(SeekFrom::Start(0))?;
    file.set_len(0)?;
    file.write_all(contents.as_bytes())?;
    file.flush()?;
    Ok(())
}

/// Removes the regular file at `target`, if its content is exactly `expected` now. The
/// removal unlinks the name in the directory that was checked: even a symlink swapped in
/// after the check is removed itself, never its target.
pub fn remove_if_unchanged(target: &Target, expected: &str) -> Result<(), RestoreRefusal> {
    let mut file = target.open_existing(false)?;
    ensure_content(&mut file, expected)?;
    drop(file);
    target.remove_file()?;
    Ok(())
}

/// Creates the file at `target` with `contents`; there must be nothing there now.
pub fn create_absent(target: &Target, contents: &str) -> Result<(), RestoreRefusal> {
    let mut file = target.create_new()?;
    file.write_all(contents.as_bytes())?;
    file.flush()?;
    Ok(())
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use interpreter_protocol::SandboxPolicy;

    use super::*;
    use crate::sandbox::{Purpose, RootAnchors, WriteScope};

    fn scope(root: &Path) -> WriteScope {
        let policy = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![],
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        };
        WriteScope::new(&RootAnchors::new(), &policy, root, &HashMap::new(), &[])
    }

    /// Each operation refuses on its own, so a swap after the caller's checks still
    /// cannot redirect a write.
    #[test]
    fn a_symlink_at_the_file_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let scope = scope(&root);
        std::fs::write(root.join("target.txt"), "after").unwrap();
        let link = scope
            .target(&root, Path::new("link.txt"), Purpose::Write)
            .unwrap();
        symlink(root.join("target.txt"), root.join("link.txt")).unwrap();
        assert!(matches!(
            replace_if_unchanged(&link, "after", "before"),
            Err(RestoreRefusal::Symlink)
        ));
        assert!(matches!(
            remove_if_unchanged(&link, "after"),
            Err(RestoreRefusal::Symlink)
        ));
        let dangling = scope
            .target(&root, Path::new("dangling"), Purpose::Write)
            .unwrap();
        symlink(root.join("planted.txt"), root.join("dangling")).unwrap();
        assert!(matches!(
            create_absent(&dangling, "x"),
            Err(RestoreRefusal::Exists)
        ));
        assert_eq!(
            std::fs::read_to_string(root.join("target.txt")).unwrap(),
            "after"
        );
        assert!(!root.join("planted.txt").exists());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_is_caught_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let scope = scope(&root);
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("elsewhere/f.txt"), "after").unwrap();
        let existing = scope
            .target(&root, Path::new("sub/f.txt"), Purpose::Write)
            .unwrap();
        let created = scope
            .target(&root, Path::new("sub/new.txt"), Purpose::Write)
            .unwrap();
        std::fs::remove_dir(root.join("sub")).unwrap();
        symlink(root.join("elsewhere"), root.join("sub")).unwrap();
        assert!(matches!(
            replace_if_unchanged(&existing, "after", "before"),
            Err(RestoreRefusal::WayChanged)
        ));
        assert!(matches!(
            remove_if_unchanged(&existing, "after"),
            Err(RestoreRefusal::WayChanged)
        ));
        assert!(matches!(
            create_absent(&created, "x"),
            Err(RestoreRefusal::WayChanged)
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
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let path = root.join("f.txt");
        let target = scope(&root)
            .target(&root, Path::new("f.txt"), Purpose::Write)
            .unwrap();
        std::fs::write(&path, "after, and more").unwrap();
        assert!(matches!(
            replace_if_unchanged(&target, "after", "before"),
            Err(RestoreRefusal::Changed)
        ));
        std::fs::write(&path, "after").unwrap();
        replace_if_unchanged(&target, "after", "before").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
    }
}
