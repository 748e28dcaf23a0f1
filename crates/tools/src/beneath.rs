//! Opening files on the model's behalf from a directory the agent holds open, never by
//! following a name again after it was checked.
//!
//! The agent itself runs outside the sandbox, and a sandboxed command (the model's own,
//! running at the same moment, or a second agent's on the same workspace) can rename
//! directories and plant symlinks between the agent's check of a path and its use. So a
//! file the agent reads or writes for a patch, a revert or a client's `fs/*` request is
//! reached like this ([`Target`]):
//!
//! * the path is resolved (symlinks followed, [`crate::sandbox::resolve_for_write`]) and
//!   checked by name, which is what the person and the model are told about;
//! * when it lies in a writable root, its parent directory is then opened *beneath the
//!   root's descriptor* ([`crate::sandbox::AnchoredRoot`]) with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: a symlink swapped in anywhere on the way
//!   fails the open, and whatever the directories were renamed to, the kernel never lets
//!   the walk leave the root;
//! * outside the roots (a write a person approved, naming the resolved path, or any path
//!   under full access) it is opened along the resolved path from `/` with the same
//!   no-symlink rule, and the directory opened must be the one the name named;
//! * the opened directory is then checked as the object it is (its own name, from
//!   `/proc/self/fd`): not inside a path the sandbox keeps read-only (`.git`, hooks, the
//!   agent's home) for a write, not inside a hidden one (the agent's home) for a read;
//! * the file itself is opened from that directory with `O_NOFOLLOW` (and `O_NONBLOCK`, so
//!   a FIFO cannot hang the agent), checked with `fstat` to be a regular file, and read or
//!   written through that one descriptor.
//!
//! A race can therefore only make the operation fail (the caller reports it), never land
//! it somewhere the check did not allow.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use crate::regular_file::{self, RegularFileError};
use crate::sandbox::AnchoredRoot;

/// How a checked path is reached.
#[derive(Debug, Clone)]
pub enum Anchor {
    /// Beneath a writable root: `relative` (symlink-free) from the root's descriptor.
    /// `named` is where the root was when the path was checked: what the directory found
    /// is compared as (the root may have been renamed since; its inside is what counts).
    Root {
        root: Arc<AnchoredRoot>,
        named: PathBuf,
        relative: PathBuf,
    },
    /// Along the resolved, symlink-free absolute path from `/`.
    Resolved,
}

/// What a [`Target`] must stay out of, as the object it turns out to be.
#[derive(Debug, Default, Clone)]
pub struct KeepOut {
    /// Never read (the agent's home, credential agents): resolved paths.
    pub unreadable: Vec<PathBuf>,
    /// Never written (all of the above, and what the sandbox keeps read-only inside its
    /// roots: `.git`, `.agents`, `.interpreter`, hooks paths): resolved paths.
    pub unwritable: Vec<PathBuf>,
    /// Names never written through anywhere below a root (`.git`: a new one starts a
    /// repository; `.agents`, `.interpreter`: skills and hooks a later thread loads);
    /// checked on the directory found, like `unwritable`.
    pub unwritable_names: Vec<OsString>,
}

