//! Permissions the model may ask for beyond the thread's sandbox policy
//! (`request_permissions`), what may never be granted, and how a grant widens the policy.
//!
//! The model is not trusted, and neither is a client that says yes to everything: a
//! requested directory is checked *before* anybody is asked, and what fails the check is
//! refused whatever the answer. A directory may be granted only when it is
//!
//! * absolute and normalised (no `.` or `..` components): the person is shown the path
//!   that will be writable, not one that reads differently after a symlink;
//! * an existing directory, taken as it resolves (symlinks followed), and shown resolved;
//! * neither inside nor above a protected path ([`Config::sandbox_protected_paths`]: the
//!   agent's home with its config and credentials, the user's ssh and gpg agents): a
//!   grant must not let commands rewrite how the agent runs or reach its secrets, and a
//!   root above one would hold it;
//! * not a `.git`, `.agents` or `.interpreter` directory (or inside one), nor inside a
//!   path the sandbox keeps read-only in the current writable roots (a repository's git
//!   directory, its hooks): those run code outside the sandbox later.
//!
//! Write grants need `workspace-write`: under `read-only` the model is told to ask the
//! user to change the sandbox mode instead, since a grant there would make more writable
//! than was shown. Network may be granted under either.

use std::path::{Component, Path, PathBuf};

use interpreter_protocol::{PermissionGrant, SandboxPolicy};
use interpreter_tools::sandbox::{
    PROTECTED_DIR_NAMES, RootAnchors, resolve_for_write, writable_roots,
};

use crate::config::Config;

/// What of a request may be put to the client, and what was refused (with why, for the
/// model).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ConfinedRequest {
    pub askable: PermissionGrant,
    pub refused: Vec<String>,
    /// Asked for, but already in force: nothing to ask.
    pub already: Vec<String>,
}

/// Split the model's request under `policy` (the thread's, before grants) into what may
/// be asked for and what is refused.
pub(crate) fn confine(
    config: &Config,
    anchors: &RootAnchors,
    policy: &SandboxPolicy,
    in_force: &PermissionGrant,
    write: &[String],
    network: bool,
) -> ConfinedRequest {
    let mut out = ConfinedRequest::default();
    if network {
        if policy.has_full_network_access() || in_force.network {
            out.already.push("network access".to_string());
        } else if let Some(ceiling) = config
            .sandbox_ceiling
            .as_ref()
            .filter(|ceiling| !ceiling.allows_network())
        {
            out.refused.push(format!(
                "network access: the ceiling `{}` that {} sets has none",
                ceiling.describe(),
                ceiling.source()
            ));
        } else {
            out.askable.network = true;
        }
    }
    let protected: Vec<PathBuf> = config
        .sandbox_protected_paths()
        .iter()
        .filter_map(|path| resolve_for_write(path))
        .collect();
    let current = writable_roots(
        anchors,
        &widened(policy, in_force),
        &config.cwd,
        &config.command_env(),
        &config.sandbox_protected_paths(),
    );
    for raw in write {
        match confine_root(policy, raw, &protected, &current) {
            Ok(Some(root)) => {
                if !out.askable.writable_roots.contains(&root) {
                    out.askable.writable_roots.push(root);
                }
            }
            Ok(None) => out.already.push(format!("{raw} is already writable")),
            Err(why) => out.refused.push(format!("{raw}: {why}")),
        }
    }
    out
}

/// The directory to ask for (`None`: already writable), or why it may not be granted.
fn confine_root(
    policy: &SandboxPolicy,
    raw: &str,
    protected: &[PathBuf],
    current: &[interpreter_tools::sandbox::WritableRoot],
) -> Result<Option<PathBuf>, String> {
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err("not an absolute path".to_string());
    }
    let normal = path
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !normal || raw.contains("/./") || raw.ends_with("/.") || raw.contains("//") {
        return Err("not a normalised path (no `.`, `..` or empty components)".to_string());
    }
    match policy {
        SandboxPolicy::WorkspaceWrite { .. } => {}
        SandboxPolicy::ReadOnly { .. } => {
            return Err(
                "the sandbox is read-only; write access needs sandbox_mode = workspace-write, which only the user can choose"
                    .to_string(),
            );
        }
        SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
            return Ok(None);
        }
    }
    let Some(resolved) = resolve_for_write(path) else {
        return Err("cannot be resolved (a symlink loop)".to_string());
    };
    if !resolved.is_dir() {
        return Err("not an existing directory".to_string());
    }
    if let Some(hit) = protected
        .iter()
        .find(|p| resolved.starts_with(p) || p.starts_with(&resolved))
    {
        return Err(format!(
            "protected: {} (the agent's home or a credential store) may never become writable",
            hit.display()
        ));
    }
    let in_protected_dir = resolved.components().any(|c| match c {
        Component::Normal(name) => PROTECTED_DIR_NAMES.iter().any(|p| name == *p),
        _ => false,
    });
    if in_protected_dir {
        return Err(format!(
            "{} is (or is inside) a `.git`, `.agents` or `.interpreter` directory, which stays read-only",
            resolved.display()
        ));
    }
    if let Some(kept) = current
        .iter()
        .flat_map(|root| &root.read_only_subpaths)
        .find(|kept| resolved.starts_with(kept))
    {
        return Err(format!(
            "{} stays read-only inside the sandbox (a repository's git directory or hooks)",
            kept.display()
        ));
    }
    if current.iter().any(|root| resolved.starts_with(&root.root)) {
        return Ok(None);
    }
    Ok(Some(resolved))
}

