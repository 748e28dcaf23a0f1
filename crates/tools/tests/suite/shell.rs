//! End-to-end behaviour of the shell runner against real processes.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use interpreter_protocol::ExecOutputStream;
use interpreter_tools::shell::{ExecOutput, ExecRequest, ShellError, run};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn base_env() -> HashMap<String, String> {
    HashMap::from([(
        "PATH".to_string(),
        "/usr/local/bin:/usr/bin:/bin".to_string(),
    )])
}

fn request(script: &str, cwd: &Path, timeout: Duration) -> ExecRequest {
    ExecRequest {
        argv: vec!["bash".into(), "-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        env: base_env(),
        timeout,
        output_max_bytes: 64 * 1024,
        inherited_roots: Vec::new(),
    }
}

async fn run_script(script: &str, cwd: &Path) -> anyhow::Result<ExecOutput> {
    Ok(run(
        request(script, cwd, Duration::from_secs(30)),
        CancellationToken::new(),
        None,
    )
    .await?)
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits (bounded) for the kernel to finish tearing down a killed process; a zombie
/// that is not yet reaped by init still has a /proc entry for a short while.
async fn wait_until_gone(pid: u32) -> bool {
    for _ in 0..100 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Field 3 of /proc/<pid>/stat is the state; Z = zombie (already dead).
        let is_zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !process_exists(pid) || is_zombie {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn echo_captures_stdout_and_stderr() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = run_script("echo out; echo err >&2; exit 0", dir.path()).await?;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(out.aggregated_output.contains("out\n") && out.aggregated_output.contains("err\n"));
    assert!(!out.timed_out && !out.cancelled && !out.truncated);
    Ok(())
}

#[tokio::test]
async fn aggregated_output_keeps_arrival_order() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = run_script(
        "echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three",
        dir.path(),
    )
    .await?;
    assert_eq!(out.aggregated_output, "one\ntwo\nthree\n");
    Ok(())
}

#[tokio::test]
async fn exit_code_and_cwd_and_exact_env() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut req = request(
        "pwd; echo \"[$HOME]\"; echo \"$ONLY_THIS\"; exit 7",
        dir.path(),
        Duration::from_secs(30),
    );
    req.env.insert("ONLY_THIS".into(), "present".into());
    let out = run(req, CancellationToken::new(), None).await?;
    assert_eq!(out.exit_code, Some(7));
    let canonical = std::fs::canonicalize(dir.path())?;
    assert_eq!(
        out.stdout,
        format!("{}\n[]\npresent\n", canonical.display())
    );
    Ok(())
}

#[tokio::test]
async fn stdin_is_empty() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = run_script("cat; echo done", dir.path()).await?;
    assert_eq!(out.stdout, "done\n");
    Ok(())
}

#[tokio::test]
async fn streams_chunks_to_the_listener() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let out = run(
        request("echo a; echo b >&2", dir.path(), Duration::from_secs(30)),
        CancellationToken::new(),
        Some(tx),
    )
    .await?;
    assert_eq!(out.exit_code, Some(0));
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    while let Ok((stream, bytes)) = rx.try_recv() {
        match stream {
            ExecOutputStream::Stdout => stdout.extend(bytes),
            ExecOutputStream::Stderr => stderr.extend(bytes),
        }
    }
    assert_eq!(stdout, b"a\n");
    assert_eq!(stderr, b"b\n");
    Ok(())
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pid_file = dir.path().join("grandchild.pid");
    let script = format!(
        "echo started; sleep 100 & echo $! > '{}'; sleep 100",
        pid_file.display()
    );
    let begun = Instant::now();
    let out = run(
        request(&script, dir.path(), Duration::from_millis(1500)),
        CancellationToken::new(),
        None,
    )
    .await?;
    assert!(
        begun.elapsed() < Duration::from_secs(20),
        "run did not return promptly"
    );
    assert!(out.timed_out);
    assert!(!out.cancelled);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.stdout, "started\n", "output before the kill is kept");

    let grandchild: u32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
    assert!(
        wait_until_gone(grandchild).await,
        "grandchild {grandchild} survived"
    );
    Ok(())
}

