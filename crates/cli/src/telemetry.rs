//! Telemetry export for this process: the OpenTelemetry SDK's providers for traces,
//! metrics and logs, installed once before any front end runs and flushed before the
//! process exits.
//!
//! What to export comes from `[otel]` and the `OTEL_*` variables
//! ([`interpreter_telemetry::settings`]); off unless configured. The engine and the front
//! ends only ever use the OpenTelemetry API, so nothing below main knows whether (or where)
//! anything is exported. Exporting never holds up a turn: spans, metrics and logs are
//! queued (the SDK's batch processors, 2048 spans and logs, dropping and counting what
//! does not fit) and sent from the SDK's own threads.
//!
//! The servers (`mcp-server`, `app-server`) always keep metrics in a Prometheus registry
//! too, which their listeners serve as `GET /metrics`.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use interpreter_telemetry::settings::{OtlpTarget, Protocol, Sampler, Signal, TelemetrySettings};
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;

/// How long the exit may wait for the last export (a collector that is down must not
/// hold the process for the exporters' full timeouts).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);
/// A collector's answer is a few bytes; more is not read.
const MAX_EXPORT_RESPONSE: usize = 64 * 1024;

/// The providers this process installed; [`Telemetry::shutdown`] flushes them.
#[derive(Default)]
pub(crate) struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    logger: Option<SdkLoggerProvider>,
}

/// Which front end a command runs, for the telemetry set-up; `None` for commands that run
/// no turns (and export nothing).
pub(crate) fn front_end(command: Option<&crate::cli::Command>) -> Option<&'static str> {
    use crate::cli::{AppServerCommand, Command};
    match command {
        None | Some(Command::Chat(_)) => Some("chat"),
        Some(Command::Exec(_)) => Some("exec"),
        Some(Command::McpServer(_)) => Some("mcp-server"),
        Some(Command::AppServer(args))
            if !matches!(
                args.command,
                Some(AppServerCommand::GenerateJsonSchema { .. })
            ) =>
        {
            Some("app-server")
        }
        Some(Command::Acp(_)) => Some("acp"),
        _ => None,
    }
}

/// The `[otel]` table the command's configuration layers make; `None` when the
/// configuration does not load (the command itself reports why).
pub(crate) fn otel_table(
    config_args: &crate::cli::ConfigArgs,
    env: &HashMap<String, String>,
) -> Option<interpreter_telemetry::settings::OtelToml> {
    let cwd = std::env::current_dir().ok()?;
    let inputs = crate::config_inputs::unsecured(config_args, env.clone(), cwd).ok()?;
    interpreter_core::config::load_otel(&inputs).ok()
}

/// Installs export as `settings` say, plus the Prometheus registry when `serve_metrics`.
/// Must run inside the tokio runtime (the exporters' connections live on it). A part that
/// cannot be built is left out with a warning on stderr: telemetry never stops the agent.
pub(crate) fn install(
    settings: &TelemetrySettings,
    front_end: &'static str,
    serve_metrics: bool,
) -> Telemetry {
    interpreter_telemetry::spans::set_front_end(front_end);
    interpreter_telemetry::set_capture_content(settings.capture_content);
    let resource = resource(settings, front_end);
    let mut telemetry = Telemetry::default();

    if let Some(target) = &settings.traces {
        match span_exporter(target) {
            Ok(exporter) => {
                let provider = SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_sampler(sampler(&settings.sampler))
                    .with_resource(resource.clone())
                    .build();
                opentelemetry::global::set_tracer_provider(provider.clone());
                telemetry.tracer = Some(provider);
            }
            Err(err) => warn(Signal::Traces, target, &err),
        }
    }

    let mut meter = SdkMeterProvider::builder().with_resource(resource.clone());
    let mut has_reader = false;
    if let Some(target) = &settings.metrics {
        match metric_exporter(target) {
            Ok(exporter) => {
                meter = meter.with_reader(
                    PeriodicReader::builder(exporter)
                        .with_interval(settings.metric_interval)
                        .build(),
                );
                has_reader = true;
            }
            Err(err) => warn(Signal::Metrics, target, &err),
        }
    }
    if serve_metrics {
        let registry = prometheus::Registry::new();
        match opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .build()
        {
            Ok(exporter) => {
                meter = meter.with_reader(exporter);
                has_reader = true;
                interpreter_telemetry::scrape::register(Box::new(move || {
                    prometheus::TextEncoder::new()
                        .encode_to_string(&registry.gather())
                        .map_err(|err| err.to_string())
                }));
            }
            Err(err) => eprintln!("warning: metrics will not be served on /metrics: {err}"),
        }
    }
    if has_reader {
        let provider = meter.build();
        opentelemetry::global::set_meter_provider(provider.clone());
        telemetry.meter = Some(provider);
    }

    if let Some(target) = &settings.logs {
        match log_exporter(target) {
            Ok(exporter) => {
                telemetry.logger = Some(
                    SdkLoggerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_resource(resource)
                        .build(),
                );
            }
            Err(err) => warn(Signal::Logs, target, &err),
        }
    }
    telemetry
}

