//! A sandboxed command may not start a git repository: its config and hooks would run
//! outside the sandbox, in the agent's own git or the user's next `git status` there. Nor
//! may it create `.agents` or `.interpreter`: skills and project hooks found there are
//! loaded by a later thread.
//!
//! Every front end that runs a sandboxed command (the shell tool, a user shell command,
//! the app-server's `command/exec`) wraps it in a [`RepositoryWatch`]: a census of the
//! repositories under the writable roots before ([`interpreter_tools::sandbox::RepositoryCensus`]
//! says what is looked at and how far), and after the command every repository that was
//! not there before is removed and the command's output says so. The policy may allow it:
//! `[sandbox_workspace_write] allow_git_init = true`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use interpreter_protocol::SandboxPolicy;
use interpreter_tools::sandbox::{
    self, CensusRules, PlantedRepository, RepositoryCensus, RepositoryMarker, RootAnchors,
    WritableRoot,
};

use crate::config::Config;

/// The census of one sandboxed command, or nothing to do.
#[derive(Debug)]
pub struct RepositoryWatch {
    census: Option<RepositoryCensus>,
}

impl RepositoryWatch {
    /// For a command that is not sandboxed: nothing to watch.
    pub fn off() -> Self {
        Self { census: None }
    }

    /// Takes the census before a command runs in `cwd` under `policy`, with `env` the
    /// environment its writable roots are computed from (`$TMPDIR` is one) and `anchors`
    /// the session's decided roots. Nothing when the policy writes nowhere; with
    /// `allow_git_init` only agent configuration (`.agents`, `.interpreter`) is watched. `Err`
    /// when the census could not be taken: then the command must not run, since what it
    /// plants could not be found.
    pub async fn start(
        config: &Config,
        anchors: &RootAnchors,
        policy: &SandboxPolicy,
        env: &HashMap<String, String>,
        cwd: &Path,
    ) -> Result<Self, String> {
        let roots: Vec<WritableRoot> = sandbox::writable_roots(
            anchors,
            policy,
            &config.cwd,
            env,
            &config.sandbox_protected_paths(),
        );
        if roots.is_empty() {
            return Ok(Self::off());
        }
        let temporary = sandbox::temporary_roots(policy, &config.cwd, env);
        let workspace = config.cwd.clone();
        let cwd: PathBuf = cwd.to_path_buf();
        let rules = CensusRules {
            allow_git: config.sandbox_allow_git_init,
            spared: config
                .sandbox_protected_paths()
                .iter()
                .filter_map(|path| sandbox::resolve_for_write(path))
                .collect(),
        };
        let census = tokio::task::spawn_blocking(move || {
            RepositoryCensus::take(&roots, &temporary, &workspace, &cwd, rules)
        })
        .await
        .map_err(|error| format!("cannot list the repositories before the command: {error}"))?;
        Ok(Self {
            census: Some(census),
        })
    }

    /// After the command: removes every repository it started and returns what the
    /// command's output should say about them (empty when it started none).
    pub async fn finish(self) -> String {
        let Some(census) = self.census else {
            return String::new();
        };
        let planted = match tokio::task::spawn_blocking(move || census.remove_new()).await {
            Ok(planted) => planted,
            Err(error) => {
                tracing::error!(%error, "the census of repositories after a command failed");
                return format!(
                    "\n[sandbox] the repositories this command may have created could not be \
                     checked ({error}); do not run git under the workspace until they are.\n"
                );
            }
        };
        planted.iter().map(note).collect()
    }
}

/// What the model and the user read about one refused repository.
fn note(planted: &PlantedRepository) -> String {
    let path = planted.path.display();
    tracing::warn!(path = %path, "refused a repository created by a command");
    let what = match planted.marker {
        RepositoryMarker::GitEntry => format!("created a git repository at {path}"),
        RepositoryMarker::GitDirectoryShape => format!(
            "shaped {} like a git directory (git would use it as a repository)",
            planted.path.parent().unwrap_or(&planted.path).display()
        ),
        RepositoryMarker::AgentConfig => {
            return match &planted.removed {
                Ok(()) => format!(
                    "\n[sandbox] this command created {path}; commands may not create .agents or \
                     .interpreter (skills and project hooks the agent would load later, outside \
                     the sandbox), so it was removed. Ask the user to create it, or propose \
                     the files with apply_patch, which asks for approval.\n"
                ),
                Err(error) => format!(
                    "\n[sandbox] this command created {path} and it could not be removed \
                     ({error}); it must be checked before the agent is started here again.\n"
                ),
            };
        }
    };
    match &planted.removed {
        Ok(()) => format!(
            "\n[sandbox] this command {what}; commands may not create .git or other \
             repositories (their config and hooks would run outside the sandbox), so {path} \
             was removed. To allow it, set `allow_git_init = true` in \
             [sandbox_workspace_write].\n"
        ),
        Err(error) => format!(
            "\n[sandbox] this command {what} and {path} could not be removed ({error}); do \
             not run git there until it is checked.\n"
        ),
    }
}
