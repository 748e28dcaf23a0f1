//! Model provider wire APIs behind one streaming interface.
//!
//! This crate owns everything between the engine and an HTTP model endpoint: the
//! `[model_providers.ID]` table ([`ModelProviderInfo`]), request building from the
//! model-visible history for the three wire formats (Chat Completions, Responses and
//! Anthropic Messages), SSE
//! framing and parsing within size bounds, retries with backoff, the stream idle timeout
//! and overall deadline, and the typed [`ProviderError`] the engine turns into a
//! user-facing message. The engine never sees a provider's JSON.

mod chat_request;
mod chat_stream;
mod client;
pub mod credentials;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod limits;
mod local_servers;
mod messages_request;
mod messages_stream;
mod model_list;
mod prompt;
mod provider;
mod responses_request;
mod responses_stream;
mod server_info;
mod sse;
pub mod text_tools;

pub use chat_request::DEFAULT_REASONING_FIELD;
pub use chat_stream::{CutOff, ResponseEvent};
pub use client::{
    ModelClient, ResponseStream, RetryNotice, api_key, credential_hint, provider_headers,
};
pub use error::{ConnectionFailure, ProviderError};
pub use history::ABORTED_TOOL_OUTPUT;
pub use limits::{Oversize, StreamLimits};
pub use local_servers::{LOCAL_PROBE_DEADLINE, LocalServerProbe, probe_local_servers};
pub use messages_request::{ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS as DEFAULT_MESSAGES_MAX_TOKENS};
pub use model_list::{ModelListError, ModelListing, list_models};
pub use prompt::{Prompt, ToolSpec};
pub use provider::*;
pub use server_info::ServerFacts;
