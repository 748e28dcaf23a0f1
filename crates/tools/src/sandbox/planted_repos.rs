//! Repositories a sandboxed command starts where it may not, and agent configuration
//! (`.agents`, `.interpreter`: skills, project hooks) it creates.
//!
//! A command that can write a directory can make it a git repository: `git init`, a
//! `.git` *file* (`gitdir: /tmp/evil`) naming a git directory it wrote elsewhere, or a
//! directory shaped like a git directory itself (`HEAD`, `refs/`, `objects/`: git takes it
//! for a bare repository). The repository's config then names programs (`core.fsmonitor`,
//! hooks, filters, a pager) that the next git run there executes outside the sandbox: the
//! user's own `git status` in that directory or any directory below it, since git looks
//! for a repository upward from where it runs.
//!
//! A [`RepositoryCensus`] is taken before the command and compared with what is there
//! after it: every repository marker (a `.git` entry of any type, or the `HEAD` of a
//! directory shaped like a git directory) and every `.agents` or `.interpreter` entry
//! that was not there before is removed (a
//! symlink itself, never what it points at). Markers and directories are told apart by
//! identity (device and inode, and a marker's creation time where the file system keeps
//! one), never by path: a repository the command moved is still the one that existed,
//! and one that replaced it is new.
//!
//! What is looked at, for each writable root:
//!
//! * the root itself and every directory between it and the command's directory or
//!   another root inside it, always (so an ancestor of the workspace under a writable
//!   `/tmp` is checked however big `/tmp` is);
//! * below the workspace and the other configured roots, every directory breadth first,
//!   up to [`DIRECTORY_BUDGET`] directories per root; build and dependency trees
//!   (`target`, `node_modules`, `vendor`, `__pycache__`) are listed (a `.git` right in
//!   them counts) but not entered; git directories, and directories shaped like one, are
//!   not entered;
//! * below `/tmp` and `$TMPDIR`, nothing more: other programs create repositories there
//!   all the time, and one they create while a command runs could not be told from the
//!   command's.
//!
//! A marker in a directory the census before did not list (it lay beyond the budget) and
//! that is not new itself is left alone: it may have been there before.

use std::collections::{HashSet, VecDeque};
use std::fs;
use std::io;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::FileIdentity;
use super::paths::{NOT_SEARCHED, WritableRoot};

/// How many directories below a root the census lists (each before and after a
/// command): enough for the source trees people work in (build trees are not entered),
/// bounded so that a huge one costs a command about a tenth of a second, not seconds.
pub const DIRECTORY_BUDGET: usize = 2048;

/// What made a directory a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepositoryMarker {
    /// A `.git` entry: a git directory, a `gitdir:` file or a symlink.
    GitEntry,
    /// The `HEAD` of a directory that holds `HEAD`, `refs/` and `objects/` (or
    /// `commondir`): git uses such a directory as a bare repository.
    GitDirectoryShape,
    /// A `.agents` or `.interpreter` entry: skills and project configuration the agent
    /// loads in a later thread, outside any sandbox decision of this one.
    AgentConfig,
}

impl RepositoryMarker {
    /// Whether the marker starts a git repository (which the policy may allow).
    pub fn is_git(self) -> bool {
        matches!(self, Self::GitEntry | Self::GitDirectoryShape)
    }
}

/// A repository marker the command created, and what became of it.
#[derive(Debug)]
pub struct PlantedRepository {
    /// The marker: the `.git` entry, or the `HEAD` of a directory shaped like a git
    /// directory.
    pub path: PathBuf,
    pub marker: RepositoryMarker,
    /// Whether removing the marker worked.
    pub removed: io::Result<()>,
}

/// The repository markers under the writable roots before a command, to compare with
/// after it ([`RepositoryCensus::remove_new`]).
#[derive(Debug)]
pub struct RepositoryCensus {
    scopes: Vec<Scope>,
    before: Snapshot,
    rules: CensusRules,
}

/// What a census leaves alone.
#[derive(Debug, Clone, Default)]
pub struct CensusRules {
    /// New git markers are left alone (`allow_git_init`); agent configuration never is.
    pub allow_git: bool,
    /// Paths (canonical) never removed: the agent's own home, which the agent itself may
    /// create while a command runs.
    pub spared: Vec<PathBuf>,
}

