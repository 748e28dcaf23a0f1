//! Writable roots as kernel objects: resolved once, opened, and used by descriptor after.
//!
//! A root's name is resolved the first time a session (or a `request_permissions` grant)
//! needs it; the directory is opened `O_PATH` and that descriptor is what every later use
//! starts from: the sandbox helper's Landlock rules and mounts (it is handed the
//! descriptors, not names, see [`super::sandbox_argv`]) and the agent's own writes
//! ([`crate::beneath`]). A command that renames the root, or one of its ancestors, and
//! plants a symlink where it was changes nothing for the next command: the descriptor
//! still names the same directory, wherever it is now ([`AnchoredRoot::current_path`]).
//!
//! Resolving the name that once is still resolving a name, so it follows rules of its
//! own:
//!
//! * A candidate that lies (by name) inside another root is opened *beneath* that root's
//!   descriptor (`openat2` with `RESOLVE_BENEATH`): a symlink a command could have planted
//!   in a writable root, in this session or an earlier one, never leads a root out of it.
//!   A workspace under `/tmp`, a `writable_roots = ["cache"]` entry and
//!   `TMPDIR=/tmp/build` are all opened this way.
//! * A candidate that does not exist is created (`mkdir -p`, beneath its container when it
//!   has one) before the first command runs, never skipped: a skipped root's name would be
//!   free for a command to plant a symlink on, which the next session would follow.
//! * `/` is refused as a root, and so is a root inside a protected path (the agent's home,
//!   a credential agent). A root other than the workspace and `/tmp` that holds the
//!   agent's home is refused too; the workspace and `/tmp` may hold it (a home under `/tmp`
//!   is common), and the helper's read-only mounts keep it out of reach there.
//!
//! A refused root is not writable; the refusal says why, and the engine shows it as a
//! warning when the thread starts.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use interpreter_protocol::SandboxPolicy;
use rustix::fs::{Mode, OFlags, ResolveFlags};

use super::paths::{resolve_for_write, temporary_candidates};

/// The directory a file descriptor is open on, as the kernel identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
}

impl FileIdentity {
    /// The identity of what `fd` is open on.
    pub fn of(fd: impl AsFd) -> io::Result<Self> {
        let stat = rustix::fs::fstat(fd)?;
        Ok(Self::from_stat(&stat))
    }

    /// The identity of what `path` names now (symlinks followed).
    pub fn at(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(path)?;
        Ok(Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
        })
    }

    pub(crate) fn from_stat(stat: &rustix::fs::Stat) -> Self {
        // `st_dev`/`st_ino` are unsigned on Linux, whatever the C library calls them.
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        Self {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        }
    }
}

/// A writable root, open as the directory it was when it was decided on.
pub struct AnchoredRoot {
    /// `O_PATH | O_DIRECTORY | O_CLOEXEC`: it grants nothing by itself, and only the
    /// sandbox helper gets a copy (and closes it before the command starts).
    fd: OwnedFd,
    identity: FileIdentity,
    /// The name it was opened by, for messages.
    named: PathBuf,
}

impl fmt::Debug for AnchoredRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnchoredRoot")
            .field("fd", &self.fd.as_raw_fd())
            .field("named", &self.named)
            .field("identity", &self.identity)
            .finish()
    }
}

