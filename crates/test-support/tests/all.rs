//! The test harness's own binaries, checked: the mock model server and the mock MCP server as other languages' tests start them.
//!
//! One test binary for the crate: every suite (`suite/`) is a module of it, so a change
//! links one binary instead of one per file. Run one suite with
//! `cargo nextest run -p interpreter-test-support -E 'test(/^suite::NAME::/)'`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
