//! The `apply_patch` edit format: parsing, previewing ([`Patch::changes`]) and applying.
//!
//! Applying is two-phase: every hunk is resolved against the current file contents in
//! memory first, and only when all of them succeed is anything written. A patch whose
//! third hunk does not match therefore leaves the tree exactly as it was, and the error
//! tells the model which file and which line to fix.

mod files;
mod parser;
mod seek;
mod turn_diff;

use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};

use interpreter_protocol::{FileChange, FileChanges};

pub use files::{MAX_FILE_BYTES, read_text, remove, write_text};

use crate::beneath::Target;
use crate::sandbox::{Purpose, WriteScope};
pub use parser::parse_patch;
pub use turn_diff::TurnDiff;

/// A parsed patch: file operations in the order they appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub hunks: Vec<Hunk>,
}

/// One file operation. Paths are as written in the patch (relative to the cwd, or
/// absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    Add {
        path: PathBuf,
        /// Full new contents, newline-terminated.
        contents: String,
    },
    Delete {
        path: PathBuf,
    },
    Update {
        path: PathBuf,
        move_path: Option<PathBuf>,
        chunks: Vec<UpdateChunk>,
    },
}

/// One `@@` section of an update: seek past `context`, then replace `old_lines` with
/// `new_lines`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UpdateChunk {
    /// `@@ <line>` anchors, each sought in order before the old lines.
    pub context: Vec<String>,
    pub old_lines: Vec<String>,
    pub new_lines: Vec<String>,
    /// Set by `*** End of File`: the old lines are expected at the end of the file.
    pub is_end_of_file: bool,
}

impl UpdateChunk {
    fn has_changes(&self) -> bool {
        !self.old_lines.is_empty() || !self.new_lines.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("Invalid patch (line {line}): {message}")]
    Parse { line: usize, message: String },
    /// The patch does not fit the current file contents; `message` is written for the
    /// model to act on.
    #[error("{message}")]
    Mismatch { path: PathBuf, message: String },
    #[error("Failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What [`apply_patch`] did, with paths as written in the patch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplyReport {
    pub added: Vec<PathBuf>,
    pub modified: Vec<PathBuf>,
    pub deleted: Vec<PathBuf>,
}

impl ApplyReport {
    /// The text returned to the model on success.
    pub fn summary(&self) -> String {
        let mut text = String::from("Success. Updated the following files:");
        for (letter, paths) in [
            ('A', &self.added),
            ('M', &self.modified),
            ('D', &self.deleted),
        ] {
            for path in paths {
                text.push_str(&format!("\n{letter} {}", path.display()));
            }
        }
        text
    }
}

impl Patch {
    /// Every path the patch would touch (sources and move destinations), absolute and
    /// lexically normalised so `..` cannot hide an escape from a writable root. Symlinks
    /// are not resolved.
    pub fn affected_paths(&self, cwd: &Path) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for hunk in &self.hunks {
            match hunk {
                Hunk::Add { path, .. } | Hunk::Delete { path } => paths.push(resolve(cwd, path)),
                Hunk::Update {
                    path, move_path, ..
                } => {
                    paths.push(resolve(cwd, path));
                    if let Some(dest) = move_path {
                        paths.push(resolve(cwd, dest));
                    }
                }
            }
        }
        paths
    }

    /// Absolute paths of the existing files the patch reads (those it updates, moves or
    /// deletes), in patch order, each once. Their contents go into [`Patch::plan`].
    pub fn sources(&self, cwd: &Path) -> Vec<PathBuf> {
        let mut sources = Vec::new();
        for hunk in &self.hunks {
            if let Hunk::Update { path, .. } | Hunk::Delete { path } = hunk {
                let absolute = resolve(cwd, path);
                if !sources.contains(&absolute) {
                    sources.push(absolute);
                }
            }
        }
        sources
    }

    /// Resolves every hunk against `sources` (the contents of [`Patch::sources`], read
    /// wherever the caller keeps the files), entirely in memory: nothing is written.
    pub fn plan(&self, cwd: &Path, sources: &Sources) -> Result<PatchPlan, PatchError> {
        plan(self, cwd, sources).map(|planned| PatchPlan { planned })
    }

    /// Previews the patch against the files on disk, read as `scope` reads them, without
    /// writing anything.
    pub fn changes(&self, cwd: &Path, scope: &WriteScope) -> Result<FileChanges, PatchError> {
        let sources = read_sources_locally(&self.sources(cwd), cwd, scope);
        Ok(self.plan(cwd, &sources)?.changes())
    }
}

