//! [`ModelClient`]: sends a [`Prompt`] to a Chat Completions or Responses endpoint,
//! retries what is worth retrying before the stream starts, and turns the SSE stream into
//! [`ResponseEvent`]s on a channel the engine reads at its own pace. The request/retry
//! loop, the idle timeout, the overall deadline, the size bounds of a response and
//! cancellation are shared; only the body and the stream parser depend on the wire
//! format.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use interpreter_protocol::{ReasoningEffort, ReasoningSummary, ResponseItem};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::chat_request::build_chat_request;
use crate::chat_stream::{ChatStreamParser, ChunkError, CutOff, ResponseEvent, estimate_tokens};
use crate::error::{
    ConnectionFailure, Overflow, ProviderError, SUMMARY_CHARS, body_summary, context_overflow,
    retryable_status,
};
use crate::limits::StreamLimits;
use crate::messages_request::{ANTHROPIC_VERSION, build_messages_request};
use crate::messages_stream::MessagesStreamParser;
use crate::prompt::Prompt;
use crate::provider::{AuthHeader, MaxTokensField, ModelProviderInfo, WireApi};
use crate::responses_request::build_responses_request;
use crate::responses_stream::ResponsesStreamParser;
use crate::sse::{FrameError, SseEvent, SseFramer};
use crate::text_tools;

/// First retry delay; doubled per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest computed backoff between two attempts.
const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// Longest server-requested `Retry-After` honoured; a longer one is clamped.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// Deadline for the TCP/TLS connect of one attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an error status's body is read: enough for any server's error object,
/// and only its first 200 characters are quoted anyway.
const ERROR_BODY_CAP: usize = 1024 * 1024;

