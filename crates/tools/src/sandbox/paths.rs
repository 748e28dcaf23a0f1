//! Which paths a policy lets commands write.
//!
//! Under `workspace-write` the writable roots are the cwd, the policy's `writable_roots`,
//! `/tmp` (unless `exclude_slash_tmp`) and `$TMPDIR` (unless `exclude_tmpdir_env_var`), all
//! canonicalized so they compare against resolved paths. Inside each root, `.git`,
//! `.agents` and `.interpreter` stay read-only when they exist, because writing them lets a
//! command plant code that runs later outside the sandbox (git hooks, agent and project
//! configuration). A `.git` *file* (worktrees, submodules) points at the real git directory
//! with `gitdir: X`; X is protected too.
//!
//! The caller also names paths that stay read-only *wherever* they lie: the agent's home
//! (`INTERPRETER_HOME`, by default `~/.interpreter`), which holds its configuration,
//! credentials, rollouts and state database. A command that could append
//! `sandbox_mode = "danger-full-access"` to its `config.toml` would escape the sandbox the
//! next time the agent starts. Such a path inside a writable root is protected like `.git`;
//! a writable root inside such a path is not writable at all.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use interpreter_protocol::SandboxPolicy;

use super::roots::{AnchoredRoot, RootAnchors};
use crate::beneath::{Anchor, KeepOut, Target};

/// Directory names kept read-only inside every writable root.
pub const PROTECTED_DIR_NAMES: [&str; 3] = [".git", ".agents", ".interpreter"];

/// Linux gives up on a path after 40 symlinks (`ELOOP`); so do we.
const MAX_SYMLINK_HOPS: usize = 40;

/// A directory commands may write beneath, minus the subpaths they may not.
#[derive(Debug, Clone)]
pub struct WritableRoot {
    /// Where the anchored directory is now (canonical, symlink-free): what the protected
    /// paths below were found under, and what paths are compared against.
    pub root: PathBuf,
    /// Canonical paths that stay read-only even though they are (usually) beneath `root`.
    pub read_only_subpaths: Vec<PathBuf>,
    /// The directory itself, opened when the session decided on it: what the sandbox's
    /// rules and the agent's own writes are made from.
    pub anchor: Arc<AnchoredRoot>,
}

impl PartialEq for WritableRoot {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
            && self.read_only_subpaths == other.read_only_subpaths
            && self.anchor.identity() == other.anchor.identity()
    }
}

impl Eq for WritableRoot {}

/// The roots commands may write under `policy` in a session working in `cwd` with the
/// command environment `env`, with `protected` (absolute paths, the agent's home first)
/// kept read-only: anchored by `anchors` (once per session, see [`RootAnchors`]) and
/// described where they are now.
///
/// Empty for `read-only` and for `danger-full-access` (which needs no roots: everything is
/// writable). Refused roots are left out (the session reports them when it starts, from
/// [`RootAnchors::anchor`]).
pub fn writable_roots(
    anchors: &RootAnchors,
    policy: &SandboxPolicy,
    cwd: &Path,
    env: &HashMap<String, String>,
    protected: &[PathBuf],
) -> Vec<WritableRoot> {
    writable_roots_of(
        &anchors.anchor(policy, cwd, env, protected).roots,
        protected,
        env.get("HOME").map(Path::new),
    )
}

/// [`WritableRoot`]s of directories already anchored: where each is now, and the protected
/// paths inside it. A root that is gone, or that now lies inside a protected path, is left
/// out. `home` is the command environment's `HOME`, for a `core.hooksPath` of `~/…`.
pub fn writable_roots_of(
    anchored: &[Arc<AnchoredRoot>],
    protected: &[PathBuf],
    home: Option<&Path>,
) -> Vec<WritableRoot> {
    let always_protected: Vec<PathBuf> = protected
        .iter()
        .filter_map(|path| resolve_for_write(path))
        .collect();
    anchored
        .iter()
        .filter_map(|anchor| {
            let root = anchor.current_path().ok()?;
            if always_protected.iter().any(|path| root.starts_with(path)) {
                return None;
            }
            let mut read_only_subpaths = protected_subpaths(&root, home);
            for path in &always_protected {
                if path.starts_with(&root) && !read_only_subpaths.contains(path) {
                    read_only_subpaths.push(path.clone());
                }
            }
            Some(WritableRoot {
                read_only_subpaths,
                root,
                anchor: anchor.clone(),
            })
        })
        .collect()
}

