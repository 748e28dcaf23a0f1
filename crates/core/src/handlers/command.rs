//! The `shell` tool, and the one way any command of the thread runs: approval, the
//! sandbox helper, the repository census around a sandboxed command, and the begin,
//! output and end events (a user shell command runs here too).

use super::*;

/// `command` as a script string, or (as some models send) an argv array.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum CommandArg {
    Script(String),
    Argv(Vec<String>),
}

#[derive(Debug, Deserialize, Default, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum SandboxPermissions {
    #[default]
    UseDefault,
    RequireEscalated,
}

#[derive(Debug, Deserialize)]
pub(super) struct ShellArgs {
    #[serde(alias = "cmd")]
    command: CommandArg,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    sandbox_permissions: SandboxPermissions,
    #[serde(default)]
    justification: Option<String>,
}

pub(super) async fn handle_shell(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    args: ShellArgs,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let argv = match args.command {
        CommandArg::Script(script) => safety::shell_argv(&script),
        CommandArg::Argv(argv) if !argv.is_empty() => argv,
        CommandArg::Argv(_) => {
            return ToolOutcome::Output(
                "invalid arguments for `shell`: `command` is empty".to_string(),
            );
        }
    };
    if let Some(patch) = apply_patch::extract_patch_from_shell(&argv) {
        return handle_patch(sess, sub_id, call_id, &patch, cancel).await;
    }
    let cwd = resolve_dir(&sess.config.cwd, args.workdir.as_deref());
    if !cwd.is_dir() {
        return ToolOutcome::Output(format!(
            "workdir {} does not exist; pass an existing directory",
            cwd.display()
        ));
    }
    let timeout = args
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(sess.config.shell_default_timeout);
    // Plan mode and reviews: read-only whatever the thread's policy, and no way out of
    // the sandbox (no escalation, no retry outside it), whatever the model asks.
    let read_only_turn = sess.is_read_only_turn();
    let policy = sess.turn_sandbox_policy();
    let escalate =
        !read_only_turn && args.sandbox_permissions == SandboxPermissions::RequireEscalated;
    if escalate
        && !policy.runs_unsandboxed()
        && let Some(why) = leaving_the_sandbox_refused(&sess.config)
    {
        return ToolOutcome::Output(format!("command rejected: {why}"));
    }
    let session_key = format!("exec:{}", interpreter_tools::display_command(&argv));
    let approved_for_session = sess.is_approved_for_session(&session_key).await;

    let sandboxed = match approval::assess_command(
        sess.config.approval_policy,
        &policy,
        &argv,
        escalate,
        approved_for_session,
    ) {
        CommandAssessment::Run { sandboxed } => sandboxed,
        CommandAssessment::Reject(reason) => {
            return ToolOutcome::Output(format!("command rejected: {reason}"));
        }
        CommandAssessment::Ask { sandboxed, reason } => {
            let reason = args.justification.clone().unwrap_or(reason);
            let decision = ask_exec(sess, sub_id, call_id, &argv, &cwd, reason, cancel).await;
            if let Err(stop) = settle(sess, decision, session_key, DECLINED_COMMAND).await {
                if decision != ReviewDecision::Abort {
                    emit_declined(sess, sub_id, call_id, &argv, &cwd).await;
                }
                return stop;
            }
            sandboxed
        }
    } || read_only_turn;

    emit_begin(sess, sub_id, call_id, &argv, &cwd, ExecCommandSource::Agent).await;
    let started = Instant::now();
    let mut result = execute(
        sess, sub_id, call_id, &argv, &cwd, timeout, sandboxed, cancel,
    )
    .await;

    // A command the sandbox stopped may be retried outside it, but only with approval.
    if sandboxed
        && !read_only_turn
        && leaving_the_sandbox_refused(&sess.config).is_none()
        && approval::may_ask_to_retry_unsandboxed(sess.config.approval_policy)
        && let Ok(out) = &result
        && out.exit_code != Some(0)
        && !out.cancelled
        && !out.timed_out
        && sandbox::looks_like_sandbox_denial(out.exit_code, &out.aggregated_output)
    {
        let reason =
            "the command failed inside the sandbox; run it again without the sandbox?".to_string();
        match ask_exec(sess, sub_id, call_id, &argv, &cwd, reason, cancel).await {
            ReviewDecision::Approved | ReviewDecision::ApprovedForSession => {
                result =
                    run_command(sess, sub_id, call_id, &argv, &cwd, timeout, false, cancel).await;
            }
            ReviewDecision::Abort => {
                emit_end(
                    sess,
                    sub_id,
                    call_id,
                    &argv,
                    &cwd,
                    None,
                    String::new(),
                    started,
                    ExecCommandStatus::Failed,
                    ExecCommandSource::Agent,
                )
                .await;
                return ToolOutcome::Stop(REFUSED_AND_STOPPED.to_string());
            }
            ReviewDecision::Denied | ReviewDecision::TimedOut => {}
        }
    }

    match result {
        Ok(out) => {
            let status = if out.exit_code == Some(0) {
                ExecCommandStatus::Completed
            } else {
                ExecCommandStatus::Failed
            };
            let sandbox_denied = sandboxed
                && out.exit_code != Some(0)
                && sandbox::looks_like_sandbox_denial(out.exit_code, &out.aggregated_output);
            interpreter_telemetry::spans::record_command_end(out.exit_code, sandbox_denied);
            if sandbox_denied {
                interpreter_telemetry::metrics::instruments().record_sandbox_denial();
            }
            emit_end(
                sess,
                sub_id,
                call_id,
                &argv,
                &cwd,
                out.exit_code,
                out.aggregated_output.clone(),
                started,
                status,
                ExecCommandSource::Agent,
            )
            .await;
            if out.cancelled {
                return ToolOutcome::Stop(format!(
                    "interrupted: the turn was stopped while this command ran; it was killed after {} ms.\n{}",
                    started.elapsed().as_millis(),
                    shell::format_output_for_model(&out)
                ));
            }
            ToolOutcome::Output(shell::format_output_for_model(&out))
        }
        Err(err) => {
            let text = format!("failed to run the command: {err}");
            emit_end(
                sess,
                sub_id,
                call_id,
                &argv,
                &cwd,
                None,
                text.clone(),
                started,
                ExecCommandStatus::Failed,
                ExecCommandSource::Agent,
            )
            .await;
            ToolOutcome::Output(text)
        }
    }
}

