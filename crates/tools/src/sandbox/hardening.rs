//! Process-level hardening of the sandbox helper: no controlling terminal, no capabilities,
//! death with the parent, and the supervisor that waits for a command in its own PID
//! namespace.
//!
//! These close holes that file-system rules cannot: a command that shares the user's
//! terminal session can push keystrokes into it (`TIOCSTI`); a root command keeps every
//! capability (`mknod`, `CAP_DAC_OVERRIDE`, `CAP_KILL`, `CAP_SYS_PTRACE`, ...) unless they
//! are dropped; and a command whose agent died would otherwise keep running, reparented to
//! PID 1.

use std::convert::Infallible;
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use rustix::process::{Pid, Signal, WaitOptions};
use rustix::thread::{CapabilitiesSecureBits, CapabilitySet, CapabilitySets};

use super::SandboxError;

/// `SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED` from `<linux/securebits.h>` (rustix names only the
/// unlocked bit).
const NO_CAP_AMBIENT_RAISE_LOCKED: u32 = 1 << 7;

/// Capability numbers are below 64 (the kernel's sets are 64-bit); the kernel answers
/// `EINVAL` past its last one.
const CAPABILITY_BITS: u32 = 64;

fn failure(step: &'static str) -> impl FnOnce(rustix::io::Errno) -> SandboxError {
    move |errno| SandboxError::Hardening {
        step,
        source: io::Error::from(errno),
    }
}

/// The parent as seen now, before anything can outlive it.
pub(super) fn parent_pid() -> Option<Pid> {
    rustix::process::getppid()
}

/// Moves the helper into a new session, which has no controlling terminal: the command can
/// then neither push input into the user's terminal with `TIOCSTI` nor receive its
/// job-control signals. (The seccomp filter also refuses `TIOCSTI`, for terminals the
/// command still holds open as plain file descriptors.)
///
/// `setsid` fails for a process-group leader; the shell runner already made the helper the
/// leader of a session of its own without a terminal, which is just as good. Any other
/// group leader, and a session leader that has a controlling terminal, is refused rather
/// than left attached to the user's terminal.
pub(super) fn leave_terminal_session() -> Result<(), SandboxError> {
    let Err(errno) = rustix::process::setsid() else {
        return Ok(());
    };
    let own = rustix::process::getpid();
    if rustix::process::getsid(None) != Ok(own) {
        return Err(failure("starting a new session without a terminal")(errno));
    }
    // `/dev/tty` opens only for a process that has a controlling terminal (ENXIO
    // otherwise). O_NOCTTY: a session leader without one must not acquire it here.
    let has_terminal = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/tty")
        .is_ok();
    if has_terminal {
        return Err(SandboxError::Hardening {
            step: "starting a new session without a terminal",
            source: io::Error::other("the helper leads a session that has a controlling terminal"),
        });
    }
    Ok(())
}

/// Empties every capability set of this process (and, when it may, the bounding set), and
/// locks the securebits so that `exec` of a root-owned or setuid program grants none back.
///
/// This is what makes a command started as root an ordinary process: no `mknod`, no
/// reading or writing others' files against their permissions, no signals to other users'
/// processes, no `ptrace`/`/proc/PID/environ` of non-dumpable processes, no `chown` of
/// files it does not own. It runs after the namespace setup (which needs `CAP_SYS_ADMIN`)
/// and before Landlock and seccomp (which then need `no_new_privs`, set by both).
pub(super) fn drop_all_capabilities() -> Result<(), SandboxError> {
    let current = rustix::thread::capabilities(None).map_err(failure("reading capabilities"))?;
    // An unprivileged helper has nothing to drop and may not touch the bounding set; with
    // no_new_privs nothing can add to its capabilities either.
    if current.effective.contains(CapabilitySet::SETPCAP) {
        // Without CAP_SETPCAP after `capset` we could no longer do this, so it comes first.
        rustix::thread::set_capabilities_secure_bits(CapabilitiesSecureBits::from_bits_retain(
            CapabilitiesSecureBits::NO_ROOT.bits()
                | CapabilitiesSecureBits::NO_ROOT_LOCKED.bits()
                | CapabilitiesSecureBits::NO_SETUID_FIXUP.bits()
                | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED.bits()
                | CapabilitiesSecureBits::KEEP_CAPS_LOCKED.bits()
                | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE.bits()
                | NO_CAP_AMBIENT_RAISE_LOCKED,
        ))
        .map_err(failure("locking the securebits"))?;
        for bit in 0..CAPABILITY_BITS {
            match rustix::thread::remove_capability_from_bounding_set(
                CapabilitySet::from_bits_retain(1 << bit),
            ) {
                Ok(()) => {}
                // Past the kernel's last capability.
                Err(rustix::io::Errno::INVAL) => break,
                Err(errno) => return Err(failure("emptying the bounding set")(errno)),
            }
        }
    }
    // Ambient capabilities arrived in Linux 4.3, long before the Landlock ABI we require.
    rustix::thread::clear_ambient_capability_set()
        .map_err(failure("clearing the ambient capabilities"))?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(failure("dropping capabilities"))?;
    // Fail closed if the kernel kept anything.
    let after = rustix::thread::capabilities(None).map_err(failure("reading capabilities"))?;
    if !(after.effective.is_empty() && after.permitted.is_empty() && after.inheritable.is_empty()) {
        return Err(SandboxError::Hardening {
            step: "dropping capabilities",
            source: io::Error::other("capabilities remain after capset"),
        });
    }
    Ok(())
}

