//! The one code path from inputs (home, cwd, profile, `-c` overrides, per-call
//! overrides, injected environment) to a validated [`Config`].
//!
//! Precedence, lowest first: `<home>/config.toml` → its `[profiles.NAME]` table →
//! `<home>/NAME.config.toml` → `-c` overrides (in order) → [`ConfigOverrides`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use interpreter_model_client::{ModelProviderInfo, built_in_providers, validate_base_url};
use interpreter_protocol::{AskForApproval, ReasoningEffort, SandboxMode, SandboxPolicy};
use toml::{Table, Value};

use super::caller::{CallerLimits, program_settings};
use super::error::{ConfigError, ConfigSource};
use super::toml_file::{
    ConfigToml, Layer, cli_override_layer, deserialize_merged, layer_setting, merge_into,
    read_toml_file, remove_unknown_keys,
};
use super::types::Config;
use crate::store::StoreLocation;

pub const DEFAULT_MODEL_PROVIDER: &str = "openai";
pub const DEFAULT_PROJECT_DOC_MAX_BYTES: usize = 32 * 1024;
pub const DEFAULT_APPROVAL_TIMEOUT_SEC: u64 = 600;
pub const DEFAULT_SHELL_TIMEOUT_MS: u64 = 120_000;
pub const DEFAULT_TOOL_OUTPUT_MAX_BYTES: usize = 32 * 1024;

/// Everything configuration is computed from. The environment is passed in (captured once
/// in `main`), never read here.
#[derive(Debug, Clone, Default)]
pub struct ConfigInputs {
    /// From [`resolve_home`].
    pub home: PathBuf,
    /// The process working directory (absolute); relative paths resolve against it.
    pub cwd: PathBuf,
    /// `--profile NAME`; when `None`, a top-level `profile` key in `config.toml` selects one.
    pub profile: Option<String>,
    /// `-c key.path=value` overrides, in command-line order (see [`parse_cli_override`](super::parse_cli_override)).
    pub cli_overrides: Vec<(String, Value)>,
    pub overrides: ConfigOverrides,
    /// Unknown keys are errors instead of warnings.
    pub strict: bool,
    pub env: HashMap<String, String>,
    pub sandbox_exe: Option<PathBuf>,
    /// A server's caller's overrides (a tool call's `config`), layered after
    /// `cli_overrides` and held to `caller_limits`.
    pub caller_overrides: Vec<(String, Value)>,
    /// What the server's operator lets its callers set; `None`: not a server's caller.
    pub caller_limits: Option<CallerLimits>,
}

/// Dedicated flags and per-call parameters (MCP tool arguments). Highest precedence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigOverrides {
    pub model: Option<String>,
    pub model_provider: Option<String>,
    /// Relative paths resolve against [`ConfigInputs::cwd`].
    pub cwd: Option<PathBuf>,
    pub approval_policy: Option<AskForApproval>,
    pub sandbox_mode: Option<SandboxMode>,
    pub model_reasoning_effort: Option<ReasoningEffort>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    pub compact_prompt: Option<String>,
    /// Extra writable roots in `workspace-write` mode (`--add-dir`); relative to the cwd.
    pub add_dirs: Vec<PathBuf>,
    pub output_schema: Option<serde_json::Value>,
    pub ephemeral: bool,
    /// The caller never talks to a model (`interpreter sandbox -- CMD`): a missing `model`
    /// is not an error, and the model is left empty.
    pub model_not_needed: bool,
}

/// `INTERPRETER_HOME` (must be an existing directory) or `$HOME/.interpreter` (which need
/// not exist yet; whoever writes there creates it).
pub fn resolve_home(env: &HashMap<String, String>) -> Result<PathBuf, ConfigError> {
    if let Some(home) = env.get("INTERPRETER_HOME").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(home);
        if !path.is_dir() {
            return Err(ConfigError::HomeNotDirectory { path });
        }
        return path
            .canonicalize()
            .map_err(|source| ConfigError::Read { path, source });
    }
    env.get("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| Path::new(home).join(".interpreter"))
        .ok_or(ConfigError::NoHome)
}

/// Whether `id` may name a provider created through a client (`[model_providers.ID]`):
/// 1 to 64 ASCII letters, digits, `-` or `_`, so it is one key of a dotted path and a
/// plain TOML table name. Hand-written configs are not held to this.
pub fn validate_provider_id(id: &str) -> Result<(), String> {
    let fits = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fits {
        Ok(())
    } else {
        Err(format!(
            "invalid provider id `{id}`: use 1 to 64 ASCII letters, digits, `-` or `_`"
        ))
    }
}

