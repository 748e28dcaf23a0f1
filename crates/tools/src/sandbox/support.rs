//! What the running kernel can enforce, as reported by `interpreter sandbox check`.

use serde::Serialize;

/// Result of [`probe_support`](super::probe_support).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxSupport {
    /// The kernel's Landlock ABI version, `None` when Landlock is absent or disabled.
    pub landlock_abi: Option<u32>,
    /// A child process could restrict itself with a fully enforced ruleset.
    pub landlock_enforced: bool,
    /// A child process could install the seccomp filter.
    pub seccomp: bool,
    /// A child process could enter a private mount namespace and make a path read-only
    /// there, which is how protected paths (`.git`, ...) stay read-only inside a writable
    /// root. Without it the sandbox still works, with Landlock alone keeping them read-only:
    /// then the directory holding them gets no new entries.
    pub mount_namespace: bool,
    /// `read-only` and `workspace-write` commands can run here.
    pub supported: bool,
    /// Why not, in words meant for people.
    pub problems: Vec<String>,
    /// What works, but less well than it could, in words meant for people.
    pub warnings: Vec<String>,
}

impl SandboxSupport {
    /// A short human report, one fact per line.
    pub fn describe(&self) -> String {
        let landlock = match self.landlock_abi {
            Some(abi) => format!("available (ABI {abi})"),
            None => "not available".to_owned(),
        };
        let yes_no = |flag: bool| if flag { "yes" } else { "no" };
        let mount_namespace = if self.mount_namespace {
            "yes"
        } else {
            "no (Landlock alone keeps them read-only; no new files next to .git)"
        };
        let mut report = format!(
            "Landlock: {landlock}\nLandlock enforced in a test process: {}\nseccomp filter: {}\n\
             Mount namespace for protected paths: {mount_namespace}\n",
            yes_no(self.landlock_enforced),
            yes_no(self.seccomp),
        );
        if self.supported {
            report.push_str("Sandbox: supported (read-only and workspace-write are enforced)\n");
        } else {
            report.push_str(
                "Sandbox: NOT supported; sandboxed commands will be refused, not run unsandboxed.\n\
                 Choose `--sandbox danger-full-access` explicitly to run commands without a sandbox.\n",
            );
        }
        for line in self.problems.iter().chain(&self.warnings) {
            report.push_str("- ");
            report.push_str(line);
            report.push('\n');
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_lists_problems_and_the_explicit_opt_out() {
        let support = SandboxSupport {
            landlock_abi: None,
            landlock_enforced: false,
            seccomp: true,
            mount_namespace: false,
            supported: false,
            problems: vec!["Landlock is not available".to_owned()],
            warnings: vec!["no user namespaces".to_owned()],
        };
        let text = support.describe();
        assert!(text.contains("Landlock: not available"));
        assert!(text.contains("danger-full-access"));
        assert!(text.contains("- Landlock is not available"));
        assert!(text.contains("Mount namespace for protected paths: no"));
        assert!(text.contains("- no user namespaces"));
        let json = serde_json::to_value(&support).unwrap();
        assert_eq!(json["landlock_abi"], serde_json::Value::Null);
        assert_eq!(json["supported"], false);
        assert_eq!(json["mount_namespace"], false);
    }
}
