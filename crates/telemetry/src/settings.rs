//! What to export and where: the `[otel]` table of `config.toml` (Codex's keys, which mean
//! the same here) and the standard `OTEL_*` variables, resolved into one
//! [`TelemetrySettings`]. Pure: the binary installs exporters from the result.
//!
//! Precedence, per signal (traces, metrics, logs): `OTEL_<SIGNAL>_EXPORTER` (`otlp` or
//! `none`), else the table's `trace_exporter` / `metrics_exporter` / `exporter` (the
//! first two fall back to `exporter`), else export is on when an OTLP endpoint variable
//! is set, and off otherwise. The endpoint, protocol, headers and timeout come from the
//! signal's own variable, then the generic `OTEL_EXPORTER_OTLP_*` one, then the table.
//! `OTEL_SDK_DISABLED=true` turns everything off.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// `[otel]` in `config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct OtelToml {
    /// `deployment.environment.name` on every span and metric.
    pub environment: Option<String>,
    /// Logs (and the default of the two below).
    pub exporter: Option<ExporterToml>,
    pub trace_exporter: Option<ExporterToml>,
    pub metrics_exporter: Option<ExporterToml>,
    /// Put prompts, answers and tool input/output into spans and logs.
    pub log_user_prompt: bool,
}

/// `"none"`, `"otlp-http"`, `"otlp-grpc"`, or `{ otlp-http = { endpoint = …, … } }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ExporterToml {
    Name(String),
    Table(BTreeMap<String, OtlpToml>),
}

/// The table of one OTLP exporter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct OtlpToml {
    pub endpoint: Option<String>,
    /// `binary` (protobuf, the default) or `json`; HTTP only.
    pub protocol: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// Accepted for Codex files; certificates come from the system's roots.
    pub tls: Option<toml_ignored::Ignored>,
}

mod toml_ignored {
    /// Any value, read and dropped.
    #[derive(Debug, Clone, Default)]
    pub struct Ignored;

    impl<'de> serde::Deserialize<'de> for Ignored {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            serde::de::IgnoredAny::deserialize(deserializer).map(|_| Ignored)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Traces,
    Metrics,
    Logs,
}

impl Signal {
    pub const ALL: [Signal; 3] = [Signal::Traces, Signal::Metrics, Signal::Logs];

    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }

    fn env(self) -> &'static str {
        match self {
            Signal::Traces => "TRACES",
            Signal::Metrics => "METRICS",
            Signal::Logs => "LOGS",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    HttpProtobuf,
    HttpJson,
    Grpc,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
            Protocol::Grpc => "grpc",
        })
    }
}

/// Where one signal goes.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpTarget {
    pub protocol: Protocol,
    /// The full URL: for HTTP including `/v1/<signal>`.
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio(f64),
    /// The caller's sampling decision when there is a caller, else the inner sampler.
    ParentBased(Box<Sampler>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    pub traces: Option<OtlpTarget>,
    pub metrics: Option<OtlpTarget>,
    pub logs: Option<OtlpTarget>,
    pub service_name: String,
    /// Resource attributes besides `service.name` (from `OTEL_RESOURCE_ATTRIBUTES` and
    /// `otel.environment`).
    pub resource: Vec<(String, String)>,
    pub sampler: Sampler,
    pub capture_content: bool,
    pub metric_interval: Duration,
}

impl TelemetrySettings {
    pub fn target(&self, signal: Signal) -> Option<&OtlpTarget> {
        match signal {
            Signal::Traces => self.traces.as_ref(),
            Signal::Metrics => self.metrics.as_ref(),
            Signal::Logs => self.logs.as_ref(),
        }
    }

