//! The `interpreter` binary, driven as its users drive it: every front end over stdio, HTTP, WebSocket and a pseudo-terminal, against a mock model (and real peers where they run here).
//!
//! One test binary for the crate: every suite (`suite/`) is a module of it, so a change
//! links one binary instead of one per file. Run one suite with
//! `cargo nextest run -p interpreter-cli -E 'test(/^suite::NAME::/)'`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod acp_support;
mod app_server_support;
mod exec_support;
mod mcp_support;
mod suite;
