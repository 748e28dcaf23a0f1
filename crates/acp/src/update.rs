//! What the agent tells the editor about a session, in the agent's own terms. `sdk`
//! turns these into ACP `session/update` notifications; nothing else knows the wire.

use std::path::PathBuf;

use interpreter_protocol::{AskForApproval, ReasoningEffort, SandboxMode, SandboxPolicy};

/// One `session/update`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Update {
    /// A user message, replayed from history.
    UserText(String),
    AgentText(String),
    /// Reasoning text.
    Thought(String),
    ToolCall(ToolCall),
    ToolCallUpdate(ToolCallUpdate),
    /// The whole plan, replacing the previous one.
    Plan(Vec<PlanEntry>),
    /// The slash commands the editor may offer (sent when a session opens).
    Commands(Vec<SlashCommand>),
    /// The mode changed through its config option (for editors that follow `modes`).
    CurrentMode(Mode),
    /// The config options changed through `session/set_mode`.
    ConfigOptions(SessionState),
}

/// A slash command: a prompt that starts with `/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlashCommand {
    pub name: String,
    pub description: String,
    /// What follows the name, when the command takes it (a skill's task).
    pub input_hint: Option<&'static str>,
}

/// The command for what the engine does differently from a prompt: a prompt that is
/// exactly `/compact`. Anything else would just be a canned prompt.
pub(crate) const COMPACT_COMMAND: &str = "compact";

/// The slash commands of a session: `/compact`, then one per enabled skill (`/<name>
/// task` is the prompt `$<name> task`, which loads the skill for the model). A skill
/// named like a built-in command is left to the `$name` mention.
pub(crate) fn slash_commands(skills: &interpreter_core::skills::Skills) -> Vec<SlashCommand> {
    let mut commands = vec![SlashCommand {
        name: COMPACT_COMMAND.to_string(),
        description: "Summarise the conversation so far, to free up the model's context"
            .to_string(),
        input_hint: None,
    }];
    for skill in skills.enabled() {
        if skill.name == COMPACT_COMMAND {
            continue;
        }
        commands.push(SlashCommand {
            name: skill.name.clone(),
            description: format!(
                "Skill: {}",
                skill
                    .short_description
                    .as_deref()
                    .unwrap_or(&skill.description)
            ),
            input_hint: Some("what to do with the skill"),
        });
    }
    commands
}

/// A tool call as first announced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    pub id: String,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolStatus,
    pub content: Vec<ToolContent>,
    pub locations: Vec<PathBuf>,
    pub raw_input: Option<serde_json::Value>,
    /// What the call returned, for a call announced finished (replayed history).
    pub raw_output: Option<serde_json::Value>,
}

/// What changed about an announced tool call; `None` fields are unchanged.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ToolCallUpdate {
    pub id: String,
    pub status: Option<ToolStatus>,
    /// Replaces the call's whole content.
    pub content: Option<Vec<ToolContent>>,
    pub raw_output: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    Read,
    Search,
    Edit,
    Execute,
    Fetch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolContent {
    /// Markdown text (command output is fenced).
    Text(String),
    /// One file's change: `old_text` is `None` for a new file.
    Diff {
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanEntry {
    pub content: String,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// The session modes, named as Open Interpreter names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    ReadOnly,
    #[default]
    WorkspaceWrite,
    FullAccess,
}

impl Mode {
    pub(crate) const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess];

    pub(crate) fn id(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }

    /// The approval policy and sandbox the mode runs with.
    pub(crate) fn policies(self) -> (AskForApproval, SandboxMode) {
        match self {
            Mode::ReadOnly => (AskForApproval::Untrusted, SandboxMode::ReadOnly),
            Mode::WorkspaceWrite => (AskForApproval::Untrusted, SandboxMode::WorkspaceWrite),
            Mode::FullAccess => (AskForApproval::Never, SandboxMode::DangerFullAccess),
        }
    }

    /// The mode that runs with `approval` and `sandbox`, if one does (a thread run by
    /// another front end may have run with neither).
    pub(crate) fn of(approval: AskForApproval, sandbox: &SandboxPolicy) -> Option<Mode> {
        [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess]
            .into_iter()
            .find(|mode| mode.policies() == (approval, sandbox.mode()))
    }

    pub(crate) fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.id() == id)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "Read only",
            Mode::WorkspaceWrite => "Workspace write",
            Mode::FullAccess => "Full access",
        }
    }

    pub(crate) fn description(self) -> &'static str {
        match self {
            Mode::ReadOnly => {
                "Reads anything; asks before any command that is not known to be safe, which then runs sandboxed read-only"
            }
            Mode::WorkspaceWrite => {
                "Writes only inside the project; asks before each edit and before any command that is not known to be safe"
            }
            Mode::FullAccess => "Runs every command and edit without asking, unsandboxed",
        }
    }
}

/// What the user answered to a permission question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Permission {
    AllowOnce,
    AllowAlways,
    Reject,
}

/// A session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SessionSummary {
    pub id: String,
    pub cwd: PathBuf,
    pub title: Option<String>,
    pub updated_at: String,
}

/// How a prompt ended (a failed model call is an error instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    EndTurn,
    MaxTokens,
    Cancelled,
}

/// The model choice offered as a config option.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelChoice {
    pub current: String,
    pub available: Vec<String>,
}

/// What `session/new`, `load` and `resume` answer besides the id: the session's choices,
/// offered as its config options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SessionState {
    pub id: String,
    /// The slash commands offered once the session is open.
    pub commands: Vec<SlashCommand>,
    pub mode: Mode,
    pub model: ModelChoice,
    /// `None`: the provider's default (nothing is sent).
    pub effort: Option<ReasoningEffort>,
}

/// The session config options (`session/set_config_option`). The ACP spec tells
/// clients to prefer them over the older `modes` when an agent offers them, so the mode
/// is one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionOption {
    Mode,
    Model,
    ReasoningEffort,
}

impl SessionOption {
    pub(crate) const ALL: [SessionOption; 3] = [Self::Mode, Self::Model, Self::ReasoningEffort];

    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Mode => "mode",
            Self::Model => "model",
            Self::ReasoningEffort => "reasoning_effort",
        }
    }

    pub(crate) fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|option| option.id() == id)
    }
}

/// The reasoning efforts offered, with their names.
pub(crate) const EFFORTS: [(ReasoningEffort, &str); 6] = [
    (ReasoningEffort::None, "None"),
    (ReasoningEffort::Minimal, "Minimal"),
    (ReasoningEffort::Low, "Low"),
    (ReasoningEffort::Medium, "Medium"),
    (ReasoningEffort::High, "High"),
    (ReasoningEffort::Xhigh, "Extra high"),
];

/// The value id of "the provider's default": no effort is sent.
pub(crate) const DEFAULT_EFFORT: &str = "default";

/// A reasoning-effort value id as the effort; `None` for an unknown one.
pub(crate) fn effort_of(id: &str) -> Option<ReasoningEffort> {
    EFFORTS
        .into_iter()
        .find(|(effort, _)| effort.as_str() == id)
        .map(|(effort, _)| effort)
}
