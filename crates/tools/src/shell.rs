//! Running one command to completion: its own process group, an exact environment, a
//! deadline, cancellation, and head+tail capped output.
//!
//! The child is the leader of a fresh process group so that a timeout or cancellation
//! can take down everything it started (`sleep 100 &` included) with one signal. Output
//! is read concurrently from both pipes; once the child itself is gone we only wait a
//! short grace period for the pipes to close, because a daemonised grandchild may hold
//! them open indefinitely.

use std::collections::HashMap;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_protocol::ExecOutputStream;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::sandbox::AnchoredRoot;

/// How long to keep reading after the child exited (or was killed) before giving up on
/// pipes held open by processes that escaped the group.
const PIPE_DRAIN_GRACE: Duration = Duration::from_millis(250);

/// Upper bound on waiting for a SIGKILLed child to be reaped; the kernel delivers
/// SIGKILL promptly, so hitting this means something is badly wrong (e.g. a process in
/// uninterruptible sleep) and we return rather than hang.
const REAP_AFTER_KILL_DEADLINE: Duration = Duration::from_secs(5);

const READ_CHUNK_BYTES: usize = 8192;

/// What to run and under which limits.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Program and arguments; `argv[0]` is looked up on the `PATH` in `env`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child; nothing is inherited.
    pub env: HashMap<String, String>,
    pub timeout: Duration,
    /// Cap on each captured stream (and on the aggregated stream); the first and last
    /// halves are kept.
    pub output_max_bytes: usize,
    /// The writable roots the sandbox helper in `argv` names with `--root-fd`: the only
    /// descriptors the child inherits beyond its standard streams (see
    /// [`sandbox_argv`](crate::sandbox::sandbox_argv)). Empty for an unsandboxed command.
    pub inherited_roots: Vec<Arc<AnchoredRoot>>,
}

/// The outcome of a command that was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: Option<i32>,
    /// The signal that terminated the child, if it did not exit normally.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// stdout and stderr interleaved in arrival order.
    pub aggregated_output: String,
    pub duration: Duration,
    pub timed_out: bool,
    pub cancelled: bool,
    /// True when any captured stream dropped bytes because of `output_max_bytes`.
    pub truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("cannot run an empty command")]
    EmptyCommand,
    #[error("working directory {} does not exist or is not a directory", cwd.display())]
    CwdMissing { cwd: PathBuf },
    #[error("program not found: {program} (is it installed and on PATH?)")]
    ProgramNotFound { program: String },
    #[error("permission denied running {program}")]
    PermissionDenied { program: String },
    #[error("failed to start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("failed to wait for {program}: {source}")]
    Wait {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// The process a command runs as, before its standard streams are chosen: `argv` in
/// `cwd` with exactly `env`, leading its own session and process group, dying with us
/// and when dropped. Also the program's name, for [`spawn_error`].
pub(crate) fn prepare_command(
    argv: &[String],
    cwd: &Path,
    env: &HashMap<String, String>,
    inherited_roots: &[Arc<AnchoredRoot>],
) -> Result<(Command, String), ShellError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(ShellError::EmptyCommand);
    };
    if !cwd.is_dir() {
        return Err(ShellError::CwdMissing {
            cwd: cwd.to_path_buf(),
        });
    }
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .kill_on_drop(true);
    start_in_own_session_and_die_with_us(&mut command);
    inherit_roots(&mut command, inherited_roots);
    Ok((command, program.clone()))
}

/// Lets the child inherit the descriptors of `roots` (the sandbox helper's `--root-fd`
/// arguments). They stay close-on-exec in this process, so no other child gets them; the
/// flag is cleared only in this child's copy, between fork and exec.
fn inherit_roots(command: &mut Command, roots: &[Arc<AnchoredRoot>]) {
    if roots.is_empty() {
        return;
    }
    let descriptors: Vec<std::os::fd::RawFd> = roots.iter().map(|root| root.raw_fd()).collect();
    #[allow(unsafe_code)]
    // SAFETY: the hook runs between fork and exec in the child of a multi-threaded process,
    // where only async-signal-safe work is sound: it makes one `fcntl` per descriptor on
    // numbers collected before the fork, and allocates nothing. The descriptors are open:
    // `roots` keeps them open in the parent until the spawn returns, and the child's
    // table is a copy of the parent's.
    unsafe {
        command.pre_exec(move || {
            for &descriptor in &descriptors {
                rustix::io::fcntl_setfd(
                    std::os::fd::BorrowedFd::borrow_raw(descriptor),
                    rustix::io::FdFlags::empty(),
                )?;
            }
            Ok(())
        });
    }
}

