//! The command line of the sandbox helper: built by the engine, parsed by the binary.
//!
//! The engine runs a sandboxed command as
//! `[<interpreter exe>, "sandbox", "linux", "--policy-json", JSON, "--cwd", DIR,
//! "--policy-cwd", DIR, ("--protect", PATH)*, "--root-fds", "N,N,…", "--", argv...]`.
//!
//! `--root-fds` hands the helper the session's writable roots as the directories the
//! session opened when it decided on them ([`super::RootAnchors`]), not as names: a name
//! a command can rename and replace between two commands; an open directory it cannot.
//! An empty list means no root at all (every candidate was refused). Without the option
//! (a person typing the helper form) the helper decides the roots itself, by the same
//! rules, from `--policy-json` and `--policy-cwd`.
//!
//! `--cwd` is where the command runs; `--policy-cwd` is the session's working directory,
//! the one the policy's writable roots come from. They are kept apart on purpose: the
//! shell tool's `workdir` argument is the model's choice, and a root derived from it would
//! let one tool call (`workdir: "/"`) make the whole machine writable.
//! The binary recognises [`HELPER_SUBCOMMAND`] before any runtime starts and hands the
//! remaining arguments to [`parse_linux_helper_args`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use interpreter_protocol::SandboxPolicy;

use super::{AnchoredRoot, SandboxError};

/// The first two arguments (after the program name) that select the helper.
pub const HELPER_SUBCOMMAND: [&str; 2] = ["sandbox", "linux"];

/// Set to `1` in a sandboxed command's environment when its network is cut off, so test
/// suites and scripts can skip network work instead of failing.
pub const NETWORK_DISABLED_ENV_VAR: &str = "INTERPRETER_SANDBOX_NETWORK_DISABLED";

const POLICY_FLAG: &str = "--policy-json";
const CWD_FLAG: &str = "--cwd";
/// The directory the policy's writable roots are taken from; `--cwd` when absent.
const POLICY_CWD_FLAG: &str = "--policy-cwd";
/// A path kept read-only wherever it lies (the agent's home); may be repeated.
const PROTECT_FLAG: &str = "--protect";
/// The inherited descriptors of the writable roots, comma-separated (possibly none).
const ROOT_FDS_FLAG: &str = "--root-fds";
const COMMAND_SEPARATOR: &str = "--";

/// What the helper needs to sandbox and run one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinuxHelperArgs {
    pub policy: SandboxPolicy,
    /// Where the command runs. It never widens the writable roots.
    pub cwd: PathBuf,
    /// The session's working directory: the writable root of `workspace-write`, and what
    /// relative `writable_roots` entries are relative to.
    pub policy_cwd: PathBuf,
    /// Paths that stay read-only even inside a writable root (see
    /// [`writable_roots`](super::writable_roots)).
    pub protected: Vec<PathBuf>,
    /// Descriptors of the writable roots, inherited from the engine; `None` when the
    /// helper is to decide the roots itself.
    pub root_fds: Option<Vec<i32>>,
    pub command: Vec<String>,
}

