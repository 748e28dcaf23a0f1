//! `[model_providers.ID]`: where a model is served and how to talk to it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::limits::{StreamLimits, to_usize};

/// Which HTTP API the provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireApi {
    /// `POST {base_url}/chat/completions` with SSE streaming. What open-model servers serve.
    #[default]
    Chat,
    /// `POST {base_url}/responses` with SSE streaming (OpenAI, vLLM, Ollama and other
    /// servers that implement the Responses API).
    Responses,
    /// `POST {base_url}/messages` with SSE streaming: the Anthropic Messages API, which
    /// GLM, Kimi, DeepSeek and MiniMax offer for coding agents, and llama.cpp, Ollama and
    /// vLLM serve too.
    Messages,
}

impl WireApi {
    /// The name `wire_api` is set with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Responses => "responses",
            Self::Messages => "messages",
        }
    }

    /// The endpoint below `base_url` that model requests go to.
    pub fn endpoint(self) -> &'static str {
        match self {
            Self::Chat => "chat/completions",
            Self::Responses => "responses",
            Self::Messages => "messages",
        }
    }
}

/// The header the API key is sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `x-api-key: <key>`, Anthropic's own header.
    XApiKey,
}

/// One `[model_providers.ID]` table. Key names match the reference config so existing
/// files keep working.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProviderInfo {
    pub name: String,
    #[serde(default)]
    pub base_url: Option<String>,
    /// Environment variable holding the API key.
    #[serde(default)]
    pub env_key: Option<String>,
    /// Shown when `env_key` is missing.
    #[serde(default)]
    pub env_key_instructions: Option<String>,
    /// A literal bearer token (discouraged; prefer `env_key`).
    #[serde(default)]
    pub experimental_bearer_token: Option<String>,
    #[serde(default)]
    pub wire_api: WireApi,
    /// Which header carries the API key: `bearer` (`Authorization: Bearer`, the default)
    /// or `x-api-key` (the default on `wire_api = "messages"`).
    #[serde(default)]
    pub auth_header: Option<AuthHeader>,
    #[serde(default)]
    pub query_params: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub http_headers: Option<BTreeMap<String, String>>,
    /// Header name → environment variable; the header is sent when the variable is set.
    #[serde(default)]
    pub env_http_headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub request_max_retries: Option<u64>,
    #[serde(default)]
    pub stream_max_retries: Option<u64>,
    #[serde(default)]
    pub stream_idle_timeout_ms: Option<u64>,
    /// Longest one model request may take, from sending it to the end of its answer,
    /// however steadily the server sends (the idle timeout alone lets a server that
    /// trickles keep a turn alive for ever).
    #[serde(default)]
    pub stream_max_duration_ms: Option<u64>,
    /// Cap on one SSE line and on the data of one SSE event, in bytes.
    #[serde(default)]
    pub stream_max_event_bytes: Option<u64>,
    /// Cap on one answer (text, reasoning and tool calls of one response), in bytes.
    #[serde(default)]
    pub stream_max_answer_bytes: Option<u64>,
    /// Cap on the arguments of one tool call, in bytes.
    #[serde(default)]
    pub stream_max_arguments_bytes: Option<u64>,
    /// The model's context window in tokens, when known for this provider (the top-level
    /// `model_context_window` wins). Otherwise it is asked of the server where it can say.
    #[serde(default)]
    pub model_context_window: Option<u64>,
    /// Cap on the tokens of one answer (the top-level `model_max_output_tokens` wins).
    #[serde(default)]
    pub model_max_output_tokens: Option<u64>,
    /// Which Chat Completions field carries the output cap: `max_tokens` (what open-model
    /// servers read) or `max_completion_tokens` (what OpenAI wants for its newer models).
    #[serde(default)]
    pub max_tokens_field: Option<MaxTokensField>,
    /// Recover tool calls that the model wrote as text (`<tool_call>{…}</tool_call>` and
    /// other families' markup) when the server did not parse them. Default: on for the
    /// local built-ins and any provider whose `base_url` is a loopback or private address.
    #[serde(default)]
    pub text_tool_calls: Option<bool>,
    /// The key `interpreter login` stored for this provider, filled in by the config
    /// loader; used only when the `env_key` variable is unset (the environment wins).
    #[serde(skip)]
    pub stored_api_key: Option<crate::credentials::SecretKey>,
}