    /// Nothing is exported.
    pub fn is_off(&self) -> bool {
        Signal::ALL
            .iter()
            .all(|signal| self.target(*signal).is_none())
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum SettingsError {
    #[error("{key}: `{value}` is not supported here; use {expected}")]
    Unsupported {
        key: String,
        value: String,
        expected: &'static str,
    },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

const DEFAULT_HTTP: &str = "http://localhost:4318";
const DEFAULT_GRPC: &str = "http://localhost:4317";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// Resolves `[otel]` and the process environment into what to export.
pub fn resolve(
    otel: &OtelToml,
    env: &HashMap<String, String>,
) -> Result<TelemetrySettings, SettingsError> {
    let var = |key: &str| env.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut targets = Vec::new();
    for signal in Signal::ALL {
        targets.push(if disabled {
            None
        } else {
            resolve_target(signal, otel, &var)?
        });
    }
    let mut resource = parse_pairs("OTEL_RESOURCE_ATTRIBUTES", var("OTEL_RESOURCE_ATTRIBUTES"))?;
    let named = resource
        .iter()
        .position(|(key, _)| key == "service.name")
        .map(|index| resource.remove(index).1);
    let service_name = var("OTEL_SERVICE_NAME")
        .map(str::to_string)
        .or(named)
        .unwrap_or_else(|| "interpreter".to_string());
    if let Some(environment) = &otel.environment
        && !resource
            .iter()
            .any(|(key, _)| key == "deployment.environment.name")
    {
        resource.push(("deployment.environment.name".into(), environment.clone()));
    }
    let capture_content = otel.log_user_prompt
        || var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let metric_interval = match var("OTEL_METRIC_EXPORT_INTERVAL") {
        Some(ms) => millis("OTEL_METRIC_EXPORT_INTERVAL", ms)?,
        None => DEFAULT_METRIC_INTERVAL,
    };
    let mut targets = targets.into_iter();
    Ok(TelemetrySettings {
        traces: targets.next().flatten(),
        metrics: targets.next().flatten(),
        logs: targets.next().flatten(),
        service_name,
        resource,
        sampler: sampler(var("OTEL_TRACES_SAMPLER"), var("OTEL_TRACES_SAMPLER_ARG"))?,
        capture_content,
        metric_interval,
    })
}

fn resolve_target<'a>(
    signal: Signal,
    otel: &OtelToml,
    var: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<OtlpTarget>, SettingsError> {
    let s = signal.env();
    let exporter_key = format!("OTEL_{s}_EXPORTER");
    let signal_endpoint = var(&format!("OTEL_EXPORTER_OTLP_{s}_ENDPOINT"));
    let generic_endpoint = var("OTEL_EXPORTER_OTLP_ENDPOINT");
    let (table_key, table) = match signal {
        Signal::Traces => ("otel.trace_exporter", otel.trace_exporter.as_ref()),
        Signal::Metrics => ("otel.metrics_exporter", otel.metrics_exporter.as_ref()),
        Signal::Logs => ("otel.exporter", None),
    };
    let (table_key, table) = match table {
        Some(table) => (table_key, Some(table)),
        None => ("otel.exporter", otel.exporter.as_ref()),
    };
    // What the table says: off, or an OTLP kind with its settings.
    let table = match table {
        None => None,
        Some(ExporterToml::Name(name)) => match name.as_str() {
            "none" => Some(None),
            "otlp-http" => Some(Some((Protocol::HttpProtobuf, OtlpToml::default()))),
            "otlp-grpc" => Some(Some((Protocol::Grpc, OtlpToml::default()))),
            other => {
                return Err(unsupported(
                    table_key,
                    other,
                    "none, otlp-http or otlp-grpc",
                ));
            }
        },
        Some(ExporterToml::Table(tables)) => {
            let mut entries = tables.iter();
            match (entries.next(), entries.next()) {
                (Some((kind, settings)), None) => {
                    let protocol = match kind.as_str() {
                        "otlp-http" => match settings.protocol.as_deref() {
                            None | Some("binary") => Protocol::HttpProtobuf,
                            Some("json") => Protocol::HttpJson,
                            Some(other) => {
                                return Err(unsupported(
                                    &format!("{table_key}.otlp-http.protocol"),
                                    other,
                                    "binary or json",
                                ));
                            }
                        },
                        "otlp-grpc" => Protocol::Grpc,
                        other => {
                            return Err(unsupported(table_key, other, "otlp-http or otlp-grpc"));
                        }
                    };
                    Some(Some((protocol, settings.clone())))
                }
                _ => {
                    return Err(SettingsError::Invalid {
                        key: table_key.to_string(),
                        message: "name exactly one exporter (`otlp-http` or `otlp-grpc`)".into(),
                    });
                }
            }
        }
    };
    let enabled = match var(&exporter_key) {
        Some("none") => false,
        Some("otlp") => true,
        Some(other) => return Err(unsupported(&exporter_key, other, "otlp or none")),
        None => match &table {
            Some(choice) => choice.is_some(),
            None => signal_endpoint.is_some() || generic_endpoint.is_some(),
        },
    };
    if !enabled {
        return Ok(None);
    }
    let (table_protocol, table_settings) = table
        .flatten()
        .unwrap_or((Protocol::HttpProtobuf, OtlpToml::default()));
    let protocol_key = format!("OTEL_EXPORTER_OTLP_{s}_PROTOCOL");
    let protocol = match var(&protocol_key)
        .map(|v| (protocol_key.as_str(), v))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL").map(|v| ("OTEL_EXPORTER_OTLP_PROTOCOL", v)))
    {
        Some((_, "http/protobuf")) => Protocol::HttpProtobuf,
        Some((_, "http/json")) => Protocol::HttpJson,
        Some((_, "grpc")) => Protocol::Grpc,
        Some((key, other)) => {
            return Err(unsupported(key, other, "http/protobuf, http/json or grpc"));
        }
        None => table_protocol,
    };
    let endpoint = match (signal_endpoint, generic_endpoint, &table_settings.endpoint) {
        (Some(url), _, _) => url.to_string(),
        (None, Some(base), _) => with_signal_path(base, protocol, signal, false),
        (None, None, Some(url)) => with_signal_path(url, protocol, signal, true),
        (None, None, None) => with_signal_path(
            if protocol == Protocol::Grpc {
                DEFAULT_GRPC
            } else {
                DEFAULT_HTTP
            },
            protocol,
            signal,
            false,
        ),
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(SettingsError::Invalid {
            key: format!("the {signal} endpoint"),
            message: format!("`{endpoint}` is not an http:// or https:// URL"),
        });
    }
    let mut headers: Vec<(String, String)> = table_settings.headers.into_iter().collect();
    for key in [
        "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
        format!("OTEL_EXPORTER_OTLP_{s}_HEADERS"),
    ] {
        for (name, value) in parse_pairs(&key, var(&key))? {
            headers.retain(|(existing, _)| !existing.eq_ignore_ascii_case(&name));
            headers.push((name, value));
        }
    }
    let timeout_key = format!("OTEL_EXPORTER_OTLP_{s}_TIMEOUT");
    let timeout = match var(&timeout_key) {
        Some(ms) => millis(&timeout_key, ms)?,
        None => match var("OTEL_EXPORTER_OTLP_TIMEOUT") {
            Some(ms) => millis("OTEL_EXPORTER_OTLP_TIMEOUT", ms)?,
            None => DEFAULT_TIMEOUT,
        },
    };
    Ok(Some(OtlpTarget {
        protocol,
        endpoint,
        headers,
        timeout,
    }))
}

/// An HTTP endpoint for one signal: a base URL gets `/v1/<signal>`; a table's URL that
/// already names a signal (Codex files write the full URL of their logs endpoint) has
/// that signal swapped for this one. gRPC endpoints are used as they are.
fn with_signal_path(url: &str, protocol: Protocol, signal: Signal, from_table: bool) -> String {
    if protocol == Protocol::Grpc {
        return url.to_string();
    }
    let trimmed = url.trim_end_matches('/');
    if from_table {
        for other in Signal::ALL {
            if let Some(base) = trimmed.strip_suffix(&format!("/v1/{}", other.path())) {
                return format!("{base}/v1/{}", signal.path());
            }
        }
    }
    format!("{trimmed}/v1/{}", signal.path())
}

fn unsupported(key: &str, value: &str, expected: &'static str) -> SettingsError {
    SettingsError::Unsupported {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    }
}

fn millis(key: &str, value: &str) -> Result<Duration, SettingsError> {
    value
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| SettingsError::Invalid {
            key: key.to_string(),
            message: format!("`{value}` is not a positive number of milliseconds"),
        })
}

fn sampler(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, SettingsError> {
    let ratio = || -> Result<f64, SettingsError> {
        match arg {
            None => Ok(1.0),
            Some(arg) => arg
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| SettingsError::Invalid {
                    key: "OTEL_TRACES_SAMPLER_ARG".into(),
                    message: format!("`{arg}` is not a ratio between 0 and 1"),
                }),
        }
    };
    Ok(match name.unwrap_or("parentbased_always_on") {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatio(ratio()?),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(ratio()?)))
        }
        other => {
            return Err(unsupported(
                "OTEL_TRACES_SAMPLER",
                other,
                "always_on, always_off, traceidratio or their parentbased_ forms",
            ));
        }
    })
}

