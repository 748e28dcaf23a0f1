//! A child process spoken to in JSON lines (one JSON value per line on stdin/stdout),
//! where every read has a deadline.
//!
//! Stdout is read by a background task into a queue, so a deadline never leaves a
//! half-read line behind; a stdout line that is not JSON is an error (stdio protocols
//! must keep stdout clean). Stderr is collected for failure messages. The child is
//! killed when the handle is dropped.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running child speaking JSON lines.
pub struct JsonLinesProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    /// Messages read past by [`Self::read_until`] and not yet returned.
    pub seen: Vec<Value>,
}

impl JsonLinesProcess {
    /// Spawn `command` with piped stdio (the caller sets program, args, env and cwd).
    pub fn spawn(mut command: Command) -> anyhow::Result<Self> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().context("spawning child process")?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("child stdout")?;
        let stderr = child.stderr.take().context("child stderr")?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = collected.clone();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            stdout: rx,
            stderr: collected,
            seen: Vec::new(),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Write one JSON value as a line.
    pub async fn write_json(&mut self, value: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.write_raw(&line).await
    }

    /// Write raw bytes (for malformed-input tests), bounded by a deadline.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        tokio::time::timeout(Duration::from_secs(60), async {
            stdin.write_all(bytes).await?;
            stdin.flush().await
        })
        .await
        .map_err(|_| anyhow!("writing to the child's stdin timed out"))?
        .context("writing to the child's stdin")
    }

    /// Write one line of `bytes` bytes (a JSON string's worth of `x`, then `\n`), a
    /// megabyte at a time, so the test never holds it whole.
    pub async fn write_huge_line(&mut self, bytes: usize) -> anyhow::Result<()> {
        let block = vec![b'x'; 1024 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len());
            self.write_raw(&block[..n]).await?;
            left -= n;
        }
        self.write_raw(b"\n").await
    }

    /// Send a line of `bytes` bytes and read the answer to it; with how much the child's
    /// peak memory grew meanwhile, in KiB.
    pub async fn huge_line_answer(
        &mut self,
        bytes: usize,
        deadline: Duration,
    ) -> anyhow::Result<(Value, u64)> {
        let before = self.peak_memory_kib()?;
        self.write_huge_line(bytes).await?;
        let answer = self.read_json(deadline).await?;
        let after = self.peak_memory_kib()?;
        Ok((answer, after.saturating_sub(before)))
    }

    /// The child's peak resident memory so far (`VmHWM`), in KiB.
    pub fn peak_memory_kib(&self) -> anyhow::Result<u64> {
        let pid = self.pid().context("the child has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmHWM in /proc/PID/status")
    }

    /// Close stdin (the child sees EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout message, within `deadline`.
    pub async fn read_json(&mut self, deadline: Duration) -> anyhow::Result<Value> {
        let line = match tokio::time::timeout(deadline, self.stdout.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => bail!("child stdout closed\nstderr:\n{}", self.stderr()),
            Err(_) => bail!("no message within {deadline:?}\nstderr:\n{}", self.stderr()),
        };
        serde_json::from_str(&line)
            .with_context(|| format!("child wrote a non-JSON line to stdout: {line:?}"))
    }

    /// Read until a message satisfies `matches`, within `deadline` overall. Messages
    /// read past are appended to [`Self::seen`].
    pub async fn read_until(
        &mut self,
        deadline: Duration,
        mut matches: impl FnMut(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let end = Instant::now() + deadline;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let message = self.read_json(left).await.with_context(|| {
                format!(
                    "waiting for a matching message; last seen: {}",
                    self.seen
                        .iter()
                        .rev()
                        .take(5)
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            })?;
            if matches(&message) {
                return Ok(message);
            }
            self.seen.push(message);
        }
    }

    /// Read for `window` and fail if any message satisfies `forbidden`. Returns what was read.
    pub async fn expect_none_within(
        &mut self,
        window: Duration,
        mut forbidden: impl FnMut(&Value) -> bool,
    ) -> anyhow::Result<Vec<Value>> {
        let end = Instant::now() + window;
        let mut read = Vec::new();
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(read);
            }
            match tokio::time::timeout(left, self.stdout.recv()).await {
                Err(_) | Ok(None) => return Ok(read),
                Ok(Some(line)) => {
                    let message: Value = serde_json::from_str(&line)
                        .with_context(|| format!("non-JSON stdout line: {line:?}"))?;
                    if forbidden(&message) {
                        bail!("unexpected message: {message}");
                    }
                    read.push(message);
                }
            }
        }
    }

    /// Wait for the child to exit, within `deadline`.
    pub async fn wait_exit(&mut self, deadline: Duration) -> anyhow::Result<ExitStatus> {
        tokio::time::timeout(deadline, self.child.wait())
            .await
            .map_err(|_| {
                anyhow!(
                    "child did not exit within {deadline:?}\nstderr:\n{}",
                    self.stderr()
                )
            })?
            .context("waiting for the child")
    }
}

impl Drop for JsonLinesProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echoes_json_lines_with_deadlines() -> anyhow::Result<()> {
        let mut command = Command::new("cat");
        command.arg("-u");
        let mut child = JsonLinesProcess::spawn(command)?;
        child.write_json(&serde_json::json!({"a": 1})).await?;
        child.write_json(&serde_json::json!({"b": 2})).await?;
        let b = child
            .read_until(Duration::from_secs(10), |m| m.get("b").is_some())
            .await?;
        assert_eq!(b["b"], 2);
        assert_eq!(child.seen.len(), 1);
        assert!(child.read_json(Duration::from_millis(100)).await.is_err());
        child.close_stdin();
        assert!(child.wait_exit(Duration::from_secs(10)).await?.success());
        Ok(())
    }
}
