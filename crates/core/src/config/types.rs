//! The resolved, validated configuration one thread runs with.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use interpreter_model_client::ModelProviderInfo;
use interpreter_protocol::{AskForApproval, ReasoningEffort, SandboxMode, SandboxPolicy};
use interpreter_tools::env_policy::ShellEnvironmentPolicy;
use serde::{Deserialize, Serialize};

/// `[mcp_servers.NAME]`: owned by the MCP client, which is what reads it.
pub use interpreter_mcp_client::McpServerConfig;

/// Everything the engine needs to run a thread. Built only by the config loader, which
/// merges config file → profile → `-c` overrides → per-call overrides.
#[derive(Debug, Clone)]
pub struct Config {
    /// Which of model, provider and effort the caller picked for this run (rather than
    /// the config files): a resumed thread keeps the rest as it ran.
    pub model_chosen: ModelChoice,
    /// `$INTERPRETER_HOME` or `~/.interpreter`: config, sessions, state DB.
    pub home: PathBuf,
    /// Working directory of the thread (absolute).
    pub cwd: PathBuf,
    pub model: String,
    pub model_provider_id: String,
    pub model_provider: ModelProviderInfo,
    /// Every provider this config knows (built-in and `[model_providers.*]`) by id, the
    /// chosen one included, for front ends that list them. Only `model_provider` is used.
    pub known_providers: BTreeMap<String, ModelProviderInfo>,
    pub model_reasoning_effort: Option<ReasoningEffort>,
    /// The model's context window: the top-level key, else the provider table's. The
    /// engine also asks self-hosted servers and learns it from overflow errors.
    pub model_context_window: Option<u64>,
    /// Cap on the tokens of one answer: the top-level key, else the provider table's.
    /// Unset: local providers get a quarter of a known window, others no cap.
    pub model_max_output_tokens: Option<u64>,
    pub approval_policy: AskForApproval,
    pub sandbox_policy: SandboxPolicy,
    /// `[sandbox_workspace_write] allow_git_init`: sandboxed commands may create `.git`.
    pub sandbox_allow_git_init: bool,
    /// `[sandbox_workspace_write] network_access`, whatever the mode: what
    /// `workspace-write` means under this configuration (an operator's ceiling of that
    /// mode allows network only with it).
    pub workspace_write_network: bool,
    /// The operator's bound on this thread's sandbox when a server's caller started it
    /// ([`super::CallerLimits`]): nothing of the thread runs outside the sandbox or
    /// writes where its commands could not unless the ceiling is `danger-full-access`,
    /// and it gets no network the ceiling lacks, whatever is approved.
    pub sandbox_ceiling: Option<super::SandboxCeiling>,
    pub shell_environment_policy: ShellEnvironmentPolicy,
    /// The `env_key` of every configured provider: never passed to commands.
    pub provider_key_variables: Vec<String>,
    /// Replaces the built-in system prompt when set.
    pub base_instructions: Option<String>,
    /// Sent as a developer message at the start of the thread.
    pub developer_instructions: Option<String>,
    pub compact_prompt: Option<String>,
    /// Cap on the bytes of AGENTS.md text added to the context.
    pub project_doc_max_bytes: usize,
    /// How long an approval request may wait for an answer before it counts as denied.
    pub approval_timeout: Duration,
    /// Default timeout of a shell command when the model gives none.
    pub shell_default_timeout: Duration,
    /// Bytes of command output kept for the model (head and tail halves).
    pub tool_output_max_bytes: usize,
    /// JSON Schema the final message must follow (`--output-schema`).
    pub output_schema: Option<serde_json::Value>,
    /// Do not write rollouts (threads cannot be resumed).
    pub ephemeral: bool,
    /// `thread_store`: where threads are kept (the home unless a database is named).
    pub thread_store: crate::store::StoreLocation,
    /// `[mcp_servers.NAME]`: MCP servers our agent uses as a client.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `[mcp_server]`: how `interpreter mcp-server` behaves towards its client.
    pub mcp_server: McpServerSettings,
    /// `[app_server]`: how `interpreter app-server` behaves towards its clients.
    pub app_server: AppServerSettings,
    /// `[[skills.config]]`, in order: a later entry for the same skill wins.
    pub skills_config: Vec<SkillSetting>,
    /// `[hooks]` of the user config, as JSON in the shape of a `hooks.json`'s `hooks`
    /// (read by [`crate::hooks`], which reports what it cannot use).
    pub hooks: Option<serde_json::Value>,
    /// The process environment, captured once in `main` and injected (tests pass their own).
    pub env: HashMap<String, String>,
    /// Path of the `interpreter` executable, used to re-exec the sandbox helper.
    /// `None` means sandboxed commands cannot run (they fail with a clear error).
    pub sandbox_exe: Option<PathBuf>,
    /// The front end can put the model's questions (`request_user_input`) and permission
    /// requests (`request_permissions`) to a person and answer them. Set by the front
    /// end, never by a config file; off, those tools are not offered.
    pub can_ask_user: bool,
    /// What the loader ignored (unknown keys, `--add-dir` outside workspace-write). The
    /// engine reports each as a `warning` event when a thread starts, so every front end
    /// shows it the way it shows other warnings, and logs are not needed to see it.
    pub warnings: Vec<String>,
}