/// Whether an operation reads or writes, which decides what it must stay out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// Why an anchored operation refused.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    #[error(
        "{} changed while it was being opened (a directory on the way was renamed or replaced by a symlink); nothing was done",
        .0.display()
    )]
    Changed(PathBuf),
    #[error("{} is protected; nothing was done", .0.display())]
    Protected(PathBuf),
    /// The operation was refused for what it found (the message says what).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    NotRegular(#[from] RegularFileError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<BeneathError> for io::Error {
    fn from(error: BeneathError) -> Self {
        match error {
            BeneathError::Io(error) => error,
            BeneathError::NotRegular(RegularFileError::Io(error)) => error,
            BeneathError::Protected(_) => {
                io::Error::new(io::ErrorKind::PermissionDenied, error.to_string())
            }
            other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

/// A file the agent works on for someone else: checked by name, reached by descriptor.
#[derive(Debug, Clone)]
pub struct Target {
    /// The path as the caller named it.
    pub path: PathBuf,
    /// Where it resolved when it was checked: what approvals and editors are shown.
    pub resolved: PathBuf,
    anchor: Anchor,
    keep_out: Arc<KeepOut>,
}

const DIRECTORY: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// No symlink (nor `/proc` magic link) anywhere on the way.
const NO_LINKS: ResolveFlags = ResolveFlags::NO_SYMLINKS.union(ResolveFlags::NO_MAGICLINKS);

impl Target {
    /// A target reached through `anchor`; `resolved` is absolute and symlink-free (as
    /// [`crate::sandbox::resolve_for_write`] returns it), and for [`Anchor::Root`]
    /// `relative` is its part below the root.
    pub fn new(path: PathBuf, resolved: PathBuf, anchor: Anchor, keep_out: Arc<KeepOut>) -> Self {
        Self {
            path,
            resolved,
            anchor,
            keep_out,
        }
    }

    /// The root the target is reached beneath, if any.
    pub fn root(&self) -> Option<&Arc<AnchoredRoot>> {
        match &self.anchor {
            Anchor::Root { root, .. } => Some(root),
            Anchor::Resolved => None,
        }
    }

    fn name(&self) -> Result<&OsStr, BeneathError> {
        self.resolved.file_name().ok_or_else(|| {
            BeneathError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", self.resolved.display()),
            ))
        })
    }

    /// The directory holding the target, opened as described in the module documentation
    /// and checked against `keep_out`; created first (each missing directory made without
    /// following anything) when `create` is set.
    fn open_parent(
        &self,
        create: bool,
        access: Access,
    ) -> Result<(OwnedFd, OsString), BeneathError> {
        let keep_out = match access {
            Access::Read => &self.keep_out.unreadable,
            Access::Write => &self.keep_out.unwritable,
        };
        let name = self.name()?.to_os_string();
        let changed = || BeneathError::Changed(self.resolved.clone());
        let (start, below): (OwnedFd, PathBuf) = match &self.anchor {
            Anchor::Root { root, relative, .. } => {
                let below = relative.parent().map(Path::to_path_buf).unwrap_or_default();
                let start = root
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(BeneathError::Io)?;
                (start, below)
            }
            Anchor::Resolved => {
                let start =
                    rustix::fs::open("/", DIRECTORY, Mode::empty()).map_err(io::Error::from)?;
                let below = self
                    .resolved
                    .parent()
                    .and_then(|parent| parent.strip_prefix("/").ok())
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                (start, below)
            }
        };
        let resolve = match self.anchor {
            Anchor::Root { .. } => ResolveFlags::BENEATH | NO_LINKS,
            Anchor::Resolved => NO_LINKS,
        };
        let parent =
            open_directory(&start, &below, resolve, create).map_err(|error| {
                match error.raw_os_error() {
                    Some(libc::ELOOP | libc::EXDEV | libc::ENOTDIR) => changed(),
                    _ => BeneathError::Io(error),
                }
            })?;
        let now = current_path(&parent).map_err(|_| changed())?;
        let full = match &self.anchor {
            Anchor::Resolved => {
                if Some(now.as_path()) != self.resolved.parent() {
                    return Err(changed());
                }
                now.join(&name)
            }
            Anchor::Root { root, named, .. } => {
                let root_now = root.current_path().map_err(|_| changed())?;
                let inside = now.strip_prefix(&root_now).map_err(|_| changed())?;
                let below = inside.join(&name);
                let forbidden = access == Access::Write
                    && below.components().any(|part| {
                        self.keep_out
                            .unwritable_names
                            .iter()
                            .any(|forbidden| part == Component::Normal(forbidden))
                    });
                if forbidden {
                    return Err(BeneathError::Protected(self.resolved.clone()));
                }
                named.join(below)
            }
        };
        if keep_out.iter().any(|kept| full.starts_with(kept)) {
            return Err(BeneathError::Protected(self.resolved.clone()));
        }
        Ok((parent, name))
    }

    /// The contents of the regular file, at most `cap` bytes (more is an error).
    pub fn read_capped(&self, cap: u64) -> Result<Vec<u8>, BeneathError> {
        let mut file = self.open_regular(false, false)?;
        let len = file.metadata()?.len();
        if len > cap {
            return Err(RegularFileError::TooLarge { bytes: len }.into());
        }
        let mut bytes = Vec::new();
        // One byte past the cap tells a file that grew after the check.
        (&mut file).take(cap + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > cap {
            return Err(RegularFileError::TooLarge {
                bytes: bytes.len() as u64,
            }
            .into());
        }
        Ok(bytes)
    }

    /// Writes `contents` into the regular file (created when missing, its parent
    /// directories with it when `create_parents`), in place.
    pub fn write(&self, contents: &[u8], create_parents: bool) -> Result<(), BeneathError> {
        let (parent, name) = self.open_parent(create_parents, Access::Write)?;
        // A FIFO without a reader would fail the open with a bare ENXIO; say what it is.
        if let Ok(stat) = rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            && FileType::from_raw_mode(stat.st_mode) == FileType::Fifo
        {
            return Err(RegularFileError::NotRegular {
                kind: "a FIFO (named pipe)",
            }
            .into());
        }
        let file = open_file_in(&parent, &name, OFlags::WRONLY | OFlags::CREATE)?;
        // Not truncated before the open file is known to be a regular file.
        let mut file = regular(file)?;
        file.set_len(0)?;
        file.write_all(contents)?;
        file.flush()?;
        Ok(())
    }

    /// Replaces the file with one holding `contents`: written beside it under a temporary
    /// name and renamed over it, so whatever sits at the name (a hard link, a symlink) is
    /// replaced, never written through. An existing regular file keeps its permissions;
    /// an existing directory or special file is refused.
    pub fn replace(&self, contents: &[u8]) -> Result<(), BeneathError> {
        self.replace_from(&mut &contents[..])
    }

    /// [`replace`](Self::replace) with the contents read from `source`.
    pub fn replace_from(&self, source: &mut dyn Read) -> Result<(), BeneathError> {
        let (parent, name) = self.open_parent(false, Access::Write)?;
        let mode = match rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => Some(Mode::from_raw_mode(stat.st_mode & 0o7777)),
                FileType::Symlink => None,
                other => {
                    return Err(RegularFileError::NotRegular {
                        kind: describe_kind(other),
                    }
                    .into());
                }
            },
            Err(rustix::io::Errno::NOENT) => None,
            Err(error) => return Err(io::Error::from(error).into()),
        };
        let mut attempt = 0u32;
        let (temporary, file) = loop {
            let temporary = OsString::from(format!(
                ".interpreter-write-{}-{attempt}",
                std::process::id()
            ));
            match rustix::fs::openat(
                &parent,
                temporary.as_os_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o666),
            ) {
                Ok(fd) => break (temporary, File::from(fd)),
                Err(rustix::io::Errno::EXIST) if attempt < 16 => attempt += 1,
                Err(error) => return Err(io::Error::from(error).into()),
            }
        };
        let written = (|| {
            let mut file = file;
            io::copy(source, &mut file)?;
            if let Some(mode) = mode {
                rustix::fs::fchmod(&file, mode)?;
            }
            file.sync_all()?;
            rustix::fs::renameat(&parent, temporary.as_os_str(), &parent, name.as_os_str())
                .map_err(io::Error::from)
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&parent, temporary.as_os_str(), AtFlags::empty());
        }
        written.map_err(BeneathError::Io)
    }

    /// Opens the existing regular file (for reading, and writing when `write`).
    pub fn open_existing(&self, write: bool) -> Result<File, BeneathError> {
        self.open_regular(write, false)
    }

    /// Creates the file, which must not exist (`O_EXCL`: a name planted at the last moment
    /// fails the open), and opens it for writing.
    pub fn create_new(&self) -> Result<File, BeneathError> {
        let (parent, name) = self.open_parent(false, Access::Write)?;
        let file = open_file_in(
            &parent,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        )?;
        Ok(File::from(file))
    }

    /// Removes the name (a symlink is removed itself, never what it points at).
    pub fn remove_file(&self) -> Result<(), BeneathError> {
        let (parent, name) = self.open_parent(false, Access::Write)?;
        rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::empty())
            .map_err(io::Error::from)?;
        Ok(())
    }

    /// Creates the directory; with `parents`, every missing one above it too.
    pub fn create_dir(&self, parents: bool) -> Result<(), BeneathError> {
        let (parent, name) = self.open_parent(parents, Access::Write)?;
        match rustix::fs::mkdirat(&parent, name.as_os_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::EXIST) if parents => {
                match rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {
                        Ok(())
                    }
                    _ => Err(io::Error::from(rustix::io::Errno::EXIST).into()),
                }
            }
            Err(error) => Err(io::Error::from(error).into()),
        }
    }

    /// Removes the entry itself (a symlink is removed, never what it points at): a file,
    /// or a directory, with everything in it when `recursive` (no symlink inside is
    /// followed either). `Ok(false)` when there was nothing to remove.
    pub fn remove_entry(&self, recursive: bool) -> Result<bool, BeneathError> {
        let (parent, name) = self.open_parent(false, Access::Write)?;
        match rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(rustix::io::Errno::NOENT) => return Ok(false),
            Err(error) => return Err(io::Error::from(error).into()),
            Ok(stat)
                if FileType::from_raw_mode(stat.st_mode) == FileType::Directory && !recursive =>
            {
                rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR)
                    .map_err(io::Error::from)?;
                return Ok(true);
            }
            Ok(_) => {}
        }
        remove_entry(&parent, &name, 0)?;
        Ok(true)
    }

    /// The kind of file at the target, a final symlink not followed; `None` when nothing
    /// is there.
    pub fn kind(&self) -> Result<Option<FileType>, BeneathError> {
        let (parent, name) = self.open_parent(false, Access::Read)?;
        match rustix::fs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(error) => Err(io::Error::from(error).into()),
        }
    }

    /// Copies the directory tree at `source` to this target, which must not exist yet.
    /// Every entry is listed (and checked) first, through descriptors from `source`'s
    /// directory on; then the copy is created beneath this target's directory. Symlinks are
    /// copied as symlinks, never followed; an entry named in `refused_names` (`.git`, …),
    /// a FIFO, a socket or a device, and more than `max_entries` entries, refuse the copy
    /// before anything is created.
    pub fn copy_tree_from(
        &self,
        source: &Target,
        max_entries: usize,
        refused_names: &[&str],
    ) -> Result<(), BeneathError> {
        let (source_parent, source_name) = source.open_parent(false, Access::Read)?;
        let source_dir = open_below(&source_parent, Path::new(&source_name))?;
        let mut entries: Vec<(PathBuf, FileType)> = Vec::new();
        list_tree(
            &source_dir,
            Path::new(""),
            &source.resolved,
            max_entries,
            refused_names,
            &mut entries,
            0,
        )?;
        let (parent, name) = self.open_parent(false, Access::Write)?;
        rustix::fs::mkdirat(&parent, name.as_os_str(), Mode::from_raw_mode(0o777))
            .map_err(io::Error::from)?;
        let destination = open_below(&parent, Path::new(&name))?;
        // Parents come before their children: the listing is depth first from the top.
        for (relative, kind) in entries {
            let (Some(dir), Some(entry)) = (relative.parent(), relative.file_name()) else {
                continue;
            };
            let from_dir = open_below(&source_dir, dir)?;
            let to_dir = open_below(&destination, dir)?;
            match kind {
                FileType::Directory => {
                    rustix::fs::mkdirat(&to_dir, entry, Mode::from_raw_mode(0o777))
                        .map_err(io::Error::from)?;
                }
                FileType::Symlink => {
                    let link = rustix::fs::readlinkat(&from_dir, entry, Vec::new())
                        .map_err(io::Error::from)?;
                    rustix::fs::symlinkat(link.as_c_str(), &to_dir, entry)
                        .map_err(io::Error::from)?;
                }
                _ => {
                    let mut from = regular(open_file_in(&from_dir, entry, OFlags::RDONLY)?)?;
                    let mut to = File::from(open_file_in(
                        &to_dir,
                        entry,
                        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                    )?);
                    io::copy(&mut from, &mut to)?;
                }
            }
        }
        Ok(())
    }

    fn open_regular(&self, write: bool, create: bool) -> Result<File, BeneathError> {
        let access = if write { Access::Write } else { Access::Read };
        let (parent, name) = self.open_parent(create, access)?;
        let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
        let file = open_file_in(&parent, &name, access)?;
        Ok(regular(file)?)
    }
}

