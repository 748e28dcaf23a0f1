//! `[model_providers.ID]`: where a model is served and how to talk to it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// The key saved by `account/login/start` (or a login command) in the agent home's
    /// credential store. Never read from or written to config.toml: the config loader
    /// fills it in. The `env_key` variable, when set, wins over it.
    #[serde(skip)]
    pub stored_api_key: Option<String>,
}

pub const DEFAULT_REQUEST_MAX_RETRIES: u64 = 4;
pub const DEFAULT_STREAM_MAX_RETRIES: u64 = 5;
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
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

    pub fn stream_idle_timeout(&self) -> Duration {
        self.stream_idle_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_STREAM_IDLE_TIMEOUT)
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
    HashMap::from([
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
    ])
}
