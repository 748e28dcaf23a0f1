//! What the engine asks the model: instructions, history and the tools on offer.

use interpreter_protocol::ResponseItem;

/// One sampling request, independent of the provider's wire API.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prompt {
    /// System prompt: the leading system message on the chat wire, `instructions` on the
    /// Responses wire (skipped when blank).
    pub instructions: String,
    /// Model-visible history, oldest first.
    pub input: Vec<ResponseItem>,
    pub tools: Vec<ToolSpec>,
    /// JSON schema the final answer must follow (chat `response_format`, Responses
    /// `text.format`).
    pub output_schema: Option<serde_json::Value>,
    /// Stable per-thread key that lets servers reuse their prompt cache.
    pub prompt_cache_key: Option<String>,
    /// Cap on the answer's tokens (`max_tokens` / `max_completion_tokens` on the chat
    /// wire, `max_output_tokens` on the Responses wire); unset sends nothing.
    pub max_output_tokens: Option<u64>,
}

/// A function tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}
