//! `mock-mcp-server`: a small MCP server over stdio for the MCP client's tests.
//!
//! Tools: `echo {text}` → the text; `add {a, b}` → the sum as text; `sleep {ms}` → waits,
//! then says so (for timeout and cancellation tests); `fail {}` → an `isError` result;
//! `exit {}` → the process exits without answering; `ask {message}` → asks the client
//! (form elicitation) and returns its answer as JSON; `progress {steps}` → reports
//! progress that many times, then says `done N steps`;
//! `env_var {name}` → the variable's value in this process, or `<unset>` (to check what
//! environment the client passed); `big {bytes}` → a text of that many bytes, `HEAD-`
//! then `x`s then `-TAIL` (for the result caps). Exits when stdin closes.
//!
//! Resources: `mock://notes` (text) and `mock://pixel.png` (a PNG blob).
//!
//! For the pool and failure tests: with `MOCK_MCP_LOG=<file>` set, it appends
//! `started <pid>` when it starts, `sleeping <ms>` when a `sleep` call begins and
//! `cancelled sleep <ms>` when the client cancels one. Argument `--crash` makes it exit at once (before the
//! handshake); `--hang` makes it never answer the handshake; `--http` serves streamable
//! HTTP instead of stdio (see `serve_http`); `--many-tools N` also lists `N` more tools,
//! `extra_0` …, each with a small schema, that cannot be called (for the tool-list caps),
//! and `--extra-description-bytes N` pads each one's description to `N` bytes.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::stdio;
use rmcp::{ServerHandler, ServiceExt as _, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    ms: u64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct FailArgs {}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EnvVarArgs {
    name: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct BigArgs {
    bytes: usize,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ProgressArgs {
    steps: u32,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AskArgs {
    message: String,
}

#[derive(Debug, Clone)]
struct MockServer {
    tool_router: ToolRouter<Self>,
    /// Speak only the legacy (pre-2026) protocol versions, which have HTTP sessions.
    legacy_only: bool,
}

#[tool_router]
impl MockServer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
            legacy_only: false,
        }
    }

    #[tool(description = "Returns `text` unchanged")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Adds two numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        let sum = a + b;
        // Whole sums print without a fractional part (`3`, not `3.0`).
        if sum.fract() == 0.0 && sum.abs() < 1e15 {
            format!("{}", sum as i64)
        } else {
            sum.to_string()
        }
    }

    #[tool(description = "Sleeps for `ms` milliseconds")]
    async fn sleep(
        &self,
        Parameters(SleepArgs { ms }): Parameters<SleepArgs>,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> String {
        log_line(&format!("sleeping {ms}"));
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => format!("slept {ms} ms"),
            () = cancelled.cancelled() => {
                log_line(&format!("cancelled sleep {ms}"));
                "cancelled".to_string()
            }
        }
    }

    #[tool(description = "Always fails with an error result")]
    fn fail(&self, Parameters(FailArgs {}): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("this tool always fails")])
    }

    #[tool(
        description = "Asks the user `message` (an elicitation with one `name` field) and returns the answer as JSON"
    )]
    async fn ask(
        &self,
        Parameters(AskArgs { message }): Parameters<AskArgs>,
        peer: rmcp::Peer<rmcp::RoleServer>,
    ) -> String {
        let params = serde_json::json!({
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": { "name": { "type": "string" } }
            }
        });
        let params = match serde_json::from_value(params) {
            Ok(params) => params,
            Err(err) => return format!("bad elicitation params: {err}"),
        };
        match peer.create_elicitation(params).await {
            Ok(result) => serde_json::to_string(&result).unwrap_or_default(),
            Err(err) => format!("elicitation failed: {err}"),
        }
    }

    #[tool(
        description = "Reports progress `steps` times (`step I of N`, 100 ms apart), then returns `done N steps`"
    )]
    async fn progress(
        &self,
        Parameters(ProgressArgs { steps }): Parameters<ProgressArgs>,
        meta: rmcp::model::RequestMetaObject,
        peer: rmcp::Peer<rmcp::RoleServer>,
    ) -> String {
        let Some(token) = meta.get_progress_token() else {
            return "no progress token".to_string();
        };
        for step in 1..=steps {
            let note = rmcp::model::ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_total(f64::from(steps))
                .with_message(format!("step {step} of {steps}"));
            if peer.notify_progress(note).await.is_err() {
                return "client went away".to_string();
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        format!("done {steps} steps")
    }

    #[tool(description = "Exits the server process at once (the call gets no answer)")]
    fn exit(&self, Parameters(FailArgs {}): Parameters<FailArgs>) -> String {
        log_line("exiting");
        std::process::exit(0)
    }

    #[tool(description = "Returns a text of `bytes` bytes: HEAD-, x's, -TAIL")]
    fn big(&self, Parameters(BigArgs { bytes }): Parameters<BigArgs>) -> String {
        let middle = bytes.saturating_sub("HEAD--TAIL".len());
        format!("HEAD-{}-TAIL", "x".repeat(middle))
    }

    #[tool(description = "Returns the value of an environment variable of this server")]
    fn env_var(&self, Parameters(EnvVarArgs { name }): Parameters<EnvVarArgs>) -> String {
        std::env::var(&name).unwrap_or_else(|_| "<unset>".to_string())
    }
}

/// A 1×1 transparent PNG.
const PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MockServer {
    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        if self.legacy_only {
            std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::known_up_to(
                &rmcp::model::ProtocolVersion::V_2025_11_25,
            ))
        } else {
            std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
    }

    // Resources: `mock://notes` (text) and `mock://pixel.png` (an image blob). Built from
    // their wire form, which is what the test asserts on.
    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, rmcp::ErrorData> {
        serde_json::from_value(serde_json::json!({
            "resources": [
                {"uri": "mock://notes", "name": "notes", "mimeType": "text/plain"},
                {"uri": "mock://pixel.png", "name": "pixel", "mimeType": "image/png"}
            ]
        }))
        .map_err(|err| rmcp::ErrorData::internal_error(err.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, rmcp::ErrorData> {
        let contents = match request.uri.as_str() {
            "mock://notes" => serde_json::json!([
                {"uri": "mock://notes", "mimeType": "text/plain", "text": "the notes say hello"}
            ]),
            "mock://pixel.png" => serde_json::json!([
                {"uri": "mock://pixel.png", "mimeType": "image/png", "blob": PIXEL_PNG}
            ]),
            other => {
                return Err(rmcp::ErrorData::invalid_params(
                    format!("no resource {other}"),
                    None,
                ));
            }
        };
        let result: rmcp::model::ReadResourceResult =
            serde_json::from_value(serde_json::json!({ "contents": contents }))
                .map_err(|err| rmcp::ErrorData::internal_error(err.to_string(), None))?;
        Ok(result.into())
    }
}

/// Appends `line` to `$MOCK_MCP_LOG`, when set.
fn log_line(line: &str) {
    use std::io::Write as _;
    let Ok(path) = std::env::var("MOCK_MCP_LOG") else {
        return;
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        // One write per line, so concurrent servers' lines do not interleave.
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    log_line(&format!("started {}", std::process::id()));
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--crash") {
        eprintln!("mock-mcp-server: crashing at start as asked");
        std::process::exit(3);
    }
    if args.iter().any(|a| a == "--hang") {
        // Keep stdin open and never answer; the client must give up on its own.
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    if args.iter().any(|a| a == "--http") {
        return serve_http(!args.iter().any(|a| a == "--modern")).await;
    }
    let mut server = MockServer::new();
    if let Some(count) = args
        .iter()
        .position(|a| a == "--many-tools")
        .and_then(|at| args.get(at + 1))
        .and_then(|n| n.parse::<usize>().ok())
    {
        let description_bytes = args
            .iter()
            .position(|a| a == "--extra-description-bytes")
            .and_then(|at| args.get(at + 1))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        add_extra_tools(&mut server.tool_router, count, description_bytes);
    }
    let service = server.serve(stdio()).await?;
    service.waiting().await?;
    Ok(())
}

/// `count` listed tools that answer every call with an error.
fn add_extra_tools(router: &mut ToolRouter<MockServer>, count: usize, description_bytes: usize) {
    use rmcp::handler::server::router::tool::ToolRoute;
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"value": {"type": "string", "description": "Any value."}}
    });
    let serde_json::Value::Object(schema) = schema else {
        return;
    };
    let schema = std::sync::Arc::new(schema);
    let base = "One of many listed tools; not callable";
    let description = format!(
        "{base}{}",
        ".".repeat(description_bytes.saturating_sub(base.len()))
    );
    for n in 0..count {
        let tool =
            rmcp::model::Tool::new(format!("extra_{n}"), description.clone(), schema.clone());
        router.add_route(ToolRoute::new_dyn(tool, |_context| {
            Box::pin(async {
                Err(rmcp::ErrorData::invalid_request(
                    "extra tools are only listed",
                    None,
                ))
            })
        }));
    }
}

/// One line on stdout (the `--http` mode's channel to the test), flushed at once.
fn say(line: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// `--http`: streamable HTTP on a free loopback port, legacy protocol versions only (they
/// have sessions), or every version with `--modern` (2026-07-28 clients then use it,
/// statelessly). Prints `listening <url>` on stdout. Each `forget` line on stdin drops
/// every session, as a server restart would, and prints `forgot <n>`; EOF stops it.
async fn serve_http(legacy_only: bool) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use tokio::io::AsyncBufReadExt as _;

    let sessions = std::sync::Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || {
            Ok(MockServer {
                legacy_only,
                ..MockServer::new()
            })
        },
        sessions.clone(),
        StreamableHttpServerConfig::default().with_legacy_session_mode(true),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    say(&format!("listening http://{}/mcp", listener.local_addr()?));
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim() == "forget" {
                let mut map = sessions.sessions.write().await;
                let n = map.len();
                map.clear();
                say(&format!("forgot {n}"));
            }
        }
        std::process::exit(0);
    });
    axum::serve(listener, router).await?;
    Ok(())
}
