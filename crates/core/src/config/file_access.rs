//! Which paths a client of the agent may read and write directly (the app-server's `fs/*`
//! methods): one rule, derived from the sandbox policy, so a client never reaches further
//! than a sandboxed command may write, nor reads outside the places the agent works in.
//!
//! * A path must be absolute and have no `..` component: a client names the file it means,
//!   and a `..` after a symlink would not go where it reads as going.
//! * It is resolved the way the kernel resolves it for a create (every symlink, a final
//!   dangling one included; see [`resolve_for_write`]) before it is checked, and the
//!   caller works on the resolved path: a symlink inside the workspace that points outside
//!   is outside.
//! * Reads: inside the workspace (the config's `cwd`) or one of the sandbox's writable
//!   roots, and never inside a protected path ([`Config::sandbox_protected_paths`]: the
//!   agent's home with its config and credentials, the user's credential agents), which
//!   sandboxed commands cannot read either.
//! * Writes (creating, writing, removing, the destination of a copy): readable as above,
//!   and writable by a sandboxed command ([`WriteScope`]): nowhere under `read-only`,
//!   never inside `.git`, `.agents` or `.interpreter` of a root (or a nested repository's
//!   `.git`, or a hooks path). Under `danger-full-access` the workspace is the only root:
//!   a client that may run anything still gets no file access beyond the workspace through
//!   these methods.
//! * A tree that is removed or replaced as a whole must not be a root (or hold one) and
//!   must not hold a protected path ([`FileAccessRule::check_tree`]).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use interpreter_protocol::SandboxPolicy;
use interpreter_tools::beneath::Target;
use interpreter_tools::sandbox::{Purpose, RootAnchors, WriteScope, resolve_for_write};

use super::Config;

/// What a client wants to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAccess {
    Read,
    Write,
}

/// Why a path was refused. Each message names the path and the reason, for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefused {
    #[error("{0} is not an absolute path; send an absolute path")]
    NotAbsolute(PathBuf),
    #[error("{0} contains `..`; send the path without parent-directory components")]
    ParentComponent(PathBuf),
    #[error("{0} cannot be resolved (a symlink loop)")]
    Unresolvable(PathBuf),
    #[error("{path} is outside the workspace and the sandbox's writable roots ({roots})")]
    OutsideRoots { path: PathBuf, roots: String },
    #[error("{0} is protected (the agent's home or a credential store) and cannot be accessed")]
    Protected(PathBuf),
    #[error(
        "{0} may not be written: the sandbox is read-only (sandbox_mode = read-only); use workspace-write to let clients edit the workspace"
    )]
    ReadOnly(PathBuf),
    #[error(
        "{0} may not be written: the sandbox keeps it read-only (`.git`, `.agents`, `.interpreter` and repository hooks stay read-only inside writable roots)"
    )]
    ReadOnlyInSandbox(PathBuf),
    #[error("{0} is a workspace or writable root (or holds one) and cannot be removed or replaced")]
    Root(PathBuf),
    #[error(
        "{path} holds {protected}, which is protected, so it cannot be removed, replaced or copied"
    )]
    HoldsProtected { path: PathBuf, protected: PathBuf },
}

/// The rule for one config, with its roots resolved once (a request checks several
/// paths against the same roots) and kept open, so what a request then does is reached
/// from them ([`FileAccessRule::target`]).
#[derive(Debug, Clone)]
pub struct FileAccessRule {
    policy: SandboxPolicy,
    /// What may be written, and how it is reached: the sandbox's roots, or the workspace
    /// alone under `danger-full-access`.
    scope: WriteScope,
    /// Resolved, for comparing against resolved paths.
    protected_resolved: Vec<PathBuf>,
    /// Canonical: the workspace, then the sandbox's writable roots.
    roots: Vec<PathBuf>,
    /// Canonical paths the sandbox keeps read-only inside its roots.
    read_only_subpaths: Vec<PathBuf>,
}

impl Config {
    /// The rule for the `fs/*` methods under this config (see the module docs).
    pub fn file_access_rule(&self) -> FileAccessRule {
        FileAccessRule::new(
            &self.sandbox_policy,
            &self.cwd,
            &self.command_env(),
            self.sandbox_protected_paths(),
        )
    }
}