/// Why `program` did not start, in the terms the model and the user read.
pub(crate) fn spawn_error(program: &str, source: io::Error) -> ShellError {
    let program = program.to_string();
    match source.kind() {
        io::ErrorKind::NotFound => ShellError::ProgramNotFound { program },
        io::ErrorKind::PermissionDenied => ShellError::PermissionDenied { program },
        _ => ShellError::Spawn { program, source },
    }
}

/// Runs `req` to completion, until its timeout, or until `cancel` fires — whichever is
/// first. Output chunks are forwarded to `on_output` as they arrive (before capping).
pub async fn run(
    req: ExecRequest,
    cancel: CancellationToken,
    on_output: Option<mpsc::UnboundedSender<(ExecOutputStream, Vec<u8>)>>,
) -> Result<ExecOutput, ShellError> {
    let (mut command, program) =
        prepare_command(&req.argv, &req.cwd, &req.env, &req.inherited_roots)?;
    let started = Instant::now();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|source| spawn_error(&program, source))?;
    // The child leads its own session and group, so its pid is the group id.
    let process_group = child.id().and_then(|pid| i32::try_from(pid).ok());
    // If the caller drops this future mid-run, the whole group must still die.
    let mut group_guard = GroupKillGuard {
        group: process_group,
    };

    let (chunk_tx, mut chunk_rx) = mpsc::unbounded_channel();
    let mut readers: Vec<JoinHandle<()>> = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        readers.push(tokio::spawn(forward_pipe(
            stdout,
            ExecOutputStream::Stdout,
            chunk_tx.clone(),
        )));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.push(tokio::spawn(forward_pipe(
            stderr,
            ExecOutputStream::Stderr,
            chunk_tx.clone(),
        )));
    }
    // Only the readers hold senders now, so `recv` yields `None` once both pipes close.
    drop(chunk_tx);

    let mut capture = Capture::new(req.output_max_bytes, on_output);
    let deadline = tokio::time::Instant::now() + req.timeout;
    let mut timed_out = false;
    let mut cancelled = false;
    let mut pipes_open = true;

    // Phase 1: until the child exits, or we decide to kill it.
    let status: Option<ExitStatus> = loop {
        tokio::select! {
            chunk = chunk_rx.recv(), if pipes_open => match chunk {
                Some((stream, bytes)) => capture.record(stream, bytes),
                None => pipes_open = false,
            },
            waited = child.wait() => {
                break Some(waited.map_err(|source| ShellError::Wait {
                    program: program.clone(),
                    source,
                })?);
            }
            () = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break None;
            }
            () = cancel.cancelled() => {
                cancelled = true;
                break None;
            }
        }
    };

    let status = match status {
        Some(status) => {
            // The child exited on its own; background jobs it left behind are its
            // business, so dropping from here on must not kill them.
            group_guard.group = None;
            status
        }
        None => {
            if let Some(group) = group_guard.group.take() {
                kill_process_group(group);
            }
            // Also signal the child directly in case the group kill raced its setup.
            let _ = child.start_kill();
            match tokio::time::timeout(REAP_AFTER_KILL_DEADLINE, child.wait()).await {
                Ok(waited) => waited.map_err(|source| ShellError::Wait {
                    program: program.clone(),
                    source,
                })?,
                Err(_elapsed) => {
                    tracing::warn!(program = %program, "child did not exit after SIGKILL");
                    ExitStatus::from_raw(libc::SIGKILL)
                }
            }
        }
    };

    // Phase 2: collect what is still buffered in the pipes, but not forever.
    let drain_deadline = tokio::time::Instant::now() + PIPE_DRAIN_GRACE;
    while pipes_open {
        tokio::select! {
            chunk = chunk_rx.recv() => match chunk {
                Some((stream, bytes)) => capture.record(stream, bytes),
                None => pipes_open = false,
            },
            () = tokio::time::sleep_until(drain_deadline) => break,
        }
    }
    for reader in readers {
        reader.abort();
    }

    Ok(capture.finish(status, started.elapsed(), timed_out, cancelled))
}

/// Formats the result the way the model sees it.
pub fn format_output_for_model(out: &ExecOutput) -> String {
    let mut text = String::new();
    text.push_str(&format!("Exit code: {}\n", shell_style_exit_code(out)));
    text.push_str(&format!(
        "Wall time: {:.1} seconds\n",
        out.duration.as_secs_f64()
    ));
    if out.timed_out {
        text.push_str(&format!(
            "Command timed out after {} seconds and was killed\n",
            out.duration.as_secs_f64().round()
        ));
    }
    if out.cancelled {
        text.push_str("Command was interrupted\n");
    }
    text.push_str("Output:\n");
    text.push_str(&out.aggregated_output);
    text
}

