//! The tools offered to the model and what happens when it calls one.
//!
//! Every call produces exactly one output string the model can read — bad arguments, a
//! declined approval, or a failed command included — so a confused model can correct
//! itself and the history stays well formed. Only an interrupt (or an approval answered
//! with `abort`) stops the turn instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_mcp_client::{McpToolInfo, ToolsLeftOut};
use interpreter_model_client::ToolSpec;
use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, EventMsg, ExecApprovalRequestEvent, ExecCommandBeginEvent,
    ExecCommandEndEvent, ExecCommandOutputDeltaEvent, ExecCommandSource, ExecCommandStatus,
    ExecOutputStream, FileChange, FileChanges, GoalStatus, McpInvocation, McpToolCallBeginEvent,
    McpToolCallEndEvent, McpToolCallProgressEvent, PatchApplyBeginEvent, PatchApplyEndEvent,
    ReviewDecision, SandboxMode, SandboxPolicy, TurnDiffEvent, UpdatePlanArgs, WarningEvent,
};
use interpreter_tools::{apply_patch, safety, sandbox, shell};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::approval::{self, CommandAssessment, McpAssessment, PatchAssessment};
use crate::config::Config;
use crate::goal;
use crate::pending::NoAnswer;
use crate::planted_repos::RepositoryWatch;
use crate::revert::EditRecorder;
use crate::session::Session;
use crate::tool_output::{ToolOutcome, cap_tool_result};
use crate::user_requests;
use crate::workspace_files::{Target, read_sources};

/// Recorded for a call the user refused with "abort".
const REFUSED_AND_STOPPED: &str =
    "aborted: the user refused this and stopped the turn; it did not run";

const SHELL_TOOL: &str = "shell";
const APPLY_PATCH_TOOL: &str = "apply_patch";
const UPDATE_PLAN_TOOL: &str = "update_plan";
const LIST_RESOURCES_TOOL: &str = "list_mcp_resources";
const READ_RESOURCE_TOOL: &str = "read_mcp_resource";

/// The tools of one request, and the MCP tools the caps left out of it.
pub(crate) struct OfferedTools {
    pub specs: Vec<ToolSpec>,
    pub left_out: Vec<ToolsLeftOut>,
}

impl OfferedTools {
    /// The one line that tells the model some servers' tools are missing, so it does not
    /// take the list for everything those servers can do.
    pub(crate) fn left_out_note(&self) -> Option<String> {
        if self.left_out.is_empty() {
            return None;
        }
        let servers: Vec<String> = self
            .left_out
            .iter()
            .map(|cut| format!("`{}` {} of {}", cut.server, cut.left_out, cut.offered))
            .collect();
        Some(format!(
            "Note: some MCP tools were left out of this request's tool list (tool caps): {}.",
            servers.join(", ")
        ))
    }
}

/// The model ends the thread's active goal.
async fn handle_update_goal(
    sess: &Session,
    sub_id: &str,
    args: goal::UpdateGoalArgs,
) -> ToolOutcome {
    let updated = sess.goal.lock().ok().and_then(|mut slot| {
        let goal = slot
            .goal
            .as_mut()
            .filter(|g| g.status == GoalStatus::Active)?;
        goal.status = args.status.into();
        goal.updated_at = chrono::Utc::now().timestamp();
        Some(goal.clone())
    });
    let Some(goal) = updated else {
        return ToolOutcome::Output("update_goal: the thread has no active goal".to_string());
    };
    let status = goal.status;
    sess.record_goal(sub_id, Some(goal)).await;
    let reason = args.reason.map(|r| format!(" ({r})")).unwrap_or_default();
    ToolOutcome::Output(format!(
        "Goal marked {}{reason}; no further goal turns will run.",
        match status {
            GoalStatus::Complete => "complete",
            _ => "blocked",
        }
    ))
}

/// The built-in tools, the resource tools when a server offers resources, then the
/// thread's MCP tools (`mcp__<server>__<tool>`), as far as the MCP client's caps on tool
/// count and schema size let them in.
pub(crate) fn tool_specs(sess: &Session) -> OfferedTools {
    let mut specs = builtin_tool_specs();
    if sess.is_read_only_turn() {
        specs.retain(|spec| spec.name != APPLY_PATCH_TOOL);
    }
    if sess.goal.lock().is_ok_and(|slot| slot.is_active()) {
        specs.push(goal::tool_spec());
    }
    if user_requests::offers_user_input(sess) {
        specs.push(user_requests::user_input_spec());
    }
    if user_requests::offers_permissions(sess) {
        specs.push(user_requests::permissions_spec());
    }
    let mut left_out = Vec::new();
    if let Some(mcp) = &sess.mcp {
        let resource_servers = mcp.resource_servers();
        if !resource_servers.is_empty() {
            specs.extend(resource_tool_specs(&resource_servers));
        }
        let table = mcp.tool_table();
        left_out = table.left_out;
        specs.extend(table.tools.into_iter().map(|tool| ToolSpec {
            name: tool.qualified_name,
            description: tool.description,
            parameters: tool.input_schema,
        }));
    }
    OfferedTools { specs, left_out }
}