/// The contents of a patch's source files by absolute path, or why one could not be read.
pub type Sources = HashMap<PathBuf, io::Result<String>>;

/// Reads `paths` from the local disk as `scope` reads them ([`read_text`]).
fn read_sources_locally(paths: &[PathBuf], cwd: &Path, scope: &WriteScope) -> Sources {
    paths
        .iter()
        .map(|path| {
            let read = scope
                .target(cwd, path, Purpose::Read)
                .ok_or_else(unresolvable)
                .and_then(|target| read_text(&target));
            (path.clone(), read)
        })
        .collect()
}

fn unresolvable() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "it cannot be resolved (a symlink loop)",
    )
}

/// A patch resolved against its files' contents: what it changes and the writes that
/// make it so.
#[derive(Debug)]
pub struct PatchPlan {
    planned: Vec<Planned>,
}

impl PatchPlan {
    /// The changes by absolute path: full contents for added and deleted files, a
    /// unified diff for updated ones.
    pub fn changes(&self) -> FileChanges {
        let mut changes = FileChanges::new();
        for planned in &self.planned {
            let change = match &planned.kind {
                PlannedKind::Add { new } => FileChange::Add {
                    content: new.clone(),
                },
                PlannedKind::Delete { old } => FileChange::Delete {
                    content: old.clone(),
                },
                PlannedKind::Update { old, new, move_to } => FileChange::Update {
                    unified_diff: unified_diff(old, new, &planned.path),
                    move_path: move_to.as_ref().map(|(_, absolute)| absolute.clone()),
                },
            };
            changes.insert(planned.absolute.clone(), change);
        }
        changes
    }

    /// The file operations that apply the patch, in order.
    pub fn edits(&self) -> Vec<FileEdit> {
        let mut edits = Vec::new();
        for planned in &self.planned {
            let edit = |absolute: &Path, shown: &Path, action| FileEdit {
                absolute: absolute.to_path_buf(),
                shown: shown.to_path_buf(),
                action,
            };
            match &planned.kind {
                PlannedKind::Add { new } => edits.push(edit(
                    &planned.absolute,
                    &planned.path,
                    EditAction::Write(new.clone()),
                )),
                PlannedKind::Delete { .. } => {
                    edits.push(edit(&planned.absolute, &planned.path, EditAction::Delete));
                }
                PlannedKind::Update { new, move_to, .. } => match move_to {
                    Some((dest, dest_absolute)) => {
                        edits.push(edit(dest_absolute, dest, EditAction::Write(new.clone())));
                        if *dest_absolute != planned.absolute {
                            edits.push(edit(
                                &planned.absolute,
                                &planned.path,
                                EditAction::RemoveMoved,
                            ));
                        }
                    }
                    None => edits.push(edit(
                        &planned.absolute,
                        &planned.path,
                        EditAction::Write(new.clone()),
                    )),
                },
            }
        }
        edits
    }

    /// What applying the plan reports, with paths as written in the patch.
    pub fn report(&self) -> ApplyReport {
        let mut report = ApplyReport::default();
        for planned in &self.planned {
            match &planned.kind {
                PlannedKind::Add { .. } => report.added.push(planned.path.clone()),
                PlannedKind::Delete { .. } => report.deleted.push(planned.path.clone()),
                PlannedKind::Update { move_to, .. } => report.modified.push(
                    move_to
                        .as_ref()
                        .map_or_else(|| planned.path.clone(), |(dest, _)| dest.clone()),
                ),
            }
        }
        report
    }
}

/// One file operation of a [`PatchPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    pub absolute: PathBuf,
    /// As written in the patch, for messages.
    pub shown: PathBuf,
    pub action: EditAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditAction {
    /// Create or replace the file with these contents.
    Write(String),
    /// Delete the file (a `*** Delete File` hunk).
    Delete,
    /// Delete the source of a move, after its destination was written.
    RemoveMoved,
}

impl FileEdit {
    /// Performs the edit on the local disk at `target` (this edit's path as the session's
    /// scope reaches it). Writes create missing parent directories and only ever replace
    /// regular files; removals remove the name.
    pub fn apply_to(&self, target: &Target) -> Result<(), PatchError> {
        match &self.action {
            EditAction::Write(contents) => write_text(target, contents),
            EditAction::Delete | EditAction::RemoveMoved => remove(target),
        }
        .map_err(|source| self.failed(source))
    }