/// How [`die_with_parent`] checks that the parent is still alive.
pub(super) enum ParentCheck {
    /// The parent's pid as `getppid()` returned it before anything else happened.
    Pid(Option<Pid>),
    /// The read end of a pipe whose only write end the parent holds: reading end-of-file
    /// means it is gone. Needed in a new PID namespace, where `getppid()` is always 0.
    Pipe(std::io::PipeReader),
}

/// Asks the kernel to SIGKILL this process when its parent dies, then checks the parent
/// did not die first (the request only covers deaths after it was made).
///
/// The signal fires when the parent *thread* that started us exits. The agent starts
/// commands from its runtime's long-lived worker threads, and the shell runner makes the
/// same request between `fork` and `exec`; a helper that forked (PID namespace) is itself
/// the single-threaded parent of the command.
pub(super) fn die_with_parent(check: ParentCheck) -> Result<(), SandboxError> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(failure("asking to die with the parent"))?;
    let parent_gone = || SandboxError::Hardening {
        step: "asking to die with the parent",
        source: io::Error::other("the parent exited before the command started"),
    };
    match check {
        ParentCheck::Pid(expected) => {
            if rustix::process::getppid() != expected {
                return Err(parent_gone());
            }
        }
        ParentCheck::Pipe(mut reader) => {
            rustix::io::ioctl_fionbio(&reader, true).map_err(failure("checking on the parent"))?;
            let mut byte = [0_u8; 1];
            match io::Read::read(&mut reader, &mut byte) {
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Ok(0) => return Err(parent_gone()),
                Ok(_) => {
                    return Err(SandboxError::Hardening {
                        step: "checking on the parent",
                        source: io::Error::other("unexpected data from the parent"),
                    });
                }
                Err(source) => {
                    return Err(SandboxError::Hardening {
                        step: "checking on the parent",
                        source,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Which side of [`fork`] we are on.
pub(super) enum Forked {
    Child,
    Parent(Pid),
}

/// Forks the helper. Must only be called while the process is single-threaded, which the
/// helper is: it is a freshly exec'd binary that starts no threads.
#[allow(unsafe_code)]
pub(super) fn fork() -> Result<Forked, SandboxError> {
    // SAFETY: the helper is single-threaded (see above), so the child is a complete copy
    // of the only thread and may go on allocating and running ordinary Rust code; rustix
    // exposes fork only as an unsafe runtime primitive, so libc's is used directly.
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(Forked::Child),
        pid if pid > 0 => {
            Pid::from_raw(pid)
                .map(Forked::Parent)
                .ok_or_else(|| SandboxError::Hardening {
                    step: "forking the command",
                    source: io::Error::other("fork returned an invalid pid"),
                })
        }
        _ => Err(SandboxError::Hardening {
            step: "forking the command",
            source: io::Error::last_os_error(),
        }),
    }
}

/// Waits for `child` (the command, PID 1 of its own PID namespace) and ends this process
/// the way the child ended, so whoever started the helper sees the command's status.
///
/// When the helper itself dies (its own parent died, or the shell runner's timeout killed
/// the group), the child's parent-death signal kills it, and with it, as PID 1 of the
/// namespace, every process the command started.
pub(super) fn wait_and_mirror(child: Pid) -> Result<Infallible, SandboxError> {
    loop {
        match rustix::process::waitpid(Some(child), WaitOptions::empty()) {
            Ok(Some((_, status))) => {
                if let Some(code) = status.exit_status() {
                    std::process::exit(code);
                }
                if let Some(signal) = status.terminating_signal() {
                    // Die of the same signal when it is one that kills by default (and is
                    // not ignored here, as SIGPIPE is in Rust programs); otherwise report
                    // it the way shells do.
                    if let Some(signal) = Signal::from_named_raw(signal) {
                        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
                    }
                    std::process::exit(128 + signal);
                }
                // Stopped or continued: not reported without WUNTRACED/WCONTINUED.
            }
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(failure("waiting for the command")(errno)),
        }
    }
}
