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
    // `git log`/`git show` would run `gpg.program` on every signed commit.
    "log.showSignature=false",
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
    let full = hardened_args(cwd, args, timeout).await;
    let output = output_of(cwd, &full, timeout, &args.join(" ")).await?;
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Output of [`run_capped`]: at most the cap's bytes of stdout, and whether there was more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CappedOutput {
    pub stdout: String,
    /// Git wrote more than the cap; it was stopped there.
    pub cut: bool,
}

/// [`run`], keeping at most `max_bytes` of stdout: a diff of a huge tree is stopped (and
/// the process killed) once that much has been read, so it never has to fit in memory.
pub async fn run_capped(
    cwd: &Path,
    args: &[&str],
    timeout: Duration,
    max_bytes: usize,
) -> Result<CappedOutput, GitError> {
    use tokio::io::AsyncReadExt;

    let full = hardened_args(cwd, args, timeout).await;
    let shown = args.join(" ");
    let mut child = command(cwd, &full)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitError::Spawn)?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(GitError::Spawn(std::io::Error::other(
            "git's output pipes are missing",
        )));
    };
    let cap = u64::try_from(max_bytes).unwrap_or(u64::MAX);
    let run = async {
        // Stderr is read on the side: git blocked on a full stderr pipe would never finish
        // its stdout.
        let errors = tokio::spawn(read_stderr(stderr));
        let mut out = Vec::new();
        stdout
            .take(cap.saturating_add(1))
            .read_to_end(&mut out)
            .await
            .map_err(GitError::Spawn)?;
        if out.len() > max_bytes {
            // The rest is not wanted: stop git rather than drain it.
            let _ = child.start_kill();
            let _ = child.wait().await;
            errors.abort();
            out.truncate(max_bytes);
            return Ok(CappedOutput {
                stdout: String::from_utf8_lossy(&out).into_owned(),
                cut: true,
            });
        }
        let status = child.wait().await.map_err(GitError::Spawn)?;
        if !status.success() {
            let stderr = errors.await.unwrap_or_default();
            return Err(GitError::Failed {
                args: shown.clone(),
                stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
            });
        }
        Ok(CappedOutput {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            cut: false,
        })
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| GitError::TimedOut {
            args: shown.clone(),
            seconds: timeout.as_secs(),
        })?
}

/// The most of git's stderr kept for an error message.
const STDERR_MAX_BYTES: usize = 64 * 1024;

/// The first [`STDERR_MAX_BYTES`] of `stderr`; the rest is read and dropped, so git never
/// waits on the pipe.
async fn read_stderr(mut stderr: tokio::process::ChildStderr) -> Vec<u8> {
    use tokio::io::AsyncReadExt;

    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = STDERR_MAX_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// `args` with the hardening settings in front and, for diffing subcommands, the flags
/// that keep external diff and textconv programs from running.
async fn hardened_args(cwd: &Path, args: &[&str], timeout: Duration) -> Vec<String> {
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
    full
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
    tokio::time::timeout(timeout, command(cwd, args).output())
        .await
        .map_err(|_| GitError::TimedOut {
            args: shown.to_owned(),
            seconds: timeout.as_secs(),
        })?
        .map_err(GitError::Spawn)
}

/// Git with `args` in `cwd`, in an environment where nothing prompts, pages or runs an
/// external diff, and the machine-wide config is not read.
fn command(cwd: &Path, args: &[String]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_EXTERNAL_DIFF")
        .env_remove("GIT_SSH_COMMAND")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .kill_on_drop(true);
    command
}
