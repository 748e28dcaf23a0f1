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
//! [`MountPlan::apply`] issues only syscalls on data built beforehand and, for the probe's
//! plans (which seal nothing), allocates nothing, so the capability probe can run it
//! between `fork` and `exec`.

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::WritableRoot;

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
}

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
    seal_outside: Option<Vec<CString>>,
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
        // not what path lookups from `/` see.
        if roots.iter().all(|root| root.root != Path::new("/")) {
            plan.seal_outside = Some(
                roots
                    .iter()
                    .filter_map(|root| CString::new(root.root.as_os_str().as_bytes()).ok())
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
            .map(|root| vec![root]);
        plan
    }

    /// A plan that only enters the namespaces: what the PID-namespace probe tries.
    pub(super) fn namespaces_only() -> Self {
        Self::empty()
    }

    fn empty() -> Self {
        let (uid, gid) = current_ids();
        Self {
            targets: Vec::new(),
            covered: Vec::new(),
            seal_outside: None,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    }

    /// Adds (or upgrades to read-only) a target; `false` when the path cannot be passed to
    /// the kernel.
    fn add_target(&mut self, path: &Path, read_only: bool) -> bool {
        let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        match self.targets.iter_mut().find(|target| target.path == path) {
            Some(existing) => existing.read_only |= read_only,
            None => self.targets.push(MountTarget { path, read_only }),
        }
        true
    }

    /// Whether there is anything to mount.
    pub(super) fn is_empty(&self) -> bool {
        self.targets.is_empty()
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
            // Recursive, because a non-recursive bind of a tree holding mounts the user
            // namespace has locked is refused, and would hide mounts beneath the target.
            mount(
                Some(&target.path),
                &target.path,
                libc::MS_BIND | libc::MS_REC,
                "bind-mounting a protected path",
            )?;
            if target.read_only {
                make_read_only(&target.path)?;
            }
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
/// recursion holds the clones on the stack, so nothing is allocated.
fn seal_outside(roots: &[CString]) -> Result<(), MountFailure> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags};
    let Some((root, rest)) = roots.split_first() else {
        return make_read_only(c"/");
    };
    let failure = |step| {
        move |error: rustix::io::Errno| MountFailure {
            step,
            errno: error.raw_os_error(),
        }
    };
    let clone = rustix::mount::open_tree(
        rustix::fs::CWD,
        root.as_c_str(),
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )
    .map_err(failure("cloning a writable root"))?;
    seal_outside(rest)?;
    rustix::mount::move_mount(
        &clone,
        c"",
        rustix::fs::CWD,
        root.as_c_str(),
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(failure("putting a writable root back"))
}

/// Makes the mount at `path`, and every mount beneath it, read-only.
///
/// `mount_setattr(2)` (Linux 5.12, older than the Landlock ABI we require) rather than a
/// `MS_REMOUNT | MS_BIND | MS_RDONLY` remount: it changes only the read-only attribute, so
/// the `nosuid`/`nodev`/`noexec` flags a user namespace locks on the original mount are
/// kept without reading them back, and `AT_RECURSIVE` also covers mounts beneath `path`.
#[allow(unsafe_code)]
fn make_read_only(path: &CStr) -> Result<(), MountFailure> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: path is NUL-terminated and attr is a live, correctly laid out mount_attr whose
    // size we pass; the kernel only reads both during the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
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
