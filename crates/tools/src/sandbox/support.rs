//! What the running kernel can enforce, as reported by `interpreter sandbox check`, and the
//! catalogue of every protection and every known gap, each with the test that proves it.

use serde::Serialize;

/// Result of [`probe_support`](super::probe_support).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SandboxSupport {
    /// The kernel's Landlock ABI version, `None` when Landlock is absent or disabled.
    pub landlock_abi: Option<u32>,
    /// A child process could restrict itself with a fully enforced ruleset.
    pub landlock_enforced: bool,
    /// A child process could install the seccomp filter.
    pub seccomp: bool,
    /// A child process could enter a private mount namespace and make a path read-only
    /// there, which is how protected paths (`.git`, ...) stay read-only inside a writable
    /// root. Without it the sandbox still works, with Landlock alone keeping them read-only:
    /// then the directory holding them gets no new entries.
    pub mount_namespace: bool,
    /// Commands get a PID namespace of their own: everything they start dies with them,
    /// and processes outside cannot be named.
    pub pid_namespace: bool,
    /// Landlock ABI 6+ scopes signals and abstract UNIX sockets to the sandbox.
    pub landlock_scopes: bool,
    /// `read-only` and `workspace-write` commands can run here.
    pub supported: bool,
    /// Why not, in words meant for people.
    pub problems: Vec<String>,
    /// What works, but less well than it could, in words meant for people.
    pub warnings: Vec<String>,
    /// Every protection of a sandboxed command, and whether this machine has it.
    pub protections: Vec<Protection>,
    /// What a sandboxed command can still do that it arguably should not.
    pub gaps: Vec<Gap>,
}

/// One protection of sandboxed commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Protection {
    /// Short name, stable for scripts.
    pub name: &'static str,
    /// Whether this machine enforces it.
    pub active: bool,
    /// What it stops, and how.
    pub detail: &'static str,
    /// The test that proves it (`crates/tools/tests/sandbox_linux.rs` unless it says
    /// otherwise).
    pub test: &'static str,
}

/// One thing a sandboxed command can still do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub name: &'static str,
    /// Whether it applies on this machine.
    pub applies: bool,
    pub detail: &'static str,
    /// The test that shows the limit of the protection.
    pub test: &'static str,
}