/// Which model settings the caller of this run picked itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: bool,
    pub provider: bool,
    pub effort: bool,
}

/// The model settings a thread last ran with, from its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedModel {
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `Some` once a turn ran (its effort, maybe none); `None` when no turn is recorded.
    pub effort: Option<Option<ReasoningEffort>>,
}

impl Config {
    /// Continues a resumed thread with the provider, model and reasoning effort it ran
    /// with, except those the caller picked for this run. A recorded provider this
    /// configuration no longer knows is kept as configured, with a notice.
    pub fn continue_with(&mut self, recorded: &RecordedModel) -> Option<String> {
        let mut notice = None;
        let chosen = self.model_chosen;
        if !chosen.provider
            && !chosen.model
            && let Some(provider_id) = &recorded.provider
            && *provider_id != self.model_provider_id
        {
            match self.known_providers.get(provider_id).cloned() {
                Some(provider) => {
                    // Limits that came from the old provider's table follow the provider.
                    if self.model_context_window == self.model_provider.model_context_window {
                        self.model_context_window = provider.model_context_window;
                    }
                    if self.model_max_output_tokens == self.model_provider.model_max_output_tokens {
                        self.model_max_output_tokens = provider.model_max_output_tokens;
                    }
                    self.model_provider_id = provider_id.clone();
                    self.model_provider = provider;
                }
                None => {
                    notice = Some(format!(
                        "this thread ran on provider `{provider_id}`, which the configuration no longer defines; it continues on `{}`",
                        self.model_provider_id
                    ));
                }
            }
        }
        if !chosen.model
            && !chosen.provider
            && notice.is_none()
            && let Some(model) = recorded.model.as_ref().filter(|m| !m.trim().is_empty())
        {
            self.model = model.clone();
        }
        if !chosen.effort
            && let Some(effort) = recorded.effort
        {
            self.model_reasoning_effort = effort;
        }
        notice
    }

    /// The exact environment of a command the agent runs: the environment policy applied
    /// to the process environment, never with a provider's API key in it.
    pub fn command_env(&self) -> HashMap<String, String> {
        interpreter_tools::env_policy::create_env(
            &self.shell_environment_policy,
            &self.env,
            &self.provider_key_variables,
        )
    }

