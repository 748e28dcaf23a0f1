//! Test-only helpers shared by the workspace's integration tests.
//!
//! * [`mock_model`]: a scripted OpenAI-compatible server (Chat Completions and Responses
//!   API) that records every request and checks conversation invariants.
//! * [`fixtures`]: recorded and documented server answers replayed by fast tests.
//! * [`process`]: a child process spoken to in JSON lines, every read with a deadline.

pub mod bins;
pub mod fixtures;
pub mod mock_model;
pub mod process;

pub use mock_model::{MockModelServer, MockRecord, MockResponse};
