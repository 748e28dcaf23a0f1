//! The two tools: their definitions (`tools/list`), their arguments, and how a call's
//! arguments become a session [`Config`].
//!
//! Names and input schemas match the reference `codex` / `codex-reply` tools exactly, so
//! existing client configurations keep working; only the descriptions are ours.

use std::path::PathBuf;

use interpreter_core::config::{Config, ConfigInputs, load_config};
use interpreter_protocol::{AskForApproval, SandboxMode, ThreadId};
use serde::Deserialize;
use serde_json::{Value, json};

use interpreter_mcp_client::nesting::child_depth_marker;

pub(crate) const CODEX_TOOL: &str = "codex";
pub(crate) const CODEX_REPLY_TOOL: &str = "codex-reply";
pub(crate) const CODEX_STATUS_TOOL: &str = "codex-status";
pub(crate) const CODEX_WAIT_TOOL: &str = "codex-wait";

/// Longest `codex-wait` we hold a request open for; clients with shorter timeouts pass less.
pub(crate) const MAX_WAIT_SEC: u64 = 300;
/// `codex-wait` without `timeoutSec`.
pub(crate) const DEFAULT_WAIT_SEC: u64 = 30;

const CODEX_DESCRIPTION: &str = "Run the interpreter coding agent on a prompt. It reads and edits \
files and runs shell commands in `cwd`, then returns its final message. The result carries the \
thread's threadId (in structuredContent and in a JSON text block); pass it to the reply tool \
(`codex-reply`, which some hosts show as `codex_reply`) to continue the same thread (threads \
are saved on disk and survive server restarts). Long turns send \
notifications/progress when the call carries _meta.progressToken, so keep the call open. \
Command and patch approvals are asked through elicitation when the client supports it; \
otherwise the server's configured fallback applies (default: deny, reported in the result). \
Cancelling the request interrupts the turn and kills its commands. With `background: true` it \
returns at once with status \"running\"; follow the thread with the status and wait tools \
(`codex-status`/`codex_status`, `codex-wait`/`codex_wait`).";

const CODEX_REPLY_DESCRIPTION: &str = "Continue a thread started by the `codex` tool: give the \
threadId its result carried and the next prompt. Returns {threadId, content} like `codex`. Works after a server restart \
(the thread is loaded from disk). If the thread is still running a turn, this waits for it.";

const CODEX_STATUS_DESCRIPTION: &str = "Report a thread's state without waiting: status \
(running, waiting_for_approval, completed, failed, interrupted, idle), the current step (e.g. \
the command running) and the latest agent message.";

const CODEX_WAIT_DESCRIPTION: &str = "Wait for a thread's running turn to finish, at most \
timeoutSec seconds (default 30, max 300). Returns the final result like `codex`, or status \
\"running\" with the latest message if the turn is still going. Approvals the turn needs are \
asked on this call.";

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "threadId": {"type": "string"},
            "content": {"type": "string"},
            "status": {
                "type": "string",
                "enum": ["running", "waiting_for_approval", "completed", "failed", "interrupted", "idle"]
            }
        },
        "required": ["threadId", "content"]
    })
}

/// Every tool, in the order `tools/list` shows them (deterministic, the same on every
/// connection).
pub(crate) fn tool_definitions() -> Vec<Value> {
    vec![
        codex_tool(),
        codex_reply_tool(),
        codex_status_tool(),
        codex_wait_tool(),
    ]
}

/// The `Mcp-Param-*` name 2026-07-28 clients send a call's `threadId` under
/// (`x-mcp-header`), so a load balancer can route every call about one thread alike
/// without reading bodies.
pub(crate) const THREAD_ID_HEADER: &str = "ThreadId";

/// [`tool_definitions`] as 2026-07-28 clients see them: `threadId` marked for the
/// [`THREAD_ID_HEADER`] routing header. Legacy-era clients get the plain schemas: they
/// send no such headers, and some hosts pass schemas on to model APIs that refuse
/// keywords they do not know.
pub(crate) fn routed_tool_definitions() -> Vec<Value> {
    let mut tools = tool_definitions();
    for tool in &mut tools {
        if let Some(thread_id) = tool
            .pointer_mut("/inputSchema/properties/threadId")
            .and_then(Value::as_object_mut)
        {
            thread_id.insert("x-mcp-header".to_string(), json!(THREAD_ID_HEADER));
        }
    }
    tools
}

