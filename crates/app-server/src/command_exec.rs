//! The `command/exec*` methods: a command run under the OS sandbox outside any thread or
//! turn, as Codex's standalone command execution.
//!
//! * `command/exec` starts the process and answers only when it has exited, after every
//!   `command/exec/outputDelta` notification of it (notifications and the response go
//!   through the same ordered sink, and the response is produced after the last one).
//! * `command/exec/write`, `…/terminate` and `…/resize` act on a running process named by
//!   the client's `processId`, which is scoped to the connection: another client cannot
//!   reach it, and a second live process under the same id is refused.
//!
//! The command is untrusted (so is the client, as far as the sandbox goes), so:
//!
//! * it runs through the same launch path as the agent's shell tool: the sandbox helper
//!   re-exec built by core's [`sandboxed_command`], the environment scrubbed by the
//!   config's `[shell_environment_policy]` ([`Config::command_env`]), its own session and
//!   process group, and death with the server;
//! * the policy is the server's configured one; a `sandboxPolicy` in the request may only
//!   narrow it. "Looser" is decided on what the sandbox would really allow (network, and
//!   the writable roots as the sandbox computes them, with the request's environment,
//!   since `$TMPDIR` is a root), so an `env` override cannot widen the policy either;
//! * a request's `env` may not name the dynamic loader's variables (`LD_*`, …) when the
//!   command is sandboxed: the sandbox helper, our own executable, starts with them before
//!   it has sandboxed itself;
//! * it may not start a git repository ([`RepositoryWatch`], as the shell tool's commands);
//! * its whole process group is killed on terminate, timeout, connection close and server
//!   shutdown, and when it exits (what it left behind in the background goes with it);
//! * output is capped per stream (the client's cap, never above [`MAX_OUTPUT_BYTES_CAP`]).

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use interpreter_core::config::Config;
use interpreter_core::planted_repos::RepositoryWatch;
use interpreter_core::sandboxed_command;
use interpreter_protocol::SandboxPolicy;
use interpreter_tools::exec_process::{ProcessRequest, ProcessStdio, PtyMaster, RunningProcess};
use interpreter_tools::sandbox::{RootAnchors, WritableRoot, writable_roots};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::error::AppServerError;
use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2::{self, CommandExecOutputStream};
use crate::state::{Reply, ServerState};

/// Per-stream capture when the client names no cap.
pub(crate) const DEFAULT_OUTPUT_BYTES_CAP: usize = 1024 * 1024;

/// Per-stream capture whatever the client asks (`disableOutputCap` included): a client
/// must not make the server hold (or send in one response) unbounded output.
pub(crate) const MAX_OUTPUT_BYTES_CAP: usize = 8 * 1024 * 1024;

/// Default terminal size when `tty` comes without `size`.
const DEFAULT_PTY_SIZE: v2::CommandExecTerminalSize =
    v2::CommandExecTerminalSize { rows: 24, cols: 80 };

/// The conventional exit code of a command stopped by its timeout (as `timeout(1)`).
const TIMEOUT_EXIT_CODE: i32 = 124;

/// How long to keep reading after the process ended (its group is killed by then) before
/// giving up on pipes something outside the group still holds.
const PIPE_DRAIN_GRACE: Duration = Duration::from_millis(250);

/// Bound on reaping a SIGKILLed process; only a process stuck in the kernel reaches it.
const REAP_AFTER_KILL_DEADLINE: Duration = Duration::from_secs(5);

/// Bound on one `command/exec/write`: a command that stops reading its stdin must not
/// hold the request (and the stdin lock) forever.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

const READ_CHUNK_BYTES: usize = 8192;

/// The end-of-transmission character: what "close stdin" means on a terminal, whose
/// input cannot be closed while its output is still read.
const PTY_EOF: u8 = 0x04;

/// How long a follow-up call waits for a `command/exec` that arrived before it (and names
/// its id) to take that id. Only reached when that request fails before reserving it.
const ARRIVAL_WAIT: Duration = Duration::from_secs(5);

