//! `interpreter hooks list|trust`: the hooks a thread started in this directory would
//! find (the engine's discovery), and trusting a repository's hooks at their current
//! content (the engine's trust record in the user config).

use std::collections::HashMap;
use std::io::Write as _;
use std::process::ExitCode;

use interpreter_core::config::{ConfigOverrides, load_config};
use interpreter_core::hooks::{self, HookSet, HookSources, TrustStatus};
use serde_json::json;

use crate::cli::{ConfigArgs, HooksArgs, HooksCommand};
use crate::config_inputs;
use crate::terminal::neutralize_controls;

pub(crate) fn run(
    args: HooksArgs,
    config: &ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let cwd = crate::exec::resolve_cwd(None)?;
    let inputs = config_inputs::build(config, env, cwd, ConfigOverrides::default())?;
    let resolved = load_config(inputs.clone())?;
    let set = HookSet::discover(&resolved.cwd, &HookSources::of(&resolved));
    let mut out = std::io::stdout().lock();
    match args.command {
        HooksCommand::List { json } => {
            if json {
                let hooks: Vec<_> = set
                    .handlers
                    .iter()
                    .map(|h| {
                        json!({
                            "key": h.key,
                            "event": hooks::event_config_name(h.event),
                            "matcher": h.matcher,
                            "command": h.command,
                            "timeout_sec": h.timeout.as_secs(),
                            "source": match h.source {
                                interpreter_protocol::HookSource::User => "user",
                                interpreter_protocol::HookSource::Project => "project",
                            },
                            "source_path": h.source_path,
                            "enabled": h.enabled,
                            "trust": h.trust.as_str(),
                            "current_hash": h.current_hash,
                            "runs": h.runs(),
                        })
                    })
                    .collect();
                writeln!(out, "{}", serde_json::Value::Array(hooks))?;
            } else {
                out.write_all(listing(&set).as_bytes())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        HooksCommand::Trust { keys, all } => {
            let known: Vec<&str> = set.handlers.iter().map(|h| h.key.as_str()).collect();
            if let Some(unknown) = keys.iter().find(|key| !known.contains(&key.as_str())) {
                eprintln!(
                    "Error: no hook `{}` here; `interpreter hooks list` prints the keys",
                    neutralize_controls(unknown)
                );
                return Ok(ExitCode::from(2));
            }
            let chosen = (!all).then_some(keys.as_slice());
            let trusted = hooks::trust(&inputs, &set, chosen)?;
            if trusted.is_empty() {
                writeln!(
                    out,
                    "Nothing to trust: the project hooks named are trusted already."
                )?;
            }
            for key in trusted {
                writeln!(out, "trusted {}", neutralize_controls(&key))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The human listing: one block per hook, then problems.
fn listing(set: &HookSet) -> String {
    let mut out = String::new();
    if set.handlers.is_empty() {
        out.push_str("No hooks configured for this directory.\n");
    }
    for h in &set.handlers {
        let state = if !h.enabled {
            "disabled"
        } else if h.trust == TrustStatus::Trusted {
            "runs"
        } else {
            h.trust.as_str()
        };
        out.push_str(&format!(
            "{} [{}] {}\n  command: {}\n  from:    {}\n  key:     {}\n  hash:    {}\n",
            hooks::event_config_name(h.event),
            neutralize_controls(h.matcher.as_deref().unwrap_or("*")),
            state,
            neutralize_controls(&h.command),
            h.source_path.display(),
            neutralize_controls(&h.key),
            h.current_hash,
        ));
    }
    for warning in &set.warnings {
        out.push_str(&format!("warning: {}\n", neutralize_controls(warning)));
    }
    for (path, why) in &set.errors {
        out.push_str(&format!(
            "error: {}: {}\n",
            path.display(),
            neutralize_controls(why)
        ));
    }
    out
}
