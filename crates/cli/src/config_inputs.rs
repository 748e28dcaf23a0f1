//! Turning command-line config flags and the captured environment into the engine's
//! [`ConfigInputs`], the one place every front end starts its configuration from.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use interpreter_core::config::{
    ConfigInputs, ConfigOverrides, LocalServerChoice, LocalServerError, parse_cli_override,
    resolve_home, select_local_server,
};

use crate::cli::ConfigArgs;

/// Resolve the home directory and parse every `-c` override (in order; later ones win).
/// `cwd` is the directory relative paths resolve against.
pub(crate) fn build(
    args: &ConfigArgs,
    env: HashMap<String, String>,
    cwd: PathBuf,
    overrides: ConfigOverrides,
) -> anyhow::Result<ConfigInputs> {
    let inputs = inputs(args, env, cwd, overrides)?;
    secure_home(&inputs.home);
    Ok(inputs)
}

/// [`build`] without touching the home, for reading settings before logging is up (the
/// command's own [`build`] then secures it and logs what it changed).
pub(crate) fn unsecured(
    args: &ConfigArgs,
    env: HashMap<String, String>,
    cwd: PathBuf,
) -> anyhow::Result<ConfigInputs> {
    inputs(args, env, cwd, ConfigOverrides::default())
}

fn inputs(
    args: &ConfigArgs,
    env: HashMap<String, String>,
    cwd: PathBuf,
    overrides: ConfigOverrides,
) -> anyhow::Result<ConfigInputs> {
    let home = resolve_home(&env)?;
    let cli_overrides = args
        .overrides
        .iter()
        .map(|raw| parse_cli_override(raw))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ConfigInputs {
        home,
        cwd,
        profile: args.profile.clone(),
        cli_overrides,
        overrides,
        strict: args.strict_config,
        env,
        // Sandboxed commands re-execute this binary as the sandbox helper.
        sandbox_exe: std::env::current_exe().ok(),
        // A server front end sets what its callers add and may do.
        caller_overrides: Vec::new(),
        caller_limits: None,
    })
}

/// Takes group and other access off an existing home directory of ours. The agent
/// creates everything in its home private (0700/0600), but older versions created the
/// home 0755 and rollouts 0644, and another local user could read a command's output
/// there; a home other users can enter is that leftover (or a `mkdir` for
/// `INTERPRETER_HOME`), not a choice worth keeping, so it is fixed rather than only
/// reported. Only the directory itself changes: nothing inside is in reach once it is
/// private, and walking every rollout at each start would cost too much. A home owned by
/// another user is left alone. The change is logged, not printed: stderr carries one-line
/// errors scripts read; `interpreter doctor` reports an open home before it is closed.
fn secure_home(home: &Path) {
    match interpreter_private_fs::tighten_home(home) {
        Ok(Some(old)) => tracing::warn!(
            home = %home.display(),
            "made the agent's home private (its mode was {old:04o})"
        ),
        Ok(None) => {}
        Err(err) => tracing::warn!(
            home = %home.display(),
            "cannot make the agent's home private: {err}"
        ),
    }
}

/// `--oss`: probes the local model servers these flags configure, says on stderr which
/// one (and which model) it chose, and returns the flags with that choice added as `-c`
/// overrides, so every config later built from them uses it. `model` is the front end's
/// own `-m`, when it is not already a `-c model=` override.
pub(crate) async fn with_local_server(
    args: ConfigArgs,
    env: &HashMap<String, String>,
    cwd: &Path,
    model: Option<&str>,
) -> anyhow::Result<ConfigArgs> {
    let (args, choice) = choose_local_server(args, env, cwd, model).await?;
    eprintln!("{}", choice.summary());
    Ok(args)
}

/// The config inputs of a serving front end (`mcp-server`, `app-server`, `acp`): the
/// merged `-c`/`-p` arguments, with `--oss` choosing the local server, for the process's
/// directory.
pub(crate) async fn for_serving(
    args: ConfigArgs,
    oss: bool,
    env: HashMap<String, String>,
    cwd: PathBuf,
) -> anyhow::Result<ConfigInputs> {
    let args = if oss {
        with_local_server_for_serving(args, &env, &cwd).await?
    } else {
        args
    };
    build(&args, env, cwd, ConfigOverrides::default())
}

/// [`with_local_server`] for `mcp-server` and `app-server`, which must start even when
/// no local server answers yet (an MCP host would only show "connection closed"): that
/// is said on stderr, and the flags keep a local provider so that calls fail naming it
/// until it is up, instead of going to the configured provider.
pub(crate) async fn with_local_server_for_serving(
    args: ConfigArgs,
    env: &HashMap<String, String>,
    cwd: &Path,
) -> anyhow::Result<ConfigArgs> {
    match choose_local_server(args.clone(), env, cwd, None).await {
        Ok((args, choice)) => {
            eprintln!("{}", choice.summary());
            Ok(args)
        }
        Err(err) => {
            let fallback = err
                .downcast_ref::<LocalServerError>()
                .and_then(LocalServerError::fallback_provider);
            let Some(provider) = fallback else {
                return Err(err);
            };
            eprintln!("warning: {err}; serving anyway with model_provider {provider}");
            let mut args = args;
            args.overrides.push(format!(
                "model_provider={}",
                toml::Value::String(provider.to_string())
            ));
            Ok(args)
        }
    }
}

/// [`with_local_server`] without the stderr line, for callers that report the choice
/// themselves.
pub(crate) async fn choose_local_server(
    mut args: ConfigArgs,
    env: &HashMap<String, String>,
    cwd: &Path,
    model: Option<&str>,
) -> anyhow::Result<(ConfigArgs, LocalServerChoice)> {
    let overrides = ConfigOverrides {
        model: model.map(str::to_string),
        ..Default::default()
    };
    let inputs = build(&args, env.clone(), cwd.to_path_buf(), overrides)?;
    let choice = select_local_server(&inputs).await?;
    args.overrides.extend(
        choice
            .cli_overrides()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}")),
    );
    Ok((args, choice))
}