/// `list_mcp_resources` and `read_mcp_resource`: resources are data a server exposes
/// by URI (files, records, documents); two generic tools reach every server's, instead of
/// one per server, which keeps the tool list short.
fn resource_tool_specs(servers: &[String]) -> Vec<ToolSpec> {
    let names = servers.join(", ");
    vec![
        ToolSpec {
            name: LIST_RESOURCES_TOOL.to_string(),
            description: format!(
                "List the resources (data addressable by URI) of MCP servers: {names}. \
                 Without `server`, lists every one's first page."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources."},
                    "cursor": {"type": "string", "description": "`nextCursor` of a previous page of `server`."}
                },
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: READ_RESOURCE_TOOL.to_string(),
            description: format!("Read one resource of an MCP server ({names}) by its URI."),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The server, as `list_mcp_resources` names it."},
                    "uri": {"type": "string", "description": "The resource's URI."}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        },
    ]
}

fn builtin_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: SHELL_TOOL.to_string(),
            description: "Run a shell command with `bash -lc` and return its exit code and output. \
                Use `workdir` instead of `cd`. Output is truncated (head and tail kept) when long."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell script to run."},
                    "workdir": {"type": "string", "description": "Directory to run in; defaults to the session's working directory."},
                    "timeout_ms": {"type": "number", "description": "Kill the command after this many milliseconds."},
                    "sandbox_permissions": {
                        "type": "string",
                        "enum": ["use_default", "require_escalated"],
                        "description": "`require_escalated` asks the user to run this command outside the sandbox."
                    },
                    "justification": {"type": "string", "description": "With `require_escalated`: one sentence on why, shown to the user."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: APPLY_PATCH_TOOL.to_string(),
            description: "Create, update, move or delete files with a patch in the `*** Begin Patch` format \
                described in the instructions. Pass the whole patch text as `input`."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "input": {"type": "string", "description": "The patch, from `*** Begin Patch` to `*** End Patch`."}
                },
                "required": ["input"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: UPDATE_PLAN_TOOL.to_string(),
            description: "Record or update the step plan for the task. At most one step may be `in_progress`."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "explanation": {"type": "string"},
                    "plan": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["step", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["plan"],
                "additionalProperties": false
            }),
        },
    ]
}

pub(crate) async fn handle_call(
    sess: &Arc<Session>,
    sub_id: &str,
    name: &str,
    arguments: &str,
    call_id: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    match name {
        SHELL_TOOL | "shell_command" | "exec_command" | "bash" => {
            match parse_args::<ShellArgs>(name, arguments) {
                Ok(args) => handle_shell(sess, sub_id, call_id, args, cancel).await,
                Err(text) => ToolOutcome::Output(text),
            }
        }
        APPLY_PATCH_TOOL => match parse_args::<ApplyPatchArgs>(name, arguments) {
            Ok(args) => handle_patch(sess, sub_id, call_id, &args.input, cancel).await,
            Err(text) => ToolOutcome::Output(text),
        },
        UPDATE_PLAN_TOOL => match parse_args::<UpdatePlanArgs>(name, arguments) {
            Ok(args) => {
                let in_progress = args
                    .plan
                    .iter()
                    .filter(|p| p.status == interpreter_protocol::StepStatus::InProgress)
                    .count();
                if in_progress > 1 {
                    return ToolOutcome::Output(format!(
                        "update_plan rejected: {in_progress} steps are `in_progress`; at most one may be"
                    ));
                }
                sess.emit(sub_id, EventMsg::PlanUpdate(args)).await;
                ToolOutcome::Output("Plan updated".to_string())
            }
            Err(text) => ToolOutcome::Output(text),
        },
        goal::UPDATE_GOAL_TOOL => match parse_args::<goal::UpdateGoalArgs>(name, arguments) {
            Ok(args) => handle_update_goal(sess, sub_id, args).await,
            Err(text) => ToolOutcome::Output(text),
        },
        user_requests::REQUEST_USER_INPUT_TOOL => {
            match parse_args::<user_requests::UserInputArgs>(name, arguments) {
                Ok(args) => {
                    user_requests::handle_user_input(sess, sub_id, call_id, args, cancel).await
                }
                Err(text) => ToolOutcome::Output(text),
            }
        }
        user_requests::REQUEST_PERMISSIONS_TOOL => {
            match parse_args::<user_requests::PermissionsArgs>(name, arguments) {
                Ok(args) => {
                    user_requests::handle_permissions(sess, sub_id, call_id, args, cancel).await
                }
                Err(text) => ToolOutcome::Output(text),
            }
        }
        LIST_RESOURCES_TOOL | READ_RESOURCE_TOOL if sess.mcp.is_some() => {
            handle_resources(sess, sub_id, call_id, name, arguments, cancel).await
        }
        other => match sess.mcp.as_ref().and_then(|mcp| {
            mcp.tools()
                .into_iter()
                .find(|tool| tool.qualified_name == other)
        }) {
            Some(tool) => handle_mcp(sess, sub_id, call_id, tool, arguments, cancel).await,
            None => ToolOutcome::Output(format!(
                "unknown tool `{other}`; the available tools are `{SHELL_TOOL}`, `{APPLY_PATCH_TOOL}`, `{UPDATE_PLAN_TOOL}` and the `mcp__*` tools listed in this request"
            )),
        },
    }
}