/// The thread store the configuration names, without the rest of the configuration:
/// commands that only read threads (`threads list`, `threads show`) need no model.
pub fn load_store_location(inputs: &ConfigInputs) -> Result<StoreLocation, ConfigError> {
    let config_path = inputs.home.join("config.toml");
    let (toml, layers, _warnings) = read_layered(inputs, &config_path)?;
    StoreLocation::parse(toml.thread_store.as_deref(), inputs.home.clone()).map_err(|message| {
        let path = ["thread_store".to_string()];
        let (origin, key) = match layer_setting(&layers, &path) {
            Some(layer) => (layer.origin.clone(), layer.display_key(&path)),
            None => (ConfigSource::File(config_path.clone()), path.join(".")),
        };
        ConfigError::InvalidValue {
            key,
            origin,
            message,
        }
    })
}

/// The `[otel]` table the configuration layers make (file, profile, `-c`), without the
/// rest of the configuration: the binary sets up telemetry export before any front end
/// loads a model's configuration.
pub fn load_otel(
    inputs: &ConfigInputs,
) -> Result<interpreter_telemetry::settings::OtelToml, ConfigError> {
    let config_path = inputs.home.join("config.toml");
    let (toml, _layers, _warnings) = read_layered(inputs, &config_path)?;
    Ok(toml.otel.unwrap_or_default())
}