/// The live processes of every connection, by (connection, client `processId`).
#[derive(Default)]
pub(crate) struct CommandExecProcesses {
    live: std::sync::Mutex<HashMap<(u64, String), Arc<LiveProcess>>>,
    /// `command/exec` requests that arrived but have not reserved their id yet (each
    /// request runs in its own task, and a later one can run first). Follow-up calls for
    /// such an id wait for it rather than failing.
    arriving: std::sync::Mutex<HashMap<(u64, String), usize>>,
    /// Fires whenever an arriving request settles (reserved its id, or failed).
    settled: tokio::sync::Notify,
}

/// What follow-up calls reach of a running process.
struct LiveProcess {
    stream_stdin: bool,
    /// Held by `command/exec` until the process is started, so a write sent right after
    /// the request waits for it instead of failing.
    stdin: Arc<tokio::sync::Mutex<Stdin>>,
    /// Set once the process started in PTY mode.
    pty: OnceLock<Arc<PtyMaster>>,
    terminate: CancellationToken,
}

/// A process's stdin, held by `command/exec` until the process is started.
type StdinSlot = tokio::sync::OwnedMutexGuard<Stdin>;

impl LiveProcess {
    /// A process not started yet, and its stdin, locked (at once: nobody else can
    /// know of it yet).
    async fn new(stream_stdin: bool) -> (Arc<Self>, StdinSlot) {
        let stdin = Arc::new(tokio::sync::Mutex::new(Stdin::Unavailable));
        let slot = stdin.clone().lock_owned().await;
        let process = Arc::new(Self {
            stream_stdin,
            stdin,
            pty: OnceLock::new(),
            terminate: CancellationToken::new(),
        });
        (process, slot)
    }
}

enum Stdin {
    /// Reserved; the process is not started yet (or stdin was not asked for).
    Unavailable,
    Pipe(ChildStdin),
    Pty(Arc<PtyMaster>),
    Closed,
}

impl CommandExecProcesses {
    /// Reserve `process_id` on `connection` before anything starts; the entry goes when
    /// the returned guard drops. `process` comes with its stdin locked
    /// ([`LiveProcess::new`]): a write that finds the entry waits for the process to be
    /// started rather than finding no stdin.
    fn reserve<'a>(
        &'a self,
        connection: u64,
        process_id: &str,
        process: Arc<LiveProcess>,
    ) -> Result<Registration<'a>, AppServerError> {
        let key = (connection, process_id.to_string());
        let mut live = self
            .live
            .lock()
            .map_err(|_| AppServerError::Internal("process table lock poisoned".into()))?;
        if live.contains_key(&key) {
            return Err(AppServerError::InvalidRequest(format!(
                "duplicate active command/exec process id: {process_id}"
            )));
        }
        live.insert(key.clone(), process);
        Ok(Registration { table: self, key })
    }

    /// A `command/exec` naming `process_id` arrived on `connection`: called in arrival
    /// order, before the request's task runs. Settled by [`Arrival`]'s drop.
    pub(crate) fn note_arrival(&self, connection: u64, process_id: &str) {
        if let Ok(mut arriving) = self.arriving.lock() {
            *arriving
                .entry((connection, process_id.to_string()))
                .or_default() += 1;
        }
    }

    fn settle_arrival(&self, key: &(u64, String)) {
        if let Ok(mut arriving) = self.arriving.lock()
            && let Some(count) = arriving.get_mut(key)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                arriving.remove(key);
            }
        }
        self.settled.notify_waiters();
    }

    fn is_arriving(&self, key: &(u64, String)) -> bool {
        self.arriving
            .lock()
            .is_ok_and(|arriving| arriving.contains_key(key))
    }

    /// The live process `process_id` of `connection`, waiting (boundedly) for a
    /// `command/exec` that arrived earlier to take the id.
    async fn get(
        &self,
        connection: u64,
        process_id: &str,
    ) -> Result<Arc<LiveProcess>, AppServerError> {
        let key = (connection, process_id.to_string());
        let deadline = tokio::time::Instant::now() + ARRIVAL_WAIT;
        loop {
            // Registered before looking, so a settle between the look and the wait wakes us.
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if let Some(live) = self.live.lock().ok().and_then(|l| l.get(&key).cloned()) {
                return Ok(live);
            }
            if !self.is_arriving(&key) || tokio::time::timeout_at(deadline, settled).await.is_err()
            {
                return Err(AppServerError::InvalidRequest(format!(
                    "no active command/exec for process id {process_id}"
                )));
            }
        }
    }

    /// The connection went away: its processes are killed (their requests see it too;
    /// this also covers one that has not reached its wait yet).
    pub(crate) fn stop_connection(&self, connection: u64) {
        if let Ok(mut arriving) = self.arriving.lock() {
            arriving.retain(|(owner, _), _| *owner != connection);
        }
        if let Ok(live) = self.live.lock() {
            for ((owner, _), process) in live.iter() {
                if *owner == connection {
                    process.terminate.cancel();
                }
            }
        }
    }

    /// The server stops: every process is killed.
    pub(crate) fn stop_all(&self) {
        if let Ok(live) = self.live.lock() {
            for process in live.values() {
                process.terminate.cancel();
            }
        }
    }
}

