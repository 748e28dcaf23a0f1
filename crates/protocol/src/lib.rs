//! Wire types shared by the engine and every front end.
//!
//! This crate owns the vocabulary of the queue-pair core: the [`Op`]s a front end submits,
//! the [`Event`]s the engine emits, the model-visible history ([`ResponseItem`]) that is
//! persisted in rollouts and replayed to the model, and the policy enums that appear on
//! the wire (approval policy, sandbox policy). It does no I/O, so any crate — including
//! tests and future SDKs — can depend on it without pulling a runtime.
//!
//! Event names and field spellings follow the reference implementation's `EventMsg`
//! (snake_case tags) because MCP clients read them verbatim from `codex/event`
//! notifications.

pub mod approval_answer;
mod config_types;
mod ids;
mod items;
mod models;
mod protocol;
mod user_requests;

pub use config_types::*;
pub use ids::*;
pub use items::*;
pub use models::*;
pub use protocol::*;
pub use user_requests::*;
