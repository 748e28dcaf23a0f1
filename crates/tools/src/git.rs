//! Git run on the agent's own behalf, in repositories the model may have written to.
//!
//! A sandboxed command cannot write an existing `.git`, but it can `git init` a workspace
//! that is not a repository yet (where the policy allows it) and put anything in that
//! repository's config: `core.fsmonitor` (run by `git status` and `git diff`), a
//! `filter.*.clean` driver (run on every file a diff reads), a `diff.*.textconv` or
//! `diff.external` program, hooks. Git run by the agent itself runs outside the sandbox,
//! so every such setting would be code execution with the agent's rights.
//!
//! [`run`] is therefore the only way the agent runs git, and it runs only the subcommands
//! it knows how to harden:
//!
//! * Configuration is overridden through the environment (`GIT_CONFIG_COUNT`,
//!   `GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`), which wins over every config file and,
//!   unlike `-c NAME=VALUE`, splits nothing at `=`: a driver named `a=b`, or with bytes
//!   that are not UTF-8, is switched off like any other. The settings that run a program
//!   are given values that run nothing, and so is every filter, diff, merge, hook and
//!   credential driver the repository's configuration names (found by listing the
//!   configuration's names, which runs nothing). A name the environment cannot express
//!   (git refuses a newline in a key) is refused instead of run.
//! * Submodules are never entered: `--ignore-submodules=all` on every subcommand that
//!   looks at them (the command line is the only place a submodule's own `ignore`
//!   setting cannot override), `submodule.recurse=false`, `diff.ignoreSubmodules=all`,
//!   `status.submoduleSummary=false`. A submodule's git runs with the submodule's own
//!   config, which none of the above reaches.
//! * Diffs get `--no-ext-diff --no-textconv`; nothing pages (`--no-pager`), prompts,
//!   edits, fetches (no protocol is allowed, no lazy fetch of a partial clone), signs or
//!   verifies, or takes optional locks; an implicit bare repository (a directory the
//!   model shaped like a git directory) is not used; the machine-wide config is not read.
//! * A caller's argument that would undo any of this (`--ext-diff`, `--textconv`,
//!   `--recurse-submodules`, …) is refused.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// Settings that could make the agent's git run a program (or enter another repository),
/// each with the value that runs nothing.
const FIXED_SETTINGS: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    // `:` is git's own "no editor".
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.alternateRefsCommand", ""),
    ("diff.external", ""),
    // `git log`/`git show` would run `gpg.program` on every signed commit.
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    // An empty helper empties the list of helpers.
    ("credential.helper", ""),
    // No transport at all: a partial clone's lazy fetch from a local "remote" would run
    // that remote's `uploadpack` program.
    ("protocol.allow", "never"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("diff.submodule", "short"),
    ("status.submoduleSummary", "false"),
    // Protected configuration (the command line counts) may forbid implicit bare
    // repositories: a directory the model filled with HEAD, refs/ and objects/ and a
    // config is not used as one.
    ("safe.bareRepository", "explicit"),
];

/// Sections whose subsections name programs: for every subsection the repository's
/// configuration has, each key that runs a program, with the value that runs nothing.
const DRIVER_SETTINGS: &[(&str, &[(&str, &str)])] = &[
    (
        "filter",
        &[
            // An empty command is no filter.
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ],
    ),
    ("diff", &[("textconv", ""), ("command", "")]),
    ("merge", &[("driver", "")]),
    // Hooks named in the configuration (newer git): an empty event list runs the hook for
    // no event.
    (
        "hook",
        &[("command", ""), ("event", ""), ("enabled", "false")],
    ),
    ("credential", &[("helper", "")]),
];

/// Arguments a caller may not pass: each undoes part of the hardening.
const DEFEATING_ARGS: &[&str] = &[
    "--ext-diff",
    "--textconv",
    "--ignore-submodules",
    "--recurse-submodules",
    "--submodule",
    "--show-signature",
    "--paginate",
    "--open-files-in-pager",
    "--output",
];