/// A configured connection to one model on one provider.
#[derive(Clone)]
pub struct ModelClient {
    provider_id: String,
    provider: ModelProviderInfo,
    model: String,
    reasoning_effort: Option<ReasoningEffort>,
    url: String,
    headers: HeaderMap,
    /// Which credential is in use, for the 401 hint.
    credential_hint: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for ModelClient {
    // Hand-written so the Authorization header never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("provider_id", &self.provider_id)
            .field("model", &self.model)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The non-blank value of an environment variable from the injected environment.
fn env_value(env: &HashMap<String, String>, name: &str) -> Option<String> {
    env.get(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The provider's credential: the `env_key` variable, else the key stored by
/// `interpreter login` or `account/login/start` (the environment wins, so a one-off
/// `KEY=… interpreter` run overrides a saved login), else `experimental_bearer_token` for
/// providers without `env_key`. The one place a credential is chosen.
pub fn api_key(provider: &ModelProviderInfo, env: &HashMap<String, String>) -> Option<String> {
    let stored = provider
        .stored_api_key
        .as_ref()
        .map(|key| key.expose().trim().to_string())
        .filter(|key| !key.is_empty());
    match &provider.env_key {
        Some(variable) => env_value(env, variable).or(stored),
        None => stored.or_else(|| {
            provider
                .experimental_bearer_token
                .as_deref()
                .map(str::trim)
                .filter(|token| !token.is_empty())
                .map(str::to_string)
        }),
    }
}

/// What to check when the server refuses this provider's credentials (401/403). Public so
/// `interpreter doctor` gives the same advice as a failed model request.
pub fn credential_hint(provider_id: &str, provider: &ModelProviderInfo) -> String {
    match &provider.env_key {
        Some(env_key) => format!(
            "check the API key in {env_key}, or store one with `interpreter login --provider {provider_id}`"
        ),
        None if provider.stored_api_key.is_some() => format!(
            "the stored API key was refused: store a new one with `interpreter login --provider \
             {provider_id}`"
        ),
        None if api_key(provider, &HashMap::new()).is_some() => {
            format!("check experimental_bearer_token in [model_providers.{provider_id}]")
        }
        None => format!(
            "the server wants an API key: store one with `interpreter login --provider \
             {provider_id}`, or set env_key in [model_providers.{provider_id}] and export that \
             variable"
        ),
    }
}

/// The headers every request to this provider carries: the bearer credential when one is
/// available, `http_headers`, and the `env_http_headers` whose variables are set. Public
/// so diagnostics (`interpreter doctor`) probe the server exactly as model requests do.
pub fn provider_headers(
    provider_id: &str,
    provider: &ModelProviderInfo,
    env: &HashMap<String, String>,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    let mut insert = |name: &str, value: &str| -> Result<(), ProviderError> {
        let invalid = |what: &str| ProviderError::Config {
            provider: provider_id.to_string(),
            message: format!("invalid {what} `{name}`"),
        };
        let header_name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("HTTP header name"))?;
        let header_value =
            HeaderValue::from_str(value).map_err(|_| invalid("value for HTTP header"))?;
        headers.insert(header_name, header_value);
        Ok(())
    };
    if let Some(key) = api_key(provider, env) {
        match provider.auth_header() {
            AuthHeader::Bearer => insert(AUTHORIZATION.as_str(), &format!("Bearer {key}"))?,
            AuthHeader::XApiKey => insert("x-api-key", &key)?,
        }
    }
    if provider.wire_api == WireApi::Messages {
        // Every Messages request names the API version; `http_headers` may pin another.
        insert("anthropic-version", ANTHROPIC_VERSION)?;
    }
    for (name, value) in provider.http_headers.iter().flatten() {
        insert(name, value)?;
    }
    for (name, variable) in provider.env_http_headers.iter().flatten() {
        if let Some(value) = env_value(env, variable) {
            insert(name, &value)?;
        }
    }
    Ok(headers)
}

impl ModelClient {
    /// Resolves credentials and headers from `env` (the process environment captured
    /// once by `main`) and validates the provider table.
    pub fn new(
        provider_id: String,
        provider: ModelProviderInfo,
        model: String,
        reasoning_effort: Option<ReasoningEffort>,
        env: &HashMap<String, String>,
    ) -> Result<Self, ProviderError> {
        let config_error = |message: String| ProviderError::Config {
            provider: provider_id.clone(),
            message,
        };
        let base_url = provider
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .ok_or_else(|| {
                config_error(format!(
                    "base_url is not set; add base_url to [model_providers.{provider_id}]"
                ))
            })?;
        crate::provider::validate_base_url(base_url)
            .map_err(|problem| config_error(format!("base_url {problem}")))?;
        let url = format!(
            "{}/{}",
            base_url.trim_end_matches('/'),
            provider.wire_api.endpoint()
        );
        if let Some(env_key) = &provider.env_key
            && api_key(&provider, env).is_none()
        {
            return Err(ProviderError::MissingApiKey {
                provider: provider_id,
                env_key: env_key.clone(),
                instructions: provider.env_key_instructions.clone(),
            });
        }
        let credential_hint = credential_hint(&provider_id, &provider);

        let mut headers = provider_headers(&provider_id, &provider, env)?;
        let mut insert = |name: &str, value: &str| -> Result<(), ProviderError> {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config_error(format!("invalid HTTP header name `{name}`")))?;
            let header_value = HeaderValue::from_str(value)
                .map_err(|_| config_error(format!("invalid value for HTTP header `{name}`")))?;
            headers.insert(header_name, header_value);
            Ok(())
        };
        insert(ACCEPT.as_str(), "text/event-stream")?;
        insert(CONTENT_TYPE.as_str(), "application/json")?;

        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|err| config_error(format!("cannot build the HTTP client: {err}")))?;
        Ok(Self {
            provider_id,
            provider,
            model,
            reasoning_effort,
            url,
            headers,
            credential_hint,
            http,
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn provider(&self) -> &ModelProviderInfo {
        &self.provider
    }

    pub fn provider_id(&self) -> &str {
        &self.provider_id
    }

    pub(crate) fn reasoning_effort(&self) -> Option<ReasoningEffort> {
        self.reasoning_effort
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The provider's headers (credentials included), for the server probes.
    pub(crate) fn auth_headers(&self) -> HeaderMap {
        self.headers.clone()
    }

    /// Size in bytes of the request body `prompt` becomes: what the engine's token
    /// estimate before sending is based on.
    pub fn request_size(&self, prompt: &Prompt) -> usize {
        self.encode_request(prompt)
            .map(|(body, _)| body.len())
            .unwrap_or_default()
    }

    /// Sends the prompt and returns the event stream once the server has accepted it.
    /// Failures before the stream starts are retried here when
    /// [`ProviderError::is_retryable`] says so (with backoff, honouring `Retry-After`, up
    /// to `request_max_retries`); everything after the stream starts is reported on the
    /// stream.
    pub async fn stream(
        &self,
        prompt: &Prompt,
        cancel: &CancellationToken,
    ) -> Result<ResponseStream, ProviderError> {
        self.stream_with_notices(prompt, cancel, None).await
    }

    /// [`Self::stream`], telling `notices` about each retry before it waits.
    pub async fn stream_with_notices(
        &self,
        prompt: &Prompt,
        cancel: &CancellationToken,
        notices: Option<&mpsc::UnboundedSender<RetryNotice>>,
    ) -> Result<ResponseStream, ProviderError> {
        // The overall deadline runs from here: the retries before the stream count.
        let deadline = deadline_after(self.provider.stream_max_duration());
        let (body, request_bytes) = self.encode_request(prompt)?;
        let body_for_probe = body.clone();
        let response =
            tokio::time::timeout_at(deadline, self.send_with_retries(body, cancel, notices))
                .await
                .map_err(|_| ProviderError::StreamDeadline {
                    provider: self.provider_id.clone(),
                    limit: self.provider.stream_max_duration(),
                })??;
        let parser = WireParser::new(
            self.provider.wire_api,
            &self.provider_id,
            request_bytes,
            self.provider.stream_limits(),
        );

        let recovery = (self.provider.text_tool_calls_enabled(&self.provider_id)
            && !prompt.tools.is_empty())
        .then(|| TextRecovery {
            tools: prompt.tools.iter().map(|tool| tool.name.clone()).collect(),
            // The thread and the position in its history: stable for this request,
            // distinct from every other request of the thread.
            id_seed: format!(
                "{}:{}",
                prompt.prompt_cache_key.as_deref().unwrap_or(""),
                prompt.input.len()
            ),
        });
        let (sender, receiver) = mpsc::unbounded_channel();
        let _ = sender.send(Ok(ResponseEvent::Created));
        tokio::spawn(pump_stream(
            response,
            parser,
            sender,
            cancel.clone(),
            StreamContext {
                idle_timeout: self.provider.stream_idle_timeout(),
                deadline,
                max_duration: self.provider.stream_max_duration(),
                provider: self.provider_id.clone(),
                request_bytes,
                recovery,
                probe: Some((self.clone(), body_for_probe)),
            },
        ));
        Ok(ResponseStream { receiver })
    }

    /// One non-streaming request of the same body, after a stream that closed without
    /// a single event: servers that cannot report an error on a stream (llama-cpp-python
    /// when the prompt overflows) do report it here. Returns the error that explains the
    /// empty stream.
    async fn probe_empty_stream(&self, body: &[u8], cancel: &CancellationToken) -> ProviderError {
        let provider = self.provider_id.clone();
        let empty = |detail: String| ProviderError::EmptyStream {
            provider: provider.clone(),
            detail,
        };
        // The request body is ours, so this edit of untyped JSON is safe: only `stream`
        // changes (and `stream_options`, which is refused without streaming).
        let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
            return empty("the request could not be re-encoded for a probe".to_string());
        };
        if let Some(object) = value.as_object_mut() {
            object.insert("stream".to_string(), serde_json::Value::Bool(false));
            object.remove("stream_options");
        }
        let Ok(probe_body) = serde_json::to_vec(&value) else {
            return empty("the request could not be re-encoded for a probe".to_string());
        };
        match self.send_once(probe_body, cancel).await {
            Err(err) => err,
            Ok(Ok(_)) => empty(
                "the same request without streaming was accepted, so the server's streaming failed"
                    .to_string(),
            ),
            Ok(Err(AttemptFailure {
                kind:
                    FailureKind::Http {
                        overflow: Some(overflow),
                        ..
                    },
                ..
            })) => overflow.into_error(&provider),
            Ok(Err(failure)) => empty(format!(
                "the same request without streaming failed: {}",
                failure.summary()
            )),
        }
    }

    /// The request body in this provider's wire format, and the size of its history part
    /// (what the usage estimate is based on when the server reports none).
    fn encode_request(&self, prompt: &Prompt) -> Result<(Vec<u8>, usize), ProviderError> {
        let encode_error = |err: serde_json::Error| ProviderError::Config {
            provider: self.provider_id.clone(),
            message: format!("cannot encode the request: {err}"),
        };
        let (body, history) = match self.provider.wire_api {
            WireApi::Chat => {
                let mut request = build_chat_request(&self.model, prompt, self.reasoning_effort);
                if self.provider.max_tokens_field(&self.provider_id)
                    == MaxTokensField::MaxCompletionTokens
                {
                    request.max_completion_tokens = request.max_tokens.take();
                }
                (
                    serde_json::to_vec(&request).map_err(encode_error)?,
                    serde_json::to_vec(&request.messages),
                )
            }
            WireApi::Responses => {
                let request = build_responses_request(&self.model, prompt, self.reasoning_effort);
                (
                    serde_json::to_vec(&request).map_err(encode_error)?,
                    serde_json::to_vec(&request.input),
                )
            }
            WireApi::Messages => {
                let request = build_messages_request(&self.model, prompt, self.reasoning_effort);
                (
                    serde_json::to_vec(&request).map_err(encode_error)?,
                    serde_json::to_vec(&request.messages),
                )
            }
        };
        let history_bytes = history.map(|bytes| bytes.len()).unwrap_or(body.len());
        Ok((body, history_bytes))
    }

    async fn send_with_retries(
        &self,
        body: Vec<u8>,
        cancel: &CancellationToken,
        notices: Option<&mpsc::UnboundedSender<RetryNotice>>,
    ) -> Result<reqwest::Response, ProviderError> {
        let max_retries = self.provider.request_max_retries();
        let mut attempt: u64 = 0;
        loop {
            let failure = match self.send_once(body.clone(), cancel).await? {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            let retry_after = failure.retry_after;
            let error = self.attempt_error(failure, attempt + 1);
            if !error.is_retryable() || attempt >= max_retries {
                return Err(error);
            }
            let delay = retry_after.unwrap_or_else(|| backoff(attempt));
            attempt += 1;
            tracing::debug!(
                provider = %self.provider_id,
                retry = attempt,
                delay_ms = delay.as_millis() as u64,
                "retrying the model request: {error}"
            );
            if let Some(notices) = notices {
                let _ = notices.send(RetryNotice {
                    error: error.into_retry_notice(),
                    retry: attempt,
                    max_retries,
                    delay,
                });
            }
            tokio::select! {
                () = cancel.cancelled() => return Err(ProviderError::Cancelled),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One HTTP attempt. The outer `Result` is for cancellation only.
    async fn send_once(
        &self,
        body: Vec<u8>,
        cancel: &CancellationToken,
    ) -> Result<Result<reqwest::Response, AttemptFailure>, ProviderError> {
        let mut builder = self.http.post(&self.url).headers(self.headers.clone());
        // The request is part of the caller's trace: the current span is its `chat` span.
        if let Some(trace) = interpreter_telemetry::W3cTraceContext::current() {
            if let Some(parent) = trace.traceparent {
                builder = builder.header("traceparent", parent);
            }
            if let Some(state) = trace.tracestate {
                builder = builder.header("tracestate", state);
            }
        }
        if let Some(query) = &self.provider.query_params {
            builder = builder.query(query);
        }
        let deadline = self.provider.stream_idle_timeout();
        let sent = tokio::select! {
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            sent = tokio::time::timeout(deadline, builder.body(body).send()) => sent,
        };
        let response = match sent {
            Err(_) => {
                return Ok(Err(AttemptFailure::transport(
                    ConnectionFailure::Timeout,
                    format!(
                        "no response headers within {}s; see stream_idle_timeout_ms",
                        deadline.as_secs_f64()
                    ),
                )));
            }
            Ok(Err(err)) => {
                let (failure, detail) = classify_transport_error(&err);
                return Ok(Err(AttemptFailure::transport(failure, detail)));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(Ok(response));
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(parse_retry_after);
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        // Bounded: a server answering an error with an endless body must not fill memory.
        let body = tokio::select! {
            () = cancel.cancelled() => return Err(ProviderError::Cancelled),
            body = tokio::time::timeout(deadline, read_body_capped(response, ERROR_BODY_CAP)) => {
                body.ok()
                    .and_then(Result::ok)
                    .map(|(bytes, _complete)| String::from_utf8_lossy(&bytes).into_owned())
                    .unwrap_or_default()
            }
        };
        Ok(Err(AttemptFailure {
            retry_after,
            kind: FailureKind::Http {
                status: status.as_u16(),
                message: body_summary(&body, content_type.as_deref(), SUMMARY_CHARS),
                overflow: context_overflow(status.as_u16(), &body),
            },
        }))
    }

    /// The error one failed attempt stands for, after `attempts` tries so far.
    fn attempt_error(&self, failure: AttemptFailure, attempts: u64) -> ProviderError {
        let provider = self.provider_id.clone();
        let url = self.url.clone();
        match failure.kind {
            FailureKind::Transport { failure, detail } => ProviderError::Connection {
                reason: connection_reason(failure, &self.url, &detail),
                hint: self.connection_hint(failure),
                provider,
                url,
                failure,
                attempts,
            },
            FailureKind::Http {
                overflow: Some(overflow),
                ..
            } => overflow.into_error(&provider),
            FailureKind::Http {
                status, message, ..
            } => ProviderError::Http {
                hint: self.http_hint(status),
                provider,
                url,
                status,
                message,
                attempts,
            },
        }
    }

    /// What to do about an error status: the credential for 401/403, a missing `/v1`
    /// for an endpoint the server does not have, patience for an overloaded one.
    fn http_hint(&self, status: u16) -> String {
        let id = &self.provider_id;
        let base_url = self
            .provider
            .base_url
            .as_deref()
            .unwrap_or_default()
            .trim()
            .trim_end_matches('/');
        match status {
            401 | 403 => self.credential_hint.clone(),
            404 | 405 | 501 if !ends_in_api_version(base_url) => format!(
                "base_url may lack the API version: try base_url = \"{base_url}/v1\" in \
                 [model_providers.{id}], or run `interpreter doctor`"
            ),
            404 | 405 | 501 if self.provider.wire_api == WireApi::Responses => format!(
                "the server may not serve the Responses API: try wire_api = \"chat\" in \
                 [model_providers.{id}], or run `interpreter doctor`"
            ),
            404 | 405 | 501 if self.provider.wire_api == WireApi::Messages => format!(
                "the server may not serve the Anthropic Messages API at {}: check base_url \
                 (the root that `/messages` is under, e.g. `…/anthropic/v1`) or try \
                 wire_api = \"chat\" in [model_providers.{id}]; `interpreter doctor` checks it",
                self.url
            ),
            404 | 405 | 501 => format!(
                "the server has no {} endpoint: check base_url in [model_providers.{id}] \
                 and run `interpreter doctor`",
                self.url
            ),
            _ if retryable_status(status) => {
                "the server is busy or failing; try again later, or run `interpreter doctor`"
                    .to_string()
            }
            _ => "run `interpreter doctor` to check the model and provider settings".to_string(),
        }
    }

    /// What to do when there was no HTTP answer.
    fn connection_hint(&self, failure: ConnectionFailure) -> String {
        let id = &self.provider_id;
        match failure {
            ConnectionFailure::Refused => format!(
                "is the model server running? Start it, or fix base_url in \
                 [model_providers.{id}]; `interpreter doctor` checks the setup"
            ),
            ConnectionFailure::Dns | ConnectionFailure::InvalidUrl => format!(
                "check the host in base_url of [model_providers.{id}], or run `interpreter doctor`"
            ),
            ConnectionFailure::Tls => format!(
                "check the server's certificate, or whether base_url of \
                 [model_providers.{id}] should be http:// rather than https://; \
                 run `interpreter doctor`"
            ),
            ConnectionFailure::Timeout | ConnectionFailure::Reset | ConnectionFailure::Other => {
                "the server may be overloaded or unreachable; run `interpreter doctor`".to_string()
            }
        }
    }
}

/// Whether a base URL's path ends in an API version segment (`/v1`, `/v4`), as every
/// OpenAI-compatible root does.
fn ends_in_api_version(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    url.path_segments()
        .and_then(|mut segments| segments.rfind(|segment| !segment.is_empty()))
        .and_then(|last| last.strip_prefix('v'))
        .is_some_and(|version| !version.is_empty() && version.chars().all(|c| c.is_ascii_digit()))
}

/// A connection failure in plain words.
fn connection_reason(failure: ConnectionFailure, url: &str, detail: &str) -> String {
    let parsed = reqwest::Url::parse(url).ok();
    let host = parsed
        .as_ref()
        .and_then(|url| url.host_str())
        .unwrap_or("the host")
        .to_string();
    let host_port = match parsed
        .as_ref()
        .and_then(reqwest::Url::port_or_known_default)
    {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    match failure {
        ConnectionFailure::Refused => {
            format!("nothing is listening at {host_port} (connection refused)")
        }
        ConnectionFailure::Dns => format!("the host name `{host}` does not resolve ({detail})"),
        ConnectionFailure::Tls => format!("the TLS handshake with {host_port} failed ({detail})"),
        ConnectionFailure::InvalidUrl => format!("the URL cannot be requested ({detail})"),
        ConnectionFailure::Timeout => format!("{host_port} did not answer in time ({detail})"),
        ConnectionFailure::Reset => {
            format!("{host_port} closed the connection before answering ({detail})")
        }
        ConnectionFailure::Other => detail.to_string(),
    }
}

/// A request failure before the stream started that the client itself retried: the
/// engine turns each into a `stream_error` event, so a human sees the retries happen.
#[derive(Debug, Clone)]
pub struct RetryNotice {
    /// What the failed attempt ended in.
    pub error: ProviderError,
    /// This retry's number, from 1.
    pub retry: u64,
    pub max_retries: u64,
    /// The wait before the retry (backoff or the server's `Retry-After`).
    pub delay: Duration,
}

/// Why one attempt failed before the stream started.
#[derive(Debug)]
struct AttemptFailure {
    retry_after: Option<Duration>,
    kind: FailureKind,
}

#[derive(Debug)]
enum FailureKind {
    Http {
        status: u16,
        /// The body summarised to one line.
        message: String,
        /// Set when the body says the prompt does not fit (never retried).
        overflow: Option<Overflow>,
    },
    Transport {
        failure: ConnectionFailure,
        detail: String,
    },
}

impl AttemptFailure {
    fn transport(failure: ConnectionFailure, detail: String) -> Self {
        Self {
            retry_after: None,
            kind: FailureKind::Transport { failure, detail },
        }
    }

    fn summary(&self) -> String {
        match &self.kind {
            FailureKind::Http {
                status, message, ..
            } => format!("HTTP {status}: {message}"),
            FailureKind::Transport { detail, .. } => detail.clone(),
        }
    }
}

/// The events of one response, in order. Ends after `Completed` or the first error.
#[derive(Debug)]
pub struct ResponseStream {
    receiver: mpsc::UnboundedReceiver<Result<ResponseEvent, ProviderError>>,
}

impl ResponseStream {
    /// The next event, or `None` once the response is over.
    pub async fn next(&mut self) -> Option<Result<ResponseEvent, ProviderError>> {
        self.receiver.recv().await
    }
}

impl futures::Stream for ResponseStream {
    type Item = Result<ResponseEvent, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

type EventSender = mpsc::UnboundedSender<Result<ResponseEvent, ProviderError>>;

/// The stream parser of the provider's wire format.
#[derive(Debug)]
enum WireParser {
    Chat(ChatStreamParser),
    Responses(ResponsesStreamParser),
    Messages(MessagesStreamParser),
}

impl WireParser {
    fn new(wire_api: WireApi, provider: &str, request_bytes: usize, limits: StreamLimits) -> Self {
        match wire_api {
            WireApi::Chat => Self::Chat(ChatStreamParser::new(limits)),
            WireApi::Responses => Self::Responses(ResponsesStreamParser::new(
                provider.to_string(),
                request_bytes,
                limits,
            )),
            WireApi::Messages => Self::Messages(MessagesStreamParser::new(
                provider.to_string(),
                request_bytes,
                limits,
            )),
        }
    }

    /// The size bounds this response is read under.
    fn limits(&self) -> StreamLimits {
        match self {
            Self::Chat(parser) => parser.limits(),
            Self::Responses(parser) => parser.limits(),
            Self::Messages(parser) => parser.limits(),
        }
    }

    fn push(
        &mut self,
        event: &SseEvent,
        provider: &str,
    ) -> Result<Vec<ResponseEvent>, ProviderError> {
        match self {
            Self::Chat(parser) => {
                let limits = parser.limits();
                parser
                    .push_data(event.data.trim())
                    .map_err(|err| match err {
                        ChunkError::Unreadable(message) => ProviderError::Stream {
                            provider: provider.to_string(),
                            message,
                        },
                        ChunkError::TooLarge(bound) => limits.exceeded(bound, provider),
                    })
            }
            Self::Responses(parser) => parser.push_event(&event.event, event.data.trim()),
            Self::Messages(parser) => parser.push_event(&event.event, event.data.trim()),
        }
    }

    /// Whether the response is over and nothing more needs to be read.
    fn is_complete(&self) -> bool {
        match self {
            // Usage arrives in a chunk after `finish_reason`, so chat reads on to the end.
            Self::Chat(_) => false,
            Self::Responses(parser) => parser.is_complete(),
            Self::Messages(parser) => parser.is_complete(),
        }
    }

    /// Whether the connection closing now is a normal end.
    fn may_end(&self) -> bool {
        match self {
            Self::Chat(parser) => parser.saw_finish_reason(),
            Self::Responses(parser) => parser.is_complete(),
            Self::Messages(parser) => parser.may_end(),
        }
    }

    /// The events that close the response once the stream has ended.
    fn finish(self, request_bytes: usize) -> Result<Vec<ResponseEvent>, ProviderError> {
        match self {
            Self::Chat(parser) => Ok(parser.finish(request_bytes)),
            Self::Responses(parser) => parser.finish().map(|()| Vec::new()),
            Self::Messages(parser) => parser.finish(),
        }
    }
}

/// Reads the SSE body until `[DONE]`, EOF, the end of the response, an error, idleness,
/// the overall deadline, a size bound or cancellation. Stops as soon as the consumer
/// drops the [`ResponseStream`].
async fn pump_stream(
    response: reqwest::Response,
    parser: WireParser,
    sender: EventSender,
    cancel: CancellationToken,
    context: StreamContext,
) {
    pump_events(response.bytes_stream(), parser, sender, cancel, context).await;
}

/// [`pump_stream`] on any body: the HTTP body in production, bytes held in memory for
/// [`crate::fuzzing`].
async fn pump_events<S, B, E>(
    mut body: S,
    mut parser: WireParser,
    sender: EventSender,
    cancel: CancellationToken,
    context: StreamContext,
) where
    S: futures::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let StreamContext {
        idle_timeout,
        deadline,
        max_duration,
        provider,
        request_bytes,
        recovery,
        probe,
    } = context;
    let limits = parser.limits();
    let mut framer = SseFramer::new(limits.event_bytes);
    let mut body_ended = false;
    // Idleness is time without a whole event: bytes that never complete one (a comment
    // every few seconds, a line that never ends) do not keep the stream alive.
    let mut idle_deadline = deadline_after(idle_timeout);
    let mut events_seen = 0usize;
    let stream_error = |message: String| ProviderError::Stream {
        provider: provider.clone(),
        message,
    };
    let truncated = |detail: &str| ProviderError::Truncated {
        provider: provider.clone(),
        detail: detail.to_string(),
    };
    let past_deadline = || ProviderError::StreamDeadline {
        provider: provider.clone(),
        limit: max_duration,
    };
    let mut answer = AnswerCheck::new(recovery);
    loop {
        let event = match framer.next_event() {
            Some(Ok(event)) => event,
            Some(Err(FrameError::TooLarge(bound))) => {
                let _ = sender.send(Err(limits.exceeded(bound, &provider)));
                return;
            }
            Some(Err(FrameError::NotUtf8)) => {
                let _ = sender.send(Err(stream_error(
                    "an event of the stream is not UTF-8".to_string(),
                )));
                return;
            }
            None if body_ended && parser.may_end() => break,
            None if body_ended && events_seen == 0 => {
                // 200 and not a single event: ask once without streaming why.
                let err = match probe {
                    Some((client, body)) => {
                        tokio::time::timeout_at(deadline, client.probe_empty_stream(&body, &cancel))
                            .await
                            .unwrap_or_else(|_| past_deadline())
                    }
                    None => ProviderError::EmptyStream {
                        provider: provider.clone(),
                        detail: "no probe was possible".to_string(),
                    },
                };
                let _ = sender.send(Err(err));
                return;
            }
            None if body_ended => {
                let _ = sender.send(Err(truncated(
                    "the connection closed before the response finished",
                )));
                return;
            }
            None => {
                let read = tokio::select! {
                    biased;
                    () = cancel.cancelled() => {
                        let _ = sender.send(Err(ProviderError::Cancelled));
                        return;
                    }
                    () = sender.closed() => return,
                    () = tokio::time::sleep_until(deadline) => {
                        let _ = sender.send(Err(past_deadline()));
                        return;
                    }
                    () = tokio::time::sleep_until(idle_deadline) => {
                        let _ = sender.send(Err(ProviderError::StreamIdle {
                            provider: provider.clone(),
                            idle: idle_timeout,
                        }));
                        return;
                    }
                    read = body.next() => read,
                };
                match read {
                    Some(Ok(bytes)) => framer.push(bytes.as_ref()),
                    Some(Err(err)) => {
                        let _ = sender.send(Err(stream_error(format!(
                            "reading the stream failed: {err}"
                        ))));
                        return;
                    }
                    None => body_ended = true,
                }
                continue;
            }
        };
        idle_deadline = deadline_after(idle_timeout);
        events_seen += 1;
        let data = event.data.trim();
        if data == "[DONE]" {
            if !parser.may_end() {
                // A bare `[DONE]` is the server saying "that was all" about nothing; after
                // partial output it cuts an answer short.
                let err = if answer.saw_output {
                    truncated("[DONE] arrived without a finish reason or completion event")
                } else {
                    ProviderError::EmptyAnswer {
                        provider: provider.clone(),
                    }
                };
                let _ = sender.send(Err(err));
                return;
            }
            break;
        }
        if data.is_empty() {
            continue;
        }
        match parser.push(&event, &provider) {
            Ok(events) => {
                for event in events {
                    if !answer.forward(event, &sender, &provider) {
                        return;
                    }
                }
            }
            Err(err) => {
                let _ = sender.send(Err(err));
                return;
            }
        }
        if let Some(events) = answer.loop_stop(request_bytes) {
            // Dropping the connection after this makes the server stop generating.
            for event in events {
                if !answer.forward(event, &sender, &provider) {
                    return;
                }
            }
            return;
        }
        if parser.is_complete() {
            break;
        }
    }
    match parser.finish(request_bytes) {
        Ok(events) => {
            for event in events {
                if !answer.forward(event, &sender, &provider) {
                    return;
                }
            }
        }
        Err(err) => {
            let _ = sender.send(Err(err));
        }
    }
}

/// Decodes one streamed answer held in memory, through the same path as a live response
/// (SSE framing of the body as it arrived in `chunks`, the wire parser, the size bounds
/// of `limits`, text tool-call recovery when `tools` is not empty, the loop stop, the
/// empty-answer check), without a network or a server to probe. It exists for fuzzing
/// and corpus replay (see [`crate::fuzzing`]); everything a consumer of a
/// [`ResponseStream`] would have read is returned in order.
pub fn decode_stream_in_memory(
    wire_api: WireApi,
    chunks: Vec<Vec<u8>>,
    tools: Vec<String>,
    limits: StreamLimits,
) -> Vec<Result<ResponseEvent, ProviderError>> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    else {
        return Vec::new();
    };
    let provider = "in-memory".to_string();
    let parser = WireParser::new(wire_api, &provider, 0, limits);
    let recovery = (!tools.is_empty()).then(|| TextRecovery {
        tools,
        id_seed: String::new(),
    });
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let body = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    // The body is all in memory, so the stream is never idle and no deadline fires.
    let never = Duration::from_secs(3600);
    runtime.block_on(pump_events(
        body,
        parser,
        sender,
        CancellationToken::new(),
        StreamContext {
            idle_timeout: never,
            deadline: deadline_after(never),
            max_duration: never,
            provider,
            request_bytes: 0,
            recovery,
            probe: None,
        },
    ));
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    events
}

/// Everything `pump_stream` needs besides the response itself.
struct StreamContext {
    idle_timeout: Duration,
    /// When the whole request must be over (`stream_max_duration_ms` after it started).
    deadline: Instant,
    max_duration: Duration,
    provider: String,
    request_bytes: usize,
    recovery: Option<TextRecovery>,
    /// The client and request body, for the one probe after an empty stream.
    probe: Option<(ModelClient, Vec<u8>)>,
}

/// Text tool-call recovery for one response (see [`crate::text_tools`]).
#[derive(Debug)]
struct TextRecovery {
    tools: Vec<String>,
    id_seed: String,
}

/// Bytes of streamed text between two loop checks.
const LOOP_CHECK_EVERY: usize = 256;
/// The stretch of latest text that must repeat for a loop: long enough that no sane
/// answer repeats that much verbatim (about 750 tokens).
const LOOP_WINDOW: usize = 3000;
/// Longest repeated unit looked for; the window holds at least ten copies of it.
const LOOP_MAX_PERIOD: usize = 300;

/// Watches one response on its way to the engine, for both wire formats:
/// * a response completing without any content becomes [`ProviderError::EmptyAnswer`]
///   instead of a silent "";
/// * tool calls written as text are turned into calls (when enabled);
/// * a stream that keeps repeating the same text is stopped as a loop.
#[derive(Debug, Default)]
struct AnswerCheck {
    /// Something was said (text, reasoning or a call), even if only in deltas.
    saw_output: bool,
    /// A finished item carries content.
    has_content: bool,
    recovery: Option<TextRecovery>,
    /// Calls recovered from text so far in this response.
    recovered_calls: usize,
    /// Streamed text, for the loop check.
    text: String,
    unchecked: usize,
    /// Where to cut the text: set once a loop is found.
    loop_cut: Option<usize>,
    /// Watches the streamed text for tool-call markup outside code fences (recovery
    /// only), by the same rule recovery uses.
    markup: text_tools::MarkupScanner,
    /// Bytes of text streamed so far.
    streamed_bytes: usize,
    /// Tool-call markup has started: later text deltas are held back, so the user does
    /// not watch `<tool_call>{…}` scroll by before it turns into a call.
    markup_started: bool,
}

impl AnswerCheck {
    fn new(recovery: Option<TextRecovery>) -> Self {
        Self {
            recovery,
            ..Default::default()
        }
    }

    /// Sends `event` on (or the empty-answer error in place of `Completed`). Returns
    /// whether the stream should go on.
    fn forward(&mut self, event: ResponseEvent, sender: &EventSender, provider: &str) -> bool {
        for event in self.expand(event) {
            if !self.forward_one(event, sender, provider) {
                return false;
            }
        }
        true
    }

    /// An assistant message carrying tool-call markup becomes its prose plus the calls.
    fn expand(&mut self, event: ResponseEvent) -> Vec<ResponseEvent> {
        let (Some(recovery), ResponseEvent::OutputItemDone(item @ ResponseItem::Message { .. })) =
            (&self.recovery, &event)
        else {
            return vec![event];
        };
        let is_assistant = matches!(
            item,
            ResponseItem::Message {
                role: interpreter_protocol::Role::Assistant,
                ..
            }
        );
        let text = item.message_text().unwrap_or_default();
        let Some(recovered) = is_assistant
            .then(|| text_tools::recover_tool_calls(&text, &recovery.tools))
            .flatten()
        else {
            return vec![event];
        };
        tracing::info!(
            calls = recovered.calls.len(),
            "recovered tool calls the model wrote as text"
        );
        let mut events = Vec::new();
        if !recovered.text.is_empty() {
            events.push(ResponseEvent::OutputItemDone(ResponseItem::assistant_text(
                recovered.text,
            )));
        }
        for call in recovered.calls {
            let call_id = text_tools::synthetic_call_id(&recovery.id_seed, self.recovered_calls);
            self.recovered_calls += 1;
            events.push(ResponseEvent::OutputItemDone(ResponseItem::FunctionCall {
                name: call.name,
                arguments: call.arguments,
                call_id,
            }));
        }
        events
    }

    fn forward_one(&mut self, event: ResponseEvent, sender: &EventSender, provider: &str) -> bool {
        match &event {
            ResponseEvent::OutputTextDelta(delta) => {
                self.saw_output = true;
                self.watch_for_loop(delta);
                if self.recovery.is_some() {
                    return match self.visible_part(delta) {
                        Some(visible) if visible.len() == delta.len() => {
                            sender.send(Ok(event)).is_ok()
                        }
                        Some(visible) => sender
                            .send(Ok(ResponseEvent::OutputTextDelta(visible)))
                            .is_ok(),
                        None => true,
                    };
                }
            }
            ResponseEvent::ReasoningDelta(_)
            | ResponseEvent::ReasoningSummaryPartAdded { .. }
            | ResponseEvent::ReasoningSummaryDelta { .. } => {
                self.saw_output = true;
            }
            ResponseEvent::OutputItemDone(item) => {
                self.saw_output = true;
                self.has_content |= has_content(item);
            }
            ResponseEvent::Completed { .. } if !self.has_content => {
                let _ = sender.send(Err(ProviderError::EmptyAnswer {
                    provider: provider.to_string(),
                }));
                return false;
            }
            _ => {}
        }
        sender.send(Ok(event)).is_ok()
    }

    /// The part of a text delta the user should see: everything before tool-call markup
    /// (outside code fences) begins. `None` when nothing of it is shown.
    fn visible_part(&mut self, delta: &str) -> Option<String> {
        if self.markup_started {
            return None;
        }
        let before = self.streamed_bytes;
        self.streamed_bytes += delta.len();
        let Some(start) = self.markup.push(delta) else {
            return Some(delta.to_string());
        };
        self.markup_started = true;
        // The opener may have begun in an earlier delta, already shown.
        let shown = start.saturating_sub(before);
        (shown > 0).then(|| delta[..shown].to_string())
    }

    fn watch_for_loop(&mut self, delta: &str) {
        if self.loop_cut.is_some() {
            return;
        }
        self.text.push_str(delta);
        self.unchecked += delta.len();
        if self.unchecked >= LOOP_CHECK_EVERY {
            self.unchecked = 0;
            self.loop_cut = find_loop(&self.text);
        }
    }

    /// Once a loop is found: the events that end the response with the text up to the
    /// first repetition, marked as cut off.
    fn loop_stop(&mut self, request_bytes: usize) -> Option<Vec<ResponseEvent>> {
        let cut = self.loop_cut?;
        let kept = self.text[..cut].to_string();
        let input_tokens = estimate_tokens(request_bytes);
        let output_tokens = estimate_tokens(self.text.len());
        Some(vec![
            ResponseEvent::OutputItemDone(ResponseItem::assistant_text(kept)),
            ResponseEvent::Completed {
                response_id: None,
                response_model: None,
                token_usage: interpreter_protocol::TokenUsage {
                    input_tokens,
                    output_tokens,
                    total_tokens: input_tokens + output_tokens,
                    ..Default::default()
                },
                usage_estimated: true,
                cut_off: Some(CutOff::Loop),
            },
        ])
    }
}

/// If the last [`LOOP_WINDOW`] bytes of `text` are one unit of at most
/// [`LOOP_MAX_PERIOD`] bytes repeated, the index to cut at: the end of the first copy of
/// that unit.
fn find_loop(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.len() < LOOP_WINDOW {
        return None;
    }
    let start = bytes.len() - LOOP_WINDOW;
    let window = &bytes[start..];
    let period =
        (1..=LOOP_MAX_PERIOD).find(|&p| window[p..].iter().zip(window).all(|(a, b)| a == b))?;
    // Walk back to where the repetition began.
    let mut begin = start;
    while begin > 0 && bytes[begin - 1] == bytes[begin - 1 + period] {
        begin -= 1;
    }
    let mut cut = (begin + period).min(bytes.len());
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    Some(cut)
}

/// Whether a finished output item is something the model said or asked for.
fn has_content(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Message { .. } => item
            .message_text()
            .is_some_and(|text| !text.trim().is_empty()),
        ResponseItem::Reasoning {
            summary,
            content,
            encrypted_content,
            ..
        } => {
            let summary_text = summary
                .iter()
                .any(|ReasoningSummary::SummaryText { text }| !text.trim().is_empty());
            let raw_text = content
                .iter()
                .flatten()
                .any(|part| !part.text().trim().is_empty());
            summary_text || raw_text || encrypted_content.as_ref().is_some_and(|e| !e.is_empty())
        }
        ResponseItem::FunctionCall { .. } | ResponseItem::FunctionCallOutput { .. } => true,
    }
}

/// `duration` from now; a duration too long to add (a huge configured value) is as good
/// as never.
fn deadline_after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Reads a response body, at most `cap` bytes of it: the bytes and whether that was the
/// whole body. What follows the cap is never read, so a server's endless answer cannot
/// fill memory. The one bounded body reader, for error statuses, the model list and the
/// server probes.
pub(crate) async fn read_body_capped(
    mut response: reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// Exponential backoff with up to 25% random jitter so parallel clients spread out.
fn backoff(attempt: u64) -> Duration {
    let exponent = u32::try_from(attempt).unwrap_or(u32::MAX).min(16);
    let base = BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(exponent))
        .min(BACKOFF_CAP);
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let jitter_ms = random % (base.as_millis() as u64 / 4 + 1);
    base + Duration::from_millis(jitter_ms)
}

/// `Retry-After` as delay-seconds or an HTTP date, clamped to [`RETRY_AFTER_CAP`].
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    let delay = if let Ok(seconds) = value.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        Duration::from_secs_f64(seconds.min(RETRY_AFTER_CAP.as_secs_f64()))
    } else {
        let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
        let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
        wait.to_std().unwrap_or(Duration::ZERO)
    };
    Some(delay.min(RETRY_AFTER_CAP))
}

/// What kind of connection failure a transport error is, and its innermost cause in
/// the transport's words (the outer layers only repeat the URL).
pub(crate) fn classify_transport_error(err: &reqwest::Error) -> (ConnectionFailure, String) {
    use std::error::Error as _;
    let mut causes: Vec<&(dyn std::error::Error + 'static)> = Vec::new();
    let mut source = err.source();
    while let Some(cause) = source {
        causes.push(cause);
        source = cause.source();
    }
    let detail = causes
        .last()
        .map_or_else(|| err.to_string(), |cause| cause.to_string());
    if err.is_builder() {
        return (ConnectionFailure::InvalidUrl, detail);
    }
    if err.is_timeout() {
        return (ConnectionFailure::Timeout, detail);
    }
    let io_kind = causes
        .iter()
        .find_map(|cause| cause.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    let failure = match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => ConnectionFailure::Refused,
        Some(std::io::ErrorKind::TimedOut) => ConnectionFailure::Timeout,
        Some(
            std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::UnexpectedEof,
        ) => ConnectionFailure::Reset,
        _ => {
            // The resolver's and TLS stack's errors carry no io kind; their words do.
            let words = causes
                .iter()
                .map(|cause| cause.to_string().to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(": ");
            if words.contains("dns error") || words.contains("failed to lookup address") {
                ConnectionFailure::Dns
            } else if words.contains("certificate") || words.contains("tls") {
                ConnectionFailure::Tls
            } else if words.contains("connection closed") || words.contains("connection reset") {
                ConnectionFailure::Reset
            } else if words.contains("invalid url") || words.contains("relative url") {
                ConnectionFailure::InvalidUrl
            } else {
                ConnectionFailure::Other
            }
        }
    };
    (failure, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_parses_seconds_and_dates_and_is_capped() {
        assert_eq!(parse_retry_after("1"), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after("3600"), Some(RETRY_AFTER_CAP));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(0) >= BACKOFF_BASE);
        assert!(backoff(0) < BACKOFF_BASE * 2);
        assert!(backoff(30) <= BACKOFF_CAP + BACKOFF_CAP / 4);
    }

    #[test]
    fn api_version_segments_are_recognised() {
        for url in [
            "http://h:8080/v1",
            "https://api.z.ai/api/paas/v4/",
            "http://h/x/v1",
        ] {
            assert!(ends_in_api_version(url), "{url}");
        }
        for url in [
            "http://h:8000",
            "http://h:8000/",
            "http://h/api",
            "http://h/v",
            "http://h/vx",
        ] {
            assert!(!ends_in_api_version(url), "{url}");
        }
    }

    fn provider(env_key: Option<&str>) -> ModelProviderInfo {
        ModelProviderInfo {
            name: "x".into(),
            base_url: Some("http://127.0.0.1:9/v1/".into()),
            env_key: env_key.map(str::to_string),
            env_key_instructions: Some("get one from your dashboard".into()),
            ..Default::default()
        }
    }

    #[test]
    fn missing_or_blank_key_names_the_variable() {
        let env = HashMap::from([("MODEL_API_KEY".to_string(), "  ".to_string())]);
        let err = ModelClient::new(
            "x".into(),
            provider(Some("MODEL_API_KEY")),
            "m".into(),
            None,
            &env,
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "model provider `x` needs an API key: set the environment variable MODEL_API_KEY (get one from your dashboard)"
            )
        );
    }

    #[test]
    fn stored_key_is_used_only_when_the_variable_is_unset() {
        let mut info = provider(Some("MODEL_API_KEY"));
        info.stored_api_key = Some(crate::credentials::SecretKey::new("sk-stored"));
        let bearer = |env: &HashMap<String, String>| {
            ModelClient::new("x".into(), info.clone(), "m".into(), None, env)
                .ok()
                .and_then(|c| c.headers.get("authorization").cloned())
                .map(|v| v.as_bytes().to_vec())
        };
        assert_eq!(bearer(&HashMap::new()), Some(b"Bearer sk-stored".to_vec()));
        let env = HashMap::from([("MODEL_API_KEY".to_string(), "sk-env".to_string())]);
        assert_eq!(bearer(&env), Some(b"Bearer sk-env".to_vec()));
    }

    #[test]
    fn missing_base_url_is_a_config_error() {
        let mut info = provider(None);
        info.base_url = None;
        let err = ModelClient::new("x".into(), info, "m".into(), None, &HashMap::new()).err();
        assert!(matches!(err, Some(ProviderError::Config { .. })));
    }

    #[test]
    fn url_and_headers_are_resolved() {
        let mut info = provider(Some("MODEL_API_KEY"));
        info.http_headers = Some([("X-Static".to_string(), "1".to_string())].into());
        info.env_http_headers = Some(
            [
                ("X-Org".to_string(), "ORG".to_string()),
                ("X-Absent".to_string(), "ABSENT".to_string()),
            ]
            .into(),
        );
        let env = HashMap::from([
            ("MODEL_API_KEY".to_string(), "sk-1".to_string()),
            ("ORG".to_string(), "acme".to_string()),
        ]);
        let client = ModelClient::new("x".into(), info, "m".into(), None, &env);
        let Ok(client) = client else {
            panic!("client should build");
        };
        assert_eq!(client.url, "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(
            client.headers.get("authorization").map(|v| v.as_bytes()),
            Some(&b"Bearer sk-1"[..])
        );
        assert_eq!(
            client.headers.get("x-static").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        assert_eq!(
            client.headers.get("x-org").map(|v| v.as_bytes()),
            Some(&b"acme"[..])
        );
        assert!(client.headers.get("x-absent").is_none());
        assert!(!format!("{client:?}").contains("sk-1"));
    }

    #[test]
    fn responses_wire_api_posts_to_responses() {
        let mut info = provider(None);
        info.wire_api = WireApi::Responses;
        let client = ModelClient::new("x".into(), info, "m".into(), None, &HashMap::new());
        let Ok(client) = client else {
            panic!("client should build");
        };
        assert_eq!(client.url, "http://127.0.0.1:9/v1/responses");
    }
}
