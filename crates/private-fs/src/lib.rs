//! Files and directories only their owner can reach.
//!
//! The agent's home (`INTERPRETER_HOME`, by default `~/.interpreter`) holds its
//! configuration, API keys and OAuth tokens, the token and key files of its listeners,
//! the rollouts (every command's output, every file the model read), the state database
//! and the interactive history. Every writer there goes through this crate, so that each
//! directory the agent creates is 0700 and each file it writes 0600.
//!
//! The mode is given when the entry is created and set again right after: the process
//! umask can only take bits away (so nothing is ever more open than asked, not even
//! briefly), but an odd one could take away the owner's own, and a file that existed
//! before (written by an older version, or by hand) is tightened when it is written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt,
};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// The mode of every directory the agent creates in its home.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file the agent writes in its home.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and every missing parent, each with mode 0700 exactly. Directories that
/// already exist are left as they are (a parent may be `$HOME` or `/tmp`).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut missing: Vec<&Path> = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current {
        match fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => break,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", path.display()),
                ));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                missing.push(path);
                current = path
                    .parent()
                    .filter(|parent| !parent.as_os_str().is_empty());
            }
            Err(err) => return Err(err),
        }
    }
    for path in missing.into_iter().rev() {
        match fs::DirBuilder::new().mode(DIR_MODE).create(path) {
            Ok(()) => fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))?,
            // Made by another process at the same moment (another agent starting):
            // theirs, with the mode they gave it.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Opens `path` with `options`, a new file created 0600 and an existing one made 0600.
pub fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options.mode(FILE_MODE).open(path)?;
    restrict_open_file(&file)?;
    Ok(file)
}

/// A new, empty temporary file in `dir`, mode 0600, named `PREFIX…`: written whole and
/// then persisted over (or linked to) the path it is for.
pub fn temp_file_in(dir: &Path, prefix: &str) -> io::Result<NamedTempFile> {
    let temp = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(fs::Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)?;
    restrict_open_file(temp.as_file())?;
    Ok(temp)
}

/// Replaces `path` with `contents` at once: a private temporary file beside it, flushed
/// to disk, renamed over it. Readers see the old file or the new one, never a part.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = temp_file_in(dir, &format!(".{name}."))?;
    temp.write_all(contents)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// Makes the file at `path` 0600 if it exists: for files another library creates (the
/// database's journal files, the line editor's history).
pub fn restrict(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_file() && metadata.mode() & 0o7777 != FILE_MODE => {
            fs::set_permissions(path, fs::Permissions::from_mode(FILE_MODE))
        }
        Ok(_) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Makes sure `path` is a private file: created empty (0600) when missing, tightened when
/// not, without opening an existing file. (SQLite keeps POSIX locks on its database;
/// closing any other descriptor of the file would drop them for the whole process.)
pub fn ensure_file(path: &Path) -> io::Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
    {
        Ok(file) => restrict_open_file(&file),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => restrict(path),
        Err(err) => Err(err),
    }
}

fn restrict_open_file(file: &File) -> io::Result<()> {
    if file.metadata()?.mode() & 0o7777 != FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Takes group and other access off the home directory itself when it belongs to the
/// user this process runs as; the mode it had when it was changed. Everything in the
/// home is out of other users' reach once its directory is, so this one change is enough
/// for what older versions left readable (a home created 0755, rollouts 0644); a home of
/// another user is not this process's to change.
pub fn tighten_home(home: &Path) -> io::Result<Option<u32>> {
    let metadata = match fs::metadata(home) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mode = metadata.mode() & 0o7777;
    if !metadata.is_dir()
        || metadata.uid() != rustix::process::geteuid().as_raw()
        || mode & 0o077 == 0
    {
        return Ok(None);
    }
    fs::set_permissions(home, fs::Permissions::from_mode(mode & !0o077))?;
    Ok(Some(mode))
}

/// An entry of the home that group or other users may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
}

/// What [`exposed`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Exposure {
    /// The first entries found (the home itself first when it is one of them).
    pub entries: Vec<Exposed>,
    /// How many exposed entries were found in all (more than `entries` holds when the
    /// limit was reached).
    pub count: usize,
    /// The walk stopped at its budget: there may be more.
    pub incomplete: bool,
}

