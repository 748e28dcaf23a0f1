//! What a self-hosted server says about the model it serves: the context window it runs
//! with and whether its chat template renders tools. Asked once per process for each
//! (base URL, model) — every thread after the first reuses the answer, so a server that
//! runs many threads is not probed before each one's first request — and only of
//! providers on this machine or a private network (hosted APIs have no such endpoints),
//! each request with a short deadline; every failure just means "unknown".
//! `interpreter doctor` asks afresh ([`ModelClient::probe_server_facts`]).
//!
//! * llama.cpp `GET /props`: `default_generation_settings.n_ctx` (the runtime `-c`, per
//!   slot) and `chat_template_caps.supports_tools` (false when the template cannot render
//!   tools: the server then drops them silently).
//! * vLLM `GET /v1/models`: `max_model_len` of the served model; OpenRouter and others:
//!   `context_length`.
//! * Anthropic Messages `POST /messages/count_tokens` (llama.cpp, vLLM): the exact input
//!   tokens of a request, on `wire_api = "messages"`.
//! * Ollama `POST /api/show`: `num_ctx` in `parameters` when the model sets it (otherwise
//!   Ollama runs with its default and truncates silently; see docs/providers.md).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde::Deserialize;

use crate::chat_request::build_chat_request;
use crate::client::{ModelClient, read_body_capped};
use crate::messages_request::build_messages_request;
use crate::prompt::Prompt;
use crate::provider::WireApi;

/// Deadline of each probe request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest probe answer read: `/tokenize` of a long prompt lists every token.
const PROBE_BODY_CAP: usize = 16 * 1024 * 1024;

/// What the server reported. `None` fields are unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// Context window in tokens, and which endpoint said so.
    pub context_window: Option<(u64, &'static str)>,
    /// Whether the chat template renders tools (llama.cpp only).
    pub supports_tools: Option<bool>,
    /// The server can count a prompt's tokens exactly (llama.cpp `/apply-template` and
    /// `/tokenize`): see [`ModelClient::count_prompt_tokens`].
    pub counts_tokens: bool,
}

/// The answer of `/messages/count_tokens`.
#[derive(Debug, Deserialize)]
struct CountedTokens {
    input_tokens: u64,
}

#[derive(Debug, Deserialize)]
struct LlamaProps {
    #[serde(default)]
    default_generation_settings: Option<GenerationSettings>,
    #[serde(default)]
    chat_template_caps: Option<TemplateCaps>,
}

