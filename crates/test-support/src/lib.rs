//! Test-only helpers shared by the workspace's integration tests.
//!
//! * [`mock_model`]: a scripted OpenAI-compatible server (Chat Completions and Responses
//!   API) that records every request and checks conversation invariants.
//! * [`fixtures`]: recorded and documented server answers replayed by fast tests.
//! * [`process`]: a child process spoken to in JSON lines, every read with a deadline.
//! * [`module_graph`]: a crate's modules and the paths between them, for layering tests.

pub mod bins;
pub mod fixtures;
pub mod mock_model;
pub mod module_graph;
pub mod postgres;
pub mod process;

pub use mock_model::{MockModelServer, MockRecord, MockResponse};

/// A loopback port nothing listens on: bound to find a free one, then released. A test
/// points a client at it to be refused, or hands it to a server it starts itself.
pub fn free_loopback_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