/// The entries of `home` (itself included, symlinks not followed) that group or other
/// users can reach and whose mode gives them any access: at most `limit` of them kept, at
/// most `budget` entries looked at. What lies in a directory they cannot enter is out of
/// their reach whatever its own mode, and is not looked at.
pub fn exposed(home: &Path, limit: usize, budget: usize) -> Exposure {
    let mut exposure = Exposure::default();
    let mut pending = vec![home.to_path_buf()];
    let mut seen = 0usize;
    while let Some(path) = pending.pop() {
        if seen == budget {
            exposure.incomplete = true;
            break;
        }
        seen += 1;
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            continue;
        };
        if metadata.file_type().is_symlink() {
            continue;
        }
        let mode = metadata.mode() & 0o7777;
        if mode & 0o077 != 0 {
            exposure.count += 1;
            if exposure.entries.len() < limit {
                exposure.entries.push(Exposed {
                    path: path.clone(),
                    mode,
                });
            }
        }
        let enterable_by_others = mode & 0o011 != 0;
        if metadata.is_dir()
            && enterable_by_others
            && let Ok(entries) = fs::read_dir(&path)
        {
            let mut children: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
            // Depth first, in name order: the report is the same from one run to the next.
            children.sort_unstable_by(|a, b| b.cmp(a));
            pending.extend(children);
        }
    }
    exposure
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    /// Runs `body` with the process umask set to `mask`; tests sharing the process run
    /// one at a time under it.
    fn with_umask(mask: u32, body: impl FnOnce()) {
        use std::sync::Mutex;
        static UMASK: Mutex<()> = Mutex::new(());
        let _guard = UMASK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let previous = rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
        body();
        rustix::process::umask(previous);
    }

    #[test]
    fn directories_are_0700_and_files_0600_whatever_the_umask() {
        for mask in [0o022, 0o000, 0o277] {
            with_umask(mask, || {
                let base = tempfile::tempdir().unwrap();
                let home = base.path().join("home");
                let deep = home.join("sessions/2026/01/02");
                create_dir_all(&deep).unwrap();
                for dir in [&home, &home.join("sessions"), &deep] {
                    assert_eq!(mode(dir), DIR_MODE, "{} under {mask:o}", dir.display());
                }
                let file = deep.join("rollout.jsonl");
                open(&file, OpenOptions::new().create(true).append(true)).unwrap();
                write_atomically(&home.join("config.toml"), b"x = 1\n").unwrap();
                for file in [&file, &home.join("config.toml")] {
                    assert_eq!(mode(file), FILE_MODE, "{} under {mask:o}", file.display());
                }
            });
        }
    }

    #[test]
    fn an_existing_file_is_tightened_when_written_and_a_parent_is_left_alone() {
        with_umask(0o022, existing_file_is_tightened);
    }

    fn existing_file_is_tightened() {
        let base = tempfile::tempdir().unwrap();
        fs::set_permissions(base.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let file = base.path().join("config.toml");
        fs::write(&file, "a").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomically(&file, b"b").unwrap();
        assert_eq!(mode(&file), FILE_MODE);
        let log = base.path().join("log");
        fs::write(&log, "a").unwrap();
        fs::set_permissions(&log, fs::Permissions::from_mode(0o666)).unwrap();
        open(&log, OpenOptions::new().append(true)).unwrap();
        assert_eq!(mode(&log), FILE_MODE);
        create_dir_all(&base.path().join("new")).unwrap();
        assert_eq!(
            mode(base.path()),
            0o755,
            "an existing parent keeps its mode"
        );
    }

    #[test]
    fn an_open_home_is_found_and_its_directory_tightened() {
        with_umask(0o022, open_home_is_found);
    }

    fn open_home_is_found() {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("home");
        fs::create_dir_all(home.join("sessions")).unwrap();
        fs::write(home.join("config.toml"), "").unwrap();
        fs::write(home.join("sessions/r.jsonl"), "").unwrap();
        for (path, bits) in [
            (home.clone(), 0o755),
            (home.join("sessions"), 0o755),
            (home.join("config.toml"), 0o644),
            (home.join("sessions/r.jsonl"), 0o600),
        ] {
            fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
        }
        let found = exposed(&home, 10, 1000);
        let paths: Vec<&Path> = found.entries.iter().map(|e| e.path.as_path()).collect();
        assert_eq!(
            paths,
            vec![
                home.as_path(),
                &home.join("config.toml"),
                &home.join("sessions")
            ]
        );
        assert_eq!(found.count, 3);
        assert!(!found.incomplete);
        assert_eq!(exposed(&home, 1, 1000).entries.len(), 1);
        assert!(exposed(&home, 10, 2).incomplete);

        assert_eq!(tighten_home(&home).unwrap(), Some(0o755));
        assert_eq!(mode(&home), 0o700);
        assert_eq!(
            exposed(&home, 10, 1000),
            Exposure::default(),
            "nothing in a private directory is in reach"
        );
        assert_eq!(tighten_home(&home).unwrap(), None);
        assert_eq!(tighten_home(&base.path().join("missing")).unwrap(), None);
    }
}
