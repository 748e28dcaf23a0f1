//! What the agent can do to the machine.
//!
//! This crate owns the effects: running shell commands (in their own process group, with
//! timeouts, cancellation and head+tail output caps), parsing and applying patches (and
//! putting their files back for a thread revert, without following planted symlinks),
//! classifying commands as known-safe, scrubbing the environment commands see, and the
//! Linux sandbox (Landlock + seccomp) that commands run under, and git run on the agent's
//! own behalf with everything a planted repository config could run turned off. The engine
//! decides *whether*
//! something runs (approvals); this crate decides *how*.

pub mod apply_patch;
pub mod beneath;
pub mod env_policy;
pub mod exec_process;
pub mod git;
pub mod regular_file;
pub mod restore;
pub mod safety;
pub mod sandbox;
pub mod shell;

pub use apply_patch::{
    ApplyReport, EditAction, FileEdit, Hunk, Patch, PatchError, PatchPlan, Sources, UpdateChunk,
    apply_patch, extract_patch_from_shell, parse_patch,
};
pub use env_policy::{EnvironmentInherit, ShellEnvironmentPolicy, create_env};
pub use safety::{
    display_command, is_dangerous_command, is_known_safe_command, parse_command, shell_argv,
};
pub use shell::{ExecOutput, ExecRequest, ShellError, format_output_for_model};
