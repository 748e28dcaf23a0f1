//! Recognising a command that failed because the sandbox said no.
//!
//! Landlock and seccomp answer with `EACCES`/`EPERM`, the read-only bind mounts over
//! protected paths with `EROFS` (writes beneath them) and `EBUSY` (renaming or removing
//! them); blocked sockets surface as permission or name-resolution errors. Programs
//! print these as the C library's `strerror` text, which is what we look for. A false
//! positive only costs an extra "retry without the sandbox?" question, so the list leans
//! towards recall.

const DENIAL_MARKERS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "device or resource busy",
    "network is unreachable",
    "could not resolve host",
    "temporary failure in name resolution",
    "address family not supported",
];

/// Whether a failed command's output looks like a sandbox denial, so the engine can offer
/// to retry it without the sandbox. Successful commands never count.
pub fn looks_like_sandbox_denial(exit_code: Option<i32>, output: &str) -> bool {
    if exit_code == Some(0) {
        return false;
    }
    let lowered = output.to_lowercase();
    DENIAL_MARKERS.iter().any(|marker| lowered.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_typical_denials() {
        for output in [
            "touch: cannot touch '/etc/x': Permission denied",
            "bash: /usr/x: Operation not permitted",
            "sed: couldn't open temporary file ./sedX: Read-only file system",
            "touch: cannot touch '.git/hooks/pre-commit': Read-only file system",
            "mv: cannot move '.git' to 'git-moved': Device or resource busy",
            "curl: (6) Could not resolve host: example.com",
            "PermissionError: [Errno 1] Operation not permitted",
            "connect: Network is unreachable",
        ] {
            assert!(
                looks_like_sandbox_denial(Some(1), output),
                "missed {output}"
            );
        }
        assert!(looks_like_sandbox_denial(None, "Permission denied"));
    }

    #[test]
    fn ignores_success_and_ordinary_failures() {
        assert!(!looks_like_sandbox_denial(Some(0), "Permission denied"));
        assert!(!looks_like_sandbox_denial(
            Some(1),
            "error[E0308]: mismatched types"
        ));
        assert!(!looks_like_sandbox_denial(Some(2), ""));
    }
}