/// The full argv that runs `argv` in `cwd` under `policy` (whose roots come from
/// `policy_cwd`, the session's working directory) through the helper in `exe`, keeping
/// `protected` (the agent's home) out of the command's reach.
///
/// `roots` are the session's anchored writable roots: their descriptors are named on the
/// command line, and the caller must let the helper inherit exactly those (see
/// [`crate::shell::ExecRequest::inherited_roots`]). `None`: the helper decides the roots
/// (the helper form a person types).
///
/// Paths are passed as (lossy) UTF-8 because the helper's arguments are `String`s.
pub fn sandbox_argv(
    exe: &Path,
    policy: &SandboxPolicy,
    policy_cwd: &Path,
    cwd: &Path,
    protected: &[PathBuf],
    roots: Option<&[Arc<AnchoredRoot>]>,
    argv: &[String],
) -> Vec<String> {
    // Serializing this enum of plain fields cannot fail; if it ever did, the empty string
    // makes the helper refuse to start, which fails closed.
    let policy_json = serde_json::to_string(policy).unwrap_or_default();
    let mut full = Vec::with_capacity(argv.len() + 8);
    full.push(exe.to_string_lossy().into_owned());
    full.extend(HELPER_SUBCOMMAND.iter().map(|s| (*s).to_owned()));
    full.push(POLICY_FLAG.to_owned());
    full.push(policy_json);
    full.push(CWD_FLAG.to_owned());
    full.push(cwd.to_string_lossy().into_owned());
    full.push(POLICY_CWD_FLAG.to_owned());
    full.push(policy_cwd.to_string_lossy().into_owned());
    for path in protected {
        full.push(PROTECT_FLAG.to_owned());
        full.push(path.to_string_lossy().into_owned());
    }
    if let Some(roots) = roots {
        full.push(ROOT_FDS_FLAG.to_owned());
        full.push(
            roots
                .iter()
                .map(|root| root.raw_fd().to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    full.push(COMMAND_SEPARATOR.to_owned());
    full.extend(argv.iter().cloned());
    full
}

/// Parses the arguments that follow [`HELPER_SUBCOMMAND`]:
/// `--policy-json JSON --cwd DIR [--policy-cwd DIR] [--protect PATH]... [--root-fds N,…] --
/// COMMAND...` (the options in any order, all but `--protect` once each).
pub fn parse_linux_helper_args(args: &[String]) -> Result<LinuxHelperArgs, SandboxError> {
    let mut policy = None;
    let mut cwd = None;
    let mut policy_cwd = None;
    let mut protected = Vec::new();
    let mut root_fds: Option<Vec<i32>> = None;
    let mut index = 0;
    while index < args.len() {
        let flag = args[index].as_str();
        if flag == COMMAND_SEPARATOR {
            index += 1;
            break;
        }
        let value = args
            .get(index + 1)
            .ok_or_else(|| SandboxError::InvalidHelperArgs(format!("`{flag}` needs a value")))?;
        match flag {
            POLICY_FLAG if policy.is_none() => {
                policy = Some(
                    serde_json::from_str::<SandboxPolicy>(value)
                        .map_err(SandboxError::InvalidPolicyJson)?,
                );
            }
            CWD_FLAG if cwd.is_none() => cwd = Some(PathBuf::from(value)),
            POLICY_CWD_FLAG if policy_cwd.is_none() => policy_cwd = Some(PathBuf::from(value)),
            PROTECT_FLAG => {
                let path = PathBuf::from(value);
                if !path.is_absolute() {
                    return Err(SandboxError::InvalidHelperArgs(format!(
                        "{PROTECT_FLAG} must be absolute, got {}",
                        path.display()
                    )));
                }
                protected.push(path);
            }
            ROOT_FDS_FLAG if root_fds.is_none() => {
                let fds = value
                    .split(',')
                    .filter(|item| !item.is_empty())
                    .map(|item| item.parse::<i32>().ok().filter(|fd| *fd > 2))
                    .collect::<Option<Vec<i32>>>()
                    .ok_or_else(|| {
                        SandboxError::InvalidHelperArgs(format!(
                            "{ROOT_FDS_FLAG} takes descriptor numbers above 2, got {value}"
                        ))
                    })?;
                root_fds = Some(fds);
            }
            POLICY_FLAG | CWD_FLAG | POLICY_CWD_FLAG | ROOT_FDS_FLAG => {
                return Err(SandboxError::InvalidHelperArgs(format!(
                    "`{flag}` given more than once"
                )));
            }
            other => {
                return Err(SandboxError::InvalidHelperArgs(format!(
                    "unexpected argument `{other}` (expected {POLICY_FLAG}, {CWD_FLAG}, \
                     {POLICY_CWD_FLAG}, {PROTECT_FLAG}, {ROOT_FDS_FLAG} or --)"
                )));
            }
        }
        index += 2;
    }
    let policy =
        policy.ok_or_else(|| SandboxError::InvalidHelperArgs(format!("missing {POLICY_FLAG}")))?;
    let cwd = cwd.ok_or_else(|| SandboxError::InvalidHelperArgs(format!("missing {CWD_FLAG}")))?;
    if !cwd.is_absolute() {
        return Err(SandboxError::InvalidHelperArgs(format!(
            "{CWD_FLAG} must be absolute, got {}",
            cwd.display()
        )));
    }
    let policy_cwd = policy_cwd.unwrap_or_else(|| cwd.clone());
    if !policy_cwd.is_absolute() {
        return Err(SandboxError::InvalidHelperArgs(format!(
            "{POLICY_CWD_FLAG} must be absolute, got {}",
            policy_cwd.display()
        )));
    }
    let command = args.get(index..).unwrap_or_default().to_vec();
    if command.is_empty() {
        return Err(SandboxError::InvalidHelperArgs(
            "no command after `--`".to_owned(),
        ));
    }
    Ok(LinuxHelperArgs {
        policy,
        cwd,
        policy_cwd,
        protected,
        root_fds,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn argv_round_trips_through_the_parser() {
        let policy = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![PathBuf::from("/data")],
            network_access: true,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: true,
        };
        let command = strings(&["bash", "-lc", "echo -- hi --cwd x"]);
        let protected = vec![PathBuf::from("/home/me/.interpreter")];
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(AnchoredRoot::open(dir.path()).unwrap());
        let argv = sandbox_argv(
            Path::new("/usr/bin/interpreter"),
            &policy,
            Path::new("/ws"),
            Path::new("/ws/sub"),
            &protected,
            Some(std::slice::from_ref(&root)),
            &command,
        );
        assert_eq!(argv[0], "/usr/bin/interpreter");
        assert_eq!(&argv[1..3], &strings(&["sandbox", "linux"])[..]);
        let parsed = parse_linux_helper_args(&argv[3..]).unwrap();
        assert_eq!(
            parsed,
            LinuxHelperArgs {
                policy,
                cwd: PathBuf::from("/ws/sub"),
                policy_cwd: PathBuf::from("/ws"),
                protected,
                root_fds: Some(vec![root.raw_fd()]),
                command
            }
        );
    }

    #[test]
    fn accepts_the_short_policy_forms_people_type() {
        let args = strings(&[
            "--cwd",
            "/ws",
            "--policy-json",
            r#"{"type":"workspace-write","network_access":true}"#,
            "--",
            "ls",
        ]);
        let parsed = parse_linux_helper_args(&args).unwrap();
        assert_eq!(parsed.policy_cwd, PathBuf::from("/ws"));
        assert_eq!(
            parsed.policy,
            SandboxPolicy::WorkspaceWrite {
                writable_roots: vec![],
                network_access: true,
                exclude_tmpdir_env_var: false,
                exclude_slash_tmp: false,
            }
        );
    }

    #[test]
    fn rejects_missing_pieces() {
        let policy = r#"{"type":"read-only"}"#;
        for bad in [
            strings(&["--cwd", "/ws", "--", "true"]),
            strings(&["--policy-json", policy, "--", "true"]),
            strings(&["--policy-json", policy, "--cwd", "/ws", "--"]),
            strings(&["--policy-json", policy, "--cwd", "relative", "--", "true"]),
            strings(&["--policy-json", "{", "--cwd", "/ws", "--", "true"]),
            strings(&[
                "--policy-json",
                policy,
                "--cwd",
                "/ws",
                "--cwd",
                "/x",
                "--",
                "true",
            ]),
            strings(&["--bogus", "1", "--", "true"]),
            strings(&[
                "--policy-json",
                policy,
                "--cwd",
                "/ws",
                "--protect",
                "relative",
                "--",
                "true",
            ]),
            strings(&["--policy-json"]),
            strings(&[
                "--policy-json",
                policy,
                "--cwd",
                "/ws",
                "--root-fds",
                "3,1",
                "--",
                "true",
            ]),
        ] {
            assert!(parse_linux_helper_args(&bad).is_err(), "accepted {bad:?}");
        }
    }
}
