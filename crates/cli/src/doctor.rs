//! `interpreter doctor`: a self-test that says in one screen whether this installation
//! will work for the programs that drive it — home directory, config, API key, model
//! endpoint, what the model server reports, sandbox, thread index and nesting — with a concrete fix for each problem.
//!
//! It only reads. The exceptions are what every other subcommand does too: a missing home
//! directory is created (and reported), and a home directory other users can enter is
//! made private once the `home` check has reported it. Every external wait has a deadline.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use interpreter_core::NESTING_DEPTH_ENV;
use interpreter_core::config::{Config, ConfigError, ConfigOverrides, load_config};
use interpreter_core::store::local::{
    IndexHealth, LocalStore, SESSIONS_DIR, STATE_DB_FILE, list_rollout_files,
};
use interpreter_core::store::{self, StoreLocation};
use interpreter_model_client::{
    ModelClient, ModelListError, ModelProviderInfo, ProviderError, WireApi, credential_hint,
    list_models,
};
use interpreter_protocol::SandboxMode;
use interpreter_tools::sandbox::{self, SandboxSupport};
use serde::Serialize;

use crate::cli::{ConfigArgs, DoctorArgs};
use crate::config_inputs;

/// Deadline of the whole `GET {base_url}/models` exchange, body included.
const ENDPOINT_DEADLINE: Duration = Duration::from_secs(5);
/// The sandbox probe forks short-lived children, each with its own deadline; this bounds
/// the whole probe in case one of them is stuck in the kernel.
const SANDBOX_PROBE_DEADLINE: Duration = Duration::from_secs(30);
/// Opening the index waits at most its own 5 s busy timeout per statement.
const STATE_DEADLINE: Duration = Duration::from_secs(15);
/// How many served model ids a "model not listed" warning names.
const LISTED_MODEL_IDS: usize = 5;

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CheckStatus {
    Ok,
    Warn,
    Fail,
}

impl CheckStatus {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// One line of the report. `fix` is present for `warn` and `fail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub name: &'static str,
    pub status: CheckStatus,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            status: CheckStatus::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            status: CheckStatus::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            status: CheckStatus::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn skipped(name: &'static str) -> Self {
        Self::warn(
            name,
            "not checked: the config did not load",
            "fix the config failure above, then run `interpreter doctor` again",
        )
    }
}

/// The `--json` document.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorReport {
    /// No check failed.
    pub ok: bool,
    pub checks: Vec<Check>,
}

impl DoctorReport {
    fn new(checks: Vec<Check>) -> Self {
        let ok = checks.iter().all(|check| check.status != CheckStatus::Fail);
        Self { ok, checks }
    }

    /// Aligned `status  name  detail` lines, each fix indented under its check, then a
    /// summary line.
    pub(crate) fn render_human(&self) -> String {
        let name_width = self
            .checks
            .iter()
            .map(|check| check.name.len())
            .max()
            .unwrap_or(0);
        let mut text = String::new();
        for check in &self.checks {
            let _ = writeln!(
                text,
                "{:<5}{:<name_width$}  {}",
                check.status.label(),
                check.name,
                check.detail
            );
            if let Some(fix) = &check.fix {
                let _ = writeln!(text, "{:<5}{:<name_width$}  fix: {fix}", "", "");
            }
        }
        let count = |status| {
            self.checks
                .iter()
                .filter(|check| check.status == status)
                .count()
        };
        let (warnings, failures) = (count(CheckStatus::Warn), count(CheckStatus::Fail));
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        let summary = if failures > 0 {
            format!(
                "{}, {}: interpreter will not work until the failures are fixed",
                plural(failures, "failure"),
                plural(warnings, "warning")
            )
        } else if warnings > 0 {
            format!(
                "no failures, {}: interpreter should work",
                plural(warnings, "warning")
            )
        } else {
            "all checks passed".to_string()
        };
        text.push('\n');
        text.push_str(&summary);
        text.push('\n');
        text
    }
}

