//! The sandbox as seen from the real `interpreter` binary: what a sandboxed command can do
//! to the agent process that started it.
//!
//! The "agent" here is `interpreter sandbox -- COMMAND`, the same binary and startup path as
//! every other front end (non-dumpable from the start, the helper re-executed for the
//! command). Every wait has a deadline; none of them is an assertion about time.

#![cfg(target_os = "linux")]

use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Generous: a debug build on a loaded machine. Only a hang hits it.
const DEADLINE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(20);
const SECRET: &str = "sk-sandbox-agent-test-secret";
const NOBODY: u32 = 65534;

struct Agent {
    home: TempDir,
    work: TempDir,
}

impl Agent {
    fn new() -> Self {
        let agent = Self {
            home: tempfile::tempdir().expect("home"),
            work: tempfile::tempdir().expect("work"),
        };
        // Readable by the unprivileged account some tests switch to.
        for dir in [agent.home.path(), agent.work.path()] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        agent
    }

    /// `[prefix…] interpreter sandbox -s MODE -C WORK -- COMMAND…`, with the secret in its
    /// environment.
    fn command(&self, prefix: &[String], mode: &str, command: &[&str]) -> Command {
        let mut argv: Vec<String> = prefix.to_vec();
        argv.push(env!("CARGO_BIN_EXE_interpreter").to_owned());
        let work = self.work.path().to_string_lossy().into_owned();
        argv.extend(
            [
                "sandbox",
                "-c",
                "model=test-model",
                "-s",
                mode,
                "-C",
                &work,
                "--",
            ]
            .map(str::to_owned),
        );
        argv.extend(command.iter().map(|arg| (*arg).to_owned()));
        let mut builder = Command::new(&argv[0]);
        builder
            .args(&argv[1..])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("INTERPRETER_HOME", self.home.path())
            .env("SECRET_API_KEY", SECRET)
            .stdin(Stdio::null());
        builder
    }
}

fn is_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

fn setpriv() -> Option<&'static str> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|path| Path::new(path).exists())
}

fn as_nobody() -> Option<Vec<String>> {
    let setpriv = setpriv()?;
    is_root().then(|| {
        vec![
            setpriv.to_owned(),
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".to_owned(),
            "--".to_owned(),
        ]
    })
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < DEADLINE, "gave up waiting: {what}");
        std::thread::sleep(POLL);
    }
}

/// Runs `command` to completion within [`DEADLINE`]: exit code and stdout.
fn run(mut command: Command) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().expect("stdout");
    // The output is small; read it on a thread so a full pipe cannot stall the child.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let mut status = None;
    wait_until("the command to finish", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let text = reader.join().unwrap_or_default();
    (status.and_then(|status| status.code()), text)
}

/// Pids of the live processes whose argv is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|arg| [arg.as_bytes(), b"\0"].concat())
        .collect();
    fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| line == wanted))
        .filter(|pid| {
            // Zombies are dead already; they only wait for their parent.
            fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
        })
        .collect()
}

/// Whether `pid` has started a child yet (its startup, non-dumpable included, is over).
fn has_children(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        fs::read_to_string(task.path().join("children")).is_ok_and(|kids| !kids.trim().is_empty())
    })
}

/// Whether `pid` (a child of ours) is gone or a zombie.
fn exited(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

fn stop(mut child: Child) {
    // Best effort: the process is ours and the test is over.
    let _ = child.kill();
    let _ = child.wait();
}

/// A sandboxed command cannot read the agent's `/proc/PID/environ` (where API keys live),
/// even as root; and the agent is non-dumpable, so even an unsandboxed process of the same
/// unprivileged user cannot.
#[test]
fn agent_environ_is_unreadable_from_a_sandboxed_command() {
    let agent = Agent::new();
    let running = agent
        .command(&[], "read-only", &["sleep", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the agent");
    let pid = running.id();
    wait_until("the agent to start its command", || {
        has_children(pid) || exited(pid)
    });
    assert!(!exited(pid), "the agent exited early");
    let environ = format!("/proc/{pid}/environ");
    assert!(
        fs::read(&environ).is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(SECRET)),
        "the test itself (root or owner) should see the secret"
    );
    for mode in ["workspace-write", "read-only"] {
        let (code, stdout) = run(agent.command(&[], mode, &["cat", &environ]));
        assert_ne!(
            code,
            Some(0),
            "{mode}: cat of the agent's environ succeeded"
        );
        assert!(!stdout.contains(SECRET), "{mode}: the secret leaked");
    }
    stop(running);

    // Non-dumpable: the same user, unsandboxed, is refused too.
    let Some(prefix) = as_nobody() else {
        eprintln!("not root or no setpriv: the non-dumpable half was not exercised");
        return;
    };
    // The runs above, as the home's owner, made it private; `nobody` must enter it.
    fs::set_permissions(agent.home.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let running = agent
        .command(&prefix, "read-only", &["sleep", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the agent as nobody");
    let pid = running.id();
    wait_until("the agent to start its command", || {
        has_children(pid) || exited(pid)
    });
    assert!(!exited(pid), "the agent exited early");
    assert_eq!(
        fs::metadata(format!("/proc/{pid}/status"))
            .map(|meta| meta.uid())
            .ok(),
        Some(0),
        "a non-dumpable process's /proc files belong to root"
    );
    let mut cat = Command::new(&prefix[0]);
    cat.args(&prefix[1..])
        .arg("cat")
        .arg(format!("/proc/{pid}/environ"))
        .stdin(Stdio::null());
    let (code, stdout) = run(cat);
    stop(running);
    assert_ne!(code, Some(0), "the same user read the agent's environ");
    assert!(!stdout.contains(SECRET));
}

/// When the agent is SIGKILLed while a sandboxed command runs, no process of the command
/// survives, not even one it left in the background.
#[test]
fn no_command_process_survives_a_killed_agent() {
    let agent = Agent::new();
    // Distinctive arguments, so the test finds its own sleepers and nobody else's.
    let seconds = (5_000_000 + std::process::id()).to_string();
    let script = format!("sleep {seconds} & exec sleep {seconds}");
    let mut running = agent
        .command(&[], "workspace-write", &["sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the agent");
    let sleeper = ["sleep", seconds.as_str()];
    let pid = running.id();
    wait_until("both sleepers to start", || {
        processes(&sleeper).len() == 2 || exited(pid)
    });
    assert!(!exited(pid), "the agent exited early");
    running.kill().expect("SIGKILL the agent");
    running.wait().expect("reap the agent");
    let started = Instant::now();
    while !processes(&sleeper).is_empty() && started.elapsed() < DEADLINE {
        std::thread::sleep(POLL);
    }
    let left = processes(&sleeper);
    for pid in &left {
        // Clean up before failing: these are the test's own processes.
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    assert!(
        left.is_empty(),
        "command processes outlived the agent: {left:?}"
    );
}