fn codex_status_tool() -> Value {
    json!({
        "name": CODEX_STATUS_TOOL,
        "title": "Interpreter Status",
        "description": CODEX_STATUS_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "required": ["threadId"],
            "properties": {
                "threadId": {"type": "string", "description": "The thread id returned by `codex`."}
            }
        },
        "outputSchema": output_schema(),
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

fn codex_wait_tool() -> Value {
    json!({
        "name": CODEX_WAIT_TOOL,
        "title": "Interpreter Wait",
        "description": CODEX_WAIT_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "required": ["threadId"],
            "properties": {
                "threadId": {"type": "string", "description": "The thread id returned by `codex`."},
                "timeoutSec": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SEC, "description": "How long to wait, in seconds (default 30)."}
            }
        },
        "outputSchema": output_schema(),
        // It only waits and reads: the turn it follows was started by another call, and
        // the approvals it relays are decided by the user, so hosts may run it unasked.
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

/// `codex` and `codex-reply` run commands and edit files, and may reach the network.
fn agent_annotations() -> Value {
    json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
}

fn codex_tool() -> Value {
    json!({
        "name": CODEX_TOOL,
        "title": "Interpreter",
        "description": CODEX_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "additionalProperties": false,
            "required": ["prompt"],
            "properties": {
                "prompt": {"type": "string", "description": "The initial user prompt that starts the thread."},
                "model": {"type": "string", "description": "Override the model name for this thread."},
                "cwd": {"type": "string", "description": "Working directory of the thread. A relative path is resolved against the server's working directory."},
                "approval-policy": {
                    "type": "string",
                    "enum": ["untrusted", "on-request", "never"],
                    "description": "When the agent must ask before running commands: `untrusted`, `on-request`, `never`."
                },
                "sandbox": {
                    "type": "string",
                    "enum": ["read-only", "workspace-write", "danger-full-access"],
                    "description": "Sandbox mode: `read-only`, `workspace-write`, or `danger-full-access`."
                },
                "config": {
                    "type": "object",
                    "additionalProperties": true,
                    "description": "Config settings (dotted keys allowed) overriding config.toml, like `-c key=value`."
                },
                "base-instructions": {"type": "string", "description": "Instructions that replace the built-in system prompt."},
                "developer-instructions": {"type": "string", "description": "Instructions added as a developer message."},
                "compact-prompt": {"type": "string", "description": "Prompt used when compacting the conversation."},
                "background": {"type": "boolean", "description": "Return at once with status \"running\" instead of waiting for the turn; follow it with `codex-status` / `codex-wait`."}
            }
        },
        "outputSchema": output_schema(),
        "annotations": agent_annotations()
    })
}

fn codex_reply_tool() -> Value {
    json!({
        "name": CODEX_REPLY_TOOL,
        "title": "Interpreter Reply",
        "description": CODEX_REPLY_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "required": ["prompt"],
            "properties": {
                "threadId": {"type": "string", "description": "The thread id returned by `codex` (required; optional in the schema only for clients that still send conversationId)."},
                "conversationId": {"type": "string", "description": "DEPRECATED: use threadId instead."},
                "prompt": {"type": "string", "description": "The next user prompt in the thread."}
            }
        },
        "outputSchema": output_schema(),
        "annotations": agent_annotations()
    })
}

/// Arguments of `codex` that the reference once took and we refuse by name, with why.
const RETIRED_ARGUMENTS: &[(&str, &str)] = &[(
    "profile",
    "it is not a tool argument; start the server with `--profile` instead",
)];

/// Check a call's argument names before they are decoded: an argument that looks like
/// one of the tool's own (another spelling, a typo, a retired name) is an error that names
/// the right one, and any other unknown argument is dropped.
///
/// Hosts add bookkeeping arguments of their own to every tool (Gemini CLI adds and sends
/// `wait_for_previous`); failing the call on them would make the tools unusable there,
/// while a near miss of a real argument must still fail loudly, since dropping it would
/// silently run with a setting the caller did not ask for.
pub(crate) fn screen_arguments(
    tool: &str,
    arguments: &mut serde_json::Map<String, Value>,
) -> Result<(), String> {
    let Some(definition) = tool_definitions()
        .into_iter()
        .find(|definition| definition["name"] == tool)
    else {
        return Ok(());
    };
    let known: Vec<String> = definition["inputSchema"]["properties"]
        .as_object()
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default();
    let unknown: Vec<String> = arguments
        .keys()
        .filter(|key| !known.contains(key))
        .cloned()
        .collect();
    for key in unknown {
        if let Some((_, why)) = RETIRED_ARGUMENTS.iter().find(|(name, _)| *name == key) {
            return Err(format!("unknown argument `{key}`: {why}"));
        }
        if let Some(meant) = known
            .iter()
            .filter_map(|name| resemblance(&key, name).map(|distance| (distance, name)))
            .min()
            .map(|(_, name)| name)
        {
            return Err(format!(
                "unknown argument `{key}`; did you mean `{meant}`? (arguments: {})",
                known.join(", ")
            ));
        }
        tracing::debug!("`{tool}`: ignoring the argument `{key}`, not one of ours (a host's own)");
        arguments.remove(&key);
    }
    Ok(())
}

/// How close `given` is to being a misspelling of `name` (lower is closer), or `None`
/// when it is not plausibly one: the same letters in another case or separator style
/// (0), a couple of typos apart (1-2), or one contained in the other (3).
fn resemblance(given: &str, name: &str) -> Option<usize> {
    let normal = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let (given, name) = (normal(given), normal(name));
    if given.is_empty() || name.is_empty() {
        return None;
    }
    let distance = edit_distance(&given, &name);
    if distance <= 2 {
        return Some(distance);
    }
    let contained =
        (name.len() >= 4 && given.contains(&name)) || (given.len() >= 4 && name.contains(&given));
    contained.then_some(3)
}

/// Levenshtein distance over bytes (ASCII here).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// Arguments of `codex`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct CodexArgs {
    pub prompt: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub config: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    #[serde(default)]
    pub compact_prompt: Option<String>,
    #[serde(default)]
    pub background: bool,
}