/// Settles a noted arrival when the request has reserved its id (or failed before).
struct Arrival<'a> {
    table: &'a CommandExecProcesses,
    key: (u64, String),
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.table.settle_arrival(&self.key);
    }
}

/// Removes a process id from the table when the request ends, however it ends.
struct Registration<'a> {
    table: &'a CommandExecProcesses,
    key: (u64, String),
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Ok(mut live) = self.table.live.lock() {
            live.remove(&self.key);
        }
    }
}

/// The request's flags, checked as Codex checks them.
struct Mode {
    tty: bool,
    stream_stdin: bool,
    stream_output: bool,
    timeout: Timeout,
    cap: usize,
}

enum Timeout {
    /// The config's shell timeout.
    Default,
    After(Duration),
    Never,
}

fn mode(params: &v2::CommandExecParams) -> Result<Mode, AppServerError> {
    let invalid = |text: &str| Err(AppServerError::InvalidParams(text.to_string()));
    if params.command.is_empty() {
        return invalid("command must not be empty");
    }
    if params
        .permission_profile
        .as_ref()
        .is_some_and(|p| !p.is_null())
    {
        return invalid(
            "permissionProfile is not supported here; pass sandboxPolicy (or nothing for the configured policy)",
        );
    }
    let tty = params.tty;
    let stream_stdin = params.stream_stdin || tty;
    let stream_output = params.stream_stdout_stderr || tty;
    if params.process_id.is_none() && (tty || stream_stdin || stream_output) {
        return invalid(
            "tty, streamStdin and streamStdoutStderr require a client-supplied processId",
        );
    }
    if params.size.is_some() && !tty {
        return invalid("size is only valid when tty is true");
    }
    if params.size.is_some_and(|s| s.rows == 0 || s.cols == 0) {
        return invalid("size.rows and size.cols must be greater than 0");
    }
    if params.disable_timeout && params.timeout_ms.is_some() {
        return invalid("disableTimeout cannot be combined with timeoutMs");
    }
    if params.disable_output_cap && params.output_bytes_cap.is_some() {
        return invalid("disableOutputCap cannot be combined with outputBytesCap");
    }
    let timeout = match params.timeout_ms {
        _ if params.disable_timeout => Timeout::Never,
        Some(ms) => Timeout::After(Duration::from_millis(u64::try_from(ms).map_err(|_| {
            AppServerError::InvalidParams("timeoutMs must not be negative".into())
        })?)),
        None => Timeout::Default,
    };
    let cap = match params.output_bytes_cap {
        _ if params.disable_output_cap => MAX_OUTPUT_BYTES_CAP,
        Some(cap) => cap.min(MAX_OUTPUT_BYTES_CAP),
        None => DEFAULT_OUTPUT_BYTES_CAP,
    };
    Ok(Mode {
        tty,
        stream_stdin,
        stream_output,
        timeout,
        cap,
    })
}

