//! The engine through its public API: threads of turns against a mock model server, the stores' shared contract, the MCP client pool, open-model quirks, a real llama-server, and the module layers.
//!
//! One test binary for the crate: every suite (`suite/`) is a module of it, so a change
//! links one binary instead of one per file. Run one suite with
//! `cargo nextest run -p interpreter-core -E 'test(/^suite::NAME::/)'`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
