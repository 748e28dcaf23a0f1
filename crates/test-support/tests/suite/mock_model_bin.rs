//! The `mock-model` binary: announces its URL, serves the script, records on exit.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const DEADLINE: Duration = Duration::from_secs(30);

/// Minimal HTTP/1.1 POST over a raw socket (this crate has no HTTP client); returns the
/// whole response text.
async fn post(base_url: &str, body: &str) -> anyhow::Result<String> {
    post_to(base_url, "/v1/chat/completions", body).await
}

async fn post_to(base_url: &str, path: &str, body: &str) -> anyhow::Result<String> {
    let authority = base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    let mut socket = tokio::net::TcpStream::connect(authority).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    socket.read_to_string(&mut response).await?;
    Ok(response)
}

struct MockProcess {
    child: tokio::process::Child,
    base_url: String,
}

/// Starts the binary on this script and reads its announced base URL.
async fn spawn_mock(script: &str, dir: &std::path::Path) -> anyhow::Result<MockProcess> {
    let script_path = dir.join("script.json");
    let record = dir.join("record.json");
    std::fs::write(&script_path, script)?;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mock-model"))
        .arg("--script")
        .arg(&script_path)
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
    Ok(MockProcess { child, base_url })
}

/// Closes the binary's stdin and reads the record it writes on exit.
async fn finish(mut mock: MockProcess, dir: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    drop(mock.child.stdin.take());
    let status = tokio::time::timeout(DEADLINE, mock.child.wait()).await??;
    assert!(status.success());
    Ok(serde_json::from_slice(&std::fs::read(
        dir.join("record.json"),
    )?)?)
}

#[tokio::test]
async fn serves_script_and_records_requests_and_violations() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mock = spawn_mock(
        r#"[{"status": 429, "body": "slow", "retry_after": 1},
            {"chunks": [{"choices": [{"index": 0, "delta": {"content": "hi"}}]}]}]"#,
        dir.path(),
    )
    .await?;
    let base_url = mock.base_url.clone();

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

    let recorded = finish(mock, dir.path()).await?;
    assert_eq!(recorded["requests"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        recorded["endpoints"],
        serde_json::json!(vec!["/v1/chat/completions"; 3])
    );
    assert_eq!(
        recorded["violations"],
        serde_json::json!(["request #2: mock: no scripted response left"])
    );
    Ok(())
}

#[tokio::test]
async fn speaks_the_responses_api_and_checks_its_invariants() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let script = serde_json::json!([
        {"chunks": [
            {"type": "response.created", "response": {"id": "resp_1"}},
            {"type": "response.output_item.done", "item": {"type": "function_call", "id": "fc_1",
             "call_id": "call_1", "name": "shell", "arguments": "{}"}},
            {"type": "response.completed", "response": {"id": "resp_1"}}
         ],
         "send_done": false},
        {"chunks": [{"type": "response.completed", "response": {"id": "resp_2"}}], "send_done": false}
    ]);
    let mock = spawn_mock(&script.to_string(), dir.path()).await?;
    let base_url = mock.base_url.clone();

    let first_body = r#"{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}"#;
    let first =
        tokio::time::timeout(DEADLINE, post_to(&base_url, "/v1/responses", first_body)).await??;
    assert!(
        first.contains("event: response.output_item.done\ndata: {"),
        "{first}"
    );
    assert!(!first.contains("[DONE]"), "{first}");
    // The call's output is missing: a violation.
    let second_body = r#"{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
        {"type":"function_call","call_id":"call_1","name":"shell","arguments":"{}"}]}"#;
    tokio::time::timeout(DEADLINE, post_to(&base_url, "/v1/responses", second_body)).await??;

    let recorded = finish(mock, dir.path()).await?;
    assert_eq!(
        recorded["endpoints"],
        serde_json::json!(["/v1/responses", "/v1/responses"])
    );
    assert_eq!(
        recorded["violations"],
        serde_json::json!([
            "request #1: request ends with unanswered function call(s) [\"call_1\"]"
        ])
    );
    Ok(())
}