/// The most of the configuration's names read: a config that lists more is refused.
const CONFIG_LISTING_MAX_BYTES: usize = 1024 * 1024;

/// The most drivers switched off; a config that names more is refused (each one is a few
/// environment variables, and the environment has a size limit).
const DRIVERS_MAX: usize = 2048;

/// The most stdout [`run`] keeps; git writing more is an error, not memory use.
const RUN_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The most of git's stderr kept for an error message.
const STDERR_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} timed out after {seconds} s")]
    TimedOut { args: String, seconds: u64 },
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("git {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
    /// The runner cannot make this git run safe, so it did not run it.
    #[error("git {args} was not run: {reason}")]
    Refused { args: String, reason: String },
    #[error("git {args} wrote more than {max_bytes} bytes")]
    TooMuchOutput { args: String, max_bytes: usize },
}

/// Runs `git ARGS` in `cwd` with every repository setting that could run a program turned
/// off, within `timeout`; its stdout on success.
pub async fn run(cwd: &Path, args: &[&str], timeout: Duration) -> Result<String, GitError> {
    let output = run_capped(cwd, args, timeout, RUN_MAX_BYTES).await?;
    if output.cut {
        return Err(GitError::TooMuchOutput {
            args: args.join(" "),
            max_bytes: RUN_MAX_BYTES,
        });
    }
    Ok(output.stdout)
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
    let shown = args.join(" ");
    let work = async {
        let command = hardened_command(cwd, args, &shown).await?;
        let captured = capture(command, max_bytes).await.map_err(GitError::Spawn)?;
        if !captured.cut && !captured.status.success() {
            return Err(GitError::Failed {
                args: shown.clone(),
                stderr: String::from_utf8_lossy(&captured.stderr).trim().to_owned(),
            });
        }
        Ok(CappedOutput {
            stdout: String::from_utf8_lossy(&captured.stdout).into_owned(),
            cut: captured.cut,
        })
    };
    // One deadline for the whole run, the configuration listing included.
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| GitError::TimedOut {
            args: shown.clone(),
            seconds: timeout.as_secs(),
        })?
}

/// The git process for `args`: the subcommand's own hardening flags after it, every
/// driver of the repository at `cwd` switched off.
async fn hardened_command(cwd: &Path, args: &[&str], shown: &str) -> Result<Command, GitError> {
    let refused = |reason: String| GitError::Refused {
        args: shown.to_owned(),
        reason,
    };
    let Some((subcommand, rest)) = args.split_first() else {
        return Err(refused("no subcommand".to_owned()));
    };
    let Some(flags) = subcommand_flags(subcommand) else {
        return Err(refused(format!(
            "`{subcommand}` is not a subcommand the agent's git runs"
        )));
    };
    if let Some(arg) = defeating_arg(rest) {
        return Err(refused(format!("`{arg}` would undo the hardening")));
    }
    let settings = settings_for(cwd).await.map_err(refused)?;
    let mut command = command(cwd, &settings);
    command
        .arg("--no-pager")
        .arg(subcommand)
        .args(flags)
        .args(rest);
    Ok(command)
}

/// The flags a subcommand the agent runs gets right after its name; `None` for a
/// subcommand the runner does not know how to harden.
fn subcommand_flags(subcommand: &str) -> Option<&'static [&'static str]> {
    const DIFFING: &[&str] = &["--no-ext-diff", "--no-textconv", "--ignore-submodules=all"];
    const STATUS: &[&str] = &["--ignore-submodules=all"];
    match subcommand {
        "diff" | "show" | "log" => Some(DIFFING),
        "status" => Some(STATUS),
        "rev-parse" | "merge-base" | "ls-files" | "add" => Some(&[]),
        _ => None,
    }
}

/// The first option in `args` (before `--` or `--end-of-options`, after which everything
/// is a name) that would undo the hardening.
fn defeating_arg<'a>(args: &[&'a str]) -> Option<&'a str> {
    args.iter()
        .take_while(|arg| **arg != "--" && **arg != "--end-of-options")
        .find(|arg| {
            DEFEATING_ARGS.iter().any(|flag| {
                arg.strip_prefix(flag)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
            })
        })
        .copied()
}

