//! A scripted OpenAI-compatible model server for tests.
//!
//! Each request to `POST /v1/chat/completions`, `POST /v1/responses` or
//! `POST /v1/messages` is answered with the next queued [`MockResponse`] (one FIFO for
//! all three). Every request body is captured
//! with the endpoint it hit and checked against the conversation invariants of its wire
//! format in [`invariants`], and against the thread's previous request for prefix
//! stability in [`prefix`]; breaches are recorded as violations (never panics inside the
//! server) so a test can assert on them at the end.

pub mod chunk;
mod invariants;
pub mod messages_event;
mod prefix;
pub mod responses_event;
mod script;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use tokio::task::JoinHandle;

pub use invariants::StreamedTurn;
pub use script::{Flood, MockResponse, RetryAfter, SseScript, StatusScript};

/// How long a stalled response keeps its connection open before ending, so a test that
/// forgets to time out still terminates.
const STALL_LIMIT: Duration = Duration::from_secs(600);

/// What the server has seen, for [`MockModelServer::record`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct MockRecord {
    pub requests: Vec<serde_json::Value>,
    /// The path each request hit (`/v1/chat/completions`, `/v1/responses`), parallel to
    /// `requests`.
    pub endpoints: Vec<String>,
    /// The `traceparent` header of each request (`None` without one), parallel to
    /// `requests`.
    pub traceparents: Vec<Option<String>>,
    pub violations: Vec<String>,
    /// The headers of each `POST /v1/messages`, in order.
    pub messages_headers: Vec<MessagesHeaders>,
    /// The server-information probes seen (`GET /props`, `GET /v1/models`,
    /// `POST /api/show`), by path, in order.
    pub probes: Vec<String>,
}

/// What a Messages request said in its headers (credentials only as where they were).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MessagesHeaders {
    pub anthropic_version: Option<String>,
    /// The `x-api-key` value.
    pub x_api_key: Option<String>,
    /// The `Authorization` value.
    pub authorization: Option<String>,
}

impl MessagesHeaders {
    fn of(headers: &HeaderMap) -> Self {
        let value = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        Self {
            anthropic_version: value("anthropic-version"),
            x_api_key: value("x-api-key"),
            authorization: value("authorization"),
        }
    }
}

/// The wire formats the mock serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    ChatCompletions,
    Responses,
    Messages,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/v1/chat/completions",
            Self::Responses => "/v1/responses",
            Self::Messages => "/v1/messages",
        }
    }
}

#[derive(Default)]
struct ServerState {
    /// What `GET /props` answers (llama.cpp's server properties); 404 when unset.
    props: Option<serde_json::Value>,
    /// The ids `GET /v1/models` lists; `mock-model` when unset.
    models: Option<Vec<String>>,
    /// How many tokens `POST /tokenize` reports (after `POST /apply-template`); both
    /// answer 404 when unset.
    token_count: Option<usize>,
    queue: VecDeque<MockResponse>,
    record: MockRecord,
    streamed: Vec<StreamedTurn>,
    prefixes: prefix::PrefixTracker,
}

type Shared = Arc<Mutex<ServerState>>;

fn lock(state: &Shared) -> MutexGuard<'_, ServerState> {
    // A panic while holding the lock cannot leave the state half-written in a way that
    // matters to tests, so poisoning is ignored.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running mock server. Stops serving when dropped.
pub struct MockModelServer {
    addr: SocketAddr,
    state: Shared,
    task: JoinHandle<()>,
}

