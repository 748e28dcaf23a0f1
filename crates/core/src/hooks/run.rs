//! Running one command hook and reading what it said.
//!
//! The hook runs as `bash -c COMMAND` in the thread's working directory with the agent's
//! environment, outside the sandbox (it is the user's program, configured by the user or
//! trusted by them), in its own process group: on its deadline the whole group is killed.
//! The event goes to its stdin as one JSON object; stdout and stderr are read up to a
//! bound each.
//!
//! What the exit status and output mean follows Codex: exit 0 with JSON on stdout decides
//! (`decision`, `hookSpecificOutput`, `continue`); exit 0 with plain text adds context for
//! `SessionStart` and `UserPromptSubmit`; exit 2 blocks with stderr as the reason where
//! the event can be blocked; anything else fails the hook, and a failed hook decides
//! nothing (the action goes on).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use interpreter_protocol::{HookEventName, HookOutputEntry, HookOutputEntryKind, HookRunStatus};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read of each of a hook's stdout and stderr.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// Characters of context one hook may add; more is cut with a note.
const MAX_CONTEXT_CHARS: usize = 16 * 1024;

/// How the process ended.
#[derive(Debug, Default)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Why it did not run to an exit status (spawn failure, deadline).
    pub failure: Option<String>,
}

/// Runs `command` with `input` on its stdin, within `timeout`.
pub(crate) async fn run_command(
    command: &str,
    input: &Value,
    cwd: &Path,
    env: &std::collections::HashMap<String, String>,
    timeout: Duration,
) -> Exit {
    let mut child = match tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return Exit {
                failure: Some(format!("the hook could not be started: {error}")),
                ..Exit::default()
            };
        }
    };
    let pid = child.id();
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let text = input.to_string();
    let work = async {
        let write = async {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input is not an error.
                let _ = stdin.write_all(text.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
        };
        let (_, out, err, status) = tokio::join!(
            write,
            read_bounded(stdout),
            read_bounded(stderr),
            child.wait()
        );
        (out, err, status)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => Exit {
            code: status
                .as_ref()
                .ok()
                .and_then(std::process::ExitStatus::code),
            failure: match status {
                Ok(status) if status.code().is_none() => {
                    Some("the hook was killed by a signal".to_string())
                }
                Ok(_) => None,
                Err(error) => Some(format!("waiting for the hook failed: {error}")),
            },
            stdout,
            stderr,
        },
        Err(_) => {
            if let Some(pid) = pid.and_then(|pid| rustix::process::Pid::from_raw(pid as i32)) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            Exit {
                failure: Some(format!("hook timed out after {}s", timeout.as_secs())),
                ..Exit::default()
            }
        }
    }
}

async fn read_bounded<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> String {
    let Some(mut reader) = reader else {
        return String::new();
    };
    let mut kept = Vec::new();
    // On the heap: two of these live in one future, which would otherwise be large.
    let mut buffer = vec![0u8; 8192];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // Past the bound the rest is read and dropped, so the hook never blocks
                // on a full pipe.
                let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// What one hook run decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub status: HookRunStatus,
    pub entries: Vec<HookOutputEntry>,
    /// Context for the model.
    pub context: Vec<String>,
    /// Why it blocked (`Blocked`), or what to continue with (`Stop` event).
    pub reason: Option<String>,
    /// `PermissionRequest`: `Some(true)` allow, `Some(false)` deny.
    pub permission: Option<bool>,
    /// `PreToolUse`: the tool input to run instead (`permissionDecision: "allow"` with
    /// `updatedInput`), in the hook's own shape (`{"command": …}` for Bash).
    pub updated_input: Option<Value>,
}

impl Outcome {
    fn new(status: HookRunStatus) -> Self {
        Self {
            status,
            entries: Vec::new(),
            context: Vec::new(),
            reason: None,
            permission: None,
            updated_input: None,
        }
    }

    fn failed(text: impl Into<String>) -> Self {
        let mut outcome = Self::new(HookRunStatus::Failed);
        outcome.entry(HookOutputEntryKind::Error, text);
        outcome
    }

    fn entry(&mut self, kind: HookOutputEntryKind, text: impl Into<String>) {
        self.entries.push(HookOutputEntry {
            kind,
            text: text.into(),
        });
    }

    fn block(&mut self, reason: String) {
        self.status = HookRunStatus::Blocked;
        self.entry(HookOutputEntryKind::Feedback, reason.clone());
        self.reason = Some(reason);
    }

