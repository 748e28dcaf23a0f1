//! Landlock + seccomp enforcement for the sandbox helper, and the kernel capability probe.
//!
//! The helper is a freshly exec'd, single-threaded copy of our binary. It builds every rule
//! first, then restricts itself (no_new_privs, Landlock, seccomp) and `exec`s the command,
//! which inherits the restrictions and cannot drop them.
//!
//! # File system (mount namespace + Landlock)
//!
//! The ruleset handles every file-system right of the kernel's Landlock ABI, with
//! `HardRequirement` compatibility, so nothing is silently dropped. Read and execute are
//! granted on `/`. Write-class rights (write, truncate, create/remove/rename of every file
//! type, device ioctls) are granted beneath each writable root, and on the character
//! devices shells need (`/dev/null`, `/dev/tty`, `/dev/ptmx`, `/dev/pts`, ...).
//!
//! Landlock rules only add rights to a whole hierarchy; they cannot grant a root and carve
//! a protected subpath (`.git`, `.agents`, `.interpreter`) back out. So before building the
//! ruleset the helper enters a private mount namespace and bind-mounts every protected path
//! read-only (see [`super::mount_ns`]); each writable root is then granted whole, and the
//! kernel answers writes beneath a protected path with `EROFS` and renames or removals of
//! it with `EBUSY`. The working directory is entered only after the mounts, so it resolves
//! through them.
//!
//! A protected path the mounts do not cover becomes a *carve-out*, handled by the same
//! grant computation with Landlock alone: the root that holds it is not granted itself; we
//! walk down the directories that lead to carve-outs and grant each *sibling* entry instead
//! (directories get all write rights beneath them, files get write/truncate on themselves).
//! Carve-outs are protected entries that are symlinks (a mount would follow them) and, when
//! no mount namespace can be created at all (no privileges and unprivileged user namespaces
//! disabled), every protected path; the helper then warns once on stderr. In that degraded
//! mode the directory holding a carve-out (normally the workspace root) gets no new entries
//! and its entries cannot be deleted or renamed; existing files stay editable in place.
//! Symlinks among granted entries are not followed, and rules attach to the inodes that
//! existed when the helper started.
//!
//! Because a whole root is granted, the seccomp filter also denies the syscalls that could
//! undo the read-only mounts or reach a protected file through another mount: the mount
//! API (`mount`, `umount2`, `mount_setattr`, `open_tree`, `fsopen`, ...), `setns` and
//! `open_by_handle_at`. Landlock already refuses `mount`/`umount`/`pivot_root`; the rest
//! matters when the command runs as root.
//!
//! The minimum is Landlock ABI 3 (Linux 6.2): before it, `truncate(2)` was not controlled
//! and could empty any file on the machine.
//!
//! # Process
//!
//! Before any of that the helper leaves the user's terminal session (`setsid`), and the
//! namespaces it enters come with a PID namespace when the kernel allows: the helper then
//! forks, the command becomes PID 1 of that namespace, and the helper only waits and
//! mirrors its exit. Every mount outside the writable roots is made read-only there
//! ([`super::mount_ns`]), all capabilities are dropped even for root
//! ([`super::hardening`]), Landlock ABI 6+ scopes signals and abstract UNIX sockets, seccomp
//! refuses `TIOCSTI`/`TIOCLINUX`, and the command asks to be SIGKILLed when its parent (the
//! helper, or the agent) dies. docs/sandbox.md lists every protection and every known gap.
//!
//! # Network
//!
//! With network access off, a seccomp filter makes `socket`/`socketpair` fail with `EPERM`
//! for every address family except `AF_UNIX`, so IP sockets cannot even be created; when the
//! ABI is 4 or newer Landlock also handles TCP bind/connect with no rule allowing any port.
//! `connect` fails for every family, `sendto` with an address fails, and datagram `AF_UNIX`
//! sockets cannot be made: nothing reaches a socket outside the sandbox by its address.
//! `ptrace`, `process_vm_readv/writev` and io_uring are always denied (they reach outside
//! the Landlock domain or around it).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_protocol::SandboxPolicy;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::hardening;
use super::mount_ns::{MountFailure, MountPlan, mount_fresh_proc};
use super::paths::resolve_for_write;
use super::{
    AnchoredRoot, LinuxHelperArgs, NETWORK_DISABLED_ENV_VAR, RootAnchors, SandboxError,
    SandboxSupport, WritableRoot, writable_roots_of,
};