/// The code a shell would report: the exit status, or 128 + signal when killed.
fn shell_style_exit_code(out: &ExecOutput) -> i32 {
    match (out.exit_code, out.signal) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => -1,
    }
}

async fn forward_pipe(
    mut pipe: impl AsyncRead + Unpin,
    stream: ExecOutputStream,
    sink: mpsc::UnboundedSender<(ExecOutputStream, Vec<u8>)>,
) {
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => {
                if sink.send((stream, buffer[..n].to_vec())).is_err() {
                    break;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(?stream, %error, "reading child output failed");
                break;
            }
        }
    }
}

/// Makes the child the leader of a new session (and so of a new process group) with no
/// controlling terminal, and asks the kernel to SIGKILL it when this process dies.
///
/// A new session rather than just a group: a command must not be able to inject input into
/// the user's terminal (`TIOCSTI` needs it to be the caller's controlling terminal), and
/// the sandbox helper relies on being a session leader already (it cannot call `setsid`
/// itself as a group leader). The parent-death signal keeps an orphaned command from
/// running on after the agent died; the sandbox helper repeats the request for the
/// sandboxed command and, with a PID namespace, takes its whole process tree along.
///
/// The parent-death signal fires when the *thread* that forked exits. Commands are spawned
/// from the runtime's worker threads, which live as long as the runtime (that is, the
/// agent); `getppid()` is compared with our pid so a parent that died before the request
/// was made is noticed too.
fn start_in_own_session_and_die_with_us(command: &mut Command) {
    let parent = rustix::process::getpid();
    #[allow(unsafe_code)]
    // SAFETY: the hook runs between fork and exec in the child of a multi-threaded process,
    // where only async-signal-safe work is sound: it makes three syscalls (setsid, prctl,
    // getppid) on plain integers captured before the fork, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            #[cfg(target_os = "linux")]
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other(
                    "the agent exited before the command started",
                ));
            }
            Ok(())
        });
    }
}

/// Kills the process group when dropped while still armed.
struct GroupKillGuard {
    group: Option<i32>,
}

impl Drop for GroupKillGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            kill_process_group(group);
        }
    }
}