/// `policy` with `grant` applied: granted directories become writable roots (under
/// `workspace-write` only) and a network grant turns the network on. The one place a
/// grant changes a policy; the session's [`crate::session::Session::turn_sandbox_policy`]
/// is the one caller that matters.
pub(crate) fn widened(policy: &SandboxPolicy, grant: &PermissionGrant) -> SandboxPolicy {
    if grant.is_empty() {
        return policy.clone();
    }
    match policy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots,
            network_access,
            exclude_tmpdir_env_var,
            exclude_slash_tmp,
        } => {
            let mut roots = writable_roots.clone();
            for root in &grant.writable_roots {
                if !roots.contains(root) {
                    roots.push(root.clone());
                }
            }
            SandboxPolicy::WorkspaceWrite {
                writable_roots: roots,
                network_access: *network_access || grant.network,
                exclude_tmpdir_env_var: *exclude_tmpdir_env_var,
                exclude_slash_tmp: *exclude_slash_tmp,
            }
        }
        SandboxPolicy::ReadOnly { network_access } => SandboxPolicy::ReadOnly {
            network_access: *network_access || grant.network,
        },
        SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => policy.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_write() -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: Vec::new(),
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        }
    }

    #[test]
    fn paths_that_are_relative_or_not_normalised_are_refused() {
        let policy = workspace_write();
        for raw in [
            "relative/dir",
            "/tmp/../etc",
            "/tmp/./x",
            "/tmp//x",
            "/tmp/.",
        ] {
            assert!(
                confine_root(&policy, raw, &[], &[]).is_err(),
                "{raw} was not refused"
            );
        }
    }

    #[test]
    fn protected_paths_and_their_parents_are_refused() {
        let base = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(base.path()).expect("canonical");
        let home = root.join("home");
        let inside = home.join("sessions");
        std::fs::create_dir_all(&inside).expect("dirs");
        let git = root.join("repo").join(".git");
        std::fs::create_dir_all(&git).expect("git");
        let protected = vec![home.clone()];
        let policy = workspace_write();
        for path in [&home, &inside, &root, &git, &PathBuf::from("/")] {
            let raw = path.to_string_lossy();
            assert!(
                confine_root(&policy, &raw, &protected, &[]).is_err(),
                "{raw} was not refused"
            );
        }
        let other = root.join("other");
        std::fs::create_dir_all(&other).expect("other");
        assert_eq!(
            confine_root(&policy, &other.to_string_lossy(), &protected, &[]),
            Ok(Some(other.clone()))
        );
        assert!(
            confine_root(
                &SandboxPolicy::ReadOnly {
                    network_access: false
                },
                &other.to_string_lossy(),
                &protected,
                &[]
            )
            .is_err()
        );
    }

    #[test]
    fn a_symlink_into_a_protected_path_is_refused() {
        let base = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(base.path()).expect("canonical");
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("home");
        let link = root.join("innocent");
        std::os::unix::fs::symlink(&home, &link).expect("symlink");
        assert!(confine_root(&workspace_write(), &link.to_string_lossy(), &[home], &[]).is_err());
    }

    #[test]
    fn a_grant_widens_only_what_it_names() {
        let grant = PermissionGrant {
            writable_roots: vec![PathBuf::from("/data")],
            network: true,
        };
        match widened(&workspace_write(), &grant) {
            SandboxPolicy::WorkspaceWrite {
                writable_roots,
                network_access,
                exclude_slash_tmp,
                ..
            } => {
                assert_eq!(writable_roots, vec![PathBuf::from("/data")]);
                assert!(network_access);
                assert!(exclude_slash_tmp);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            widened(
                &SandboxPolicy::ReadOnly {
                    network_access: false
                },
                &grant
            ),
            SandboxPolicy::ReadOnly {
                network_access: true
            }
        );
    }
}