/// Called by the processor, in arrival order, for a `command/exec` request about to run
/// (see [`CommandExecProcesses::note_arrival`]).
///
/// Only params that decode are noted: those are exactly the requests that reach [`exec`],
/// which settles the note (anything else would leave it behind).
pub(crate) fn note_arrival(
    table: &CommandExecProcesses,
    connection: &Connection,
    params: Option<&Value>,
) {
    let Some(params) = params else {
        return;
    };
    if let Ok(v2::CommandExecParams {
        process_id: Some(id),
        ..
    }) = serde_json::from_value::<v2::CommandExecParams>(params.clone())
    {
        table.note_arrival(connection.id, &id);
    }
}

/// `command/exec`.
pub(crate) async fn exec(
    state: &Arc<ServerState>,
    table: &CommandExecProcesses,
    connection: &Arc<Connection>,
    params: v2::CommandExecParams,
) -> Result<Reply, AppServerError> {
    let arrival = params.process_id.as_ref().map(|id| Arrival {
        table,
        key: (connection.id, id.clone()),
    });
    let mode = mode(&params)?;
    // Reserved first, before anything is awaited: a duplicate id must not run anything,
    // and follow-up calls sent right behind this request find the id.
    // `stdin_slot` is released once stdin is wired up (or the request fails, leaving
    // stdin unavailable).
    // Buffered runs without an id are only reachable by the connection closing.
    let (live, mut stdin_slot) =
        LiveProcess::new(mode.stream_stdin && params.process_id.is_some()).await;
    let _registration = match &params.process_id {
        Some(id) => Some(table.reserve(connection.id, id, live.clone())?),
        None => None,
    };
    drop(arrival);
    let config = state.base_config().await?;
    let timeout = match mode.timeout {
        Timeout::Default => Some(config.shell_default_timeout),
        Timeout::After(timeout) => Some(timeout),
        Timeout::Never => None,
    };
    let policy = match &params.sandbox_policy {
        Some(requested) => mapping::sandbox_policy_in(requested),
        None => config.sandbox_policy.clone(),
    };
    let cwd = match &params.cwd {
        Some(dir) => config.cwd.join(dir),
        None => config.cwd.clone(),
    };
    if !cwd.is_dir() {
        return Err(AppServerError::InvalidParams(format!(
            "cwd {} is not a directory",
            cwd.display()
        )));
    }
    let base_env = config.command_env();
    let mut env = base_env.clone();
    for (name, value) in params.env.clone().unwrap_or_default() {
        match value {
            Some(value) => env.insert(name, value),
            None => env.remove(&name),
        };
    }
    // The roots are decided once for this command: the comparison with the configured
    // policy and the sandbox it then runs in are made from the same open directories.
    let anchors = RootAnchors::new();
    ensure_no_looser(&config, &anchors, &policy, &env, &base_env)?;
    let sandboxed = !policy.runs_unsandboxed();
    if sandboxed {
        refuse_loader_variables(params.env.as_ref())?;
    }
    // Like the shell tool's commands, this one may not start a repository.
    let watch = if sandboxed {
        RepositoryWatch::start(&config, &anchors, &policy, &env, &cwd)
            .await
            .map_err(AppServerError::Internal)?
    } else {
        RepositoryWatch::off()
    };
    let (argv, inherited_roots) = if sandboxed {
        let command = sandboxed_command(&config, &anchors, &policy, &cwd, &params.command)
            .map_err(|err| AppServerError::InvalidRequest(err.to_string()))?;
        (command.argv, command.roots)
    } else {
        (params.command.clone(), Vec::new())
    };
    let stdio = if mode.tty {
        let size = params.size.unwrap_or(DEFAULT_PTY_SIZE);
        ProcessStdio::Pty {
            rows: size.rows,
            cols: size.cols,
            // The sandbox helper refuses a controlling terminal (see `exec_process`).
            controlling: !sandboxed,
        }
    } else {
        ProcessStdio::Pipes {
            stdin: mode.stream_stdin,
        }
    };
    let mut process = RunningProcess::spawn(ProcessRequest {
        argv,
        cwd,
        env,
        stdio,
        inherited_roots,
    })
    .map_err(|err| AppServerError::InvalidRequest(format!("failed to start command: {err}")))?;

    let (chunk_tx, mut chunk_rx) = mpsc::channel::<(CommandExecOutputStream, Vec<u8>)>(16);
    let mut readers = Vec::new();
    if let Some(pty) = process.pty.clone() {
        let _ = live.pty.set(pty.clone());
        *stdin_slot = Stdin::Pty(pty.clone());
        readers.push(tokio::spawn(forward_pty(pty, chunk_tx.clone())));
    }
    if let Some(stdin) = process.stdin.take() {
        *stdin_slot = Stdin::Pipe(stdin);
    }
    drop(stdin_slot);
    if let Some(stdout) = process.stdout.take() {
        readers.push(tokio::spawn(forward_pipe(
            stdout,
            CommandExecOutputStream::Stdout,
            chunk_tx.clone(),
        )));
    }
    if let Some(stderr) = process.stderr.take() {
        readers.push(tokio::spawn(forward_pipe(
            stderr,
            CommandExecOutputStream::Stderr,
            chunk_tx.clone(),
        )));
    }
    // Only the readers hold senders now: `recv` ends once every stream is closed.
    drop(chunk_tx);

    let mut output = Output {
        process_id: params.process_id.clone().unwrap_or_default(),
        stream: mode.stream_output,
        stdout: Capture::new(mode.cap),
        stderr: Capture::new(mode.cap),
    };
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut open = true;
    let mut timed_out = false;
    let status: Option<ExitStatus> = loop {
        tokio::select! {
            chunk = chunk_rx.recv(), if open => match chunk {
                Some((stream, bytes)) => output.record(connection, stream, &bytes),
                None => open = false,
            },
            waited = process.wait() => break waited.ok(),
            () = sleep_until(deadline) => {
                timed_out = true;
                break None;
            }
            () = live.terminate.cancelled() => break None,
            () = connection.closed.cancelled() => break None,
            () = state.shutdown.cancelled() => break None,
        }
    };
    // Exited or not, nothing of the command outlives its request.
    process.kill_group();
    let status = match status {
        Some(status) => status,
        None => match tokio::time::timeout(REAP_AFTER_KILL_DEADLINE, process.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(err)) => {
                tracing::warn!(%err, "waiting for a killed command/exec process failed");
                ExitStatus::from_raw(sigkill_status())
            }
            Err(_elapsed) => {
                tracing::warn!("a command/exec process did not exit after SIGKILL");
                ExitStatus::from_raw(sigkill_status())
            }
        },
    };
    let drain_deadline = tokio::time::Instant::now() + PIPE_DRAIN_GRACE;
    while open {
        tokio::select! {
            chunk = chunk_rx.recv() => match chunk {
                Some((stream, bytes)) => output.record(connection, stream, &bytes),
                None => open = false,
            },
            () = tokio::time::sleep_until(drain_deadline) => break,
        }
    }
    for reader in readers {
        reader.abort();
    }
    // No stdin writes after this: the process is gone.
    *live.stdin.lock().await = Stdin::Closed;
    let refused = watch.finish().await;
    if !refused.is_empty() {
        output.record(
            connection,
            CommandExecOutputStream::Stderr,
            refused.as_bytes(),
        );
    }

    let exit_code = if timed_out {
        TIMEOUT_EXIT_CODE
    } else {
        match (status.code(), status.signal()) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => -1,
        }
    };
    Reply::new(&v2::CommandExecResponse {
        exit_code,
        stdout: output.stdout.into_text(),
        stderr: output.stderr.into_text(),
    })
}

