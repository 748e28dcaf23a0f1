//! `interpreter doctor` end to end: the real binary against the mock model server, with a
//! fresh home per test and the child's environment passed explicitly.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use interpreter_test_support::MockModelServer;
use serde_json::Value;
use tempfile::TempDir;

/// Generous: a debug build on a loaded machine. Only a hang hits it.
const RUN_DEADLINE: Duration = Duration::from_secs(90);

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    fn report(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|err| {
            panic!(
                "stdout is not one JSON object ({err}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// The check named `name` of a `--json` report.
fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` check in {report}"))
}

fn status<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["status"].as_str().expect("status")
}

fn detail<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["detail"].as_str().expect("detail")
}

fn provider_config(model: &str, base_url: &str, extra_top_level: &str) -> String {
    format!(
        "model = \"{model}\"\nmodel_provider = \"mock\"\nsandbox_mode = \"danger-full-access\"\n\
         {extra_top_level}\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = \"{base_url}\"\n\
         env_key = \"MOCK_API_KEY\"\nwire_api = \"chat\"\n"
    )
}

/// A home as the agent makes one: a directory other users cannot enter.
fn agent_home() -> TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let home = TempDir::new().expect("home");
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod home");
    home
}

fn write_config(home: &Path, text: &str) {
    std::fs::write(home.join("config.toml"), text).expect("write config");
}

/// Runs `interpreter ARGS` with only the given variables (plus PATH and HOME) set.
async fn run_doctor(interpreter_home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cwd = TempDir::new().expect("cwd tempdir");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
    command
        .args(args)
        .current_dir(cwd.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cwd.path())
        .env("INTERPRETER_HOME", interpreter_home)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("spawn interpreter");
    let output = tokio::time::timeout(RUN_DEADLINE, child.wait_with_output())
        .await
        .expect("interpreter doctor did not finish before the deadline (killed)")
        .expect("wait for interpreter");
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn healthy_setup_passes_and_reports_json() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );

    let output = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[
            ("MOCK_API_KEY", "secret-key-1"),
            ("INTERPRETER_NESTING_DEPTH", "2"),
        ],
    )
    .await;

    let report = output.report();
    assert_eq!(output.code, Some(0), "{report:#}\n{}", output.stderr);
    assert_eq!(report["ok"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|check| check["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "home",
            "config",
            "api-key",
            "endpoint",
            "server",
            "sandbox",
            "state",
            "nesting",
            "telemetry"
        ]
    );
    for name in [
        "home",
        "config",
        "api-key",
        "endpoint",
        "state",
        "nesting",
        "telemetry",
    ] {
        assert_eq!(status(&report, name), "ok", "{name}: {report:#}");
        assert!(
            check(&report, name).get("fix").is_none(),
            "{name} has a fix"
        );
    }
    // Whether this machine can sandbox does not matter in danger-full-access mode.
    assert_ne!(status(&report, "sandbox"), "fail", "{report:#}");
    for check in report["checks"].as_array().expect("checks") {
        if check["status"] != "ok" {
            assert!(check["fix"].is_string(), "no fix for {check}");
        }
    }

    let config = detail(&report, "config");
    for expected in [
        "model=mock-model",
        "provider=mock",
        &format!("base_url={}", server.base_url()),
        "wire_api=chat",
        "sandbox=danger-full-access",
    ] {
        assert!(config.contains(expected), "{expected} missing in: {config}");
    }
    assert_eq!(detail(&report, "api-key"), "MOCK_API_KEY is set (12 chars)");
    assert!(!output.stdout.contains("secret-key-1"), "the key leaked");
    assert!(
        detail(&report, "endpoint").contains("`mock-model` is served"),
        "{report:#}"
    );
    assert!(detail(&report, "state").contains("no thread index yet"));
    assert!(detail(&report, "nesting").contains("depth 2"));
    // Probing the endpoint consumes nothing and breaks no conversation invariant.
    server.assert_invariants();
    assert!(server.requests().is_empty());
    // Doctor writes nothing into an existing home.
    let mut entries: Vec<String> = std::fs::read_dir(home.path())
        .expect("read home")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    entries.sort();
    assert_eq!(entries, ["config.toml"]);
}

#[tokio::test]
async fn missing_api_key_fails_with_the_variable_to_set() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );

    let output = run_doctor(home.path(), &["doctor"], &[]).await;

    assert_eq!(output.code, Some(1), "{}\n{}", output.stdout, output.stderr);
    let lines: Vec<&str> = output.stdout.lines().collect();
    let failing = lines
        .iter()
        .position(|line| line.starts_with("fail api-key "))
        .unwrap_or_else(|| panic!("no failing api-key line:\n{}", output.stdout));
    assert!(lines[failing].contains("MOCK_API_KEY is not set"));
    assert!(
        lines[failing + 1]
            .trim_start()
            .starts_with("fix: export MOCK_API_KEY="),
        "{}",
        output.stdout
    );
    assert!(
        lines.iter().any(|line| line.starts_with("ok   home ")),
        "{}",
        output.stdout
    );
    let summary = lines.last().expect("summary line");
    assert!(summary.starts_with("1 failure"), "{summary}");
}

#[tokio::test]
async fn unreachable_endpoint_fails_naming_the_url() {
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", "http://127.0.0.1:1/v1", ""),
    );

    let output = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")]).await;

    let report = output.report();
    assert_eq!(output.code, Some(1), "{report:#}");
    assert_eq!(report["ok"], false);
    assert_eq!(status(&report, "endpoint"), "fail", "{report:#}");
    let endpoint = detail(&report, "endpoint");
    assert!(
        endpoint.contains("http://127.0.0.1:1/v1/models"),
        "{endpoint}"
    );
    assert!(
        check(&report, "endpoint")["fix"]
            .as_str()
            .expect("fix")
            .contains("base_url")
    );
    assert_eq!(status(&report, "api-key"), "ok");
}

#[tokio::test]
async fn model_missing_from_the_list_is_a_warning() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("other-model", &server.base_url(), ""),
    );

    let output = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")]).await;

    let report = output.report();
    assert_eq!(output.code, Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    assert_eq!(status(&report, "endpoint"), "warn", "{report:#}");
    let endpoint = detail(&report, "endpoint");
    assert!(endpoint.contains("`other-model`"), "{endpoint}");
    assert!(endpoint.contains("available: mock-model"), "{endpoint}");
}

#[tokio::test]
async fn a_messages_endpoint_is_checked_like_the_others() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    let config = provider_config("mock-model", &server.base_url(), "")
        .replace("wire_api = \"chat\"", "wire_api = \"messages\"");
    write_config(home.path(), &config);

    let output = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")]).await;

    let report = output.report();
    assert_eq!(output.code, Some(0), "{report:#}");
    assert!(
        detail(&report, "config").contains("wire_api=messages"),
        "{report:#}"
    );
    assert_eq!(status(&report, "endpoint"), "ok", "{report:#}");
    assert!(
        detail(&report, "endpoint").contains("model `mock-model` is served"),
        "{report:#}"
    );

    // A root without the Messages API: the hint says what base_url must be.
    let config = provider_config("mock-model", &format!("{}/nothing", server.base_url()), "")
        .replace("wire_api = \"chat\"", "wire_api = \"messages\"");
    write_config(home.path(), &config);
    let output = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")]).await;
    let report = output.report();
    assert_eq!(status(&report, "endpoint"), "warn", "{report:#}");
    let fix = check(&report, "endpoint")["fix"]
        .as_str()
        .unwrap_or_default();
    assert!(fix.contains("/messages"), "{fix}");
}

#[tokio::test]
async fn unknown_key_under_strict_config_fails() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), "bogus_key = 1"),
    );

    let strict = run_doctor(
        home.path(),
        &["doctor", "--json", "--strict-config"],
        &[("MOCK_API_KEY", "k")],
    )
    .await;

    let report = strict.report();
    assert_eq!(strict.code, Some(1), "{report:#}");
    assert_eq!(status(&report, "config"), "fail");
    assert!(detail(&report, "config").contains("unknown config key `bogus_key`"));
    assert!(
        check(&report, "config")["fix"]
            .as_str()
            .expect("fix")
            .contains("--strict-config")
    );
    // Checks that need a config say they were skipped rather than guessing.
    assert_eq!(status(&report, "api-key"), "warn");
    assert_eq!(status(&report, "endpoint"), "warn");

    // The same file loads when unknown keys are only warnings, and the check says which.
    let lenient = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")]).await;
    let report = lenient.report();
    assert_eq!(status(&report, "config"), "warn", "{report:#}");
    assert!(
        detail(&report, "config").contains("ignoring unknown config key `bogus_key`"),
        "{report:#}"
    );
    assert_eq!(lenient.code, Some(0), "{report:#}");
}

#[tokio::test]
async fn missing_home_is_created_and_said_so() {
    let parent = TempDir::new().expect("parent");
    let home = parent.path().join("fresh-home");

    let output = run_doctor(&home, &["doctor", "--json"], &[]).await;

    let report = output.report();
    assert!(home.is_dir());
    assert_eq!(status(&report, "home"), "ok");
    assert!(detail(&report, "home").ends_with("(created)"), "{report:#}");
    // No config file: no model, so the config check fails and names the way out.
    assert_eq!(status(&report, "config"), "fail");
    assert!(detail(&report, "config").contains("no model configured"));
    assert_eq!(output.code, Some(1));
}

/// A home other users can read (as older versions left it: the directory 0755, files
/// 0644): doctor names what is open and the fix, and the agent makes the directory itself
/// private at start, which closes all of it.
#[tokio::test]
async fn an_open_home_is_named_with_the_fix_and_closed_at_start() {
    use std::os::unix::fs::PermissionsExt as _;
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );
    let rollout = write_thread(home.path(), 1);
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    let mut dir = rollout.parent();
    while let Some(current) = dir.filter(|dir| dir.starts_with(home.path())) {
        chmod(current, 0o755);
        dir = current.parent();
    }
    chmod(&rollout, 0o644);
    chmod(&home.path().join("config.toml"), 0o644);
    let env = [("MOCK_API_KEY", "secret-key-1")];

    let output = run_doctor(home.path(), &["doctor", "--json"], &env).await;
    let report = output.report();
    assert_eq!(status(&report, "home"), "warn", "{report:#}");
    let home_detail = detail(&report, "home");
    for open in [home.path().to_path_buf(), home.path().join("config.toml")] {
        assert!(
            home_detail.contains(&format!("{} (0", open.display())),
            "{} not named: {home_detail}",
            open.display()
        );
    }
    // At most five are named; the rest are counted (the rollout and its day directory).
    assert!(home_detail.ends_with(", and 2 more"), "{home_detail}");
    assert_eq!(
        check(&report, "home")["fix"],
        format!("chmod -R go-rwx {}", home.path().display())
    );
    let mode = std::fs::metadata(home.path())
        .expect("home")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700, "the home directory was not made private");

    // Nothing in it is in other users' reach any more.
    let again = run_doctor(home.path(), &["doctor", "--json"], &env).await;
    assert_eq!(
        status(&again.report(), "home"),
        "ok",
        "{:#}",
        again.report()
    );
}

/// A one-line rollout for thread `n`, written as the recorder writes it.
fn write_thread(home: &Path, n: i64) -> std::path::PathBuf {
    use interpreter_core::store::SessionMeta;
    use interpreter_core::store::local::write_rollout;
    let meta = SessionMeta {
        id: interpreter_protocol::ThreadId::new(),
        timestamp: chrono::DateTime::from_timestamp(1_767_225_600 + n, 0).expect("timestamp"),
        cwd: home.to_path_buf(),
        originator: "test".into(),
        cli_version: "0.0.0".into(),
        source: interpreter_protocol::SessionSource::Exec,
        model_provider: None,
        model: None,
        base_instructions: None,
        forked_from_id: None,
    };
    write_rollout(home, &meta, &[]).expect("write rollout")
}

#[tokio::test]
async fn state_check_compares_the_index_with_the_rollouts_on_disk() {
    use interpreter_core::store::{LocalStore, ThreadStore};
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );
    let env = [("MOCK_API_KEY", "k")];
    for n in 0..3 {
        write_thread(home.path(), n);
    }

    // Rollouts but no index: not "ok, 0 threads".
    let report = run_doctor(home.path(), &["doctor", "--json"], &env)
        .await
        .report();
    assert_eq!(status(&report, "state"), "warn", "{report:#}");
    assert!(
        detail(&report, "state").contains("no thread index, but 3 rollouts"),
        "{report:#}"
    );
    assert!(
        !home.path().join("state.sqlite").exists(),
        "doctor only reads"
    );

    // Index rebuilt and consistent.
    let gone = write_thread(home.path(), 3);
    LocalStore::new(home.path().to_path_buf())
        .refresh()
        .await
        .expect("open index");
    let report = run_doctor(home.path(), &["doctor", "--json"], &env)
        .await
        .report();
    assert_eq!(status(&report, "state"), "ok", "{report:#}");
    assert!(
        detail(&report, "state").contains("indexes 4 threads, 4 rollout files on disk"),
        "{report:#}"
    );

    // One indexed rollout deleted, one written behind the index's back, one emptied.
    std::fs::remove_file(&gone).expect("delete rollout");
    write_thread(home.path(), 4);
    let emptied = write_thread(home.path(), 5);
    std::fs::write(&emptied, b"").expect("empty rollout");
    let report = run_doctor(home.path(), &["doctor", "--json"], &env)
        .await
        .report();
    assert_eq!(status(&report, "state"), "warn", "{report:#}");
    let state = detail(&report, "state");
    for expected in [
        "indexes 4 threads, 5 rollout files on disk".to_string(),
        "2 rollout(s) not in the index".to_string(),
        format!(
            "1 indexed thread(s) whose rollout file is gone (first: {})",
            gone.display()
        ),
        format!(
            "1 unreadable rollout(s) (0 bytes or no metadata) (first: {})",
            emptied.display()
        ),
    ] {
        assert!(state.contains(&expected), "{expected} missing in: {state}");
    }
    // Doctor repaired nothing: the deleted thread is still indexed.
    let health = LocalStore::new(home.path().to_path_buf())
        .index_health()
        .await
        .expect("index health");
    assert_eq!(health.indexed, 4);
}

#[tokio::test]
async fn server_check_warns_when_the_template_cannot_render_tools() {
    let server = MockModelServer::start().await.expect("mock server");
    server.set_props(serde_json::json!({
        "default_generation_settings": {"n_ctx": 2048},
        "chat_template_caps": {"supports_tools": false},
    }));
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );
    let output = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[("MOCK_API_KEY", "secret-key-1")],
    )
    .await;
    let report = output.report();
    assert_eq!(status(&report, "server"), "warn", "{report:#}");
    let server_detail = detail(&report, "server");
    assert!(
        server_detail.contains("context window 2048 tokens"),
        "{server_detail}"
    );
    assert!(
        server_detail.contains("cannot render tools"),
        "{server_detail}"
    );
    let fix = check(&report, "server")["fix"].as_str().expect("fix");
    assert!(fix.contains("--jinja"), "{fix}");

    // With a template that renders tools, the check passes.
    server.set_props(serde_json::json!({
        "default_generation_settings": {"n_ctx": 8192},
        "chat_template_caps": {"supports_tools": true},
    }));
    let output = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[("MOCK_API_KEY", "secret-key-1")],
    )
    .await;
    let report = output.report();
    assert_eq!(status(&report, "server"), "ok", "{report:#}");
    assert!(detail(&report, "server").contains("renders tools"));
}

#[tokio::test]
async fn login_stores_a_private_key_the_environment_overrides_and_logout_removes_it() {
    use tokio::io::AsyncWriteExt as _;
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .args(["login", "--provider", "mock"])
        .env_clear()
        .env("INTERPRETER_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn login");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"sk-stored-key\n")
        .await
        .expect("write key");
    drop(stdin);
    let output = tokio::time::timeout(RUN_DEADLINE, child.wait_with_output())
        .await
        .expect("login deadline")
        .expect("login");
    assert!(output.status.success(), "{output:?}");
    let file = home.path().join("credentials.json");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // No variable: the stored key is used.
    let report = run_doctor(home.path(), &["doctor", "--json"], &[])
        .await
        .report();
    assert_eq!(status(&report, "api-key"), "ok", "{report:#}");
    assert!(detail(&report, "api-key").contains("interpreter login"));
    // The variable wins.
    let report = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[("MOCK_API_KEY", "from-env")],
    )
    .await
    .report();
    assert_eq!(detail(&report, "api-key"), "MOCK_API_KEY is set (8 chars)");

    let output = run_doctor(home.path(), &["logout", "--provider", "mock"], &[]).await;
    assert_eq!(output.code, Some(0), "{}", output.stderr);
    let report = run_doctor(home.path(), &["doctor", "--json"], &[])
        .await
        .report();
    assert_eq!(status(&report, "api-key"), "fail", "{report:#}");
}

/// Where telemetry goes, and a collector that does not answer is a warning with a fix
/// (turns are not stopped by it); one that answers is ok.
#[tokio::test]
async fn telemetry_says_where_it_goes_and_whether_the_collector_answers() {
    let server = MockModelServer::start().await.expect("mock server");
    let home = agent_home();
    write_config(
        home.path(),
        &provider_config("mock-model", &server.base_url(), ""),
    );
    let report = run_doctor(home.path(), &["doctor", "--json"], &[("MOCK_API_KEY", "k")])
        .await
        .report();
    assert!(
        detail(&report, "telemetry").starts_with("not exported"),
        "{report:#}"
    );

    // Nothing listens on a port just freed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let endpoint = format!("http://{closed}");
    let output = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[
            ("MOCK_API_KEY", "k"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_LOGS_EXPORTER", "none"),
        ],
    )
    .await;
    let report = output.report();
    assert_eq!(status(&report, "telemetry"), "warn", "{report:#}");
    let said = detail(&report, "telemetry");
    assert!(
        said.contains(&format!(
            "traces → {endpoint}/v1/traces (http/protobuf): did not answer"
        )),
        "{said}"
    );
    assert!(said.contains("metrics: off"), "{said}");
    assert_eq!(report["ok"], true, "a silent collector is not a failure");

    // The model mock answers any POST path with 404 or a scripted answer; an OTLP
    // collector is a server that answers the export with 2xx.
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(|| async { axum::http::StatusCode::OK }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind collector");
    let collector_url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, collector).await });
    let report = run_doctor(
        home.path(),
        &["doctor", "--json"],
        &[
            ("MOCK_API_KEY", "k"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                &format!("{collector_url}/v1/traces"),
            ),
            ("OTEL_TRACES_EXPORTER", "otlp"),
        ],
    )
    .await
    .report();
    assert_eq!(status(&report, "telemetry"), "ok", "{report:#}");
}