/// Oldest Landlock ABI we accept, and why.
const MIN_LANDLOCK_ABI: u32 = 3;
const MIN_ABI_FEATURE: &str = "control over truncate(2)";
const MIN_ABI_KERNEL: &str = "6.2";
/// First Landlock ABI that can restrict TCP bind/connect.
const NETWORK_LANDLOCK_ABI: u32 = 4;
/// First Landlock ABI that can scope signals and abstract UNIX sockets to the sandbox.
const SCOPE_LANDLOCK_ABI: u32 = 6;

/// `TIOCSTI` and `TIOCLINUX` from `<asm-generic/ioctls.h>` (the same on every architecture
/// Landlock supports except the few whose ioctl numbers differ, which `libc` knows).
/// (`libc` types them `c_ulong` or `c_int` depending on the C library.)
#[allow(clippy::unnecessary_cast)]
const TERMINAL_INJECTION_IOCTLS: [u64; 2] = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// The socket type bits of `socket(2)`'s second argument (`SOCK_TYPE_MASK` in the kernel;
/// the bits above are `SOCK_NONBLOCK` and `SOCK_CLOEXEC`).
const SOCKET_TYPE_MASK: u64 = 0xf;

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Character devices (and the pty directory) that shells and ordinary tools open for
/// writing even when they write no files.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// How long the capability probe waits for its `/bin/true` children.
const PROBE_CHILD_DEADLINE: Duration = Duration::from_secs(10);
const PROBE_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Runs `args.command` under `args.policy`, replacing this process. Returns only on error.
///
/// Must run before any other thread exists: Landlock and seccomp restrict the calling
/// thread, and only that thread continues into the command.
pub fn run_linux_helper(
    args: LinuxHelperArgs,
    env: &HashMap<String, String>,
) -> Result<Infallible, SandboxError> {
    let LinuxHelperArgs {
        policy,
        cwd,
        policy_cwd,
        protected,
        root_fds,
        command,
    } = args;
    // Taken over (and marked close-on-exec) first, whatever the policy: the command must
    // never inherit a descriptor that leads around its own mount namespace.
    let inherited = root_fds
        .map(|fds| {
            fds.into_iter()
                .map(|fd| {
                    AnchoredRoot::from_inherited(fd)
                        .map(Arc::new)
                        .map_err(|error| {
                            SandboxError::InvalidHelperArgs(format!(
                                "root descriptor {fd} is not an open directory: {error}"
                            ))
                        })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let Some((program, program_args)) = command.split_first() else {
        return Err(SandboxError::InvalidHelperArgs(
            "no command to run".to_owned(),
        ));
    };
    // Read first: the parent-death request below must name the parent that started us.
    let mut parent = hardening::ParentCheck::Pid(hardening::parent_pid());
    hardening::leave_terminal_session()?;

    // Everything that reads the file system or allocates happens before restricting.
    let prepared = match policy {
        SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => None,
        _ => Some(PreparedSandbox::new(
            &policy,
            &policy_cwd,
            env,
            &protected,
            inherited,
        )?),
    };
    // Only now: a working directory entered before the bind mounts would still lead into
    // the mount tree they cover, where protected paths are writable.
    std::env::set_current_dir(&cwd).map_err(|source| SandboxError::Cwd {
        path: cwd.clone(),
        source,
    })?;
    if let Some(prepared) = prepared {
        if prepared.pid_namespace {
            // The command must be a child of ours to live in the new PID namespace; this
            // process stays outside the sandbox only to wait for it and pass its status on.
            let (alive_reader, alive_writer) =
                std::io::pipe().map_err(|source| SandboxError::Hardening {
                    step: "creating the parent-alive pipe",
                    source,
                })?;
            match hardening::fork()? {
                hardening::Forked::Parent(child) => {
                    drop(alive_reader);
                    // This process now stands between the agent and the command: it must
                    // die with the agent too (and the command, PID 1 of its namespace, and
                    // everything in it, with this process). On error we exit, which the
                    // child's own parent-death signal turns into its end.
                    hardening::die_with_parent(parent)?;
                    // Held open until this process ends (`exit` runs no destructors): its
                    // closing is how the child learns the helper died.
                    let _alive = alive_writer;
                    return hardening::wait_and_mirror(child);
                }
                hardening::Forked::Child => {
                    drop(alive_writer);
                    parent = hardening::ParentCheck::Pipe(alive_reader);
                    if let Err(failure) = mount_fresh_proc() {
                        // Like the other namespace steps, a kernel that refuses this (a
                        // container whose /proc is partly masked) weakens the sandbox but
                        // does not stop the command; the agent itself is non-dumpable.
                        eprintln!(
                            "interpreter sandbox: warning: could not mount a /proc of the \
                             command's own ({failure}); other processes stay visible in /proc"
                        );
                    }
                }
            }
        }
        hardening::drop_all_capabilities()?;
        prepared
            .enforce()
            .map_err(EnforceFailure::into_sandbox_error)?;
    }
    // Last before exec: a credential change after it could clear the request.
    hardening::die_with_parent(parent)?;

    let mut command = Command::new(program);
    command.args(program_args);
    if !policy.has_full_network_access() {
        command.env(NETWORK_DISABLED_ENV_VAR, "1");
    }
    let source = command.exec();
    Err(SandboxError::Exec {
        program: program.clone(),
        source,
    })
}

/// Everything the helper needs to restrict itself, built while it still may read and
/// allocate freely.
struct PreparedSandbox {
    ruleset: RulesetCreated,
    seccomp: BpfProgram,
    /// Children of this process start in a new PID namespace.
    pid_namespace: bool,
}

impl PreparedSandbox {
    /// `policy_cwd` is the session's working directory, not the command's: only the policy
    /// decides what is writable. `inherited` are the session's anchored roots; without
    /// them (the helper form a person types) the roots are decided here, by the same rules.
    fn new(
        policy: &SandboxPolicy,
        policy_cwd: &Path,
        env: &HashMap<String, String>,
        protected: &[PathBuf],
        inherited: Option<Vec<Arc<AnchoredRoot>>>,
    ) -> Result<Self, SandboxError> {
        // Checked before touching mounts: there is no point isolating a command we refuse.
        let abi = required_landlock_abi()?;
        let network_off = !policy.has_full_network_access();
        let anchored = match (policy, inherited) {
            (SandboxPolicy::WorkspaceWrite { .. }, Some(inherited)) => inherited,
            (SandboxPolicy::WorkspaceWrite { .. }, None) => {
                let decided = RootAnchors::new().anchor(policy, policy_cwd, env, protected);
                for refusal in &decided.refused {
                    // The helper's stderr is the command's: the person sees why.
                    eprintln!("interpreter sandbox: warning: {refusal}");
                }
                decided.roots
            }
            _ => Vec::new(),
        };
        let roots = writable_roots_of(&anchored, protected, env.get("HOME").map(Path::new));
        create_missing_protected_dirs(&roots, protected);
        let hidden: Vec<PathBuf> = protected
            .iter()
            .filter_map(|path| resolve_for_write(path))
            .collect();
        let keep = resolve_for_write(policy_cwd).unwrap_or_else(|| policy_cwd.to_path_buf());
        let (carve_outs, pid_namespace) = protect_with_mounts(&roots, &hidden, &keep)?;
        Ok(Self {
            ruleset: build_ruleset(abi, &roots, &carve_outs, network_off)?,
            seccomp: build_seccomp_filter(network_off)?,
            pid_namespace,
        })
    }

    /// Restricts the calling thread. Allocates nothing on success, so it is also usable
    /// between `fork` and `exec`.
    fn enforce(self) -> Result<(), EnforceFailure> {
        enforce_landlock(self.ruleset)?;
        enforce_seccomp(&self.seccomp)
    }
}

/// Creates the always-protected directories (the agent's home) that do not exist yet but
/// lie inside a writable root, so a bind mount can keep them read-only; otherwise a command
/// could create the home, and a `config.toml` in it, before the agent does.
fn create_missing_protected_dirs(roots: &[WritableRoot], protected: &[PathBuf]) {
    // Compared resolved, as the roots are (a `$HOME` reached through a symlink, say).
    for path in protected.iter().filter_map(|path| resolve_for_write(path)) {
        let inside_a_root = roots.iter().any(|root| path.starts_with(&root.root));
        if inside_a_root && fs::symlink_metadata(&path).is_err() {
            // Best effort: if this fails, the path stays a Landlock carve-out, which also
            // keeps it from being created.
            let _ = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path);
        }
    }
}

/// Makes the protected paths inside `roots` read-only with bind mounts in a private mount
/// namespace, hides `hidden` (the agent's home; `keep`, the session's working directory,
/// stays reachable) and gives the command a fresh `/dev`; returns the protected paths
/// Landlock must carve out instead, and whether the command gets a PID namespace of its own.
///
/// A writable root or protected path that is not the directory it was when the plan was
/// made (a command running at the same moment renamed it) fails the command: the mounts
/// are made from what was checked, never from what a name leads to afterwards.
fn protect_with_mounts(
    roots: &[WritableRoot],
    hidden: &[PathBuf],
    keep: &Path,
) -> Result<(Vec<PathBuf>, bool), SandboxError> {
    // Protected paths of every root count for every root: a `gitdir:` target may live
    // inside another writable root.
    let mut protected: Vec<PathBuf> = Vec::new();
    for path in roots.iter().flat_map(|root| &root.read_only_subpaths) {
        if !protected.contains(path) {
            protected.push(path.clone());
        }
    }
    let plan = MountPlan::for_protected(roots, &protected).hiding(hidden, keep, roots);
    // Entered even with nothing to mount: the namespaces also bring the PID namespace.
    let outcome = plan.apply();
    let pid_namespace = outcome.pid_namespace;
    match outcome.result {
        Ok(()) => Ok((
            protected
                .into_iter()
                .filter(|path| !plan.covers(path))
                .collect(),
            pid_namespace,
        )),
        Err(failure) if failure.errno == libc::ESTALE => Err(SandboxError::RootMoved {
            detail: failure.step.to_owned(),
        }),
        Err(failure) => {
            if !plan.is_empty() || plan.hides_anything() {
                // The helper's stderr is the command's: this is where a person (or the
                // model) reading the output learns why creating files next to `.git` fails.
                eprintln!(
                    "interpreter sandbox: warning: could not create a mount namespace to keep \
                     protected paths read-only ({failure}); falling back to Landlock alone, so \
                     no new files can be created, removed or renamed in the directory that \
                     holds .git, .agents, .interpreter or the agent's home, and the agent's \
                     home stays readable"
                );
            }
            Ok((protected, pid_namespace))
        }
    }
}

/// Why restricting failed; kept allocation-free so a forked child can produce it.
#[derive(Debug)]
enum EnforceFailure {
    MountNamespace(MountFailure),
    LandlockRestrict(RulesetError),
    LandlockNotFullyEnforced {
        ruleset: RulesetStatus,
        no_new_privs: bool,
    },
    Seccomp(seccompiler::Error),
}

impl EnforceFailure {
    fn into_sandbox_error(self) -> SandboxError {
        match self {
            // Only the capability probe meets this, and it reports the errno itself.
            Self::MountNamespace(failure) => SandboxError::LandlockSetup {
                step: "setting up the mount namespace".to_owned(),
                message: failure.to_string(),
            },
            Self::LandlockRestrict(error) => SandboxError::LandlockSetup {
                step: "restricting the process".to_owned(),
                message: error.to_string(),
            },
            Self::LandlockNotFullyEnforced {
                ruleset,
                no_new_privs,
            } => SandboxError::LandlockNotEnforced {
                status: format!("{ruleset:?}, no_new_privs: {no_new_privs}"),
            },
            Self::Seccomp(error) => SandboxError::Seccomp {
                step: "installing the filter",
                message: error.to_string(),
            },
        }
    }

    /// The errno a forked probe child reports through `pre_exec`.
    fn errno(&self) -> i32 {
        match self {
            Self::MountNamespace(failure) => failure.errno,
            Self::LandlockRestrict(_) => libc::EPERM,
            Self::LandlockNotFullyEnforced { .. } => libc::EOPNOTSUPP,
            Self::Seccomp(_) => libc::EINVAL,
        }
    }
}

fn enforce_landlock(ruleset: RulesetCreated) -> Result<(), EnforceFailure> {
    let status = ruleset
        .restrict_self()
        .map_err(EnforceFailure::LandlockRestrict)?;
    if status.ruleset == RulesetStatus::FullyEnforced && status.no_new_privs {
        Ok(())
    } else {
        Err(EnforceFailure::LandlockNotFullyEnforced {
            ruleset: status.ruleset,
            no_new_privs: status.no_new_privs,
        })
    }
}

fn enforce_seccomp(filter: &BpfProgram) -> Result<(), EnforceFailure> {
    // Also sets no_new_privs, which seccomp requires of unprivileged processes.
    seccompiler::apply_filter(filter).map_err(EnforceFailure::Seccomp)
}

/// The kernel's Landlock ABI, or why there is none.
#[allow(unsafe_code)]
fn kernel_landlock_abi() -> Result<u32, String> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the syscall reads
    // and writes no memory; it only returns the ABI version or an error.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0_usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version > 0 {
        return u32::try_from(version).map_err(|_| format!("unexpected Landlock ABI {version}"));
    }
    let error = io::Error::last_os_error();
    Err(match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "Landlock is built into the kernel but not enabled \
             (add `landlock` to the `lsm=` kernel boot parameter)"
            .to_owned(),
        Some(libc::ENOSYS) => "the kernel has no Landlock support \
             (it needs CONFIG_SECURITY_LANDLOCK=y; Landlock ABI 3 arrived in Linux 6.2)"
            .to_owned(),
        _ => format!("querying the Landlock ABI failed: {error}"),
    })
}

