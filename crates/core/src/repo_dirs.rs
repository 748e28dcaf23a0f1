//! The directories of the repository the agent works in that hold its per-directory
//! instructions and configuration (AGENTS.md, `.agents/skills`, `.interpreter/hooks.json`):
//! one walk, shared by everything that looks for them.

use std::path::{Path, PathBuf};

/// Directories from the repository root (or `cwd` itself outside a repository) to `cwd`:
/// where AGENTS.md files, skills and project hooks are looked for.
pub(crate) fn dirs_from_root(cwd: &Path) -> Vec<PathBuf> {
    let mut chain: Vec<PathBuf> = Vec::new();
    for dir in cwd.ancestors() {
        chain.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            chain.reverse();
            return chain;
        }
    }
    vec![cwd.to_path_buf()]
}
