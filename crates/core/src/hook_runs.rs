//! The one place the engine runs an event's hooks ([`run_event`]): all matching hooks at
//! once, each announced (`hook_started`, `hook_completed`) and traced (a `hook EVENT`
//! span), their decisions folded in configuration order (any block wins; for an approval
//! any deny wins). Which hooks exist and what one run means is [`crate::hooks`]'s.

use std::sync::Arc;

use interpreter_protocol::{
    EventMsg, HookEventName, HookRunEvent, HookRunStatus, HookRunSummary, HookScope,
};
use opentelemetry::KeyValue;
use opentelemetry::trace::FutureExt as _;
use serde_json::{Map, Value, json};

use crate::hooks::{HookHandler, config, event_config_name, run};
use crate::session::Session;

/// What the hooks of one event decided together.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    /// A hook blocked: the reason (the first in configuration order; for `PostToolUse`
    /// and `Stop`, every one, joined).
    pub blocked: Option<String>,
    /// `Stop`: each blocking hook's run id and reason, to continue the turn with.
    pub continue_with: Vec<(String, String)>,
    /// A hook asked to stop (`"continue": false`): the reason.
    pub stopped: Option<String>,
    /// Context for the model, in order.
    pub context: Vec<String>,
    /// `PermissionRequest`: any deny wins, else any allow; `None`: ask as usual.
    pub permission: Option<bool>,
    /// `PreToolUse`: the tool input to run instead, in the hooks' shape (the last hook in
    /// configuration order that rewrote it wins).
    pub updated_input: Option<Value>,
}

/// One occurrence of an event.
pub(crate) struct Occurrence<'a> {
    pub event: HookEventName,
    /// What matchers are tested against (tool name and aliases, session source,
    /// compaction trigger); empty for events without a matcher.
    pub targets: &'a [&'a str],
    /// The event's own fields (a JSON object), added to the common ones on stdin.
    pub fields: Value,
    /// The tool call it is about, for the run id.
    pub call_id: Option<&'a str>,
}

/// Runs the hooks `occurrence` matches and folds what they decided. Nothing runs (and
/// nothing is announced) when no hook matches.
pub(crate) async fn run_event(
    sess: &Arc<Session>,
    sub_id: &str,
    occurrence: Occurrence<'_>,
) -> Decision {
    let handlers: Vec<HookHandler> = sess
        .hooks
        .matching(occurrence.event, occurrence.targets)
        .into_iter()
        .cloned()
        .collect();
    if handlers.is_empty() {
        return Decision::default();
    }
    let input = input_of(sess, sub_id, &occurrence);
    let (background, foreground): (Vec<_>, Vec<_>) =
        handlers.into_iter().partition(|handler| handler.background);
    for handler in background {
        // Decides nothing and is not announced (as Codex's async hooks); bounded by its
        // own deadline.
        let input = input.clone();
        let cwd = sess.config.cwd.clone();
        let env = sess.config.env.clone();
        tokio::spawn(async move {
            let exit =
                run::run_command(&handler.command, &input, &cwd, &env, handler.timeout).await;
            if let Some(failure) = exit.failure {
                tracing::warn!(hook = %handler.key, "background hook: {failure}");
            }
        });
    }
    let started_at = chrono::Utc::now().timestamp();
    let mut summaries: Vec<HookRunSummary> = foreground
        .iter()
        .map(|handler| HookRunSummary {
            id: run_id(handler, occurrence.call_id),
            event_name: occurrence.event,
            source: handler.source,
            source_path: handler.source_path.clone(),
            display_order: handler.display_order,
            scope: match occurrence.event {
                HookEventName::SessionStart => HookScope::Thread,
                _ => HookScope::Turn,
            },
            status: HookRunStatus::Running,
            status_message: handler.status_message.clone(),
            started_at,
            completed_at: None,
            duration_ms: None,
            entries: Vec::new(),
        })
        .collect();
    for summary in &summaries {
        sess.emit(
            sub_id,
            EventMsg::HookStarted(hook_event(sub_id, summary.clone())),
        )
        .await;
    }
    let runs = foreground.iter().map(|handler| {
        let input = input.clone();
        let cwd = sess.config.cwd.clone();
        let env = &sess.config.env;
        let cx = interpreter_telemetry::spans::start_internal(
            format!("hook {}", event_config_name(occurrence.event)),
            false,
            vec![
                KeyValue::new(
                    "interpreter.hook.event",
                    event_config_name(occurrence.event),
                ),
                KeyValue::new("interpreter.hook.source", source_name(handler)),
            ],
        );
        let span = cx.clone();
        async move {
            let started = std::time::Instant::now();
            let exit = run::run_command(&handler.command, &input, &cwd, env, handler.timeout).await;
            let outcome = run::outcome(occurrence.event, &exit);
            interpreter_telemetry::spans::end_internal(
                &span,
                vec![KeyValue::new(
                    "interpreter.hook.status",
                    status_name(outcome.status),
                )],
                (outcome.status == HookRunStatus::Failed).then_some("hook_failed"),
            );
            (outcome, started.elapsed())
        }
        .with_context(cx)
    });
    let outcomes = futures::future::join_all(runs).await;
    let mut decision = Decision::default();
    let mut reasons = Vec::new();
    for (summary, (outcome, elapsed)) in summaries.iter_mut().zip(outcomes) {
        summary.status = outcome.status;
        summary.entries = outcome.entries;
        summary.completed_at = Some(chrono::Utc::now().timestamp());
        summary.duration_ms = Some(i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX));
        decision.context.extend(outcome.context);
        if outcome.updated_input.is_some() {
            decision.updated_input = outcome.updated_input;
        }
        match outcome.permission {
            Some(false) => decision.permission = Some(false),
            Some(true) if decision.permission.is_none() => decision.permission = Some(true),
            _ => {}
        }
        match outcome.status {
            HookRunStatus::Blocked => {
                if let Some(reason) = outcome.reason {
                    decision
                        .continue_with
                        .push((summary.id.clone(), reason.clone()));
                    reasons.push(reason);
                }
            }
            HookRunStatus::Stopped if decision.stopped.is_none() => {
                decision.stopped = outcome.reason;
            }
            _ => {}
        }
        sess.emit(
            sub_id,
            EventMsg::HookCompleted(hook_event(sub_id, summary.clone())),
        )
        .await;
    }
    if !reasons.is_empty() {
        decision.blocked = Some(match occurrence.event {
            HookEventName::PostToolUse | HookEventName::Stop => reasons.join("\n\n"),
            _ => reasons.swap_remove(0),
        });
    }
    decision
}