    /// The error for this edit failing with `source`, naming the path as the patch did.
    pub fn failed(&self, source: io::Error) -> PatchError {
        PatchError::Io {
            action: match self.action {
                EditAction::Write(_) => "write",
                EditAction::Delete => "delete",
                EditAction::RemoveMoved => "remove moved file",
            },
            path: self.shown.clone(),
            source,
        }
    }
}

/// Applies `patch` relative to `cwd` on the local disk, where `scope` lets commands write.
/// Nothing is written unless every hunk resolves and every path may be written.
pub fn apply_patch(
    patch: &Patch,
    cwd: &Path,
    scope: &WriteScope,
) -> Result<ApplyReport, PatchError> {
    let sources = read_sources_locally(&patch.sources(cwd), cwd, scope);
    let plan = patch.plan(cwd, &sources)?;
    let edits = plan.edits();
    let mut targets = Vec::with_capacity(edits.len());
    for edit in &edits {
        let target = scope
            .target(cwd, &edit.absolute, Purpose::Write)
            .filter(|target| scope.allows_resolved(&target.resolved))
            .ok_or_else(|| {
                edit.failed(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "it lies outside the sandbox's writable roots or is protected",
                ))
            })?;
        targets.push(target);
    }
    for (edit, target) in edits.iter().zip(&targets) {
        edit.apply_to(target)?;
    }
    Ok(plan.report())
}

/// Recognises a shell invocation of `apply_patch` and returns the patch text, so a model
/// that runs the patch through its shell tool gets the native edit path. Accepted forms:
/// `["apply_patch", "<patch>"]` and `["bash", "-lc", "apply_patch <<'EOF'\n…\nEOF"]`
/// (also `sh -c`, `zsh -lc`).
pub fn extract_patch_from_shell(argv: &[String]) -> Option<String> {
    match argv {
        [program, patch] if is_apply_patch_program(program) => {
            let patch = parser::strip_heredoc(patch.trim());
            patch.contains("*** Begin Patch").then(|| patch.to_string())
        }
        [shell, flag, script]
            if crate::safety::is_shell_program(shell) && (flag == "-lc" || flag == "-c") =>
        {
            heredoc_patch(script)
        }
        _ => None,
    }
}

fn is_apply_patch_program(word: &str) -> bool {
    word == "apply_patch" || word == "applypatch"
}

/// The body of `apply_patch <<'DELIM'\n…\nDELIM` when that is the whole script.
fn heredoc_patch(script: &str) -> Option<String> {
    let script = script.trim();
    let (opener, rest) = script.split_once('\n')?;
    let opener = opener.trim();
    let program = opener.split_whitespace().next()?;
    if !is_apply_patch_program(program) || !opener[program.len()..].trim_start().starts_with("<<") {
        return None;
    }
    let delimiter = parser::heredoc_delimiter(opener)?;
    let (body, closer) = match rest.rsplit_once('\n') {
        Some((body, closer)) => (body, closer),
        None => ("", rest),
    };
    if closer.trim() != delimiter || !body.contains("*** Begin Patch") {
        return None;
    }
    Some(body.to_string())
}

#[derive(Debug)]
struct Planned {
    /// As written in the patch, for messages and the report.
    path: PathBuf,
    absolute: PathBuf,
    kind: PlannedKind,
}

#[derive(Debug)]
enum PlannedKind {
    Add {
        new: String,
    },
    Delete {
        old: String,
    },
    Update {
        old: String,
        new: String,
        move_to: Option<(PathBuf, PathBuf)>,
    },
}