impl RepositoryCensus {
    /// Lists the markers under `roots` (canonical, as [`super::writable_roots`] gives
    /// them) before a command runs in `cwd`. `temporary` are the shared temporary roots
    /// ([`super::temporary_roots`]), searched only on the way to `workspace` and `cwd`
    /// unless one of them is the workspace itself. Blocking: it reads directories.
    pub fn take(
        roots: &[WritableRoot],
        temporary: &[PathBuf],
        workspace: &Path,
        cwd: &Path,
        rules: CensusRules,
    ) -> Self {
        let workspace = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let cwd = fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let root_paths: Vec<&Path> = roots.iter().map(|root| root.root.as_path()).collect();
        let scopes = root_paths
            .iter()
            .map(|root| Scope::new(root, &root_paths, temporary, &workspace, &cwd))
            .collect::<Vec<_>>();
        let before = Snapshot::of(&walk_all(&scopes));
        Self {
            scopes,
            before,
            rules,
        }
    }

    /// Lists the markers again and removes every one that was not there before, with
    /// what became of each. Blocking: it reads and removes directories.
    pub fn remove_new(&self) -> Vec<PlantedRepository> {
        let after = walk_all(&self.scopes);
        let mut planted = Vec::new();
        for (visited, searched) in after.iter().zip(self.before.searched(&after)) {
            if !searched {
                continue;
            }
            for marker in &visited.markers {
                if (self.rules.allow_git && marker.kind.is_git())
                    || self.rules.spared.contains(&marker.path)
                {
                    continue;
                }
                if !self.before.markers.contains(&marker.id) {
                    planted.push(PlantedRepository {
                        removed: remove_marker(visited.id, marker),
                        path: marker.path.clone(),
                        marker: marker.kind,
                    });
                }
            }
        }
        planted
    }
}

/// Removes `marker` without following it (a directory with everything in it, a symlink
/// inside removed rather than followed; a file or a symlink itself), from the directory
/// the census listed it in: that directory is opened and must be the one with identity
/// `dir` (a command renaming a directory on the way meanwhile cannot turn the removal
/// into one elsewhere), and the marker in it must still be the one found.
fn remove_marker(dir: DirId, marker: &Marker) -> io::Result<()> {
    let moved = || {
        io::Error::other(
            "the directory holding it was renamed or replaced meanwhile; it was not removed",
        )
    };
    let (Some(parent), Some(name)) = (marker.path.parent(), marker.path.file_name()) else {
        return Err(moved());
    };
    let directory = rustix::fs::open(
        parent,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let found = rustix::fs::fstat(&directory)?;
    let found = FileIdentity::from_stat(&found);
    if (found.dev, found.ino) != (dir.dev, dir.ino) {
        return Err(moved());
    }
    let entry = rustix::fs::statat(&directory, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    let entry = FileIdentity::from_stat(&entry);
    if (entry.dev, entry.ino) != (marker.id.dev, marker.id.ino) {
        return Err(moved());
    }
    crate::beneath::remove_entry_in(&directory, name).map_err(io::Error::from)
}

/// What is listed under one writable root.
#[derive(Debug)]
struct Scope {
    root: PathBuf,
    /// Directories below the root always listed, parents first: the way to the
    /// command's directory and to the other roots inside this one.
    chain: Vec<PathBuf>,
    /// Whether the tree below the root is searched (within the budget).
    deep: bool,
    /// Other roots inside this one: listed under their own scope.
    nested_roots: Vec<PathBuf>,
}

impl Scope {
    fn new(
        root: &Path,
        roots: &[&Path],
        temporary: &[PathBuf],
        workspace: &Path,
        cwd: &Path,
    ) -> Self {
        let nested_roots: Vec<PathBuf> = roots
            .iter()
            .filter(|other| other.starts_with(root) && **other != root)
            .map(|other| other.to_path_buf())
            .collect();
        let mut chain: Vec<PathBuf> = Vec::new();
        let mut add_way_to = |target: &Path, inclusive: bool| {
            if !target.starts_with(root) || target == root {
                return;
            }
            let mut dir = if inclusive {
                Some(target)
            } else {
                target.parent()
            };
            while let Some(current) = dir {
                if current == root || !current.starts_with(root) {
                    break;
                }
                if !chain.iter().any(|known| known == current) {
                    chain.push(current.to_path_buf());
                }
                dir = current.parent();
            }
        };
        add_way_to(cwd, true);
        for other in &nested_roots {
            add_way_to(other, false);
        }
        chain.sort_by_key(|dir| dir.components().count());
        let deep = !temporary.iter().any(|temp| temp == root) || root == workspace;
        Self {
            root: root.to_path_buf(),
            chain,
            deep,
            nested_roots,
        }
    }
}

/// Device and inode: what a directory is, whatever its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DirId {
    dev: u64,
    ino: u64,
}

/// Device, inode and creation time (where kept: an inode number reused by a new file
/// then differs) of a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MarkerId {
    dev: u64,
    ino: u64,
    created: Option<SystemTime>,
}

