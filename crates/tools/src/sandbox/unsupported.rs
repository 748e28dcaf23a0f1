//! The sandbox on platforms without Landlock: every sandboxed run is refused.

use std::collections::HashMap;

use super::{LinuxHelperArgs, SandboxError, SandboxSupport};

pub fn run_linux_helper(
    _args: LinuxHelperArgs,
    _env: &HashMap<String, String>,
) -> Result<std::convert::Infallible, SandboxError> {
    Err(SandboxError::UnsupportedPlatform {
        os: std::env::consts::OS,
    })
}

pub fn probe_support() -> SandboxSupport {
    SandboxSupport {
        landlock_abi: None,
        landlock_enforced: false,
        seccomp: false,
        mount_namespace: false,
        supported: false,
        problems: vec![format!(
            "the sandbox is implemented for Linux only; this is {}",
            std::env::consts::OS
        )],
        warnings: Vec::new(),
        ..SandboxSupport::default()
    }
    .with_catalogue()
}