impl FileAccessRule {
    /// The rule for `policy` in `cwd` with environment `env` (for `$TMPDIR`), with
    /// `protected` neither readable nor writable.
    pub fn new(
        policy: &SandboxPolicy,
        cwd: &Path,
        env: &HashMap<String, String>,
        protected: Vec<PathBuf>,
    ) -> Self {
        let protected_resolved: Vec<PathBuf> = protected
            .iter()
            .filter_map(|path| resolve_for_write(path))
            .collect();
        // Full access still confines a client to the workspace: its scope is the
        // workspace alone, as a root.
        let scope_policy = match policy {
            SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
                SandboxPolicy::WorkspaceWrite {
                    writable_roots: Vec::new(),
                    network_access: false,
                    exclude_tmpdir_env_var: true,
                    exclude_slash_tmp: true,
                }
            }
            other => other.clone(),
        };
        let scope = WriteScope::new(&RootAnchors::new(), &scope_policy, cwd, env, &protected);
        // A workspace that cannot be resolved is no root at all: everything is refused.
        let mut roots: Vec<PathBuf> = std::fs::canonicalize(cwd).into_iter().collect();
        let mut read_only_subpaths = Vec::new();
        for root in scope.roots() {
            if !roots.contains(&root.root) {
                roots.push(root.root.clone());
            }
            read_only_subpaths.extend(root.read_only_subpaths.iter().cloned());
        }
        Self {
            policy: policy.clone(),
            scope,
            protected_resolved,
            roots,
            read_only_subpaths,
        }
    }
}

