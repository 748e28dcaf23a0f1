//! The `mock-model` binary: announces its URL, serves the script, records on exit.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const DEADLINE: Duration = Duration::from_secs(30);

/// Minimal HTTP/1.1 POST over a raw socket (this crate has no HTTP client); returns the
/// whole response text.
async fn post(base_url: &str, body: &str) -> anyhow::Result<String> {
    let authority = base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    let mut socket = tokio::net::TcpStream::connect(authority).await?;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    socket.read_to_string(&mut response).await?;
    Ok(response)
}

#[tokio::test]
async fn serves_script_and_records_requests_and_violations() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("script.json");
    let record = dir.path().join("record.json");
    std::fs::write(
        &script,
        r#"[{"status": 429, "body": "slow", "retry_after": 1},
            {"chunks": [{"choices": [{"index": 0, "delta": {"content": "hi"}}]}]}]"#,
    )?;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mock-model"))
        .arg("--script")
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut line = String::new();
    tokio::time::timeout(DEADLINE, BufReader::new(stdout).read_line(&mut line)).await??;
    let announced: serde_json::Value = serde_json::from_str(&line)?;
    let base_url = announced["base_url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(base_url.starts_with("http://127.0.0.1:"), "{line}");

    let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    let first = tokio::time::timeout(DEADLINE, post(&base_url, body)).await??;
    assert!(first.starts_with("HTTP/1.1 429"), "{first}");
    assert!(first.to_lowercase().contains("retry-after: 1"), "{first}");
    let second = tokio::time::timeout(DEADLINE, post(&base_url, body)).await??;
    assert!(second.contains("data: {\"choices\""), "{second}");
    assert!(second.contains("data: [DONE]"), "{second}");
    let third = tokio::time::timeout(DEADLINE, post(&base_url, body)).await??;
    assert!(third.starts_with("HTTP/1.1 500"), "{third}");
    assert!(third.contains("mock: no scripted response left"), "{third}");

    drop(child.stdin.take());
    let status = tokio::time::timeout(DEADLINE, child.wait()).await??;
    assert!(status.success());
    let recorded: serde_json::Value = serde_json::from_slice(&std::fs::read(&record)?)?;
    assert_eq!(recorded["requests"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        recorded["violations"],
        serde_json::json!(["request #2: mock: no scripted response left"])
    );
    Ok(())
}