    fn add_context(&mut self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let kept: String = if text.chars().count() > MAX_CONTEXT_CHARS {
            let cut: String = text.chars().take(MAX_CONTEXT_CHARS).collect();
            format!("{cut}\n[hook context cut at {MAX_CONTEXT_CHARS} characters]")
        } else {
            text.to_string()
        };
        self.entry(HookOutputEntryKind::Context, kept.clone());
        self.context.push(kept);
    }
}

/// Whether the event can be blocked by exit 2 or `decision: "block"`.
fn blockable(event: HookEventName) -> bool {
    matches!(
        event,
        HookEventName::UserPromptSubmit
            | HookEventName::PreToolUse
            | HookEventName::PostToolUse
            | HookEventName::Stop
            | HookEventName::PermissionRequest
    )
}

/// Reads an exit for `event`.
pub(crate) fn outcome(event: HookEventName, exit: &Exit) -> Outcome {
    if let Some(failure) = &exit.failure {
        return Outcome::failed(failure.clone());
    }
    match exit.code {
        Some(0) => from_stdout(event, exit.stdout.trim()),
        Some(2) if blockable(event) => {
            let reason = exit.stderr.trim();
            if reason.is_empty() {
                return Outcome::failed(
                    "the hook exited with 2 (block) but gave no reason on stderr",
                );
            }
            let mut outcome = Outcome::new(HookRunStatus::Completed);
            if event == HookEventName::PermissionRequest {
                outcome.permission = Some(false);
            }
            outcome.block(reason.to_string());
            outcome
        }
        Some(code) => {
            let stderr = exit.stderr.trim();
            let mut text = format!("hook exited with code {code}");
            if !stderr.is_empty() {
                let head: String = stderr.chars().take(2000).collect();
                text.push_str(&format!(": {head}"));
            }
            Outcome::failed(text)
        }
        None => Outcome::failed("hook exited without a status code"),
    }
}

fn from_stdout(event: HookEventName, stdout: &str) -> Outcome {
    let mut outcome = Outcome::new(HookRunStatus::Completed);
    if stdout.is_empty() {
        return outcome;
    }
    if !stdout.starts_with('{') {
        match event {
            HookEventName::SessionStart | HookEventName::UserPromptSubmit => {
                outcome.add_context(stdout);
            }
            HookEventName::Stop => {
                return Outcome::failed(
                    "invalid stop hook output: a Stop hook answers with JSON or nothing",
                );
            }
            _ => {}
        }
        return outcome;
    }
    let Ok(Value::Object(output)) = serde_json::from_str::<Value>(stdout) else {
        return Outcome::failed("hook returned invalid JSON output");
    };
    match from_json(event, &output, outcome) {
        Ok(outcome) => outcome,
        Err(why) => Outcome::failed(format!("hook returned unusable JSON output: {why}")),
    }
}

const UNIVERSAL_FIELDS: [&str; 4] = ["continue", "stopReason", "suppressOutput", "systemMessage"];

fn from_json(
    event: HookEventName,
    output: &serde_json::Map<String, Value>,
    mut outcome: Outcome,
) -> Result<Outcome, String> {
    for key in output.keys() {
        let known = UNIVERSAL_FIELDS.contains(&key.as_str())
            || matches!(key.as_str(), "decision" | "reason" | "hookSpecificOutput");
        if !known {
            return Err(format!("unknown field `{key}`"));
        }
    }
    let string = |key: &str| -> Result<Option<String>, String> {
        match output.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("`{key}` must be a string")),
        }
    };
    if let Some(message) = string("systemMessage")? {
        outcome.entry(HookOutputEntryKind::Warning, message);
    }
    let stop = match output.get("continue") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(go_on)) => !go_on,
        Some(_) => return Err("`continue` must be a boolean".into()),
    };
    if stop
        && matches!(
            event,
            HookEventName::PreToolUse | HookEventName::PermissionRequest
        )
    {
        return Err(format!(
            "`continue: false` is not supported for {}",
            super::config::event_config_name(event)
        ));
    }
    let reason = string("reason")?.filter(|r| !r.trim().is_empty());
    match string("decision")?.as_deref() {
        None => {}
        Some("block") if blockable(event) && event != HookEventName::PermissionRequest => {
            let reason = reason.ok_or("`decision: \"block\"` needs a non-empty `reason`")?;
            outcome.block(reason);
        }
        Some(other) => return Err(format!("`decision: \"{other}\"` is not supported here")),
    }
    if let Some(specific) = output.get("hookSpecificOutput") {
        let Value::Object(specific) = specific else {
            return Err("`hookSpecificOutput` must be an object".into());
        };
        specific_output(event, specific, &mut outcome)?;
    }
    if stop {
        outcome.status = HookRunStatus::Stopped;
        let why = string("stopReason")?.unwrap_or_else(|| {
            format!(
                "{} hook stopped the turn",
                super::config::event_config_name(event)
            )
        });
        outcome.entry(HookOutputEntryKind::Stop, why.clone());
        outcome.reason = Some(why);
    }
    Ok(outcome)
}