impl AnchoredRoot {
    fn new(fd: OwnedFd, named: PathBuf) -> io::Result<Self> {
        let stat = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Directory {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", named.display()),
            ));
        }
        Ok(Self {
            identity: FileIdentity::from_stat(&stat),
            fd,
            named,
        })
    }

    /// Opens the directory `path` names now (symlinks followed). For roots that belong to
    /// no session: a person's `interpreter sandbox linux` command line, tests.
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Self::new(fd, path.to_path_buf())
    }

    /// Takes over a descriptor the engine passed to the sandbox helper (`--root-fd`). It
    /// is marked close-on-exec at once: the command must not inherit a way around its own
    /// mount namespace.
    pub(crate) fn from_inherited(raw: RawFd) -> io::Result<Self> {
        if raw < 3 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("root descriptor {raw} is a standard stream"),
            ));
        }
        // SAFETY: the descriptor number comes from our own command line, put there by the
        // engine, which keeps the descriptor open for this process; a freshly exec'd helper
        // has no other owner of it. `fcntl` first checks that it is open at all.
        #[allow(unsafe_code)]
        let fd = unsafe {
            rustix::io::fcntl_getfd(BorrowedFd::borrow_raw(raw))?;
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw)
        };
        rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
        Self::new(fd, PathBuf::from(format!("root descriptor {raw}")))
    }

    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The descriptor's number in this process (what `--root-fd` passes on).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn identity(&self) -> FileIdentity {
        self.identity
    }

    /// The name it was opened by.
    pub fn named(&self) -> &Path {
        &self.named
    }

    /// Where the directory is now: the kernel's own name for the object, checked to still
    /// name it. An error when the directory was removed or cannot be reached by a name.
    ///
    /// The name is for what needs one (messages, the protected paths found inside it, the
    /// helper's mount targets, which are checked again by identity); what a command may
    /// write is decided on the descriptor.
    pub fn current_path(&self) -> io::Result<PathBuf> {
        let link = rustix::fs::readlink(format!("/proc/self/fd/{}", self.raw_fd()), Vec::new())?;
        let path = PathBuf::from(OsString::from_vec(link.into_bytes()));
        // A removed directory reads as "PATH (deleted)", and one outside our root or
        // mount namespace as something relative: neither names it.
        if path.is_absolute() && FileIdentity::at(&path).ok() == Some(self.identity) {
            Ok(path)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "writable root {} is gone (now {})",
                    self.named.display(),
                    path.display()
                ),
            ))
        }
    }
}

/// Why a writable root was not made writable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RootRefusal {
    #[error(
        "writable root {root} was refused: it is `/`; choose `danger-full-access` to let commands write everywhere"
    )]
    FileSystemRoot { root: PathBuf },
    #[error(
        "writable root {root} was refused: it lies inside {protected}, which commands may never write"
    )]
    InsideProtected { root: PathBuf, protected: PathBuf },
    #[error(
        "writable root {root} was refused: it holds the agent's home {home}; name a directory that does not contain it"
    )]
    HoldsAgentHome { root: PathBuf, home: PathBuf },
    #[error(
        "writable root {root} was refused: it leads out of the writable root {container} through a symlink (a command could have planted it); name the directory it points to instead"
    )]
    LeadsOutside { root: PathBuf, container: PathBuf },
    #[error("writable root {root} could not be opened or created: {message}")]
    Unusable { root: PathBuf, message: String },
}

/// The roots of one policy, anchored, and the candidates that were refused.
#[derive(Debug, Default, Clone)]
pub struct AnchoredRoots {
    pub roots: Vec<Arc<AnchoredRoot>>,
    pub refused: Vec<RootRefusal>,
}

/// What a candidate root is, which decides the rules it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum CandidateKind {
    /// `writable_roots` entries, `$TMPDIR`, granted directories.
    Extra,
    /// `/tmp`.
    SystemTemp,
    /// The session's working directory.
    Workspace,
}

/// The roots one session has decided on, by the name they were configured with: the first
/// request for a name anchors (or refuses) it, every later one gets the same decision.
#[derive(Debug, Default)]
pub struct RootAnchors {
    anchored: Mutex<Vec<Decided>>,
}

/// A candidate's name and what was decided about it.
type Decided = (PathBuf, Result<Arc<AnchoredRoot>, RootRefusal>);

impl RootAnchors {
    pub fn new() -> Self {
        Self::default()
    }