/// Resolves every hunk against the files as they will be when earlier hunks have run,
/// entirely in memory.
fn plan(patch: &Patch, cwd: &Path, sources: &Sources) -> Result<Vec<Planned>, PatchError> {
    // Contents after earlier hunks; `None` means deleted (or moved away) by the patch.
    let mut overlay: HashMap<PathBuf, Option<String>> = HashMap::new();
    let mut planned = Vec::with_capacity(patch.hunks.len());
    for hunk in &patch.hunks {
        match hunk {
            Hunk::Add { path, contents } => {
                let absolute = resolve(cwd, path);
                overlay.insert(absolute.clone(), Some(contents.clone()));
                planned.push(Planned {
                    path: path.clone(),
                    absolute,
                    kind: PlannedKind::Add {
                        new: contents.clone(),
                    },
                });
            }
            Hunk::Delete { path } => {
                let absolute = resolve(cwd, path);
                let old =
                    current_contents(&overlay, sources, &absolute, path, "read file to delete")?;
                overlay.insert(absolute.clone(), None);
                planned.push(Planned {
                    path: path.clone(),
                    absolute,
                    kind: PlannedKind::Delete { old },
                });
            }
            Hunk::Update {
                path,
                move_path,
                chunks,
            } => {
                let absolute = resolve(cwd, path);
                let old =
                    current_contents(&overlay, sources, &absolute, path, "read file to update")?;
                let new = apply_chunks(&old, chunks, path)?;
                let move_to = move_path
                    .as_ref()
                    .map(|dest| (dest.clone(), resolve(cwd, dest)));
                match &move_to {
                    Some((_, dest_absolute)) => {
                        overlay.insert(absolute.clone(), None);
                        overlay.insert(dest_absolute.clone(), Some(new.clone()));
                    }
                    None => {
                        overlay.insert(absolute.clone(), Some(new.clone()));
                    }
                }
                planned.push(Planned {
                    path: path.clone(),
                    absolute,
                    kind: PlannedKind::Update { old, new, move_to },
                });
            }
        }
    }
    Ok(planned)
}

fn current_contents(
    overlay: &HashMap<PathBuf, Option<String>>,
    sources: &Sources,
    absolute: &Path,
    shown: &Path,
    action: &'static str,
) -> Result<String, PatchError> {
    match overlay.get(absolute) {
        Some(Some(contents)) => Ok(contents.clone()),
        Some(None) => Err(PatchError::Io {
            action,
            path: shown.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::NotFound,
                "an earlier hunk of this patch removed it",
            ),
        }),
        None => match sources.get(absolute) {
            Some(Ok(contents)) => Ok(contents.clone()),
            Some(Err(err)) => Err(PatchError::Io {
                action,
                path: shown.to_path_buf(),
                source: io::Error::new(err.kind(), err.to_string()),
            }),
            // A caller that did not read what `Patch::sources` named.
            None => Err(PatchError::Io {
                action,
                path: shown.to_path_buf(),
                source: io::Error::new(io::ErrorKind::NotFound, "its contents were not read"),
            }),
        },
    }
}

/// Applies update chunks to `original`, preserving its line-ending style and always
/// ending with a newline.
fn apply_chunks(original: &str, chunks: &[UpdateChunk], path: &Path) -> Result<String, PatchError> {
    let uses_crlf = original.contains("\r\n");
    let mut lines: Vec<String> = original
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line).to_string())
        .collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }

    let mut replacements: Vec<(usize, usize, &[String])> = Vec::new();
    let mut cursor = 0;
    for chunk in chunks {
        for context in &chunk.context {
            let found = seek::seek_sequence(&lines, std::slice::from_ref(context), cursor, false)
                .ok_or_else(|| PatchError::Mismatch {
                path: path.to_path_buf(),
                message: format!(
                    "Failed to find context '@@ {context}' in {}",
                    path.display()
                ),
            })?;
            cursor = found + 1;
        }

        if chunk.old_lines.is_empty() {
            // Pure insertion: right after the anchor if one was given, else at the end.
            let at = if chunk.context.is_empty() {
                lines.len()
            } else {
                cursor
            };
            replacements.push((at, 0, chunk.new_lines.as_slice()));
            continue;
        }

        let mut old: &[String] = &chunk.old_lines;
        let mut new: &[String] = &chunk.new_lines;
        let mut found = seek::seek_sequence(&lines, old, cursor, chunk.is_end_of_file);
        // A trailing blank line in the patch often stands for the file's final newline.
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek::seek_sequence(&lines, old, cursor, chunk.is_end_of_file);
        }
        let Some(at) = found else {
            return Err(mismatch(path, &lines, &chunk.old_lines));
        };
        replacements.push((at, old.len(), new));
        cursor = at + old.len();
    }

    // Later positions first so earlier indices stay valid.
    replacements.sort_by_key(|(at, _, _)| *at);
    for (at, removed, inserted) in replacements.into_iter().rev() {
        lines.splice(at..at + removed, inserted.iter().cloned());
    }

    if lines.is_empty() {
        return Ok(String::new());
    }
    let newline = if uses_crlf { "\r\n" } else { "\n" };
    let mut text = lines.join(newline);
    text.push_str(newline);
    Ok(text)
}