/// `interpreter doctor [--json]`: exit 0 when no check failed, 1 otherwise.
pub(crate) async fn run(
    args: DoctorArgs,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let report = if args.oss {
        diagnose_local_server(config_args, &env).await
    } else {
        diagnose(&config_args, &env).await
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string(&report)?)?;
    } else {
        // Checks quote what servers answered (errors, model ids, server names).
        write!(
            stdout,
            "{}",
            crate::terminal::neutralize_controls(&report.render_human())
        )?;
    }
    stdout.flush()?;
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `doctor --oss`: which local server answered (an `oss` check first), then every check
/// against it; when none answered, the checks run against the config as it is.
async fn diagnose_local_server(
    config_args: ConfigArgs,
    env: &HashMap<String, String>,
) -> DoctorReport {
    const NAME: &str = "oss";
    // Without a working directory the config check fails and says why.
    let Ok(cwd) = crate::exec::resolve_cwd(None) else {
        return diagnose(&config_args, env).await;
    };
    let (config_args, check) = match config_inputs::choose_local_server(
        config_args.clone(),
        env,
        &cwd,
        None,
    )
    .await
    {
        Ok((args, choice)) => (args, Check::ok(NAME, choice.summary())),
        Err(err) => (
            config_args,
            Check::fail(
                NAME,
                one_line(&format!("{err:#}")),
                "start a local model server, or set the base_url of its provider (docs/providers.md)",
            ),
        ),
    };
    let report = diagnose(&config_args, env).await;
    DoctorReport::new(std::iter::once(check).chain(report.checks).collect())
}

/// Runs every check in order; later checks use what earlier ones found.
pub(crate) async fn diagnose(
    config_args: &ConfigArgs,
    env: &HashMap<String, String>,
) -> DoctorReport {
    let (home_check, home) = check_home(env);
    let loaded = load(config_args, env);
    let mut checks = vec![home_check, check_config(&loaded)];
    let config = loaded.as_ref().ok();
    checks.push(match config {
        Some(config) => check_api_key(config),
        None => Check::skipped("api-key"),
    });
    checks.push(match config {
        Some(config) => check_endpoint(config).await,
        None => Check::skipped("endpoint"),
    });
    checks.push(match config {
        Some(config) => check_server(config).await,
        None => Check::skipped("server"),
    });
    checks.push(check_sandbox(config.map(|config| config.sandbox_policy.mode())).await);
    let state_home = config.map(|config| config.home.clone()).or(home);
    checks.push(
        match (config.map(|config| &config.thread_store), state_home) {
            (Some(location @ StoreLocation::Postgres { .. }), _) => {
                check_store(location, env.get("PGPASSWORD").cloned()).await
            }
            (_, Some(home)) => check_state(home).await,
            (_, None) => Check::warn(
                "state",
                "not checked: no home directory",
                "fix the home failure above",
            ),
        },
    );
    checks.push(check_nesting(env));
    checks.push(check_telemetry(config_args, env).await);
    DoctorReport::new(checks)
}

/// The home path the config loader will use, created when missing.
fn check_home(env: &HashMap<String, String>) -> (Check, Option<PathBuf>) {
    const NAME: &str = "home";
    let non_empty = |key: &str| env.get(key).filter(|value| !value.trim().is_empty());
    let home = match (non_empty("INTERPRETER_HOME"), non_empty("HOME")) {
        (Some(home), _) => PathBuf::from(home),
        (None, Some(user_home)) => Path::new(user_home).join(".interpreter"),
        (None, None) => {
            return (
                Check::fail(
                    NAME,
                    "cannot determine the home directory: neither INTERPRETER_HOME nor HOME is set",
                    "set INTERPRETER_HOME to a writable directory",
                ),
                None,
            );
        }
    };
    let shown = home.display().to_string();
    let mut created = false;
    match std::fs::metadata(&home) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => {
            return (
                Check::fail(
                    NAME,
                    format!("{shown} exists but is not a directory"),
                    "move that file aside or point INTERPRETER_HOME at a directory",
                ),
                None,
            );
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if let Err(err) = interpreter_private_fs::create_dir_all(&home) {
                return (
                    Check::fail(
                        NAME,
                        format!("{shown} is missing and cannot be created: {err}"),
                        "create it by hand or set INTERPRETER_HOME to a writable directory",
                    ),
                    None,
                );
            }
            created = true;
        }
        Err(err) => {
            return (
                Check::fail(
                    NAME,
                    format!("cannot read {shown}: {err}"),
                    "fix its permissions or set INTERPRETER_HOME to another directory",
                ),
                None,
            );
        }
    }
    if let Err(reason) = writable(&home) {
        return (
            Check::fail(
                NAME,
                format!("{shown} is not writable: {reason}"),
                "fix its owner/permissions (sessions and state.sqlite live there) or set \
                 INTERPRETER_HOME to a writable directory",
            ),
            Some(home),
        );
    }
    // Reported as found: loading the configuration below (as every command does) then
    // makes the home directory itself private.
    let exposure = interpreter_private_fs::exposed(&home, EXPOSED_SHOWN, EXPOSED_LOOKED_AT);
    if exposure.count > 0 {
        let named: Vec<String> = exposure
            .entries
            .iter()
            .map(|entry| format!("{} ({:04o})", entry.path.display(), entry.mode))
            .collect();
        let more = exposure.count - exposure.entries.len();
        let rest = match (more, exposure.incomplete) {
            (0, false) => String::new(),
            (0, true) => ", and maybe more".to_string(),
            (more, false) => format!(", and {more} more"),
            (more, true) => format!(", and {more} more at least"),
        };
        return (
            Check::warn(
                NAME,
                format!(
                    "other users can reach {shown} and read or change what is in it \
                     (conversations, command output, keys): {}{rest}",
                    named.join(", ")
                ),
                format!("chmod -R go-rwx {shown}"),
            ),
            Some(home),
        );
    }
    let detail = if created {
        format!("{shown} (created)")
    } else {
        shown
    };
    (Check::ok(NAME, detail), Some(home))
}