/// Arguments of `codex-status`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CodexStatusArgs {
    pub thread_id: String,
}

/// Arguments of `codex-wait`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CodexWaitArgs {
    pub thread_id: String,
    #[serde(default)]
    pub timeout_sec: Option<u64>,
}

impl CodexWaitArgs {
    pub(crate) fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.timeout_sec
                .unwrap_or(DEFAULT_WAIT_SEC)
                .min(MAX_WAIT_SEC),
        )
    }
}

/// Arguments of `codex-reply` (unknown keys are accepted, as the reference does).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CodexReplyArgs {
    pub prompt: String,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub conversation_id: Option<String>,
}

impl CodexReplyArgs {
    /// `threadId`, else the legacy `conversationId`.
    pub(crate) fn thread_id(&self) -> Result<ThreadId, String> {
        let raw = self
            .thread_id
            .as_deref()
            .or(self.conversation_id.as_deref())
            .ok_or_else(|| "either threadId or conversationId must be provided".to_string())?;
        parse_thread_id(raw)
    }
}

pub(crate) fn parse_thread_id(raw: &str) -> Result<ThreadId, String> {
    raw.parse::<ThreadId>().map_err(|e| e.to_string())
}

/// Why a call's configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionConfigError {
    #[error("{0}")]
    Load(#[from] interpreter_core::config::ConfigError),
    #[error("`config.{key}`: {reason}")]
    BadValue { key: String, reason: String },
    #[error("configuration loader stopped unexpectedly: {0}")]
    Join(String),
}