/// The kernel's ABI as the `landlock` crate's type, if it meets our minimum.
///
/// We hand the detected ABI to the crate (which it discourages for portability) on purpose:
/// we want every right this kernel can enforce, and `HardRequirement` turns any right the
/// kernel rejects into an error rather than a weaker ruleset.
fn required_landlock_abi() -> Result<ABI, SandboxError> {
    let version =
        kernel_landlock_abi().map_err(|reason| SandboxError::LandlockUnavailable { reason })?;
    if version < MIN_LANDLOCK_ABI {
        return Err(SandboxError::LandlockAbiTooOld {
            found: version,
            required: MIN_LANDLOCK_ABI,
            required_feature: MIN_ABI_FEATURE,
            required_kernel: MIN_ABI_KERNEL,
        });
    }
    Ok(ABI::from(i32::try_from(version).unwrap_or(i32::MAX)))
}

fn landlock_setup_error(step: impl Into<String>) -> impl FnOnce(RulesetError) -> SandboxError {
    let step = step.into();
    move |error| SandboxError::LandlockSetup {
        step,
        message: error.to_string(),
    }
}

fn build_ruleset(
    abi: ABI,
    roots: &[WritableRoot],
    carve_outs: &[PathBuf],
    network_off: bool,
) -> Result<RulesetCreated, SandboxError> {
    let all_fs = AccessFs::from_all(abi);
    // Connecting to a pathname UNIX socket (ABI 9+) is not a write; seccomp already lets
    // AF_UNIX through, so Landlock allows it everywhere too.
    let read_everywhere = AccessFs::from_read(abi) | (all_fs & AccessFs::ResolveUnix);
    let write_dir = AccessFs::from_write(abi);
    let write_file = write_dir & AccessFs::from_file(abi);

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all_fs)
        .map_err(landlock_setup_error("handling file-system rights"))?;
    if network_off && abi >= ABI::from(NETWORK_LANDLOCK_ABI as i32) {
        // Handled with no rule: every TCP bind and connect is denied.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_setup_error("handling TCP rights"))?;
    }
    if abi >= ABI::from(SCOPE_LANDLOCK_ABI as i32) {
        // No signals to processes outside the sandbox (the agent, the user's shell, other
        // users' processes when running as root) and no connecting to abstract UNIX
        // sockets created outside it (pathname sockets are governed by file rights).
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(landlock_setup_error("scoping signals and abstract sockets"))?;
    }
    let mut created = ruleset
        .create()
        .map_err(landlock_setup_error("creating the ruleset"))?;

    created = add_path_rule(created, Path::new("/"), read_everywhere)?;
    for device in WRITABLE_DEVICES {
        let device = Path::new(device);
        if fs::metadata(device).is_ok() {
            created = add_path_rule(created, device, write_file)?;
        }
    }
    for grant in write_grants(roots, carve_outs, write_dir, write_file) {
        created = created
            .add_rule(PathBeneath::new(grant.directory, grant.access))
            .map_err(landlock_setup_error(format!(
                "granting {}",
                grant.path.display()
            )))?;
    }
    Ok(created)
}

