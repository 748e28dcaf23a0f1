//! `interpreter sandbox …`: the helper the engine re-executes, the support probe, and a
//! way for people to run any command under the same sandbox the agent uses.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use interpreter_core::config::{ConfigOverrides, load_config};
use interpreter_tools::sandbox;

use crate::cli::{ConfigArgs, SandboxArgs, SandboxCommand};
use crate::config_inputs;

/// `interpreter sandbox linux --policy-json J --cwd D -- CMD…`. Returns only on failure:
/// on success the process image is replaced by the command.
pub(crate) fn run_linux_helper_from_args(args: &[String]) -> ExitCode {
    let parsed = match sandbox::parse_linux_helper_args(args) {
        Ok(parsed) => parsed,
        Err(err) => {
            eprintln!("Error: {err}");
            return ExitCode::from(1);
        }
    };
    // The helper's own environment is what the sandboxed command inherits.
    let env: HashMap<String, String> = std::env::vars().collect();
    match sandbox::run_linux_helper(parsed, &env) {
        Ok(never) => match never {},
        Err(err) => {
            eprintln!("Error: {err}");
            ExitCode::from(1)
        }
    }
}

pub(crate) async fn run(
    args: SandboxArgs,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(SandboxCommand::Check { json }) => {
            let support = sandbox::probe_support();
            let mut stdout = std::io::stdout().lock();
            if json {
                writeln!(stdout, "{}", serde_json::to_string(&support)?)?;
            } else {
                writeln!(stdout, "{}", support.describe().trim_end())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(SandboxCommand::Linux { .. }) => {
            // Only reachable if the raw-argument dispatch in `main` was bypassed.
            anyhow::bail!("`sandbox linux` is internal and must be the first arguments")
        }
        None => run_for_person(args, config_args, env).await,
    }
}

async fn run_for_person(
    args: SandboxArgs,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    if args.command_argv.is_empty() {
        anyhow::bail!("no command given: use `interpreter sandbox [-s MODE] -- COMMAND ARGS...`");
    }
    let cwd = crate::exec::resolve_cwd(args.cwd.as_deref())?;
    let overrides = ConfigOverrides {
        cwd: Some(cwd.clone()),
        sandbox_mode: args.sandbox.map(|mode| mode.to_mode()),
        add_dirs: args.add_dirs.clone(),
        model_not_needed: true,
        ..Default::default()
    };
    let inputs = config_inputs::build(&config_args, env, cwd.clone(), overrides)?;
    let config = load_config(inputs)?;
    let exe = std::env::current_exe()?;
    // One command: the helper decides the roots itself when it starts (the same rules a
    // session applies once), so there is no later command for a rename to affect.
    let argv = sandbox::sandbox_argv(
        &exe,
        &config.sandbox_policy,
        &cwd,
        &cwd,
        &config.sandbox_protected_paths(),
        None,
        &args.command_argv,
    );
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("empty sandbox command line"))?;
    // The person's command runs for as long as it needs; Ctrl-C reaches it directly
    // through the terminal's process group, which ends this wait.
    let status = tokio::process::Command::new(program)
        .args(rest)
        .current_dir(&cwd)
        .status()
        .await?;
    Ok(exit_code_of(status))
}

fn exit_code_of(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return ExitCode::from(u8::try_from(128 + signal).unwrap_or(1));
        }
    }
    ExitCode::from(1)
}
