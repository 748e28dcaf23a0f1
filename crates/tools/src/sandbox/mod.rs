//! The OS sandbox shell commands run under.
//!
//! This module owns the meaning of a [`SandboxPolicy`] on the machine: which directories a
//! command may write ([`writable_roots`], [`WriteScope`]), decided once per session
//! and kept as open directories ([`RootAnchors`]), how a sandboxed command is
//! launched (the engine re-executes its own binary as `interpreter sandbox linux … -- CMD`,
//! see [`sandbox_argv`] / [`parse_linux_helper_args`]), the helper that keeps protected paths
//! read-only with a private mount namespace and installs Landlock and seccomp right before
//! `exec` ([`run_linux_helper`]), the kernel capability probe behind
//! `interpreter sandbox check` ([`probe_support`]), and the heuristic that recognises a
//! command that failed because of the sandbox ([`looks_like_sandbox_denial`]).
//!
//! A sandbox that cannot be fully enforced is an error, never a silent fallback to running
//! unsandboxed: the only way to run without one is to choose `danger-full-access`.

mod denial;
mod error;
mod helper_args;
mod paths;
mod planted_repos;
mod roots;
mod support;

#[cfg(target_os = "linux")]
mod hardening;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod mount_ns;
#[cfg(not(target_os = "linux"))]
mod unsupported;

pub use denial::looks_like_sandbox_denial;
pub use error::SandboxError;
pub use helper_args::{
    HELPER_SUBCOMMAND, LinuxHelperArgs, NETWORK_DISABLED_ENV_VAR, parse_linux_helper_args,
    sandbox_argv,
};
pub use paths::{
    PROTECTED_DIR_NAMES, Purpose, WritableRoot, WriteScope, resolve_for_write, temporary_roots,
    writable_roots, writable_roots_of,
};
pub use planted_repos::{
    CensusRules, DIRECTORY_BUDGET, PlantedRepository, RepositoryCensus, RepositoryMarker,
};
pub use roots::{AnchoredRoot, AnchoredRoots, FileIdentity, RootAnchors, RootRefusal};
pub use support::SandboxSupport;

#[cfg(target_os = "linux")]
pub use linux::{probe_support, run_linux_helper};
#[cfg(not(target_os = "linux"))]
pub use unsupported::{probe_support, run_linux_helper};

#[doc(no_inline)]
pub use interpreter_protocol::SandboxPolicy;