/// Parse tool arguments, or explain to the model what was wrong.
fn parse_args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &str) -> Result<T, String> {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    serde_json::from_str(arguments).map_err(|err| {
        format!("invalid arguments for `{tool}`: {err}. Send a JSON object that matches the tool's parameters schema and try again.")
    })
}

#[derive(Debug, Deserialize)]
struct ApplyPatchArgs {
    input: String,
}

/// `command` as a script string, or (as some models send) an argv array.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CommandArg {
    Script(String),
    Argv(Vec<String>),
}

#[derive(Debug, Deserialize, Default, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum SandboxPermissions {
    #[default]
    UseDefault,
    RequireEscalated,
}

#[derive(Debug, Deserialize)]
struct ShellArgs {
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

async fn handle_shell(
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

async fn emit_begin(
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
async fn execute(
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
async fn run_command(
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
const DECLINED_COMMAND: &str = "running this command was declined (by the user or the approval policy); do not run it again, find another way or ask";
const PATCH_IN_PLAN_MODE: &str = "apply_patch is not available in Plan mode: this turn only explores and proposes a plan; no file was changed. Put the change in your <proposed_plan> instead";
const PATCH_IN_REVIEW: &str = "apply_patch is not available in a review: this turn only reviews the changes; no file was changed. Put the fix you suggest in your review instead";
const DECLINED_PATCH: &str =
    "this patch was declined (by the user or the approval policy); the files were not changed";
const DECLINED_MCP_CALL: &str = "this MCP tool call was declined (by the user or the approval policy); do not call it again, find another way or ask";

/// Act on an approval answer: go on (remembering a session-wide approval under
/// `session_key`), or stop with what the model is told (`declined`) or with an abort.
async fn settle(
    sess: &Session,
    decision: ReviewDecision,
    session_key: String,
    declined: &str,
) -> Result<(), ToolOutcome> {
    match decision {
        ReviewDecision::Approved => Ok(()),
        ReviewDecision::ApprovedForSession => {
            sess.approve_for_session(session_key).await;
            Ok(())
        }
        ReviewDecision::Abort => Err(ToolOutcome::Stop(REFUSED_AND_STOPPED.to_string())),
        ReviewDecision::Denied | ReviewDecision::TimedOut => {
            Err(ToolOutcome::Output(declined.to_string()))
        }
    }
}

async fn ask_exec(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    argv: &[String],
    cwd: &Path,
    reason: String,
    cancel: &CancellationToken,
) -> ReviewDecision {
    let request = EventMsg::ExecApprovalRequest(ExecApprovalRequestEvent {
        call_id: call_id.to_string(),
        turn_id: sub_id.to_string(),
        command: argv.to_vec(),
        cwd: cwd.to_path_buf(),
        reason: Some(reason),
        parsed_cmd: safety::parse_command(argv),
    });
    wait_for_approval(sess, sub_id, call_id, request, cancel).await
}

/// Emit an approval request and wait for its answer, the approval deadline, or the turn's
/// cancellation — whichever comes first. Never waits forever.
async fn wait_for_approval(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    request: EventMsg,
    cancel: &CancellationToken,
) -> ReviewDecision {
    let answer = sess.approvals.register(call_id).await;
    sess.emit(sub_id, request).await;
    let timeout = sess.config.approval_timeout;
    match sess.approvals.wait(call_id, answer, timeout, cancel).await {
        Ok(decision) => decision,
        Err(NoAnswer::Dropped) => ReviewDecision::Denied,
        Err(NoAnswer::TimedOut) => {
            sess.request_expired(sub_id, call_id, timeout).await;
            sess.emit(
                sub_id,
                EventMsg::Warning(WarningEvent {
                    message: format!(
                        "approval request {call_id} got no answer within {}s; treated as declined",
                        timeout.as_secs()
                    ),
                }),
            )
            .await;
            ReviewDecision::TimedOut
        }
        Err(NoAnswer::Cancelled) => ReviewDecision::Abort,
    }
}

async fn emit_declined(sess: &Session, sub_id: &str, call_id: &str, argv: &[String], cwd: &Path) {
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
async fn emit_end(
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

async fn handle_patch(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    patch_text: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    if sess.is_read_only_turn() {
        // Not offered in a read-only turn; a model that calls it anyway changes nothing.
        let refusal = if sess.is_review_turn() {
            PATCH_IN_REVIEW
        } else {
            PATCH_IN_PLAN_MODE
        };
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), refusal).await;
        return ToolOutcome::Output(refusal.to_string());
    }
    let cwd = sess.config.cwd.clone();
    // A patch that does not parse or fit its files is still an edit the model tried:
    // front ends show it failed, with why.
    let patch = match apply_patch::parse_patch(patch_text) {
        Ok(patch) => patch,
        Err(err) => {
            let text = format!("apply_patch failed: {err}");
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    // Every path the patch touches is resolved and checked once, before any file is
    // read; what is shown, asked about and written is that resolved target, reached by
    // descriptor (see `interpreter_tools::beneath`).
    let scope = sess.write_scope();
    let targets = match patch_targets(&scope, &cwd, &patch) {
        Ok(targets) => targets,
        Err(text) => {
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    let resolved: Vec<PathBuf> = targets.values().map(|t| t.resolved.clone()).collect();
    let unwritable = unwritable_reason(sess, &scope, &targets);
    let all_writable = unwritable.is_none();
    let session_key = format!(
        "patch:{}",
        resolved
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let approved_for_session = sess.is_approved_for_session(&session_key).await;
    // Applied by the agent itself, outside any sandbox: under an operator's ceiling a
    // patch writes only where the thread's commands could.
    if let Some(why) = unwritable.as_deref()
        && let Some(ceiling) = leaving_the_sandbox_refused(&sess.config)
    {
        let text = format!("patch rejected: {why}, and {ceiling}");
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
        return ToolOutcome::Output(text);
    }
    let assessment = approval::assess_patch(
        sess.config.approval_policy,
        unwritable.as_deref(),
        approved_for_session,
    );
    // A patch that would be refused anyway is refused before any file is read: whether
    // its lines match a file it may not touch is not the model's to learn.
    if let PatchAssessment::Reject(reason) = &assessment {
        let text = format!("patch rejected: {reason}");
        report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
        return ToolOutcome::Output(text);
    }
    let plan = match plan_patch(sess, &patch, &cwd, &targets).await {
        Ok(plan) => plan,
        Err(err) => {
            let text = format!("apply_patch failed: {err}");
            report_refused_patch(sess, sub_id, call_id, FileChanges::new(), &text).await;
            return ToolOutcome::Output(text);
        }
    };
    let changes = shown_changes(plan.changes(), &targets);

    let auto_approved = match assessment {
        PatchAssessment::Apply => true,
        PatchAssessment::Reject(reason) => {
            let text = format!("patch rejected: {reason}");
            report_refused_patch(sess, sub_id, call_id, changes, &text).await;
            return ToolOutcome::Output(text);
        }
        PatchAssessment::Ask { reason } => {
            let grant_root = (!all_writable).then(|| common_parent(&resolved)).flatten();
            let request = EventMsg::ApplyPatchApprovalRequest(ApplyPatchApprovalRequestEvent {
                call_id: call_id.to_string(),
                turn_id: sub_id.to_string(),
                changes: changes.clone(),
                reason: Some(reason),
                grant_root,
            });
            let decision = wait_for_approval(sess, sub_id, call_id, request, cancel).await;
            if let Err(stop) = settle(sess, decision, session_key, DECLINED_PATCH).await {
                let shown = match &stop {
                    ToolOutcome::Output(text) | ToolOutcome::Stop(text) => text.clone(),
                };
                report_refused_patch(sess, sub_id, call_id, changes, &shown).await;
                return stop;
            }
            false
        }
    };

    sess.emit(
        sub_id,
        EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            auto_approved,
            changes: changes.clone(),
        }),
    )
    .await;
    let applied = apply_planned(
        sess,
        sub_id,
        call_id,
        &patch,
        &cwd,
        &targets,
        plan,
        !auto_approved,
    )
    .await;
    let (success, stdout, stderr) = match &applied {
        Ok(plan) => (true, plan.report().summary(), String::new()),
        Err(err) => (false, String::new(), format!("apply_patch failed: {err}")),
    };
    sess.emit(
        sub_id,
        EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            success,
            changes,
        }),
    )
    .await;
    if let Ok(plan) = &applied {
        let unified_diff = sess.record_turn_diff(sub_id, plan).await;
        sess.emit(sub_id, EventMsg::TurnDiff(TurnDiffEvent { unified_diff }))
            .await;
    }
    ToolOutcome::Output(if success { stdout } else { stderr })
}

/// Each path `patch` touches, by the absolute path the patch names, as the target it is
/// read and written through: a path the sandbox lets commands write is reached beneath
/// its root; any other (written only if a person approves, naming the resolved target)
/// along its resolved path. Refused before anything is read: a path that cannot be
/// resolved, and one in the agent's home or a credential agent, which commands can
/// neither read nor write (reading it for the patch would tell the model whether its
/// lines match).
fn patch_targets(
    scope: &sandbox::WriteScope,
    cwd: &Path,
    patch: &apply_patch::Patch,
) -> Result<BTreeMap<PathBuf, Target>, String> {
    let mut targets = BTreeMap::new();
    for path in patch.affected_paths(cwd) {
        let Some(resolved) = sandbox::resolve_for_write(&path) else {
            return Err(format!(
                "apply_patch failed: {} cannot be resolved (a symlink loop)",
                path.display()
            ));
        };
        if scope.is_hidden(&resolved) {
            return Err(format!(
                "patch rejected: {} is protected (the agent's home or a credential store); apply_patch never reads or writes it",
                path.display()
            ));
        }
        let purpose = if scope.allows_resolved(&resolved) {
            sandbox::Purpose::Write
        } else {
            sandbox::Purpose::ApprovedWrite
        };
        // The same resolution that was checked, never the name resolved again.
        let target = scope
            .target_resolved(path.clone(), resolved, purpose)
            .ok_or_else(|| format!("apply_patch failed: {} may not be written", path.display()))?;
        targets.insert(path, target);
    }
    Ok(targets)
}

/// The patch's changes by the resolved target each path leads to: what approvals and
/// events name, so a symlink in the workspace cannot show one file and write another.
fn shown_changes(changes: FileChanges, targets: &BTreeMap<PathBuf, Target>) -> FileChanges {
    let shown = |path: &PathBuf| {
        targets
            .get(path)
            .map_or_else(|| path.clone(), |target| target.resolved.clone())
    };
    changes
        .into_iter()
        .map(|(path, change)| {
            let change = match change {
                FileChange::Update {
                    unified_diff,
                    move_path,
                } => FileChange::Update {
                    unified_diff,
                    move_path: move_path.as_ref().map(shown),
                },
                other => other,
            };
            (shown(&path), change)
        })
        .collect()
}

/// The patch resolved against its files as the thread's [`WorkspaceFiles`] has them
/// (an editor's unsaved buffers, over ACP), read through `targets`.
async fn plan_patch(
    sess: &Session,
    patch: &apply_patch::Patch,
    cwd: &Path,
    targets: &BTreeMap<PathBuf, Target>,
) -> Result<apply_patch::PatchPlan, apply_patch::PatchError> {
    let sources: Vec<Target> = patch
        .sources(cwd)
        .iter()
        .filter_map(|path| targets.get(path).cloned())
        .collect();
    let sources = read_sources(sess.files.as_ref(), sess.thread_id, &sources).await;
    patch.plan(cwd, &sources)
}

/// Make the patch's edits, and record what each file held before and after (what a
/// revert of the turn may undo). `waited`: a person was asked, so the files are read
/// again; when they changed while the question was open, the patch no longer is what the
/// person approved, so nothing is written. Returns the plan that was written.
#[allow(clippy::too_many_arguments)]
async fn apply_planned(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    patch: &apply_patch::Patch,
    cwd: &Path,
    targets: &BTreeMap<PathBuf, Target>,
    planned: apply_patch::PatchPlan,
    waited: bool,
) -> Result<apply_patch::PatchPlan, apply_patch::PatchError> {
    let plan = if waited {
        let now = plan_patch(sess, patch, cwd, targets).await?;
        if now.changes() != planned.changes() {
            return Err(apply_patch::PatchError::Mismatch {
                path: cwd.to_path_buf(),
                message: "the files changed while the patch waited for approval; nothing was written. Read them again and make a new patch.".to_string(),
            });
        }
        now
    } else {
        planned
    };
    let mut record = EditRecorder::new(sub_id, call_id);
    let written = write_edits(sess, &plan, targets, &mut record).await;
    // Also after a failed edit: the ones before it did change the files.
    if let Some(item) = record.finish() {
        sess.persist(&[item]).await;
    }
    written.map(|()| plan)
}

async fn write_edits(
    sess: &Session,
    plan: &apply_patch::PatchPlan,
    targets: &BTreeMap<PathBuf, Target>,
    record: &mut EditRecorder,
) -> Result<(), apply_patch::PatchError> {
    for edit in plan.edits() {
        let Some(target) = targets.get(&edit.absolute) else {
            return Err(edit.failed(std::io::Error::other(
                "it was not among the paths checked for the patch",
            )));
        };
        let before = sess.files.read_text(sess.thread_id, target).await;
        match &edit.action {
            apply_patch::EditAction::Write(contents) => {
                sess.files
                    .write_text(sess.thread_id, target, contents)
                    .await
                    .map_err(|source| edit.failed(source))?;
                record.push(
                    &edit.absolute,
                    target.resolved.clone(),
                    before,
                    Some(contents),
                );
            }
            // Removing is always local: the editor protocols have no delete.
            apply_patch::EditAction::Delete | apply_patch::EditAction::RemoveMoved => {
                let local = edit.clone();
                let local_target = target.clone();
                tokio::task::spawn_blocking(move || local.apply_to(&local_target))
                    .await
                    .map_err(|e| edit.failed(std::io::Error::other(e.to_string())))??;
                record.push(&edit.absolute, target.resolved.clone(), before, None);
            }
        }
    }
    Ok(())
}

/// The end of a call to an MCP server (a tool, or a resource list/read): one rule for the
/// end event, an interrupted call, and images the result carries.
struct McpCallEnd<'a> {
    call_id: &'a str,
    invocation: McpInvocation,
    started: Instant,
    /// "MCP tool call", "resource read": how an interrupted call is described.
    what: &'a str,
    /// Where images in the result came from, for the message that shows them.
    images_from: &'a str,
}

impl McpCallEnd<'_> {
    /// Emit the end event; then the result, or the outcome that stops the turn.
    async fn report(
        self,
        sess: &Arc<Session>,
        sub_id: &str,
        result: Result<serde_json::Value, String>,
        cancel: &CancellationToken,
    ) -> Result<Result<serde_json::Value, String>, ToolOutcome> {
        sess.emit(
            sub_id,
            EventMsg::McpToolCallEnd(McpToolCallEndEvent {
                call_id: self.call_id.to_string(),
                invocation: self.invocation,
                duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                result: result.clone(),
            }),
        )
        .await;
        if cancel.is_cancelled() {
            return Err(stopped_while_running(self.what, self.started));
        }
        if let Ok(value) = &result {
            attach_images(sess, self.images_from, value).await;
        }
        Ok(result)
    }
}

/// What the model is told about a call the interrupt cut short: it did run, for how long,
/// and its result is gone.
fn stopped_while_running(what: &str, started: Instant) -> ToolOutcome {
    ToolOutcome::Stop(format!(
        "interrupted: the turn was stopped while this {what} ran (after {} ms); its result, if any, was discarded",
        started.elapsed().as_millis()
    ))
}

/// Why nothing of this thread may leave its sandbox (an approved escalation, a retry
/// outside it, a patch where its commands cannot write), when an operator's ceiling says
/// so ([`crate::config::SandboxCeiling`]).
fn leaving_the_sandbox_refused(config: &crate::config::Config) -> Option<String> {
    let ceiling = config.sandbox_ceiling.as_ref()?;
    (!ceiling.allows_unsandboxed()).then(|| {
        format!(
            "nothing may run or write outside the sandbox under the ceiling `{}` that {} \
             sets, whatever is approved",
            ceiling.describe(),
            ceiling.source()
        )
    })
}

/// Why the patch may not write where it wants, in the words the model and the user see;
/// `None` when every target is writable in the sandbox.
fn unwritable_reason(
    sess: &Session,
    scope: &sandbox::WriteScope,
    targets: &BTreeMap<PathBuf, Target>,
) -> Option<String> {
    let first = targets
        .values()
        .find(|target| !scope.allows_resolved(&target.resolved))?;
    let shown = if first.resolved == first.path {
        first.path.display().to_string()
    } else {
        format!(
            "{} (which leads to {})",
            first.path.display(),
            first.resolved.display()
        )
    };
    Some(
        if sess.turn_sandbox_policy().mode() == SandboxMode::ReadOnly {
            "the sandbox is read-only (sandbox_mode = read-only), so no file may be written; use workspace-write to let the agent edit the workspace".to_string()
        } else if scope
            .roots()
            .iter()
            .any(|root| first.resolved.starts_with(&root.root))
        {
            format!(
                "{shown} is protected (it stays read-only inside the sandbox even under a writable root)"
            )
        } else {
            format!("{shown} lies outside the sandbox's writable roots")
        },
    )
}

/// A patch that will not be applied still shows in every front end (a begin and a failed
/// end with the reason), instead of vanishing.
async fn report_refused_patch(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    changes: FileChanges,
    reason: &str,
) {
    sess.emit(
        sub_id,
        EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            auto_approved: false,
            changes: changes.clone(),
        }),
    )
    .await;
    sess.emit(
        sub_id,
        EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            stdout: String::new(),
            stderr: reason.to_string(),
            success: false,
            changes,
        }),
    )
    .await;
}