fn add_path_rule(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let fd = PathFd::new(path).map_err(|error| SandboxError::LandlockSetup {
        step: format!("opening {}", path.display()),
        message: error.to_string(),
    })?;
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(landlock_setup_error(format!("granting {}", path.display())))
}

/// One Landlock write rule: the object it is made from, and the name it had, for messages
/// and tests.
struct Grant {
    path: PathBuf,
    directory: OwnedFd,
    access: BitFlags<AccessFs>,
}

/// The Landlock write rules for `roots`: each root whole when it holds no carve-out,
/// otherwise its other entries one by one (see the module documentation). Every rule is
/// made from the root's anchored descriptor or from an entry opened beneath it without
/// following symlinks, so nothing a command renames meanwhile turns a rule into a grant
/// on something else.
fn write_grants(
    roots: &[WritableRoot],
    carve_outs: &[PathBuf],
    write_dir: BitFlags<AccessFs>,
    write_file: BitFlags<AccessFs>,
) -> Vec<Grant> {
    let protected: Vec<&Path> = carve_outs.iter().map(PathBuf::as_path).collect();
    let mut grants = Vec::new();
    for root in roots {
        // Best effort like the rest of the walk: a root that cannot be duplicated gets
        // no grant, which only costs writability.
        let Ok(directory) = root.anchor.as_fd().try_clone_to_owned() else {
            continue;
        };
        grant_beneath(
            directory,
            &root.root,
            &protected,
            write_dir,
            write_file,
            &mut grants,
        );
    }
    grants
}