    /// Paths that sandboxed commands may neither read nor write, and `apply_patch` may
    /// never write, wherever they lie.
    ///
    /// The agent's home: its `config.toml`, credentials, token files, rollouts and state
    /// database decide how the agent runs next time (a command that could set
    /// `sandbox_mode` there would escape the sandbox) and hold its secrets. And the user's
    /// credential agents, which sign with the user's keys for whoever connects: the
    /// ssh-agent socket (`SSH_AUTH_SOCK`) and the GnuPG home and sockets. Those are listed
    /// only when they exist, so the sandbox never creates them.
    pub fn sandbox_protected_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.home.clone()];
        let var = |name: &str| {
            self.env
                .get(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        let gnupg_home = var("GNUPGHOME").or_else(|| var("HOME").map(|home| home.join(".gnupg")));
        let candidates = [
            var("SSH_AUTH_SOCK"),
            gnupg_home,
            var("XDG_RUNTIME_DIR").map(|dir| dir.join("gnupg")),
        ];
        for path in candidates.into_iter().flatten() {
            if path.is_absolute()
                && std::fs::symlink_metadata(&path).is_ok()
                && !paths.contains(&path)
            {
                paths.push(path);
            }
        }
        paths
    }
}

/// What `interpreter mcp-server` does when an approval is needed but the client did not
/// declare the elicitation capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElicitationFallback {
    #[default]
    Deny,
    Approve,
}

/// `[mcp_server]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerSettings {
    /// Send `codex/event` notifications (turn off for strict clients).
    pub events: bool,
    /// The old name of the top-level `approval_timeout_sec`, read when that is not set:
    /// the engine's clock is the only one on a request, so there is one deadline.
    pub approval_timeout_sec: Option<u64>,
    pub elicitation_fallback: ElicitationFallback,
    /// Heartbeat interval of `notifications/progress` while a turn runs, in seconds.
    pub progress_interval_sec: u64,
    /// The keyring that seals MRTR `requestState`s, shared by every replica of a fleet
    /// (relative to the home). `None`: a key that lives and dies with the process.
    pub request_state_key_file: Option<std::path::PathBuf>,
    /// The keyring fleet replicas sign the requests they forward to each other with
    /// (relative to the home). `None`: `mcp-server-fleet.keys` in the home, used only by
    /// an HTTP listener on a shared thread store.
    pub fleet_key_file: Option<std::path::PathBuf>,
    /// Where this replica may forward requests for threads other replicas run (see
    /// [`super::ForwardAllow`]). `None`: loopback and hosts like its own internal URL.
    pub fleet_forward_allow: Option<Vec<super::ForwardAllowEntry>>,
    /// The loosest sandbox a call may ask for (its `sandbox`, or `sandbox_mode` and
    /// `sandbox_workspace_write.network_access` in its `config`). `None`: any. Read once,
    /// when the server starts.
    pub max_sandbox: Option<SandboxMode>,
    /// Calls may add or change programs the agent runs (`mcp_servers`, `notify`,
    /// `hooks`, loader variables in the environment) through their `config`.
    pub allow_caller_programs: bool,
}

impl Default for McpServerSettings {
    fn default() -> Self {
        Self {
            events: true,
            approval_timeout_sec: None,
            elicitation_fallback: ElicitationFallback::Deny,
            progress_interval_sec: 5,
            request_state_key_file: None,
            fleet_key_file: None,
            fleet_forward_allow: None,
            max_sandbox: None,
            allow_caller_programs: false,
        }
    }
}

/// `[app_server]` table. The deadline of an approval request is the top-level
/// `approval_timeout_sec`, shared with the engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppServerSettings {
    /// What an approval becomes when the client answers the request with "method not
    /// found" (-32601), i.e. it does not implement approvals: `deny` (default) or
    /// `approve`. Not used for a client that declines or does not answer in time.
    pub approval_fallback: ElicitationFallback,
}

/// One `[[skills.config]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSetting {
    pub selector: SkillSelector,
    pub enabled: bool,
}

/// Which skill a `[[skills.config]]` entry is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillSelector {
    /// Its `SKILL.md`.
    Path(PathBuf),
    /// Its name.
    Name(String),
}