impl SessionConfigError {
    /// Whether the call asked for more than the server's operator allows (a sandbox
    /// above the ceiling, a program of its own), rather than for something broken.
    pub(crate) fn is_refusal(&self) -> bool {
        use interpreter_core::config::ConfigError;
        matches!(
            self,
            Self::Load(ConfigError::AboveSandboxCeiling { .. } | ConfigError::CallerProgram { .. })
        )
    }
}

/// Per-call settings layered on top of the server's own config inputs.
#[derive(Debug, Default, Clone)]
pub(crate) struct CallOverrides {
    pub model: Option<String>,
    pub cwd: Option<PathBuf>,
    pub approval_policy: Option<AskForApproval>,
    pub sandbox: Option<SandboxMode>,
    pub config: Vec<(String, toml::Value)>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    pub compact_prompt: Option<String>,
}

impl CodexArgs {
    pub(crate) fn overrides(&self) -> Result<CallOverrides, SessionConfigError> {
        let mut config = Vec::new();
        for (key, value) in self.config.iter().flatten() {
            let value = json_to_toml(value).map_err(|reason| SessionConfigError::BadValue {
                key: key.clone(),
                reason,
            })?;
            config.push((key.clone(), value));
        }
        Ok(CallOverrides {
            model: self.model.clone(),
            cwd: self.cwd.clone(),
            approval_policy: self.approval_policy,
            sandbox: self.sandbox,
            config,
            base_instructions: self.base_instructions.clone(),
            developer_instructions: self.developer_instructions.clone(),
            compact_prompt: self.compact_prompt.clone(),
        })
    }
}

/// JSON → TOML the way `-c` values are typed. TOML has no null; the reference turned it
/// into an empty string, which silently changes meaning, so we reject it instead.
pub(crate) fn json_to_toml(value: &Value) -> Result<toml::Value, String> {
    Ok(match value {
        Value::Null => return Err("null is not a TOML value; omit the key instead".to_string()),
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().ok_or("number out of range")?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(items) => {
            toml::Value::Array(items.iter().map(json_to_toml).collect::<Result<_, _>>()?)
        }
        Value::Object(map) => {
            let mut table = toml::map::Map::new();
            for (k, v) in map {
                table.insert(k.clone(), json_to_toml(v)?);
            }
            toml::Value::Table(table)
        }
    })
}