/// Sends SIGKILL to every process in `group`.
pub(crate) fn kill_process_group(group: i32) {
    if group <= 1 {
        // 0 would signal our own group and 1 would be init's; never do either.
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: `killpg` takes two plain integers, touches no memory of ours, and `group`
    // is the positive pid of a child we spawned as a group leader (checked above).
    let result = unsafe { libc::killpg(group, libc::SIGKILL) };
    if result != 0 {
        // ESRCH (group already gone) is the common, harmless case.
        tracing::debug!(group, error = %io::Error::last_os_error(), "killpg failed");
    }
}

/// Everything captured from one run, each stream capped independently.
struct Capture {
    stdout: HeadTailBuffer,
    stderr: HeadTailBuffer,
    aggregated: HeadTailBuffer,
    on_output: Option<mpsc::UnboundedSender<(ExecOutputStream, Vec<u8>)>>,
}

impl Capture {
    fn new(
        max_bytes: usize,
        on_output: Option<mpsc::UnboundedSender<(ExecOutputStream, Vec<u8>)>>,
    ) -> Self {
        Self {
            stdout: HeadTailBuffer::new(max_bytes),
            stderr: HeadTailBuffer::new(max_bytes),
            aggregated: HeadTailBuffer::new(max_bytes),
            on_output,
        }
    }

    fn record(&mut self, stream: ExecOutputStream, bytes: Vec<u8>) {
        match stream {
            ExecOutputStream::Stdout => self.stdout.push(&bytes),
            ExecOutputStream::Stderr => self.stderr.push(&bytes),
        }
        self.aggregated.push(&bytes);
        if let Some(sink) = &self.on_output {
            // A listener that went away must not stop the command.
            let _ = sink.send((stream, bytes));
        }
    }

    fn finish(
        self,
        status: ExitStatus,
        duration: Duration,
        timed_out: bool,
        cancelled: bool,
    ) -> ExecOutput {
        let truncated = self.stdout.omitted_bytes() > 0
            || self.stderr.omitted_bytes() > 0
            || self.aggregated.omitted_bytes() > 0;
        ExecOutput {
            exit_code: status.code(),
            signal: status.signal(),
            stdout: self.stdout.into_text(),
            stderr: self.stderr.into_text(),
            aggregated_output: self.aggregated.into_text(),
            duration,
            timed_out,
            cancelled,
            truncated,
        }
    }
}

/// Keeps the first half and the last half of a byte stream, counting what fell between.
#[derive(Debug)]
pub(crate) struct HeadTailBuffer {
    head: Vec<u8>,
    head_capacity: usize,
    tail: std::collections::VecDeque<u8>,
    tail_capacity: usize,
    omitted: usize,
}

impl HeadTailBuffer {
    pub(crate) fn new(max_bytes: usize) -> Self {
        let head_capacity = max_bytes / 2;
        Self {
            head: Vec::new(),
            head_capacity,
            tail: std::collections::VecDeque::new(),
            tail_capacity: max_bytes - head_capacity,
            omitted: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        let head_room = self.head_capacity - self.head.len();
        if head_room > 0 {
            let taken = head_room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }
        if bytes.len() >= self.tail_capacity {
            self.omitted += self.tail.len() + bytes.len() - self.tail_capacity;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_capacity..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_capacity);
        self.tail.drain(..overflow);
        self.omitted += overflow;
        self.tail.extend(bytes);
    }

    pub(crate) fn omitted_bytes(&self) -> usize {
        self.omitted
    }

    pub(crate) fn into_text(self) -> String {
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if self.omitted == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Decode the halves separately: the cut may split a multi-byte character, and
        // that should cost one replacement character, not garble the boundary.
        format!(
            "{}\n[... {} bytes omitted ...]\n{}",
            String::from_utf8_lossy(&self.head),
            self.omitted,
            String::from_utf8_lossy(&tail)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn capped(max: usize, chunks: &[&[u8]]) -> (String, usize) {
        let mut buffer = HeadTailBuffer::new(max);
        for chunk in chunks {
            buffer.push(chunk);
        }
        let omitted = buffer.omitted_bytes();
        (buffer.into_text(), omitted)
    }

    #[test]
    fn under_the_cap_everything_is_kept() {
        assert_eq!(capped(10, &[b"abc", b"def"]), ("abcdef".to_string(), 0));
        assert_eq!(capped(10, &[b"0123456789"]), ("0123456789".to_string(), 0));
    }

    #[test]
    fn over_the_cap_keeps_head_and_tail() {
        let (text, omitted) = capped(6, &[b"abcdefghij"]);
        assert_eq!(omitted, 4);
        assert_eq!(text, "abc\n[... 4 bytes omitted ...]\nhij");
    }

    #[test]
    fn tail_rolls_across_many_small_chunks() {
        let chunks: Vec<&[u8]> = vec![b"ab", b"cd", b"ef", b"gh", b"ij", b"k"];
        let (text, omitted) = capped(4, &chunks);
        assert_eq!(omitted, 7);
        assert_eq!(text, "ab\n[... 7 bytes omitted ...]\njk");
    }

    #[test]
    fn zero_cap_keeps_nothing_but_counts() {
        let (text, omitted) = capped(0, &[b"abc"]);
        assert_eq!(omitted, 3);
        assert_eq!(text, "\n[... 3 bytes omitted ...]\n");
    }

    #[test]
    fn odd_cap_gives_the_extra_byte_to_the_tail() {
        let (text, _) = capped(5, &[b"0123456789"]);
        assert_eq!(text, "01\n[... 5 bytes omitted ...]\n789");
    }

    fn output(exit_code: Option<i32>, signal: Option<i32>) -> ExecOutput {
        ExecOutput {
            exit_code,
            signal,
            stdout: String::new(),
            stderr: String::new(),
            aggregated_output: "hello\n".to_string(),
            duration: Duration::from_millis(340),
            timed_out: false,
            cancelled: false,
            truncated: false,
        }
    }

    #[test]
    fn model_text_for_a_normal_exit() {
        assert_eq!(
            format_output_for_model(&output(Some(0), None)),
            "Exit code: 0\nWall time: 0.3 seconds\nOutput:\nhello\n"
        );
    }

    #[test]
    fn model_text_for_timeout_and_interrupt() {
        let mut timed_out = output(None, Some(9));
        timed_out.timed_out = true;
        timed_out.duration = Duration::from_secs(10);
        let text = format_output_for_model(&timed_out);
        assert!(text.starts_with("Exit code: 137\n"), "{text}");
        assert!(
            text.contains("Command timed out after 10 seconds"),
            "{text}"
        );

        let mut interrupted = output(None, Some(9));
        interrupted.cancelled = true;
        assert!(format_output_for_model(&interrupted).contains("Command was interrupted\n"));
    }
}