fn warn(signal: Signal, target: &OtlpTarget, err: &dyn std::fmt::Display) {
    eprintln!(
        "warning: {signal} will not be exported to {} ({}): {err}",
        target.endpoint, target.protocol
    );
}

impl Telemetry {
    /// The layer that turns `tracing` events into OTel logs (correlated with the span
    /// current when they happen), when logs are exported.
    pub(crate) fn log_layer(
        &self,
    ) -> Option<
        opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge<
            SdkLoggerProvider,
            opentelemetry_sdk::logs::SdkLogger,
        >,
    > {
        self.logger
            .as_ref()
            .map(opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new)
    }

    /// Sends what is queued and stops the providers, within [`SHUTDOWN_BOUND`] each. Call
    /// outside the runtime's tasks (the exports run on the runtime, which must still be
    /// up).
    pub(crate) fn shutdown(self) {
        if let Some(tracer) = self.tracer {
            let _ = tracer.shutdown_with_timeout(SHUTDOWN_BOUND);
        }
        if let Some(meter) = self.meter {
            let _ = meter.shutdown_with_timeout(SHUTDOWN_BOUND);
        }
        if let Some(logger) = self.logger {
            let _ = logger.shutdown_with_timeout(SHUTDOWN_BOUND);
        }
    }
}

fn resource(settings: &TelemetrySettings, front_end: &'static str) -> Resource {
    let mut attributes = vec![
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("interpreter.front_end", front_end),
    ];
    attributes.extend(
        settings
            .resource
            .iter()
            .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
    );
    Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attributes(attributes)
        .build()
}

fn sampler(choice: &Sampler) -> opentelemetry_sdk::trace::Sampler {
    use opentelemetry_sdk::trace::Sampler as Sdk;
    match choice {
        Sampler::AlwaysOn => Sdk::AlwaysOn,
        Sampler::AlwaysOff => Sdk::AlwaysOff,
        Sampler::TraceIdRatio(ratio) => Sdk::TraceIdRatioBased(*ratio),
        Sampler::ParentBased(inner) => Sdk::ParentBased(Box::new(sampler(inner))),
    }
}

fn headers(target: &OtlpTarget) -> HashMap<String, String> {
    target.headers.iter().cloned().collect()
}

fn metadata(target: &OtlpTarget) -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in &target.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            map.append(name, value);
        }
    }
    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map)
}

fn http_protocol(protocol: Protocol) -> opentelemetry_otlp::Protocol {
    match protocol {
        Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
        Protocol::HttpProtobuf | Protocol::Grpc => opentelemetry_otlp::Protocol::HttpBinary,
    }
}

/// One builder per signal and transport: the three exporter builders share no type.
macro_rules! exporter {
    ($name:ident, $exporter:ty) => {
        fn $name(target: &OtlpTarget) -> Result<$exporter, opentelemetry_otlp::ExporterBuildError> {
            match target.protocol {
                Protocol::Grpc => <$exporter>::builder()
                    .with_tonic()
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(target.timeout)
                    .with_metadata(metadata(target))
                    .build(),
                Protocol::HttpProtobuf | Protocol::HttpJson => <$exporter>::builder()
                    .with_http()
                    .with_http_client(ExportClient::new(target.timeout))
                    .with_protocol(http_protocol(target.protocol))
                    .with_endpoint(target.endpoint.clone())
                    .with_timeout(target.timeout)
                    .with_headers(headers(target))
                    .build(),
            }
        }
    };
}

exporter!(span_exporter, opentelemetry_otlp::SpanExporter);
exporter!(metric_exporter, opentelemetry_otlp::MetricExporter);
exporter!(log_exporter, opentelemetry_otlp::LogExporter);

/// OTLP over HTTP with the workspace's `reqwest` (the exporter crate's own client is a
/// different major version of it). The SDK exports from its own threads, outside the
/// runtime, so each request runs as a task on the runtime that installed export.
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl ExportClient {
    fn new(timeout: Duration) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            // `install` runs inside the runtime; outside one there is nothing to export on.
            runtime: tokio::runtime::Handle::current(),
            timeout,
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let timeout = self.timeout;
        let task = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let sent = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send();
            let mut response = tokio::time::timeout(timeout, sent)
                .await
                .map_err(|_| "the collector did not answer in time".to_string())?
                .map_err(|err| err.to_string())?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let mut body = Vec::new();
            while let Ok(Some(chunk)) = tokio::time::timeout(timeout, response.chunk())
                .await
                .unwrap_or(Ok(None))
            {
                if body.len() + chunk.len() > MAX_EXPORT_RESPONSE {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            answer
                .body(Bytes::from(body))
                .map_err(|err| err.to_string())
        });
        match task.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(message)) => Err(message.into()),
            Err(err) => Err(format!("the export task ended: {err}").into()),
        }
    }
}