/// The shared temporary directories (`/tmp`, `$TMPDIR`) among the roots [`writable_roots`]
/// gives for the same arguments, canonical: other programs write there too, so what
/// appears in them while a command runs is not necessarily the command's.
pub fn temporary_roots(
    policy: &SandboxPolicy,
    cwd: &Path,
    env: &HashMap<String, String>,
) -> Vec<PathBuf> {
    let SandboxPolicy::WorkspaceWrite {
        exclude_tmpdir_env_var,
        exclude_slash_tmp,
        ..
    } = policy
    else {
        return Vec::new();
    };
    temporary_candidates(*exclude_slash_tmp, *exclude_tmpdir_env_var, cwd, env)
        .iter()
        .filter_map(|candidate| fs::canonicalize(candidate).ok())
        .collect()
}

/// `/tmp` unless excluded, and `$TMPDIR` (relative to `cwd`) unless excluded: the
/// temporary candidates of a `workspace-write` policy, as configured.
pub(super) fn temporary_candidates(
    exclude_slash_tmp: bool,
    exclude_tmpdir_env_var: bool,
    cwd: &Path,
    env: &HashMap<String, String>,
) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if !exclude_slash_tmp {
        candidates.push(PathBuf::from("/tmp"));
    }
    if !exclude_tmpdir_env_var
        && let Some(tmpdir) = env.get("TMPDIR").filter(|value| !value.is_empty())
    {
        candidates.push(cwd.join(tmpdir));
    }
    candidates
}

/// How deep below a writable root nested repositories are looked for, and how many
/// directories that look may read: enough for the repositories people keep inside a
/// workspace, bounded so a huge tree (or `/tmp`) costs a command little.
const NESTED_REPOSITORY_DEPTH: usize = 3;
const NESTED_REPOSITORY_DIRECTORY_BUDGET: usize = 2048;

/// Directories never searched for nested repositories: build output and dependency trees,
/// which are large and hold no repository of the user's.
pub(super) const NOT_SEARCHED: [&str; 4] = ["node_modules", "target", "vendor", "__pycache__"];

/// The protected entries that exist directly inside `root`, plus what they point at, and
/// the `.git` of repositories nested a few levels below it (a hook planted there runs on
/// the user's next commit in that directory).
fn protected_subpaths(root: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut protected = Vec::new();
    for name in PROTECTED_DIR_NAMES {
        protect_entry(root, name, home, &mut protected);
    }
    let mut budget = NESTED_REPOSITORY_DIRECTORY_BUDGET;
    let mut pending: VecDeque<(PathBuf, usize)> = VecDeque::from([(root.to_path_buf(), 0)]);
    while let Some((dir, depth)) = pending.pop_front() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if !file_type.is_dir() || name.starts_with('.') || NOT_SEARCHED.contains(&name) {
                continue;
            }
            let path = entry.path();
            // `.agents` and `.interpreter` below the root are what a thread started in
            // that directory loads (skills, project hooks).
            for name in PROTECTED_DIR_NAMES {
                protect_entry(&path, name, home, &mut protected);
            }
            if depth + 1 < NESTED_REPOSITORY_DEPTH {
                pending.push_back((path, depth + 1));
            }
        }
    }
    protected
}