pub(super) async fn emit_begin(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    source: ExecCommandSource,
) {
    sess.emit(
        sub_id,
        EventMsg::ExecCommandBegin(ExecCommandBeginEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            command: argv.to_vec(),
            cwd: cwd.to_path_buf(),
            parsed_cmd: safety::parse_command(argv),
            source,
        }),
    )
    .await;
}

/// Runs `argv` in `cwd` (inside the sandbox when `sandboxed`), streaming its output as
/// events: the one way a command of the thread runs, whether the model or the user asked
/// for it. A sandboxed command may not create repositories ([`RepositoryWatch`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn execute(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    timeout: Duration,
    sandboxed: bool,
    cancel: &CancellationToken,
) -> Result<shell::ExecOutput, String> {
    let watch = if sandboxed {
        let policy = sess.turn_sandbox_policy();
        RepositoryWatch::start(
            &sess.config,
            &sess.root_anchors,
            &policy,
            &sess.config.command_env(),
            cwd,
        )
        .await?
    } else {
        RepositoryWatch::off()
    };
    let mut result =
        run_command(sess, sub_id, call_id, argv, cwd, timeout, sandboxed, cancel).await;
    let refused = watch.finish().await;
    if let Ok(out) = &mut result {
        out.aggregated_output.push_str(&refused);
        out.stderr.push_str(&refused);
    }
    result
}

