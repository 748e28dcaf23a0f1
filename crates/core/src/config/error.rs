//! Errors of configuration loading. Every message is one line that names the file (or
//! `-c override`) and key involved, because front ends print it verbatim and exit.

use std::fmt;
use std::path::PathBuf;

/// Where a layer of configuration came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A TOML file: `config.toml`, or `NAME.config.toml` of a profile. A
    /// `[profiles.NAME]` table is reported as its file, with the `profiles.NAME.` key prefix.
    File(PathBuf),
    /// A `-c key=value` command-line override (or an equivalent per-call override map).
    CliOverride,
    /// A server's caller: the `config` of its request ([`super::ConfigInputs::caller_overrides`]).
    Caller,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => path.display().fmt(f),
            Self::CliOverride => f.write_str("-c override"),
            Self::Caller => f.write_str("the request's `config`"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("INTERPRETER_HOME `{}` is not an existing directory", path.display())]
    HomeNotDirectory { path: PathBuf },
    #[error("cannot determine the home directory: set INTERPRETER_HOME or HOME")]
    NoHome,
    #[error("failed to read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to parse {}{location}: {message}", path.display())]
    Parse {
        path: PathBuf,
        /// ` at line L, column C` when the parser reported a position, else empty.
        location: String,
        message: String,
    },
    #[error("invalid value for `{key}` in {origin}: {message}")]
    InvalidValue {
        key: String,
        origin: ConfigSource,
        message: String,
    },
    #[error("unknown config key `{key}` in {origin}")]
    UnknownKey { key: String, origin: ConfigSource },
    #[error("invalid -c override `{input}`: {reason}")]
    InvalidOverride { input: String, reason: String },
    #[error(
        "profile `{name}` not found: no [profiles.{name}] table in {} and no {}",
        config_path.display(),
        profile_path.display()
    )]
    ProfileNotFound {
        name: String,
        config_path: PathBuf,
        profile_path: PathBuf,
    },
    #[error(
        "no model configured: set `model` in {}, pass -m/--model, or -c model=...",
        config_path.display()
    )]
    MissingModel { config_path: PathBuf },
    #[error(
        "model provider `{id}` not found; define [model_providers.{id}] in {}",
        config_path.display()
    )]
    UnknownModelProvider { id: String, config_path: PathBuf },
    #[error("working directory {} is not an existing directory", path.display())]
    CwdNotDirectory { path: PathBuf },
    #[error("{why}, which {set_by} sets; refused before anything ran (ask for a lower sandbox)")]
    AboveSandboxCeiling { why: String, set_by: String },
    #[error(
        "`{key}` in {origin} would make the agent run a program of the caller's choosing; \
         callers may not add or change programs unless the operator sets {rule} = true"
    )]
    CallerProgram {
        key: String,
        origin: ConfigSource,
        rule: String,
    },
    #[error("failed to read model_instructions_file {}: {source}", path.display())]
    InstructionsFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
