//! Errors of the sandbox helper and its argument parsing.

use std::path::PathBuf;

/// What to tell a person whose machine cannot enforce the sandbox. Running unsandboxed must
/// be their explicit choice, so every enforcement error ends with this.
pub(crate) const EXPLICIT_OPT_OUT_HINT: &str = "Refusing to run the command without a sandbox. \
     To run commands unsandboxed, choose it explicitly with `--sandbox danger-full-access` \
     (or `sandbox_mode = \"danger-full-access\"` in config). \
     Run `interpreter sandbox check` for details.";

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the Linux sandbox is not available on this platform ({os}). {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    UnsupportedPlatform { os: &'static str },

    #[error("invalid `sandbox linux` arguments: {0}")]
    InvalidHelperArgs(String),

    #[error("invalid --policy-json: {0}")]
    InvalidPolicyJson(#[source] serde_json::Error),

    #[error("Landlock is not available: {reason}. {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    LandlockUnavailable { reason: String },

    #[error(
        "the kernel's Landlock ABI is {found}, but the sandbox needs ABI {required} \
         ({required_feature}, Linux {required_kernel} or newer). {hint}",
        hint = EXPLICIT_OPT_OUT_HINT
    )]
    LandlockAbiTooOld {
        found: u32,
        required: u32,
        required_feature: &'static str,
        required_kernel: &'static str,
    },

    #[error("could not build the Landlock ruleset ({step}): {message}. {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    LandlockSetup { step: String, message: String },

    #[error("Landlock was not fully enforced (status: {status}). {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    LandlockNotEnforced { status: String },

    #[error("could not install the seccomp filter ({step}): {message}. {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    Seccomp { step: &'static str, message: String },

    #[error("could not harden the sandboxed process ({step}): {source}. {hint}", hint = EXPLICIT_OPT_OUT_HINT)]
    Hardening {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the command was not run: {detail} while its sandbox was being set up (another \
         command running at the same time renamed it); run it again"
    )]
    RootMoved { detail: String },

    #[error("cannot enter the working directory {path}: {source}")]
    Cwd {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("failed to execute {program:?}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
