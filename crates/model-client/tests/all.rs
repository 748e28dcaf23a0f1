//! The provider wires against recorded and scripted servers: both SSE streams, open models' quirks, and the bounds on what a server may send.
//!
//! One test binary for the crate: every suite (`suite/`) is a module of it, so a change
//! links one binary instead of one per file. Run one suite with
//! `cargo nextest run -p interpreter-model-client -E 'test(/^suite::NAME::/)'`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