/// Adds `dir/name` when it exists (and, for a symlink, what it leads to; for `.git`, its
/// gitdir and hooks directory) to `protected`.
fn protect_entry(dir: &Path, name: &str, home: Option<&Path>, protected: &mut Vec<PathBuf>) {
    let mut add = |path: PathBuf| {
        if !protected.contains(&path) {
            protected.push(path);
        }
    };
    let entry = dir.join(name);
    let Ok(metadata) = fs::symlink_metadata(&entry) else {
        return;
    };
    // The entry itself (a symlink or a git file must not be replaced either) ...
    add(entry.clone());
    // ... and, if it is a symlink, the directory it leads to.
    if metadata.file_type().is_symlink()
        && let Ok(target) = fs::canonicalize(&entry)
    {
        add(target);
    }
    if name == ".git" {
        let gitdir = gitdir_of_git_file(dir, &entry);
        // Hooks kept outside `.git` (`core.hooksPath = .husky`) run on the user's next
        // commit just as `.git/hooks` do, so they are protected the same way.
        if let Some(hooks) = hooks_path_of(gitdir.as_deref().unwrap_or(&entry), dir, home) {
            add(hooks);
        }
        if let Some(gitdir) = gitdir {
            add(gitdir);
        }
    }
}

/// The canonical `core.hooksPath` of the repository whose git directory is `gitdir` and
/// whose worktree is `root` (a relative value is relative to the worktree, `~/` to
/// `home`), when its config sets one that exists.
fn hooks_path_of(gitdir: &Path, root: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let config = fs::read_to_string(gitdir.join("config")).ok()?;
    let value = git_config_value(&config, "core", "hookspath")?;
    let value = match value.strip_prefix("~/") {
        Some(rest) => home?.join(rest),
        None => PathBuf::from(value),
    };
    fs::canonicalize(root.join(value)).ok()
}

/// The last value of `section.key` in git config text (names compared case-insensitively;
/// quoting and subsections beyond what hooksPath needs are not handled, and a value that
/// cannot be read this way is simply not protected beyond what `.git` already is).
fn git_config_value(config: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    let mut found = None;
    for line in config.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split([']', ' ', '"']).next().unwrap_or_default();
            in_section = name.eq_ignore_ascii_case(section);
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((name, value)) = line.split_once('=')
            && name.trim().eq_ignore_ascii_case(key)
        {
            let value = value.trim().trim_matches('"');
            if !value.is_empty() {
                found = Some(value.to_owned());
            }
        }
    }
    found
}

/// For a `.git` file of the form `gitdir: X`, the canonical X (relative X is relative to
/// the directory holding the file).
fn gitdir_of_git_file(root: &Path, git_entry: &Path) -> Option<PathBuf> {
    if !fs::metadata(git_entry).ok()?.is_file() {
        return None;
    }
    let contents = fs::read_to_string(git_entry).ok()?;
    let target = contents
        .lines()
        .find_map(|line| line.strip_prefix("gitdir:"))?
        .trim();
    if target.is_empty() {
        return None;
    }
    fs::canonicalize(root.join(target)).ok()
}

/// What one policy lets the agent write on the model's behalf, and how it reaches it: the
/// roots anchored and described once, for a patch or a request that checks several paths.
///
/// The rule by name ([`WriteScope::allows`]) is what the model and the person are told;
/// the [`Target`] a path becomes is how it is then reached, beneath the root's descriptor
/// (see [`crate::beneath`]), so a name changed after the check changes nothing.
#[derive(Debug, Clone)]
pub struct WriteScope {
    reach: Reach,
    roots: Vec<WritableRoot>,
    keep_out: Arc<KeepOut>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// `danger-full-access` (and an external sandbox): everywhere.
    Everywhere,
    /// `read-only`: nowhere.
    Nowhere,
    /// `workspace-write`: beneath the roots, minus what they keep read-only.
    Roots,
}

/// What a [`Target`] is for, which decides what it must stay out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Reading: never inside the agent's home or a credential agent.
    Read,
    /// Writing where the sandbox lets commands write.
    Write,
    /// Writing where a person approved it (outside the roots or into a protected path),
    /// naming [`Target::resolved`]: reached along exactly that path.
    ApprovedWrite,
}