#[derive(Debug)]
struct Marker {
    path: PathBuf,
    id: MarkerId,
    kind: RepositoryMarker,
}

/// One listed directory.
#[derive(Debug)]
struct Visited {
    id: DirId,
    /// For a directory found by the search: the index of the directory it was found in
    /// and its identity as that listing saw it.
    parent: Option<(usize, DirId)>,
    /// Every subdirectory of it (entered or not), by the listing's identity.
    subdir_ids: Vec<DirId>,
    markers: Vec<Marker>,
}

/// The census before a command.
#[derive(Debug, Default)]
struct Snapshot {
    listed: HashSet<DirId>,
    /// Each listed directory's subdirectories, as (directory, subdirectory): one found
    /// after under a listed directory and not among that directory's is new. Keyed by
    /// the pair, not the subdirectory alone: an inode number freed anywhere else (a
    /// directory another program removed from `/tmp` while the command ran) and taken
    /// by a directory the command created would otherwise pass for an old directory
    /// the census never entered, and what the command planted in it would stay.
    subdirs: HashSet<(DirId, DirId)>,
    markers: HashSet<MarkerId>,
}

impl Snapshot {
    fn of(visited: &[Visited]) -> Self {
        let mut snapshot = Self::default();
        for dir in visited {
            snapshot.listed.insert(dir.id);
            snapshot
                .subdirs
                .extend(dir.subdir_ids.iter().map(|child| (dir.id, *child)));
            snapshot
                .markers
                .extend(dir.markers.iter().map(|marker| marker.id));
        }
        snapshot
    }

    /// For each directory of the census `after` (in its order, parents first), whether
    /// its markers are to be compared with these: it was listed before, or it is new (a
    /// search root not listed before, or found under a new directory, or under a listed
    /// one that did not have it). A directory neither new nor listed before lay beyond
    /// the census: what is in it may have been there all along.
    fn searched(&self, after: &[Visited]) -> Vec<bool> {
        let mut new_dirs: Vec<bool> = Vec::with_capacity(after.len());
        let mut searched = Vec::with_capacity(after.len());
        for visited in after {
            let listed_before = self.listed.contains(&visited.id);
            let new = match visited.parent {
                None => !listed_before,
                Some((parent, child_id)) => {
                    let parent_new = new_dirs.get(parent).copied().unwrap_or(false);
                    let parent_had_it = after.get(parent).map(|parent| {
                        (
                            self.listed.contains(&parent.id),
                            self.subdirs.contains(&(parent.id, child_id)),
                        )
                    });
                    parent_new || matches!(parent_had_it, Some((true, false)))
                }
            };
            new_dirs.push(new);
            searched.push(new || listed_before);
        }
        searched
    }
}

fn walk_all(scopes: &[Scope]) -> Vec<Visited> {
    let mut visited = Vec::new();
    for scope in scopes {
        walk(scope, &mut visited);
    }
    visited
}

/// Lists `scope` into `visited`: the root and its chain, then (for a deep scope) the
/// tree breadth first within the budget. A build or dependency tree is listed (a `.git`
/// right in it counts) but not entered: it is large, and nobody runs git inside it.
fn walk(scope: &Scope, visited: &mut Vec<Visited>) {
    let mut listed_paths: HashSet<PathBuf> = HashSet::new();
    let mut pending: VecDeque<(PathBuf, usize, DirId)> = VecDeque::new();
    for dir in std::iter::once(&scope.root).chain(&scope.chain) {
        if let Some((listing, subdirs)) = list(dir, None) {
            listed_paths.insert(dir.clone());
            let index = visited.len();
            visited.push(listing);
            if scope.deep {
                pending.extend(subdirs.into_iter().map(|(path, id)| (path, index, id)));
            }
        }
    }
    if !scope.deep {
        return;
    }
    let mut budget = DIRECTORY_BUDGET;
    while budget > 0 {
        let Some((dir, parent, child_id)) = pending.pop_front() else {
            break;
        };
        if listed_paths.contains(&dir) || scope.nested_roots.contains(&dir) {
            continue;
        }
        budget -= 1;
        let Some((listing, subdirs)) = list(&dir, Some((parent, child_id))) else {
            continue;
        };
        let enter = !dir
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| NOT_SEARCHED.contains(&name));
        listed_paths.insert(dir);
        let index = visited.len();
        visited.push(listing);
        if enter {
            pending.extend(subdirs.into_iter().map(|(path, id)| (path, index, id)));
        }
    }
}