/// The fixed settings, plus every driver the configuration seen from `cwd` names
/// switched off. `Err` (the reason) when the configuration cannot be read or names a
/// driver that cannot be switched off: then git must not run there.
async fn settings_for(cwd: &Path) -> Result<Vec<(OsString, OsString)>, String> {
    let fixed = fixed_settings();
    let mut listing = command(cwd, &fixed);
    listing.args(["--no-pager", "config", "--null", "--name-only", "--list"]);
    let captured = capture(listing, CONFIG_LISTING_MAX_BYTES)
        .await
        .map_err(|error| format!("cannot list the repository's configuration: {error}"))?;
    if captured.cut {
        return Err(format!(
            "the repository's configuration lists more than {} KiB of names",
            CONFIG_LISTING_MAX_BYTES / 1024
        ));
    }
    if !captured.status.success() {
        return Err(format!(
            "cannot read the repository's configuration: {}",
            String::from_utf8_lossy(&captured.stderr).trim()
        ));
    }
    let mut settings = fixed;
    settings.extend(driver_settings(&captured.stdout)?);
    Ok(settings)
}

fn fixed_settings() -> Vec<(OsString, OsString)> {
    FIXED_SETTINGS
        .iter()
        .map(|(key, value)| (OsString::from(key), OsString::from(value)))
        .collect()
}

/// The settings that switch off every driver named in `listing` (`git config --null
/// --name-only --list`: names, each ended by a NUL). Names are bytes: a subsection may
/// hold anything but a newline and a NUL, and it is passed back to git as it came.
fn driver_settings(listing: &[u8]) -> Result<Vec<(OsString, OsString)>, String> {
    // (index in DRIVER_SETTINGS, subsection)
    let mut drivers: BTreeSet<(usize, &[u8])> = BTreeSet::new();
    for name in listing.split(|byte| *byte == 0) {
        // SECTION.SUBSECTION.KEY: the section ends at the first dot, the key starts after
        // the last; a two-level name has no subsection (the fixed settings cover those).
        let Some(first_dot) = name.iter().position(|byte| *byte == b'.') else {
            continue;
        };
        let Some(last_dot) = name.iter().rposition(|byte| *byte == b'.') else {
            continue;
        };
        if last_dot == first_dot {
            continue;
        }
        let section = &name[..first_dot];
        let Some(index) = DRIVER_SETTINGS
            .iter()
            .position(|(known, _)| known.as_bytes() == section)
        else {
            continue;
        };
        let subsection = &name[first_dot + 1..last_dot];
        if subsection.contains(&b'\n') {
            return Err(format!(
                "the configuration names a {} driver ({}) that cannot be switched off",
                DRIVER_SETTINGS[index].0,
                String::from_utf8_lossy(subsection).escape_debug()
            ));
        }
        drivers.insert((index, subsection));
        if drivers.len() > DRIVERS_MAX {
            return Err(format!(
                "the configuration names more than {DRIVERS_MAX} drivers"
            ));
        }
    }
    let mut settings = Vec::new();
    for (index, subsection) in drivers {
        let (section, keys) = DRIVER_SETTINGS[index];
        for (key, value) in keys {
            let mut name = format!("{section}.").into_bytes();
            name.extend_from_slice(subsection);
            name.extend_from_slice(format!(".{key}").as_bytes());
            settings.push((OsString::from_vec(name), OsString::from(value)));
        }
    }
    Ok(settings)
}