impl WriteScope {
    /// The scope of `policy` for a session working in `cwd` with the command environment
    /// `env`, `protected` (the agent's home first) kept out, roots decided by `anchors`.
    pub fn new(
        anchors: &RootAnchors,
        policy: &SandboxPolicy,
        cwd: &Path,
        env: &HashMap<String, String>,
        protected: &[PathBuf],
    ) -> Self {
        let reach = match policy {
            SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
                Reach::Everywhere
            }
            SandboxPolicy::ReadOnly { .. } => Reach::Nowhere,
            SandboxPolicy::WorkspaceWrite { .. } => Reach::Roots,
        };
        // Without roots of its own (read-only, full access) the workspace is still where
        // files are reached from: a target inside it is opened beneath it.
        let roots = if reach == Reach::Roots {
            writable_roots(anchors, policy, cwd, env, protected)
        } else {
            let workspace_only = SandboxPolicy::WorkspaceWrite {
                writable_roots: Vec::new(),
                network_access: false,
                exclude_tmpdir_env_var: true,
                exclude_slash_tmp: true,
            };
            writable_roots(anchors, &workspace_only, cwd, env, protected)
        };
        let keep_out = if reach == Reach::Everywhere {
            KeepOut::default()
        } else {
            let hidden: Vec<PathBuf> = protected
                .iter()
                .filter_map(|path| resolve_for_write(path))
                .collect();
            let mut unwritable = hidden.clone();
            for root in &roots {
                unwritable.extend(root.read_only_subpaths.iter().cloned());
                // Creating one is as bad as writing one: a new `.git/config` can name a
                // program the next git run executes.
                unwritable.extend(PROTECTED_DIR_NAMES.iter().map(|name| root.root.join(name)));
            }
            KeepOut {
                unreadable: hidden,
                unwritable,
                unwritable_names: if reach == Reach::Roots {
                    PROTECTED_DIR_NAMES.iter().map(Into::into).collect()
                } else {
                    Vec::new()
                },
            }
        };
        Self {
            reach,
            roots,
            keep_out: Arc::new(keep_out),
        }
    }

    /// The roots targets are reached from: the writable roots under `workspace-write`,
    /// the workspace alone otherwise (where it decides nothing about writing).
    pub fn roots(&self) -> &[WritableRoot] {
        &self.roots
    }

    /// Whether a command (or `apply_patch`) may write `path` (relative to `cwd`).
    ///
    /// `path` may be relative, contain `..`, go through symlinks, or not exist yet: it is
    /// resolved the way the kernel would resolve it for a create, so a symlink inside the
    /// workspace that points outside does not make the outside writable.
    pub fn allows(&self, cwd: &Path, path: &Path) -> bool {
        match self.reach {
            Reach::Everywhere => true,
            Reach::Nowhere => false,
            Reach::Roots => resolve_for_write(&cwd.join(path))
                .is_some_and(|resolved| self.allows_resolved(&resolved)),
        }
    }

    /// [`allows`](Self::allows) for a path already resolved.
    pub fn allows_resolved(&self, resolved: &Path) -> bool {
        match self.reach {
            Reach::Everywhere => true,
            Reach::Nowhere => false,
            // Roots overlap (the workspace usually sits under /tmp or $TMPDIR), so a path
            // protected in one root stays protected even when another root contains it.
            Reach::Roots => {
                self.roots.iter().any(|root| {
                    resolved.strip_prefix(&root.root).is_ok_and(|below| {
                        // No `.git`, `.agents` or `.interpreter` anywhere below a root
                        // either: a `gitdir:` file in a new subdirectory starts a
                        // repository there, a new `.agents/skills` is a skill the next
                        // thread loads; writing one takes an approval.
                        !below.components().any(|part| {
                            self.keep_out
                                .unwritable_names
                                .iter()
                                .any(|name| part == Component::Normal(name))
                        })
                    })
                }) && !self
                    .keep_out
                    .unwritable
                    .iter()
                    .any(|kept| resolved.starts_with(kept))
            }
        }
    }

    /// Whether a resolved path lies in what commands can neither read nor write (the
    /// agent's home, a credential agent).
    pub fn is_hidden(&self, resolved: &Path) -> bool {
        self.keep_out
            .unreadable
            .iter()
            .any(|hidden| resolved.starts_with(hidden))
    }

    /// How `path` (relative to `cwd`) is reached for `purpose`, resolved once here (see
    /// [`target_resolved`](Self::target_resolved)). `None` when it cannot be resolved (a
    /// symlink loop) or `purpose` is not allowed there.
    pub fn target(&self, cwd: &Path, path: &Path, purpose: Purpose) -> Option<Target> {
        let path = cwd.join(path);
        let resolved = resolve_for_write(&path)?;
        self.target_resolved(path, resolved, purpose)
    }

    /// Like [`target`](Self::target), but for the entry itself: its directory resolved,
    /// its own name kept, so a symlink there is the target rather than what it points at
    /// (what removing an entry removes).
    pub fn entry_target(&self, cwd: &Path, path: &Path, purpose: Purpose) -> Option<Target> {
        let path = cwd.join(path);
        let name = path.file_name()?;
        let resolved = resolve_for_write(path.parent()?)?.join(name);
        self.target_resolved(path, resolved, purpose)
    }

    /// How `path`, which the caller resolved (and checked) as `resolved`, is reached for
    /// `purpose`. The check is made again here, on this same `resolved` (never on a new
    /// resolution of the name, which a concurrent rename could change): a write the
    /// sandbox allows is reached beneath the innermost root that holds it, and only
    /// there; a read beneath its root too, or along the resolved path outside every root
    /// (never in a hidden path); a write a person approved along the resolved path.
    /// `None` when `purpose` is not allowed at `resolved`.
    pub fn target_resolved(
        &self,
        path: PathBuf,
        resolved: PathBuf,
        purpose: Purpose,
    ) -> Option<Target> {
        let keep_out = match purpose {
            Purpose::Read => {
                if self.is_hidden(&resolved) {
                    return None;
                }
                Arc::new(KeepOut {
                    unreadable: self.keep_out.unreadable.clone(),
                    ..KeepOut::default()
                })
            }
            Purpose::Write => {
                if !self.allows_resolved(&resolved) {
                    return None;
                }
                self.keep_out.clone()
            }
            Purpose::ApprovedWrite => Arc::new(KeepOut::default()),
        };
        let holder = self
            .roots
            .iter()
            .filter(|root| resolved.starts_with(&root.root))
            .max_by_key(|root| root.root.components().count());
        let anchor = match (purpose, holder) {
            (Purpose::ApprovedWrite, _) => Anchor::Resolved,
            (_, Some(root)) => Anchor::Root {
                root: root.anchor.clone(),
                named: root.root.clone(),
                relative: resolved.strip_prefix(&root.root).ok()?.to_path_buf(),
            },
            // Outside every root: a read, or a write under full access.
            (_, None) => Anchor::Resolved,
        };
        Some(Target::new(path, resolved, anchor, keep_out))
    }
}

