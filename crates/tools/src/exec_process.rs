//! A command the caller talks to while it runs: stdin it can write, output it reads as it
//! comes, an optional pseudo-terminal it can resize, and a process group it can kill.
//!
//! [`shell::run`](crate::shell::run) runs a command to completion for the model; front
//! ends that hand a process to a client (the app-server's `command/exec`) need the pieces
//! separately. The launch rules are the same and come from the same place: the child leads
//! a session of its own (so one `killpg` takes down everything it started) and dies with
//! us. Sandboxing is the caller's argv (the helper re-exec), as for the shell tool.
//!
//! In PTY mode the child's stdin, stdout and stderr are the terminal's slave side. Only an
//! unsandboxed child also gets it as its controlling terminal: the sandbox helper refuses
//! to run with a controlling terminal at all (so that no command can reach the user's
//! terminal), so a sandboxed command sees a terminal on its standard streams (`isatty` is
//! true, `stty size` reads the size) without job control or `SIGWINCH`.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use tokio::io::unix::AsyncFd;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::shell::{ShellError, kill_process_group, prepare_command, spawn_error};

/// How the child's standard streams are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStdio {
    /// Pipes for stdout and stderr; stdin a pipe when `stdin` is true, else `/dev/null`.
    Pipes { stdin: bool },
    /// One pseudo-terminal for all three, `rows`×`cols` cells. `controlling` also makes it
    /// the child's controlling terminal (only possible without the sandbox helper).
    Pty {
        rows: u16,
        cols: u16,
        controlling: bool,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// Program and arguments (already wrapped by the sandbox helper when sandboxed).
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child; nothing is inherited.
    pub env: HashMap<String, String>,
    pub stdio: ProcessStdio,
    /// The writable roots a sandbox helper in `argv` names (see
    /// [`ExecRequest::inherited_roots`](crate::shell::ExecRequest::inherited_roots)).
    pub inherited_roots: Vec<std::sync::Arc<crate::sandbox::AnchoredRoot>>,
}

/// A started child. Dropping it kills its whole process group.
pub struct RunningProcess {
    child: Child,
    group: Option<i32>,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    /// The terminal's master side in PTY mode (input, output and size all go through it).
    pub pty: Option<std::sync::Arc<PtyMaster>>,
}

impl RunningProcess {
    pub fn spawn(req: ProcessRequest) -> Result<Self, ShellError> {
        let (mut command, program) =
            prepare_command(&req.argv, &req.cwd, &req.env, &req.inherited_roots)?;
        let spawn_error = |source: io::Error| spawn_error(&program, source);
        let mut pty = None;
        match req.stdio {
            ProcessStdio::Pipes { stdin } => {
                command
                    .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
            }
            ProcessStdio::Pty {
                rows,
                cols,
                controlling,
            } => {
                let (master, slave) = open_pty(rows, cols).map_err(spawn_error)?;
                command
                    .stdin(Stdio::from(slave.try_clone().map_err(spawn_error)?))
                    .stdout(Stdio::from(slave.try_clone().map_err(spawn_error)?))
                    .stderr(Stdio::from(slave));
                if controlling {
                    make_stdin_the_controlling_terminal(&mut command);
                }
                pty = Some(std::sync::Arc::new(
                    PtyMaster::new(master).map_err(spawn_error)?,
                ));
            }
        }
        let mut child = command.spawn().map_err(spawn_error)?;
        // The command (and with it our copies of the slave side) goes now: the master
        // reads end-of-file only once no process holds the slave open.
        drop(command);
        // The child leads its own session and group, so its pid is the group id.
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        Ok(Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            group,
            pty,
        })
    }

    /// SIGKILL to the child's whole process group (what it started in the background
    /// included). Idempotent.
    pub fn kill_group(&mut self) {
        if let Some(group) = self.group.take() {
            kill_process_group(group);
        }
        // Also the child itself, in case the group kill raced its setup.
        let _ = self.child.start_kill();
    }

    /// The child's exit. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The child exited on its own: what it left running in the background is no longer
    /// killed when this is dropped (as for the shell tool).
    pub fn disarm(&mut self) {
        self.group = None;
    }
}

impl Drop for RunningProcess {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            kill_process_group(group);
        }
    }
}

/// The master side of a pseudo-terminal, non-blocking under the runtime's reactor.
pub struct PtyMaster {
    fd: AsyncFd<OwnedFd>,
}

impl PtyMaster {
    fn new(fd: OwnedFd) -> io::Result<Self> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        #[allow(unsafe_code)]
        // SAFETY: `fd` is an `OwnedFd` moved into the `AsyncFd`, so it stays open and is the
        // same descriptor for the `AsyncFd`'s whole life, and `OwnedFd::as_raw_fd` always
        // returns that descriptor.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// Reads what the terminal's side wrote. `Ok(0)` once no process holds the slave side
    /// (Linux reports that as `EIO`).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| {
                rustix::io::read(fd.get_ref().as_fd(), &mut *buf).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => return Ok(n),
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `data` as terminal input.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard
                .try_io(|fd| rustix::io::write(fd.get_ref().as_fd(), data).map_err(io::Error::from))
            {
                Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// Sets the terminal's size (`TIOCSWINSZ`); the kernel signals `SIGWINCH` to the
    /// terminal's foreground group when it has one.
    pub fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        rustix::termios::tcsetwinsize(self.fd.get_ref(), winsize(rows, cols))?;
        Ok(())
    }
}

fn winsize(rows: u16, cols: u16) -> rustix::termios::Winsize {
    rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// A new pseudo-terminal of `rows`×`cols`: (master, slave). Neither becomes our
/// controlling terminal (`O_NOCTTY`), and neither leaks into other children (`O_CLOEXEC`;
/// the child gets the slave through its standard streams).
fn open_pty(rows: u16, cols: u16) -> io::Result<(OwnedFd, std::fs::File)> {
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::termios::tcsetwinsize(&master, winsize(rows, cols))?;
    Ok((master, std::fs::File::from(slave)))
}

/// After the child became a session leader (the earlier `pre_exec` hook), make its stdin,
/// the terminal's slave side, its controlling terminal, as a login on a terminal would.
fn make_stdin_the_controlling_terminal(command: &mut Command) {
    #[allow(unsafe_code)]
    // SAFETY: the hook runs between fork and exec in the child, where only async-signal-safe
    // work is sound: it makes one ioctl on file descriptor 0 (already the slave side, since
    // the standard streams are set up before `pre_exec` hooks run) and allocates nothing.
    // Borrowing fd 0 is sound because it stays open for the whole call.
    unsafe {
        command.pre_exec(|| {
            let stdin = std::os::fd::BorrowedFd::borrow_raw(0);
            rustix::process::ioctl_tiocsctty(stdin)?;
            Ok(())
        });
    }
}