/// `SIGKILL` as a wait status, for a process we could not reap.
fn sigkill_status() -> i32 {
    rustix::process::Signal::KILL.as_raw()
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// `command/exec/write`.
pub(crate) async fn write(
    table: &CommandExecProcesses,
    connection: &Arc<Connection>,
    params: v2::CommandExecWriteParams,
) -> Result<Reply, AppServerError> {
    let live = table.get(connection.id, &params.process_id).await?;
    if !live.stream_stdin {
        return Err(AppServerError::InvalidRequest(format!(
            "stdin streaming is not enabled for process id {}",
            params.process_id
        )));
    }
    let bytes = match &params.delta_base64 {
        Some(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|err| AppServerError::InvalidParams(format!("deltaBase64: {err}")))?,
        None => Vec::new(),
    };
    let write = async {
        let mut stdin = live.stdin.lock().await;
        let result = match &mut *stdin {
            Stdin::Pipe(pipe) => {
                if !bytes.is_empty() {
                    pipe.write_all(&bytes).await?;
                    pipe.flush().await?;
                }
                Ok(())
            }
            Stdin::Pty(master) => {
                if !bytes.is_empty() {
                    master.write_all(&bytes).await?;
                }
                if params.close_stdin {
                    master.write_all(&[PTY_EOF]).await?;
                }
                Ok(())
            }
            Stdin::Unavailable | Stdin::Closed => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stdin is closed",
            )),
        };
        if params.close_stdin && result.is_ok() {
            // Dropping the pipe's write end is what the command reads as end-of-file.
            *stdin = Stdin::Closed;
        }
        result
    };
    match tokio::time::timeout(WRITE_DEADLINE, write).await {
        Ok(Ok(())) => Reply::new(&v2::EmptyResponse {}),
        Ok(Err(err)) => Err(AppServerError::InvalidRequest(format!(
            "failed to write stdin of process id {}: {err}",
            params.process_id
        ))),
        Err(_elapsed) => Err(AppServerError::InvalidRequest(format!(
            "stdin of process id {} did not accept the bytes within {} s",
            params.process_id,
            WRITE_DEADLINE.as_secs()
        ))),
    }
}