/// Reads `dir` (not through a symlink): its markers, and the subdirectories to search
/// (none when it is shaped like a git directory).
fn list(dir: &Path, parent: Option<(usize, DirId)>) -> Option<(Visited, Vec<(PathBuf, DirId)>)> {
    let metadata = fs::symlink_metadata(dir).ok()?;
    if !metadata.is_dir() {
        return None;
    }
    let id = DirId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    };
    let mut markers = Vec::new();
    let mut subdirs = Vec::new();
    let (mut head, mut refs, mut objects, mut commondir) = (false, false, false, false);
    for entry in fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let is_dir = file_type.is_dir();
        match name.to_str() {
            Some(".git") => {
                if let Some(marker) = marker_at(entry.path(), RepositoryMarker::GitEntry) {
                    markers.push(marker);
                }
                continue;
            }
            Some(".agents" | ".interpreter") => {
                if let Some(marker) = marker_at(entry.path(), RepositoryMarker::AgentConfig) {
                    markers.push(marker);
                }
                continue;
            }
            Some("HEAD") => head = !is_dir,
            Some("refs") => refs = is_dir,
            Some("objects") => objects = is_dir,
            Some("commondir") => commondir = !is_dir,
            _ => {}
        }
        if is_dir {
            subdirs.push((
                entry.path(),
                DirId {
                    dev: id.dev,
                    ino: entry.ino(),
                },
            ));
        }
    }
    let subdir_ids = subdirs.iter().map(|(_, id)| *id).collect();
    if head && refs && (objects || commondir) {
        if let Some(marker) = marker_at(dir.join("HEAD"), RepositoryMarker::GitDirectoryShape) {
            markers.push(marker);
        }
        // A git directory's insides are not searched.
        subdirs.clear();
    }
    Some((
        Visited {
            id,
            parent,
            subdir_ids,
            markers,
        },
        subdirs,
    ))
}