/// How long a user shell command may run when the client gives no timeout (as Codex).
pub(crate) const USER_SHELL_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Runs a shell command string the user (not the model) asked for, in the thread's
/// working directory, with the events of a command whose source is the user's shell.
/// Unlike Codex, which runs it with full access, it is sandboxed by the thread's policy
/// unless that is `danger-full-access`: a client request must not escape the sandbox the
/// thread was started with. No approval is asked: the user asked for it. Returns what
/// the model is told: the command and its output.
pub(crate) async fn run_user_shell_command(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    command: &str,
    timeout: Duration,
    cancel: &CancellationToken,
) -> String {
    let argv = safety::shell_argv(command);
    let cwd = sess.config.cwd.clone();
    let sandboxed = !matches!(sess.config.sandbox_policy, SandboxPolicy::DangerFullAccess);
    emit_begin(
        sess,
        sub_id,
        call_id,
        &argv,
        &cwd,
        ExecCommandSource::UserShell,
    )
    .await;
    let started = Instant::now();
    let result = execute(
        sess, sub_id, call_id, &argv, &cwd, timeout, sandboxed, cancel,
    )
    .await;
    let (exit_code, output, status, for_model) = match result {
        Ok(out) => {
            let status = if out.exit_code == Some(0) {
                ExecCommandStatus::Completed
            } else {
                ExecCommandStatus::Failed
            };
            let for_model = shell::format_output_for_model(&out);
            (out.exit_code, out.aggregated_output, status, for_model)
        }
        Err(err) => {
            let text = format!("failed to run the command: {err}");
            (None, text.clone(), ExecCommandStatus::Failed, text)
        }
    };
    emit_end(
        sess,
        sub_id,
        call_id,
        &argv,
        &cwd,
        exit_code,
        output,
        started,
        status,
        ExecCommandSource::UserShell,
    )
    .await;
    format!(
        "<user_shell_command>\n<command>\n{command}\n</command>\n<result>\n{for_model}\n</result>\n</user_shell_command>"
    )
}

/// The sandbox helper cannot be started from this process (no path to our executable).
#[derive(Debug, thiserror::Error)]
#[error(
    "the sandbox helper is unavailable in this process; choose `danger-full-access` explicitly to run without a sandbox"
)]
pub struct SandboxHelperUnavailable;

/// A command wrapped in the sandbox helper, and the writable roots whose descriptors the
/// helper must inherit (its `--root-fds`).
#[derive(Debug)]
pub struct SandboxedCommand {
    pub argv: Vec<String>,
    pub roots: Vec<Arc<sandbox::AnchoredRoot>>,
}