/// `command/exec/terminate`: the process group is killed; the `command/exec` request
/// answers with the exit status.
pub(crate) async fn terminate(
    table: &CommandExecProcesses,
    connection: &Arc<Connection>,
    params: v2::CommandExecTerminateParams,
) -> Result<Reply, AppServerError> {
    let live = table.get(connection.id, &params.process_id).await?;
    live.terminate.cancel();
    Reply::new(&v2::EmptyResponse {})
}

/// `command/exec/resize`.
pub(crate) async fn resize(
    table: &CommandExecProcesses,
    connection: &Arc<Connection>,
    params: v2::CommandExecResizeParams,
) -> Result<Reply, AppServerError> {
    let live = table.get(connection.id, &params.process_id).await?;
    let Some(pty) = live.pty.get() else {
        return Err(AppServerError::InvalidRequest(format!(
            "process id {} is not a PTY session (start it with tty: true)",
            params.process_id
        )));
    };
    if params.size.rows == 0 || params.size.cols == 0 {
        return Err(AppServerError::InvalidParams(
            "size.rows and size.cols must be greater than 0".into(),
        ));
    }
    pty.resize(params.size.rows, params.size.cols)
        .map_err(|err| AppServerError::Internal(format!("resizing the terminal failed: {err}")))?;
    Reply::new(&v2::EmptyResponse {})
}