/// The Chat Completions field the output cap is sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// Ids of the built-in providers that serve models on the user's own machine, in the
/// order `--oss` prefers them when more than one answers.
pub const LOCAL_PROVIDER_IDS: &[&str] = &["ollama", "lmstudio", "llamacpp", "vllm"];

pub const DEFAULT_REQUEST_MAX_RETRIES: u64 = 4;
pub const DEFAULT_STREAM_MAX_RETRIES: u64 = 5;
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Generous: a long answer from a slow local model on a CPU still fits.
pub const DEFAULT_STREAM_MAX_DURATION: Duration = Duration::from_secs(30 * 60);
pub use crate::limits::{
    DEFAULT_STREAM_MAX_ANSWER_BYTES, DEFAULT_STREAM_MAX_ARGUMENTS_BYTES,
    DEFAULT_STREAM_MAX_EVENT_BYTES,
};
/// Upper bound on user-configured retry counts, so a typo cannot mean "retry forever".
pub const MAX_RETRIES_CAP: u64 = 100;

impl ModelProviderInfo {
    pub fn request_max_retries(&self) -> u64 {
        self.request_max_retries
            .unwrap_or(DEFAULT_REQUEST_MAX_RETRIES)
            .min(MAX_RETRIES_CAP)
    }

    pub fn stream_max_retries(&self) -> u64 {
        self.stream_max_retries
            .unwrap_or(DEFAULT_STREAM_MAX_RETRIES)
            .min(MAX_RETRIES_CAP)
    }

    /// Whether `base_url` points at this machine or a private network (a self-hosted
    /// server: worth asking for its context size, and likely to need text tool-call
    /// recovery).
    pub fn is_local(&self) -> bool {
        self.base_url.as_deref().is_some_and(is_local_url)
    }

    /// Whether tool calls written as text are recovered for this provider.
    pub fn text_tool_calls_enabled(&self, provider_id: &str) -> bool {
        self.text_tool_calls
            .unwrap_or_else(|| LOCAL_PROVIDER_IDS.contains(&provider_id) || self.is_local())
    }

    /// The Chat Completions field for the output cap.
    pub fn max_tokens_field(&self, provider_id: &str) -> MaxTokensField {
        self.max_tokens_field.unwrap_or(if provider_id == "openai" {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        })
    }

    /// The header the API key goes in.
    pub fn auth_header(&self) -> AuthHeader {
        self.auth_header.unwrap_or(match self.wire_api {
            WireApi::Messages => AuthHeader::XApiKey,
            WireApi::Chat | WireApi::Responses => AuthHeader::Bearer,
        })
    }

    pub fn stream_idle_timeout(&self) -> Duration {
        self.stream_idle_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_STREAM_IDLE_TIMEOUT)
    }

    pub fn stream_max_duration(&self) -> Duration {
        self.stream_max_duration_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_STREAM_MAX_DURATION)
    }

    /// The size bounds one response is read under.
    pub fn stream_limits(&self) -> StreamLimits {
        let bytes = |configured: Option<u64>, default: u64| to_usize(configured.unwrap_or(default));
        StreamLimits {
            event_bytes: bytes(self.stream_max_event_bytes, DEFAULT_STREAM_MAX_EVENT_BYTES),
            answer_bytes: bytes(
                self.stream_max_answer_bytes,
                DEFAULT_STREAM_MAX_ANSWER_BYTES,
            ),
            arguments_bytes: bytes(
                self.stream_max_arguments_bytes,
                DEFAULT_STREAM_MAX_ARGUMENTS_BYTES,
            ),
        }
    }

    /// The keys of the bounds set to 0, which would refuse every answer: the config
    /// loader rejects them, naming the key.
    pub fn zero_bounds(&self) -> Vec<&'static str> {
        [
            ("stream_idle_timeout_ms", self.stream_idle_timeout_ms),
            ("stream_max_duration_ms", self.stream_max_duration_ms),
            ("stream_max_event_bytes", self.stream_max_event_bytes),
            ("stream_max_answer_bytes", self.stream_max_answer_bytes),
            (
                "stream_max_arguments_bytes",
                self.stream_max_arguments_bytes,
            ),
        ]
        .into_iter()
        .filter(|(_, value)| *value == Some(0))
        .map(|(key, _)| key)
        .collect()
    }
}