impl MockModelServer {
    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state: Shared = Arc::default();
        let app = Router::new()
            .route(
                Endpoint::ChatCompletions.path(),
                post(|state: State<Shared>, headers: HeaderMap, body: Bytes| {
                    answer(state, Endpoint::ChatCompletions, headers, body)
                }),
            )
            .route(
                Endpoint::Responses.path(),
                post(|state: State<Shared>, headers: HeaderMap, body: Bytes| {
                    answer(state, Endpoint::Responses, headers, body)
                }),
            )
            .route(
                Endpoint::Messages.path(),
                post(|state: State<Shared>, headers: HeaderMap, body: Bytes| {
                    answer(state, Endpoint::Messages, headers, body)
                }),
            )
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", axum::routing::get(list_models))
            .route("/props", axum::routing::get(props))
            .route("/api/show", post(no_ollama))
            .route("/api/tags", axum::routing::get(no_ollama))
            .route("/apply-template", post(apply_template))
            .route("/tokenize", post(tokenize))
            .fallback(unknown_route)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                log_to_stderr(&format!("mock model server stopped: {err}"));
            }
        });
        Ok(Self { addr, state, task })
    }

    /// e.g. `http://127.0.0.1:PORT/v1`, ready to be a provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `provider_keys` for Chat Completions where a failed request fails at once: the
    /// tests script every answer, so a retry would take the next test's.
    pub const CHAT_NO_RETRIES: &'static str =
        "wire_api = \"chat\"\nrequest_max_retries = 0\nstream_max_retries = 0";

    /// The `config.toml` that points the agent at this server: model `mock-model` of
    /// provider `mock`, on Chat Completions with the key in `MOCK_API_KEY`; `top_level`
    /// goes before the tables, `provider_keys` (retries, another `wire_api`, …) into
    /// `[model_providers.mock]`, and `tables` after it. The one place tests spell the
    /// mock provider out.
    pub fn config_toml(&self, top_level: &str, provider_keys: &str, tables: &str) -> String {
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\n{top_level}\n\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\n\
             env_key = \"MOCK_API_KEY\"\n{provider_keys}\n{tables}",
            self.base_url()
        )
    }

    /// Queues the answer to one future request.
    pub fn push(&self, response: MockResponse) {
        lock(&self.state).queue.push_back(response);
    }

    /// Request bodies received so far, in order.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        lock(&self.state).record.requests.clone()
    }

    /// The path each request so far hit, in order (parallel to [`Self::requests`]).
    pub fn endpoints(&self) -> Vec<String> {
        lock(&self.state).record.endpoints.clone()
    }

    /// Invariant breaches and unscripted requests seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).record.violations.clone()
    }

    /// Makes `GET /props` answer this (as llama.cpp's server does), e.g.
    /// `{"default_generation_settings":{"n_ctx":2048},"chat_template_caps":{"supports_tools":false}}`.
    pub fn set_props(&self, props: serde_json::Value) {
        lock(&self.state).props = Some(props);
    }

    /// Makes `GET /v1/models` list these ids instead of `mock-model`.
    pub fn set_models(&self, ids: &[&str]) {
        lock(&self.state).models = Some(ids.iter().map(|id| id.to_string()).collect());
    }

    /// Makes `POST /apply-template` and `POST /tokenize` answer (as llama.cpp's server
    /// does), the latter with this many tokens whatever the text.
    pub fn set_token_count(&self, tokens: usize) {
        lock(&self.state).token_count = Some(tokens);
    }

    /// Requests + violations, e.g. to write to a file.
    pub fn record(&self) -> MockRecord {
        lock(&self.state).record.clone()
    }

    /// Scripted responses not consumed yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Panics listing every violation, if any.
    #[track_caller]
    pub fn assert_invariants(&self) {
        let violations = self.violations();
        if !violations.is_empty() {
            panic!(
                "mock model server saw {} violation(s):\n- {}",
                violations.len(),
                violations.join("\n- ")
            );
        }
    }
}

impl Drop for MockModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The server has no logger of its own; stderr keeps stdout free for the binary's
/// protocol line.
fn log_to_stderr(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{message}");
}

async fn unknown_route(State(state): State<Shared>, uri: axum::http::Uri) -> Response {
    let message = format!("mock: request to unexpected path {uri}");
    lock(&state).record.violations.push(message.clone());
    (StatusCode::NOT_FOUND, message).into_response()
}

/// `GET /v1/models`: the model list clients probe an endpoint with (`interpreter doctor`).
/// Not scripted and not recorded, so probing never consumes a queued response.
async fn list_models(State(state): State<Shared>) -> Response {
    lock(&state).record.probes.push("/v1/models".to_string());
    let ids = lock(&state)
        .models
        .clone()
        .unwrap_or_else(|| vec!["mock-model".to_string()]);
    let data: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({"id": id, "object": "model"}))
        .collect();
    axum::Json(serde_json::json!({"object": "list", "data": data})).into_response()
}

/// `GET /props`: llama.cpp's server properties, when a test set them. Not recorded.
async fn props(State(state): State<Shared>) -> Response {
    lock(&state).record.probes.push("/props".to_string());
    match lock(&state).props.clone() {
        Some(props) => axum::Json(props).into_response(),
        None => (StatusCode::NOT_FOUND, "no /props on this server").into_response(),
    }
}

/// `POST /v1/messages/count_tokens`: the configured token count (as llama.cpp's server
/// answers it); 404 when unset. Recorded as a probe, never scripted.
async fn count_tokens(State(state): State<Shared>) -> Response {
    lock(&state)
        .record
        .probes
        .push("/v1/messages/count_tokens".to_string());
    match lock(&state).token_count {
        Some(count) => axum::Json(serde_json::json!({"input_tokens": count})).into_response(),
        None => (StatusCode::NOT_FOUND, "File Not Found").into_response(),
    }
}

/// `POST /apply-template`: the templated prompt (here just a placeholder). Not recorded.
async fn apply_template(State(state): State<Shared>) -> Response {
    match lock(&state).token_count {
        Some(_) => axum::Json(serde_json::json!({"prompt": "<templated prompt>"})).into_response(),
        None => (StatusCode::NOT_FOUND, "File Not Found").into_response(),
    }
}