    /// The writable roots of `policy` for a session working in `cwd` with the command
    /// environment `env` (for `$TMPDIR`), `protected` (the agent's home first) kept out:
    /// each anchored the first time it is asked for, the same object every time after.
    /// Empty for policies without roots (`read-only`, `danger-full-access`).
    pub fn anchor(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        env: &HashMap<String, String>,
        protected: &[PathBuf],
    ) -> AnchoredRoots {
        let candidates = candidates(policy, cwd, env);
        if candidates.is_empty() {
            return AnchoredRoots::default();
        }
        let protected_resolved: Vec<PathBuf> = protected
            .iter()
            .filter_map(|path| resolve_for_write(path))
            .collect();
        let home = protected_resolved.first();
        let Ok(mut anchored) = self.anchored.lock() else {
            // A poisoned cache means a panic while anchoring: refuse everything rather
            // than guess.
            return AnchoredRoots {
                roots: Vec::new(),
                refused: candidates
                    .into_iter()
                    .map(|(path, _)| RootRefusal::Unusable {
                        root: path,
                        message: "the session's roots are unavailable".to_owned(),
                    })
                    .collect(),
            };
        };
        let file_system_root = FileIdentity::at(Path::new("/")).ok();
        let mut result = AnchoredRoots::default();
        // Containers (shorter names) are decided first, so that what lies inside them is
        // opened beneath them; the result keeps the configured order (the workspace first).
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by_key(|&index| candidates[index].0.components().count());
        let mut decisions: Vec<Option<Result<Arc<AnchoredRoot>, RootRefusal>>> =
            vec![None; candidates.len()];
        for index in order {
            let (candidate, kind) = &candidates[index];
            let decided = match anchored.iter().find(|(name, _)| name == candidate) {
                Some((_, decided)) => decided.clone(),
                None => {
                    let decided =
                        open_candidate(candidate, &anchored).and_then(
                            |root| match check_candidate(
                                candidate,
                                *kind,
                                &root,
                                file_system_root,
                                &protected_resolved,
                                home,
                            ) {
                                Some(refusal) => Err(refusal),
                                None => Ok(root),
                            },
                        );
                    anchored.push((candidate.clone(), decided.clone()));
                    decided
                }
            };
            decisions[index] = Some(decided);
        }
        for decided in decisions.into_iter().flatten() {
            match decided {
                Ok(root) => {
                    if !result
                        .roots
                        .iter()
                        .any(|known| known.identity == root.identity)
                    {
                        result.roots.push(root);
                    }
                }
                Err(refusal) => {
                    if !result.refused.contains(&refusal) {
                        result.refused.push(refusal);
                    }
                }
            }
        }
        result
    }
}

/// The candidate roots of `policy` in the configured order (the workspace first),
/// normalized, each once with its most permissive kind.
fn candidates(
    policy: &SandboxPolicy,
    cwd: &Path,
    env: &HashMap<String, String>,
) -> Vec<(PathBuf, CandidateKind)> {
    let SandboxPolicy::WorkspaceWrite {
        writable_roots,
        exclude_tmpdir_env_var,
        exclude_slash_tmp,
        ..
    } = policy
    else {
        return Vec::new();
    };
    let mut named = vec![(cwd.to_path_buf(), CandidateKind::Workspace)];
    named.extend(
        writable_roots
            .iter()
            .map(|root| (cwd.join(root), CandidateKind::Extra)),
    );
    named.extend(
        temporary_candidates(*exclude_slash_tmp, *exclude_tmpdir_env_var, cwd, env)
            .into_iter()
            .map(|path| {
                let kind = if path == Path::new("/tmp") {
                    CandidateKind::SystemTemp
                } else {
                    CandidateKind::Extra
                };
                (path, kind)
            }),
    );
    let mut candidates: Vec<(PathBuf, CandidateKind)> = Vec::new();
    for (path, kind) in named {
        let path = normalize(&path);
        match candidates.iter_mut().find(|(known, _)| *known == path) {
            Some((_, known_kind)) => *known_kind = (*known_kind).max(kind),
            None => candidates.push((path, kind)),
        }
    }
    candidates
}

/// `path` without `.` components and repeated separators. `..` is kept: what it means
/// depends on symlinks, which only the kernel resolves.
fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|component| *component != Component::CurDir)
        .collect()
}