/// Built-in providers, overridable by `[model_providers.ID]` tables of the same id.
pub fn built_in_providers() -> HashMap<String, ModelProviderInfo> {
    let mk = |name: &str, base_url: &str, env_key: Option<&str>| ModelProviderInfo {
        name: name.to_string(),
        base_url: Some(base_url.to_string()),
        env_key: env_key.map(str::to_string),
        wire_api: WireApi::Chat,
        ..Default::default()
    };
    // The Anthropic-compatible endpoints the vendors document for coding agents (see
    // docs/providers.md for each page): `base_url` is the root `/messages` is under.
    let messages =
        |name: &str, base_url: &str, env_key: &str, auth_header: AuthHeader| ModelProviderInfo {
            wire_api: WireApi::Messages,
            auth_header: Some(auth_header),
            ..mk(name, base_url, Some(env_key))
        };
    let mut providers = HashMap::from([
        (
            "openai".to_string(),
            mk(
                "OpenAI",
                "https://api.openai.com/v1",
                Some("OPENAI_API_KEY"),
            ),
        ),
        (
            "ollama".to_string(),
            mk("Ollama", "http://localhost:11434/v1", None),
        ),
        (
            "lmstudio".to_string(),
            mk("LM Studio", "http://localhost:1234/v1", None),
        ),
        (
            "vllm".to_string(),
            mk("vLLM", "http://localhost:8000/v1", None),
        ),
        (
            "llamacpp".to_string(),
            mk("llama.cpp", "http://localhost:8080/v1", None),
        ),
        (
            "moonshot".to_string(),
            mk(
                "Moonshot (Kimi)",
                "https://api.moonshot.ai/v1",
                Some("MOONSHOT_API_KEY"),
            ),
        ),
        (
            "zai".to_string(),
            mk(
                "Z.AI (GLM)",
                "https://api.z.ai/api/paas/v4",
                Some("ZAI_API_KEY"),
            ),
        ),
        (
            "deepseek".to_string(),
            mk(
                "DeepSeek",
                "https://api.deepseek.com",
                Some("DEEPSEEK_API_KEY"),
            ),
        ),
        (
            "dashscope".to_string(),
            mk(
                "DashScope (Qwen)",
                "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
                Some("DASHSCOPE_API_KEY"),
            ),
        ),
        (
            "openrouter".to_string(),
            mk(
                "OpenRouter",
                "https://openrouter.ai/api/v1",
                Some("OPENROUTER_API_KEY"),
            ),
        ),
    ]);
    for (id, provider) in [
        (
            "zai-messages",
            messages(
                "Z.AI (GLM), Anthropic API",
                "https://api.z.ai/api/anthropic/v1",
                "ZAI_API_KEY",
                AuthHeader::Bearer,
            ),
        ),
        (
            "moonshot-messages",
            messages(
                "Moonshot (Kimi), Anthropic API",
                "https://api.moonshot.ai/anthropic/v1",
                "MOONSHOT_API_KEY",
                AuthHeader::Bearer,
            ),
        ),
        (
            "deepseek-messages",
            messages(
                "DeepSeek, Anthropic API",
                "https://api.deepseek.com/anthropic/v1",
                "DEEPSEEK_API_KEY",
                AuthHeader::XApiKey,
            ),
        ),
        (
            "minimax-messages",
            messages(
                "MiniMax, Anthropic API",
                "https://api.minimax.io/anthropic/v1",
                "MINIMAX_API_KEY",
                AuthHeader::Bearer,
            ),
        ),
        (
            "dashscope-messages",
            messages(
                "DashScope (Qwen), Anthropic API",
                "https://dashscope-intl.aliyuncs.com/apps/anthropic/v1",
                "DASHSCOPE_API_KEY",
                AuthHeader::XApiKey,
            ),
        ),
    ] {
        providers.insert(id.to_string(), provider);
    }
    providers
}

