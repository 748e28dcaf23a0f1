//! The tools offered to the model and what happens when it calls one.
//!
//! Every call produces exactly one output string the model can read — bad arguments, a
//! declined approval, or a failed command included — so a confused model can correct
//! itself and the history stays well formed. Only an interrupt (or an approval answered
//! with `abort`) stops the turn instead.
//!
//! One file per tool: [`command`] (the `shell` tool, and the one way a command of the
//! thread runs), [`patch`] (`apply_patch`), [`mcp`] (the MCP servers' tools),
//! [`resources`] (their resources). This file offers the tools, routes a call, and holds
//! what every tool's approval shares.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use interpreter_mcp_client::{McpToolInfo, ToolsLeftOut};
use interpreter_model_client::ToolSpec;
use interpreter_protocol::{
    ApplyPatchApprovalRequestEvent, EventMsg, ExecApprovalRequestEvent, ExecCommandBeginEvent,
    ExecCommandEndEvent, ExecCommandOutputDeltaEvent, ExecCommandSource, ExecCommandStatus,
    ExecOutputStream, FileChange, FileChanges, GoalStatus, HookEventName, McpInvocation,
    McpToolCallBeginEvent, McpToolCallEndEvent, McpToolCallProgressEvent, PatchApplyBeginEvent,
    PatchApplyEndEvent, ReviewDecision, SandboxMode, SandboxPolicy, TurnDiffEvent, UpdatePlanArgs,
};
use interpreter_telemetry::{metrics, spans};
use interpreter_tools::{apply_patch, safety, sandbox, shell};
use opentelemetry::trace::FutureExt as _;
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

mod command;
mod mcp;
mod patch;
mod resources;