/// Opens `candidate`: beneath the innermost root already accepted that contains it by
/// name, else by its name; created first when it does not exist.
fn open_candidate(
    candidate: &Path,
    anchored: &[Decided],
) -> Result<Arc<AnchoredRoot>, RootRefusal> {
    let unusable = |error: io::Error| RootRefusal::Unusable {
        root: candidate.to_path_buf(),
        message: error.to_string(),
    };
    let has_parent_component = candidate
        .components()
        .any(|component| component == Component::ParentDir);
    let container = (!has_parent_component)
        .then(|| {
            anchored
                .iter()
                .filter_map(|(name, opened)| Some((name, opened.as_ref().ok()?)))
                .filter(|(name, _)| candidate != *name && candidate.starts_with(name))
                .max_by_key(|(name, _)| name.components().count())
        })
        .flatten();
    let fd = match container {
        Some((container_name, container)) => {
            let relative = candidate
                .strip_prefix(container_name)
                .map_err(|error| unusable(io::Error::other(error.to_string())))?;
            open_beneath(container, relative).map_err(|error| {
                if error.raw_os_error() == Some(libc::EXDEV) {
                    RootRefusal::LeadsOutside {
                        root: candidate.to_path_buf(),
                        container: container_name.clone(),
                    }
                } else {
                    unusable(error)
                }
            })?
        }
        None => open_by_name(candidate).map_err(unusable)?,
    };
    AnchoredRoot::new(fd, candidate.to_path_buf())
        .map(Arc::new)
        .map_err(unusable)
}

const DIRECTORY_PATH: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// Opens (creating it when missing) the directory `relative` names beneath `container`;
/// `EXDEV` when it leads out of it.
fn open_beneath(container: &AnchoredRoot, relative: &Path) -> io::Result<OwnedFd> {
    let open = |path: &Path| {
        rustix::fs::openat2(
            container.as_fd(),
            path,
            DIRECTORY_PATH,
            Mode::empty(),
            ResolveFlags::BENEATH,
        )
    };
    match open(relative) {
        Err(rustix::io::Errno::NOENT) => {}
        other => return other.map_err(io::Error::from),
    }
    // The deepest part that exists, resolved beneath the container as a whole...
    let components: Vec<Component<'_>> = relative.components().collect();
    let mut existing = components.len();
    let mut dir = loop {
        if existing == 0 {
            break rustix::fs::openat2(
                container.as_fd(),
                ".",
                DIRECTORY_PATH,
                Mode::empty(),
                ResolveFlags::BENEATH,
            )?;
        }
        let prefix: PathBuf = components[..existing].iter().collect();
        match open(&prefix) {
            Ok(fd) => break fd,
            Err(rustix::io::Errno::NOENT) => existing -= 1,
            Err(error) => return Err(error.into()),
        }
    };
    // ... then each missing directory made and entered without following anything.
    for component in &components[existing..] {
        match rustix::fs::mkdirat(&dir, component.as_os_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(error) => return Err(error.into()),
        }
        dir = rustix::fs::openat2(
            &dir,
            component.as_os_str(),
            DIRECTORY_PATH,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        )?;
    }
    Ok(dir)
}

/// Opens the directory `path` names (symlinks followed), creating it when missing.
fn open_by_name(path: &Path) -> io::Result<OwnedFd> {
    let open = || rustix::fs::open(path, DIRECTORY_PATH, Mode::empty());
    match open() {
        Err(rustix::io::Errno::NOENT) => {
            std::fs::create_dir_all(path)?;
            open().map_err(io::Error::from)
        }
        other => other.map_err(io::Error::from),
    }
}