/// Resolves `..` and symlinks along an absolute path, including a final dangling symlink
/// (writing through it would create its target). Components below the deepest existing
/// directory are appended as they are. `None` on a symlink loop or a relative path.
///
/// Public so that rules built on [`WriteScope`] (the app-server's `fs/*` confinement)
/// resolve paths exactly the way it does.
pub fn resolve_for_write(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components_front(&mut pending, path);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(component) = pending.pop_front() {
        match component.to_str() {
            Some("/") => resolved = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                resolved.pop();
            }
            _ => {
                let candidate = resolved.join(&component);
                match fs::symlink_metadata(&candidate) {
                    Ok(metadata) if metadata.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return None;
                        }
                        let target = fs::read_link(&candidate).ok()?;
                        // A relative target is relative to the link's directory, which is
                        // `resolved` as it stands.
                        push_components_front(&mut pending, &target);
                    }
                    _ => resolved = candidate,
                }
            }
        }
    }
    Some(resolved)
}

fn push_components_front(pending: &mut VecDeque<OsString>, path: &Path) {
    let components: Vec<OsString> = path
        .components()
        .map(|component| match component {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(name) => name.to_os_string(),
        })
        .collect();
    for component in components.into_iter().rev() {
        pending.push_front(component);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    fn workspace_write(extra: Vec<PathBuf>) -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: extra,
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        }
    }

    fn no_env() -> HashMap<String, String> {
        HashMap::new()
    }

    /// The rule by name, as a fresh session would decide it.
    pub(super) fn is_path_writable(
        policy: &SandboxPolicy,
        cwd: &Path,
        env: &HashMap<String, String>,
        protected: &[PathBuf],
        path: &Path,
    ) -> bool {
        WriteScope::new(&RootAnchors::new(), policy, cwd, env, protected).allows(cwd, path)
    }

    #[test]
    fn roots_include_cwd_extra_roots_and_temp_dirs_as_configured() {
        let ws = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let tmpdir = tempfile::tempdir().unwrap();
        let ws_path = fs::canonicalize(ws.path()).unwrap();
        let env = HashMap::from([(
            "TMPDIR".to_owned(),
            tmpdir.path().to_string_lossy().into_owned(),
        )]);

        let policy = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![extra.path().to_path_buf(), extra.path().join("made/now")],
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: false,
        };
        let roots: Vec<PathBuf> =
            writable_roots(&RootAnchors::new(), &policy, ws.path(), &env, &[])
                .into_iter()
                .map(|root| root.root)
                .collect();
        assert_eq!(
            roots,
            vec![
                ws_path.clone(),
                fs::canonicalize(extra.path()).unwrap(),
                fs::canonicalize(extra.path()).unwrap().join("made/now"),
                fs::canonicalize("/tmp").unwrap(),
                fs::canonicalize(tmpdir.path()).unwrap(),
            ]
        );

        let only_cwd: Vec<PathBuf> = writable_roots(
            &RootAnchors::new(),
            &workspace_write(vec![]),
            ws.path(),
            &env,
            &[],
        )
        .into_iter()
        .map(|root| root.root)
        .collect();
        assert_eq!(only_cwd, vec![ws_path]);
        assert!(
            writable_roots(
                &RootAnchors::new(),
                &SandboxPolicy::ReadOnly {
                    network_access: true
                },
                ws.path(),
                &env,
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn protected_subpaths_exist_only_when_present_and_follow_gitdir_files() {
        let ws = tempfile::tempdir().unwrap();
        let real_gitdir = tempfile::tempdir().unwrap();
        fs::create_dir(ws.path().join(".agents")).unwrap();
        fs::write(
            ws.path().join(".git"),
            format!("gitdir: {}\n", real_gitdir.path().display()),
        )
        .unwrap();
        let roots = writable_roots(
            &RootAnchors::new(),
            &workspace_write(vec![]),
            ws.path(),
            &no_env(),
            &[],
        );
        let root = fs::canonicalize(ws.path()).unwrap();
        assert_eq!(
            roots,
            vec![WritableRoot {
                read_only_subpaths: vec![
                    root.join(".git"),
                    fs::canonicalize(real_gitdir.path()).unwrap(),
                    root.join(".agents"),
                ],
                anchor: Arc::new(AnchoredRoot::open(&root).unwrap()),
                root,
            }]
        );
    }

    #[test]
    fn a_hooks_path_inside_the_workspace_is_protected_like_git_hooks() {
        let ws = tempfile::tempdir().unwrap();
        fs::create_dir_all(ws.path().join(".git")).unwrap();
        fs::create_dir_all(ws.path().join(".husky")).unwrap();
        fs::write(
            ws.path().join(".git/config"),
            "[core]\n\tbare = false\n[Core]\n\thooksPath = .husky\n",
        )
        .unwrap();
        let policy = workspace_write(vec![]);
        let writable =
            |path: &str| is_path_writable(&policy, ws.path(), &no_env(), &[], Path::new(path));
        assert!(!writable(".husky/pre-commit"));
        assert!(writable("src/lib.rs"));
        assert_eq!(
            git_config_value(
                "[core]\nhookspath = \"a b\"\n[user]\nhookspath = x\n",
                "core",
                "hooksPath"
            ),
            Some("a b".to_owned())
        );
    }

    #[test]
    fn a_hooks_path_under_home_is_read_from_the_command_environment() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(ws.path().join(".git")).unwrap();
        fs::create_dir_all(home.path().join("hooks")).unwrap();
        fs::write(
            ws.path().join(".git/config"),
            "[core]\n\thooksPath = ~/hooks\n",
        )
        .unwrap();
        let expected = home.path().join("hooks").canonicalize().unwrap();
        let protected = protected_subpaths(ws.path(), Some(home.path()));
        assert!(protected.contains(&expected), "{protected:?}");
        // No HOME in the command's environment: nothing under a home is guessed.
        assert!(!protected_subpaths(ws.path(), None).contains(&expected));
    }

    #[test]
    fn nested_repositories_are_protected_a_few_levels_down() {
        let ws = tempfile::tempdir().unwrap();
        for dir in [
            "libs/one/.git/hooks",
            "a/b/c/.git",
            "a/b/c/d/.git",
            "node_modules/pkg/.git",
            "src",
        ] {
            fs::create_dir_all(ws.path().join(dir)).unwrap();
        }
        let policy = workspace_write(vec![]);
        let writable =
            |path: &str| is_path_writable(&policy, ws.path(), &no_env(), &[], Path::new(path));
        assert!(!writable("libs/one/.git/hooks/pre-commit"));
        assert!(!writable("libs/one/.git/config"));
        assert!(writable("libs/one/README.md"));
        assert!(writable("src/main.rs"));
        assert!(!writable("a/b/c/.git/config"));
        // Past the depth searched, and inside dependency trees, the sandbox's read-only
        // mounts do not reach; a patch still writes no `.git` anywhere.
        let root = fs::canonicalize(ws.path()).unwrap();
        let roots = writable_roots(&RootAnchors::new(), &policy, ws.path(), &no_env(), &[]);
        let read_only: Vec<&PathBuf> = roots
            .iter()
            .flat_map(|root| &root.read_only_subpaths)
            .collect();
        assert!(read_only.contains(&&root.join("a/b/c/.git")));
        assert!(!read_only.contains(&&root.join("a/b/c/d/.git")));
        assert!(!read_only.contains(&&root.join("node_modules/pkg/.git")));
        assert!(!writable("a/b/c/d/.git/config"));
        assert!(!writable("node_modules/pkg/.git/config"));
    }

    #[test]
    fn writability_resolves_dotdot_symlinks_and_missing_paths() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        fs::create_dir(ws.path().join("src")).unwrap();
        symlink(outside.path(), ws.path().join("escape")).unwrap();
        symlink(outside.path().join("new-file"), ws.path().join("dangling")).unwrap();
        symlink(ws.path().join("src"), ws.path().join("src-link")).unwrap();
        symlink(ws.path().join("loop"), ws.path().join("loop")).unwrap();
        let policy = workspace_write(vec![]);
        let writable =
            |path: &str| is_path_writable(&policy, ws.path(), &no_env(), &[], Path::new(path));

        assert!(writable("src/main.rs"));
        assert!(writable("new/dir/file.txt"));
        assert!(writable("src-link/lib.rs"));
        assert!(writable("new/../src/x"));
        assert!(!writable("escape/file"));
        assert!(!writable("dangling"));
        assert!(!writable("loop"));
        assert!(!writable(".git/hooks/pre-commit"));
        assert!(
            !writable(".agents/new/skill.md"),
            "a protected name that does not exist yet"
        );
        assert!(!writable("src/../.git/config"));
        assert!(
            !writable("src/new/.git"),
            "a `gitdir:` file in a new subdirectory would start a repository"
        );
        assert!(!writable("src/new/.git/config"));
        assert!(writable("src/new/.gitignore"));
        assert!(!writable("../outside.txt"));
        assert!(!writable(&outside.path().join("x").to_string_lossy()));

        let anywhere = outside.path().join("x");
        assert!(is_path_writable(
            &SandboxPolicy::DangerFullAccess,
            ws.path(),
            &no_env(),
            &[],
            &anywhere
        ));
        let read_only = SandboxPolicy::ReadOnly {
            network_access: false,
        };
        assert!(!is_path_writable(
            &read_only,
            ws.path(),
            &no_env(),
            &[],
            Path::new("src/main.rs")
        ));
    }

    #[test]
    fn tmpdir_from_env_is_writable_unless_excluded() {
        let ws = tempfile::tempdir().unwrap();
        let tmpdir = tempfile::tempdir().unwrap();
        let env = HashMap::from([(
            "TMPDIR".to_owned(),
            tmpdir.path().to_string_lossy().into_owned(),
        )]);
        let target = tmpdir.path().join("scratch");
        let with_tmpdir = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![],
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: true,
        };
        assert!(is_path_writable(
            &with_tmpdir,
            ws.path(),
            &env,
            &[],
            &target
        ));
        assert!(!is_path_writable(
            &workspace_write(vec![]),
            ws.path(),
            &env,
            &[],
            &target
        ));
    }
}