pub fn load_config(inputs: ConfigInputs) -> Result<Config, ConfigError> {
    // Before any file is read: a caller's program is refused whatever else loads.
    if let Some(limits) = inputs.caller_limits.as_ref().filter(|l| !l.allow_programs) {
        for (key, value) in &inputs.caller_overrides {
            if let Some(key) = program_settings(key, value).into_iter().next() {
                return Err(ConfigError::CallerProgram {
                    key,
                    origin: ConfigSource::Caller,
                    rule: limits.programs_key.clone(),
                });
            }
        }
    }
    let config_path = inputs.home.join("config.toml");
    let (toml, layers, mut warnings) = read_layered(&inputs, &config_path)?;
    let file_origin = ConfigSource::File(config_path.clone());
    // The error for the value at `path`, naming the key as it is spelled where it was
    // set and that file (or `-c`).
    let invalid_at = |path: &[&str], message: String| {
        let path: Vec<String> = path.iter().map(|segment| segment.to_string()).collect();
        let (origin, key) = match layer_setting(&layers, &path) {
            Some(layer) => (layer.origin.clone(), layer.display_key(&path)),
            None => (file_origin.clone(), path.join(".")),
        };
        ConfigError::InvalidValue {
            key,
            origin,
            message,
        }
    };
    let invalid = |key: &str, message: &str| invalid_at(&[key], message.to_string());

    // A base_url that cannot be requested fails here, before any request, for every
    // provider the config defines (not only the one in use): it is a typo either way.
    if let Some(url) = &toml.openai_base_url {
        validate_base_url(url).map_err(|problem| invalid_at(&["openai_base_url"], problem))?;
    }
    for (id, provider) in &toml.model_providers {
        if let Some(url) = &provider.base_url {
            validate_base_url(url)
                .map_err(|problem| invalid_at(&["model_providers", id, "base_url"], problem))?;
        }
        // A bound of 0 would refuse every answer (or time it out at once).
        if let Some(key) = provider.zero_bounds().first() {
            return Err(invalid_at(
                &["model_providers", id, key],
                "must be at least 1 (0 would refuse every answer)".to_string(),
            ));
        }
    }

    let ConfigOverrides {
        model,
        model_provider,
        cwd,
        approval_policy,
        sandbox_mode,
        model_reasoning_effort,
        base_instructions,
        developer_instructions,
        compact_prompt,
        add_dirs,
        output_schema,
        ephemeral,
        model_not_needed,
    } = inputs.overrides;

    let cwd = match cwd {
        Some(cwd) => inputs.cwd.join(cwd),
        None => inputs.cwd.clone(),
    };
    if !cwd.is_dir() {
        return Err(ConfigError::CwdNotDirectory { path: cwd });
    }

    // What the caller picked for this run (a flag, `-c`, a call's `config`), as opposed
    // to what the files say: a resumed thread keeps its own model unless the caller
    // picked one.
    let set_by_caller = |key: &str| {
        layers.iter().any(|layer| {
            matches!(
                layer.origin,
                ConfigSource::CliOverride | ConfigSource::Caller
            ) && layer.key_prefix.is_empty()
                && layer.table.contains_key(key)
        })
    };
    let model_chosen = super::ModelChoice {
        model: model.is_some() || set_by_caller("model"),
        provider: model_provider.is_some() || set_by_caller("model_provider"),
        effort: model_reasoning_effort.is_some() || set_by_caller("model_reasoning_effort"),
    };
    let model = match model.or(toml.model).filter(|m| !m.trim().is_empty()) {
        Some(model) => model,
        None if model_not_needed => String::new(),
        None => {
            return Err(ConfigError::MissingModel {
                config_path: config_path.clone(),
            });
        }
    };

    let model_provider_id = model_provider
        .or(toml.model_provider)
        .unwrap_or_else(|| DEFAULT_MODEL_PROVIDER.to_string());
    let mut providers = merged_providers(toml.openai_base_url, toml.model_providers);
    // Every provider's, not only the chosen one's: the agent knows them all to be API keys.
    let mut provider_key_variables: Vec<String> = providers
        .values()
        .filter_map(|provider| provider.env_key.clone())
        .collect();
    provider_key_variables.sort();
    provider_key_variables.dedup();
    let known_providers: BTreeMap<String, ModelProviderInfo> = providers
        .iter()
        .map(|(id, provider)| (id.clone(), provider.clone()))
        .collect();
    let mut model_provider =
        providers
            .remove(&model_provider_id)
            .ok_or_else(|| ConfigError::UnknownModelProvider {
                id: model_provider_id.clone(),
                config_path: config_path.clone(),
            })?;
    model_provider.stored_api_key = match interpreter_model_client::credentials::stored_api_key(
        &inputs.home,
        &model_provider_id,
    ) {
        Ok(key) => key,
        Err(err) => {
            warnings.push(format!(
                "ignoring stored credentials: {err}; fix or remove the file, then run \
                 `interpreter login` again"
            ));
            None
        }
    };

    let sandbox_mode = sandbox_mode.or(toml.sandbox_mode).unwrap_or_default();
    let sandbox_allow_git_init = toml
        .sandbox_workspace_write
        .as_ref()
        .is_some_and(|settings| settings.allow_git_init);
    let workspace_write_network = toml
        .sandbox_workspace_write
        .as_ref()
        .is_some_and(|settings| settings.network_access);
    let sandbox_policy = match sandbox_mode {
        SandboxMode::ReadOnly => SandboxPolicy::ReadOnly {
            network_access: false,
        },
        SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        SandboxMode::WorkspaceWrite => {
            let settings = toml.sandbox_workspace_write.unwrap_or_default();
            let mut writable_roots: Vec<PathBuf> = Vec::new();
            for root in settings.writable_roots.iter().chain(add_dirs.iter()) {
                let root = cwd.join(root);
                if !writable_roots.contains(&root) {
                    writable_roots.push(root);
                }
            }
            SandboxPolicy::WorkspaceWrite {
                writable_roots,
                network_access: settings.network_access,
                exclude_tmpdir_env_var: settings.exclude_tmpdir_env_var,
                exclude_slash_tmp: settings.exclude_slash_tmp,
            }
        }
    };
    let sandbox_ceiling = inputs
        .caller_limits
        .as_ref()
        .and_then(|limits| limits.sandbox.clone());
    if let Some(ceiling) = &sandbox_ceiling
        && let Some(why) = ceiling.exceeded_by(&sandbox_policy)
    {
        return Err(ConfigError::AboveSandboxCeiling {
            why,
            set_by: ceiling.source().to_string(),
        });
    }
    if !add_dirs.is_empty() && sandbox_mode != SandboxMode::WorkspaceWrite {
        warnings.push(format!(
            "--add-dir has no effect in {} sandbox mode; directories ignored",
            sandbox_mode.as_str()
        ));
    }

    let instructions_from_file = match toml.model_instructions_file {
        Some(path) => {
            let path = inputs.home.join(path);
            Some(
                std::fs::read_to_string(&path)
                    .map_err(|source| ConfigError::InstructionsFile { path, source })?,
            )
        }
        None => None,
    };

    // One deadline: `[mcp_server] approval_timeout_sec` is the old name of the top-level
    // key, which wins when both are set.
    let approval_timeout_sec = toml
        .approval_timeout_sec
        .or_else(|| {
            toml.mcp_server
                .as_ref()
                .and_then(|settings| settings.approval_timeout_sec)
        })
        .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_SEC);
    let shell_timeout_ms = toml.shell_timeout_ms.unwrap_or(DEFAULT_SHELL_TIMEOUT_MS);
    if shell_timeout_ms == 0 {
        return Err(invalid("shell_timeout_ms", "must be greater than 0"));
    }
    let tool_output_max_bytes = toml
        .tool_output_max_bytes
        .unwrap_or(DEFAULT_TOOL_OUTPUT_MAX_BYTES);
    if tool_output_max_bytes == 0 {
        return Err(invalid("tool_output_max_bytes", "must be greater than 0"));
    }
    if toml.model_max_output_tokens == Some(0) {
        return Err(invalid("model_max_output_tokens", "must be greater than 0"));
    }
    if toml.model_context_window == Some(0) {
        return Err(invalid("model_context_window", "must be greater than 0"));
    }

    let model_context_window = toml
        .model_context_window
        .or(model_provider.model_context_window);
    let model_max_output_tokens = toml
        .model_max_output_tokens
        .or(model_provider.model_max_output_tokens);

    let thread_store = StoreLocation::parse(toml.thread_store.as_deref(), inputs.home.clone())
        .map_err(|message| invalid("thread_store", &message))?;

    Ok(Config {
        model_chosen,
        thread_store,
        home: inputs.home,
        cwd,
        model,
        model_provider_id,
        model_provider,
        known_providers,
        model_reasoning_effort: model_reasoning_effort.or(toml.model_reasoning_effort),
        model_context_window,
        model_max_output_tokens,
        approval_policy: approval_policy.or(toml.approval_policy).unwrap_or_default(),
        sandbox_policy,
        sandbox_allow_git_init,
        workspace_write_network,
        sandbox_ceiling,
        shell_environment_policy: toml.shell_environment_policy.unwrap_or_default(),
        provider_key_variables,
        base_instructions: base_instructions
            .or(instructions_from_file)
            .or(toml.base_instructions),
        developer_instructions: developer_instructions.or(toml.developer_instructions),
        compact_prompt: compact_prompt.or(toml.compact_prompt),
        project_doc_max_bytes: toml
            .project_doc_max_bytes
            .unwrap_or(DEFAULT_PROJECT_DOC_MAX_BYTES),
        approval_timeout: Duration::from_secs(approval_timeout_sec),
        shell_default_timeout: Duration::from_millis(shell_timeout_ms),
        tool_output_max_bytes,
        output_schema,
        ephemeral,
        mcp_servers: toml.mcp_servers,
        mcp_server: toml.mcp_server.unwrap_or_default(),
        app_server: toml.app_server.unwrap_or_default(),
        skills_config: toml
            .skills
            .map(|skills| {
                skills
                    .config
                    .into_iter()
                    .filter_map(|entry| {
                        let selector = match (entry.path, entry.name) {
                            (Some(path), _) => super::SkillSelector::Path(path),
                            (None, Some(name)) => super::SkillSelector::Name(name),
                            (None, None) => return None,
                        };
                        Some(super::SkillSetting {
                            selector,
                            enabled: entry.enabled,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
        hooks: toml
            .hooks
            .and_then(|table| serde_json::to_value(table).ok()),
        env: inputs.env,
        sandbox_exe: inputs.sandbox_exe,
        can_ask_user: false,
        warnings,
    })
}

/// Every layer below the per-call overrides, merged and typed; the layers themselves are
/// returned too, to name the one that set a key, and the warnings reading them raised.
pub(super) fn read_layered(
    inputs: &ConfigInputs,
    config_path: &Path,
) -> Result<(ConfigToml, Vec<Layer>, Vec<String>), ConfigError> {
    let mut warnings = Vec::new();
    let layers = collect_layers(inputs, config_path, &mut warnings)?;
    let mut merged = Table::new();
    for layer in &layers {
        merge_into(&mut merged, layer.table.clone());
    }
    let file_origin = ConfigSource::File(config_path.to_path_buf());
    let toml: ConfigToml = deserialize_merged(merged, &layers, &file_origin)?;
    Ok((toml, layers, warnings))
}

/// The built-in providers with `openai_base_url` applied, then the user's
/// `[model_providers.ID]` tables, which replace a built-in of the same id.
pub(super) fn merged_providers(
    openai_base_url: Option<String>,
    user: BTreeMap<String, ModelProviderInfo>,
) -> HashMap<String, ModelProviderInfo> {
    let mut providers = built_in_providers();
    if let Some(url) = openai_base_url
        && let Some(openai) = providers.get_mut(DEFAULT_MODEL_PROVIDER)
    {
        openai.base_url = Some(url);
    }
    providers.extend(user);
    providers
}

/// Reads every layer in precedence order (lowest first) and strips (or, with `strict`,
/// rejects) unknown keys from each, adding a warning per stripped key to `warnings`.
fn collect_layers(
    inputs: &ConfigInputs,
    config_path: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<Layer>, ConfigError> {
    let mut layers = Vec::new();
    let base_table = read_toml_file(config_path)?.unwrap_or_default();
    let file_origin = ConfigSource::File(config_path.to_path_buf());

    let profile_name = match &inputs.profile {
        Some(name) => Some(name.clone()),
        None => match base_table.get("profile") {
            None => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(_) => {
                return Err(ConfigError::InvalidValue {
                    key: "profile".into(),
                    origin: file_origin,
                    message: "expected a string".into(),
                });
            }
        },
    };
    let profile_table = match &profile_name {
        Some(name) => match base_table.get("profiles").and_then(|p| p.get(name)) {
            None => None,
            Some(Value::Table(table)) => Some(table.clone()),
            Some(_) => {
                return Err(ConfigError::InvalidValue {
                    key: format!("profiles.{name}"),
                    origin: file_origin,
                    message: "expected a table".into(),
                });
            }
        },
        None => None,
    };

    layers.push(Layer {
        origin: file_origin.clone(),
        key_prefix: Vec::new(),
        table: base_table,
    });

    if let Some(name) = profile_name {
        let profile_path = inputs.home.join(format!("{name}.config.toml"));
        let profile_file = read_toml_file(&profile_path)?;
        if profile_table.is_none() && profile_file.is_none() {
            return Err(ConfigError::ProfileNotFound {
                name,
                config_path: config_path.to_path_buf(),
                profile_path,
            });
        }
        if let Some(table) = profile_table {
            layers.push(Layer {
                origin: file_origin,
                key_prefix: vec!["profiles".into(), name],
                table,
            });
        }
        if let Some(table) = profile_file {
            layers.push(Layer {
                origin: ConfigSource::File(profile_path),
                key_prefix: Vec::new(),
                table,
            });
        }
    }

    for (key, value) in &inputs.cli_overrides {
        layers.push(cli_override_layer(key, value.clone()));
    }
    for (key, value) in &inputs.caller_overrides {
        let mut layer = cli_override_layer(key, value.clone());
        layer.origin = ConfigSource::Caller;
        layers.push(layer);
    }

    for layer in &mut layers {
        remove_unknown_keys(layer, inputs.strict, warnings)?;
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_cli_override;
    use interpreter_model_client::WireApi;
    use pretty_assertions::assert_eq;
    use tempfile::TempDir;

    struct Fixture {
        home: TempDir,
        cwd: TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                home: tempfile::tempdir().unwrap(),
                cwd: tempfile::tempdir().unwrap(),
            }
        }

        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.home.path().join(name), text).unwrap();
        }

        fn inputs(&self) -> ConfigInputs {
            ConfigInputs {
                home: self.home.path().to_path_buf(),
                cwd: self.cwd.path().to_path_buf(),
                ..Default::default()
            }
        }

        fn with_cli(&self, overrides: &[&str]) -> ConfigInputs {
            ConfigInputs {
                cli_overrides: overrides
                    .iter()
                    .map(|o| parse_cli_override(o).unwrap())
                    .collect(),
                ..self.inputs()
            }
        }
    }

    fn error_text(result: Result<Config, ConfigError>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn a_zero_stream_bound_names_the_key() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"m\"\n[model_providers.local]\nname = \"L\"\nstream_max_answer_bytes = 0\n",
        );
        let err = error_text(load_config(fx.inputs()));
        assert_eq!(
            err,
            format!(
                "invalid value for `model_providers.local.stream_max_answer_bytes` in {}: must \
                 be at least 1 (0 would refuse every answer)",
                fx.home.path().join("config.toml").display()
            )
        );
        let config = load_config(fx.with_cli(&[
            "model_providers.local.stream_max_answer_bytes=1024",
            "model_providers.local.stream_max_duration_ms=5000",
            "model_provider=\"local\"",
        ]));
        let Ok(config) = config else {
            panic!("{}", error_text(config));
        };
        assert_eq!(config.model_provider.stream_limits().answer_bytes, 1024);
        assert_eq!(
            config.model_provider.stream_max_duration(),
            std::time::Duration::from_secs(5)
        );
    }

    #[test]
    fn malformed_base_url_names_the_key_and_where_it_was_set() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"m\"\n[model_providers.local]\nname = \"L\"\nbase_url = \"localhost:8080/v1\"\n",
        );
        let err = error_text(load_config(fx.inputs()));
        let config_path = fx.home.path().join("config.toml");
        assert_eq!(
            err,
            format!(
                "invalid value for `model_providers.local.base_url` in {}: `localhost:8080/v1` \
                 is not an http:// or https:// URL; expected the server's API root, e.g. \
                 \"http://localhost:8080/v1\"",
                config_path.display()
            )
        );

        let err =
            error_text(load_config(fx.with_cli(&[
                r#"model_providers.local={name="L",base_url="not a url"}"#,
            ])));
        assert!(
            err.starts_with(
                "invalid value for `model_providers.local.base_url` in -c override: `not a url` \
                 is not a URL (relative URL without a base)"
            ),
            "{err}"
        );

        let err = error_text(load_config(fx.with_cli(&[
            "model_providers.local.base_url=\"http://127.0.0.1:8080/v1\"",
            "openai_base_url=\"https://\"",
        ])));
        assert!(
            err.starts_with("invalid value for `openai_base_url` in -c override: `https://`"),
            "{err}"
        );
    }

    #[test]
    fn defaults_with_only_a_model() {
        let fx = Fixture::new();
        let config = load_config(fx.with_cli(&["model=gpt-x"])).unwrap();
        assert_eq!(config.model, "gpt-x");
        assert_eq!(config.model_provider_id, "openai");
        assert_eq!(config.approval_policy, AskForApproval::OnRequest);
        assert_eq!(
            config.sandbox_policy,
            SandboxPolicy::ReadOnly {
                network_access: false
            }
        );
        assert_eq!(config.cwd, fx.cwd.path());
        assert_eq!(config.project_doc_max_bytes, 32 * 1024);
        assert_eq!(config.tool_output_max_bytes, 32 * 1024);
        assert_eq!(config.approval_timeout, Duration::from_secs(600));
        assert_eq!(config.shell_default_timeout, Duration::from_millis(120_000));
    }

    /// One deadline: the old `[mcp_server]` key is read when the top-level one is not
    /// set, and the top-level one wins over it.
    #[test]
    fn the_mcp_server_approval_timeout_is_an_alias_of_the_top_level_one() {
        let fx = Fixture::new();
        fx.write("config.toml", "[mcp_server]\napproval_timeout_sec = 42\n");
        let config = load_config(fx.with_cli(&["model=m"])).unwrap();
        assert_eq!(config.approval_timeout, Duration::from_secs(42));
        fx.write(
            "config.toml",
            "approval_timeout_sec = 7\n[mcp_server]\napproval_timeout_sec = 42\n",
        );
        let config = load_config(fx.with_cli(&["model=m"])).unwrap();
        assert_eq!(config.approval_timeout, Duration::from_secs(7));
    }

    #[test]
    fn precedence_is_file_then_profile_then_cli_then_overrides() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            r#"
model = "from-file"
model_provider = "ollama"
approval_policy = "never"
compact_prompt = "file compact"
developer_instructions = "file dev"
base_instructions = "file base"

[profiles.fast]
model = "from-profile-table"
compact_prompt = "profile compact"
developer_instructions = "profile dev"
"#,
        );
        fx.write(
            "fast.config.toml",
            "developer_instructions = \"profile file dev\"\nbase_instructions = \"profile file base\"\n",
        );
        let mut inputs = fx.with_cli(&["model=from-cli", "approval_policy=untrusted"]);
        inputs.profile = Some("fast".into());
        inputs.overrides.approval_policy = Some(AskForApproval::OnFailure);
        let config = load_config(inputs).unwrap();

        assert_eq!(config.model, "from-cli");
        assert_eq!(config.model_provider_id, "ollama");
        assert_eq!(config.approval_policy, AskForApproval::OnFailure);
        assert_eq!(config.compact_prompt.as_deref(), Some("profile compact"));
        assert_eq!(
            config.developer_instructions.as_deref(),
            Some("profile file dev")
        );
        assert_eq!(
            config.base_instructions.as_deref(),
            Some("profile file base")
        );
    }

    #[test]
    fn top_level_profile_key_selects_a_profile() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "profile = \"p\"\nmodel = \"a\"\n[profiles.p]\nmodel = \"b\"\n",
        );
        assert_eq!(load_config(fx.inputs()).unwrap().model, "b");
    }

    #[test]
    fn unknown_profile_is_an_error_naming_it() {
        let fx = Fixture::new();
        fx.write("config.toml", "model = \"a\"\n");
        let mut inputs = fx.inputs();
        inputs.profile = Some("nope".into());
        let err = error_text(load_config(inputs));
        assert!(err.contains("profile `nope` not found"), "{err}");
    }

    #[test]
    fn strict_unknown_key_names_key_and_file() {
        let fx = Fixture::new();
        fx.write("config.toml", "model = \"a\"\n[foo]\nbar = 1\n");
        let mut inputs = fx.inputs();
        inputs.strict = true;
        let err = error_text(load_config(inputs));
        let path = fx.home.path().join("config.toml");
        assert_eq!(
            err,
            format!("unknown config key `foo.bar` in {}", path.display())
        );
    }

    #[test]
    fn strict_unknown_key_in_nested_table_and_cli_override() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"a\"\n[model_providers.local]\nname = \"L\"\nbogus = true\n",
        );
        let mut inputs = fx.inputs();
        inputs.strict = true;
        let err = error_text(load_config(inputs));
        assert!(
            err.starts_with("unknown config key `model_providers.local.bogus` in /"),
            "{err}"
        );

        let fx = Fixture::new();
        let mut inputs = fx.with_cli(&["model=a", "sandbox_workspace_write.nope=1"]);
        inputs.strict = true;
        let err = error_text(load_config(inputs));
        assert_eq!(
            err,
            "unknown config key `sandbox_workspace_write.nope` in -c override"
        );
    }

    #[test]
    fn strict_unknown_key_in_profile_table_is_spelled_as_in_file() {
        let fx = Fixture::new();
        fx.write("config.toml", "model = \"a\"\n[profiles.p]\nwat = 1\n");
        let mut inputs = fx.inputs();
        inputs.strict = true;
        inputs.profile = Some("p".into());
        let err = error_text(load_config(inputs));
        assert!(
            err.starts_with("unknown config key `profiles.p.wat` in "),
            "{err}"
        );
    }

    #[test]
    fn a_top_level_key_written_below_a_table_is_named_as_misplaced() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            r#"