/// `name` in `parent`, never through a symlink, never blocking on a FIFO.
fn open_file_in(parent: &OwnedFd, name: &OsStr, access: OFlags) -> Result<OwnedFd, BeneathError> {
    rustix::fs::openat(
        parent,
        name,
        access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    )
    .map_err(|error| match error {
        rustix::io::Errno::LOOP => RegularFileError::NotRegular { kind: "a symlink" }.into(),
        error => BeneathError::Io(error.into()),
    })
}

/// The open file, when it is a regular file.
fn regular(fd: OwnedFd) -> Result<File, RegularFileError> {
    let file = File::from(fd);
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(RegularFileError::NotRegular {
            kind: regular_file::kind(&metadata),
        });
    }
    Ok(file)
}

/// Opens the directory `below` names from `start` with `resolve`; with `create`, makes
/// each missing directory on the way (and enters it without following anything).
fn open_directory(
    start: &OwnedFd,
    below: &Path,
    resolve: ResolveFlags,
    create: bool,
) -> io::Result<OwnedFd> {
    let whole = if below.as_os_str().is_empty() {
        Path::new(".")
    } else {
        below
    };
    match rustix::fs::openat2(start, whole, DIRECTORY, Mode::empty(), resolve) {
        Err(rustix::io::Errno::NOENT) if create => {}
        other => return other.map_err(io::Error::from),
    }
    let mut directory = start.as_fd().try_clone_to_owned()?;
    for component in below.components() {
        let Component::Normal(name) = component else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain relative path", below.display()),
            ));
        };
        match rustix::fs::mkdirat(&directory, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(error) => return Err(error.into()),
        }
        directory = rustix::fs::openat2(
            &directory,
            name,
            DIRECTORY,
            Mode::empty(),
            ResolveFlags::BENEATH | NO_LINKS,
        )?;
    }
    Ok(directory)
}

