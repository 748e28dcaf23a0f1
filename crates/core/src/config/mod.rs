//! Configuration: loading and the resolved [`Config`].
//!
//! [`load_config`] is the only way to build a [`Config`]: it layers `config.toml`, the
//! selected profile, `-c` overrides and per-call [`ConfigOverrides`], checks for unknown
//! keys, and validates the result.

/// The credential store has one owner, the model client, which reads it; re-exported for
/// the front ends that write it (`account/login/start`).
pub use interpreter_model_client::credentials;
mod caller;
pub mod edit;
mod error;
mod file_access;
mod forward_allow;
mod load;
mod local_server;
mod toml_file;
mod types;

pub use caller::{CallerLimits, SandboxCeiling, program_settings, program_settings_json};
pub use error::{ConfigError, ConfigSource};
pub use file_access::{FileAccess, FileAccessRule, PathRefused};
pub use forward_allow::{ForwardAllow, ForwardAllowEntry};
pub use load::{
    ConfigInputs, ConfigOverrides, DEFAULT_APPROVAL_TIMEOUT_SEC, DEFAULT_MODEL_PROVIDER,
    DEFAULT_PROJECT_DOC_MAX_BYTES, DEFAULT_SHELL_TIMEOUT_MS, DEFAULT_TOOL_OUTPUT_MAX_BYTES,
    load_config, load_otel, load_store_location, resolve_home, validate_provider_id,
};
pub use local_server::{LocalServerChoice, LocalServerError, ModelReason, select_local_server};
pub use toml_file::{ACCEPTED_IGNORED_KEYS, parse_cli_override};
pub use types::*;