impl SandboxSupport {
    /// Fills [`protections`](Self::protections) and [`gaps`](Self::gaps) from the probed
    /// flags.
    pub fn with_catalogue(mut self) -> Self {
        let enforced = self.supported;
        let namespaces = enforced && self.mount_namespace;
        let pid_ns = enforced && self.pid_namespace;
        let scopes = enforced && self.landlock_scopes;
        let protection = |name, active, detail, test| Protection {
            name,
            active,
            detail,
            test,
        };
        self.protections = vec![
            protection(
                "file-writes",
                enforced,
                "Landlock: writes, truncation, creation, removal and renames only beneath \
                 the writable roots and a few character devices",
                "workspace_write_allows_inside_and_denies_outside",
            ),
            protection(
                "protected-paths",
                enforced,
                ".git (and gitdir: targets), .agents and .interpreter stay read-only inside \
                 writable roots (read-only bind mounts, or Landlock carve-outs)",
                "protected_paths_stay_read_only",
            ),
            protection(
                "agent-home",
                enforced,
                "the agent's home (INTERPRETER_HOME or ~/.interpreter: config.toml, \
                 credentials, sessions/, state.sqlite) is read-only wherever it lies, for \
                 commands and apply_patch",
                "agent_home_inside_workspace_stays_read_only; crates/cli/tests/\
                 approval_matrix.rs the_agent_home_inside_the_workspace_is_never_writable",
            ),
            protection(
                "network",
                enforced,
                "with network access off, seccomp refuses non-UNIX sockets and Landlock \
                 (ABI 4+) refuses TCP bind/connect",
                "network_follows_network_access",
            ),
            protection(
                "no-terminal",
                enforced,
                "commands run in a new session without a controlling terminal, and seccomp \
                 refuses ioctl TIOCSTI and TIOCLINUX, so nothing can be typed into the \
                 user's terminal",
                "terminal_injection_is_refused",
            ),
            protection(
                "no-capabilities",
                enforced,
                "every capability set, the bounding set and the ambient set are emptied and \
                 the securebits locked, even for root: no mknod, no CAP_DAC_OVERRIDE, \
                 CAP_KILL, CAP_SYS_PTRACE, CAP_CHOWN, CAP_FOWNER",
                "capabilities_are_dropped",
            ),
            protection(
                "agent-memory",
                enforced,
                "the agent is non-dumpable and commands have no CAP_SYS_PTRACE, and \
                 ptrace/process_vm_* are refused: /proc/<agent>/environ (API keys) is \
                 unreadable",
                "outside_environ_is_unreadable; crates/cli/tests/suite/sandbox_agent.rs \
                 agent_environ_is_unreadable_from_a_sandboxed_command",
            ),
            protection(
                "signal-scope",
                scopes,
                "Landlock ABI 6+: no signals to processes outside the sandbox and no \
                 connecting to abstract UNIX sockets created outside it",
                "signals_cannot_reach_outside_processes",
            ),
            protection(
                "pid-namespace",
                pid_ns,
                "commands run as PID 1 of a PID namespace of their own: outside processes \
                 cannot be named (kill gets ESRCH), and when the command or the agent dies \
                 the kernel kills every process it started",
                "no_process_survives_the_helper; crates/cli/tests/suite/sandbox_agent.rs \
                 no_command_process_survives_a_killed_agent",
            ),
            protection(
                "die-with-agent",
                enforced,
                "PR_SET_PDEATHSIG(SIGKILL) on the helper, the command and unsandboxed \
                 commands: a command dies when the agent dies",
                "no_process_survives_the_helper; shell_runner_commands_die_with_the_agent",
            ),
            protection(
                "read-only-elsewhere",
                namespaces,
                "outside the writable roots every mount is read-only in the command's mount \
                 namespace, so chmod, chown and utime of files there fail (EROFS) even for \
                 their owner",
                "metadata_outside_roots_is_read_only",
            ),
            protection(
                "workdir-is-not-a-root",
                enforced,
                "the writable roots come from the policy and the session's working \
                 directory alone: the shell tool's workdir (even /) never widens them",
                "workdir_never_widens_the_roots; crates/cli/tests/suite/escapes.rs \
                 workdir_outside_the_workspace_writes_nothing",
            ),
            protection(
                "agent-home-hidden",
                namespaces,
                "the agent's home (credentials.json, mcp-credentials.json, token files, \
                 config.toml, other threads' rollouts) is covered by an empty mode-000 tmpfs: \
                 it cannot be read or listed",
                "agent_home_is_hidden; crates/cli/tests/suite/escapes.rs \
                 credential_files_are_unreadable",
            ),
            protection(
                "fresh-dev",
                namespaces,
                "a /dev of the command's own: null, zero, full, random, urandom, tty and a \
                 new devpts instance; the user's other terminals (/dev/pts/N), consoles and \
                 disks are not there",
                "other_terminals_are_out_of_reach",
            ),
            protection(
                "fresh-proc",
                pid_ns,
                "a /proc of the command's PID namespace: the agent's /proc/<pid>/fd, environ \
                 and every other process are not in it",
                "processes_outside_are_invisible",
            ),
            protection(
                "no-keyring",
                enforced,
                "seccomp refuses keyctl, add_key and request_key: the user's and session's \
                 kernel keyrings are out of reach",
                "keyring_is_refused",
            ),
            protection(
                "no-connect-without-network",
                enforced,
                "with network access off, seccomp refuses connect(2) for every socket \
                 family, AF_UNIX included, sendto(2) with an address and datagram AF_UNIX \
                 sockets: the agent's own app-server socket, an ssh-agent, a Docker socket \
                 or /dev/log cannot be reached",
                "unix_sockets_follow_network_access",
            ),
            protection(
                "no-mount-escape",
                enforced,
                "seccomp refuses the mount API, setns, open_by_handle_at and io_uring, so \
                 the read-only mounts stay in place even for root",
                "protected_paths_stay_read_only",
            ),
        ];
        let gap = |name, applies, detail, test| Gap {
            name,
            applies,
            detail,
            test,
        };
        self.gaps = vec![
            gap(
                "signals-without-scopes",
                enforced && !scopes && !pid_ns,
                "without Landlock ABI 6 and without a PID namespace a command can signal \
                 (kill) other processes of the same user outside the sandbox",
                "signals_cannot_reach_outside_processes",
            ),
            gap(
                "background-processes-without-pid-namespace",
                enforced && !pid_ns,
                "without a PID namespace only the command itself dies with the agent; \
                 processes it left in the background are reparented and keep running",
                "no_process_survives_the_helper",
            ),
            gap(
                "metadata-without-mount-namespace",
                enforced && !namespaces,
                "Landlock has no right for chmod, chown or utime: without a mount \
                 namespace a command can change the mode and times of files it owns \
                 outside the writable roots (as root: every root-owned file); chown of \
                 others' files still fails for lack of CAP_CHOWN",
                "metadata_outside_roots_is_read_only",
            ),
            gap(
                "sockets-with-network",
                enforced,
                "with network access on, pathname UNIX sockets (a Docker or D-Bus socket, \
                 the agent's own listeners) can be connected to; the agent's listeners \
                 refuse such peers by credential (token, peer checks)",
                "unix_sockets_follow_network_access",
            ),
            gap(
                "home-and-devices-without-mount-namespace",
                enforced && !namespaces,
                "without a mount namespace the agent's home stays readable (credentials \
                 included) and the host's /dev is used: other terminals can be opened \
                 wherever their modes allow",
                "agent_home_is_hidden",
            ),
            gap(
                "proc-without-pid-namespace",
                enforced && !pid_ns,
                "without a PID namespace (or when the kernel refuses a fresh /proc) the \
                 host's /proc stays visible: other processes' command lines can be read, \
                 though the agent is non-dumpable",
                "processes_outside_are_invisible",
            ),
            gap(
                "reads",
                enforced,
                "outside the agent's home commands can read every file the user can read \
                 (~/.ssh, ~/.aws, other projects)",
                "agent_home_is_hidden",
            ),
            gap(
                "unsandboxed-background",
                true,
                "danger-full-access commands die with the agent (parent-death signal), but \
                 processes they start in the background do not: that mode has no sandbox",
                "shell_runner_commands_die_with_the_agent",
            ),
        ];
        self
    }