impl FileAccessRule {
    /// The canonical roots: the workspace first, then the sandbox's writable roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The resolved path a client may `access`, or why not.
    pub fn check(&self, path: &Path, access: FileAccess) -> Result<PathBuf, PathRefused> {
        if !path.is_absolute() {
            return Err(PathRefused::NotAbsolute(path.to_path_buf()));
        }
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(PathRefused::ParentComponent(path.to_path_buf()));
        }
        let resolved =
            resolve_for_write(path).ok_or_else(|| PathRefused::Unresolvable(path.to_path_buf()))?;
        if self
            .protected_resolved
            .iter()
            .any(|protected| resolved.starts_with(protected))
        {
            return Err(PathRefused::Protected(path.to_path_buf()));
        }
        if !self.roots.iter().any(|root| resolved.starts_with(root)) {
            return Err(PathRefused::OutsideRoots {
                path: path.to_path_buf(),
                roots: self
                    .roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if access == FileAccess::Write {
            if matches!(self.policy, SandboxPolicy::ReadOnly { .. }) {
                return Err(PathRefused::ReadOnly(path.to_path_buf()));
            }
            if !self.scope.allows_resolved(&resolved) {
                return Err(PathRefused::ReadOnlyInSandbox(path.to_path_buf()));
            }
        }
        Ok(resolved)
    }

    /// The checked `path` as the target the work is done through: beneath the root that
    /// holds it, so a directory on the way swapped for a symlink after the check fails the
    /// operation instead of redirecting it (see [`interpreter_tools::beneath`]).
    pub fn target(&self, path: &Path, access: FileAccess) -> Result<Target, PathRefused> {
        let resolved = self.check(path, access)?;
        let purpose = match access {
            FileAccess::Read => Purpose::Read,
            FileAccess::Write => Purpose::Write,
        };
        // The same resolution that was checked: resolving the name again could give
        // another answer after a concurrent rename.
        self.scope
            .target_resolved(path.to_path_buf(), resolved.clone(), purpose)
            .ok_or(PathRefused::ReadOnlyInSandbox(resolved))
    }

    /// The entry `path` names itself (its directory resolved, its own name kept: a symlink
    /// there is the entry, not what it points at), for removing it. What it leads to must
    /// be writable, and so must the place of the entry itself; neither may be, or hold, a
    /// root or a protected path.
    pub fn entry_target(&self, path: &Path) -> Result<Target, PathRefused> {
        let resolved = self.check(path, FileAccess::Write)?;
        self.check_tree(&resolved)?;
        let name = path
            .file_name()
            .ok_or_else(|| PathRefused::Root(path.to_path_buf()))?;
        let dir = path
            .parent()
            .ok_or_else(|| PathRefused::Root(path.to_path_buf()))?;
        // The entry's directory must be writable too (a link's place may differ from its
        // target's); the entry is then reached from that checked resolution.
        let entry = self.check(dir, FileAccess::Write)?.join(name);
        if entry != resolved {
            self.check_tree(&entry)?;
        }
        self.scope
            .target_resolved(path.to_path_buf(), entry.clone(), Purpose::Write)
            .ok_or(PathRefused::ReadOnlyInSandbox(entry))
    }

    /// For a resolved path removed or replaced as a whole: it must not be (or hold) a
    /// root, nor hold a protected path (which [`check`](Self::check) on the top alone does
    /// not see).
    pub fn check_tree(&self, resolved: &Path) -> Result<(), PathRefused> {
        if resolved.parent().is_none() || self.roots.iter().any(|root| root.starts_with(resolved)) {
            return Err(PathRefused::Root(resolved.to_path_buf()));
        }
        if let Some(protected) = self
            .protected_resolved
            .iter()
            .chain(&self.read_only_subpaths)
            .find(|protected| protected.starts_with(resolved))
        {
            return Err(PathRefused::HoldsProtected {
                path: resolved.to_path_buf(),
                protected: protected.clone(),
            });
        }
        Ok(())
    }

    /// For a resolved path read as a whole tree (the source of a recursive copy): it
    /// must not hold a protected path, which [`check`](Self::check) on the top alone does
    /// not see (an agent home inside the workspace would be copied out of protection).
    pub fn check_tree_readable(&self, resolved: &Path) -> Result<(), PathRefused> {
        match self
            .protected_resolved
            .iter()
            .find(|protected| protected.starts_with(resolved))
        {
            Some(protected) => Err(PathRefused::HoldsProtected {
                path: resolved.to_path_buf(),
                protected: protected.clone(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    fn rule(policy: SandboxPolicy, cwd: &Path, home: &Path) -> FileAccessRule {
        FileAccessRule::new(&policy, cwd, &HashMap::new(), vec![home.to_path_buf()])
    }

    fn workspace_write() -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![],
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        }
    }

    #[test]
    fn reads_and_writes_stay_in_the_roots_and_out_of_protected_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let ws = base.join("ws");
        let home = base.join("home");
        let outside = base.join("outside");
        for dir in [&ws, &home, &outside, &ws.join(".git")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(outside.join("secret"), "x").unwrap();
        symlink(outside.join("secret"), ws.join("link")).unwrap();
        symlink(&home, ws.join("home-link")).unwrap();
        let ws_rule = rule(workspace_write(), &ws, &home);

        assert_eq!(
            ws_rule
                .check(&ws.join("a/b.txt"), FileAccess::Write)
                .unwrap(),
            ws.join("a/b.txt")
        );
        assert!(
            ws_rule
                .check(&ws.join(".git/config"), FileAccess::Read)
                .is_ok()
        );
        assert!(matches!(
            ws_rule.check(&ws.join(".git/config"), FileAccess::Write),
            Err(PathRefused::ReadOnlyInSandbox(_))
        ));
        assert!(matches!(
            ws_rule.check(&ws.join("link"), FileAccess::Read),
            Err(PathRefused::OutsideRoots { .. })
        ));
        assert!(matches!(
            ws_rule.check(&ws.join("home-link/config.toml"), FileAccess::Read),
            Err(PathRefused::Protected(_))
        ));
        assert!(matches!(
            ws_rule.check(&ws.join("x/../../outside/secret"), FileAccess::Read),
            Err(PathRefused::ParentComponent(_))
        ));
        assert!(matches!(
            ws_rule.check(Path::new("relative.txt"), FileAccess::Read),
            Err(PathRefused::NotAbsolute(_))
        ));
        assert!(matches!(ws_rule.check_tree(&ws), Err(PathRefused::Root(_))));
        assert!(matches!(
            ws_rule.check_tree(Path::new("/")),
            Err(PathRefused::Root(_))
        ));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        assert!(ws_rule.check_tree(&ws.join("sub")).is_ok());
        assert!(ws_rule.check_tree_readable(&ws.join("sub")).is_ok());
        assert!(matches!(
            ws_rule.check_tree_readable(&base),
            Err(PathRefused::HoldsProtected { .. })
        ));

        let read_only = rule(
            SandboxPolicy::ReadOnly {
                network_access: false,
            },
            &ws,
            &home,
        );
        assert!(read_only.check(&ws.join("a"), FileAccess::Read).is_ok());
        assert!(matches!(
            read_only.check(&ws.join("a"), FileAccess::Write),
            Err(PathRefused::ReadOnly(_))
        ));
    }
}