/// Refuses `policy` (with the command's environment `env`) when it lets the command do
/// more than the configured policy would with the server's own environment.
///
/// Compared on what the sandbox enforces: full access, network, and every writable root
/// as [`writable_roots`] computes it. A requested root must lie inside a configured one
/// and outside that root's read-only parts (`.git`, the agent's home, …).
fn ensure_no_looser(
    config: &Config,
    anchors: &RootAnchors,
    policy: &SandboxPolicy,
    env: &HashMap<String, String>,
    base_env: &HashMap<String, String>,
) -> Result<(), AppServerError> {
    let allowed = &config.sandbox_policy;
    if *allowed == SandboxPolicy::DangerFullAccess {
        return Ok(());
    }
    let refuse = |what: &str| {
        Err(AppServerError::InvalidRequest(format!(
            "sandboxPolicy refused: {what} is not allowed by the server's configured sandbox ({})",
            allowed.mode().as_str()
        )))
    };
    if policy.runs_unsandboxed() {
        return refuse(match policy {
            SandboxPolicy::ExternalSandbox { .. } => "externalSandbox",
            _ => "dangerFullAccess",
        });
    }
    if policy.has_full_network_access() && !allowed.has_full_network_access() {
        return refuse("network access");
    }
    let protected = config.sandbox_protected_paths();
    let allowed_roots = writable_roots(anchors, allowed, &config.cwd, base_env, &protected);
    for root in writable_roots(anchors, policy, &config.cwd, env, &protected) {
        if !within(&root.root, &allowed_roots) {
            return refuse(&format!("writing {}", root.root.display()));
        }
    }
    Ok(())
}

/// A request's `env` may not set what the dynamic loader reads before the sandbox helper
/// has sandboxed itself ([`interpreter_tools::env_policy::is_loader_variable`]).
fn refuse_loader_variables(
    overrides: Option<&HashMap<String, Option<String>>>,
) -> Result<(), AppServerError> {
    let Some(overrides) = overrides else {
        return Ok(());
    };
    for name in overrides.keys() {
        if interpreter_tools::env_policy::is_loader_variable(name) {
            return Err(AppServerError::InvalidRequest(format!(
                "env: {name} is not accepted for a sandboxed command (the dynamic loader reads it before the sandbox is in place)"
            )));
        }
    }
    Ok(())
}

fn within(path: &Path, roots: &[WritableRoot]) -> bool {
    roots.iter().any(|root| {
        path.starts_with(&root.root)
            && !root
                .read_only_subpaths
                .iter()
                .any(|read_only| path.starts_with(read_only))
    })
}

/// Output so far: streamed as notifications, or kept for the response.
struct Output {
    process_id: String,
    stream: bool,
    stdout: Capture,
    stderr: Capture,
}

impl Output {
    fn record(&mut self, connection: &Connection, stream: CommandExecOutputStream, bytes: &[u8]) {
        let capture = match stream {
            CommandExecOutputStream::Stdout => &mut self.stdout,
            CommandExecOutputStream::Stderr => &mut self.stderr,
        };
        let Some((kept, cap_reached)) = capture.take(bytes) else {
            return;
        };
        if self.stream {
            connection.notify(
                notification_names::COMMAND_EXEC_OUTPUT_DELTA,
                &v2::CommandExecOutputDeltaNotification {
                    process_id: self.process_id.clone(),
                    stream,
                    delta_base64: base64::engine::general_purpose::STANDARD.encode(kept),
                    cap_reached,
                },
            );
        } else {
            capture.kept.extend_from_slice(kept);
        }
    }
}

/// One stream's first `cap` bytes (Codex keeps the head, not the tail).
struct Capture {
    cap: usize,
    seen: usize,
    cap_reached: bool,
    kept: Vec<u8>,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            seen: 0,
            cap_reached: false,
            kept: Vec::new(),
        }
    }

    /// The part of `bytes` within the cap and whether the cap cut this chunk; `None` once
    /// the cap was reached earlier (later output is dropped).
    fn take<'b>(&mut self, bytes: &'b [u8]) -> Option<(&'b [u8], bool)> {
        if self.cap_reached {
            return None;
        }
        let room = self.cap - self.seen;
        if bytes.len() <= room {
            self.seen += bytes.len();
            return Some((bytes, false));
        }
        self.seen = self.cap;
        self.cap_reached = true;
        Some((&bytes[..room], true))
    }

    fn into_text(self) -> String {
        String::from_utf8_lossy(&self.kept).into_owned()
    }
}

