//! What a user sees when the model endpoint is wrong: a malformed `base_url`, nothing
//! listening, a web server that is not the API (HTML error pages, a missing `/v1`),
//! refused credentials, an overloaded server. Each case is one line naming the provider,
//! the URL and the status or failure, with a hint; no tracing lines; and a request that
//! cannot succeed is sent exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::exec_support::{RunOutput, TestEnv};
use axum::http::{Method, StatusCode, Uri, header};

/// A web server that is not the model API: it answers every request with the same
/// status, content type and body, and counts the model requests
/// (`POST …/chat/completions`) it received.
struct FixedEndpoint {
    port: u16,
    model_requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FixedEndpoint {
    async fn start(status: u16, content_type: &'static str, body: &'static str) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        let model_requests = Arc::new(AtomicUsize::new(0));
        let counter = model_requests.clone();
        let status = StatusCode::from_u16(status).expect("a status code");
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri| {
            if method == Method::POST && uri.path().ends_with("/chat/completions") {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            async move { (status, [(header::CONTENT_TYPE, content_type)], body) }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            port,
            model_requests,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn model_requests(&self) -> usize {
        self.model_requests.load(Ordering::SeqCst)
    }
}

impl Drop for FixedEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What `python3 -m http.server` answers a POST.
const PYTHON_501_PAGE: &str = r#"<!DOCTYPE HTML>
<html lang="en">
    <head>
        <meta charset="utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
        <p>Error code explanation: 501 - Server does not support this operation.</p>
    </body>
</html>
"#;

const NOT_FOUND_PAGE: &str = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

fn provider_config(base_url: &str, extra: &str) -> String {
    format!(
        "model = \"mock-model\"\nmodel_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\nbase_url = \"{base_url}\"\n{extra}\n"
    )
}

/// Human exec: the answer would be on stdout, everything else on stderr.
async fn run_human(env: &TestEnv) -> RunOutput {
    env.run(&["exec", "--skip-git-repo-check", "hi"]).await
}

/// The lines of stderr that report the failure, and a check that nothing of the
/// failure shows up anywhere else (tracing lines, the raw body, a second copy).
#[track_caller]
fn single_error_line(out: &RunOutput) -> String {
    assert_eq!(
        out.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    assert_no_logs(out);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.starts_with("ERROR: ") || line.starts_with("Error: "))
        .collect();
    assert_eq!(errors.len(), 1, "stderr: {}", out.stderr);
    let line = errors[0].to_string();
    let mentions = out
        .stderr
        .lines()
        .filter(|l| l.contains("model provider `local`") && !l.starts_with("retry "))
        .count();
    assert_eq!(mentions, 1, "the failure is told once: {}", out.stderr);
    assert!(!line.contains('<'), "no markup in the message: {line}");
    line
}

#[track_caller]
fn assert_no_logs(out: &RunOutput) {
    for output in [&out.stdout, &out.stderr] {
        assert!(
            !output.contains("WARN") && !output.contains("interpreter_model_client"),
            "no tracing lines without RUST_LOG: {output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_base_url_is_rejected_by_the_config_before_any_request() {
    let env = TestEnv::new().await;
    env.write_raw_config("model = \"mock-model\"\n");
    let out = env
        .run(&[
            "exec",
            "--skip-git-repo-check",
            "-c",
            "model_provider=local",
            "-c",
            r#"model_providers.local={name="local",base_url="not a url"}"#,
            "hi",
        ])
        .await;
    let line = single_error_line_about_config(&out);
    assert_eq!(
        line,
        "Error: invalid value for `model_providers.local.base_url` in -c override: `not a url` \
         is not a URL (relative URL without a base); expected the server's API root, e.g. \
         \"http://localhost:8080/v1\""
    );

    // Set in the file: the file is named.
    env.write_raw_config(&provider_config("localhost:8080/v1", ""));
    let out = run_human(&env).await;
    let line = single_error_line_about_config(&out);
    let config_path = env.home.path().join("config.toml");
    assert!(
        line.starts_with(&format!(
            "Error: invalid value for `model_providers.local.base_url` in {}: \
             `localhost:8080/v1` is not an http:// or https:// URL",
            config_path.display()
        )),
        "{line}"
    );

    // doctor reports the same error.
    let doctor = env.run(&["doctor"]).await;
    assert_eq!(doctor.code, Some(1), "{}", doctor.stdout);
    let message = line.trim_start_matches("Error: ");
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("fail config") && l.ends_with(message)),
        "doctor: {}",
        doctor.stdout
    );
    assert!(env.server.requests().is_empty());
}

#[track_caller]
fn single_error_line_about_config(out: &RunOutput) -> String {
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert_no_logs(out);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    lines[0].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_says_nothing_listens_and_is_not_retried() {
    let env = TestEnv::new().await;
    let port = interpreter_test_support::free_loopback_port().expect("a free port");
    env.write_raw_config(&provider_config(
        &format!("http://127.0.0.1:{port}/v1"),
        "request_max_retries = 4",
    ));
    let out = run_human(&env).await;
    let line = single_error_line(&out);
    assert_eq!(
        line,
        format!(
            "ERROR: could not reach model provider `local` at \
             http://127.0.0.1:{port}/v1/chat/completions: nothing is listening at \
             127.0.0.1:{port} (connection refused); is the model server running? Start it, \
             or fix base_url in [model_providers.local]; `interpreter doctor` checks the setup"
        )
    );
    assert!(
        !out.stderr.contains("retry"),
        "refused is not retried: {}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_404_on_a_base_url_without_v1_suggests_adding_it() {
    let env = TestEnv::new().await;
    let endpoint = FixedEndpoint::start(404, "text/html", NOT_FOUND_PAGE).await;
    let base_url = endpoint.url("");
    env.write_raw_config(&provider_config(&base_url, "request_max_retries = 4"));
    let out = run_human(&env).await;
    let line = single_error_line(&out);
    assert_eq!(
        line,
        format!(
            "ERROR: model provider `local` answered 404 Not Found to POST \
             {base_url}/chat/completions: 404 Not Found: nginx; base_url may lack the API \
             version: try base_url = \"{base_url}/v1\" in [model_providers.local], or run \
             `interpreter doctor`"
        )
    );
    assert_eq!(endpoint.model_requests(), 1, "a 404 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_server_page_is_summarised_once_and_not_retried() {
    let env = TestEnv::new().await;
    let endpoint = FixedEndpoint::start(501, "text/html;charset=utf-8", PYTHON_501_PAGE).await;
    let base_url = endpoint.url("/v1");
    env.write_raw_config(&provider_config(&base_url, "request_max_retries = 4"));

    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_no_logs(&out);
    let expected = format!(
        "model provider `local` answered 501 Not Implemented to POST \
         {base_url}/chat/completions: Error response: Error code: 501 Message: Unsupported \
         method ('POST'). Error code explanation: 501 - Server does not support this \
         operation.; the server has no {base_url}/chat/completions endpoint: check base_url \
         in [model_providers.local] and run `interpreter doctor`"
    );
    let events = out.events();
    let errors: Vec<&serde_json::Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{}", out.stdout);
    assert_eq!(errors[0]["message"], expected.as_str());
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turn.failed");
    assert_eq!(last["error"]["message"], expected.as_str());
    assert!(!out.stdout.contains("<p>"), "{}", out.stdout);
    assert_eq!(endpoint.model_requests(), 1, "a 501 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_name_the_key_variable_and_login() {
    let env = TestEnv::new().await;
    let endpoint = FixedEndpoint::start(
        401,
        "application/json",
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
    )
    .await;
    let base_url = endpoint.url("/v1");
    env.write_raw_config(&provider_config(
        &base_url,
        "env_key = \"MOCK_API_KEY\"\nrequest_max_retries = 4",
    ));
    let out = run_human(&env).await;
    let line = single_error_line(&out);
    assert_eq!(
        line,
        format!(
            "ERROR: model provider `local` answered 401 Unauthorized to POST \
             {base_url}/chat/completions: Incorrect API key provided; check the API key in \
             MOCK_API_KEY, or store one with `interpreter login --provider local`"
        )
    );
    assert_eq!(endpoint.model_requests(), 1, "a 401 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_server_is_retried_with_visible_progress() {
    let env = TestEnv::new().await;
    let endpoint = FixedEndpoint::start(
        503,
        "application/json",
        r#"{"error":{"message":"model is loading"}}"#,
    )
    .await;
    let base_url = endpoint.url("/v1");
    env.write_raw_config(&provider_config(&base_url, "request_max_retries = 2"));

    let out = run_human(&env).await;
    let line = single_error_line(&out);
    let failure = format!(
        "model provider `local` answered 503 Service Unavailable to POST \
         {base_url}/chat/completions: model is loading"
    );
    let hint = "the server is busy or failing; try again later, or run `interpreter doctor`";
    assert_eq!(line, format!("ERROR: {failure} (after 3 attempts); {hint}"));
    let retries: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("retry "))
        .collect();
    assert_eq!(retries.len(), 2, "stderr: {}", out.stderr);
    assert!(
        retries[0].starts_with(&format!("retry 1/2: {failure}; retrying in ")),
        "{}",
        retries[0]
    );
    assert!(retries[1].starts_with("retry 2/2: "), "{}", retries[1]);
    assert_eq!(endpoint.model_requests(), 3, "a 503 is retried");

    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_no_logs(&out);
    let events = out.events();
    let messages: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "error")
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(messages.len(), 3, "{}", out.stdout);
    assert!(
        messages[0].starts_with(&format!("Reconnecting... 1/2 ({failure}; retrying in ")),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].starts_with("Reconnecting... 2/2 ("),
        "{}",
        messages[1]
    );
    assert_eq!(messages[2], format!("{failure} (after 3 attempts); {hint}"));
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turn.failed");
    assert_eq!(last["error"]["message"], messages[2]);
    assert_eq!(endpoint.model_requests(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_warnings_are_shown_once_without_logs() {
    let env = TestEnv::new().await;
    let endpoint = FixedEndpoint::start(404, "text/plain", "no").await;
    env.write_raw_config(&format!(
        "mystery = 1\n{}",
        provider_config(&endpoint.url("/v1"), "")
    ));
    let out = run_human(&env).await;
    single_error_line(&out);
    let config_path = env.home.path().join("config.toml");
    let warning = format!(
        "warning: ignoring unknown config key `mystery` in {}",
        config_path.display()
    );
    let shown = out.stderr.lines().filter(|l| *l == warning).count();
    assert_eq!(shown, 1, "stderr: {}", out.stderr);
}
