//! The test-support package's own binaries, found next to the binary under test (cargo
//! puts every workspace binary in one directory) and built on demand when a test runs
//! before them.

use std::path::{Path, PathBuf};

/// Path of the `mock-mcp-server` binary beside `sibling` (e.g. the `interpreter` binary
/// a test drives), building it first if it is missing. `cargo` is the `CARGO` the test
/// was built with.
pub fn mock_mcp_server(sibling: &Path, cargo: &str) -> std::io::Result<PathBuf> {
    let path = sibling.with_file_name("mock-mcp-server");
    if !path.exists() {
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "-p",
                "interpreter-test-support",
                "--bin",
                "mock-mcp-server",
            ])
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other("building mock-mcp-server failed"));
        }
    }
    Ok(path)
}