fn grant_beneath(
    directory: OwnedFd,
    path: &Path,
    protected: &[&Path],
    write_dir: BitFlags<AccessFs>,
    write_file: BitFlags<AccessFs>,
    grants: &mut Vec<Grant>,
) {
    if protected.contains(&path) {
        return;
    }
    if !protected.iter().any(|carved| carved.starts_with(path)) {
        grants.push(Grant {
            path: path.to_path_buf(),
            directory,
            access: write_dir,
        });
        return;
    }
    // An unreadable directory gets no grants: failing closed only costs writability.
    let Ok(listing) = rustix::fs::openat(
        &directory,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&listing) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let Ok(opened) = rustix::fs::openat(
            &directory,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        let Ok(stat) = rustix::fs::fstat(&opened) else {
            continue;
        };
        let entry_path = path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        let file_type = FileType::from_raw_mode(stat.st_mode);
        if file_type == FileType::Symlink || protected.contains(&entry_path.as_path()) {
            continue;
        }
        if file_type == FileType::Directory {
            grant_beneath(
                opened,
                &entry_path,
                protected,
                write_dir,
                write_file,
                grants,
            );
        } else {
            grants.push(Grant {
                path: entry_path,
                directory: opened,
                access: write_file,
            });
        }
    }
}

fn seccomp_error(step: &'static str) -> impl FnOnce(seccompiler::BackendError) -> SandboxError {
    move |error| SandboxError::Seccomp {
        step,
        message: error.to_string(),
    }
}

