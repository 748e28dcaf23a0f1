//! Git run on the agent's own behalf, in repositories the model may have written to.
//!
//! A sandboxed command cannot write an existing `.git`, but it can `git init` a workspace
//! that is not a repository yet (or a subdirectory of one) and put anything in that
//! repository's config: `core.fsmonitor` (run by `git status` and `git diff`), a
//! `filter.*.clean` driver (run on every file a diff reads), a `diff.*.textconv` or
//! `diff.external` program, hooks. Git run by the agent itself runs outside the sandbox,
//! so every such setting would be code execution with the agent's rights.
//!
//! [`run`] is therefore the only way the agent runs git: command-line `-c` settings (which
//! win over every config file) turn off the fsmonitor, hooks, the pager and the external
//! diff; every filter driver the repository's config names is emptied (an empty command is
//! no filter); diffs get `--no-ext-diff --no-textconv`; nothing prompts, and nothing takes
//! optional locks. Reading the config to find the filter names runs nothing.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// Settings that would make the agent's git run a program, turned off.
const HARDENING: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "diff.external=",
    "core.sshCommand=false",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.file.allow=always",
];

/// Subcommands whose output may pass through textconv or an external diff.
const DIFFING: &[&str] = &["diff", "show", "log"];

/// Filter-driver keys, each emptied for every driver the repository names.
const FILTER_KEYS: &[&str] = &["clean", "smudge", "process"];

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} timed out after {seconds} s")]
    TimedOut { args: String, seconds: u64 },
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
}

/// Runs `git ARGS` in `cwd` with every repository setting that could run a program turned
/// off, within `timeout`; its stdout on success.
pub async fn run(cwd: &Path, args: &[&str], timeout: Duration) -> Result<String, GitError> {
    let filters = filter_drivers(cwd, timeout).await;
    let mut full: Vec<String> = Vec::new();
    for setting in HARDENING {
        full.push("-c".to_owned());
        full.push((*setting).to_owned());
    }
    for driver in &filters {
        for key in FILTER_KEYS {
            full.push("-c".to_owned());
            full.push(format!("filter.{driver}.{key}="));
        }
        full.push("-c".to_owned());
        full.push(format!("filter.{driver}.required=false"));
    }
    let mut args_iter = args.iter();
    if let Some(subcommand) = args_iter.next() {
        full.push((*subcommand).to_owned());
        if DIFFING.contains(subcommand) {
            full.push("--no-ext-diff".to_owned());
            full.push("--no-textconv".to_owned());
        }
    }
    full.extend(args_iter.map(|arg| (*arg).to_owned()));
    let output = output_of(cwd, &full, timeout, &args.join(" ")).await?;
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The names of the filter drivers any config file of the repository at `cwd` defines
/// (`filter.NAME.clean`, …). A failure means no repository, or no drivers: nothing to empty.
async fn filter_drivers(cwd: &Path, timeout: Duration) -> Vec<String> {
    let args: Vec<String> = HARDENING
        .iter()
        .flat_map(|setting| ["-c".to_owned(), (*setting).to_owned()])
        .chain(
            [
                "config",
                "--null",
                "--name-only",
                "--get-regexp",
                r"^filter\.",
            ]
            .map(str::to_owned),
        )
        .collect();
    let Ok(output) = output_of(cwd, &args, timeout, "config").await else {
        return Vec::new();
    };
    let mut drivers: Vec<String> = output
        .stdout
        .split(|byte| *byte == 0)
        .filter_map(|name| std::str::from_utf8(name).ok())
        .filter_map(|name| {
            let rest = name.strip_prefix("filter.")?;
            let (driver, _key) = rest.rsplit_once('.')?;
            Some(driver.to_owned())
        })
        .collect();
    drivers.sort();
    drivers.dedup();
    drivers
}

async fn output_of(
    cwd: &Path,
    args: &[String],
    timeout: Duration,
    shown: &str,
) -> Result<std::process::Output, GitError> {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env_remove("GIT_EXTERNAL_DIFF")
        .env_remove("GIT_SSH_COMMAND")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .kill_on_drop(true);
    tokio::time::timeout(timeout, command.output())
        .await
        .map_err(|_| GitError::TimedOut {
            args: shown.to_owned(),
            seconds: timeout.as_secs(),
        })?
        .map_err(GitError::Spawn)
}