#[derive(Debug, Deserialize)]
struct GenerationSettings {
    #[serde(default)]
    n_ctx: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct TemplateCaps {
    #[serde(default)]
    supports_tools: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct ModelList {
    #[serde(default)]
    data: Vec<ModelEntry>,
}

#[derive(Debug, Deserialize)]
struct ModelEntry {
    #[serde(default)]
    id: String,
    #[serde(default)]
    max_model_len: Option<u64>,
    #[serde(default)]
    context_length: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct AppliedTemplate {
    prompt: String,
}

#[derive(Debug, Deserialize)]
struct Tokenized {
    #[serde(default)]
    tokens: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct OllamaShow {
    #[serde(default)]
    parameters: Option<String>,
}

/// What each (base URL, model) answered, for the life of the process. Only answers are
/// kept: a server that did not answer at all (not up yet) is asked again next time.
static LEARNED: LazyLock<Mutex<HashMap<(String, String), ServerFacts>>> =
    LazyLock::new(Mutex::default);

impl ModelClient {
    /// What the server knows, asked once per process for this base URL and model. Cheap
    /// when the provider is hosted: nothing is sent.
    pub async fn server_facts(&self) -> ServerFacts {
        let key = (
            self.provider().base_url.clone().unwrap_or_default(),
            self.model().to_string(),
        );
        if let Some(facts) = LEARNED
            .lock()
            .ok()
            .and_then(|known| known.get(&key).cloned())
        {
            return facts;
        }
        let (facts, answered) = self.ask_server().await;
        if answered && let Ok(mut known) = LEARNED.lock() {
            known.insert(key, facts.clone());
        }
        facts
    }

    /// Ask the server now, whatever was learned before (`interpreter doctor`).
    pub async fn probe_server_facts(&self) -> ServerFacts {
        self.ask_server().await.0
    }

    /// The facts, and whether the server answered any probe at all (an error status is an
    /// answer; a refused connection or a timeout is not).
    async fn ask_server(&self) -> (ServerFacts, bool) {
        // Hosted: nothing to ask, and nothing that could change; learned as it is. (Their
        // windows are large, and most vendors' Messages endpoints do not count tokens: a
        // count would cost every thread a round trip for little.)
        if !self.provider().is_local() {
            return (ServerFacts::default(), true);
        }
        // A local Messages server may count tokens (`/messages/count_tokens`: llama.cpp,
        // vLLM); asking costs one local request per thread, and one without it says no.
        let counts_messages = self.provider().wire_api == WireApi::Messages;
        let Some(base) = self.provider().base_url.clone() else {
            return (ServerFacts::default(), true);
        };
        let base = base.trim().trim_end_matches('/').to_string();
        // llama.cpp serves `/props` next to `/v1`, not under it.
        let root = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        let mut facts = ServerFacts::default();
        let mut answered = false;

        if let Some(props) = self
            .get_json::<LlamaProps>(&format!("{root}/props"), &mut answered)
            .await
        {
            facts.context_window = props
                .default_generation_settings
                .and_then(|s| s.n_ctx)
                .filter(|n| *n > 0)
                .map(|n| (n, "llama.cpp /props n_ctx"));
            facts.supports_tools = props.chat_template_caps.and_then(|c| c.supports_tools);
            facts.counts_tokens = self.provider().wire_api == WireApi::Chat;
        }
        facts.counts_tokens |= counts_messages;
        if facts.context_window.is_none()
            && let Some(list) = self
                .get_json::<ModelList>(&format!("{base}/models"), &mut answered)
                .await
        {
            let entry = list
                .data
                .iter()
                .find(|m| m.id == self.model())
                .or_else(|| (list.data.len() == 1).then(|| &list.data[0]));
            facts.context_window = entry.and_then(|m| {
                m.max_model_len
                    .map(|n| (n, "/models max_model_len"))
                    .or_else(|| m.context_length.map(|n| (n, "/models context_length")))
            });
        }
        if facts.context_window.is_none()
            && let Some(show) = self
                .post_json::<OllamaShow>(&format!("{root}/api/show"), &mut answered)
                .await
        {
            facts.context_window = show
                .parameters
                .as_deref()
                .and_then(num_ctx_parameter)
                .map(|n| (n, "Ollama /api/show num_ctx"));
        }
        (facts, answered)
    }

    /// The exact prompt tokens of `prompt` on a llama.cpp server: the chat template applied
    /// by the server (`POST /apply-template`), then its tokenizer (`POST /tokenize`). Used
    /// once per thread to calibrate the engine's estimate before the server has reported
    /// any usage. `None` when the server cannot say.
    pub async fn count_prompt_tokens(&self, prompt: &Prompt) -> Option<u64> {
        let base = self.provider().base_url.clone()?;
        let base = base.trim().trim_end_matches('/').to_string();
        if self.provider().wire_api == WireApi::Messages {
            return self.count_messages_tokens(&base, prompt).await;
        }
        let root = base.strip_suffix("/v1").unwrap_or(&base).to_string();
        let request = build_chat_request(self.model(), prompt, None);
        let templated: AppliedTemplate = self
            .post_body(
                &format!("{root}/apply-template"),
                &serde_json::json!({ "messages": request.messages, "tools": request.tools }),
            )
            .await?;
        let tokens: Tokenized = self
            .post_body(
                &format!("{root}/tokenize"),
                &serde_json::json!({
                    "content": templated.prompt,
                    "add_special": true,
                    "parse_special": true,
                }),
            )
            .await?;
        u64::try_from(tokens.tokens.len()).ok()
    }

    /// `POST {base_url}/messages/count_tokens` (Anthropic, llama.cpp, vLLM): the request's
    /// `model`, `system`, `messages`, `tools` and `thinking`, nothing else, since the
    /// endpoint refuses the sampling fields.
    async fn count_messages_tokens(&self, base: &str, prompt: &Prompt) -> Option<u64> {
        let request = build_messages_request(self.model(), prompt, self.reasoning_effort());
        let mut body = serde_json::to_value(&request).ok()?;
        let fields = body.as_object_mut()?;
        fields.retain(|key, _| {
            matches!(
                key.as_str(),
                "model" | "system" | "messages" | "tools" | "tool_choice" | "thinking"
            )
        });
        let counted: CountedTokens = self
            .post_body(&format!("{base}/messages/count_tokens"), &body)
            .await?;
        Some(counted.input_tokens)
    }

    async fn post_body<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Option<T> {
        let request = self
            .http()
            .post(url)
            .headers(self.auth_headers())
            .json(body);
        decode(
            tokio::time::timeout(PROBE_TIMEOUT, request.send()).await,
            &mut false,
        )
        .await
    }

    /// `answered` is set when the server sent any HTTP response.
    async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        answered: &mut bool,
    ) -> Option<T> {
        let request = self.http().get(url).headers(self.auth_headers());
        decode(
            tokio::time::timeout(PROBE_TIMEOUT, request.send()).await,
            answered,
        )
        .await
    }

    async fn post_json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        answered: &mut bool,
    ) -> Option<T> {
        let request = self
            .http()
            .post(url)
            .headers(self.auth_headers())
            .json(&serde_json::json!({ "model": self.model() }));
        decode(
            tokio::time::timeout(PROBE_TIMEOUT, request.send()).await,
            answered,
        )
        .await
    }
}

async fn decode<T: for<'de> Deserialize<'de>>(
    sent: Result<Result<reqwest::Response, reqwest::Error>, tokio::time::error::Elapsed>,
    answered: &mut bool,
) -> Option<T> {
    let response = sent.ok()?.ok()?;
    *answered = true;
    if !response.status().is_success() {
        return None;
    }
    let (body, complete) =
        tokio::time::timeout(PROBE_TIMEOUT, read_body_capped(response, PROBE_BODY_CAP))
            .await
            .ok()?
            .ok()?;
    // A cut body would not parse anyway; an endless one is not an answer.
    complete.then_some(())?;
    serde_json::from_slice(&body).ok()
}

/// `num_ctx 8192` in Ollama's Modelfile parameter text.
fn num_ctx_parameter(parameters: &str) -> Option<u64> {
    parameters.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("num_ctx"))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_parameters_name_num_ctx() {
        assert_eq!(
            num_ctx_parameter("stop \"<|im_end|>\"\nnum_ctx 8192\ntemperature 0.7"),
            Some(8192)
        );
        assert_eq!(num_ctx_parameter("temperature 0.7"), None);
    }
}