/// `<event-kebab>:<display order>:<source path>[:<call id>]`, as Codex names runs.
fn run_id(handler: &HookHandler, call_id: Option<&str>) -> String {
    let mut id = format!(
        "{}:{}:{}",
        config::event_snake_name(handler.event).replace('_', "-"),
        handler.display_order,
        handler.source_path.display()
    );
    if let Some(call_id) = call_id {
        id.push(':');
        id.push_str(call_id);
    }
    id
}

fn hook_event(sub_id: &str, run: HookRunSummary) -> HookRunEvent {
    HookRunEvent {
        turn_id: (!sub_id.is_empty()).then(|| sub_id.to_string()),
        run,
    }
}

/// What every event's input holds, then the event's own fields.
fn input_of(sess: &Session, sub_id: &str, occurrence: &Occurrence<'_>) -> Value {
    let mut input = Map::new();
    input.insert("session_id".into(), json!(sess.thread_id.to_string()));
    if occurrence.event != HookEventName::SessionStart && !sub_id.is_empty() {
        input.insert("turn_id".into(), json!(sub_id));
    }
    input.insert(
        "transcript_path".into(),
        json!(sess.rollout_path().map(|path| path.display().to_string())),
    );
    input.insert("cwd".into(), json!(sess.config.cwd.display().to_string()));
    input.insert(
        "hook_event_name".into(),
        json!(event_config_name(occurrence.event)),
    );
    input.insert("model".into(), json!(sess.config.model));
    if !matches!(
        occurrence.event,
        HookEventName::PreCompact | HookEventName::PostCompact
    ) {
        let mode = if sess.config.approval_policy == interpreter_protocol::AskForApproval::Never {
            "bypassPermissions"
        } else {
            "default"
        };
        input.insert("permission_mode".into(), json!(mode));
    }
    for (key, value) in occurrence.fields.as_object().into_iter().flatten() {
        input.insert(key.clone(), value.clone());
    }
    Value::Object(input)
}

fn source_name(handler: &HookHandler) -> &'static str {
    match handler.source {
        interpreter_protocol::HookSource::User => "user",
        interpreter_protocol::HookSource::Project => "project",
    }
}

