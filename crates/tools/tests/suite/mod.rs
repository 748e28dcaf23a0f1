//! One module per suite; each file says what it covers.

mod apply_patch;
mod env_policy;
mod git;
mod safety;
mod shell;