/// How many entries of the home open to other users the warning names, and how many
/// entries it looks at in all (a home holds one rollout per thread).
const EXPOSED_SHOWN: usize = 5;
const EXPOSED_LOOKED_AT: usize = 100_000;

/// access(2) rather than a probe file, so the check itself writes nothing.
#[cfg(unix)]
fn writable(dir: &Path) -> Result<(), String> {
    use rustix::fs::{Access, access};
    access(dir, Access::WRITE_OK | Access::EXEC_OK).map_err(|errno| errno.to_string())
}

#[cfg(not(unix))]
fn writable(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.permissions().readonly() => Err("read-only".to_string()),
        Ok(_) => Ok(()),
        Err(err) => Err(err.to_string()),
    }
}

/// Why the config did not load: the loader's one-line message and what to do about it.
struct ConfigFailure {
    message: String,
    fix: String,
}

fn load(config_args: &ConfigArgs, env: &HashMap<String, String>) -> Result<Config, ConfigFailure> {
    let cwd = crate::exec::resolve_cwd(None).map_err(|err| ConfigFailure {
        message: format!("{err:#}"),
        fix: "run doctor from an existing directory".to_string(),
    })?;
    let failure = |err: anyhow::Error| {
        let fix = match err.downcast_ref::<ConfigError>() {
            Some(config_error) => config_fix(config_error, config_args),
            None => "fix the argument named above".to_string(),
        };
        ConfigFailure {
            message: one_line(&format!("{err:#}")),
            fix,
        }
    };
    let inputs = config_inputs::build(config_args, env.clone(), cwd, ConfigOverrides::default())
        .map_err(failure)?;
    load_config(inputs).map_err(|err| failure(err.into()))
}

fn config_fix(err: &ConfigError, config_args: &ConfigArgs) -> String {
    match err {
        ConfigError::UnknownKey { .. } if config_args.strict_config => {
            "remove or correct that key (see docs/config.md), or drop --strict-config to \
             ignore unknown keys"
                .to_string()
        }
        ConfigError::UnknownKey { .. } => {
            "remove or correct that key (see docs/config.md)".to_string()
        }
        ConfigError::HomeNotDirectory { .. } | ConfigError::NoHome => {
            "set INTERPRETER_HOME to an existing, writable directory".to_string()
        }
        ConfigError::Parse { .. } => "fix the TOML syntax at the position shown".to_string(),
        ConfigError::InvalidOverride { .. } => {
            "write overrides as -c key=value (value in TOML syntax)".to_string()
        }
        ConfigError::ProfileNotFound { .. } => {
            "create that profile, or drop --profile / the `profile` key".to_string()
        }
        ConfigError::MissingModel { .. } => {
            "add `model = \"NAME\"` to config.toml, or pass -c model=NAME".to_string()
        }
        ConfigError::UnknownModelProvider { .. } => {
            "define that [model_providers.ID] table, or use a built-in provider id \
             (openai, ollama, lmstudio, vllm, llamacpp, ...)"
                .to_string()
        }
        ConfigError::CwdNotDirectory { .. } => {
            "run from an existing directory, or fix the `cwd` setting".to_string()
        }
        // Only a server's callers are held to limits; doctor is not one.
        ConfigError::AboveSandboxCeiling { .. } | ConfigError::CallerProgram { .. } => {
            "ask for less than the server's operator allows".to_string()
        }
        ConfigError::Read { .. } | ConfigError::InstructionsFile { .. } => {
            "make that file readable, or remove the setting that points at it".to_string()
        }
        ConfigError::InvalidValue { .. } => {
            "correct that value (see docs/config.md for the allowed values)".to_string()
        }
    }
}