fn resolve_dir(cwd: &Path, workdir: Option<&str>) -> PathBuf {
    match workdir {
        Some(dir) if !dir.is_empty() => cwd.join(dir),
        _ => cwd.to_path_buf(),
    }
}

fn common_parent(paths: &[PathBuf]) -> Option<PathBuf> {
    let mut iter = paths.iter().filter_map(|p| p.parent());
    let mut common = iter.next()?.to_path_buf();
    for parent in iter {
        while !parent.starts_with(&common) {
            common = common.parent()?.to_path_buf();
        }
    }
    Some(common)
}

/// Call a tool of one of the thread's MCP servers.
///
/// Whether to ask first is [`approval::assess_mcp`]'s call (the tool's approval mode, its
/// hints, the policy). A question is shown like a command,
/// `mcp:<server>/<tool> <arguments>`, and "approved for the session" covers later calls
/// of the same tool.
async fn handle_mcp(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    tool: McpToolInfo,
    arguments: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let Some(mcp) = &sess.mcp else {
        return ToolOutcome::Output(format!(
            "MCP tool `{}` is not available",
            tool.qualified_name
        ));
    };
    let arguments: Option<serde_json::Value> = if arguments.trim().is_empty() {
        None
    } else {
        match serde_json::from_str(arguments) {
            Ok(value) => Some(value),
            Err(err) => {
                return ToolOutcome::Output(format!(
                    "invalid arguments for `{}`: {err}. Send a JSON object that matches the tool's parameters schema.",
                    tool.qualified_name
                ));
            }
        }
    };
    let invocation = McpInvocation {
        server: tool.server.clone(),
        tool: tool.tool.clone(),
        arguments: arguments.clone(),
    };
    let session_key = format!("mcp:{}", tool.qualified_name);
    let approved_for_session = sess.is_approved_for_session(&session_key).await;
    match approval::assess_mcp(
        sess.config.approval_policy,
        tool.approval,
        tool.hints,
        approved_for_session,
    ) {
        McpAssessment::Run => {}
        McpAssessment::Reject(reason) => return ToolOutcome::Output(reason),
        McpAssessment::Ask(reason) => {
            let shown = vec![
                format!("mcp:{}/{}", tool.server, tool.tool),
                arguments
                    .as_ref()
                    .map(serde_json::Value::to_string)
                    .unwrap_or_default(),
            ];
            let reason = format!(
                "{reason} (tool `{}` of MCP server `{}`)",
                tool.tool, tool.server
            );
            let decision = ask_exec(
                sess,
                sub_id,
                call_id,
                &shown,
                &sess.config.cwd,
                reason,
                cancel,
            )
            .await;
            if let Err(stop) = settle(sess, decision, session_key, DECLINED_MCP_CALL).await {
                return stop;
            }
        }
    }

    sess.emit(
        sub_id,
        EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: call_id.to_string(),
            invocation: invocation.clone(),
        }),
    )
    .await;
    let started = Instant::now();
    let (progress, updates) = tokio::sync::watch::channel(None);
    // Boxed: the call's future is large, and the turn's future holds it otherwise.
    let call = Box::pin(mcp.call_tool(&tool.qualified_name, arguments, cancel, Some(progress)));
    let result = with_progress(sess, sub_id, call_id, call, updates)
        .await
        .map_err(|err| err.to_string());
    let label = format!("MCP tool {}", tool.qualified_name);
    let ended = McpCallEnd {
        call_id,
        invocation,
        started,
        what: "MCP tool call",
        images_from: &label,
    };
    let result = match ended.report(sess, sub_id, result, cancel).await {
        Ok(result) => result,
        Err(stop) => return stop,
    };
    let max_bytes = sess.config.tool_output_max_bytes;
    ToolOutcome::Output(match result {
        Ok(value) => cap_tool_result(mcp_result_text(&value), max_bytes),
        Err(message) => cap_tool_result(format!("MCP tool call failed: {message}"), max_bytes),
    })
}

