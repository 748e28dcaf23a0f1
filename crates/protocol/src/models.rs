//! Model-visible history. One [`ResponseItem`] per message, reasoning block, tool call or
//! tool result, in the order the model saw or produced them. These are persisted verbatim
//! in rollouts (`response_item` lines) and replayed to the provider on every request, so
//! reasoning text and tool call ids survive byte for byte across turns and restarts.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseItem {
    Message {
        role: Role,
        content: Vec<ContentItem>,
    },
    /// Reasoning the model emitted. `content` holds the raw text (Chat Completions
    /// `reasoning_content` / `reasoning`), which thinking models require back verbatim.
    Reasoning {
        #[serde(default)]
        summary: Vec<ReasoningSummary>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<ReasoningContent>>,
        #[serde(default)]
        encrypted_content: Option<String>,
        /// The Chat Completions delta field the text arrived in, so it is sent back in the
        /// same field (`reasoning_content` unless the server used `reasoning`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wire_field: Option<String>,
    },
    /// A tool call. `arguments` is the JSON text exactly as the model produced it;
    /// `call_id` is never rewritten.
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    /// The result of the tool call with the same `call_id`.
    FunctionCallOutput { call_id: String, output: String },
}

impl ResponseItem {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::Message {
            role: Role::User,
            content: vec![ContentItem::InputText { text: text.into() }],
        }
    }

    pub fn developer_text(text: impl Into<String>) -> Self {
        Self::Message {
            role: Role::Developer,
            content: vec![ContentItem::InputText { text: text.into() }],
        }
    }

    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::Message {
            role: Role::Assistant,
            content: vec![ContentItem::OutputText { text: text.into() }],
        }
    }

    pub fn reasoning_text(text: impl Into<String>, wire_field: Option<String>) -> Self {
        Self::Reasoning {
            summary: Vec::new(),
            content: Some(vec![ReasoningContent::ReasoningText { text: text.into() }]),
            encrypted_content: None,
            wire_field,
        }
    }

    /// All text of a message item joined, or `None` for other items.
    pub fn message_text(&self) -> Option<String> {
        match self {
            Self::Message { content, .. } => Some(
                content
                    .iter()
                    .filter_map(ContentItem::text)
                    .collect::<Vec<_>>()
                    .join(""),
            ),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentItem {
    InputText { text: String },
    OutputText { text: String },
    InputImage { image_url: String },
}

impl ContentItem {
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::InputText { text } | Self::OutputText { text } => Some(text),
            Self::InputImage { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningSummary {
    SummaryText { text: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReasoningContent {
    ReasoningText { text: String },
    Text { text: String },
}

impl ReasoningContent {
    pub fn text(&self) -> &str {
        match self {
            Self::ReasoningText { text } | Self::Text { text } => text,
        }
    }
}

/// Token accounting for one model response or a running total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// All input tokens, cached or not.
    pub input_tokens: u64,
    /// Input tokens read from the server's prompt cache.
    pub cached_input_tokens: u64,
    /// Input tokens written to the server's prompt cache (Anthropic Messages
    /// `cache_creation_input_tokens`; 0 on wires that do not report it).
    #[serde(default)]
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
    pub total_tokens: u64,
}

impl TokenUsage {
    /// Adds `other`'s counts, saturating: the counts are whatever the server reported, and
    /// absurd ones must not overflow a thread's running total.
    pub fn add(&mut self, other: &TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_input_tokens = self
            .cache_write_input_tokens
            .saturating_add(other.cache_write_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.reasoning_output_tokens = self
            .reasoning_output_tokens
            .saturating_add(other.reasoning_output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzing_review_adding_usage_near_u64_max_saturates() {
        let huge = TokenUsage {
            input_tokens: u64::MAX,
            cached_input_tokens: u64::MAX,
            cache_write_input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            reasoning_output_tokens: u64::MAX,
            total_tokens: u64::MAX,
        };
        let mut total = huge;
        total.add(&huge);
        assert_eq!(total, huge);
    }
}