/// Git in `cwd` with `settings` as command-line configuration (through the environment),
/// where nothing prompts, pages, edits or fetches, the repository is the one `cwd` is in
/// (not one the agent's own environment names), and the machine-wide config is not read.
fn command(cwd: &Path, settings: &[(OsString, OsString)]) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", ":")
        .env("GIT_SEQUENCE_EDITOR", ":")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_NO_LAZY_FETCH", "1")
        .kill_on_drop(true);
    for name in [
        "GIT_EXTERNAL_DIFF",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        // Would win over `protocol.allow`.
        "GIT_ALLOW_PROTOCOL",
        // `-c` settings of whoever started the agent; ours come through GIT_CONFIG_COUNT.
        "GIT_CONFIG_PARAMETERS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    ] {
        command.env_remove(name);
    }
    command.env("GIT_CONFIG_COUNT", settings.len().to_string());
    for (index, (key, value)) in settings.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{index}"), key);
        command.env(format!("GIT_CONFIG_VALUE_{index}"), value);
    }
    command
}

/// What [`capture`] read of a finished (or stopped) git.
struct Captured {
    status: ExitStatus,
    stdout: Vec<u8>,
    /// Git wrote more than the cap and was killed; `status` says nothing then.
    cut: bool,
    stderr: Vec<u8>,
}

/// Runs `command`, keeping at most `max_bytes` of its stdout: past that git is killed.
async fn capture(mut command: Command, max_bytes: usize) -> std::io::Result<Captured> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other("git's output pipes are missing"));
    };
    // Stderr is read on the side: git blocked on a full stderr pipe would never finish
    // its stdout.
    let errors = tokio::spawn(read_stderr(stderr));
    let cap = u64::try_from(max_bytes).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    stdout
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .await?;
    if out.len() > max_bytes {
        // The rest is not wanted: stop git rather than drain it.
        let _ = child.start_kill();
        let status = child.wait().await?;
        errors.abort();
        out.truncate(max_bytes);
        return Ok(Captured {
            status,
            stdout: out,
            cut: true,
            stderr: Vec::new(),
        });
    }
    let status = child.wait().await?;
    let stderr = errors.await.unwrap_or_default();
    Ok(Captured {
        status,
        stdout: out,
        cut: false,
        stderr,
    })
}

/// The first [`STDERR_MAX_BYTES`] of `stderr`; the rest is read and dropped, so git never
/// waits on the pipe.
async fn read_stderr(mut stderr: tokio::process::ChildStderr) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(settings: &[(OsString, OsString)]) -> Vec<Vec<u8>> {
        settings
            .iter()
            .map(|(key, _)| key.clone().into_vec())
            .collect()
    }

    #[test]
    fn every_driver_named_is_switched_off_whatever_bytes_its_name_holds() {
        let listing = b"core.bare\0filter.a=b.clean\0filter.\xff.smudge\0diff.x.y.textconv\0\
                        hook.lint.command\0credential.https://h.example.helper\0user.name\0";
        let settings = driver_settings(listing).expect("expressible");
        let names = names(&settings);
        for expected in [
            &b"filter.a=b.clean"[..],
            b"filter.a=b.process",
            b"filter.a=b.required",
            b"filter.\xff.clean",
            b"diff.x.y.textconv",
            b"diff.x.y.command",
            b"hook.lint.event",
            b"hook.lint.enabled",
            b"credential.https://h.example.helper",
        ] {
            assert!(
                names.iter().any(|name| name == expected),
                "{} missing",
                String::from_utf8_lossy(expected)
            );
        }
        assert!(!names.iter().any(|name| name.starts_with(b"user.")));
    }

    #[test]
    fn a_driver_name_git_cannot_be_told_is_refused() {
        let error = driver_settings(b"filter.a\nb.clean\0").expect_err("a newline");
        assert!(error.contains("cannot be switched off"), "{error}");
    }

    #[test]
    fn options_that_undo_the_hardening_are_found_before_the_names_only() {
        assert_eq!(defeating_arg(&["--ext-diff"]), Some("--ext-diff"));
        assert_eq!(
            defeating_arg(&["-p", "--ignore-submodules=dirty"]),
            Some("--ignore-submodules=dirty")
        );
        assert_eq!(defeating_arg(&["--output-indicator-new=+"]), None);
        assert_eq!(defeating_arg(&["--", "--ext-diff"]), None);
        assert_eq!(defeating_arg(&["--end-of-options", "--textconv"]), None);
    }
}