// `libc::SYS_*` are `c_long`: already `i64` here, `i32` on 32-bit targets.
#[allow(clippy::useless_conversion)]
fn build_seccomp_filter(network_off: bool) -> Result<BpfProgram, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(seccomp_error("choosing the architecture"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // An empty rule list matches the syscall unconditionally.
    for syscall in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // The read-only bind mounts over protected paths must stay: no remounting,
        // unmounting or detached copies, and no way back into the host's namespace.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_setns,
        // Opens an inode through any mount, including a writable one beneath a protected
        // path's bind mount (needs CAP_DAC_READ_SEARCH, so only a root command could).
        libc::SYS_open_by_handle_at,
        // The kernel keyrings of the user and the session hold credentials (Kerberos
        // tickets, ecryptfs and NFS keys, whatever a login put there).
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
    ] {
        rules.insert(i64::from(syscall), Vec::new());
    }
    // Pushing bytes into a terminal's input queue (TIOCSTI) or driving the Linux console
    // (TIOCLINUX) would let a command type into the user's shell. The request is an
    // `unsigned int` to the kernel, so only the low 32 bits are compared, as it does.
    let mut ioctl_rules = Vec::new();
    for request in TERMINAL_INJECTION_IOCTLS {
        let is_request =
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                .map_err(seccomp_error("building the ioctl condition"))?;
        ioctl_rules.push(
            SeccompRule::new(vec![is_request]).map_err(seccomp_error("building the ioctl rule"))?,
        );
    }
    rules.insert(i64::from(libc::SYS_ioctl), ioctl_rules);
    if network_off {
        // No connecting at all: `AF_UNIX` sockets must still be created (socketpair is how
        // many programs talk to their own children), but a pathname socket is a door to
        // another program, the agent's own app-server socket, an ssh-agent or a Docker
        // daemon among them, and Landlock (before ABI 9) has no right for it.
        rules.insert(i64::from(libc::SYS_connect), Vec::new());
        // Nor sending to an address without connecting: a datagram to `/dev/log`, a
        // systemd notify socket or any other pathname datagram socket outside. `sendto`
        // names the address in an argument seccomp can see; `sendmsg`/`sendmmsg` hide it
        // in a structure it cannot read, so datagram `AF_UNIX` sockets (the only kind
        // that sends to an address without `connect`) cannot be made at all. Stream and
        // seqpacket sockets ignore or refuse an address once connected.
        let names_an_address =
            SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
                .map_err(seccomp_error("building the sendto condition"))?;
        rules.insert(
            i64::from(libc::SYS_sendto),
            vec![
                SeccompRule::new(vec![names_an_address])
                    .map_err(seccomp_error("building the sendto rule"))?,
            ],
        );
        for syscall in [libc::SYS_socket, libc::SYS_socketpair] {
            let domain_is_not_unix = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )
            .map_err(seccomp_error("building the socket-family condition"))?;
            let domain_is_unix = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                libc::AF_UNIX as u64,
            )
            .map_err(seccomp_error("building the socket-family condition"))?;
            // The type argument also carries SOCK_NONBLOCK and SOCK_CLOEXEC.
            let type_is_datagram = SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(SOCKET_TYPE_MASK),
                libc::SOCK_DGRAM as u64,
            )
            .map_err(seccomp_error("building the socket-type condition"))?;
            rules.insert(
                i64::from(syscall),
                vec![
                    SeccompRule::new(vec![domain_is_not_unix])
                        .map_err(seccomp_error("building the socket rule"))?,
                    SeccompRule::new(vec![domain_is_unix, type_is_datagram])
                        .map_err(seccomp_error("building the datagram socket rule"))?,
                ],
            );
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(seccomp_error("building the filter"))?;
    BpfProgram::try_from(filter).map_err(seccomp_error("compiling the filter"))
}