/// Least time between two progress events of one MCP call: a server may report as often
/// as it likes, a client sees the newest line a few times a second.
const MCP_PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Runs `call`, passing on the progress its server reports (see [`MCP_PROGRESS_INTERVAL`])
/// until it ends; nothing is sent after it has ended.
async fn with_progress<T>(
    sess: &Session,
    sub_id: &str,
    call_id: &str,
    call: impl std::future::Future<Output = T>,
    mut updates: tokio::sync::watch::Receiver<Option<String>>,
) -> T {
    tokio::pin!(call);
    loop {
        tokio::select! {
            biased;
            result = &mut call => return result,
            Ok(()) = updates.changed() => {
                let line = updates.borrow_and_update().clone();
                if let Some(message) = line {
                    sess.emit(
                        sub_id,
                        EventMsg::McpToolCallProgress(McpToolCallProgressEvent {
                            call_id: call_id.to_string(),
                            message,
                        }),
                    )
                    .await;
                }
                tokio::select! {
                    biased;
                    result = &mut call => return result,
                    () = tokio::time::sleep(MCP_PROGRESS_INTERVAL) => {}
                }
            }
        }
    }
}

/// The model-facing text of an MCP `CallToolResult`: its text parts, other parts as JSON,
/// `structuredContent` when there is nothing else, and an `Error:` prefix for `isError`.
fn mcp_result_text(result: &serde_json::Value) -> String {
    let mut parts: Vec<String> = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(
            |item| match (item["type"].as_str(), item["text"].as_str()) {
                (Some("text"), Some(text)) => text.to_string(),
                (Some(kind @ ("image" | "audio")), _) => format!(
                    "[{kind} ({}), {} bytes; {}]",
                    item["mimeType"].as_str().unwrap_or("unknown type"),
                    item["data"].as_str().map_or(0, |d| d.len() / 4 * 3),
                    if kind == "image" {
                        "images follow as a message"
                    } else {
                        "not shown"
                    }
                ),
                (Some("resource"), _) => resource_part_text(&item["resource"]),
                (Some("resource_link"), _) => format!(
                    "[resource {}{}]",
                    item["uri"].as_str().unwrap_or_default(),
                    item["name"]
                        .as_str()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
                _ => item.to_string(),
            },
        )
        .collect();
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result["isError"].as_bool() == Some(true) {
        format!("Error: {text}")
    } else {
        text
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListResourcesArgs {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadResourceArgs {
    server: String,
    uri: String,
}

/// `list_mcp_resources` / `read_mcp_resource`. Reading data needs no approval under
/// any policy: nothing changes, like the read-only commands that run without asking.
/// Reported as MCP tool call events, with the tool's name as the tool.
async fn handle_resources(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let Some(mcp) = &sess.mcp else {
        return ToolOutcome::Output(format!("`{name}` is not available"));
    };
    let (server, work) = if name == LIST_RESOURCES_TOOL {
        match parse_args::<ListResourcesArgs>(name, arguments) {
            Ok(args) => (args.server.clone(), Ok(args)),
            Err(text) => return ToolOutcome::Output(text),
        }
    } else {
        match parse_args::<ReadResourceArgs>(name, arguments) {
            Ok(args) => (Some(args.server.clone()), Err(args)),
            Err(text) => return ToolOutcome::Output(text),
        }
    };
    let invocation = McpInvocation {
        server: server.clone().unwrap_or_else(|| "*".to_string()),
        tool: name.to_string(),
        arguments: serde_json::from_str(arguments).ok(),
    };
    sess.emit(
        sub_id,
        EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: call_id.to_string(),
            invocation: invocation.clone(),
        }),
    )
    .await;
    let started = Instant::now();
    let result = match work {
        Ok(list) => mcp
            .list_resources(list.server.as_deref(), list.cursor, cancel)
            .await
            .map(|lists| resource_list_value(&lists)),
        Err(read) => mcp.read_resource(&read.server, &read.uri, cancel).await,
    }
    .map_err(|err| err.to_string());
    let label = format!("MCP resource read ({name})");
    let ended = McpCallEnd {
        call_id,
        invocation,
        started,
        what: "resource read",
        images_from: &label,
    };
    let result = match ended.report(sess, sub_id, result, cancel).await {
        Ok(result) => result,
        Err(stop) => return stop,
    };
    let text = match result {
        Ok(value) if name == LIST_RESOURCES_TOOL => value.to_string(),
        Ok(value) => resource_contents_text(&value),
        Err(message) => format!("{name} failed: {message}"),
    };
    ToolOutcome::Output(cap_tool_result(text, sess.config.tool_output_max_bytes))
}

/// Every server's resources in one list, each tagged with its server; `nextCursor` per
/// server that has more.
fn resource_list_value(lists: &[(String, serde_json::Value)]) -> serde_json::Value {
    let mut resources = Vec::new();
    let mut cursors = serde_json::Map::new();
    for (server, list) in lists {
        for resource in list["resources"].as_array().into_iter().flatten() {
            let mut resource = resource.clone();
            if let Some(object) = resource.as_object_mut() {
                object.insert("server".to_string(), json!(server));
            }
            resources.push(resource);
        }
        if let Some(cursor) = list.get("nextCursor").filter(|c| !c.is_null()) {
            cursors.insert(server.clone(), cursor.clone());
        }
    }
    let mut value = json!({ "resources": resources });
    if !cursors.is_empty() {
        value["nextCursor"] = serde_json::Value::Object(cursors);
    }
    value
}

/// The model-facing text of a `ReadResourceResult`: text parts as they are, binary
/// parts as a one-line description (base64 would only fill the context).
fn resource_contents_text(result: &serde_json::Value) -> String {
    result["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(resource_part_text)
        .collect::<Vec<_>>()
        .join("\n")
}

fn resource_part_text(part: &serde_json::Value) -> String {
    let uri = part["uri"].as_str().unwrap_or_default();
    let mime = part["mimeType"]
        .as_str()
        .unwrap_or("application/octet-stream");
    match (part["text"].as_str(), part["blob"].as_str()) {
        (Some(text), _) => text.to_string(),
        (None, Some(blob)) if mime.starts_with("image/") => format!(
            "[image resource {uri} ({mime}), {} bytes; images follow as a message]",
            blob.len() / 4 * 3
        ),
        (None, Some(blob)) => format!(
            "[binary resource {uri} ({mime}), {} bytes; not shown]",
            blob.len() / 4 * 3
        ),
        (None, None) => part.to_string(),
    }
}

/// Images in an MCP result (`image` parts of a tool result, `image/*` blobs of a resource
/// or embedded resource), as `(mime type, base64 data)`.
fn result_images(result: &serde_json::Value) -> Vec<(String, String)> {
    let image =
        |mime: &serde_json::Value, data: &serde_json::Value| match (mime.as_str(), data.as_str()) {
            (Some(mime), Some(data)) if mime.starts_with("image/") => {
                Some((mime.to_string(), data.to_string()))
            }
            _ => None,
        };
    let parts = result["content"]
        .as_array()
        .into_iter()
        .chain(result["contents"].as_array())
        .flatten();
    parts
        .filter_map(|part| match part["type"].as_str() {
            Some("image") => image(&part["mimeType"], &part["data"]),
            Some("resource") => image(&part["resource"]["mimeType"], &part["resource"]["blob"]),
            _ => image(&part["mimeType"], &part["blob"]),
        })
        .collect()
}

/// Shows the model the images of an MCP result. A tool output is text only, so they follow
/// it as a user message, which the turn sends with its next model request.
async fn attach_images(sess: &Session, source: &str, result: &serde_json::Value) {
    let images = result_images(result);
    if images.is_empty() {
        return;
    }
    let mut content = vec![interpreter_protocol::ContentItem::InputText {
        text: format!("[images returned by {source}]"),
    }];
    content.extend(images.into_iter().map(|(mime, data)| {
        interpreter_protocol::ContentItem::InputImage {
            image_url: format!("data:{mime};base64,{data}"),
        }
    }));
    sess.pending_input
        .lock()
        .await
        .push(interpreter_protocol::ResponseItem::Message {
            role: interpreter_protocol::Role::User,
            content,
        });
}

#[cfg(test)]
mod tests {
    use super::cap_tool_result;

    #[test]
    fn a_short_result_is_kept_whole() {
        assert_eq!(cap_tool_result("short".into(), 10), "short");
    }

    #[test]
    fn a_long_result_keeps_head_and_tail_on_character_boundaries() {
        let text = format!("{}{}", "é".repeat(20), "z".repeat(20));
        let capped = cap_tool_result(text, 21);
        // 10 bytes of head are five `é`; 11 of tail are `z`s.
        assert_eq!(
            capped,
            format!(
                "{}\n[... 39 bytes cut from the middle of this tool result ...]\n{}",
                "é".repeat(5),
                "z".repeat(11)
            )
        );
    }
}