model = "a"
[model_providers.local]
name = "Local"
base_url = "http://localhost:9/v1"
thread_store = "postgres://db.internal/interpreter"
"#,
        );
        let config = load_config(fx.inputs()).unwrap();
        assert!(config.thread_store.to_string().starts_with("local"));
        let warning = config
            .warnings
            .iter()
            .find(|w| w.contains("`model_providers.local.thread_store`"))
            .unwrap_or_else(|| panic!("{:?}", config.warnings));
        assert!(
            warning.contains("`thread_store` is a top-level key"),
            "{warning}"
        );
        assert!(
            !config
                .warnings
                .iter()
                .any(|w| w.contains("`name` is a top-level")),
            "{:?}",
            config.warnings
        );
    }

    #[test]
    fn unknown_keys_are_ignored_when_not_strict_and_codex_keys_are_accepted() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            r#"
model = "a"
web_search = "live"
notify = ["x"]
model_reasoning_summary = "auto"
mystery = 3
[features]
shell_tool = true
[tui]
theme = "x"
[projects."/tmp"]
trust_level = "trusted"
[model_providers.local]
name = "Local"
base_url = "http://localhost:9/v1"
requires_openai_auth = false
"#,
        );
        let config = load_config(fx.inputs()).unwrap();
        assert_eq!(config.model, "a");
        let config_path = fx.home.path().join("config.toml");
        let mystery = format!(
            "ignoring unknown config key `mystery` in {}",
            config_path.display()
        );
        assert!(config.warnings.contains(&mystery), "{:?}", config.warnings);
        assert!(
            !config.warnings.iter().any(|w| w.contains("web_search")),
            "accepted Codex keys are not warned about: {:?}",
            config.warnings
        );

        let mut inputs = fx.inputs();
        inputs.strict = true;
        let err = error_text(load_config(inputs));
        // The accepted Codex keys pass; only the truly unknown ones are reported.
        assert!(
            err.contains("`mystery`")
                || err.contains("`model_providers.local.requires_openai_auth`"),
            "{err}"
        );
    }

    #[test]
    fn output_cap_and_window_come_from_the_top_level_else_the_provider() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"m\"\nmodel_provider = \"box\"\n[model_providers.box]\nname = \"box\"\nbase_url = \"http://10.0.0.5:8000/v1\"\nmodel_max_output_tokens = 1000\nmodel_context_window = 8192\n",
        );
        let config = load_config(fx.inputs()).unwrap();
        assert_eq!(config.model_max_output_tokens, Some(1000));
        assert_eq!(config.model_context_window, Some(8192));
        let config =
            load_config(fx.with_cli(&["model_max_output_tokens=64", "model_context_window=4096"]))
                .unwrap();
        assert_eq!(config.model_max_output_tokens, Some(64));
        assert_eq!(config.model_context_window, Some(4096));
        let err = load_config(fx.with_cli(&["model_max_output_tokens=0"])).err();
        assert!(
            err.is_some_and(|e| e.to_string().contains("model_max_output_tokens")),
            "zero is refused"
        );
    }

    #[test]
    fn cli_override_types_reach_the_config() {
        let fx = Fixture::new();
        let config = load_config(fx.with_cli(&[
            "model=gpt-x",
            "sandbox_mode=workspace-write",
            "sandbox_workspace_write.network_access=true",
            "sandbox_workspace_write.writable_roots=[\"extra\"]",
        ]))
        .unwrap();
        assert_eq!(
            config.sandbox_policy,
            SandboxPolicy::WorkspaceWrite {
                writable_roots: vec![fx.cwd.path().join("extra")],
                network_access: true,
                exclude_tmpdir_env_var: false,
                exclude_slash_tmp: false,
            }
        );
    }

    #[test]
    fn add_dirs_join_writable_roots_resolved_against_cwd() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"m\"\nsandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nwritable_roots = [\"/abs\"]\n",
        );
        std::fs::create_dir(fx.cwd.path().join("sub")).unwrap();
        let mut inputs = fx.inputs();
        inputs.overrides.cwd = Some("sub".into());
        inputs.overrides.add_dirs = vec!["rel".into(), "/abs".into()];
        let config = load_config(inputs).unwrap();
        let cwd = fx.cwd.path().join("sub");
        assert_eq!(config.cwd, cwd);
        match config.sandbox_policy {
            SandboxPolicy::WorkspaceWrite { writable_roots, .. } => {
                assert_eq!(writable_roots, vec![PathBuf::from("/abs"), cwd.join("rel")]);
            }
            other => panic!("unexpected policy {other:?}"),
        }
    }

    #[test]
    fn type_error_names_key_and_the_layer_that_set_it() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            "model = \"a\"\napproval_policy = \"never\"\n",
        );
        let err = error_text(load_config(fx.with_cli(&["approval_policy=sometimes"])));
        assert!(
            err.starts_with("invalid value for `approval_policy` in -c override: unknown variant"),
            "{err}"
        );

        fx.write(
            "config.toml",
            "model = \"a\"\n[model_providers.x]\nname = 3\n",
        );
        let err = error_text(load_config(fx.inputs()));
        let path = fx.home.path().join("config.toml");
        assert!(
            err.starts_with(&format!(
                "invalid value for `model_providers.x.name` in {}",
                path.display()
            )),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn parse_error_names_file_and_line() {
        let fx = Fixture::new();
        fx.write("config.toml", "model = \"a\"\nmodel_provider = \n");
        let err = error_text(load_config(fx.inputs()));
        let path = fx.home.path().join("config.toml");
        assert!(
            err.starts_with(&format!("failed to parse {} at line 2", path.display())),
            "{err}"
        );
    }

    #[test]
    fn missing_model_is_a_clear_error() {
        let fx = Fixture::new();
        let err = error_text(load_config(fx.inputs()));
        assert_eq!(
            err,
            format!(
                "no model configured: set `model` in {}, pass -m/--model, or -c model=...",
                fx.home.path().join("config.toml").display()
            )
        );
    }

    #[test]
    fn unknown_model_provider_is_an_error() {
        let fx = Fixture::new();
        let err = error_text(load_config(fx.with_cli(&["model=m", "model_provider=x"])));
        assert!(
            err.starts_with("model provider `x` not found; define [model_providers.x] in "),
            "{err}"
        );
    }

    #[test]
    fn user_provider_overrides_built_in_and_openai_base_url_applies() {
        let fx = Fixture::new();
        fx.write(
            "config.toml",
            r#"
model = "qwen"
model_provider = "ollama"
openai_base_url = "http://proxy/v1"
[model_providers.ollama]
name = "My Ollama"
base_url = "http://gpu-box:11434/v1"
stream_max_retries = 2
"#,
        );
        let config = load_config(fx.inputs()).unwrap();
        assert_eq!(config.model_provider.name, "My Ollama");
        assert_eq!(
            config.model_provider.base_url.as_deref(),
            Some("http://gpu-box:11434/v1")
        );
        assert_eq!(config.model_provider.wire_api, WireApi::Chat);
        assert_eq!(config.model_provider.stream_max_retries(), 2);

        let config = load_config(fx.with_cli(&["model_provider=openai"])).unwrap();
        assert_eq!(
            config.model_provider.base_url.as_deref(),
            Some("http://proxy/v1")
        );
    }

    #[test]
    fn model_instructions_file_becomes_base_instructions() {
        let fx = Fixture::new();
        fx.write("prompt.md", "be brief");
        fx.write(
            "config.toml",
            "model = \"m\"\nmodel_instructions_file = \"prompt.md\"\n",
        );
        let config = load_config(fx.inputs()).unwrap();
        assert_eq!(config.base_instructions.as_deref(), Some("be brief"));
    }

    #[test]
    fn cwd_must_exist() {
        let fx = Fixture::new();
        let mut inputs = fx.with_cli(&["model=m"]);
        inputs.overrides.cwd = Some("missing".into());
        let err = error_text(load_config(inputs));
        assert!(err.starts_with("working directory "), "{err}");
    }

    #[test]
    fn home_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let env = HashMap::from([(
            "INTERPRETER_HOME".to_string(),
            dir.path().join("missing").display().to_string(),
        )]);
        assert!(matches!(
            resolve_home(&env),
            Err(ConfigError::HomeNotDirectory { .. })
        ));

        let env = HashMap::from([(
            "INTERPRETER_HOME".to_string(),
            dir.path().display().to_string(),
        )]);
        assert_eq!(
            resolve_home(&env).unwrap(),
            dir.path().canonicalize().unwrap()
        );

        let env = HashMap::from([("HOME".to_string(), "/home/u".to_string())]);
        assert_eq!(
            resolve_home(&env).unwrap(),
            PathBuf::from("/home/u/.interpreter")
        );
        assert!(matches!(
            resolve_home(&HashMap::new()),
            Err(ConfigError::NoHome)
        ));
    }
}