/// `key1=value1,key2=value2` with percent-encoded values (the W3C baggage form the OTel
/// specification uses for headers and resource attributes).
fn parse_pairs(key: &str, value: Option<&str>) -> Result<Vec<(String, String)>, SettingsError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let mut pairs = Vec::new();
    for member in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let Some((name, value)) = member.split_once('=') else {
            return Err(SettingsError::Invalid {
                key: key.to_string(),
                message: format!("`{member}` is not name=value"),
            });
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(SettingsError::Invalid {
                key: key.to_string(),
                message: format!("`{member}` has no name"),
            });
        }
        pairs.push((name.to_string(), percent_decode(value.trim())));
    }
    Ok(pairs)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[index] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(index + 1).copied().and_then(hex),
                bytes.get(index + 2).copied().and_then(hex),
            )
        {
            out.push((high * 16 + low) as u8);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn otel(text: &str) -> OtelToml {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn off_unless_configured() {
        let settings = resolve(&OtelToml::default(), &env(&[])).unwrap();
        assert!(settings.is_off());
        assert_eq!(settings.service_name, "interpreter");
        assert!(!settings.capture_content);
    }

    #[test]
    fn the_generic_endpoint_turns_on_every_signal_with_its_path() {
        let settings = resolve(
            &OtelToml::default(),
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "authorization=Bearer%20abc,x-team=a",
                ),
                ("OTEL_METRICS_EXPORTER", "none"),
                ("OTEL_SERVICE_NAME", "fleet-agent"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=ignored,team=infra",
                ),
            ]),
        )
        .unwrap();
        let traces = settings.traces.unwrap();
        assert_eq!(traces.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(traces.protocol, Protocol::HttpProtobuf);
        assert_eq!(
            traces.headers,
            vec![
                ("authorization".to_string(), "Bearer abc".to_string()),
                ("x-team".to_string(), "a".to_string())
            ]
        );
        assert_eq!(settings.metrics, None);
        assert_eq!(
            settings.logs.unwrap().endpoint,
            "http://collector:4318/v1/logs"
        );
        assert_eq!(settings.service_name, "fleet-agent");
        assert_eq!(
            settings.resource,
            vec![("team".to_string(), "infra".to_string())]
        );
    }

    #[test]
    fn a_codex_otel_table_means_the_same_here() {
        let table = otel(
            r#"
            environment = "staging"
            log_user_prompt = true
            exporter = { otlp-http = { endpoint = "https://otel.example/v1/logs", protocol = "json", headers = { "x-key" = "k" } } }
            trace_exporter = { otlp-grpc = { endpoint = "https://otel.example:4317" } }
            metrics_exporter = "none"
            "#,
        );
        let settings = resolve(&table, &env(&[])).unwrap();
        assert_eq!(
            settings.logs.clone().unwrap(),
            OtlpTarget {
                protocol: Protocol::HttpJson,
                endpoint: "https://otel.example/v1/logs".into(),
                headers: vec![("x-key".into(), "k".into())],
                timeout: DEFAULT_TIMEOUT,
            }
        );
        let traces = settings.traces.unwrap();
        assert_eq!(traces.protocol, Protocol::Grpc);
        assert_eq!(traces.endpoint, "https://otel.example:4317");
        assert_eq!(settings.metrics, None);
        assert!(settings.capture_content);
        assert_eq!(
            settings.resource,
            vec![("deployment.environment.name".into(), "staging".into())]
        );
    }

    #[test]
    fn an_inherited_table_endpoint_names_its_own_signal() {
        let table =
            otel(r#"exporter = { otlp-http = { endpoint = "https://o.example/v1/logs" } }"#);
        let settings = resolve(&table, &env(&[])).unwrap();
        assert_eq!(
            settings.traces.unwrap().endpoint,
            "https://o.example/v1/traces"
        );
        assert_eq!(
            settings.metrics.unwrap().endpoint,
            "https://o.example/v1/metrics"
        );
    }

    #[test]
    fn variables_win_over_the_table_and_bad_values_are_named() {
        let table = otel(r#"exporter = "otlp-http""#);
        let settings = resolve(
            &table,
            &env(&[
                ("OTEL_TRACES_EXPORTER", "none"),
                (
                    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                    "http://logs:9999/ingest",
                ),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.traces, None);
        assert_eq!(settings.logs.unwrap().endpoint, "http://logs:9999/ingest");
        assert_eq!(settings.metrics.unwrap().endpoint, DEFAULT_GRPC);

        let error = resolve(&table, &env(&[("OTEL_TRACES_EXPORTER", "zipkin")])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "OTEL_TRACES_EXPORTER: `zipkin` is not supported here; use otlp or none"
        );
        let error = resolve(&otel(r#"exporter = "statsig""#), &env(&[])).unwrap_err();
        assert!(error.to_string().starts_with("otel.exporter: `statsig`"));
        assert!(
            resolve(&table, &env(&[("OTEL_SDK_DISABLED", "true")]))
                .unwrap()
                .is_off()
        );
    }

    #[test]
    fn samplers() {
        let ratio = resolve(
            &OtelToml::default(),
            &env(&[
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ]),
        )
        .unwrap();
        assert_eq!(
            ratio.sampler,
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(0.25)))
        );
        assert!(
            resolve(
                &OtelToml::default(),
                &env(&[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2")
                ])
            )
            .is_err()
        );
    }
}
