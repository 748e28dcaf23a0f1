//! What the agent does to the machine, for real: the shell runner, apply_patch, the safety rules, the environment policy, git, and the Linux sandbox.
//!
//! One test binary for the crate: every suite (`suite/`) is a module of it, so a change
//! links one binary instead of one per file. The sandbox's own tests are a second binary
//! (`sandbox_linux.rs`, `harness = false`): it must own `main` to re-exec itself as the
//! sandbox helper. Run one suite with
//! `cargo nextest run -p interpreter-tools -E 'test(/^suite::NAME::/)'`.

// Test code: a failed expectation should panic with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