fn check_config(loaded: &Result<Config, ConfigFailure>) -> Check {
    const NAME: &str = "config";
    match loaded {
        Ok(config) => {
            let base_url = config
                .model_provider
                .base_url
                .as_deref()
                .unwrap_or("(no base_url)");
            let detail = format!(
                "model={} provider={} base_url={} wire_api={} approval={} sandbox={}",
                config.model,
                config.model_provider_id,
                base_url,
                config.model_provider.wire_api.as_str(),
                config.approval_policy.as_str(),
                config.sandbox_policy.mode().as_str(),
            );
            if config.warnings.is_empty() {
                Check::ok(NAME, detail)
            } else {
                Check::warn(
                    NAME,
                    format!("{detail}; {}", config.warnings.join("; ")),
                    "remove or correct what is ignored (--strict-config makes unknown keys errors)",
                )
            }
        }
        Err(failure) => Check::fail(NAME, failure.message.clone(), failure.fix.clone()),
    }
}

/// The API key's presence and length; never its value.
fn check_api_key(config: &Config) -> Check {
    const NAME: &str = "api-key";
    let provider = &config.model_provider;
    let provider_id = &config.model_provider_id;
    match &provider.env_key {
        Some(variable) => match config.env.get(variable) {
            Some(value) if !value.trim().is_empty() => {
                let length = value.trim().chars().count();
                let plural = if length == 1 { "" } else { "s" };
                Check::ok(NAME, format!("{variable} is set ({length} char{plural})"))
            }
            _ if provider.stored_api_key.is_some() => Check::ok(
                NAME,
                format!(
                    "{variable} is not set; using the key stored by `interpreter login --provider {provider_id}`"
                ),
            ),
            found => {
                let state = if found.is_some() { "blank" } else { "not set" };
                let mut fix = format!(
                    "export {variable}=<your API key>, or store one with `interpreter login --provider {provider_id}`"
                );
                if let Some(instructions) = &provider.env_key_instructions {
                    let _ = write!(fix, " ({instructions})");
                }
                Check::fail(
                    NAME,
                    format!("{variable} is {state} (provider `{provider_id}` needs it)"),
                    fix,
                )
            }
        },
        None if bearer_token(provider).is_some() => Check::ok(
            NAME,
            format!("experimental_bearer_token set in [model_providers.{provider_id}]"),
        ),
        None => Check::ok(
            NAME,
            format!("no key needed (provider `{provider_id}` has no env_key)"),
        ),
    }
}

