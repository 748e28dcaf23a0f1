//! End-to-end tests of the Linux sandbox helper against the running kernel.
//!
//! The helper has to be a real, freshly exec'd process, so this test binary owns its `main`
//! (`harness = false`) and plays three parts, chosen by its arguments:
//!
//! * no arguments (what `cargo test` passes): the test runner below;
//! * `sandbox linux --policy-json … --cwd … -- CMD…`: the helper, exactly as the
//!   `interpreter` binary dispatches it;
//! * `probe-* …`: the sandboxed command, which tries one operation and reports through its
//!   exit status whether the kernel denied it.
//!
//! A test therefore runs `THIS sandbox linux … -- THIS probe-write PATH` and checks the
//! status. Protected paths (`.git`, …) are kept read-only by bind mounts in a private mount
//! namespace when the machine allows one, and by Landlock alone otherwise; the tests check
//! whichever mode [`probe_support`] reports, and force the fallback once to check it too. When the kernel cannot enforce the sandbox, the tests assert that the helper
//! refuses with a clear error instead of skipping.

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("sandbox_linux: the Linux sandbox is only tested on Linux");
}

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::fs;
    use std::io;
    use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitCode, Stdio};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, bail, ensure};
    use interpreter_protocol::SandboxPolicy;
    use interpreter_tools::sandbox::{
        AnchoredRoot, HELPER_SUBCOMMAND, NETWORK_DISABLED_ENV_VAR, RootAnchors, SandboxSupport,
        parse_linux_helper_args, probe_support, run_linux_helper, sandbox_argv,
    };

    /// Exit status of a probe whose operation the kernel refused (EACCES, EPERM, EROFS,
    /// EBUSY).
    const DENIED: i32 = 13;
    /// Exit status of a probe whose operation failed for another reason.
    const OTHER_FAILURE: i32 = 1;
    const CHILD_DEADLINE: Duration = Duration::from_secs(60);
    /// The unprivileged account the user-namespace tests switch to when run as root.
    const NOBODY: u32 = 65534;
    /// `MOUNT_ATTR_RDONLY` from `<linux/mount.h>`.
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    /// The name of the whole suite as one test, for cargo-nextest.
    const NEXTEST_NAME: &str = "sandbox_linux";
    /// The fallback's warning on stderr starts with this.
    const FALLBACK_WARNING: &str = "could not create a mount namespace";

    pub(crate) fn main() -> ExitCode {
        let args: Vec<String> = std::env::args().collect();
        let role = args.get(1).map(String::as_str).unwrap_or_default();
        if args.get(1..3).is_some_and(|two| two == HELPER_SUBCOMMAND) {
            return helper(&args[3..]);
        }
        if role == "agent-shell-runner" {
            return agent_shell_runner(&args[2..]);
        }
        if role.starts_with("probe-") {
            return ExitCode::from(probe(role, &args[2..]));
        }
        // cargo-nextest lists tests with `--list --format terse` (once more with
        // `--ignored`) and then runs each as `THIS NAME --exact ...`: the whole suite is one
        // test to it, listed without running anything.
        if args.iter().any(|arg| arg == "--list") {
            if !args.iter().any(|arg| arg == "--ignored") {
                // The listing protocol is on stdout.
                #[allow(clippy::print_stdout)]
                {
                    println!("{NEXTEST_NAME}: test");
                }
            }
            return ExitCode::SUCCESS;
        }
        run_tests()
    }

    fn helper(args: &[String]) -> ExitCode {
        let env: HashMap<String, String> = std::env::vars().collect();
        let result =
            parse_linux_helper_args(args).and_then(|parsed| run_linux_helper(parsed, &env));
        match result {
            Ok(never) => match never {},
            Err(error) => {
                eprintln!("sandbox error: {error}");
                ExitCode::from(101)
            }
        }
    }

    /// Plays the agent: runs `args` through the shell runner, as the engine runs every
    /// command, and waits.
    fn agent_shell_runner(args: &[String]) -> ExitCode {
        let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        else {
            return ExitCode::from(101);
        };
        let request = interpreter_tools::ExecRequest {
            argv: args.to_vec(),
            cwd: std::env::temp_dir(),
            env: std::env::vars().collect(),
            timeout: Duration::from_secs(3600),
            output_max_bytes: 1024,
            inherited_roots: Vec::new(),
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        match runtime.block_on(interpreter_tools::shell::run(request, cancel, None)) {
            Ok(output) => {
                eprintln!("{}", output.aggregated_output);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("agent-shell-runner: {error}");
                ExitCode::from(101)
            }
        }
    }

    fn probe(role: &str, args: &[String]) -> u8 {
        let arg = |index: usize| args.get(index).map(String::as_str).unwrap_or_default();
        let outcome: io::Result<()> = match role {
            "probe-write" => fs::write(arg(0), "written from the sandbox"),
            "probe-remove" => fs::remove_file(arg(0)),
            "probe-rename" => fs::rename(arg(0), arg(1)),
            "probe-symlink" => std::os::unix::fs::symlink(arg(0), arg(1)),
            "probe-mkdir" => fs::create_dir(arg(0)),
            "probe-remount-writable" => remount_writable(arg(0)),
            "probe-umount" => detach_mount(arg(0)),
            "probe-mount-namespace" => {
                if probe_support().mount_namespace {
                    Ok(())
                } else {
                    Err(io::Error::from_raw_os_error(libc::EPERM))
                }
            }
            "probe-connect" => arg(0)
                .parse::<SocketAddr>()
                .map_err(io::Error::other)
                .and_then(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(5)))
                .map(drop),
            "probe-udp" => UdpSocket::bind("127.0.0.1:0").map(drop),
            "probe-env" => match std::env::var(arg(0)) {
                Ok(value) if value == "1" => Ok(()),
                _ => Err(io::Error::other(format!("{} is not 1", arg(0)))),
            },
            "probe-read" => fs::read(arg(0)).map(drop),
            "probe-list" => fs::read_dir(arg(0)).map(drop),
            // Succeeds only when the file can be read and holds `arg(1)`: a leak.
            "probe-leak" => fs::read_to_string(arg(0)).and_then(|text| {
                if text.contains(arg(1)) {
                    Ok(())
                } else {
                    Err(io::Error::other("read, but the secret is not in it"))
                }
            }),
            "probe-open-rw" => fs::File::options()
                .read(true)
                .write(true)
                .open(arg(0))
                .map(drop),
            "probe-openpty" => rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR)
                .map(drop)
                .map_err(io::Error::from),
            "probe-keyring" => read_user_keyring(),
            "probe-unix-connect" => std::os::unix::net::UnixStream::connect(arg(0)).map(drop),
            "probe-unix-datagram" => std::os::unix::net::UnixDatagram::unbound()
                .and_then(|socket| socket.send_to(b"from the sandbox", arg(0)))
                .map(drop),
            "probe-unix-datagram-pair" => std::os::unix::net::UnixDatagram::pair().map(drop),
            "probe-unix-stream-pair" => std::os::unix::net::UnixStream::pair().map(drop),
            "probe-count-processes" => count_processes(arg(0)),
            "probe-tiocsti" => inject_into_terminal(),
            "probe-kill" => kill(arg(0)),
            "probe-mknod" => make_block_device(arg(0)),
            "probe-chmod" => {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(arg(0), fs::Permissions::from_mode(0o4755))
            }
            "probe-utime" => fs::File::options()
                .write(true)
                .open(arg(0))
                .or_else(|_| fs::File::open(arg(0)))
                .and_then(|file| file.set_modified(std::time::SystemTime::UNIX_EPOCH)),
            "probe-chown" => arg(1)
                .parse::<u32>()
                .map_err(io::Error::other)
                .and_then(|uid| std::os::unix::fs::chown(arg(0), Some(uid), Some(uid))),
            "probe-no-capabilities" => no_capabilities(),
            "probe-sleep" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            other => Err(io::Error::other(format!("unknown probe {other}"))),
        };
        match outcome {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("{role} {args:?}: {error}");
                // ESRCH: a process outside the PID namespace cannot even be named.
                let denied = matches!(
                    error.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::EBUSY)
                ) || (role == "probe-kill"
                    && error.raw_os_error() == Some(libc::ESRCH))
                    // What the sandbox hides (other processes in /proc, other terminals in
                    // /dev) is not there to be opened at all.
                    || ((arg(0).starts_with("/proc/") || arg(0).starts_with("/dev/"))
                        && error.raw_os_error() == Some(libc::ENOENT));
                if denied {
                    DENIED as u8
                } else {
                    OTHER_FAILURE as u8
                }
            }
        }
    }

    /// Pushes one byte into the input queue of the terminal on stdin, as a keystroke.
    #[allow(unsafe_code)]
    fn inject_into_terminal() -> io::Result<()> {
        // A newline, so the canonical-mode input queue holds a complete line to count.
        let byte: libc::c_char = b'\n' as libc::c_char;
        // SAFETY: TIOCSTI reads one byte through the pointer, which points at a live byte.
        let result = unsafe { libc::ioctl(0, libc::TIOCSTI, &byte as *const libc::c_char) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn kill(pid: &str) -> io::Result<()> {
        let pid = pid
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| io::Error::other("not a pid"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::KILL)?;
        Ok(())
    }

    /// `keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)`: the first step of reading
    /// the user's keyring.
    #[allow(unsafe_code)]
    fn read_user_keyring() -> io::Result<()> {
        const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
        const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
        // SAFETY: this keyctl operation takes two integers and touches no memory of ours.
        let result = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_GET_KEYRING_ID,
                KEY_SPEC_USER_KEYRING,
                0,
            )
        };
        if result >= 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Succeeds when `/proc` lists at most `max` processes.
    fn count_processes(max: &str) -> io::Result<()> {
        let max: usize = max.parse().map_err(io::Error::other)?;
        let count = fs::read_dir("/proc")?
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
            .count();
        if count <= max {
            Ok(())
        } else {
            Err(io::Error::other(format!("/proc lists {count} processes")))
        }
    }

    /// `mknod PATH b 8 0`: the first SCSI disk, whatever is attached there.
    fn make_block_device(path: &str) -> io::Result<()> {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::BlockDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            rustix::fs::makedev(8, 0),
        )?;
        Ok(())
    }

    /// Every capability set of this process is empty, as `/proc/self/status` shows them.
    fn no_capabilities() -> io::Result<()> {
        let status = fs::read_to_string("/proc/self/status")?;
        let sets: Vec<&str> = status
            .lines()
            .filter(|line| line.starts_with("Cap"))
            .collect();
        let all_empty = sets.len() == 5
            && sets
                .iter()
                .all(|line| line.trim_end().ends_with("0000000000000000"));
        if all_empty {
            Ok(())
        } else {
            Err(io::Error::other(format!("capabilities remain: {sets:?}")))
        }
    }

    /// Clears the read-only attribute of the mount at `path`, as `mount -o remount,rw`
    /// does with the new mount API.
    #[allow(unsafe_code)]
    fn remount_writable(path: &str) -> io::Result<()> {
        #[repr(C)]
        struct MountAttr {
            attr_set: u64,
            attr_clr: u64,
            propagation: u64,
            userns_fd: u64,
        }
        let path = std::ffi::CString::new(path).map_err(io::Error::other)?;
        let attr = MountAttr {
            attr_set: 0,
            attr_clr: MOUNT_ATTR_RDONLY,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: path is NUL-terminated and attr a live mount_attr of the size passed; the
        // kernel only reads both during the call.
        let result = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                path.as_ptr(),
                0_u32,
                &attr as *const MountAttr,
                size_of::<MountAttr>(),
            )
        };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    #[allow(unsafe_code)]
    fn detach_mount(path: &str) -> io::Result<()> {
        let path = std::ffi::CString::new(path).map_err(io::Error::other)?;
        // SAFETY: path is a NUL-terminated string that outlives the call.
        if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    struct Outcome {
        code: Option<i32>,
        stdout: String,
        stderr: String,
    }

    /// How the helper is started, beyond the policy and the command.
    #[derive(Default)]
    struct Launch {
        /// Runs the helper through this command first (e.g. `setpriv` to drop root).
        prefix: Vec<String>,
        /// Makes `unshare` fail with `EPERM` in the helper, as on a machine without
        /// privileges or user namespaces.
        forbid_namespaces: bool,
        /// Makes the mount syscalls fail with `EPERM` in the helper, after it has entered
        /// its namespaces (a mount namespace that cannot be set up).
        forbid_mounts: bool,
        /// Paths kept read-only wherever they lie (the agent's home).
        protected: Vec<PathBuf>,
        /// Where the command runs, when not in the session's working directory (the shell
        /// tool's `workdir`).
        command_cwd: Option<PathBuf>,
        /// The roots as the engine hands them over (descriptors); `None` lets the helper
        /// decide them, as a person's helper command does.
        roots: Option<Vec<Arc<AnchoredRoot>>>,
    }

    /// Runs `THIS sandbox linux … -- THIS <probe…>` (or another command) and waits for it.
    fn run_sandboxed(policy: &SandboxPolicy, cwd: &Path, command: &[String]) -> Result<Outcome> {
        run_launched(policy, cwd, command, &Launch::default())
    }

    /// A seccomp filter whose only effect is that `unshare` fails with `EPERM`.
    fn unshare_forbidding_filter() -> Result<seccompiler::BpfProgram> {
        forbidding_filter(&[libc::SYS_unshare])
    }

    /// A seccomp filter whose only effect is that `syscalls` fail with `EPERM`.
    fn forbidding_filter(syscalls: &[libc::c_long]) -> Result<seccompiler::BpfProgram> {
        let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)?;
        let rules: std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>> = syscalls
            .iter()
            .map(|syscall| (*syscall, Vec::new()))
            .collect();
        let filter = seccompiler::SeccompFilter::new(
            rules,
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )?;
        Ok(seccompiler::BpfProgram::try_from(filter)?)
    }

    #[allow(unsafe_code)]
    fn run_launched(
        policy: &SandboxPolicy,
        cwd: &Path,
        command: &[String],
        launch: &Launch,
    ) -> Result<Outcome> {
        let exe = std::env::current_exe().context("locating the test binary")?;
        let argv: Vec<String> = launch
            .prefix
            .iter()
            .cloned()
            .chain(sandbox_argv(
                &exe,
                policy,
                cwd,
                launch.command_cwd.as_deref().unwrap_or(cwd),
                &launch.protected,
                launch.roots.as_deref(),
                command,
            ))
            .collect();
        let mut builder = Command::new(&argv[0]);
        builder
            .args(&argv[1..])
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut forbidden = Vec::new();
        if launch.forbid_namespaces {
            forbidden.push(libc::SYS_unshare);
        }
        if launch.forbid_mounts {
            forbidden.extend([
                libc::SYS_mount,
                libc::SYS_open_tree,
                libc::SYS_mount_setattr,
            ]);
        }
        if !forbidden.is_empty() {
            let filter = forbidding_filter(&forbidden)?;
            // SAFETY: between fork and exec the hook only issues the prctl and seccomp
            // syscalls for a filter compiled before the fork.
            unsafe {
                builder
                    .pre_exec(move || seccompiler::apply_filter(&filter).map_err(io::Error::other));
            }
        }
        if let Some(roots) = &launch.roots {
            let descriptors: Vec<i32> = roots.iter().map(|root| root.raw_fd()).collect();
            // SAFETY: between fork and exec the hook only clears close-on-exec on
            // descriptors the test holds open, with numbers collected before the fork.
            unsafe {
                builder.pre_exec(move || {
                    for &descriptor in &descriptors {
                        rustix::io::fcntl_setfd(
                            std::os::fd::BorrowedFd::borrow_raw(descriptor),
                            rustix::io::FdFlags::empty(),
                        )?;
                    }
                    Ok(())
                });
            }
        }
        let mut child = builder.spawn().context("spawning the helper")?;
        // Read both pipes on their own threads so a chatty command cannot block on a full
        // pipe while we wait for it.
        let stdout_reader = child.stdout.take().map(read_in_background);
        let stderr_reader = child.stderr.take().map(read_in_background);
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > CHILD_DEADLINE {
                child.kill()?;
                child.wait()?;
                bail!("sandboxed command {command:?} did not finish");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let collect = |reader: Option<std::thread::JoinHandle<String>>| {
            reader
                .map(|handle| handle.join().unwrap_or_default())
                .unwrap_or_default()
        };
        Ok(Outcome {
            code: status.code(),
            stdout: collect(stdout_reader),
            stderr: collect(stderr_reader),
        })
    }

    fn read_in_background(
        mut pipe: impl io::Read + Send + 'static,
    ) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut text = String::new();
            // A read error leaves what was read so far, which is all a failure message
            // can show anyway.
            let _ = pipe.read_to_string(&mut text);
            text
        })
    }

    fn shell(script: &str) -> Vec<String> {
        vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()]
    }

    fn probe_argv(role: &str, args: &[&Path]) -> Result<Vec<String>> {
        let exe = std::env::current_exe()?;
        let mut argv = vec![exe.to_string_lossy().into_owned(), role.to_owned()];
        argv.extend(args.iter().map(|arg| arg.to_string_lossy().into_owned()));
        Ok(argv)
    }

    /// Runs one probe in the sandbox and checks its exit status.
    fn expect(
        policy: &SandboxPolicy,
        cwd: &Path,
        role: &str,
        args: &[&Path],
        expected: i32,
    ) -> Result<()> {
        let outcome = run_sandboxed(policy, cwd, &probe_argv(role, args)?)?;
        ensure!(
            outcome.code == Some(expected),
            "{role} {args:?} under {policy:?}: expected exit {expected}, got {:?}; stderr: {}",
            outcome.code,
            outcome.stderr
        );
        Ok(())
    }

    fn workspace_write(network_access: bool) -> SandboxPolicy {
        // The temp dirs are excluded because the tests' "outside" directories live in /tmp.
        SandboxPolicy::WorkspaceWrite {
            writable_roots: Vec::new(),
            network_access,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        }
    }

    fn canonical_tempdir() -> Result<(tempfile::TempDir, PathBuf)> {
        let dir = tempfile::tempdir()?;
        let path = fs::canonicalize(dir.path())?;
        Ok((dir, path))
    }

    fn workspace_write_allows_inside_and_denies_outside() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        fs::create_dir(ws.join("sub"))?;
        let policy = workspace_write(false);

        expect(&policy, &ws, "probe-write", &[&ws.join("new.txt")], 0)?;
        expect(
            &policy,
            &ws,
            "probe-write",
            &[&ws.join("sub/deeper.txt")],
            0,
        )?;
        ensure!(ws.join("new.txt").exists() && ws.join("sub/deeper.txt").exists());
        expect(&policy, &ws, "probe-write", &[&outside.join("x")], DENIED)?;
        ensure!(!outside.join("x").exists(), "the write outside landed");

        // Shell plumbing keeps working: /dev/null redirections and relative paths.
        let shell = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "echo hi > /dev/null && echo piped > /dev/stderr && echo ok > relative.txt".to_owned(),
        ];
        let outcome = run_sandboxed(&policy, &ws, &shell)?;
        ensure!(outcome.code == Some(0), "shell failed: {}", outcome.stderr);
        ensure!(fs::read_to_string(ws.join("relative.txt"))? == "ok\n");
        Ok(())
    }

    fn read_only_denies_workspace_and_tmp() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let policy = SandboxPolicy::ReadOnly {
            network_access: false,
        };
        expect(&policy, &ws, "probe-write", &[&ws.join("x")], DENIED)?;
        let in_tmp = ws.with_extension("read-only-probe");
        expect(&policy, &ws, "probe-write", &[&in_tmp], DENIED)?;
        ensure!(!in_tmp.exists() && !ws.join("x").exists());

        let shell = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "echo hi > /dev/null && cat /etc/hostname > /dev/null".to_owned(),
        ];
        let outcome = run_sandboxed(&policy, &ws, &shell)?;
        ensure!(
            outcome.code == Some(0),
            "read-only shell failed: {}",
            outcome.stderr
        );
        Ok(())
    }

    fn symlink_inside_workspace_cannot_write_outside() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        std::os::unix::fs::symlink(&outside, ws.join("escape"))?;
        expect(
            &workspace_write(false),
            &ws,
            "probe-write",
            &[&ws.join("escape/stolen.txt")],
            DENIED,
        )?;
        ensure!(!outside.join("stolen.txt").exists());
        Ok(())
    }

    /// A workspace shaped like a repository: `.git` with hooks, `.interpreter`, sources, a
    /// top-level file and a symlink pointing outside. Returns the guards and the paths.
    fn repository_workspace() -> Result<(tempfile::TempDir, PathBuf, tempfile::TempDir, PathBuf)> {
        let (ws_guard, ws) = canonical_tempdir()?;
        let (outside_guard, outside) = canonical_tempdir()?;
        fs::create_dir_all(ws.join(".git/hooks"))?;
        fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n")?;
        fs::write(ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n")?;
        fs::create_dir(ws.join(".interpreter"))?;
        fs::create_dir(ws.join("src"))?;
        fs::create_dir(ws.join("not-git"))?;
        fs::write(ws.join("README.md"), "readme\n")?;
        std::os::unix::fs::symlink(&outside, ws.join("escape"))?;
        Ok((ws_guard, ws, outside_guard, outside))
    }

    fn chown_tree(path: &Path, uid: u32) -> Result<()> {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid))?;
        if fs::symlink_metadata(path)?.is_dir() {
            for entry in fs::read_dir(path)? {
                chown_tree(&entry?.path(), uid)?;
            }
        }
        Ok(())
    }

    /// Checks one probe; the helper's stderr must carry the fallback warning exactly when
    /// the mount namespace is expected to be missing.
    fn expect_launched(
        launch: &Launch,
        ws: &Path,
        role: &str,
        args: &[&Path],
        expected: i32,
        with_namespace: bool,
    ) -> Result<()> {
        let policy = workspace_write(false);
        let outcome = run_launched(&policy, ws, &probe_argv(role, args)?, launch)?;
        ensure!(
            outcome.code == Some(expected),
            "{role} {args:?}: expected exit {expected}, got {:?}; stderr: {}",
            outcome.code,
            outcome.stderr
        );
        let warned = outcome.stderr.matches(FALLBACK_WARNING).count();
        ensure!(
            warned == usize::from(!with_namespace),
            "{role}: fallback warning printed {warned} times with namespace {with_namespace}: {}",
            outcome.stderr
        );
        Ok(())
    }

    /// Everything under `.git` and `.interpreter` stays read-only, and the rest of the
    /// workspace stays usable: fully with a mount namespace, and without one everything but
    /// new entries in the repository root.
    fn protected_paths_stay_read_only(
        launch: &Launch,
        owner: Option<u32>,
        with_namespace: bool,
    ) -> Result<()> {
        let (_ws_guard, ws, _outside_guard, outside) = repository_workspace()?;
        if let Some(uid) = owner {
            chown_tree(&ws, uid)?;
            chown_tree(&outside, uid)?;
        }
        let hooks = ws.join(".git/hooks");
        let check = |role: &str, args: &[&Path], expected: i32| {
            expect_launched(launch, &ws, role, args, expected, with_namespace)
        };

        check("probe-write", &[&hooks.join("pre-commit")], DENIED)?;
        check("probe-write", &[&ws.join(".git/HEAD")], DENIED)?;
        check("probe-remove", &[&ws.join(".git/HEAD")], DENIED)?;
        check(
            "probe-rename",
            &[&hooks.join("pre-commit.sample"), &hooks.join("pre-commit")],
            DENIED,
        )?;
        check(
            "probe-symlink",
            &[&ws.join("src/evil.sh"), &hooks.join("post-checkout")],
            DENIED,
        )?;
        check("probe-mkdir", &[&ws.join(".git/new-dir")], DENIED)?;
        check(
            "probe-rename",
            &[&ws.join(".git"), &ws.join("git-moved")],
            DENIED,
        )?;
        check(
            "probe-rename",
            &[&ws.join("not-git"), &ws.join(".git")],
            DENIED,
        )?;
        check("probe-remount-writable", &[&ws.join(".git")], DENIED)?;
        check("probe-umount", &[&ws.join(".git")], DENIED)?;
        check(
            "probe-write",
            &[&ws.join(".interpreter/config.toml")],
            DENIED,
        )?;
        ensure!(!hooks.join("pre-commit").exists() && !hooks.join("post-checkout").exists());
        ensure!(!ws.join(".git/new-dir").exists() && !ws.join("git-moved").exists());
        ensure!(!ws.join(".interpreter/config.toml").exists());
        ensure!(fs::read_to_string(ws.join(".git/HEAD"))? == "ref: refs/heads/main\n");

        check("probe-write", &[&ws.join("src/new.rs")], 0)?;
        check("probe-write", &[&ws.join("README.md")], 0)?;
        check("probe-write", &[&ws.join("escape/x")], DENIED)?;
        ensure!(!outside.join("x").exists());

        // What coding agents do all the time in a repository root.
        let policy = workspace_write(false);
        let root_edits = shell(
            "touch NEWFILE && mkdir target && sed -i s/.*/edited/ README.md \
             && mv NEWFILE RENAMED && rm RENAMED",
        );
        let outcome = run_launched(&policy, &ws, &root_edits, launch)?;
        if with_namespace {
            ensure!(
                outcome.code == Some(0),
                "editing the repository root failed: {}",
                outcome.stderr
            );
            ensure!(ws.join("target").is_dir() && !ws.join("RENAMED").exists());
            ensure!(fs::read_to_string(ws.join("README.md"))?.trim_end() == "edited");
        } else {
            // Landlock alone cannot grant new entries next to `.git` (see docs/sandbox.md).
            ensure!(
                outcome.code != Some(0) && outcome.stderr.contains(FALLBACK_WARNING),
                "expected the degraded root to refuse new entries, with a warning: {:?} {}",
                outcome.code,
                outcome.stderr
            );
            ensure!(!ws.join("NEWFILE").exists());
        }
        Ok(())
    }

    fn gitdir_file_target_is_protected(with_namespace: bool) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        fs::create_dir_all(ws.join("modules/sub"))?;
        fs::write(ws.join("modules/sub/HEAD"), "ref\n")?;
        fs::create_dir_all(ws.join("modules/other"))?;
        fs::write(ws.join("modules/notes.txt"), "notes\n")?;
        fs::write(ws.join(".git"), "gitdir: modules/sub\n")?;
        let policy = workspace_write(false);
        expect(
            &policy,
            &ws,
            "probe-write",
            &[&ws.join("modules/sub/HEAD")],
            DENIED,
        )?;
        expect(&policy, &ws, "probe-write", &[&ws.join(".git")], DENIED)?;
        expect(&policy, &ws, "probe-remove", &[&ws.join(".git")], DENIED)?;
        // Moving the directory that holds the git directory would let a writable
        // look-alike take its place.
        expect(
            &policy,
            &ws,
            "probe-rename",
            &[&ws.join("modules"), &ws.join("moved")],
            DENIED,
        )?;
        ensure!(ws.join("modules/sub/HEAD").exists() && !ws.join("moved").exists());
        expect(
            &policy,
            &ws,
            "probe-write",
            &[&ws.join("modules/notes.txt")],
            0,
        )?;
        expect(
            &policy,
            &ws,
            "probe-write",
            &[&ws.join("modules/other/new.txt")],
            0,
        )?;
        // New entries next to the protected directory need the mount namespace.
        expect(
            &policy,
            &ws,
            "probe-write",
            &[&ws.join("modules/new.txt")],
            if with_namespace { 0 } else { DENIED },
        )?;
        Ok(())
    }

    /// The helper's mounts live in its own namespace: the host's table is untouched, both
    /// while the command runs and after it exits.
    fn host_mount_table_is_unchanged(with_namespace: bool) -> Result<()> {
        let (_ws_guard, ws, _outside_guard, _outside) = repository_workspace()?;
        let before = fs::read_to_string("/proc/self/mountinfo")?;
        let outcome = run_sandboxed(
            &workspace_write(false),
            &ws,
            &shell("cat /proc/self/mountinfo"),
        )?;
        let after = fs::read_to_string("/proc/self/mountinfo")?;
        ensure!(outcome.code == Some(0), "cat failed: {}", outcome.stderr);
        let git = ws.join(".git");
        let git = git.to_string_lossy();
        // mountinfo fields: id, parent, dev, root, mount point, options, ...
        let read_only_git_mount = outcome.stdout.lines().any(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            fields.get(4) == Some(&git.as_ref())
                && fields
                    .get(5)
                    .is_some_and(|options| options.split(',').any(|option| option == "ro"))
        });
        ensure!(
            read_only_git_mount == with_namespace,
            "read-only mount of .git inside the sandbox: {read_only_git_mount}, expected \
             {with_namespace}"
        );
        ensure!(
            !after.contains(git.as_ref()),
            "a sandbox mount leaked to the host"
        );
        ensure!(before == after, "the host mount table changed");
        Ok(())
    }

    /// `setpriv` that runs the rest of a command line as `nobody`, if this process may.
    fn as_nobody_prefix() -> Option<Vec<String>> {
        let root = fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|path| Path::new(path).exists())?;
        root.then(|| {
            vec![
                setpriv.to_owned(),
                format!("--reuid={NOBODY}"),
                format!("--regid={NOBODY}"),
                "--clear-groups".to_owned(),
                "--".to_owned(),
            ]
        })
    }

    /// An unprivileged user gets the mount namespace through a user namespace (when the
    /// machine allows those), keeping their own uid.
    fn unprivileged_user_gets_the_same_protection() -> Result<()> {
        let Some(prefix) = as_nobody_prefix() else {
            eprintln!("  (not root or no setpriv: the unprivileged case was not exercised)");
            return Ok(());
        };
        let mut probe = prefix.clone();
        probe.extend(probe_argv("probe-mount-namespace", &[])?);
        let status = Command::new(&probe[0])
            .args(&probe[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let with_namespace = status.code() == Some(0);
        eprintln!("  (mount namespace for an unprivileged user: {with_namespace})");
        let launch = Launch {
            prefix: prefix.clone(),
            ..Launch::default()
        };
        protected_paths_stay_read_only(&launch, Some(NOBODY), with_namespace)?;

        // Files the command creates belong to the user, not to an unmapped id.
        let (_ws_guard, ws) = canonical_tempdir()?;
        chown_tree(&ws, NOBODY)?;
        let outcome = run_launched(
            &workspace_write(false),
            &ws,
            &shell("id -u > uid.txt"),
            &launch,
        )?;
        ensure!(outcome.code == Some(0), "id failed: {}", outcome.stderr);
        ensure!(fs::read_to_string(ws.join("uid.txt"))?.trim() == NOBODY.to_string());
        ensure!(fs::metadata(ws.join("uid.txt"))?.uid() == NOBODY);
        Ok(())
    }

    fn network_follows_network_access() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        // Connections complete in the kernel backlog; nobody needs to accept them.
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let addr = Path::new(&addr);

        let offline = SandboxPolicy::ReadOnly {
            network_access: false,
        };
        expect(&offline, &ws, "probe-connect", &[addr], DENIED)?;
        expect(&offline, &ws, "probe-udp", &[], DENIED)?;
        expect(
            &workspace_write(false),
            &ws,
            "probe-connect",
            &[addr],
            DENIED,
        )?;
        expect(
            &offline,
            &ws,
            "probe-env",
            &[Path::new(NETWORK_DISABLED_ENV_VAR)],
            0,
        )?;

        let online = SandboxPolicy::ReadOnly {
            network_access: true,
        };
        expect(&online, &ws, "probe-connect", &[addr], 0)?;
        expect(&online, &ws, "probe-udp", &[], 0)?;
        expect(&workspace_write(true), &ws, "probe-connect", &[addr], 0)?;
        expect(
            &online,
            &ws,
            "probe-env",
            &[Path::new(NETWORK_DISABLED_ENV_VAR)],
            OTHER_FAILURE,
        )?;
        drop(listener);
        Ok(())
    }

    fn danger_full_access_allows_everything() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let policy = SandboxPolicy::DangerFullAccess;
        expect(&policy, &ws, "probe-write", &[&outside.join("x")], 0)?;
        expect(&policy, &ws, "probe-connect", &[Path::new(&addr)], 0)?;
        ensure!(outside.join("x").exists());
        Ok(())
    }

    fn is_root() -> bool {
        fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
    }

    /// A command cannot type into the terminal it was started from: it runs in a new session
    /// (so the terminal is not its controlling terminal) and seccomp refuses TIOCSTI. The
    /// same probe without the sandbox, as root, does inject: the check is not vacuous.
    fn terminal_injection_is_refused() -> Result<()> {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let (_ws_guard, ws) = canonical_tempdir()?;
        let run_on_terminal = |policy: &SandboxPolicy| -> Result<(Option<i32>, u64)> {
            let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
            grantpt(&master)?;
            unlockpt(&master)?;
            let name = ptsname(&master, Vec::new())?;
            let slave = fs::File::options()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open(std::ffi::OsStr::from_bytes(name.as_bytes()))?;
            // A login shell on that terminal: it leads a session whose controlling terminal
            // is the pty, and starts the helper as an ordinary child, as a user's shell does.
            let exe = std::env::current_exe()?;
            let helper = sandbox_argv(
                &exe,
                policy,
                &ws,
                &ws,
                &[],
                None,
                &probe_argv("probe-tiocsti", &[])?,
            );
            let mut shell = Command::new("/bin/sh");
            shell
                .arg("-c")
                .arg("\"$@\"; exit $?")
                .arg("sh")
                .args(&helper)
                .stdin(slave.try_clone()?)
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            // SAFETY: between fork and exec the hook only makes the setsid and ioctl
            // syscalls on the child's own stdin.
            #[allow(unsafe_code)]
            unsafe {
                shell.pre_exec(|| {
                    rustix::process::setsid()?;
                    // SAFETY: fd 0 is the slave the child was given as stdin.
                    let stdin = std::os::fd::BorrowedFd::borrow_raw(0);
                    rustix::process::ioctl_tiocsctty(stdin)?;
                    Ok(())
                });
            }
            let child = shell.spawn()?;
            let code = wait_with_deadline(child)?;
            let queued = rustix::io::ioctl_fionread(&slave)?;
            Ok((code, queued))
        };
        let (code, queued) = run_on_terminal(&workspace_write(false))?;
        ensure!(
            code == Some(DENIED),
            "TIOCSTI in the sandbox: expected exit {DENIED}, got {code:?}"
        );
        ensure!(
            queued == 0,
            "{queued} bytes were injected into the terminal"
        );
        if is_root() {
            let (code, queued) = run_on_terminal(&SandboxPolicy::DangerFullAccess)?;
            eprintln!("  (without the sandbox, as root: exit {code:?}, {queued} bytes injected)");
        }
        Ok(())
    }

    /// Waits for `child` (its stdout and stderr not piped, or drained elsewhere) within
    /// [`CHILD_DEADLINE`], and returns its exit code.
    fn wait_with_deadline(mut child: std::process::Child) -> Result<Option<i32>> {
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.code());
            }
            if started.elapsed() > CHILD_DEADLINE {
                child.kill()?;
                child.wait()?;
                bail!("the child did not finish");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `kill` of a process outside the sandbox fails (Landlock signal scope on ABI 6+, and
    /// with a PID namespace the process cannot even be named), and the process lives on.
    fn signals_cannot_reach_outside_processes(support: &SandboxSupport) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let mut outside = Command::new("sleep")
            .arg("1000")
            .stdin(Stdio::null())
            .spawn()?;
        let pid = outside.id().to_string();
        let result = (|| -> Result<()> {
            let policies = [
                workspace_write(false),
                SandboxPolicy::ReadOnly {
                    network_access: true,
                },
            ];
            for policy in &policies {
                expect(policy, &ws, "probe-kill", &[Path::new(&pid)], DENIED)?;
            }
            // Without namespaces only the Landlock scope is left to stop it.
            let launch = Launch {
                forbid_namespaces: true,
                ..Launch::default()
            };
            let outcome = run_launched(
                &workspace_write(false),
                &ws,
                &probe_argv("probe-kill", &[Path::new(&pid)])?,
                &launch,
            )?;
            let expected = if support.landlock_scopes { DENIED } else { 0 };
            ensure!(
                outcome.code == Some(expected),
                "kill without namespaces: expected exit {expected}, got {:?}: {}",
                outcome.code,
                outcome.stderr
            );
            Ok(())
        })();
        let survived = outside.try_wait()?.is_none();
        // Best effort: the sleeper is ours either way.
        let _ = outside.kill();
        let _ = outside.wait();
        result?;
        ensure!(survived, "the outside process was killed from the sandbox");
        Ok(())
    }

    /// Even as root, a sandboxed command has no capabilities: no device nodes, no chown of
    /// files, no reading other users' private files.
    fn capabilities_are_dropped() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let policy = workspace_write(false);
        expect(&policy, &ws, "probe-no-capabilities", &[], 0)?;
        expect(&policy, &ws, "probe-mknod", &[&ws.join("disk")], DENIED)?;
        ensure!(!ws.join("disk").exists(), "a block device was created");
        if is_root() {
            let private = ws.join("private.txt");
            fs::write(&private, "secret")?;
            std::os::unix::fs::chown(&private, Some(NOBODY), Some(NOBODY))?;
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&private, fs::Permissions::from_mode(0o600))?;
            // CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH are gone ...
            expect(&policy, &ws, "probe-read", &[&private], DENIED)?;
            // ... and CAP_CHOWN / CAP_FOWNER.
            expect(
                &policy,
                &ws,
                "probe-chown",
                &[&private, Path::new("0")],
                DENIED,
            )?;
            expect(&policy, &ws, "probe-chmod", &[&private], DENIED)?;
            ensure!(fs::metadata(&private)?.uid() == NOBODY);
        } else {
            eprintln!("  (not root: only the unprivileged half was exercised)");
        }
        Ok(())
    }

    /// The environment of a process outside the sandbox (here the test itself, standing in
    /// for the agent) cannot be read, even by root.
    fn outside_environ_is_unreadable() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let environ = PathBuf::from(format!("/proc/{}/environ", std::process::id()));
        ensure!(
            fs::read(&environ).is_ok(),
            "the test cannot read its own environ"
        );
        for policy in [
            workspace_write(false),
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
        ] {
            expect(&policy, &ws, "probe-read", &[&environ], DENIED)?;
        }
        Ok(())
    }

    /// The agent's home stays read-only inside the workspace, before and after it exists,
    /// and a workspace inside the home is not writable at all.
    fn agent_home_inside_workspace_stays_read_only() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let home = ws.join("state/agent-home");
        let launch = Launch {
            protected: vec![home.clone()],
            ..Launch::default()
        };
        let policy = workspace_write(false);
        let attempt = |cwd: &Path, path: &Path, launch: &Launch| -> Result<Option<i32>> {
            let outcome = run_launched(&policy, cwd, &probe_argv("probe-write", &[path])?, launch)?;
            Ok(outcome.code)
        };
        // Not there yet: the command must not be able to create it.
        ensure!(attempt(&ws, &home.join("config.toml"), &launch)? == Some(DENIED));
        ensure!(
            !home.join("config.toml").exists(),
            "config.toml was created"
        );
        // There, with a config the agent reads at startup.
        fs::create_dir_all(home.join("sessions"))?;
        fs::write(home.join("config.toml"), "model = \"m\"\n")?;
        for target in [
            home.join("config.toml"),
            home.join("sessions/rollout.jsonl"),
            home.join("state.sqlite"),
        ] {
            ensure!(
                attempt(&ws, &target, &launch)? == Some(DENIED),
                "{} is writable",
                target.display()
            );
        }
        let shell_append = shell(&format!(
            "echo 'sandbox_mode = \"danger-full-access\"' >> '{}'",
            home.join("config.toml").display()
        ));
        let outcome = run_launched(&policy, &ws, &shell_append, &launch)?;
        ensure!(outcome.code != Some(0), "appending to config.toml worked");
        ensure!(fs::read_to_string(home.join("config.toml"))? == "model = \"m\"\n");
        expect_rename_denied(&policy, &ws, &home, &launch)?;
        // The rest of the workspace, the home's parent included, stays writable.
        ensure!(attempt(&ws, &ws.join("state/other.txt"), &launch)? == Some(0));
        ensure!(attempt(&ws, &ws.join("src.txt"), &launch)? == Some(0));
        // A workspace inside the home is read-only as a whole.
        let inner = home.join("worktree");
        fs::create_dir_all(&inner)?;
        ensure!(attempt(&inner, &inner.join("x"), &launch)? == Some(DENIED));
        Ok(())
    }

    fn expect_rename_denied(
        policy: &SandboxPolicy,
        cwd: &Path,
        home: &Path,
        launch: &Launch,
    ) -> Result<()> {
        let moved = home.with_extension("moved");
        let outcome = run_launched(
            policy,
            cwd,
            &probe_argv("probe-rename", &[home, &moved])?,
            launch,
        )?;
        ensure!(
            outcome.code == Some(DENIED) && home.exists() && !moved.exists(),
            "the home could be moved away: {:?} {}",
            outcome.code,
            outcome.stderr
        );
        Ok(())
    }

    /// Outside the writable roots, chmod and utime fail even on files the command owns
    /// (as root: every root-owned file), because every mount there is read-only; without a
    /// mount namespace they work, which is the documented gap.
    fn metadata_outside_roots_is_read_only(with_namespace: bool) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        let file = outside.join("tool");
        fs::write(&file, "#!/bin/sh\n")?;
        let inside = ws.join("script.sh");
        fs::write(&inside, "#!/bin/sh\n")?;
        let policy = workspace_write(false);
        let expected = if with_namespace { DENIED } else { 0 };
        for role in ["probe-chmod", "probe-utime"] {
            expect(&policy, &ws, role, &[&file], expected)?;
            expect(&policy, &ws, role, &[&inside], 0)?;
        }
        if with_namespace {
            use std::os::unix::fs::PermissionsExt;
            ensure!(fs::metadata(&file)?.permissions().mode() & 0o4000 == 0);
        }
        // Forced fallback: the gap, exactly as documented.
        let launch = Launch {
            forbid_namespaces: true,
            ..Launch::default()
        };
        let outcome = run_launched(&policy, &ws, &probe_argv("probe-chmod", &[&file])?, &launch)?;
        ensure!(
            outcome.code == Some(0),
            "without namespaces chmod of an owned file outside the roots is the documented \
             gap; got {:?}: {}",
            outcome.code,
            outcome.stderr
        );
        Ok(())
    }

    /// Live `probe-sleep MARKER` processes.
    fn processes_with(marker: &str) -> Vec<u32> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        let is_sleeper = |cmdline: Vec<u8>| {
            let args: Vec<&[u8]> = cmdline.split(|&byte| byte == 0).collect();
            args.get(1) == Some(&b"probe-sleep".as_slice())
                && args.get(2) == Some(&marker.as_bytes())
        };
        // Zombies are dead already; they only wait for their parent.
        let is_zombie = |stat: String| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(is_sleeper))
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !is_zombie(stat))
            })
            .collect()
    }

    /// Waits until `done` holds, within [`CHILD_DEADLINE`].
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
        let started = Instant::now();
        while !done() {
            if started.elapsed() > CHILD_DEADLINE {
                bail!("gave up waiting: {what}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// When the process that started the helper (the agent) is SIGKILLed, no process of
    /// the command survives: with a PID namespace not even one left in the background.
    /// Without namespaces the command itself still dies (parent-death signal); its
    /// background processes are the documented gap.
    fn no_process_survives_the_helper(with_pid_namespace: bool) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        for forbid_namespaces in [false, true] {
            let marker = format!("sandbox-orphan-{}-{forbid_namespaces}", std::process::id());
            let exe = std::env::current_exe()?.to_string_lossy().into_owned();
            let command = vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                "\"$0\" probe-sleep \"$1\" & exec \"$0\" probe-sleep \"$1\"".to_owned(),
                exe.clone(),
                marker.clone(),
            ];
            let mut helper = sandbox_argv(
                Path::new(&exe),
                &workspace_write(false),
                &ws,
                &ws,
                &[],
                None,
                &command,
            );
            // The "agent": a shell that starts the helper as its child and waits.
            let mut argv = vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                "\"$@\"; exit $?".to_owned(),
                "sh".to_owned(),
            ];
            argv.append(&mut helper);
            let mut agent = Command::new(&argv[0]);
            agent
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if forbid_namespaces {
                let filter = unshare_forbidding_filter()?;
                // SAFETY: between fork and exec the hook only issues the prctl and seccomp
                // syscalls for a filter compiled before the fork.
                #[allow(unsafe_code)]
                unsafe {
                    agent.pre_exec(move || {
                        seccompiler::apply_filter(&filter).map_err(io::Error::other)
                    });
                }
            }
            let mut agent = agent.spawn()?;
            let started = wait_until("both sleepers to start", || {
                processes_with(&marker).len() == 2
            });
            agent.kill()?;
            agent.wait()?;
            started?;
            let all_gone = wait_until("the sleepers to die", || processes_with(&marker).is_empty());
            let left = processes_with(&marker);
            for pid in &left {
                // Clean up what the gap let survive.
                if let Some(pid) = i32::try_from(*pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            if with_pid_namespace && !forbid_namespaces {
                all_gone?;
            } else {
                // Without a PID namespace only the backgrounded sleeper may remain.
                ensure!(
                    left.len() <= 1,
                    "the command itself survived its agent: {left:?}"
                );
            }
        }
        Ok(())
    }

    /// Commands the shell runner starts die with the agent, sandboxed (with everything they
    /// started, given a PID namespace) or not (the command itself; what it puts in the
    /// background is the documented gap of danger-full-access).
    fn shell_runner_commands_die_with_the_agent(with_pid_namespace: bool) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let exe = std::env::current_exe()?;
        let exe_text = exe.to_string_lossy().into_owned();
        for sandboxed in [true, false] {
            let marker = format!("shell-runner-{}-{sandboxed}", std::process::id());
            let command = vec![
                "/bin/sh".to_owned(),
                "-c".to_owned(),
                "\"$0\" probe-sleep \"$1\" & exec \"$0\" probe-sleep \"$1\"".to_owned(),
                exe_text.clone(),
                marker.clone(),
            ];
            let argv = if sandboxed {
                sandbox_argv(&exe, &workspace_write(false), &ws, &ws, &[], None, &command)
            } else {
                command
            };
            let mut agent = Command::new(&exe)
                .arg("agent-shell-runner")
                .args(&argv)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let started = wait_until("both sleepers to start", || {
                processes_with(&marker).len() == 2
            });
            agent.kill()?;
            agent.wait()?;
            started?;
            let all_gone = wait_until("the sleepers to die", || processes_with(&marker).is_empty());
            let left = processes_with(&marker);
            for pid in &left {
                if let Some(pid) = i32::try_from(*pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            if sandboxed && with_pid_namespace {
                all_gone?;
            } else {
                ensure!(
                    left.len() <= 1,
                    "the command itself outlived the agent (sandboxed: {sandboxed}): {left:?}"
                );
            }
        }
        Ok(())
    }

    /// Namespaces entered but mounts refused: the sandbox falls back to Landlock alone and
    /// the command still runs normally, forking as often as it likes (the PID namespace the
    /// helper entered must still get its PID 1).
    fn commands_run_when_mounts_fail_after_the_namespaces() -> Result<()> {
        let (_ws_guard, ws, _outside_guard, outside) = repository_workspace()?;
        let launch = Launch {
            forbid_mounts: true,
            ..Launch::default()
        };
        let policy = workspace_write(false);
        let script = shell("/bin/true; /bin/true; echo forked > src/out.txt; /bin/true; echo done");
        let outcome = run_launched(&policy, &ws, &script, &launch)?;
        ensure!(
            outcome.code == Some(0) && outcome.stdout.trim() == "done",
            "the command failed: {:?} {} {}",
            outcome.code,
            outcome.stdout,
            outcome.stderr
        );
        ensure!(
            outcome.stderr.contains(FALLBACK_WARNING),
            "no fallback warning"
        );
        ensure!(fs::read_to_string(ws.join("src/out.txt"))?.trim() == "forked");
        let denied = run_launched(
            &policy,
            &ws,
            &probe_argv("probe-write", &[&ws.join(".git/hooks/pre-commit")])?,
            &launch,
        )?;
        ensure!(denied.code == Some(DENIED), "{:?}", denied.code);
        let outside_write = run_launched(
            &policy,
            &ws,
            &probe_argv("probe-write", &[&outside.join("x")])?,
            &launch,
        )?;
        ensure!(
            outside_write.code == Some(DENIED),
            "{:?}",
            outside_write.code
        );
        Ok(())
    }

    fn support_report_matches_this_kernel(support: &SandboxSupport) -> Result<()> {
        ensure!(
            support.landlock_abi.is_some_and(|abi| abi >= 3),
            "supported without Landlock ABI 3: {support:?}"
        );
        ensure!(support.landlock_enforced && support.seccomp && support.problems.is_empty());
        Ok(())
    }

    /// Without kernel support, every sandboxed policy must be refused, loudly.
    fn unsupported_kernel_refuses_to_run(support: &SandboxSupport) -> Result<()> {
        ensure!(
            !support.problems.is_empty(),
            "unsupported without a stated problem"
        );
        let (_ws_guard, ws) = canonical_tempdir()?;
        for policy in [
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
            workspace_write(true),
        ] {
            let outcome =
                run_sandboxed(&policy, &ws, &probe_argv("probe-write", &[&ws.join("x")])?)?;
            ensure!(
                outcome.code == Some(101) && outcome.stderr.contains("danger-full-access"),
                "expected a clear refusal, got {:?}: {}",
                outcome.code,
                outcome.stderr
            );
            ensure!(!ws.join("x").exists(), "ran unsandboxed");
        }
        Ok(())
    }

    fn expect_launched_probe(
        policy: &SandboxPolicy,
        cwd: &Path,
        launch: &Launch,
        role: &str,
        args: &[&Path],
        expected: i32,
    ) -> Result<()> {
        let outcome = run_launched(policy, cwd, &probe_argv(role, args)?, launch)?;
        ensure!(
            outcome.code == Some(expected),
            "{role} {args:?} under {policy:?}: expected exit {expected}, got {:?}; stderr: {}",
            outcome.code,
            outcome.stderr
        );
        Ok(())
    }

    /// The shell tool's `workdir` is where a command runs, never a writable root: a
    /// command started in `/` or in a directory outside the workspace writes nothing there.
    fn workdir_never_widens_the_roots() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        for command_cwd in [outside.clone(), PathBuf::from("/")] {
            let launch = Launch {
                command_cwd: Some(command_cwd.clone()),
                ..Launch::default()
            };
            let policy = workspace_write(false);
            expect_launched_probe(
                &policy,
                &ws,
                &launch,
                "probe-write",
                &[&outside.join("x")],
                DENIED,
            )?;
            expect_launched_probe(
                &policy,
                &ws,
                &launch,
                "probe-write",
                &[Path::new("/etc/written-from-workdir")],
                DENIED,
            )?;
            expect_launched_probe(&policy, &ws, &launch, "probe-write", &[&ws.join("x")], 0)?;
            ensure!(
                !outside.join("x").exists(),
                "wrote outside from workdir {command_cwd:?}"
            );
        }
        Ok(())
    }

    /// The agent's home (credentials, tokens, config, rollouts) cannot be read, listed or
    /// written, wherever it lies; a workspace inside it stays usable with its secrets hidden.
    fn agent_home_is_hidden(with_namespace: bool) -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_home_guard, home) = canonical_tempdir()?;
        fs::write(home.join("credentials.json"), "{\"key\":\"sk-secret\"}")?;
        fs::write(home.join("mcp-server.token"), "sk-secret")?;
        let project = home.join("projects/app");
        fs::create_dir_all(&project)?;
        let launch = Launch {
            protected: vec![home.clone()],
            ..Launch::default()
        };
        let credentials = home.join("credentials.json");
        for policy in [
            workspace_write(false),
            workspace_write(true),
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
        ] {
            let readable = if with_namespace { DENIED } else { 0 };
            expect_launched_probe(
                &policy,
                &ws,
                &launch,
                "probe-read",
                &[&credentials],
                readable,
            )?;
            expect_launched_probe(&policy, &ws, &launch, "probe-list", &[&home], readable)?;
            expect_launched_probe(
                &policy,
                &ws,
                &launch,
                "probe-write",
                &[&credentials],
                DENIED,
            )?;
            // The session's working directory inside the home: reachable, secrets not (a
            // file beside the way down reads as empty, a directory is inaccessible).
            let secret = Path::new("sk-secret");
            let leaks = if with_namespace { OTHER_FAILURE } else { 0 };
            expect_launched_probe(&policy, &project, &launch, "probe-list", &[&project], 0)?;
            for file in [&credentials, &home.join("mcp-server.token")] {
                expect_launched_probe(
                    &policy,
                    &project,
                    &launch,
                    "probe-leak",
                    &[file, secret],
                    leaks,
                )?;
            }
        }
        Ok(())
    }

    /// Other terminals (the host's `/dev/pts/N`, consoles) are not in the sandbox's `/dev`;
    /// the command still gets ptys of its own and the ordinary devices.
    fn other_terminals_are_out_of_reach() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let master =
            rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)?;
        rustix::pty::grantpt(&master)?;
        rustix::pty::unlockpt(&master)?;
        let name = rustix::pty::ptsname(&master, Vec::new())?;
        let other_terminal = PathBuf::from(name.to_string_lossy().into_owned());
        ensure!(other_terminal.exists(), "no pty to test with");
        for policy in [
            workspace_write(false),
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
        ] {
            expect(&policy, &ws, "probe-open-rw", &[&other_terminal], DENIED)?;
            for device in ["/dev/console", "/dev/tty1", "/dev/mem", "/dev/kmsg"] {
                expect(&policy, &ws, "probe-open-rw", &[Path::new(device)], DENIED)?;
            }
            expect(&policy, &ws, "probe-openpty", &[], 0)?;
            expect(&policy, &ws, "probe-open-rw", &[Path::new("/dev/null")], 0)?;
        }
        drop(master);
        Ok(())
    }

    /// The sandbox's `/proc` belongs to its PID namespace: the agent's `/proc/<pid>/fd` and
    /// every other process are not in it.
    fn processes_outside_are_invisible() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let own_fds = PathBuf::from(format!("/proc/{}/fd", std::process::id()));
        ensure!(
            fs::read_dir(&own_fds).is_ok(),
            "the test cannot list its own fds"
        );
        let policy = workspace_write(false);
        expect(&policy, &ws, "probe-list", &[&own_fds], DENIED)?;
        // The command, and at most the few processes a probe could start.
        expect(&policy, &ws, "probe-count-processes", &[Path::new("3")], 0)?;
        Ok(())
    }

    /// The user's kernel keyrings are out of reach (keyctl, add_key, request_key).
    fn keyring_is_refused() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        for policy in [
            workspace_write(true),
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
        ] {
            expect(&policy, &ws, "probe-keyring", &[], DENIED)?;
        }
        Ok(())
    }

    /// With network access off, no socket can be connected, `AF_UNIX` pathname sockets
    /// included (the agent's own app-server socket, an ssh-agent, a Docker daemon); with
    /// it on, they can.
    fn unix_sockets_follow_network_access() -> Result<()> {
        let (_ws_guard, ws) = canonical_tempdir()?;
        let (_sock_guard, sock_dir) = canonical_tempdir()?;
        let socket = sock_dir.join("control.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)?;
        listener.set_nonblocking(true)?;
        expect(
            &workspace_write(false),
            &ws,
            "probe-unix-connect",
            &[&socket],
            DENIED,
        )?;
        expect(
            &SandboxPolicy::ReadOnly {
                network_access: false,
            },
            &ws,
            "probe-unix-connect",
            &[&socket],
            DENIED,
        )?;
        expect(
            &workspace_write(true),
            &ws,
            "probe-unix-connect",
            &[&socket],
            0,
        )?;
        drop(listener);

        // A datagram sent to an outside socket by its address (`/dev/log`, a notify
        // socket) needs no connect: with network off it must not get out either.
        let datagrams = sock_dir.join("log.sock");
        let receiver = std::os::unix::net::UnixDatagram::bind(&datagrams)?;
        receiver.set_nonblocking(true)?;
        expect(
            &workspace_write(false),
            &ws,
            "probe-unix-datagram",
            &[&datagrams],
            DENIED,
        )?;
        let mut buffer = [0u8; 64];
        ensure!(
            receiver.recv(&mut buffer).is_err(),
            "a datagram got out of a sandbox with network off"
        );
        expect(
            &workspace_write(false),
            &ws,
            "probe-unix-datagram-pair",
            &[],
            DENIED,
        )?;
        // Stream pairs (how programs talk to their children) keep working.
        expect(
            &workspace_write(false),
            &ws,
            "probe-unix-stream-pair",
            &[],
            0,
        )?;
        expect(
            &workspace_write(true),
            &ws,
            "probe-unix-datagram",
            &[&datagrams],
            0,
        )?;
        ensure!(
            receiver.recv(&mut buffer).is_ok(),
            "with network on the datagram should arrive"
        );
        Ok(())
    }

    /// The engine hands the helper its roots as descriptors: a command that renamed the
    /// workspace's parent and planted a symlink to the outside where the workspace was
    /// changes nothing for the next command, which still writes only in the real
    /// workspace (attack 1a of the fourth adversarial pass).
    fn renamed_roots_stay_the_roots_they_were() -> Result<()> {
        let (_base_guard, base) = canonical_tempdir()?;
        let (_outside_guard, outside) = canonical_tempdir()?;
        let ws = base.join("a/ws");
        fs::create_dir_all(&ws)?;
        let policy = workspace_write(false);
        let anchors = RootAnchors::new();
        let roots = anchors.anchor(&policy, &ws, &HashMap::new(), &[]).roots;
        ensure!(roots.len() == 1, "one root expected: {roots:?}");

        fs::rename(base.join("a"), base.join("a.real"))?;
        fs::create_dir(base.join("a"))?;
        std::os::unix::fs::symlink(&outside, &ws)?;

        let launch = Launch {
            roots: Some(roots),
            ..Launch::default()
        };
        let escaped = outside.join("escaped");
        expect_launched_probe(&policy, &ws, &launch, "probe-write", &[&escaped], DENIED)?;
        ensure!(
            !escaped.exists(),
            "the planted symlink made the outside writable"
        );
        let inside = base.join("a.real/ws/written");
        expect_launched_probe(&policy, &ws, &launch, "probe-write", &[&inside], 0)?;
        ensure!(inside.exists());
        Ok(())
    }

    fn run_tests() -> ExitCode {
        let support = probe_support();
        eprintln!("sandbox support on this machine:\n{}", support.describe());

        type Case<'a> = (&'static str, Box<dyn Fn() -> Result<()> + 'a>);
        let mut cases: Vec<Case<'_>> = vec![(
            "danger_full_access_allows_everything",
            Box::new(danger_full_access_allows_everything),
        )];
        if support.supported {
            cases.extend([
                (
                    "support_report_matches_this_kernel",
                    Box::new(|| support_report_matches_this_kernel(&support))
                        as Box<dyn Fn() -> Result<()>>,
                ),
                (
                    "workspace_write_allows_inside_and_denies_outside",
                    Box::new(workspace_write_allows_inside_and_denies_outside),
                ),
                (
                    "read_only_denies_workspace_and_tmp",
                    Box::new(read_only_denies_workspace_and_tmp),
                ),
                (
                    "symlink_inside_workspace_cannot_write_outside",
                    Box::new(symlink_inside_workspace_cannot_write_outside),
                ),
                (
                    "protected_paths_stay_read_only",
                    Box::new(|| {
                        protected_paths_stay_read_only(
                            &Launch::default(),
                            None,
                            support.mount_namespace,
                        )
                    }),
                ),
                (
                    "protected_paths_stay_read_only_without_namespaces",
                    Box::new(|| {
                        let launch = Launch {
                            forbid_namespaces: true,
                            ..Launch::default()
                        };
                        protected_paths_stay_read_only(&launch, None, false)
                    }),
                ),
                (
                    "unprivileged_user_gets_the_same_protection",
                    Box::new(unprivileged_user_gets_the_same_protection),
                ),
                (
                    "gitdir_file_target_is_protected",
                    Box::new(|| gitdir_file_target_is_protected(support.mount_namespace)),
                ),
                (
                    "renamed_roots_stay_the_roots_they_were",
                    Box::new(renamed_roots_stay_the_roots_they_were),
                ),
                (
                    "host_mount_table_is_unchanged",
                    Box::new(|| host_mount_table_is_unchanged(support.mount_namespace)),
                ),
                (
                    "network_follows_network_access",
                    Box::new(network_follows_network_access),
                ),
                (
                    "terminal_injection_is_refused",
                    Box::new(terminal_injection_is_refused),
                ),
                (
                    "signals_cannot_reach_outside_processes",
                    Box::new(|| signals_cannot_reach_outside_processes(&support)),
                ),
                (
                    "capabilities_are_dropped",
                    Box::new(capabilities_are_dropped),
                ),
                (
                    "outside_environ_is_unreadable",
                    Box::new(outside_environ_is_unreadable),
                ),
                (
                    "agent_home_inside_workspace_stays_read_only",
                    Box::new(agent_home_inside_workspace_stays_read_only),
                ),
                (
                    "metadata_outside_roots_is_read_only",
                    Box::new(|| metadata_outside_roots_is_read_only(support.mount_namespace)),
                ),
                (
                    "no_process_survives_the_helper",
                    Box::new(|| no_process_survives_the_helper(support.pid_namespace)),
                ),
                (
                    "commands_run_when_mounts_fail_after_the_namespaces",
                    Box::new(commands_run_when_mounts_fail_after_the_namespaces),
                ),
                (
                    "workdir_never_widens_the_roots",
                    Box::new(workdir_never_widens_the_roots),
                ),
                (
                    "agent_home_is_hidden",
                    Box::new(|| agent_home_is_hidden(support.mount_namespace)),
                ),
                ("keyring_is_refused", Box::new(keyring_is_refused)),
                (
                    "unix_sockets_follow_network_access",
                    Box::new(unix_sockets_follow_network_access),
                ),
                (
                    "shell_runner_commands_die_with_the_agent",
                    Box::new(|| shell_runner_commands_die_with_the_agent(support.pid_namespace)),
                ),
            ]);
        } else {
            cases.push((
                "unsupported_kernel_refuses_to_run",
                Box::new(|| unsupported_kernel_refuses_to_run(&support)),
            ));
        }

        if support.supported && support.mount_namespace {
            cases.push((
                "other_terminals_are_out_of_reach",
                Box::new(other_terminals_are_out_of_reach),
            ));
        }
        if support.supported && support.pid_namespace {
            cases.push((
                "processes_outside_are_invisible",
                Box::new(processes_outside_are_invisible),
            ));
        }
        // `SANDBOX_LINUX_ONLY=name` runs the cases whose name contains it (for debugging).
        if let Ok(only) = std::env::var("SANDBOX_LINUX_ONLY") {
            cases.retain(|(name, _)| name.contains(only.as_str()));
        }
        let mut failures = 0;
        for (name, case) in &cases {
            match case() {
                Ok(()) => eprintln!("test {name} ... ok"),
                Err(error) => {
                    failures += 1;
                    eprintln!("test {name} ... FAILED\n  {error:#}");
                }
            }
        }
        eprintln!(
            "sandbox_linux: {} passed, {failures} failed",
            cases.len() - failures
        );
        if failures == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}