fn mismatch(path: &Path, lines: &[String], expected: &[String]) -> PatchError {
    let mut message = format!(
        "Failed to find expected lines in {}:\n{}",
        path.display(),
        expected.join("\n")
    );
    if let Some(missing) = expected
        .iter()
        .find(|line| !line.trim().is_empty() && !seek::line_exists(lines, line))
    {
        message.push_str(&format!(
            "\nThe line '{missing}' does not appear in the file; re-read the file and \
             copy the old lines exactly."
        ));
    } else {
        message.push_str(
            "\nEach line exists, but not consecutively in this order after the previous \
             change; re-read the file and copy the old lines exactly.",
        );
    }
    PatchError::Mismatch {
        path: path.to_path_buf(),
        message,
    }
}

fn unified_diff(old: &str, new: &str, path: &Path) -> String {
    let shown = path.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&shown, &shown)
        .to_string()
}

/// The new text of a file from its old text and the unified diff [`Patch::changes`] made
/// of the two: what front ends show as a change's "after" side. `None` when the diff does
/// not fit `old` (the file changed since).
pub fn apply_unified_diff(old: &str, diff: &str) -> Option<String> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let matches = |index: usize, wanted: &str| {
        old_lines
            .get(index)
            .is_some_and(|have| have.strip_suffix('\n').unwrap_or(have) == wanted)
    };
    let mut new = String::with_capacity(old.len());
    let mut next_old = 0;
    let mut in_hunk = false;
    let mut previous_added = false;
    for line in diff.split_inclusive('\n') {
        let text = line.strip_suffix('\n').unwrap_or(line);
        if let Some(header) = text.strip_prefix("@@ -") {
            let range = header.split(' ').next()?;
            let (start, count) = match range.split_once(',') {
                Some((start, count)) => {
                    (start.parse::<usize>().ok()?, count.parse::<usize>().ok()?)
                }
                None => (range.parse::<usize>().ok()?, 1),
            };
            // An empty old range names the line after which the hunk goes.
            let first = if count == 0 {
                start
            } else {
                start.checked_sub(1)?
            };
            if first < next_old || first > old_lines.len() {
                return None;
            }
            old_lines[next_old..first]
                .iter()
                .for_each(|l| new.push_str(l));
            next_old = first;
            in_hunk = true;
            previous_added = false;
            continue;
        }
        if !in_hunk {
            // The `---`/`+++` header.
            continue;
        }
        match text.split_at_checked(1) {
            Some((" ", body)) => {
                if !matches(next_old, body) {
                    return None;
                }
                new.push_str(old_lines[next_old]);
                next_old += 1;
                previous_added = false;
            }
            Some(("-", body)) => {
                if !matches(next_old, body) {
                    return None;
                }
                next_old += 1;
                previous_added = false;
            }
            Some(("+", _)) => {
                new.push_str(&line[1..]);
                previous_added = true;
            }
            // `\ No newline at end of file`: the line before it has none. Old lines carry
            // their own ending already; only an added line needs its newline taken off.
            Some(("\\", _)) => {
                if previous_added && new.ends_with('\n') {
                    new.pop();
                }
            }
            _ => return None,
        }
    }
    old_lines[next_old..].iter().for_each(|l| new.push_str(l));
    Some(new)
}

