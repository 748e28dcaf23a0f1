//! Read-only protected paths through a private mount namespace of the sandbox helper.
//!
//! Landlock can only add rights to whole trees, so granting a writable root would also grant
//! the `.git` inside it. Instead the helper enters a mount namespace of its own and
//! bind-mounts each protected path onto itself read-only: writes beneath it fail with
//! `EROFS`, and the mount point itself can be neither renamed, removed nor replaced
//! (`EBUSY`). The directories between a writable root and a protected path are bind-mounted
//! onto themselves as well (read-write): otherwise a command could rename such a directory,
//! protected path and all, and put a writable look-alike in its place (this matters for a
//! `gitdir:` target deeper inside the workspace).
//!
//! The namespace's mounts are made private before anything is mounted, so nothing
//! propagates to the host, and it disappears with the last process in it. A user without
//! `CAP_SYS_ADMIN` gets the namespace through a new user namespace that maps only their own
//! uid and gid, so files keep their owners and the command keeps its identity.
//!
//! The helper's plan also *seals* the rest of the file system: every mount outside the
//! writable roots becomes read-only in the namespace. Landlock has no right for `chmod`,
//! `chown` or `utime`, and a command running as root owns every root-owned file, so without
//! this it could, say, make a root-owned program setuid. A read-only mount answers such
//! changes with `EROFS`, whoever owns the file. Each writable root is cloned (with its
//! submounts, keeping their flags) before the seal and the clone is put back on top of it
//! afterwards, so the roots keep exactly the writability they had.
//!
//! Two more things happen in the namespace, because the command runs as the agent's own
//! user and file modes cannot keep it out:
//!
//! * **Hidden paths** (the agent's home: `credentials.json`, OAuth tokens, listener token
//!   files, `config.toml`, other threads' rollouts) are covered by an empty, read-only
//!   tmpfs of mode 000, so reading, listing or writing them fails with `EACCES`. When the
//!   session's working directory lies inside such a path, every entry beside the way down
//!   to it is covered instead (a file by `/dev/null`), so the workspace stays reachable.
//! * **A fresh `/dev`**: a tmpfs holding only `null`, `zero`, `full`, `random`, `urandom`
//!   and `tty` (bind mounts of the host's nodes), a new `devpts` instance for ptys of its
//!   own, and the usual `fd`/`stdin`/`stdout`/`stderr` links. The host's `/dev/pts/*` (the
//!   user's other terminals), consoles and disks are not there to open. The terminal a
//!   command was handed as stdin/stdout keeps working: it is an open file, not a path.
//!
//! (A fresh `/proc` for the PID namespace is mounted by the command's own process, which
//! is the only one inside that namespace: see [`mount_fresh_proc`].)
//!
//! [`MountPlan::apply`] issues only syscalls on data built beforehand and, for the probe's
//! plans (which seal nothing), allocates nothing, so the capability probe can run it
//! between `fork` and `exec`.

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{FileIdentity, WritableRoot};