/// `POST /tokenize`: the configured number of tokens. Not recorded.
async fn tokenize(State(state): State<Shared>) -> Response {
    match lock(&state).token_count {
        Some(count) => axum::Json(serde_json::json!({"tokens": vec![1; count]})).into_response(),
        None => (StatusCode::NOT_FOUND, "File Not Found").into_response(),
    }
}

/// `POST /api/show` and `GET /api/tags` (Ollama's own API): this mock is not Ollama.
async fn no_ollama(State(state): State<Shared>, uri: axum::http::Uri) -> Response {
    lock(&state).record.probes.push(uri.path().to_string());
    (StatusCode::NOT_FOUND, "404 page not found").into_response()
}

async fn answer(
    State(state): State<Shared>,
    endpoint: Endpoint,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let scripted = {
        let mut guard = lock(&state);
        let state = &mut *guard;
        let request: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(value) => value,
            Err(err) => {
                let message = format!("mock: request body is not JSON: {err}");
                state.record.violations.push(message.clone());
                return (StatusCode::BAD_REQUEST, message).into_response();
            }
        };
        let index = state.record.requests.len();
        let violations = match endpoint {
            Endpoint::ChatCompletions => invariants::check_request(&request, &state.streamed),
            Endpoint::Responses => invariants::check_responses_request(&request, &state.streamed),
            Endpoint::Messages => invariants::check_messages_request(&request, &state.streamed),
        };
        if endpoint == Endpoint::Messages {
            state
                .record
                .messages_headers
                .push(MessagesHeaders::of(&headers));
        }
        for violation in violations {
            state
                .record
                .violations
                .push(format!("request #{index}: {violation}"));
        }
        state.record.requests.push(request);
        state.record.endpoints.push(endpoint.path().to_string());
        state.record.traceparents.push(
            headers
                .get("traceparent")
                .and_then(|value| value.to_str().ok())
                .map(str::to_string),
        );
        let completed = match state.queue.front() {
            Some(MockResponse::Sse(script)) => {
                script.flood.is_none()
                    && !script.stall_after_chunks
                    && prefix::stream_completes(&script.chunks)
            }
            _ => false,
        };
        let request = state.record.requests.last().cloned().unwrap_or_default();
        for violation in state.prefixes.observe(&request, completed) {
            state
                .record
                .violations
                .push(format!("request #{index}: {violation}"));
        }
        match state.queue.pop_front() {
            Some(response) => {
                if let MockResponse::Sse(script) = &response {
                    state
                        .streamed
                        .push(StreamedTurn::from_chunks(&script.chunks));
                }
                response
            }
            None => {
                let message = "mock: no scripted response left".to_string();
                state
                    .record
                    .violations
                    .push(format!("request #{index}: {message}"));
                return (StatusCode::INTERNAL_SERVER_ERROR, message).into_response();
            }
        }
    };
    match scripted {
        MockResponse::Status(status) => status_response(status),
        MockResponse::Sse(script) => sse_response(script),
    }
}

fn status_response(script: StatusScript) -> Response {
    let code = StatusCode::from_u16(script.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (code, script.body).into_response();
    if let Some(retry_after) = script.retry_after
        && let Ok(value) = HeaderValue::from_str(&retry_after.header_value())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn sse_response(script: SseScript) -> Response {
    if let Some(raw) = script.raw {
        let mut response = Response::new(Body::from(raw));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        return response;
    }
    let delay = Duration::from_millis(script.chunk_delay_ms);
    let framed: Vec<Bytes> = script
        .chunks
        .iter()
        .map(
            |chunk| match chunk.get("type").and_then(serde_json::Value::as_str) {
                Some(kind) => Bytes::from(format!("event: {kind}\ndata: {chunk}\n\n")),
                None => Bytes::from(format!("data: {chunk}\n\n")),
            },
        )
        .chain(
            (script.send_done && !script.stall_after_chunks && script.flood.is_none())
                .then(|| Bytes::from_static(b"data: [DONE]\n\n")),
        )
        .collect();
    // The flood is made as it is sent: `times` clones of one shared buffer.
    let flood = script.flood.map(|flood| {
        let frame = Bytes::from(flood.frame);
        let times = usize::try_from(flood.times).unwrap_or(usize::MAX);
        std::iter::once(Bytes::from(flood.head))
            .filter(|head| !head.is_empty())
            .chain(std::iter::repeat_n(frame, times))
    });
    let frames = framed.into_iter().chain(flood.into_iter().flatten());
    let stall = script.stall_after_chunks;
    let stream = futures::stream::unfold(
        (frames, false),
        move |(mut frames, first_sent)| async move {
            match frames.next() {
                Some(frame) => {
                    if first_sent && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Some((Ok::<_, std::convert::Infallible>(frame), (frames, true)))
                }
                None => {
                    if stall {
                        tokio::time::sleep(STALL_LIMIT).await;
                    }
                    None
                }
            }
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