/// Joins `path` onto `cwd` and folds `.`/`..` lexically.
fn resolve(cwd: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let mut normalized = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normalized.pop();
            }
            other => normalized.push(other.as_os_str()),
        }
    }
    normalized
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_applies_back_to_the_new_text() {
        let cases = [
            ("a\nb\nc\n", "a\nB\nc\nd\n"),
            ("one\ntwo", "one\ntwo\nthree"),
            ("x\n", "y"),
            ("", "fresh\n"),
            (
                "keep\n".repeat(20).as_str(),
                format!("first\n{}", "keep\n".repeat(20)).as_str(),
            ),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        for (old, new) in cases {
            let diff = unified_diff(&old, &new, Path::new("f"));
            assert_eq!(
                apply_unified_diff(&old, &diff).as_deref(),
                Some(new.as_str()),
                "{diff}"
            );
        }
    }

    #[test]
    fn unified_diff_refuses_a_file_that_changed_since() {
        let diff = unified_diff("a\nb\n", "a\nc\n", Path::new("f"));
        assert_eq!(apply_unified_diff("a\nz\n", &diff), None);
    }
    use pretty_assertions::assert_eq;

    fn chunk(context: &[&str], old: &[&str], new: &[&str], eof: bool) -> UpdateChunk {
        UpdateChunk {
            context: context.iter().map(|s| s.to_string()).collect(),
            old_lines: old.iter().map(|s| s.to_string()).collect(),
            new_lines: new.iter().map(|s| s.to_string()).collect(),
            is_end_of_file: eof,
        }
    }

    fn apply(original: &str, chunks: &[UpdateChunk]) -> Result<String, PatchError> {
        apply_chunks(original, chunks, Path::new("f.txt"))
    }

    #[test]
    fn replaces_after_context_anchor() {
        let original = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let result = apply(
            original,
            &[chunk(&["fn b() {"], &["    x"], &["    y"], false)],
        );
        assert_eq!(
            result.ok().as_deref(),
            Some("fn a() {\n    x\n}\nfn b() {\n    y\n}\n")
        );
    }

    #[test]
    fn end_of_file_prefers_the_last_occurrence() {
        let result = apply(
            "x\nend\nx\nend\n",
            &[chunk(&[], &["x", "end"], &["x", "END"], true)],
        );
        assert_eq!(result.ok().as_deref(), Some("x\nend\nx\nEND\n"));
    }

    #[test]
    fn pure_insertion_goes_after_anchor_or_at_end() {
        assert_eq!(
            apply("a\nb\n", &[chunk(&["a"], &[], &["inserted"], false)])
                .ok()
                .as_deref(),
            Some("a\ninserted\nb\n")
        );
        assert_eq!(
            apply("a\nb", &[chunk(&[], &[], &["c"], false)])
                .ok()
                .as_deref(),
            Some("a\nb\nc\n")
        );
    }

    #[test]
    fn keeps_crlf_line_endings() {
        let result = apply("a\r\nb\r\n", &[chunk(&[], &["b"], &["c"], false)]);
        assert_eq!(result.ok().as_deref(), Some("a\r\nc\r\n"));
    }

    #[test]
    fn mismatch_names_file_and_line() {
        let Err(error) = apply("a\nb\n", &[chunk(&[], &["a", "zzz"], &["q"], false)]) else {
            panic!("should not match");
        };
        let message = error.to_string();
        assert!(message.starts_with("Failed to find expected lines in f.txt:\na\nzzz"));
        assert!(
            message.contains("The line 'zzz' does not appear"),
            "{message}"
        );

        let Err(error) = apply("a\n", &[chunk(&["fn nope"], &["a"], &["b"], false)]) else {
            panic!("should not match");
        };
        assert_eq!(
            error.to_string(),
            "Failed to find context '@@ fn nope' in f.txt"
        );
    }

    #[test]
    fn summary_lists_every_kind() {
        let report = ApplyReport {
            added: vec!["new.rs".into()],
            modified: vec!["src/lib.rs".into()],
            deleted: vec!["old.rs".into()],
        };
        assert_eq!(
            report.summary(),
            "Success. Updated the following files:\nA new.rs\nM src/lib.rs\nD old.rs"
        );
    }

    #[test]
    fn resolve_folds_dots() {
        assert_eq!(
            resolve(Path::new("/w/repo"), Path::new("./a/../../etc/x")),
            PathBuf::from("/w/etc/x")
        );
        assert_eq!(
            resolve(Path::new("/w"), Path::new("/abs/f")),
            PathBuf::from("/abs/f")
        );
    }

    #[test]
    fn extracts_patch_from_shell_forms() {
        let patch = "*** Begin Patch\n*** Delete File: x\n*** End Patch";
        let argv = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            extract_patch_from_shell(&argv(&["apply_patch", patch])).as_deref(),
            Some(patch)
        );
        let script = format!("apply_patch <<'EOF'\n{patch}\nEOF\n");
        assert_eq!(
            extract_patch_from_shell(&argv(&["bash", "-lc", &script])).as_deref(),
            Some(patch)
        );
        assert_eq!(
            extract_patch_from_shell(&argv(&["/bin/sh", "-c", &script])).as_deref(),
            Some(patch)
        );
        for not_a_patch in [
            argv(&["bash", "-lc", "echo hi"]),
            argv(&[
                "bash",
                "-lc",
                &format!("apply_patch <<'EOF'\n{patch}\nEOF\nrm -rf /"),
            ]),
            argv(&["bash", "-lc", &format!("cat <<'EOF'\n{patch}\nEOF")]),
            argv(&["python", "-c", &script]),
            argv(&["apply_patch", "hello"]),
            argv(&["apply_patch"]),
        ] {
            assert_eq!(
                extract_patch_from_shell(&not_a_patch),
                None,
                "{not_a_patch:?}"
            );
        }
    }
}
