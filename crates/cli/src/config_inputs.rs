//! Turning command-line config flags and the captured environment into the engine's
//! [`ConfigInputs`], the one place every front end starts its configuration from.

use std::collections::HashMap;
use std::path::PathBuf;

use interpreter_core::config::{ConfigInputs, ConfigOverrides, parse_cli_override, resolve_home};

use crate::cli::ConfigArgs;

/// Resolve the home directory and parse every `-c` override (in order; later ones win).
/// `cwd` is the directory relative paths resolve against.
pub fn build(
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
    })
}