fn bearer_token(provider: &ModelProviderInfo) -> Option<&str> {
    provider
        .experimental_bearer_token
        .as_deref()
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// `GET {base_url}/models` with the provider's credentials, headers and query parameters.
async fn check_endpoint(config: &Config) -> Check {
    const NAME: &str = "endpoint";
    let provider = &config.model_provider;
    let provider_id = &config.model_provider_id;
    // The client the engine would build validates base_url, wire_api and header names;
    // a missing key is the api-key check's to report, and the probe still runs without it.
    match ModelClient::new(
        provider_id.clone(),
        provider.clone(),
        config.model.clone(),
        config.model_reasoning_effort,
        &config.env,
    ) {
        Ok(_) | Err(ProviderError::MissingApiKey { .. }) => {}
        Err(err) => {
            return Check::fail(
                NAME,
                err.to_string(),
                format!("fix [model_providers.{provider_id}] in config.toml"),
            );
        }
    }
    let listing = match list_models(provider_id, provider, &config.env, ENDPOINT_DEADLINE).await {
        Ok(listing) => listing,
        Err(err) => return endpoint_failure(&err, config),
    };
    let url = &listing.url;
    let model = &config.model;
    if listing.ids.iter().any(|id| id == model) {
        return Check::ok(
            NAME,
            format!(
                "{url} reachable; model `{model}` is served ({} models listed)",
                listing.ids.len()
            ),
        );
    }
    let available: Vec<&str> = listing
        .ids
        .iter()
        .take(LISTED_MODEL_IDS)
        .map(String::as_str)
        .collect();
    let available = if available.is_empty() {
        "none".to_string()
    } else if listing.ids.len() > LISTED_MODEL_IDS {
        format!("{}, ...", available.join(", "))
    } else {
        available.join(", ")
    };
    Check::warn(
        NAME,
        format!(
            "{url} reachable, but model `{model}` is not among the {} models it lists \
             (available: {available})",
            listing.ids.len()
        ),
        "set `model` to one of the listed ids (or -c model=ID), or load the model on the server",
    )
}

/// A failed model list as a check: unreachable, timed out or refused credentials fail;
/// a server that answers but lists nothing readable only warns (some servers do not list
/// models, and requests may still work).
fn endpoint_failure(err: &ModelListError, config: &Config) -> Check {
    const NAME: &str = "endpoint";
    let provider_id = &config.model_provider_id;
    match err {
        ModelListError::NoBaseUrl => Check::fail(
            NAME,
            "base_url is not set",
            format!("add base_url to [model_providers.{provider_id}]"),
        ),
        ModelListError::Provider(_) => Check::fail(
            NAME,
            err.to_string(),
            format!("fix the headers of [model_providers.{provider_id}]"),
        ),
        ModelListError::Timeout { .. } => Check::fail(
            NAME,
            err.to_string(),
            format!(
                "check that the server is up and that base_url in \
                 [model_providers.{provider_id}] is right"
            ),
        ),
        ModelListError::Unreachable { .. } => Check::fail(
            NAME,
            err.to_string(),
            format!("start the model server, or fix base_url in [model_providers.{provider_id}]"),
        ),
        ModelListError::Status {
            url,
            status,
            excerpt,
        } if err.is_auth_refusal() => Check::fail(
            NAME,
            format!("{url} answered HTTP {status} (credentials refused): {excerpt}"),
            credential_hint(provider_id, &config.model_provider),
        ),
        ModelListError::Status { .. } | ModelListError::Unreadable { .. }
            if config.model_provider.wire_api == WireApi::Messages =>
        {
            Check::warn(
                NAME,
                err.to_string(),
                "some Anthropic-compatible endpoints do not list models; if requests fail \
                 too, check that base_url is the root `/messages` is under (for hosted \
                 vendors it ends in /anthropic/v1, for llama.cpp, Ollama and vLLM in /v1)",
            )
        }
        ModelListError::Status { .. } => Check::warn(
            NAME,
            err.to_string(),
            "some servers do not list models; if requests fail too, check that base_url \
             is the API root (it usually ends in /v1)",
        ),
        ModelListError::Unreadable { .. } => Check::warn(
            NAME,
            err.to_string(),
            "check that base_url points at an OpenAI-compatible API root (usually ending in /v1)",
        ),
    }
}

/// What a self-hosted server says about the model: its context window, and whether its
/// chat template renders tools (llama.cpp `/props`). Hosted providers are not asked.
async fn check_server(config: &Config) -> Check {
    const NAME: &str = "server";
    let configured = config
        .model_context_window
        .map(|n| format!("context window {n} tokens (model_context_window)"));
    if !config.model_provider.is_local() {
        return Check::ok(
            NAME,
            configured.unwrap_or_else(|| {
                "hosted provider: context window learned from its errors (set model_context_window to compact before them)".to_string()
            }),
        );
    }
    let client = match ModelClient::new(
        config.model_provider_id.clone(),
        config.model_provider.clone(),
        config.model.clone(),
        config.model_reasoning_effort,
        &config.env,
    ) {
        Ok(client) => client,
        Err(_) => {
            return Check::warn(
                NAME,
                "not checked: the provider is not usable",
                "fix the api-key or config failure above",
            );
        }
    };
    let facts = client.probe_server_facts().await;
    let window = match (facts.context_window, configured) {
        (Some((n, source)), _) => format!("context window {n} tokens ({source})"),
        (None, Some(configured)) => configured,
        (None, None) => "context window not reported".to_string(),
    };
    match facts.supports_tools {
        Some(false) => Check::warn(
            NAME,
            format!(
                "{window}; the chat template cannot render tools (/props chat_template_caps.supports_tools = false): the server drops them and the model can only answer in text"
            ),
            "restart llama-server with --jinja, and with --chat-template-file FILE naming a template with tool support if the model's own has none (docs/providers.md)",
        ),
        Some(true) => Check::ok(NAME, format!("{window}; the chat template renders tools")),
        None if facts.context_window.is_none() && config.model_context_window.is_none() => {
            Check::warn(
                NAME,
                format!("{window}; tool support not reported"),
                "set model_context_window (and the server's context size, e.g. Ollama num_ctx) so long threads are compacted before the server cuts them",
            )
        }
        None => Check::ok(NAME, format!("{window}; tool support not reported")),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `read-only`/`workspace-write` commands can be enforced here. Without a loaded
/// config the default mode (read-only, which needs the sandbox) is assumed.
async fn check_sandbox(mode: Option<SandboxMode>) -> Check {
    const NAME: &str = "sandbox";
    let mode = mode.unwrap_or_default();
    let probe = tokio::task::spawn_blocking(sandbox::probe_support);
    let support = match tokio::time::timeout(SANDBOX_PROBE_DEADLINE, probe).await {
        Ok(Ok(support)) => support,
        Ok(Err(err)) => {
            return Check::fail(
                NAME,
                format!("the sandbox probe crashed: {err}"),
                "run `interpreter sandbox check` for details",
            );
        }
        Err(_) => {
            return Check::fail(
                NAME,
                format!(
                    "the sandbox probe did not finish within {}s",
                    SANDBOX_PROBE_DEADLINE.as_secs()
                ),
                "run `interpreter sandbox check` for details",
            );
        }
    };
    sandbox_verdict(&support, mode)
}

fn sandbox_verdict(support: &SandboxSupport, mode: SandboxMode) -> Check {
    const NAME: &str = "sandbox";
    let features = format!(
        "Landlock {}, seccomp {}, mount namespace {}",
        support
            .landlock_abi
            .map(|abi| format!("ABI {abi}"))
            .unwrap_or_else(|| "unavailable".to_string()),
        if support.seccomp { "yes" } else { "no" },
        if support.mount_namespace { "yes" } else { "no" },
    );
    if !support.supported {
        let problems = support.problems.join("; ");
        let detail = format!("sandbox unavailable ({features}): {problems}");
        return if mode == SandboxMode::DangerFullAccess {
            Check::warn(
                NAME,
                detail,
                "not needed while sandbox_mode is danger-full-access; read-only and \
                 workspace-write would refuse to run commands here",
            )
        } else {
            Check::fail(
                NAME,
                detail,
                format!(
                    "sandbox_mode is {}, which needs the sandbox: run on Linux 6.2+ with \
                     Landlock enabled and seccomp allowed (`interpreter sandbox check` shows \
                     details), or, in a throwaway environment only, set sandbox_mode = \
                     \"danger-full-access\"",
                    mode.as_str()
                ),
            )
        };
    }
    if !support.warnings.is_empty() {
        return Check::warn(
            NAME,
            format!("supported ({features}); {}", support.warnings.join("; ")),
            "optional: allow unprivileged user namespaces (or CAP_SYS_ADMIN) so protected \
             paths get a read-only mount",
        );
    }
    Check::ok(NAME, format!("supported ({features})"))
}

/// A database thread store: it answers, has our schema, and how many threads it holds.
async fn check_store(location: &StoreLocation, password: Option<String>) -> Check {
    const NAME: &str = "state";
    let status = async {
        let store = store::open(location, None, password).await?;
        store.status().await
    };
    match tokio::time::timeout(STATE_DEADLINE, status).await {
        Ok(Ok(status)) => {
            let mut detail = format!(
                "{} answers; {} thread{}",
                status.description,
                status.threads,
                plural(status.threads as usize)
            );
            // Who else uses the database: a fleet's replicas show here, and a store
            // nobody else heartbeats on is one machine's, whatever its URL.
            if let Some(fleet) = status.fleet {
                detail.push_str(&format!(
                    " ({} running); {} other live process{}",
                    fleet.running,
                    fleet.other_processes,
                    if fleet.other_processes == 1 { "" } else { "es" }
                ));
            }
            Check::ok(NAME, detail)
        }
        Ok(Err(err)) => Check::fail(
            NAME,
            one_line(&err.to_string()),
            "check thread_store's host and database, and PGPASSWORD",
        ),
        Err(_) => Check::fail(
            NAME,
            format!(
                "{location} did not answer within {}s",
                STATE_DEADLINE.as_secs()
            ),
            "check that the database is up and reachable from this machine",
        ),
    }
}

/// The thread index and sessions directory, compared with each other. Nothing is created
/// or repaired here (the next run that uses the index does that); a missing index is
/// normal before the first thread.
async fn check_state(home: PathBuf) -> Check {
    const NAME: &str = "state";
    let sessions = home.join(SESSIONS_DIR);
    let sessions_note = if sessions.is_dir() {
        format!("sessions in {}", sessions.display())
    } else {
        format!("sessions dir {} not created yet", sessions.display())
    };
    let db_path = home.join(STATE_DB_FILE);
    let rebuild_fix = format!(
        "nothing to do by hand: the index is a cache, and the next `interpreter exec` rebuilds {} from {}",
        db_path.display(),
        sessions.display()
    );
    if !db_path.exists() {
        // Listing reads directory entries only; an unreadable directory counts as empty.
        let on_disk = list_rollout_files(&sessions).map_or(0, |files| files.len());
        if on_disk > 0 {
            return Check::warn(
                NAME,
                format!(
                    "no thread index, but {on_disk} rollout{} in {}",
                    plural(on_disk),
                    sessions.display()
                ),
                rebuild_fix,
            );
        }
        return Check::ok(
            NAME,
            format!("no thread index yet (created by the first thread); {sessions_note}"),
        );
    }
    let local = LocalStore::new(home.clone());
    let health = local.index_health();
    let move_aside = format!(
        "the index is a cache: the next `interpreter exec` moves {} aside and rebuilds it from sessions/",
        db_path.display()
    );
    match tokio::time::timeout(STATE_DEADLINE, health).await {
        Ok(Ok(health)) => state_check(NAME, &db_path, &health, &sessions_note, rebuild_fix),
        Ok(Err(err)) => Check::fail(NAME, one_line(&err.to_string()), move_aside),
        Err(_) => Check::fail(
            NAME,
            format!(
                "{} did not open within {}s (locked by another process?)",
                db_path.display(),
                STATE_DEADLINE.as_secs()
            ),
            "wait for other interpreter processes to finish, then retry",
        ),
    }
}

/// The verdict on an index that opens: `ok` when it matches `sessions/`, otherwise a
/// warning that counts each kind of mismatch and names the first file of each.
fn state_check(
    name: &'static str,
    db_path: &Path,
    health: &IndexHealth,
    sessions_note: &str,
    rebuild_fix: String,
) -> Check {
    let counts = format!(
        "{} indexes {} thread{}, {} rollout file{} on disk",
        db_path.display(),
        health.indexed,
        plural(health.indexed),
        health.on_disk,
        plural(health.on_disk)
    );
    if health.is_consistent() {
        return Check::ok(name, format!("{counts}; {sessions_note}"));
    }
    let mut problems = Vec::new();
    let mut describe = |files: &[PathBuf], what: &str| {
        if let Some(first) = files.first() {
            problems.push(format!(
                "{} {what} (first: {})",
                files.len(),
                first.display()
            ));
        }
    };
    describe(&health.not_indexed, "rollout(s) not in the index");
    describe(
        &health.missing_files,
        "indexed thread(s) whose rollout file is gone",
    );
    describe(
        &health.unreadable,
        "unreadable rollout(s) (0 bytes or no metadata)",
    );
    let fix = if health.unreadable.is_empty() {
        rebuild_fix
    } else {
        format!(
            "move unreadable rollouts out of the sessions directory (they cannot be resumed); {rebuild_fix}"
        )
    };
    Check::warn(
        name,
        format!("{counts}; mismatch: {}", problems.join("; ")),
        fix,
    )
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Deadline of one probe of a telemetry endpoint.
const TELEMETRY_DEADLINE: Duration = Duration::from_secs(5);

/// Where telemetry goes (`[otel]` and the `OTEL_*` variables) and whether each endpoint
/// answers: an empty export (which a collector accepts) to each HTTP endpoint, a
/// connection to a gRPC one.
async fn check_telemetry(config_args: &ConfigArgs, env: &HashMap<String, String>) -> Check {
    use interpreter_telemetry::settings::{self, Protocol, Signal};
    const NAME: &str = "telemetry";
    let otel = crate::telemetry::otel_table(config_args, env).unwrap_or_default();
    let resolved = match settings::resolve(&otel, env) {
        Ok(resolved) => resolved,
        Err(err) => {
            return Check::warn(
                NAME,
                format!("telemetry is off: {err}"),
                "fix the variable or the [otel] key it names (docs/observability.md)",
            );
        }
    };
    if resolved.is_off() {
        return Check::ok(
            NAME,
            "not exported (set OTEL_EXPORTER_OTLP_ENDPOINT or [otel] to export; servers still serve /metrics)",
        );
    }
    let mut lines = Vec::new();
    let mut silent = Vec::new();
    for signal in Signal::ALL {
        let Some(target) = resolved.target(signal) else {
            lines.push(format!("{signal}: off"));
            continue;
        };
        let answer = match target.protocol {
            Protocol::Grpc => probe_grpc(&target.endpoint).await,
            Protocol::HttpProtobuf | Protocol::HttpJson => probe_http(target).await,
        };
        match answer {
            Ok(()) => lines.push(format!(
                "{signal} → {} ({})",
                target.endpoint, target.protocol
            )),
            Err(why) => {
                lines.push(format!(
                    "{signal} → {} ({}): {why}",
                    target.endpoint, target.protocol
                ));
                silent.push(signal.to_string());
            }
        }
    }
    let mut detail = lines.join("; ");
    if resolved.capture_content {
        detail.push_str("; prompts and outputs ARE exported (content capture is on)");
    }
    if silent.is_empty() {
        Check::ok(NAME, detail)
    } else {
        Check::warn(
            NAME,
            detail,
            format!(
                "start the collector or fix the endpoint for {}; turns run anyway and what they export is dropped",
                silent.join(", ")
            ),
        )
    }
}

async fn probe_http(target: &interpreter_telemetry::settings::OtlpTarget) -> Result<(), String> {
    use interpreter_telemetry::settings::Protocol;
    let (kind, body): (&str, &[u8]) = match target.protocol {
        Protocol::HttpJson => ("application/json", b"{}"),
        _ => ("application/x-protobuf", b""),
    };
    let client = reqwest::Client::builder()
        .timeout(TELEMETRY_DEADLINE)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| err.to_string())?;
    let mut request = client
        .post(&target.endpoint)
        .header("content-type", kind)
        .body(body.to_vec());
    for (name, value) in &target.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    match request.send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!("answered HTTP {}", response.status().as_u16())),
        Err(err) => Err(format!("did not answer ({})", one_line(&err.to_string()))),
    }
}

async fn probe_grpc(endpoint: &str) -> Result<(), String> {
    let authority = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let address = if authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
    {
        authority
    } else if endpoint.starts_with("https://") {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    match tokio::time::timeout(TELEMETRY_DEADLINE, tokio::net::TcpStream::connect(&address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(format!("did not answer ({err})")),
        Err(_) => Err(format!(
            "did not answer within {}s",
            TELEMETRY_DEADLINE.as_secs()
        )),
    }
}

fn check_nesting(env: &HashMap<String, String>) -> Check {
    const NAME: &str = "nesting";
    match env.get(NESTING_DEPTH_ENV).map(|value| value.trim()) {
        None | Some("") | Some("0") => Check::ok(NAME, "not running inside another interpreter"),
        Some(value) => match value.parse::<u32>() {
            Ok(depth) => Check::ok(
                NAME,
                format!("running inside another interpreter session (depth {depth})"),
            ),
            Err(_) => Check::warn(
                NAME,
                format!("{NESTING_DEPTH_ENV}=`{value}` is not a number; it counts as 0"),
                format!("unset {NESTING_DEPTH_ENV}; interpreter sets it for its own children"),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn support(supported: bool, warnings: Vec<String>) -> SandboxSupport {
        SandboxSupport {
            landlock_abi: supported.then_some(5),
            landlock_enforced: supported,
            seccomp: supported,
            mount_namespace: warnings.is_empty(),
            supported,
            problems: if supported {
                Vec::new()
            } else {
                vec!["Landlock is not available".to_string()]
            },
            warnings,
            ..SandboxSupport::default()
        }
    }

    #[test]
    fn unsupported_sandbox_fails_only_when_a_sandboxed_mode_is_configured() {
        let unsupported = support(false, Vec::new());
        assert_eq!(
            sandbox_verdict(&unsupported, SandboxMode::ReadOnly).status,
            CheckStatus::Fail
        );
        assert_eq!(
            sandbox_verdict(&unsupported, SandboxMode::DangerFullAccess).status,
            CheckStatus::Warn
        );
        let degraded = support(true, vec!["no user namespaces".to_string()]);
        assert_eq!(
            sandbox_verdict(&degraded, SandboxMode::WorkspaceWrite).status,
            CheckStatus::Warn
        );
        let full = support(true, Vec::new());
        let check = sandbox_verdict(&full, SandboxMode::WorkspaceWrite);
        assert_eq!(check.status, CheckStatus::Ok);
        assert!(check.fix.is_none());
    }

    #[test]
    fn nesting_depth_is_reported() {
        let env = |value: &str| HashMap::from([(NESTING_DEPTH_ENV.to_string(), value.into())]);
        assert!(
            check_nesting(&HashMap::new())
                .detail
                .contains("not running")
        );
        assert!(check_nesting(&env("2")).detail.contains("depth 2"));
        assert_eq!(check_nesting(&env("x")).status, CheckStatus::Warn);
    }

    #[test]
    fn human_report_aligns_and_summarises() {
        let report = DoctorReport::new(vec![
            Check::ok("home", "/h"),
            Check::fail("api-key", "KEY is not set", "export KEY=<your API key>"),
        ]);
        assert!(!report.ok);
        let text = report.render_human();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ok   home     /h");
        assert_eq!(lines[1], "fail api-key  KEY is not set");
        assert_eq!(lines[2], "              fix: export KEY=<your API key>");
        assert!(lines[4].starts_with("1 failure, 0 warnings"));
    }

    #[test]
    fn json_report_omits_fix_of_passing_checks() {
        let report = DoctorReport::new(vec![Check::ok("home", "/h")]);
        let json = serde_json::to_value(&report).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"ok": true, "checks": [{"name": "home", "status": "ok", "detail": "/h"}]})
        );
    }
}