#[cfg(test)]
mod overlap_tests {
    use super::tests::is_path_writable;
    use super::*;

    #[test]
    fn protected_path_stays_protected_under_an_overlapping_root() {
        let tmp = tempfile::tempdir().unwrap();
        let outer = tmp.path().canonicalize().unwrap();
        let work = outer.join("work");
        std::fs::create_dir_all(work.join(".git")).unwrap();
        let policy = SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![outer.clone()],
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        };
        let env = HashMap::new();
        assert!(is_path_writable(
            &policy,
            &work,
            &env,
            &[],
            &work.join("src/lib.rs")
        ));
        assert!(!is_path_writable(
            &policy,
            &work,
            &env,
            &[],
            &work.join(".git/hooks/pre-commit")
        ));
        assert!(is_path_writable(
            &policy,
            &work,
            &env,
            &[],
            &outer.join("other.txt")
        ));
    }
}

#[cfg(test)]
mod agent_home_tests {
    use super::tests::is_path_writable;
    use super::*;

    fn workspace_write() -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![],
            network_access: false,
            exclude_tmpdir_env_var: true,
            exclude_slash_tmp: true,
        }
    }

    #[test]
    fn agent_home_inside_the_workspace_is_read_only_even_before_it_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        let home = ws.join("state/.interpreter");
        let policy = workspace_write();
        let env = HashMap::new();
        let protected = vec![home.clone()];
        let writable = |path: &Path| is_path_writable(&policy, &ws, &env, &protected, path);
        assert!(!writable(&home.join("config.toml")));
        assert!(!writable(&home));
        assert!(writable(&ws.join("state/other.txt")));
        std::fs::create_dir_all(&home).unwrap();
        assert!(!writable(&home.join("sessions/x.jsonl")));
        assert!(!writable(
            &ws.join("state/../state/.interpreter/config.toml")
        ));
        let roots = writable_roots(&RootAnchors::new(), &policy, &ws, &env, &protected);
        assert!(roots[0].read_only_subpaths.contains(&home));
    }

    #[test]
    fn a_workspace_inside_the_agent_home_is_not_writable() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().canonicalize().unwrap();
        let ws = home.join("worktree");
        std::fs::create_dir_all(&ws).unwrap();
        let policy = workspace_write();
        let env = HashMap::new();
        let protected = vec![home.clone()];
        assert!(writable_roots(&RootAnchors::new(), &policy, &ws, &env, &protected).is_empty());
        assert!(!is_path_writable(
            &policy,
            &ws,
            &env,
            &protected,
            &ws.join("src/lib.rs")
        ));
    }
}