async fn forward_pipe(
    mut pipe: impl AsyncRead + Unpin,
    stream: CommandExecOutputStream,
    sink: mpsc::Sender<(CommandExecOutputStream, Vec<u8>)>,
) {
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => {
                if sink.send((stream, buffer[..n].to_vec())).await.is_err() {
                    break;
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::debug!(?stream, %err, "reading command/exec output failed");
                break;
            }
        }
    }
}

async fn forward_pty(pty: Arc<PtyMaster>, sink: mpsc::Sender<(CommandExecOutputStream, Vec<u8>)>) {
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match pty.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => {
                if sink
                    .send((CommandExecOutputStream::Stdout, buffer[..n].to_vec()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Err(err) => {
                tracing::debug!(%err, "reading command/exec terminal output failed");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follow-up that runs before the `command/exec` it follows (requests run in tasks
    /// of their own) waits for it to take the id; one for an id nobody is taking fails.
    #[tokio::test]
    async fn a_follow_up_waits_for_an_arrived_exec_to_take_its_id() {
        let table = Arc::new(CommandExecProcesses::default());
        assert!(table.get(1, "p").await.is_err());
        table.note_arrival(1, "p");
        let waiter = {
            let table = table.clone();
            tokio::spawn(async move { table.get(1, "p").await.is_ok() })
        };
        tokio::task::yield_now().await;
        let arrival = Arrival {
            table: &table,
            key: (1, "p".into()),
        };
        let (process, _stdin) = LiveProcess::new(true).await;
        let reserved = table.reserve(1, "p", process);
        assert!(reserved.is_ok());
        drop(arrival);
        assert!(waiter.await.unwrap_or(false));
        drop(reserved);

        // The request failed before reserving: the waiter is told at once, not at the
        // deadline.
        table.note_arrival(1, "q");
        let waiter = {
            let table = table.clone();
            tokio::spawn(async move { table.get(1, "q").await.is_err() })
        };
        tokio::task::yield_now().await;
        drop(Arrival {
            table: &table,
            key: (1, "q".into()),
        });
        let answered = tokio::time::timeout(ARRIVAL_WAIT / 2, waiter).await;
        assert!(matches!(answered, Ok(Ok(true))));
    }

    #[test]
    fn capture_keeps_the_head_and_marks_the_cut() {
        let mut capture = Capture::new(5);
        assert_eq!(capture.take(b"abc"), Some((&b"abc"[..], false)));
        assert_eq!(capture.take(b"defg"), Some((&b"de"[..], true)));
        assert_eq!(capture.take(b"h"), None);
    }

    #[test]
    fn a_chunk_that_fills_the_cap_exactly_is_not_cut() {
        let mut capture = Capture::new(3);
        assert_eq!(capture.take(b"abc"), Some((&b"abc"[..], false)));
        assert_eq!(capture.take(b"d"), Some((&b""[..], true)));
    }

    #[test]
    fn streaming_flags_need_a_process_id() {
        let params = v2::CommandExecParams {
            command: vec!["true".into()],
            stream_stdout_stderr: true,
            ..Default::default()
        };
        assert!(mode(&params).is_err());
    }

    #[test]
    fn the_client_cannot_lift_the_server_cap() {
        let params = v2::CommandExecParams {
            command: vec!["true".into()],
            output_bytes_cap: Some(usize::MAX),
            ..Default::default()
        };
        assert_eq!(
            mode(&params).map(|m| m.cap).ok(),
            Some(MAX_OUTPUT_BYTES_CAP)
        );
    }
}