/// Why the anchored `root` of `candidate` may not be a writable root, if it may not.
fn check_candidate(
    candidate: &Path,
    kind: CandidateKind,
    root: &AnchoredRoot,
    file_system_root: Option<FileIdentity>,
    protected: &[PathBuf],
    home: Option<&PathBuf>,
) -> Option<RootRefusal> {
    if file_system_root == Some(root.identity) {
        return Some(RootRefusal::FileSystemRoot {
            root: candidate.to_path_buf(),
        });
    }
    let current = match root.current_path() {
        Ok(current) => current,
        Err(error) => {
            return Some(RootRefusal::Unusable {
                root: candidate.to_path_buf(),
                message: error.to_string(),
            });
        }
    };
    if let Some(protected) = protected.iter().find(|path| current.starts_with(path)) {
        return Some(RootRefusal::InsideProtected {
            root: candidate.to_path_buf(),
            protected: protected.clone(),
        });
    }
    if kind == CandidateKind::Extra
        && let Some(home) = home.filter(|home| home.starts_with(&current))
    {
        return Some(RootRefusal::HoldsAgentHome {
            root: candidate.to_path_buf(),
            home: home.clone(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    fn workspace_write(extra: Vec<PathBuf>, slash_tmp: bool) -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: extra,
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: !slash_tmp,
        }
    }

    fn paths(roots: &AnchoredRoots) -> Vec<PathBuf> {
        roots
            .roots
            .iter()
            .map(|root| root.current_path().unwrap())
            .collect()
    }

    #[test]
    fn a_renamed_workspace_stays_the_root_and_a_planted_symlink_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("a/ws");
        std::fs::create_dir_all(&ws).unwrap();
        let anchors = RootAnchors::new();
        let policy = workspace_write(vec![], false);
        let first = anchors.anchor(&policy, &ws, &HashMap::new(), &[]);
        assert_eq!(paths(&first), vec![ws.clone()]);

        // What a command can do between two commands of the session.
        std::fs::rename(base.join("a"), base.join("a.real")).unwrap();
        std::fs::create_dir(base.join("a")).unwrap();
        symlink("/", &ws).unwrap();

        let second = anchors.anchor(&policy, &ws, &HashMap::new(), &[]);
        assert_eq!(paths(&second), vec![base.join("a.real/ws")]);
        assert!(second.refused.is_empty(), "{:?}", second.refused);
    }

    #[test]
    fn a_root_inside_another_never_leads_out_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), ws.join("cache")).unwrap();
        symlink("/", ws.join("slash")).unwrap();
        std::fs::create_dir(ws.join("real")).unwrap();
        symlink("real", ws.join("inside")).unwrap();
        let policy = workspace_write(
            vec![
                PathBuf::from("cache"),
                PathBuf::from("slash"),
                PathBuf::from("inside"),
            ],
            false,
        );
        let anchored = RootAnchors::new().anchor(&policy, &ws, &HashMap::new(), &[]);
        assert_eq!(paths(&anchored), vec![ws.clone(), ws.join("real")]);
        assert_eq!(
            anchored.refused,
            vec![
                RootRefusal::LeadsOutside {
                    root: ws.join("cache"),
                    container: ws.clone()
                },
                RootRefusal::LeadsOutside {
                    root: ws.join("slash"),
                    container: ws.clone()
                },
            ]
        );
    }

    #[test]
    fn a_missing_root_is_created_before_any_command_can_plant_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        let policy = workspace_write(vec![PathBuf::from("target/cache")], false);
        let anchored = RootAnchors::new().anchor(&policy, &ws, &HashMap::new(), &[]);
        assert!(ws.join("target/cache").is_dir());
        assert_eq!(paths(&anchored), vec![ws.clone(), ws.join("target/cache")]);
    }

    #[test]
    fn slash_and_roots_holding_or_inside_the_home_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let home = base.join("state/home");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(home.join("inner")).unwrap();
        let policy = workspace_write(
            vec![PathBuf::from("/"), base.join("state"), home.join("inner")],
            false,
        );
        let anchored =
            RootAnchors::new().anchor(&policy, &ws, &HashMap::new(), std::slice::from_ref(&home));
        assert_eq!(paths(&anchored), vec![ws.clone()]);
        assert_eq!(
            anchored.refused,
            vec![
                RootRefusal::FileSystemRoot {
                    root: PathBuf::from("/")
                },
                RootRefusal::HoldsAgentHome {
                    root: base.join("state"),
                    home: home.clone()
                },
                RootRefusal::InsideProtected {
                    root: home.join("inner"),
                    protected: home.clone()
                },
            ]
        );
        // The workspace itself may hold the home: the helper's mounts protect it there.
        let anchored = RootAnchors::new().anchor(
            &workspace_write(vec![], false),
            &base,
            &HashMap::new(),
            &[home],
        );
        assert_eq!(paths(&anchored), vec![base]);
    }

    #[test]
    fn a_removed_root_has_no_current_path() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("gone");
        std::fs::create_dir(&dir).unwrap();
        let root = AnchoredRoot::open(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert!(root.current_path().is_err());
    }
}