/// Build the session config: server inputs (its `-c`, `--strict-config`, profile, env)
/// first, then this call's `config` entries (the caller's overrides, held to the limits
/// the server's operator set, as its typed arguments are), then its typed arguments; and
/// mark the session's child environment with the MCP nesting depth.
pub(crate) async fn build_session_config(
    server_inputs: &ConfigInputs,
    call: CallOverrides,
) -> Result<Config, SessionConfigError> {
    let mut inputs = server_inputs.clone();
    inputs.caller_overrides.extend(call.config);
    if let Some(cwd) = call.cwd {
        inputs.overrides.cwd = Some(if cwd.is_absolute() {
            cwd
        } else {
            server_inputs.cwd.join(cwd)
        });
    }
    if call.model.is_some() {
        inputs.overrides.model = call.model;
    }
    if call.approval_policy.is_some() {
        inputs.overrides.approval_policy = call.approval_policy;
    }
    if call.sandbox.is_some() {
        inputs.overrides.sandbox_mode = call.sandbox;
    }
    if call.base_instructions.is_some() {
        inputs.overrides.base_instructions = call.base_instructions;
    }
    if call.developer_instructions.is_some() {
        inputs.overrides.developer_instructions = call.developer_instructions;
    }
    if call.compact_prompt.is_some() {
        inputs.overrides.compact_prompt = call.compact_prompt;
    }
    let (marker_key, marker_value) = child_depth_marker(&inputs.env);
    inputs.env.insert(marker_key.clone(), marker_value.clone());
    // Loading reads files; keep it off the async workers.
    let mut config = tokio::task::spawn_blocking(move || load_config(inputs))
        .await
        .map_err(|e| SessionConfigError::Join(e.to_string()))??;
    config.env.insert(marker_key, marker_value);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_args_are_kebab_case_and_strict() {
        let ok: CodexArgs = serde_json::from_value(json!({
            "prompt": "hi", "approval-policy": "never", "sandbox": "workspace-write",
            "base-instructions": "b", "config": {"model_reasoning_effort": "low"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.approval_policy, Some(AskForApproval::Never));
        assert_eq!(ok.sandbox, Some(SandboxMode::WorkspaceWrite));
        let err = serde_json::from_value::<CodexArgs>(json!({"prompt": "hi", "profile": "x"}));
        assert!(err.is_err());
        let err = serde_json::from_value::<CodexArgs>(
            json!({"prompt": "hi", "approval_policy": "never"}),
        );
        assert!(err.is_err());
    }

    fn screened(tool: &str, arguments: Value) -> Result<Value, String> {
        let mut arguments = arguments.as_object().cloned().unwrap_or_default();
        screen_arguments(tool, &mut arguments).map(|()| Value::Object(arguments))
    }

    /// Found by Gemini CLI, which adds `wait_for_previous` to every tool's arguments.
    #[test]
    fn gemini_cli_bookkeeping_arguments_are_dropped() {
        for tool in [CODEX_TOOL, CODEX_STATUS_TOOL, CODEX_WAIT_TOOL] {
            let screened = screened(
                tool,
                json!({"prompt": "p", "threadId": "t", "wait_for_previous": true}),
            );
            assert_eq!(
                screened.ok().map(|a| a.get("wait_for_previous").is_none()),
                Some(true)
            );
        }
    }

    #[test]
    fn near_misses_name_the_right_argument() {
        for (given, meant) in [
            ("approvalPolicy", "approval-policy"),
            ("approval_policy", "approval-policy"),
            ("sandbox_mode", "sandbox"),
            ("Prompt", "prompt"),
            ("developerInstructions", "developer-instructions"),
            ("baseinstruction", "base-instructions"),
        ] {
            let error = screened(CODEX_TOOL, json!({"prompt": "p", given: "x"}))
                .err()
                .unwrap_or_default();
            assert!(
                error.contains(&format!("did you mean `{meant}`")),
                "{given}: {error}"
            );
        }
        let error = screened(CODEX_TOOL, json!({"prompt": "p", "profile": "work"}))
            .err()
            .unwrap_or_default();
        assert!(error.contains("--profile"), "{error}");
        let error = screened(CODEX_WAIT_TOOL, json!({"threadId": "t", "timeout": 5}))
            .err()
            .unwrap_or_default();
        assert!(error.contains("did you mean `timeoutSec`"), "{error}");
    }

    #[test]
    fn reply_prefers_thread_id_over_conversation_id() {
        let a = ThreadId::new();
        let b = ThreadId::new();
        let args: CodexReplyArgs = serde_json::from_value(json!({
            "prompt": "p", "threadId": a.to_string(), "conversationId": b.to_string(), "extra": 1
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(args.thread_id().ok(), Some(a));
        let legacy: CodexReplyArgs =
            serde_json::from_value(json!({"prompt": "p", "conversationId": b.to_string()}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(legacy.thread_id().ok(), Some(b));
    }

    #[test]
    fn json_values_become_toml() {
        assert_eq!(json_to_toml(&json!(3)), Ok(toml::Value::Integer(3)));
        assert_eq!(json_to_toml(&json!(1.5)), Ok(toml::Value::Float(1.5)));
        assert!(json_to_toml(&json!(null)).is_err());
        let table = json_to_toml(&json!({"a": [true]})).unwrap_or_else(|e| panic!("{e}"));
        let expected: toml::Value = toml::Value::Table(
            [(
                "a".to_string(),
                toml::Value::Array(vec![toml::Value::Boolean(true)]),
            )]
            .into_iter()
            .collect(),
        );
        assert_eq!(table, expected);
    }

    #[test]
    fn descriptions_are_short() {
        for tool in tool_definitions() {
            let description = tool["description"].as_str().unwrap_or_default();
            assert!(
                !description.is_empty() && description.len() < 2048,
                "{tool}"
            );
        }
    }
}