/// The directory `path` names below `parent` (a name, or a relative path of several),
/// opened so that it can be listed and created in, without following anything.
fn open_listable(parent: &OwnedFd, path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        parent,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | NO_LINKS,
    )
}

/// The directory `relative` names below `top` (`top` itself when empty).
fn open_below(top: &OwnedFd, relative: &Path) -> Result<OwnedFd, BeneathError> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    open_listable(top, relative).map_err(|error| BeneathError::Io(error.into()))
}

/// Lists the tree below `dir` (at `relative` below the top, named `shown` for messages)
/// into `entries`, depth first, refusing what [`Target::copy_tree_from`] refuses.
fn list_tree(
    dir: &OwnedFd,
    relative: &Path,
    shown: &Path,
    max_entries: usize,
    refused_names: &[&str],
    entries: &mut Vec<(PathBuf, FileType)>,
    depth: usize,
) -> Result<(), BeneathError> {
    if depth >= MAX_REMOVE_DEPTH {
        return Err(BeneathError::Refused(format!(
            "{} is more than {MAX_REMOVE_DEPTH} directories deep",
            shown.display()
        )));
    }
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir).map_err(io::Error::from)? {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
    names.sort();
    for name in names {
        let path = relative.join(&name);
        let shown_path = shown.join(&path);
        if refused_names.iter().any(|refused| name == *refused) {
            return Err(BeneathError::Refused(format!(
                "{} is a `{}` entry; fs/copy does not copy repositories or agent configuration",
                shown_path.display(),
                name.to_string_lossy()
            )));
        }
        let stat = rustix::fs::statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(io::Error::from)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if !matches!(
            kind,
            FileType::Directory | FileType::RegularFile | FileType::Symlink
        ) {
            return Err(BeneathError::Refused(format!(
                "{} is {}; only regular files, directories and symlinks are copied",
                shown_path.display(),
                describe_kind(kind)
            )));
        }
        entries.push((path.clone(), kind));
        if entries.len() > max_entries {
            return Err(BeneathError::Refused(format!(
                "{} holds more than {max_entries} entries",
                shown.display()
            )));
        }
        if kind == FileType::Directory {
            let below = open_below(dir, Path::new(&name))?;
            list_tree(
                &below,
                &path,
                shown,
                max_entries,
                refused_names,
                entries,
                depth + 1,
            )?;
        }
    }
    Ok(())
}

