//! `interpreter login --provider ID` / `interpreter logout --provider ID`: store or remove
//! a provider's API key in the agent home. The file format and the rule that the
//! environment wins belong to the model client (`credentials`); this is only the front.

use std::collections::HashMap;
use std::process::ExitCode;

use interpreter_core::config::resolve_home;
use interpreter_model_client::{built_in_providers, credentials};

/// Reads one line (the key) from stdin, not echoed on a terminal, and stores it for
/// `provider`.
pub(crate) fn login(provider: &str, env: &HashMap<String, String>) -> anyhow::Result<ExitCode> {
    let home = resolve_home(env)?;
    let key = crate::terminal::read_secret_line(&format!(
        "Paste the API key for `{provider}` and press Enter (it is not shown):"
    ))?;
    let path = credentials::store_api_key(&home, provider, &key)?;
    eprintln!("stored the API key for `{provider}` in {}", path.display());
    if let Some(variable) = built_in_providers()
        .get(provider)
        .and_then(|info| info.env_key.clone())
        && env.get(&variable).is_some_and(|v| !v.trim().is_empty())
    {
        eprintln!("note: {variable} is set in this environment and wins over the stored key");
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn logout(provider: &str, env: &HashMap<String, String>) -> anyhow::Result<ExitCode> {
    let home = resolve_home(env)?;
    if credentials::remove_api_key(&home, provider)? {
        eprintln!("removed the stored API key for `{provider}`");
    } else {
        eprintln!("no API key was stored for `{provider}`");
    }
    Ok(ExitCode::SUCCESS)
}