use command::*;
pub use command::{SandboxHelperUnavailable, SandboxedCommand, sandboxed_command};
pub(crate) use command::{USER_SHELL_DEFAULT_TIMEOUT, run_user_shell_command};
use mcp::*;
use patch::*;
use resources::*;

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
///
/// The list depends on the thread, never on the turn: a tool that came and went with the
/// turn's mode would change every request's prefix and throw away the server's prompt
/// cache. So `apply_patch` is offered in read-only turns too (and refused there), and
/// `update_goal` stays once the thread has a goal, whatever its status.
pub(crate) fn tool_specs(sess: &Session) -> OfferedTools {
    let mut specs = builtin_tool_specs();
    if sess.goal.lock().is_ok_and(|slot| slot.has_goal()) {
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

/// One tool call under its `execute_tool` span (what the tool does below it, an
/// approval wait or an MCP request, are its children), counted by the tool calls metric.
pub(crate) async fn handle_call(
    sess: &Arc<Session>,
    sub_id: &str,
    name: &str,
    arguments: &str,
    call_id: &str,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let cx = spans::start_tool(name, call_id);
    let route = Route::of(sess, name);
    let label = route.metric_label(name);
    let shell = matches!(route, Route::Shell);
    let patch = matches!(route, Route::ApplyPatch);
    let (hook_name, aliases, mut tool_input) = crate::hook_runs::tool_for_hooks(
        name,
        arguments,
        match &route {
            Route::Mcp(tool) => Some((tool.server.as_str(), tool.tool.as_str())),
            _ => None,
        },
        shell,
        patch,
    );
    let mut targets: Vec<&str> = vec![hook_name.as_str()];
    targets.extend(aliases.iter().map(String::as_str));
    let before = crate::hook_runs::run_event(
        sess,
        sub_id,
        crate::hook_runs::Occurrence {
            event: HookEventName::PreToolUse,
            targets: &targets,
            fields: hook_fields(&hook_name, &tool_input, call_id, None),
            call_id: Some(call_id),
        },
    )
    .with_context(cx.clone())
    .await;
    queue_hook_context(sess, before.context);
    // A rewrite runs instead of the model's input; one the tool cannot take runs nothing
    // (never the input the hook meant to replace).
    let mut blocked_because = before.blocked;
    let mut rewritten = None;
    if blocked_because.is_none()
        && let Some(updated) = before.updated_input
    {
        match crate::hook_runs::arguments_from_hook_input(arguments, &updated, shell, patch) {
            Ok(new_arguments) => {
                tool_input = updated;
                rewritten = Some(new_arguments);
            }
            Err(why) => {
                blocked_because = Some(format!("a PreToolUse hook rewrote the call, but {why}"));
            }
        }
    }
    let arguments = rewritten.as_deref().unwrap_or(arguments);
    let blocked = blocked_because.is_some();
    let mut outcome = match blocked_because {
        Some(reason) => ToolOutcome::Output(blocked_by_hook(&hook_name, &tool_input, &reason)),
        None => {
            dispatch_call(sess, sub_id, name, arguments, call_id, route, cancel)
                .with_context(cx.clone())
                .await
        }
    };
    if let ToolOutcome::Output(output) = &mut outcome
        && !blocked
    {
        let after = crate::hook_runs::run_event(
            sess,
            sub_id,
            crate::hook_runs::Occurrence {
                event: HookEventName::PostToolUse,
                targets: &targets,
                fields: hook_fields(&hook_name, &tool_input, call_id, Some(output.as_str())),
                call_id: Some(call_id),
            },
        )
        .with_context(cx.clone())
        .await;
        queue_hook_context(sess, after.context);
        // What the model reads instead of the result: the hooks' feedback.
        if let Some(feedback) = after.blocked.or(after.stopped) {
            *output = format!("PostToolUse hook blocked the tool result: {feedback}");
        }
    }
    let (outcome_label, text) = match &outcome {
        ToolOutcome::Output(text) => ("completed", text),
        ToolOutcome::Stop(text) => ("stopped", text),
    };
    spans::end_tool(
        &cx,
        &spans::ToolEnd {
            outcome: outcome_label,
            arguments: Some(arguments),
            result: Some(text),
        },
    );
    metrics::instruments().record_tool_call(&label, outcome_label);
    outcome
}

/// A tool hook's own fields on stdin (`tool_response` after the call).
fn hook_fields(
    tool_name: &str,
    tool_input: &serde_json::Value,
    call_id: &str,
    response: Option<&str>,
) -> serde_json::Value {
    let mut fields = serde_json::json!({
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": call_id,
    });
    if let Some(response) = response {
        fields["tool_response"] = response.into();
    }
    fields
}

/// What the model reads for a call a PreToolUse hook blocked (Codex's wording).
fn blocked_by_hook(tool_name: &str, tool_input: &serde_json::Value, reason: &str) -> String {
    match tool_input
        .get("command")
        .and_then(serde_json::Value::as_str)
    {
        Some(command) if tool_name == "Bash" || tool_name == "apply_patch" => {
            format!("Command blocked by PreToolUse hook: {reason}. Command: {command}")
        }
        _ => format!("Tool call blocked by PreToolUse hook: {reason}. Tool: {tool_name}"),
    }
}

fn queue_hook_context(sess: &Session, context: Vec<String>) {
    if !context.is_empty()
        && let Ok(mut queued) = sess.hook_context.lock()
    {
        queued.extend(context);
    }
}

/// Which handler a call's name routes to: the one decision both the call and its metric
/// label are made from.
enum Route {
    Shell,
    ApplyPatch,
    UpdatePlan,
    UpdateGoal,
    UserInput,
    Permissions,
    Resources,
    Mcp(McpToolInfo),
    Unknown,
}

impl Route {
    fn of(sess: &Session, name: &str) -> Self {
        match name {
            SHELL_TOOL | "shell_command" | "exec_command" | "bash" => Self::Shell,
            APPLY_PATCH_TOOL => Self::ApplyPatch,
            UPDATE_PLAN_TOOL => Self::UpdatePlan,
            goal::UPDATE_GOAL_TOOL => Self::UpdateGoal,
            user_requests::REQUEST_USER_INPUT_TOOL => Self::UserInput,
            user_requests::REQUEST_PERMISSIONS_TOOL => Self::Permissions,
            LIST_RESOURCES_TOOL | READ_RESOURCE_TOOL if sess.mcp.is_some() => Self::Resources,
            other => match sess.mcp.as_ref().and_then(|mcp| {
                mcp.tools()
                    .into_iter()
                    .find(|tool| tool.qualified_name == other)
            }) {
                Some(tool) => Self::Mcp(tool),
                None => Self::Unknown,
            },
        }
    }

    /// The tool as a metric label: the built-in tools by name, every MCP tool as `mcp`
    /// (a server decides how many it lists), anything the model made up as `other`.
    fn metric_label(&self, name: &str) -> String {
        match self {
            Self::Mcp(_) => "mcp".to_string(),
            Self::Unknown => "other".to_string(),
            _ => name.to_string(),
        }
    }
}

async fn dispatch_call(
    sess: &Arc<Session>,
    sub_id: &str,
    name: &str,
    arguments: &str,
    call_id: &str,
    route: Route,
    cancel: &CancellationToken,
) -> ToolOutcome {
    match route {
        Route::Shell => match parse_args::<ShellArgs>(name, arguments) {
            Ok(args) => handle_shell(sess, sub_id, call_id, args, cancel).await,
            Err(text) => ToolOutcome::Output(text),
        },
        Route::ApplyPatch => match parse_args::<ApplyPatchArgs>(name, arguments) {
            Ok(args) => handle_patch(sess, sub_id, call_id, &args.input, cancel).await,
            Err(text) => ToolOutcome::Output(text),
        },
        Route::UpdatePlan => match parse_args::<UpdatePlanArgs>(name, arguments) {
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
        Route::UpdateGoal => match parse_args::<goal::UpdateGoalArgs>(name, arguments) {
            Ok(args) => handle_update_goal(sess, sub_id, args).await,
            Err(text) => ToolOutcome::Output(text),
        },
        Route::UserInput => match parse_args::<user_requests::UserInputArgs>(name, arguments) {
            Ok(args) => user_requests::handle_user_input(sess, sub_id, call_id, args, cancel).await,
            Err(text) => ToolOutcome::Output(text),
        },
        Route::Permissions => match parse_args::<user_requests::PermissionsArgs>(name, arguments) {
            Ok(args) => {
                user_requests::handle_permissions(sess, sub_id, call_id, args, cancel).await
            }
            Err(text) => ToolOutcome::Output(text),
        },
        Route::Resources => handle_resources(sess, sub_id, call_id, name, arguments, cancel).await,
        Route::Mcp(tool) => handle_mcp(sess, sub_id, call_id, tool, arguments, cancel).await,
        Route::Unknown => ToolOutcome::Output(format!(
            "unknown tool `{name}`; the available tools are `{SHELL_TOOL}`, `{APPLY_PATCH_TOOL}`, `{UPDATE_PLAN_TOOL}` and the `mcp__*` tools listed in this request"
        )),
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

/// What an approval is about, as `PermissionRequest` hooks are told: named by the code
/// that asks, never read back from the question shown to people (an MCP tool's question
/// is shown like a command, and must not reach hooks as `Bash`).
pub(super) enum ApprovalSubject {
    /// The request's command (`Bash`).
    Command,
    /// The request's patch (`apply_patch`, also matched as `Write` and `Edit`).
    Patch,
    /// An MCP tool, `mcp__SERVER__TOOL`, with the call's arguments.
    McpTool {
        name: String,
        arguments: serde_json::Value,
    },
}

/// `PermissionRequest` hooks, before anyone is asked: a deny wins, an allow approves,
/// no verdict asks as usual.
async fn permission_hooks(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    subject: ApprovalSubject,
    request: &EventMsg,
) -> Option<bool> {
    let (tool_name, aliases, tool_input): (String, &[&str], _) = match (subject, request) {
        (ApprovalSubject::Command, EventMsg::ExecApprovalRequest(request)) => (
            "Bash".to_string(),
            &[],
            serde_json::json!({
                "command": request.command.join(" "),
                "description": request.reason,
            }),
        ),
        (ApprovalSubject::Patch, EventMsg::ApplyPatchApprovalRequest(request)) => (
            "apply_patch".to_string(),
            &crate::hook_runs::PATCH_ALIASES,
            serde_json::json!({
                "files": request.changes.keys().map(|path| path.display().to_string()).collect::<Vec<_>>(),
                "description": request.reason,
            }),
        ),
        (ApprovalSubject::McpTool { name, arguments }, _) => (name, &[], arguments),
        // A subject that does not fit its request: no hook decides it.
        _ => return None,
    };
    let mut targets = vec![tool_name.as_str()];
    targets.extend(aliases);
    crate::hook_runs::run_event(
        sess,
        sub_id,
        crate::hook_runs::Occurrence {
            event: HookEventName::PermissionRequest,
            targets: &targets,
            fields: serde_json::json!({ "tool_name": tool_name, "tool_input": tool_input }),
            call_id: Some(call_id),
        },
    )
    .await
    .permission
}

/// Emit an approval request and wait for its answer, the approval deadline, or the turn's
/// cancellation — whichever comes first. Never waits forever. `PermissionRequest` hooks
/// answer first when they decide.
async fn wait_for_approval(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    subject: ApprovalSubject,
    request: EventMsg,
    cancel: &CancellationToken,
) -> ReviewDecision {
    let kind = match &request {
        EventMsg::ApplyPatchApprovalRequest(_) => "patch",
        _ => "command",
    };
    let cx = spans::start_internal(
        "approval",
        false,
        vec![
            opentelemetry::KeyValue::new("interpreter.approval.kind", kind),
            opentelemetry::KeyValue::new(
                interpreter_telemetry::genai::GEN_AI_TOOL_CALL_ID,
                call_id.to_string(),
            ),
        ],
    );
    let started = Instant::now();
    let decision = match permission_hooks(sess, sub_id, call_id, subject, &request).await {
        Some(true) => ReviewDecision::Approved,
        Some(false) => ReviewDecision::Denied,
        None => ask_and_wait(sess, sub_id, call_id, request, cancel).await,
    };
    let outcome = match decision {
        ReviewDecision::Approved | ReviewDecision::ApprovedForSession => "approved",
        ReviewDecision::Denied => "denied",
        ReviewDecision::TimedOut => "timed_out",
        ReviewDecision::Abort => "abort",
    };
    spans::end_internal(
        &cx,
        vec![opentelemetry::KeyValue::new(
            "interpreter.approval.outcome",
            outcome,
        )],
        None,
    );
    metrics::instruments().record_approval(kind, outcome, started.elapsed());
    decision
}

async fn ask_and_wait(
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
            sess.warn(
                sub_id,
                format!(
                    "approval request {call_id} got no answer within {}s; treated as declined",
                    timeout.as_secs()
                ),
            )
            .await;
            ReviewDecision::TimedOut
        }
        Err(NoAnswer::Cancelled) => ReviewDecision::Abort,
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
