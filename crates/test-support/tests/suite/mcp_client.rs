//! The MCP client (`interpreter-mcp-client`) against the real `mock-mcp-server` binary:
//! startup, tool listing and filtering, calls, timeouts, cancellation, failures and the
//! self-recursion guard. Lives here because only this package's tests know the path of
//! its binaries.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use interpreter_mcp_client::{
    ElicitationAction, ElicitationAnswer, ElicitationSink, McpClientError, McpConnectionManager,
    McpPool, McpServerConfig, NESTING_DEPTH_ENV, PoolOptions, StartupStatus,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const MOCK: &str = env!("CARGO_BIN_EXE_mock-mcp-server");

fn mock(configure: impl FnOnce(&mut McpServerConfig)) -> McpServerConfig {
    let mut config = McpServerConfig {
        command: Some(MOCK.to_string()),
        enabled: true,
        startup_timeout_sec: Some(20.0),
        ..Default::default()
    };
    configure(&mut config);
    config
}

fn servers(entries: Vec<(&str, McpServerConfig)>) -> BTreeMap<String, McpServerConfig> {
    entries
        .into_iter()
        .map(|(name, config)| (name.to_string(), config))
        .collect()
}

fn parent_env() -> HashMap<String, String> {
    [
        ("PATH", "/usr/bin:/bin"),
        ("SECRET_TOKEN", "do-not-leak"),
        ("WANTED", "copied"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

async fn start(
    entries: Vec<(&str, McpServerConfig)>,
) -> Result<(McpConnectionManager, Vec<String>)> {
    let (manager, report) =
        McpConnectionManager::start(&servers(entries), &parent_env(), None).await?;
    Ok((manager, report.warnings))
}

fn text_of(result: &Value) -> Result<&str> {
    result["content"][0]["text"]
        .as_str()
        .with_context(|| format!("no text content in {result}"))
}

async fn call(manager: &McpConnectionManager, name: &str, args: Value) -> Result<Value> {
    Ok(manager
        .call_tool(name, Some(args), &CancellationToken::new(), None)
        .await?)
}

#[tokio::test]
async fn lists_qualified_tools_and_calls_them() -> Result<()> {
    let (manager, warnings) = start(vec![("mock", mock(|_| {}))]).await?;
    assert!(warnings.is_empty(), "{warnings:?}");
    let names: Vec<String> = manager
        .tools()
        .into_iter()
        .map(|t| t.qualified_name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "mcp__mock__add",
            "mcp__mock__ask",
            "mcp__mock__big",
            "mcp__mock__echo",
            "mcp__mock__env_var",
            "mcp__mock__exit",
            "mcp__mock__fail",
            "mcp__mock__progress",
            "mcp__mock__sleep"
        ]
    );
    let echo = manager
        .tools()
        .into_iter()
        .find(|t| t.tool == "echo")
        .context("echo listed")?;
    assert_eq!(echo.server, "mock");
    assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
    assert!(!echo.description.is_empty());

    let result = call(&manager, "mcp__mock__echo", json!({"text": "hello"})).await?;
    assert_eq!(text_of(&result)?, "hello");
    let result = call(&manager, "mcp__mock__add", json!({"a": 2, "b": 3})).await?;
    assert_eq!(text_of(&result)?, "5");
    let result = call(&manager, "mcp__mock__fail", json!({})).await?;
    assert_eq!(result["isError"], true);
    assert_eq!(text_of(&result)?, "this tool always fails");

    let unknown = manager
        .call_tool("mcp__mock__nope", None, &CancellationToken::new(), None)
        .await;
    assert!(matches!(unknown, Err(McpClientError::UnknownTool(_))));
    let not_object = manager
        .call_tool(
            "mcp__mock__echo",
            Some(json!([1])),
            &CancellationToken::new(),
            None,
        )
        .await;
    assert!(matches!(
        not_object,
        Err(McpClientError::InvalidArguments(_))
    ));
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn child_gets_only_the_allowed_environment_and_a_deeper_nesting_depth() -> Result<()> {
    let config = mock(|c| {
        c.env_vars = vec!["WANTED".into()];
        c.env = Some([("LITERAL".to_string(), "lit".to_string())].into());
    });
    let (manager, _) = start(vec![("mock", config)]).await?;
    let var = |name: &'static str| {
        let manager = &manager;
        async move {
            let result = call(manager, "mcp__mock__env_var", json!({ "name": name })).await?;
            Ok::<_, anyhow::Error>(text_of(&result)?.to_string())
        }
    };
    assert_eq!(var("PATH").await?, "/usr/bin:/bin");
    assert_eq!(var("WANTED").await?, "copied");
    assert_eq!(var("LITERAL").await?, "lit");
    assert_eq!(var("SECRET_TOKEN").await?, "<unset>");
    assert_eq!(var(NESTING_DEPTH_ENV).await?, "1");
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn tool_timeout_ends_the_call_and_the_server_stays_usable() -> Result<()> {
    let (manager, _) = start(vec![("mock", mock(|c| c.tool_timeout_sec = Some(0.3)))]).await?;
    let slow = call(&manager, "mcp__mock__sleep", json!({"ms": 30_000})).await;
    match slow {
        Err(err) => match err.downcast_ref::<McpClientError>() {
            Some(McpClientError::Timeout { server, tool, .. }) => {
                assert_eq!((server.as_str(), tool.as_str()), ("mock", "sleep"));
            }
            _ => bail!("expected a timeout, got {err}"),
        },
        Ok(value) => bail!("expected a timeout, got {value}"),
    }
    let result = call(&manager, "mcp__mock__echo", json!({"text": "still here"})).await?;
    assert_eq!(text_of(&result)?, "still here");
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn cancellation_ends_the_call_and_reaches_the_server() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let (manager, _) = start(vec![("mock", logging_mock(&log, |_| {}))]).await?;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let started = log.clone();
    // Cancel once the server is in the call (bounded wait), so there is a call to cancel.
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !log_lines(&started).iter().any(|l| l == "sleeping 30000")
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        trigger.cancel();
    });
    let slow = manager
        .call_tool(
            "mcp__mock__sleep",
            Some(json!({"ms": 30_000})),
            &cancel,
            None,
        )
        .await;
    assert!(
        matches!(slow, Err(McpClientError::Cancelled { .. })),
        "{slow:?}"
    );
    // The server was told: it logs the cancellation when it gets it (bounded wait).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !log_lines(&log).iter().any(|l| l == "cancelled sleep 30000") {
        if tokio::time::Instant::now() > deadline {
            bail!(
                "the server never saw the cancellation: {:?}",
                log_lines(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = call(&manager, "mcp__mock__echo", json!({"text": "after"})).await?;
    assert_eq!(text_of(&result)?, "after");
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_that_fails_to_start_is_left_out_with_a_warning() -> Result<()> {
    let bad = McpServerConfig {
        command: Some("/nonexistent/mcp-server-binary".into()),
        enabled: true,
        ..Default::default()
    };
    let disabled = McpServerConfig {
        command: Some("/nonexistent/other".into()),
        enabled: false,
        ..Default::default()
    };
    let (manager, warnings) = start(vec![
        ("bad", bad),
        ("off", disabled),
        ("mock", mock(|_| {})),
    ])
    .await?;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`bad` failed to start"),
        "{}",
        warnings[0]
    );
    assert_eq!(manager.servers(), ["mock"]);
    assert!(manager.tools().iter().all(|t| t.server == "mock"));
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_required_server_that_fails_makes_start_fail() -> Result<()> {
    let bad = McpServerConfig {
        command: Some("/nonexistent/mcp-server-binary".into()),
        enabled: true,
        required: true,
        ..Default::default()
    };
    let outcome = start(vec![("needed", bad), ("mock", mock(|_| {}))]).await;
    match outcome {
        Err(err) => {
            let text = err.to_string();
            assert!(
                text.starts_with("required MCP servers failed to initialize: needed: "),
                "{text}"
            );
        }
        Ok(_) => bail!("start should fail"),
    }
    Ok(())
}

#[tokio::test]
async fn tool_filters_hide_tools() -> Result<()> {
    let config = mock(|c| {
        c.enabled_tools = Some(vec!["echo".into(), "add".into(), "fail".into()]);
        c.disabled_tools = Some(vec!["fail".into()]);
    });
    let (manager, _) = start(vec![("mock", config)]).await?;
    let mut names: Vec<String> = manager.tools().into_iter().map(|t| t.tool).collect();
    names.sort();
    assert_eq!(names, ["add", "echo"]);
    let hidden = manager
        .call_tool("mcp__mock__fail", None, &CancellationToken::new(), None)
        .await;
    assert!(matches!(hidden, Err(McpClientError::UnknownTool(_))));
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_that_would_start_ourselves_again_is_skipped() -> Result<()> {
    let own_exe = Path::new(MOCK);
    let by_path = mock(|c| c.args = vec!["mcp-server".into()]);
    let by_name = McpServerConfig {
        command: Some("interpreter".into()),
        args: vec!["mcp-server".into()],
        enabled: true,
        ..Default::default()
    };
    let (manager, report) = McpConnectionManager::start(
        &servers(vec![
            ("me", by_path),
            ("me-too", by_name),
            ("mock", mock(|_| {})),
        ]),
        &parent_env(),
        Some(own_exe),
    )
    .await?;
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("`me`"));
    assert!(report.warnings[1].contains("`me-too`"));
    assert_eq!(report.ready, ["mock"]);
    manager.shutdown().await;
    Ok(())
}

/// `started <pid>` lines (and others) the mock servers wrote to `log`.
fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn logging_mock(log: &Path, configure: impl FnOnce(&mut McpServerConfig)) -> McpServerConfig {
    mock(|c| {
        c.env = Some([("MOCK_MCP_LOG".to_string(), log.display().to_string())].into());
        configure(c);
    })
}

async fn connect(
    pool: &McpPool,
    entries: Vec<(&str, McpServerConfig)>,
) -> Result<McpConnectionManager> {
    let (manager, _) =
        McpConnectionManager::connect(pool, &servers(entries), &parent_env(), None, None, None)
            .await?;
    Ok(manager)
}

#[tokio::test]
async fn fifty_threads_share_one_server_process() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let pool = McpPool::default();
    let threads = (0..50).map(|i| {
        let pool = pool.clone();
        let config = logging_mock(&log, |_| {});
        async move {
            let manager = connect(&pool, vec![("mock", config)]).await?;
            manager.settle(&|_| {}).await;
            let text = format!("thread {i}");
            let result = call(&manager, "mcp__mock__echo", json!({ "text": text })).await?;
            assert_eq!(text_of(&result)?, text);
            Ok::<_, anyhow::Error>(manager)
        }
    });
    let managers = futures::future::try_join_all(threads).await?;
    let started: Vec<String> = log_lines(&log)
        .into_iter()
        .filter(|l| l.starts_with("started "))
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(pool.len(), 1);
    for manager in managers {
        manager.shutdown().await;
    }
    pool.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_different_launch_spec_gets_its_own_instance() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let pool = McpPool::default();
    let plain = connect(&pool, vec![("mock", logging_mock(&log, |_| {}))]).await?;
    // Same server, other name and other filters: shared.
    let renamed = connect(
        &pool,
        vec![(
            "other-name",
            logging_mock(&log, |c| c.disabled_tools = Some(vec!["fail".into()])),
        )],
    )
    .await?;
    // Another argument: a process of its own.
    let other_args = connect(
        &pool,
        vec![("mock", logging_mock(&log, |c| c.args = vec!["--x".into()]))],
    )
    .await?;
    for manager in [&plain, &renamed, &other_args] {
        manager.settle(&|_| {}).await;
    }
    assert!(renamed.tools().iter().all(|t| t.tool != "fail"));
    assert!(plain.tools().iter().any(|t| t.tool == "fail"));
    let started = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(started, 2);
    assert_eq!(pool.len(), 2);
    pool.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_idle_server_is_stopped_and_started_again_on_next_use() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let pool = McpPool::new(PoolOptions {
        idle_timeout: Duration::from_millis(50),
        ..Default::default()
    });
    let first = connect(&pool, vec![("mock", logging_mock(&log, |_| {}))]).await?;
    first.settle(&|_| {}).await;
    first.shutdown().await;
    // The idle stop removes the instance; poll (bounded) rather than assume a time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !pool.is_empty() {
        if tokio::time::Instant::now() > deadline {
            bail!("the idle server was not stopped");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = connect(&pool, vec![("mock", logging_mock(&log, |_| {}))]).await?;
    second.settle(&|_| {}).await;
    let result = call(&second, "mcp__mock__echo", json!({"text": "again"})).await?;
    assert_eq!(text_of(&result)?, "again");
    let started = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(started, 2);
    pool.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_that_crashes_at_start_is_reported_and_retried_after_backoff() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let pool = McpPool::new(PoolOptions {
        restart_backoff_initial: Duration::from_secs(3600),
        restart_backoff_max: Duration::from_secs(3600),
        ..Default::default()
    });
    let crashing = logging_mock(&log, |c| c.args = vec!["--crash".into()]);
    let manager = connect(
        &pool,
        vec![
            ("crash", crashing.clone()),
            ("mock", logging_mock(&log, |_| {})),
        ],
    )
    .await?;
    let updates = std::sync::Mutex::new(Vec::new());
    let report = manager
        .settle(&|u| updates.lock().map(|mut v| v.push(u)).unwrap_or(()))
        .await;
    assert_eq!(report.ready, ["mock"]);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("`crash` failed to start"),
        "{}",
        report.warnings[0]
    );
    let updates = updates.into_inner().unwrap_or_default();
    assert!(updates.iter().any(|u| u.server == "crash"
        && matches!(&u.status, StartupStatus::Failed { error } if error.contains("failed to start"))));
    assert!(
        updates
            .iter()
            .any(|u| u.server == "mock" && matches!(u.status, StartupStatus::Ready { tools: 9 }))
    );
    // Another thread within the backoff does not start it again: it is told at once.
    let again = connect(&pool, vec![("crash", crashing)]).await?;
    let report = again.settle(&|_| {}).await;
    assert!(
        report.warnings[0].contains("next attempt in"),
        "{:?}",
        report.warnings
    );
    let crash_starts = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(crash_starts, 2, "one crash, one mock");
    pool.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_that_hangs_times_out_and_the_others_are_ready() -> Result<()> {
    let pool = McpPool::default();
    let hanging = mock(|c| {
        c.args = vec!["--hang".into()];
        c.startup_timeout_sec = Some(0.5);
    });
    let manager = connect(&pool, vec![("hang", hanging), ("mock", mock(|_| {}))]).await?;
    let report = manager.settle(&|_| {}).await;
    assert_eq!(report.ready, ["mock"]);
    assert!(
        report.warnings[0].contains("`hang` timed out after 0.5 seconds"),
        "{:?}",
        report.warnings
    );
    assert!(manager.tools().iter().all(|t| t.server == "mock"));
    pool.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_timed_out_call_is_cancelled_at_the_server() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let (manager, _) = start(vec![(
        "mock",
        logging_mock(&log, |c| c.tool_timeout_sec = Some(0.3)),
    )])
    .await?;
    let slow = call(&manager, "mcp__mock__sleep", json!({"ms": 30_000})).await;
    assert!(slow.is_err());
    // The server logs the cancellation when it receives it; wait for it (bounded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !log_lines(&log).iter().any(|l| l == "cancelled sleep 30000") {
        if tokio::time::Instant::now() > deadline {
            bail!(
                "the server never saw the cancellation: {:?}",
                log_lines(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_server_that_dies_is_restarted_on_next_use() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("mock.log");
    let pool = McpPool::new(PoolOptions {
        restart_backoff_initial: Duration::ZERO,
        ..Default::default()
    });
    let manager = connect(&pool, vec![("mock", logging_mock(&log, |_| {}))]).await?;
    manager.settle(&|_| {}).await;
    let died = call(&manager, "mcp__mock__exit", json!({})).await;
    assert!(died.is_err(), "{died:?}");
    // The tool list no longer offers a dead server's tools once the exit is noticed;
    // a call restarts it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match call(&manager, "mcp__mock__echo", json!({"text": "back"})).await {
            Ok(result) => {
                assert_eq!(text_of(&result)?, "back");
                break;
            }
            Err(_) if tokio::time::Instant::now() < deadline => {
                manager.revive();
                manager.settle(&|_| {}).await;
            }
            Err(err) => return Err(err),
        }
    }
    let started = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("started "))
        .count();
    assert_eq!(started, 2);
    pool.shutdown().await;
    Ok(())
}

struct AnswerWith(&'static str);

impl ElicitationSink for AnswerWith {
    fn elicit(
        &self,
        server: String,
        request: Value,
    ) -> futures::future::BoxFuture<'static, ElicitationAnswer> {
        let name = self.0;
        Box::pin(async move {
            assert_eq!(server, "mock");
            assert_eq!(request["message"], "your name?");
            ElicitationAnswer {
                action: ElicitationAction::Accept,
                content: Some(json!({ "name": name })),
            }
        })
    }
}

#[tokio::test]
async fn an_elicitation_reaches_the_calling_thread_and_its_answer_the_server() -> Result<()> {
    let pool = McpPool::default();
    let (mut manager, _) = McpConnectionManager::connect(
        &pool,
        &servers(vec![("mock", mock(|_| {}))]),
        &parent_env(),
        None,
        None,
        None,
    )
    .await?;
    // Without a sink the question is declined.
    manager.settle(&|_| {}).await;
    let declined = call(&manager, "mcp__mock__ask", json!({"message": "your name?"})).await?;
    assert!(text_of(&declined)?.contains("decline"), "{declined}");
    manager.set_elicitation_sink(Arc::new(AnswerWith("Ada")));
    let answered = call(&manager, "mcp__mock__ask", json!({"message": "your name?"})).await?;
    let answer: Value = serde_json::from_str(text_of(&answered)?)?;
    assert_eq!(answer["action"], "accept");
    assert_eq!(answer["content"]["name"], "Ada");
    pool.shutdown().await;
    Ok(())
}

/// Answers like [`AnswerWith`], after `delay`: a user who takes their time.
struct AnswerLater(&'static str, Duration);

impl ElicitationSink for AnswerLater {
    fn elicit(
        &self,
        server: String,
        request: Value,
    ) -> futures::future::BoxFuture<'static, ElicitationAnswer> {
        let (name, delay) = (self.0, self.1);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            AnswerWith(name).elicit(server, request).await
        })
    }
}

#[tokio::test]
async fn waiting_for_the_user_does_not_count_toward_the_tool_timeout() -> Result<()> {
    let pool = McpPool::default();
    let (mut manager, _) = McpConnectionManager::connect(
        &pool,
        // A second: room for the question to reach us on a loaded machine, which
        // still counts toward the timeout.
        &servers(vec![("mock", mock(|c| c.tool_timeout_sec = Some(1.0)))]),
        &parent_env(),
        None,
        None,
        None,
    )
    .await?;
    manager.settle(&|_| {}).await;
    // The answer comes well after the call's timeout; the call still succeeds.
    manager.set_elicitation_sink(Arc::new(AnswerLater("Ada", Duration::from_millis(3000))));
    let answered = call(&manager, "mcp__mock__ask", json!({"message": "your name?"})).await?;
    let answer: Value = serde_json::from_str(text_of(&answered)?)?;
    assert_eq!(answer["content"]["name"], "Ada");
    // Once answered, the deadline runs again: a slow call still times out.
    let slow = manager
        .call_tool(
            "mcp__mock__sleep",
            Some(json!({"ms": 5000})),
            &CancellationToken::new(),
            None,
        )
        .await;
    assert!(
        matches!(slow, Err(McpClientError::Timeout { .. })),
        "{slow:?}"
    );
    pool.shutdown().await;
    Ok(())
}

/// The mock server in `--http` mode: its URL, and its stdin/stdout for `forget`.
struct HttpMock {
    url: String,
    child: tokio::process::Child,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl HttpMock {
    async fn start(args: &[&str]) -> Result<Self> {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = tokio::process::Command::new(MOCK)
            .arg("--http")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut stdout = tokio::io::BufReader::new(stdout).lines();
        let url = Self::line(&mut stdout)
            .await?
            .strip_prefix("listening ")
            .context("listening line")?
            .to_string();
        Ok(Self { url, child, stdout })
    }

    async fn line(
        lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    ) -> Result<String> {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("no line from the mock within 30 s")??
            .context("the mock closed stdout")
    }

    /// Drops every session; returns how many there were.
    async fn forget_sessions(&mut self) -> Result<String> {
        use tokio::io::AsyncWriteExt as _;
        let stdin = self.child.stdin.as_mut().context("stdin")?;
        stdin.write_all(b"forget\n").await?;
        stdin.flush().await?;
        Self::line(&mut self.stdout).await
    }
}

#[tokio::test]
async fn an_expired_http_session_is_initialized_again() -> Result<()> {
    let mut server = HttpMock::start(&[]).await?;
    let config = McpServerConfig {
        url: Some(server.url.clone()),
        enabled: true,
        startup_timeout_sec: Some(20.0),
        http_headers: Some([("X-Test".to_string(), "1".to_string())].into()),
        ..Default::default()
    };
    let (manager, report) = start(vec![("remote", config)]).await?;
    assert!(report.is_empty(), "{report:?}");
    let result = call(&manager, "mcp__remote__echo", json!({"text": "before"})).await?;
    assert_eq!(text_of(&result)?, "before");
    assert_eq!(server.forget_sessions().await?, "forgot 1");
    // The server now answers the old session id with 404; the client starts a new session
    // and retries the call once.
    let result = call(&manager, "mcp__remote__echo", json!({"text": "after"})).await?;
    assert_eq!(text_of(&result)?, "after");
    assert_eq!(
        server.forget_sessions().await?,
        "forgot 1",
        "one new session"
    );
    manager.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_2026_server_is_used_over_http_without_a_session() -> Result<()> {
    let server = HttpMock::start(&["--modern"]).await?;
    let config = McpServerConfig {
        url: Some(server.url.clone()),
        enabled: true,
        startup_timeout_sec: Some(20.0),
        ..Default::default()
    };
    let (manager, warnings) = start(vec![("remote", config)]).await?;
    assert!(warnings.is_empty(), "{warnings:?}");
    let result = call(&manager, "mcp__remote__add", json!({"a": 40, "b": 2})).await?;
    assert_eq!(text_of(&result)?, "42");
    manager.shutdown().await;
    drop(server);
    Ok(())
}