fn specific_output(
    event: HookEventName,
    specific: &serde_json::Map<String, Value>,
    outcome: &mut Outcome,
) -> Result<(), String> {
    if specific
        .get("hookEventName")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err("`hookSpecificOutput` needs `hookEventName`".into());
    }
    if let Some(context) = specific.get("additionalContext") {
        let Some(context) = context.as_str() else {
            return Err("`additionalContext` must be a string".into());
        };
        if matches!(
            event,
            HookEventName::SessionStart
                | HookEventName::UserPromptSubmit
                | HookEventName::PreToolUse
                | HookEventName::PostToolUse
        ) {
            outcome.add_context(context);
        }
    }
    match event {
        HookEventName::PreToolUse => {
            let reason = specific
                .get("permissionDecisionReason")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty());
            let updated = specific.get("updatedInput").filter(|v| !v.is_null());
            let decision = specific.get("permissionDecision").and_then(Value::as_str);
            if updated.is_some() && decision != Some("allow") {
                return Err("`updatedInput` needs `permissionDecision: \"allow\"`".into());
            }
            match decision {
                None if reason.is_some() => {
                    return Err("`permissionDecisionReason` without a `permissionDecision`".into());
                }
                None => {}
                Some("deny") => {
                    let reason = reason.ok_or("`permissionDecision: \"deny\"` needs a reason")?;
                    outcome.block(reason.to_string());
                }
                // A rewrite, not an approval: the new input is asked about and sandboxed
                // as the approval policy says, like any call.
                Some("allow") => match updated {
                    Some(input @ Value::Object(_)) => outcome.updated_input = Some(input.clone()),
                    Some(_) => return Err("`updatedInput` must be an object".into()),
                    None => {
                        return Err(
                            "`permissionDecision: \"allow\"` needs `updatedInput` (the approval policy decides whether a call runs)".into(),
                        );
                    }
                },
                Some(other) => {
                    return Err(format!(
                        "`permissionDecision: \"{other}\"` is not supported (\"deny\", or \"allow\" with `updatedInput`); the approval policy decides the rest"
                    ));
                }
            }
        }
        HookEventName::PermissionRequest => {
            if let Some(decision) = specific.get("decision") {
                for field in ["updatedInput", "updatedPermissions"] {
                    if decision.get(field).is_some_and(|v| !v.is_null()) {
                        return Err(format!("`decision.{field}` is not supported"));
                    }
                }
                if decision.get("interrupt") == Some(&Value::Bool(true)) {
                    return Err("`decision.interrupt` is not supported".into());
                }
                match decision.get("behavior").and_then(Value::as_str) {
                    Some("allow") => outcome.permission = Some(true),
                    Some("deny") => {
                        let message = decision
                            .get("message")
                            .and_then(Value::as_str)
                            .filter(|m| !m.trim().is_empty())
                            .unwrap_or("denied by a PermissionRequest hook")
                            .to_string();
                        outcome.permission = Some(false);
                        outcome.block(message);
                    }
                    _ => return Err("`decision.behavior` must be \"allow\" or \"deny\"".into()),
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32, stdout: &str, stderr: &str) -> Exit {
        Exit {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            failure: None,
        }
    }

    #[test]
    fn exit_codes_follow_codex() {
        let blocked = outcome(HookEventName::PreToolUse, &exit(2, "", "no rm -rf\n"));
        assert_eq!(blocked.status, HookRunStatus::Blocked);
        assert_eq!(blocked.reason.as_deref(), Some("no rm -rf"));
        assert_eq!(
            outcome(HookEventName::PreToolUse, &exit(2, "", "")).status,
            HookRunStatus::Failed
        );
        assert_eq!(
            outcome(HookEventName::SessionStart, &exit(2, "", "x")).status,
            HookRunStatus::Failed
        );
        let failed = outcome(HookEventName::PreToolUse, &exit(1, "", "boom"));
        assert_eq!(failed.status, HookRunStatus::Failed);
        assert!(failed.entries[0].text.contains("code 1: boom"));
        let context = outcome(HookEventName::SessionStart, &exit(0, "branch: main\n", ""));
        assert_eq!(context.context, vec!["branch: main"]);
        assert!(
            outcome(HookEventName::PreToolUse, &exit(0, "plain", ""))
                .context
                .is_empty()
        );
        assert_eq!(
            outcome(HookEventName::Stop, &exit(0, "plain", "")).status,
            HookRunStatus::Failed
        );
        let denied = outcome(HookEventName::PermissionRequest, &exit(2, "", "not here"));
        assert_eq!(denied.permission, Some(false));
    }

    #[test]
    fn json_decisions_and_what_fails_closed_to_no_decision() {
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"use the wrapper"}}"#;
        let got = outcome(HookEventName::PreToolUse, &exit(0, deny, ""));
        assert_eq!(got.status, HookRunStatus::Blocked);
        assert_eq!(got.reason.as_deref(), Some("use the wrapper"));
        let ask =
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"}}"#;
        assert_eq!(
            outcome(HookEventName::PreToolUse, &exit(0, ask, "")).status,
            HookRunStatus::Failed
        );
        let unknown = r#"{"whatever":1}"#;
        assert_eq!(
            outcome(HookEventName::PostToolUse, &exit(0, unknown, "")).status,
            HookRunStatus::Failed
        );
        let block = r#"{"decision":"block","reason":"tests first"}"#;
        let got = outcome(HookEventName::Stop, &exit(0, block, ""));
        assert_eq!(
            (got.status, got.reason.as_deref()),
            (HookRunStatus::Blocked, Some("tests first"))
        );
        let stop = r#"{"continue":false,"stopReason":"budget","systemMessage":"note"}"#;
        let got = outcome(HookEventName::UserPromptSubmit, &exit(0, stop, ""));
        assert_eq!(got.status, HookRunStatus::Stopped);
        assert_eq!(got.entries[0].kind, HookOutputEntryKind::Warning);
        let allow = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;
        assert_eq!(
            outcome(HookEventName::PermissionRequest, &exit(0, allow, "")).permission,
            Some(true)
        );
        let context = r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint ok"}}"#;
        assert_eq!(
            outcome(HookEventName::PostToolUse, &exit(0, context, "")).context,
            vec!["lint ok"]
        );
        assert_eq!(
            outcome(HookEventName::PreToolUse, &exit(0, "{broken", "")).status,
            HookRunStatus::Failed
        );
    }

    #[test]
    fn pre_tool_use_rewrites_only_with_allow_and_an_object() {
        let rewrite = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}"#;
        let got = outcome(HookEventName::PreToolUse, &exit(0, rewrite, ""));
        assert_eq!(got.status, HookRunStatus::Completed);
        assert_eq!(
            got.updated_input,
            Some(serde_json::json!({"command": "ls -la"}))
        );
        for refused in [
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"ls"}}}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no","updatedInput":{"command":"ls"}}}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":"ls"}}"#,
        ] {
            let got = outcome(HookEventName::PreToolUse, &exit(0, refused, ""));
            assert_eq!(got.status, HookRunStatus::Failed, "{refused}");
            assert_eq!(got.updated_input, None, "{refused}");
        }
    }

    #[tokio::test]
    async fn the_command_gets_the_event_and_its_deadline() {
        let env: std::collections::HashMap<String, String> = [(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        )]
        .into();
        let cwd = std::env::temp_dir();
        let input = serde_json::json!({"hook_event_name": "PreToolUse"});
        let got = run_command(
            "cat; echo oops >&2; exit 3",
            &input,
            &cwd,
            &env,
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(got.code, Some(3));
        assert_eq!(got.stdout, input.to_string());
        assert_eq!(got.stderr, "oops\n");
        let slow = run_command("sleep 30", &input, &cwd, &env, Duration::from_secs(1)).await;
        assert!(slow.failure.unwrap().contains("timed out after 1s"));
    }
}