/// Whether `base_url` can be requested at all: an absolute `http://` or `https://` URL
/// with a host. The one rule for a well-formed `base_url`, applied when the config loads
/// (so the error names the key and the file or `-c` that set it) and again when a client
/// is built. The error completes "base_url …".
pub fn validate_base_url(url: &str) -> Result<(), String> {
    const EXAMPLE: &str = "expected the server's API root, e.g. \"http://localhost:8080/v1\"";
    let url = url.trim();
    if url.is_empty() {
        return Err(format!("is empty; {EXAMPLE}"));
    }
    match reqwest::Url::parse(url) {
        Err(err) => Err(format!("`{url}` is not a URL ({err}); {EXAMPLE}")),
        Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => Err(format!(
            "`{url}` is not an http:// or https:// URL; {EXAMPLE}"
        )),
        Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => {
            Err(format!("`{url}` has no host; {EXAMPLE}"))
        }
        Ok(_) => Ok(()),
    }
}

/// Whether a URL's host is `localhost`, a loopback address or a private/link-local one.
pub fn is_local_url(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url.trim()) else {
        return false;
    };
    let Some(host) = parsed.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unique_local() || ip.is_unicast_link_local()
        }
        Err(_) => {
            let domain = host.to_ascii_lowercase();
            domain == "localhost" || domain.ends_with(".localhost") || domain.ends_with(".local")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_are_recognised() {
        for url in [
            "http://localhost:8080/v1",
            "http://127.0.0.1:8000/v1",
            "http://10.0.0.5:8080/v1",
            "http://192.168.1.2/v1",
            "http://[::1]:8080/v1",
            "http://gpu-box.local:8000/v1",
        ] {
            assert!(is_local_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://8.8.8.8/v1",
            "not a url",
        ] {
            assert!(!is_local_url(url), "{url}");
        }
    }

    #[test]
    fn base_urls_must_be_absolute_http_urls_with_a_host() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "https://api.z.ai/api/paas/v4",
            " http://h/ ",
        ] {
            assert_eq!(validate_base_url(url), Ok(()), "{url}");
        }
        for (url, words) in [
            ("", "is empty"),
            ("not a url", "is not a URL (relative URL without a base)"),
            ("localhost:8080/v1", "is not an http:// or https:// URL"),
            ("ftp://host/v1", "is not an http:// or https:// URL"),
            ("http://", "is not a URL (empty host)"),
            ("file:///v1", "is not an http:// or https:// URL"),
        ] {
            let err = validate_base_url(url).err().unwrap_or_default();
            assert!(err.contains(words), "{url}: {err}");
        }
    }

    #[test]
    fn the_vendors_anthropic_endpoints_are_built_in_on_the_messages_wire() {
        let providers = built_in_providers();
        for id in [
            "zai-messages",
            "moonshot-messages",
            "deepseek-messages",
            "minimax-messages",
            "dashscope-messages",
        ] {
            let info = &providers[id];
            assert_eq!(info.wire_api, WireApi::Messages, "{id}");
            let base_url = info.base_url.as_deref().unwrap_or_default();
            assert_eq!(validate_base_url(base_url), Ok(()), "{id}");
            assert!(base_url.ends_with("/anthropic/v1"), "{id}: {base_url}");
            assert!(info.env_key.is_some(), "{id}");
        }
        // The key header: x-api-key by default on this wire, Bearer elsewhere.
        let plain = ModelProviderInfo {
            wire_api: WireApi::Messages,
            ..Default::default()
        };
        assert_eq!(plain.auth_header(), AuthHeader::XApiKey);
        assert_eq!(
            ModelProviderInfo::default().auth_header(),
            AuthHeader::Bearer
        );
        assert_eq!(providers["zai-messages"].auth_header(), AuthHeader::Bearer);
    }

    #[test]
    fn text_tool_calls_default_on_for_local_providers_only() {
        let providers = built_in_providers();
        for (id, info) in &providers {
            assert_eq!(
                info.text_tool_calls_enabled(id),
                LOCAL_PROVIDER_IDS.contains(&id.as_str()),
                "{id}"
            );
        }
        let custom = ModelProviderInfo {
            name: "x".into(),
            base_url: Some("http://10.1.2.3:8000/v1".into()),
            ..Default::default()
        };
        assert!(custom.text_tool_calls_enabled("x"));
        let off = ModelProviderInfo {
            text_tool_calls: Some(false),
            ..custom
        };
        assert!(!off.text_tool_calls_enabled("x"));
    }
}