fn marker_at(path: PathBuf, kind: RepositoryMarker) -> Option<Marker> {
    let metadata = fs::symlink_metadata(&path).ok()?;
    Some(Marker {
        id: MarkerId {
            dev: metadata.dev(),
            ino: metadata.ino(),
            created: metadata.created().ok(),
        },
        path,
        kind,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    fn root(path: &Path) -> WritableRoot {
        WritableRoot {
            root: fs::canonicalize(path).expect("canonical"),
            read_only_subpaths: Vec::new(),
            anchor: std::sync::Arc::new(super::super::AnchoredRoot::open(path).expect("open")),
        }
    }

    fn paths(planted: &[PlantedRepository]) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = planted.iter().map(|p| p.path.clone()).collect();
        paths.sort();
        paths
    }

    #[test]
    fn new_markers_anywhere_below_are_removed_and_old_ones_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = fs::canonicalize(dir.path()).expect("canonical");
        fs::create_dir_all(ws.join("old/.git")).expect("old repo");
        fs::create_dir_all(ws.join("a/b/c")).expect("tree");
        fs::create_dir_all(ws.join("shaped")).expect("shaped");
        let census = RepositoryCensus::take(&[root(&ws)], &[], &ws, &ws, CensusRules::default());

        fs::create_dir_all(ws.join("a/b/c/.git/hooks")).expect("deep repo");
        fs::create_dir_all(ws.join("new/dir")).expect("new dir");
        fs::write(ws.join("new/dir/.git"), "gitdir: /tmp/evil\n").expect("git file");
        std::os::unix::fs::symlink("/nonexistent", ws.join("a/.git")).expect("symlink");
        for part in ["refs", "objects"] {
            fs::create_dir_all(ws.join("shaped").join(part)).expect("bare part");
        }
        fs::write(ws.join("shaped/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        // An old repository moved by the command is still the old one.
        fs::rename(ws.join("old"), ws.join("moved")).expect("move");

        let planted = census.remove_new();
        assert_eq!(
            paths(&planted),
            vec![
                ws.join("a/.git"),
                ws.join("a/b/c/.git"),
                ws.join("new/dir/.git"),
                ws.join("shaped/HEAD"),
            ]
        );
        assert!(planted.iter().all(|p| p.removed.is_ok()));
        for gone in ["a/.git", "shaped/HEAD", "a/b/c/.git", "new/dir/.git"] {
            assert!(
                fs::symlink_metadata(ws.join(gone)).is_err(),
                "{gone} stayed"
            );
        }
        assert!(ws.join("moved/.git").is_dir());
        assert!(ws.join("shaped/refs").is_dir(), "only HEAD goes");
    }

    #[test]
    fn a_temporary_root_is_checked_only_on_the_way_to_the_workspace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let temp = fs::canonicalize(dir.path()).expect("canonical");
        let ws = temp.join("a/ws");
        fs::create_dir_all(&ws).expect("ws");
        fs::create_dir_all(temp.join("elsewhere")).expect("elsewhere");
        let roots = [root(&temp), root(&ws)];
        let census = RepositoryCensus::take(
            &roots,
            std::slice::from_ref(&temp),
            &ws,
            &ws,
            CensusRules::default(),
        );

        fs::create_dir_all(temp.join("a/.git")).expect("ancestor repo");
        fs::create_dir_all(temp.join(".git")).expect("top repo");
        fs::create_dir_all(temp.join("elsewhere/.git")).expect("someone else's");

        let planted = census.remove_new();
        assert_eq!(
            paths(&planted),
            vec![temp.join(".git"), temp.join("a/.git")]
        );
        assert!(temp.join("elsewhere/.git").is_dir());
    }

    fn visited(id: u64, parent: Option<(usize, u64)>, subdirs: &[u64]) -> Visited {
        let dir = |ino| DirId { dev: 1, ino };
        Visited {
            id: dir(id),
            parent: parent.map(|(index, child)| (index, dir(child))),
            subdir_ids: subdirs.iter().copied().map(dir).collect(),
            markers: Vec::new(),
        }
    }

    /// Found by CI: a directory the command created under the workspace took the inode
    /// number of a directory another test had just removed from `/tmp` (a temporary
    /// root, listed but not searched), and what the command planted in it stayed.
    #[test]
    fn ci_found_a_new_directory_on_a_freed_inode_of_another_root_is_new() {
        // Before: `/tmp` (10) holding directory 42, the workspace (20) empty.
        let before = Snapshot::of(&[visited(10, None, &[42]), visited(20, None, &[])]);
        // After: 42 is gone from `/tmp`; the command made 42 (sub) in the workspace and
        // 43 (sub/new) in it.
        let after = [
            visited(10, None, &[]),
            visited(20, None, &[42]),
            visited(42, Some((1, 42)), &[43]),
            visited(43, Some((2, 43)), &[]),
        ];
        assert_eq!(before.searched(&after), vec![true, true, true, true]);
        // An old directory the census never entered stays unsearched.
        let before = Snapshot::of(&[visited(20, None, &[42])]);
        let after = [visited(20, None, &[42]), visited(42, Some((0, 42)), &[])];
        assert_eq!(before.searched(&after), vec![true, false]);
    }

    #[test]
    fn a_replaced_marker_is_new() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = fs::canonicalize(dir.path()).expect("canonical");
        fs::create_dir_all(ws.join("sub")).expect("sub");
        fs::write(ws.join("sub/.git"), "gitdir: ../real\n").expect("git file");
        let census = RepositoryCensus::take(&[root(&ws)], &[], &ws, &ws, CensusRules::default());
        fs::remove_file(ws.join("sub/.git")).expect("remove");
        // Keep the old inode busy so the new file cannot reuse it.
        fs::write(ws.join("keep"), "x").expect("keep");
        fs::write(ws.join("sub/.git"), "gitdir: /tmp/evil\n").expect("new git file");
        let planted = census.remove_new();
        assert_eq!(paths(&planted), vec![ws.join("sub/.git")]);
    }
}