/// How a file type reads in a message ("a FIFO (named pipe)").
pub fn describe_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "not a regular file",
    }
}

/// The kernel's current name for what `fd` is open on.
fn current_path(fd: &OwnedFd) -> io::Result<PathBuf> {
    let link = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())?;
    let path = PathBuf::from(OsString::from_vec(link.into_bytes()));
    if path.is_absolute() && !path.as_os_str().as_bytes().ends_with(b" (deleted)") {
        Ok(path)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is gone", path.display()),
        ))
    }
}

/// How deep [`Target::remove_entry`] and the tree copy go before they give up (a tree deeper than this is
/// an attack on the stack, not a workspace).
const MAX_REMOVE_DEPTH: usize = 256;

/// Removes `name` in the directory `parent` is open on, without following it: a
/// directory with everything in it (a symlink inside is removed, not followed), a file or
/// a symlink itself. For callers that found `parent` themselves and checked it.
pub fn remove_entry_in(parent: &OwnedFd, name: &OsStr) -> Result<(), BeneathError> {
    remove_entry(parent, name, 0)
}

fn remove_entry(parent: &OwnedFd, name: &OsStr, depth: usize) -> Result<(), BeneathError> {
    let stat =
        rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io::Error::from)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        rustix::fs::unlinkat(parent, name, AtFlags::empty()).map_err(io::Error::from)?;
        return Ok(());
    }
    if depth >= MAX_REMOVE_DEPTH {
        return Err(io::Error::other(format!(
            "the tree is more than {MAX_REMOVE_DEPTH} directories deep; not removed"
        ))
        .into());
    }
    let directory = open_listable(parent, Path::new(name)).map_err(io::Error::from)?;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&directory).map_err(io::Error::from)? {
        let entry = entry.map_err(io::Error::from)?;
        let entry_name = entry.file_name().to_bytes();
        if entry_name != b"." && entry_name != b".." {
            names.push(OsString::from_vec(entry_name.to_vec()));
        }
    }
    for entry_name in names {
        remove_entry(&directory, &entry_name, depth + 1)?;
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(io::Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn keep_out(unwritable: Vec<PathBuf>) -> Arc<KeepOut> {
        Arc::new(KeepOut {
            unwritable,
            ..KeepOut::default()
        })
    }

    fn beneath(
        root: &Arc<AnchoredRoot>,
        base: &Path,
        relative: &str,
        keep: Arc<KeepOut>,
    ) -> Target {
        Target::new(
            base.join(relative),
            base.join(relative),
            Anchor::Root {
                root: root.clone(),
                named: base.to_path_buf(),
                relative: PathBuf::from(relative),
            },
            keep,
        )
    }

    #[test]
    fn writes_land_beneath_the_root_and_never_through_a_swapped_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(base.join("dir")).unwrap();
        let root = Arc::new(AnchoredRoot::open(&base).unwrap());

        let target = beneath(&root, &base, "dir/new/file.txt", keep_out(vec![]));
        target.write(b"hello", true).unwrap();
        assert_eq!(
            std::fs::read(base.join("dir/new/file.txt")).unwrap(),
            b"hello"
        );

        // The directory swapped for a symlink to the outside after the check.
        std::fs::rename(base.join("dir"), base.join("dir.real")).unwrap();
        symlink(outside.path(), base.join("dir")).unwrap();
        let error = target.write(b"escaped", true).unwrap_err();
        assert!(matches!(error, BeneathError::Changed(_)), "{error}");
        assert!(!outside.path().join("new").exists());

        // A symlink at the last component is never written through.
        std::fs::write(outside.path().join("secret"), "kept").unwrap();
        symlink(outside.path().join("secret"), base.join("link")).unwrap();
        let link = beneath(&root, &base, "link", keep_out(vec![]));
        assert!(link.write(b"x", false).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "kept"
        );
        // Removing it removes the link alone.
        link.remove_file().unwrap();
        assert!(outside.path().join("secret").exists());
    }

    #[test]
    fn protected_objects_are_refused_whatever_the_name() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join(".git/hooks")).unwrap();
        let root = Arc::new(AnchoredRoot::open(&base).unwrap());
        let target = beneath(
            &root,
            &base,
            ".git/hooks/pre-commit",
            keep_out(vec![base.join(".git")]),
        );
        assert!(matches!(
            target.write(b"#!/bin/sh", false),
            Err(BeneathError::Protected(_))
        ));
        assert!(!base.join(".git/hooks/pre-commit").exists());

        // The root renamed meanwhile: its `.git` is still its `.git`.
        let moved = tempfile::tempdir().unwrap();
        let moved_root = moved.path().canonicalize().unwrap().join("moved");
        std::fs::rename(&base, &moved_root).unwrap();
        assert!(matches!(
            target.write(b"#!/bin/sh", false),
            Err(BeneathError::Protected(_))
        ));
        std::fs::rename(&moved_root, &base).unwrap();
    }

    #[test]
    fn a_resolved_target_must_still_be_where_its_name_said() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("a")).unwrap();
        let target = Target::new(
            base.join("a/file"),
            base.join("a/file"),
            Anchor::Resolved,
            keep_out(vec![]),
        );
        target.write(b"ok", false).unwrap();
        std::fs::rename(base.join("a"), base.join("b")).unwrap();
        symlink(base.join("b"), base.join("a")).unwrap();
        assert!(matches!(
            target.write(b"again", false),
            Err(BeneathError::Changed(_))
        ));
    }

    #[test]
    fn remove_all_removes_links_not_their_targets() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        std::fs::create_dir_all(base.join("tree/sub")).unwrap();
        std::fs::write(base.join("tree/sub/file"), "x").unwrap();
        symlink(outside.path(), base.join("tree/link")).unwrap();
        let root = Arc::new(AnchoredRoot::open(&base).unwrap());
        assert!(
            beneath(&root, &base, "tree", keep_out(vec![]))
                .remove_entry(true)
                .unwrap()
        );
        assert!(!base.join("tree").exists());
        assert!(outside.path().join("keep").exists());
    }
}
