//! Stamps the version `interpreter --version` prints with the git commit it was built
//! from, when built from a checkout: `0.1.0 (3f9c2ab41d07)`, `-dirty` for local changes.
//! Outside a checkout (a source package) it is the crate version alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let stamped = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            format!("{version} ({commit}{})", if dirty { "-dirty" } else { "" })
        }
        _ => version.to_string(),
    };
    println!("cargo:rustc-env=INTERPRETER_VERSION={stamped}");
    // A new commit or checkout changes the stamp; git's own files say when.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(index) = git(&["rev-parse", "--git-path", "index"]) {
        println!("cargo:rerun-if-changed={index}");
    }
    if let Some(refs) = git(&["rev-parse", "--git-path", "refs/heads"]) {
        println!("cargo:rerun-if-changed={refs}");
    }
}