/// What this kernel can enforce, found by restricting short-lived child processes.
pub fn probe_support() -> SandboxSupport {
    let mut problems = Vec::new();
    let landlock_abi = match kernel_landlock_abi() {
        Ok(version) => Some(version),
        Err(reason) => {
            problems.push(format!("Landlock is not available: {reason}"));
            None
        }
    };

    let landlock_enforced = match landlock_abi {
        Some(version) if version < MIN_LANDLOCK_ABI => {
            problems.push(format!(
                "Landlock ABI {version} is too old: the sandbox needs ABI {MIN_LANDLOCK_ABI} \
                 ({MIN_ABI_FEATURE}, Linux {MIN_ABI_KERNEL} or newer)"
            ));
            false
        }
        Some(_) => match probe_landlock() {
            Ok(()) => true,
            Err(problem) => {
                problems.push(problem);
                false
            }
        },
        None => false,
    };

    let seccomp = match probe_seccomp() {
        Ok(()) => true,
        Err(problem) => {
            problems.push(problem);
            false
        }
    };

    let mut warnings = Vec::new();
    let mount_namespace = match probe_mount_namespace() {
        Ok(()) => true,
        Err(problem) => {
            warnings.push(problem);
            false
        }
    };

    let pid_namespace = match probe_pid_namespace() {
        Ok(()) => true,
        Err(problem) => {
            warnings.push(problem);
            false
        }
    };
    let landlock_scopes =
        landlock_enforced && landlock_abi.is_some_and(|abi| abi >= SCOPE_LANDLOCK_ABI);

    SandboxSupport {
        landlock_abi,
        landlock_enforced,
        seccomp,
        mount_namespace,
        pid_namespace,
        landlock_scopes,
        supported: landlock_enforced && seccomp,
        problems,
        warnings,
        ..SandboxSupport::default()
    }
    .with_catalogue()
}

fn probe_landlock() -> Result<(), String> {
    let abi = required_landlock_abi().map_err(|error| error.to_string())?;
    // The strictest shape the helper uses: read-only, network off.
    let ruleset = build_ruleset(abi, &[], &[], true).map_err(|error| error.to_string())?;
    let mut ruleset = Some(ruleset);
    run_probe_child(move || match ruleset.take() {
        Some(ruleset) => enforce_landlock(ruleset),
        None => Ok(()),
    })
    .map_err(|error| format!("a test process could not enforce Landlock: {error}"))
}

fn probe_seccomp() -> Result<(), String> {
    let filter = build_seccomp_filter(true).map_err(|error| error.to_string())?;
    run_probe_child(move || enforce_seccomp(&filter))
        .map_err(|error| format!("a test process could not install the seccomp filter: {error}"))
}

/// Whether a child can do what the helper does to protect paths: enter a private mount
/// namespace and bind-mount a directory (the probe program's own) read-only.
fn probe_mount_namespace() -> Result<(), String> {
    let program_dir = Path::new(probe_program())
        .parent()
        .unwrap_or_else(|| Path::new("/"));
    let plan = MountPlan::probe(program_dir, &std::env::temp_dir());
    run_probe_child(move || plan.apply().result.map_err(EnforceFailure::MountNamespace)).map_err(
        |error| {
            format!(
                "a test process could not keep a path read-only in a mount namespace of its \
                 own ({error}); protected paths fall back to Landlock alone, so no new files \
                 can be created in the directory that holds .git, .agents or .interpreter \
                 (needs CAP_SYS_ADMIN or unprivileged user namespaces)"
            )
        },
    )
}

/// Whether the namespaces a child enters come with a PID namespace, which is what makes
/// every process of a command die with it and hides other processes from `kill`.
fn probe_pid_namespace() -> Result<(), String> {
    let plan = MountPlan::namespaces_only();
    run_probe_child(move || {
        let outcome = plan.apply();
        outcome.result.map_err(EnforceFailure::MountNamespace)?;
        if outcome.pid_namespace {
            Ok(())
        } else {
            Err(EnforceFailure::MountNamespace(MountFailure {
                step: "creating a PID namespace",
                errno: libc::EPERM,
            }))
        }
    })
    .map_err(|error| {
        format!(
            "a test process could not create a PID namespace ({error}); processes a command \
             leaves in the background can outlive the agent, and on Landlock ABIs before \
             {SCOPE_LANDLOCK_ABI} a command can signal processes of the same user outside \
             the sandbox"
        )
    })
}