#[tokio::test]
async fn cancellation_kills_and_reports() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let begun = Instant::now();
    let out = run(
        request(
            "echo before; sleep 100",
            dir.path(),
            Duration::from_secs(100),
        ),
        cancel,
        None,
    )
    .await?;
    assert!(begun.elapsed() < Duration::from_secs(20));
    assert!(out.cancelled);
    assert!(!out.timed_out);
    assert_eq!(out.stdout, "before\n");
    Ok(())
}

#[tokio::test]
async fn background_grandchild_holding_pipes_does_not_hang_a_normal_exit() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pid_file = dir.path().join("bg.pid");
    let script = format!(
        "sleep 100 & echo $! > '{}'; echo parent done",
        pid_file.display()
    );
    let begun = Instant::now();
    let out = run_script(&script, dir.path()).await?;
    assert!(begun.elapsed() < Duration::from_secs(20));
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, "parent done\n");
    // Leave nothing behind from this test.
    let pid: i32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status();
    Ok(())
}

#[tokio::test]
async fn output_cap_keeps_head_and_tail() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut req = request("seq 1 20000", dir.path(), Duration::from_secs(30));
    req.output_max_bytes = 100;
    let out = run(req, CancellationToken::new(), None).await?;
    assert!(out.truncated);
    assert!(out.stdout.starts_with("1\n2\n3\n"), "{}", out.stdout);
    assert!(out.stdout.ends_with("19999\n20000\n"), "{}", out.stdout);
    assert!(out.stdout.contains(" bytes omitted ...]\n"));
    assert!(out.aggregated_output.ends_with("20000\n"));
    assert!(out.stdout.len() < 200);
    Ok(())
}

#[tokio::test]
async fn invalid_utf8_is_decoded_lossily() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = run_script("printf 'a\\377b'", dir.path()).await?;
    assert_eq!(out.stdout, "a\u{FFFD}b");
    Ok(())
}

#[tokio::test]
async fn spawn_errors_are_specific() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut req = request("true", dir.path(), Duration::from_secs(5));
    req.argv = vec!["definitely-not-a-program-xyz".into()];
    match run(req, CancellationToken::new(), None).await {
        Err(ShellError::ProgramNotFound { program }) => {
            assert_eq!(program, "definitely-not-a-program-xyz");
        }
        other => panic!("expected ProgramNotFound, got {other:?}"),
    }

    let req = request("true", &dir.path().join("missing"), Duration::from_secs(5));
    assert!(matches!(
        run(req, CancellationToken::new(), None).await,
        Err(ShellError::CwdMissing { .. })
    ));

    let mut req = request("true", dir.path(), Duration::from_secs(5));
    req.argv.clear();
    assert!(matches!(
        run(req, CancellationToken::new(), None).await,
        Err(ShellError::EmptyCommand)
    ));
    Ok(())
}

#[tokio::test]
async fn dropping_the_run_future_kills_the_group() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pid_file = dir.path().join("dropped.pid");
    let script = format!("sleep 100 & echo $! > '{}'; sleep 100", pid_file.display());
    let running = run(
        request(&script, dir.path(), Duration::from_secs(100)),
        CancellationToken::new(),
        None,
    );
    // Give the script time to start its background job, then abandon the future.
    let abandoned = tokio::time::timeout(Duration::from_secs(2), running).await;
    assert!(
        abandoned.is_err(),
        "the command should still have been running"
    );
    let mut grandchild = None;
    for _ in 0..50 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            grandchild = Some(pid);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(grandchild) = grandchild else {
        anyhow::bail!("the script never wrote its pid file");
    };
    assert!(
        wait_until_gone(grandchild).await,
        "grandchild {grandchild} survived"
    );
    Ok(())
}