    /// A short human report, one fact per line.
    pub fn describe(&self) -> String {
        let landlock = match self.landlock_abi {
            Some(abi) => format!("available (ABI {abi})"),
            None => "not available".to_owned(),
        };
        let yes_no = |flag: bool| if flag { "yes" } else { "no" };
        let mount_namespace = if self.mount_namespace {
            "yes"
        } else {
            "no (Landlock alone keeps them read-only; no new files next to .git)"
        };
        let mut report = format!(
            "Landlock: {landlock}\nLandlock enforced in a test process: {}\nseccomp filter: {}\n\
             Mount namespace for protected paths: {mount_namespace}\n\
             PID namespace for commands: {}\nLandlock signal and socket scopes: {}\n",
            yes_no(self.landlock_enforced),
            yes_no(self.seccomp),
            yes_no(self.pid_namespace),
            yes_no(self.landlock_scopes),
        );
        if self.supported {
            report.push_str("Sandbox: supported (read-only and workspace-write are enforced)\n");
        } else {
            report.push_str(
                "Sandbox: NOT supported; sandboxed commands will be refused, not run unsandboxed.\n\
                 Choose `--sandbox danger-full-access` explicitly to run commands without a sandbox.\n",
            );
        }
        for line in self.problems.iter().chain(&self.warnings) {
            report.push_str("- ");
            report.push_str(line);
            report.push('\n');
        }
        if !self.protections.is_empty() {
            report.push_str("\nProtections (test that proves each):\n");
            for protection in &self.protections {
                let mark = if protection.active { "on " } else { "OFF" };
                report.push_str(&format!(
                    "  [{mark}] {}: {} ({})\n",
                    protection.name, protection.detail, protection.test
                ));
            }
        }
        if !self.gaps.is_empty() {
            report.push_str("\nKnown gaps (test that shows each):\n");
            for gap in &self.gaps {
                let mark = if gap.applies { "here" } else { "n/a " };
                report.push_str(&format!(
                    "  [{mark}] {}: {} ({})\n",
                    gap.name, gap.detail, gap.test
                ));
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_lists_problems_and_the_explicit_opt_out() {
        let support = SandboxSupport {
            landlock_abi: None,
            landlock_enforced: false,
            seccomp: true,
            mount_namespace: false,
            supported: false,
            problems: vec!["Landlock is not available".to_owned()],
            warnings: vec!["no user namespaces".to_owned()],
            ..SandboxSupport::default()
        }
        .with_catalogue();
        let text = support.describe();
        assert!(text.contains("Landlock: not available"));
        assert!(text.contains("danger-full-access"));
        assert!(text.contains("- Landlock is not available"));
        assert!(text.contains("Mount namespace for protected paths: no"));
        assert!(text.contains("- no user namespaces"));
        let json = serde_json::to_value(&support).unwrap();
        assert_eq!(json["landlock_abi"], serde_json::Value::Null);
        assert_eq!(json["supported"], false);
        assert_eq!(json["mount_namespace"], false);
        // Nothing is claimed active on a machine that cannot enforce the sandbox.
        assert!(support.protections.iter().all(|p| !p.active));
        assert!(text.contains("Known gaps"));
    }
}