/// Runs `/bin/true` after `restrict` has run in the forked child, and reports whether it
/// exited successfully within [`PROBE_CHILD_DEADLINE`].
#[allow(unsafe_code)]
fn run_probe_child<F>(mut restrict: F) -> io::Result<()>
where
    F: FnMut() -> Result<(), EnforceFailure> + Send + Sync + 'static,
{
    let mut command = Command::new(probe_program());
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the hook runs between fork and exec in a child of a possibly multi-threaded
    // process, where only async-signal-safe work is sound. `restrict` only issues prctl,
    // landlock, seccomp, unshare, open/write/close and mount syscalls on data built before
    // the fork and allocates nothing; on failure it returns a plain errno, which std sends
    // to the parent. The child is single-threaded, as unshare(CLONE_NEWUSER) requires.
    unsafe {
        command.pre_exec(move || {
            restrict().map_err(|failure| io::Error::from_raw_os_error(failure.errno()))
        });
    }
    let mut child = command.spawn()?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return if status.success() {
                Ok(())
            } else {
                Err(io::Error::other(format!(
                    "the test process exited with {status}"
                )))
            };
        }
        if started.elapsed() > PROBE_CHILD_DEADLINE {
            // Best effort: the child is ours and already late; reap it if we can.
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the test process did not finish",
            ));
        }
        std::thread::sleep(PROBE_POLL_INTERVAL);
    }
}

fn probe_program() -> &'static str {
    if Path::new("/bin/true").exists() {
        "/bin/true"
    } else {
        "/usr/bin/true"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::FileIdentity;
    use pretty_assertions::assert_eq;

    #[test]
    fn carve_outs_are_granted_entry_by_entry_and_other_roots_whole() {
        let ws = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(ws.path()).unwrap();
        fs::create_dir_all(root.join(".git/hooks")).unwrap();
        fs::create_dir_all(root.join("src/nested")).unwrap();
        fs::write(root.join("README.md"), "hi").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        let other = tempfile::tempdir().unwrap();
        let other_root = fs::canonicalize(other.path()).unwrap();
        let anchored = |path: &Path| Arc::new(AnchoredRoot::open(path).unwrap());

        let roots = vec![
            WritableRoot {
                root: root.clone(),
                read_only_subpaths: vec![root.join(".git")],
                anchor: anchored(&root),
            },
            WritableRoot {
                root: other_root.clone(),
                read_only_subpaths: vec![],
                anchor: anchored(&other_root),
            },
        ];
        let dir = AccessFs::from_write(ABI::V3);
        let file = dir & AccessFs::from_file(ABI::V3);
        let described = |grants: Vec<Grant>| {
            let mut described: Vec<(PathBuf, BitFlags<AccessFs>)> = grants
                .into_iter()
                .map(|grant| (grant.path, grant.access))
                .collect();
            described.sort();
            described
        };
        let mut expected = vec![
            (root.join("README.md"), file),
            (root.join("src"), dir),
            (other_root.clone(), dir),
        ];
        expected.sort();
        assert_eq!(
            described(write_grants(&roots, &[root.join(".git")], dir, file)),
            expected
        );

        // With the mounts keeping `.git` read-only there is nothing to carve out.
        let mut expected = vec![(root.clone(), dir), (other_root.clone(), dir)];
        expected.sort();
        assert_eq!(described(write_grants(&roots, &[], dir, file)), expected);

        // The rules are made from the anchored directory, not from its name: renamed,
        // it is still what is granted.
        let moved = other_root.join("moved-root");
        fs::rename(&root, &moved).unwrap();
        std::os::unix::fs::symlink("/etc", &root).unwrap();
        let grants = write_grants(&roots[..1], &[], dir, file);
        assert_eq!(grants.len(), 1);
        assert_eq!(
            FileIdentity::of(&grants[0].directory).unwrap(),
            roots[0].anchor.identity()
        );
        fs::remove_file(&root).unwrap();
        fs::rename(&moved, &root).unwrap();
    }

    #[test]
    fn seccomp_filter_compiles_for_this_architecture() {
        assert!(!build_seccomp_filter(true).unwrap().is_empty());
        assert!(!build_seccomp_filter(false).unwrap().is_empty());
    }
}