fn status_name(status: HookRunStatus) -> &'static str {
    match status {
        HookRunStatus::Running => "running",
        HookRunStatus::Completed => "completed",
        HookRunStatus::Failed => "failed",
        HookRunStatus::Blocked => "blocked",
        HookRunStatus::Stopped => "stopped",
    }
}

/// How a tool call is named to hooks, with the names its matcher may also use, and the
/// input they see: the shell tool is `Bash` (`{"command": "..."}`), `apply_patch` is
/// itself (also matched as `Write` and `Edit`; `{"command": PATCH}`), an MCP tool is
/// `mcp__SERVER__TOOL`, anything else its own name with its parsed arguments.
pub(crate) fn tool_for_hooks(
    name: &str,
    arguments: &str,
    mcp: Option<(&str, &str)>,
    shell: bool,
    patch: bool,
) -> (String, Vec<String>, Value) {
    let parsed: Value = serde_json::from_str(arguments).unwrap_or_else(|_| {
        if arguments.trim().is_empty() {
            json!({})
        } else {
            Value::String(arguments.to_string())
        }
    });
    if shell {
        let command = match parsed.get("command") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        };
        return ("Bash".into(), Vec::new(), json!({"command": command}));
    }
    if patch {
        let text = parsed
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or(arguments)
            .to_string();
        return (
            "apply_patch".into(),
            PATCH_ALIASES.map(String::from).to_vec(),
            json!({"command": text}),
        );
    }
    if let Some((server, tool)) = mcp {
        return (mcp_tool_name(server, tool), Vec::new(), parsed);
    }
    (name.to_string(), Vec::new(), parsed)
}

/// The other names `apply_patch` is matched by, as in Codex.
pub(crate) const PATCH_ALIASES: [&str; 2] = ["Write", "Edit"];

/// An MCP tool as hooks name it, `mcp__SERVER__TOOL`.
pub(crate) fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// The tool's arguments for an input a `PreToolUse` hook rewrote, the inverse of
/// [`tool_for_hooks`]: Bash's `command` replaces the shell call's (its other arguments,
/// such as `workdir`, stay), `apply_patch`'s `command` is the patch, and any other tool
/// takes the object as its arguments. `Err` says why the input cannot be the tool's.
pub(crate) fn arguments_from_hook_input(
    arguments: &str,
    updated: &Value,
    shell: bool,
    patch: bool,
) -> Result<String, String> {
    let command = || {
        updated
            .get("command")
            .and_then(Value::as_str)
            .ok_or_else(|| "its `updatedInput` has no `command` string".to_string())
    };
    let rewritten = if shell {
        let mut args = match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(args)) => args,
            _ => Map::new(),
        };
        args.insert("command".into(), Value::String(command()?.to_string()));
        Value::Object(args)
    } else if patch {
        json!({ "input": command()? })
    } else {
        updated.clone()
    };
    Ok(rewritten.to_string())
}

/// The text of a message that continues a turn a `Stop` hook blocked: one fragment per
/// hook, as Codex records it.
pub(crate) fn stop_prompt(continue_with: &[(String, String)]) -> String {
    continue_with
        .iter()
        .map(|(run_id, reason)| {
            format!(
                "<hook_prompt hook_run_id=\"{}\">{}</hook_prompt>",
                escape(run_id),
                escape(reason)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_rewritten_input_becomes_the_tools_arguments() {
        let shell = r#"{"command": "rm -rf build", "workdir": "sub"}"#;
        let (_, _, input) = tool_for_hooks("shell", shell, None, true, false);
        assert_eq!(input, json!({"command": "rm -rf build"}));
        let args =
            arguments_from_hook_input(shell, &json!({"command": "rm -rf ./build"}), true, false);
        assert_eq!(
            serde_json::from_str::<Value>(&args.unwrap_or_default()).ok(),
            Some(json!({"command": "rm -rf ./build", "workdir": "sub"}))
        );
        let patch =
            arguments_from_hook_input("{}", &json!({"command": "*** Begin Patch"}), false, true);
        assert_eq!(patch.as_deref(), Ok(r#"{"input":"*** Begin Patch"}"#));
        let mcp = arguments_from_hook_input(r#"{"q": 1}"#, &json!({"q": 2}), false, false);
        assert_eq!(mcp.as_deref(), Ok(r#"{"q":2}"#));
        assert!(arguments_from_hook_input(shell, &json!({"cmd": "ls"}), true, false).is_err());
        assert!(arguments_from_hook_input("{}", &json!({"command": 1}), false, true).is_err());
    }
}