/// `MOUNT_ATTR_RDONLY` from `<linux/mount.h>` (not exported by the `libc` crate).
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` from `<linux/mount.h>`, the argument of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// One path to bind-mount onto itself.
#[derive(Debug)]
struct MountTarget {
    path: CString,
    read_only: bool,
    /// What the path named when the plan was made: the mount goes onto that object or
    /// nowhere (see [`bind_onto_itself`]).
    identity: FileIdentity,
}

/// A writable root the seal keeps writable: its name now, and the directory it must name.
#[derive(Debug)]
struct SealedRoot {
    path: CString,
    identity: FileIdentity,
}

/// The errno of a target that is no longer the object the plan was made for. The caller
/// refuses the command on it (see `protect_with_mounts` in the helper).
pub(super) const CHANGED_UNDER_US: i32 = libc::ESTALE;

/// One path to cover so the command can neither read nor write what is beneath it.
#[derive(Debug)]
struct HiddenTarget {
    path: CString,
    /// A directory gets an empty tmpfs; anything else gets `/dev/null` bound over it.
    directory: bool,
}

/// The host device nodes the fresh `/dev` carries, bound from the host's.
const FRESH_DEV_NODES: [&CStr; 6] = [c"null", c"zero", c"full", c"random", c"urandom", c"tty"];

/// The links every `/dev` has.
const FRESH_DEV_LINKS: [(&CStr, &CStr); 5] = [
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
    (c"pts/ptmx", c"/dev/ptmx"),
];

/// Which step of the namespace setup failed, and the kernel's errno. `Copy` and free of
/// heap data so a forked child can produce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MountFailure {
    pub step: &'static str,
    pub errno: i32,
}

impl std::fmt::Display for MountFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            self.step,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

/// What [`MountPlan::apply`] achieved.
#[derive(Debug, Clone, Copy)]
pub(super) struct NamespaceOutcome {
    /// Children of this process start in a new PID namespace.
    pub pid_namespace: bool,
    /// Whether every mount is in place.
    pub result: Result<(), MountFailure>,
}

/// Everything the helper mounts, built while it may still read and allocate freely.
#[derive(Debug)]
pub(super) struct MountPlan {
    /// Shallowest first: a later bind of an ancestor would otherwise hide a deeper mount.
    targets: Vec<MountTarget>,
    /// The protected paths the read-only mounts keep read-only.
    covered: Vec<PathBuf>,
    /// Make everything outside these (the writable roots) read-only; `None` seals nothing.
    seal_outside: Option<Vec<SealedRoot>>,
    /// Covered last, so no bind mount above can bring them back.
    hidden: Vec<HiddenTarget>,
    /// Replace `/dev` with a minimal one (see the module documentation).
    fresh_dev: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl MountPlan {
    /// The mounts that protect `protected` inside `roots`.
    ///
    /// A protected path is covered when it exists, is not a symlink (`mount(2)` follows
    /// symlinks, so the link itself could still be replaced) and lies inside a writable
    /// root (outside every root Landlock grants nothing anyway). The rest is left to
    /// Landlock carve-outs by the caller.
    pub(super) fn for_protected(roots: &[WritableRoot], protected: &[PathBuf]) -> Self {
        let mut plan = Self::empty();
        for path in protected {
            let Ok(metadata) = fs::symlink_metadata(path) else {
                continue;
            };
            if metadata.file_type().is_symlink() {
                continue;
            }
            let containing: Vec<&Path> = roots
                .iter()
                .map(|root| root.root.as_path())
                .filter(|root| path.starts_with(root))
                .collect();
            if containing.is_empty() || !plan.add_target(path, true) {
                continue;
            }
            for root in containing {
                for ancestor in path.ancestors().skip(1) {
                    if ancestor == root || !ancestor.starts_with(root) {
                        break;
                    }
                    plan.add_target(ancestor, false);
                }
            }
            plan.covered.push(path.clone());
        }
        // A root of `/` would leave nothing to seal, and a clone put back on top of `/` is
        // not what path lookups from `/` see. (The engine refuses `/` as a root.)
        if roots.iter().all(|root| root.root != Path::new("/")) {
            plan.seal_outside = Some(
                roots
                    .iter()
                    .filter_map(|root| {
                        Some(SealedRoot {
                            path: CString::new(root.root.as_os_str().as_bytes()).ok()?,
                            identity: root.anchor.identity(),
                        })
                    })
                    .collect(),
            );
        }
        plan.targets.sort_by_key(|target| {
            target
                .path
                .as_bytes()
                .iter()
                .filter(|&&b| b == b'/')
                .count()
        });
        plan
    }

    /// A plan that makes `dir` read-only and seals everything but `writable`: what the
    /// capability probe tries.
    pub(super) fn probe(dir: &Path, writable: &Path) -> Self {
        let mut plan = Self::empty();
        plan.add_target(dir, true);
        plan.seal_outside = CString::new(writable.as_os_str().as_bytes())
            .ok()
            .zip(FileIdentity::at(writable).ok())
            .map(|(path, identity)| vec![SealedRoot { path, identity }]);
        plan
    }

    /// A plan that only enters the namespaces: what the PID-namespace probe tries.
    pub(super) fn namespaces_only() -> Self {
        Self::empty()
    }

    /// Also hides `hidden` (resolved, absolute paths: the agent's home) from the command,
    /// and gives it a fresh `/dev`. `keep` is the session's working directory: when it lies
    /// inside a hidden path, only the entries beside the way down to it are hidden.
    pub(super) fn hiding(
        mut self,
        hidden: &[PathBuf],
        keep: &Path,
        roots: &[WritableRoot],
    ) -> Self {
        for path in hidden {
            hide_beneath(path, keep, &mut self.hidden);
        }
        // A writable root under /dev (odd, but a policy may say so) keeps the real one.
        self.fresh_dev = !roots.iter().any(|root| root.root.starts_with("/dev"));
        self
    }

    fn empty() -> Self {
        let (uid, gid) = current_ids();
        Self {
            targets: Vec::new(),
            covered: Vec::new(),
            seal_outside: None,
            hidden: Vec::new(),
            fresh_dev: false,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    }

    /// Adds (or upgrades to read-only) a target, as the object it names now; `false` when
    /// the path cannot be passed to the kernel or names nothing.
    fn add_target(&mut self, path: &Path, read_only: bool) -> bool {
        let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        match self.targets.iter_mut().find(|target| target.path == c_path) {
            Some(existing) => existing.read_only |= read_only,
            None => {
                let Ok(identity) = lstat_identity(path) else {
                    return false;
                };
                self.targets.push(MountTarget {
                    path: c_path,
                    read_only,
                    identity,
                });
            }
        }
        true
    }

    /// Whether there are protected paths to mount (what the Landlock fallback must then
    /// carve out instead).
    pub(super) fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Whether the plan hides anything from the command.
    pub(super) fn hides_anything(&self) -> bool {
        !self.hidden.is_empty()
    }

    /// Whether the mounts keep `path` read-only.
    pub(super) fn covers(&self, path: &Path) -> bool {
        self.covered.iter().any(|covered| covered == path)
    }

    /// Enters a private mount namespace (and, when the kernel allows, a new PID namespace
    /// for the children of this process) and mounts every target. Must run in a
    /// single-threaded process (user namespaces demand it); allocates nothing.
    ///
    /// A failure can leave the process in a namespace with only some targets mounted. That
    /// weakens nothing: the caller then protects every path with Landlock carve-outs. But
    /// a PID namespace, once entered, must still be used (the next child becomes its PID
    /// 1), so the outcome reports it even on failure.
    pub(super) fn apply(&self) -> NamespaceOutcome {
        let pid_namespace = match self.enter_namespace() {
            Ok(pid_namespace) => pid_namespace,
            Err(failure) => {
                return NamespaceOutcome {
                    pid_namespace: false,
                    result: Err(failure),
                };
            }
        };
        NamespaceOutcome {
            pid_namespace,
            result: self.mount_all(),
        }
    }

    fn mount_all(&self) -> Result<(), MountFailure> {
        // Without this, our mounts would propagate to the host's shared mounts.
        mount(
            None,
            c"/",
            libc::MS_REC | libc::MS_PRIVATE,
            "making all mounts private",
        )?;
        if let Some(roots) = &self.seal_outside {
            seal_outside(roots)?;
        }
        for target in &self.targets {
            bind_onto_itself(target)?;
        }
        for target in &self.hidden {
            if target.directory {
                mount_fs(
                    c"tmpfs",
                    &target.path,
                    c"tmpfs",
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"mode=000,size=4k,nr_inodes=1",
                    "hiding a directory from the command",
                )?;
            } else {
                mount(
                    Some(c"/dev/null"),
                    &target.path,
                    libc::MS_BIND,
                    "hiding a file from the command",
                )?;
            }
        }
        if self.fresh_dev {
            mount_fresh_dev()?;
        }
        Ok(())
    }

    /// Enters the namespaces; returns whether a PID namespace came with them.
    ///
    /// The PID namespace is what ties every process of a command to it: the first child
    /// forked afterwards is its PID 1, and when that process dies the kernel kills all the
    /// others. Processes outside it cannot even be named (`kill` gets `ESRCH`). It is
    /// asked for together with the mount namespace, and dropped only if the kernel refuses
    /// the combination (for example `user.max_pid_namespaces = 0`).
    fn enter_namespace(&self) -> Result<bool, MountFailure> {
        for (flags, pid_namespace) in [
            (libc::CLONE_NEWNS | libc::CLONE_NEWPID, true),
            (libc::CLONE_NEWNS, false),
        ] {
            match unshare(flags) {
                Ok(()) => return Ok(pid_namespace),
                Err(libc::EPERM) => break,
                Err(_) if pid_namespace => continue,
                Err(errno) => {
                    return Err(MountFailure {
                        step: "creating a mount namespace",
                        errno,
                    });
                }
            }
        }
        // Not privileged: a user namespace makes us privileged over a mount namespace of
        // our own. setgroups must be denied before an unprivileged process may write gid_map.
        let mut last_errno = libc::EPERM;
        let mut entered = None;
        for (flags, pid_namespace) in [
            (
                libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID,
                true,
            ),
            (libc::CLONE_NEWUSER | libc::CLONE_NEWNS, false),
        ] {
            match unshare(flags) {
                Ok(()) => {
                    entered = Some(pid_namespace);
                    break;
                }
                Err(errno) => last_errno = errno,
            }
        }
        let Some(pid_namespace) = entered else {
            return Err(MountFailure {
                step: "creating a user and mount namespace",
                errno: last_errno,
            });
        };
        write_proc_file(c"/proc/self/setgroups", b"deny", "denying setgroups")?;
        write_proc_file(c"/proc/self/uid_map", &self.uid_map, "writing uid_map")?;
        write_proc_file(c"/proc/self/gid_map", &self.gid_map, "writing gid_map")?;
        Ok(pid_namespace)
    }
}

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

#[allow(unsafe_code)]
fn current_ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: getuid and getgid take no arguments, cannot fail and touch no memory of ours.
    unsafe { (libc::getuid(), libc::getgid()) }
}

#[allow(unsafe_code)]
fn unshare(flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: unshare takes only flags and reads or writes no memory of ours.
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

#[allow(unsafe_code)]
fn mount(
    source: Option<&CStr>,
    target: &CStr,
    flags: libc::c_ulong,
    step: &'static str,
) -> Result<(), MountFailure> {
    let source = source.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: source and target are NUL-terminated strings that outlive the call (or a null
    // source, which mount(2) accepts for propagation changes); file-system type and data
    // are null, which bind mounts and propagation changes ignore.
    let result = unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(MountFailure {
            step,
            errno: last_errno(),
        })
    }
}

/// Makes every mount read-only except the trees of `roots`, which keep their flags.
///
/// Each root is cloned before the seal and the clone moved back on top of it afterwards;
/// recursion holds the clones on the stack, so nothing is allocated. A root is opened by
/// its name and must be the directory the session anchored ([`CHANGED_UNDER_US`]
/// otherwise); the clone is taken from, and put back onto, that opened directory.
fn seal_outside(roots: &[SealedRoot]) -> Result<(), MountFailure> {
    let Some((root, rest)) = roots.split_first() else {
        return make_read_only(c"/");
    };
    let failure = |step| {
        move |error: rustix::io::Errno| MountFailure {
            step,
            errno: error.raw_os_error(),
        }
    };
    let directory = rustix::fs::openat(
        rustix::fs::CWD,
        root.path.as_c_str(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(failure("opening a writable root"))?;
    if identity_of(&directory) != Some(root.identity) {
        return Err(MountFailure {
            step: "a writable root was renamed or replaced",
            errno: CHANGED_UNDER_US,
        });
    }
    let clone = copy_of(&directory, "cloning a writable root")?;
    seal_outside(rest)?;
    attach(&clone, &directory, "putting a writable root back")
}

/// A detached copy of the mount tree at the open file `opened` (`open_tree` with
/// `OPEN_TREE_CLONE | AT_RECURSIVE`): what a recursive bind mount would attach.
fn copy_of(
    opened: &rustix::fd::OwnedFd,
    step: &'static str,
) -> Result<rustix::fd::OwnedFd, MountFailure> {
    use rustix::mount::OpenTreeFlags;
    rustix::mount::open_tree(
        opened,
        c"",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )
    .map_err(|error| MountFailure {
        step,
        errno: error.raw_os_error(),
    })
}

/// Attaches the detached mount tree `copy` onto the open file `onto` (`move_mount`).
fn attach(
    copy: &rustix::fd::OwnedFd,
    onto: &rustix::fd::OwnedFd,
    step: &'static str,
) -> Result<(), MountFailure> {
    use rustix::mount::MoveMountFlags;
    rustix::mount::move_mount(
        copy,
        c"",
        onto,
        c"",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(|error| MountFailure {
        step,
        errno: error.raw_os_error(),
    })
}

/// Bind-mounts `target` onto itself (read-only when it says so), as the object it named
/// when the plan was made: the path is opened without following a final symlink, checked
/// to be that object ([`CHANGED_UNDER_US`] otherwise), and the copy is taken from and
/// attached onto that open file. A target that is gone needs no cover.
///
/// Recursive, because a non-recursive bind of a tree holding mounts the user namespace has
/// locked is refused, and would hide mounts beneath the target.
fn bind_onto_itself(target: &MountTarget) -> Result<(), MountFailure> {
    let failure = |step| {
        move |error: rustix::io::Errno| MountFailure {
            step,
            errno: error.raw_os_error(),
        }
    };
    let opened = match rustix::fs::openat(
        rustix::fs::CWD,
        target.path.as_c_str(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        Ok(opened) => opened,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(error) => return Err(failure("opening a protected path")(error)),
    };
    if identity_of(&opened) != Some(target.identity) {
        return Err(MountFailure {
            step: "a protected path was renamed or replaced",
            errno: CHANGED_UNDER_US,
        });
    }
    let copy = copy_of(&opened, "bind-mounting a protected path")?;
    if target.read_only {
        set_read_only(&copy)?;
    }
    attach(&copy, &opened, "bind-mounting a protected path")
}

/// The identity of an open file; `None` when `fstat` fails (which matches no plan).
fn identity_of(fd: &rustix::fd::OwnedFd) -> Option<FileIdentity> {
    FileIdentity::of(fd).ok()
}

/// The identity of what `path` names, a final symlink not followed.
fn lstat_identity(path: &Path) -> io::Result<FileIdentity> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = fs::symlink_metadata(path)?;
    Ok(FileIdentity {
        dev: metadata.dev(),
        ino: metadata.ino(),
    })
}

/// Makes the mount at `path`, and every mount beneath it, read-only.
fn make_read_only(path: &CStr) -> Result<(), MountFailure> {
    set_read_only_at(libc::AT_FDCWD, path, libc::AT_RECURSIVE)
}

/// Makes the (detached) mount tree `mount`, a copy from `open_tree`, read-only before it
/// is attached, as [`make_read_only`] does for a mounted path.
fn set_read_only(mount: &rustix::fd::OwnedFd) -> Result<(), MountFailure> {
    use std::os::fd::AsRawFd as _;
    set_read_only_at(
        mount.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
    )
}

/// `mount_setattr(dirfd, path, flags, {attr_set: MOUNT_ATTR_RDONLY})`.
///
/// `mount_setattr(2)` (Linux 5.12, older than the Landlock ABI we require) rather than a
/// `MS_REMOUNT | MS_BIND | MS_RDONLY` remount: it changes only the read-only attribute, so
/// the `nosuid`/`nodev`/`noexec` flags a user namespace locks on the original mount are
/// kept without reading them back, and `AT_RECURSIVE` also covers the mounts beneath.
#[allow(unsafe_code)]
fn set_read_only_at(
    dirfd: libc::c_int,
    path: &CStr,
    flags: libc::c_int,
) -> Result<(), MountFailure> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `dirfd` is `AT_FDCWD` or a descriptor the caller holds open, `path` is
    // NUL-terminated, and `attr` is a live, correctly laid out mount_attr whose size we
    // pass; the kernel only reads them during the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(MountFailure {
            step: "making a protected path read-only",
            errno: last_errno(),
        })
    }
}

/// Writes `contents` to a `/proc` control file in one `write`, as the id-map files demand.
#[allow(unsafe_code)]
fn write_proc_file(path: &CStr, contents: &[u8], step: &'static str) -> Result<(), MountFailure> {
    let failure = |errno| MountFailure { step, errno };
    // SAFETY: path is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(failure(last_errno()));
    }
    // SAFETY: fd is open and ours; the pointer and length describe the live `contents`.
    let written = unsafe { libc::write(fd, contents.as_ptr().cast(), contents.len()) };
    let write_errno = last_errno();
    // SAFETY: fd is open, ours, and not used after this.
    unsafe { libc::close(fd) };
    match usize::try_from(written) {
        Ok(count) if count == contents.len() => Ok(()),
        Ok(_) => Err(failure(libc::EIO)),
        Err(_) => Err(failure(write_errno)),
    }
}

/// Adds `path`, or the entries beside the way down to `keep` when `keep` lies inside it, to
/// `hidden`. Paths that do not exist need no cover; symlinks are left alone (a mount would
/// follow them and cover their target instead).
fn hide_beneath(path: &Path, keep: &Path, hidden: &mut Vec<HiddenTarget>) {
    let Ok(metadata) = fs::symlink_metadata(path) else {
        return;
    };
    if metadata.file_type().is_symlink() || path == keep {
        return;
    }
    if !keep.starts_with(path) || !metadata.is_dir() {
        if let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) {
            hidden.push(HiddenTarget {
                path: c_path,
                directory: metadata.is_dir(),
            });
        }
        return;
    }
    // An unreadable directory cannot be listed by the command either.
    let Ok(entries) = fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        hide_beneath(&entry.path(), keep, hidden);
    }
}

/// Puts a minimal `/dev` on top of the host's (see the module documentation).
fn mount_fresh_dev() -> Result<(), MountFailure> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags};
    let failure = |step| {
        move |error: rustix::io::Errno| MountFailure {
            step,
            errno: error.raw_os_error(),
        }
    };
    // Detached copies of the host's nodes, taken before the tmpfs covers them.
    let mut clones = Vec::with_capacity(FRESH_DEV_NODES.len());
    let host_dev = open_dev().map_err(failure("opening the host's /dev"))?;
    for name in FRESH_DEV_NODES {
        match rustix::mount::open_tree(
            &host_dev,
            name,
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        ) {
            Ok(clone) => clones.push((name, clone)),
            // A machine without, say, /dev/tty gives the command none either.
            Err(rustix::io::Errno::NOENT) => {}
            Err(error) => return Err(failure("copying a device node")(error)),
        }
    }
    mount_fs(
        c"tmpfs",
        c"/dev",
        c"tmpfs",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"mode=755,size=64k",
        "mounting a fresh /dev",
    )?;
    let dev = open_dev().map_err(failure("opening the fresh /dev"))?;
    for (name, clone) in &clones {
        let node = rustix::fs::openat(
            &dev,
            *name,
            rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(0o666),
        )
        .map_err(failure("creating a device mount point"))?;
        drop(node);
        rustix::mount::move_mount(
            clone,
            c"",
            &dev,
            *name,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .map_err(failure("mounting a device node"))?;
    }
    rustix::fs::mkdirat(&dev, c"pts", rustix::fs::Mode::from_raw_mode(0o755))
        .map_err(failure("creating /dev/pts"))?;
    // A new instance: only the ptys the command itself opens are in it.
    mount_fs(
        c"devpts",
        c"/dev/pts",
        c"devpts",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
        "mounting a private /dev/pts",
    )?;
    rustix::fs::mkdirat(&dev, c"shm", rustix::fs::Mode::from_raw_mode(0o755))
        .map_err(failure("creating /dev/shm"))?;
    for (target, link) in FRESH_DEV_LINKS {
        rustix::fs::symlink(target, link).map_err(failure("creating a /dev link"))?;
    }
    Ok(())
}

/// Whatever is mounted on `/dev` now, as a directory handle.
fn open_dev() -> rustix::io::Result<rustix::fd::OwnedFd> {
    rustix::fs::openat(
        rustix::fs::CWD,
        c"/dev",
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
}

/// Mounts a `proc` for the PID namespace this process leads on `/proc`, so the command sees
/// only its own processes: not the agent's `/proc/<pid>/fd`, nor anyone else's command
/// lines. Called by the command's process itself (PID 1 of the namespace) before it drops
/// its capabilities; allocates nothing.
pub(super) fn mount_fresh_proc() -> Result<(), MountFailure> {
    mount_fs(
        c"proc",
        c"/proc",
        c"proc",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        c"",
        "mounting a fresh /proc",
    )
}

/// `mount(2)` of a file system of type `fstype` from `source` on `target` with `data`.
#[allow(unsafe_code)]
fn mount_fs(
    source: &CStr,
    target: &CStr,
    fstype: &CStr,
    flags: libc::c_ulong,
    data: &CStr,
    step: &'static str,
) -> Result<(), MountFailure> {
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; the kernel
    // only reads them.
    let result = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(MountFailure {
            step,
            errno: last_errno(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn target_list(plan: &MountPlan) -> Vec<(String, bool)> {
        plan.targets
            .iter()
            .map(|target| (target.path.to_string_lossy().into_owned(), target.read_only))
            .collect()
    }

    #[test]
    fn plan_pins_the_way_down_and_skips_symlinks_and_outside_paths() {
        let ws = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(ws.path()).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("modules/sub")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let outside = fs::canonicalize(outside.path()).unwrap();
        std::os::unix::fs::symlink(&outside, root.join(".agents")).unwrap();

        let roots = vec![WritableRoot {
            root: root.clone(),
            read_only_subpaths: vec![],
            anchor: std::sync::Arc::new(crate::sandbox::AnchoredRoot::open(&root).unwrap()),
        }];
        let protected = vec![
            root.join(".git"),
            root.join("modules/sub"),
            root.join(".agents"),
            outside.clone(),
            root.join("missing"),
        ];
        let plan = MountPlan::for_protected(&roots, &protected);
        let show = |path: PathBuf| path.to_string_lossy().into_owned();
        let mut targets = target_list(&plan);
        targets.sort();
        let mut expected = vec![
            (show(root.join(".git")), true),
            (show(root.join("modules")), false),
            (show(root.join("modules/sub")), true),
        ];
        expected.sort();
        assert_eq!(targets, expected);
        assert!(plan.covers(&root.join(".git")) && plan.covers(&root.join("modules/sub")));
        assert!(!plan.covers(&root.join(".agents")) && !plan.covers(&outside));
        let depths: Vec<usize> = plan
            .targets
            .iter()
            .map(|target| {
                Path::new(target.path.to_str().unwrap())
                    .components()
                    .count()
            })
            .collect();
        assert!(depths.is_sorted(), "not shallowest first: {targets:?}");
    }

    #[test]
    fn read_only_wins_when_a_path_is_both_pinned_and_protected() {
        let ws = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(ws.path()).unwrap();
        fs::create_dir_all(root.join(".agents/inner")).unwrap();
        let roots = vec![WritableRoot {
            root: root.clone(),
            read_only_subpaths: vec![],
            anchor: std::sync::Arc::new(crate::sandbox::AnchoredRoot::open(&root).unwrap()),
        }];
        let plan =
            MountPlan::for_protected(&roots, &[root.join(".agents/inner"), root.join(".agents")]);
        let show = |path: PathBuf| path.to_string_lossy().into_owned();
        assert_eq!(
            target_list(&plan),
            vec![
                (show(root.join(".agents")), true),
                (show(root.join(".agents/inner")), true)
            ]
        );
    }
}
