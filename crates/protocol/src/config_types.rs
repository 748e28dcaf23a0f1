use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When the agent must ask before running a command or applying a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AskForApproval {
    /// Only known-safe read-only commands run without asking.
    #[serde(alias = "unless-trusted")]
    Untrusted,
    /// Run sandboxed without asking; ask only for a command that failed in the sandbox,
    /// to retry it without the sandbox.
    OnFailure,
    /// Run sandboxed without asking; the model may ask to escalate, which needs approval.
    #[default]
    OnRequest,
    /// Never ask. What would need approval is refused with a message the model can read.
    Never,
    /// As `on-request`, with each kind of question turned on or off: a kind that is off is
    /// refused as under `never` instead of asked (`{"granular": {...}}`, as Codex).
    Granular(GranularApproval),
}

/// Which questions a `granular` policy may ask. Codex's field names; `false` means the
/// question is never asked and what it would have allowed is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub struct GranularApproval {
    /// Running a command outside the sandbox (escalation, retry unsandboxed) and writing
    /// outside the writable roots.
    pub sandbox_approval: bool,
    /// Questions the command and tool rules raise: commands that delete files forcefully,
    /// MCP tools marked destructive or configured to always ask.
    pub rules: bool,
    /// Questions the thread's MCP servers ask (elicitations).
    pub mcp_elicitations: bool,
    /// The model asking for more sandbox permissions (`request_permissions`); off, the
    /// tool is not offered.
    #[serde(default)]
    pub request_permissions: bool,
    /// Codex's skill approvals; no skills here, so accepted and unused.
    #[serde(default)]
    pub skill_approval: bool,
}

/// The kinds of question an approval policy may ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    Sandbox,
    Rules,
    McpElicitation,
    /// The model asks for more sandbox permissions.
    Permissions,
}

impl AskForApproval {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::OnFailure => "on-failure",
            Self::OnRequest => "on-request",
            Self::Never => "never",
            Self::Granular(_) => "granular",
        }
    }

    /// Whether this policy may ask `question` at all (`never` and a `granular` policy with
    /// that kind off may not; what the question would allow is then refused).
    pub fn may_ask(&self, question: Question) -> bool {
        match self {
            // `never` is about what the agent does; an MCP server's own question is still
            // put to whoever drives the thread (each front end's elicitation fallback).
            Self::Never => question == Question::McpElicitation,
            Self::Granular(granular) => match question {
                Question::Sandbox => granular.sandbox_approval,
                Question::Rules => granular.rules,
                Question::McpElicitation => granular.mcp_elicitations,
                Question::Permissions => granular.request_permissions,
            },
            Self::Untrusted | Self::OnFailure | Self::OnRequest => true,
        }
    }
}

/// The sandbox mode a user picks (`sandbox_mode`, `--sandbox`, the MCP `sandbox` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    #[default]
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// The resolved sandbox policy a command runs under. Tagged `type`, kebab-case, as in
/// rollout `turn_context` records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SandboxPolicy {
    /// No sandbox at all.
    DangerFullAccess,
    /// The agent itself already runs inside a sandbox its client set up (a container, a
    /// VM): commands run without ours, as under `DangerFullAccess`; `network_access` is
    /// what the outer sandbox allows, for the model's information.
    ExternalSandbox {
        #[serde(default)]
        network_access: bool,
    },
    /// Read everywhere, write nowhere (but `/dev/null` and the like).
    ReadOnly {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        network_access: bool,
    },
    /// Write only under the cwd, `writable_roots` and (unless excluded) the temp dirs.
    WorkspaceWrite {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        writable_roots: Vec<PathBuf>,
        #[serde(default)]
        network_access: bool,
        #[serde(default)]
        exclude_tmpdir_env_var: bool,
        #[serde(default)]
        exclude_slash_tmp: bool,
    },
}

impl SandboxPolicy {
    pub fn mode(&self) -> SandboxMode {
        match self {
            // Nothing of ours is enforced: every rule keyed on the mode treats it so.
            Self::DangerFullAccess | Self::ExternalSandbox { .. } => SandboxMode::DangerFullAccess,
            Self::ReadOnly { .. } => SandboxMode::ReadOnly,
            Self::WorkspaceWrite { .. } => SandboxMode::WorkspaceWrite,
        }
    }

    pub fn has_full_network_access(&self) -> bool {
        match self {
            Self::DangerFullAccess => true,
            Self::ReadOnly { network_access }
            | Self::WorkspaceWrite { network_access, .. }
            | Self::ExternalSandbox { network_access } => *network_access,
        }
    }

    pub fn has_full_disk_write_access(&self) -> bool {
        self.runs_unsandboxed()
    }

    /// Commands run without this agent's OS sandbox.
    pub fn runs_unsandboxed(&self) -> bool {
        matches!(self, Self::DangerFullAccess | Self::ExternalSandbox { .. })
    }
}

/// Reasoning effort hint passed to providers that accept one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ReasoningEffort {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
        }
    }
}

/// How the agent works with the user in a turn (Codex's collaboration modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollaborationModeKind {
    /// The agent does the work: today's behaviour.
    #[default]
    Default,
    /// The agent explores without changing anything and proposes a plan, in a
    /// `<proposed_plan>` block that front ends show as a plan of its own.
    Plan,
}

/// A thread's collaboration mode: which one, and the instructions that come with it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CollaborationMode {
    pub kind: CollaborationModeKind,
    /// Replaces the mode's built-in instructions; `None` keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
}