/// `argv` run in `cwd` under `policy` through the sandbox helper: the one rule for how a
/// sandboxed command is launched, shared by the shell tool and front ends that run
/// commands outside a turn (the app-server's `command/exec`).
///
/// The writable roots come from `config.cwd` (the session's or server's working
/// directory), never from `cwd`: where a command runs is the caller's choice and must not
/// widen what is writable. They are the directories `anchors` decided on (once per
/// session), handed to the helper as descriptors. The agent's home and credential sockets
/// stay protected.
pub fn sandboxed_command(
    config: &Config,
    anchors: &sandbox::RootAnchors,
    policy: &SandboxPolicy,
    cwd: &Path,
    argv: &[String],
) -> Result<SandboxedCommand, SandboxHelperUnavailable> {
    let exe = config
        .sandbox_exe
        .as_ref()
        .ok_or(SandboxHelperUnavailable)?;
    let protected = config.sandbox_protected_paths();
    let roots = anchors
        .anchor(policy, &config.cwd, &config.command_env(), &protected)
        .roots;
    Ok(SandboxedCommand {
        argv: sandbox::sandbox_argv(
            exe,
            policy,
            &config.cwd,
            cwd,
            &protected,
            Some(&roots),
            argv,
        ),
        roots,
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn run_command(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    timeout: Duration,
    sandboxed: bool,
    cancel: &CancellationToken,
) -> Result<shell::ExecOutput, String> {
    // The sandbox helper itself tells a sandboxed command that the network is off.
    let env = sess.config.command_env();
    let (argv, inherited_roots) = if sandboxed {
        let command = sandboxed_command(
            &sess.config,
            &sess.root_anchors,
            &sess.turn_sandbox_policy(),
            cwd,
            argv,
        )
        .map_err(|err| err.to_string())?;
        (command.argv, command.roots)
    } else {
        (argv.to_vec(), Vec::new())
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(ExecOutputStream, Vec<u8>)>();
    let forward = {
        let sess = sess.clone();
        let sub_id = sub_id.to_string();
        let call_id = call_id.to_string();
        tokio::spawn(async move {
            while let Some((stream, bytes)) = rx.recv().await {
                sess.emit(
                    &sub_id,
                    EventMsg::ExecCommandOutputDelta(ExecCommandOutputDeltaEvent {
                        call_id: call_id.clone(),
                        stream,
                        chunk: String::from_utf8_lossy(&bytes).into_owned(),
                    }),
                )
                .await;
            }
        })
    };
    let request = shell::ExecRequest {
        argv,
        cwd: cwd.to_path_buf(),
        env,
        timeout,
        output_max_bytes: sess.config.tool_output_max_bytes,
        inherited_roots,
    };
    let result = shell::run(request, cancel.child_token(), Some(tx)).await;
    // The sender is gone once `run` returns, so the forwarder drains and ends.
    let _ = forward.await;
    result.map_err(|err| err.to_string())
}

// What the model is told when an approval is refused. Not "the user": a refusal may come
// from the client's policy, an approval timeout or a fallback when nobody was asked (found
// running the MCP hosts, where Gemini CLI cannot be asked and the model was told the user
// declined).
pub(super) const DECLINED_COMMAND: &str = "running this command was declined (by the user or the approval policy); do not run it again, find another way or ask";
pub(super) async fn ask_exec(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    reason: String,
    cancel: &CancellationToken,
) -> ReviewDecision {
    let request = exec_approval_request(sub_id, call_id, argv, cwd, reason);
    wait_for_approval(
        sess,
        sub_id,
        call_id,
        ApprovalSubject::Command,
        request,
        cancel,
    )
    .await
}

/// The question about running `argv`, as every front end shows a command.
pub(super) fn exec_approval_request(
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    reason: String,
) -> EventMsg {
    EventMsg::ExecApprovalRequest(ExecApprovalRequestEvent {
        call_id: call_id.to_string(),
        turn_id: sub_id.to_string(),
        command: argv.to_vec(),
        cwd: cwd.to_path_buf(),
        reason: Some(reason),
        parsed_cmd: safety::parse_command(argv),
    })
}

pub(super) async fn emit_declined(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
) {
    sess.emit(
        sub_id,
        EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            parsed_cmd: safety::parse_command(argv),
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            command: argv.to_vec(),
            cwd: cwd.to_path_buf(),
            exit_code: None,
            aggregated_output: String::new(),
            duration_ms: 0,
            status: ExecCommandStatus::Declined,
            source: ExecCommandSource::Agent,
        }),
    )
    .await;
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn emit_end(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    exit_code: Option<i32>,
    aggregated_output: String,
    started: Instant,
    status: ExecCommandStatus,
    source: ExecCommandSource,
) {
    sess.emit(
        sub_id,
        EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            parsed_cmd: safety::parse_command(argv),
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            command: argv.to_vec(),
            cwd: cwd.to_path_buf(),
            exit_code,
            aggregated_output,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            status,
            source,
        }),
    )
    .await;
}

pub(super) fn resolve_dir(cwd: &Path, workdir: Option<&str>) -> PathBuf {
    match workdir {
        Some(dir) if !dir.is_empty() => cwd.join(dir),
        _ => cwd.to_path_buf(),
    }
}
