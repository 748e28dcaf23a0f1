//! A turn's aggregated diff: every file the turn's patches touched, from what it held
//! before the first patch of the turn touched it to what it holds after the latest one,
//! as one git-style unified diff (what app-server clients get as `turn/diff/updated`).
//!
//! It is built from the patch plans themselves, not by reading the disk again: the plan
//! already holds each file's text before and after, and over ACP the files are the
//! editor's buffers, which the disk may not match.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{PatchPlan, PlannedKind};

/// What one path held before the turn and holds now; `None` is "no such file".
#[derive(Debug, Clone)]
struct Tracked {
    before: Option<String>,
    after: Option<String>,
}

/// The files one turn changed, by absolute path.
#[derive(Debug, Clone, Default)]
pub struct TurnDiff {
    files: BTreeMap<PathBuf, Tracked>,
}

impl TurnDiff {
    /// Take in a plan that was applied.
    pub fn record(&mut self, plan: &PatchPlan) {
        for planned in &plan.planned {
            match &planned.kind {
                PlannedKind::Add { new } => self.set(&planned.absolute, None, Some(new.clone())),
                PlannedKind::Delete { old } => self.set(&planned.absolute, Some(old.clone()), None),
                PlannedKind::Update { old, new, move_to } => match move_to {
                    Some((_, dest)) if *dest != planned.absolute => {
                        self.set(&planned.absolute, Some(old.clone()), None);
                        // What a move overwrote is not in the plan; a destination the
                        // turn had not touched is shown as created.
                        self.set(dest, None, Some(new.clone()));
                    }
                    _ => self.set(&planned.absolute, Some(old.clone()), Some(new.clone())),
                },
            }
        }
    }

    /// The first state seen of a path is its state before the turn; every later one
    /// only moves its "after".
    fn set(&mut self, path: &Path, before: Option<String>, after: Option<String>) {
        self.files
            .entry(path.to_path_buf())
            .and_modify(|tracked| tracked.after = after.clone())
            .or_insert(Tracked { before, after });
    }

    /// The git-style diff of every changed file, paths shown relative to `cwd` when they
    /// are under it. Empty when the turn's edits cancelled out.
    pub fn unified_diff(&self, cwd: &Path) -> String {
        let mut out = String::new();
        for (path, tracked) in &self.files {
            if tracked.before == tracked.after {
                continue;
            }
            let shown = path.strip_prefix(cwd).unwrap_or(path).display().to_string();
            out.push_str(&format!("diff --git a/{shown} b/{shown}\n"));
            let (old_name, new_name) = match (&tracked.before, &tracked.after) {
                (None, _) => {
                    out.push_str("new file mode 100644\n");
                    ("/dev/null".to_string(), format!("b/{shown}"))
                }
                (_, None) => {
                    out.push_str("deleted file mode 100644\n");
                    (format!("a/{shown}"), "/dev/null".to_string())
                }
                _ => (format!("a/{shown}"), format!("b/{shown}")),
            };
            let before = tracked.before.as_deref().unwrap_or("");
            let after = tracked.after.as_deref().unwrap_or("");
            out.push_str(
                &similar::TextDiff::from_lines(before, after)
                    .unified_diff()
                    .context_radius(3)
                    .header(&old_name, &new_name)
                    .to_string(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::apply_patch::parse_patch;
    use std::collections::HashMap;

    fn plan(patch: &str, cwd: &Path, files: &HashMap<PathBuf, String>) -> PatchPlan {
        let patch = parse_patch(patch).unwrap();
        let sources = patch
            .sources(cwd)
            .into_iter()
            .map(|p| {
                let text = files
                    .get(&p)
                    .cloned()
                    .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound));
                (p, text)
            })
            .collect();
        patch.plan(cwd, &sources).unwrap()
    }

    #[test]
    fn two_patches_to_one_file_diff_from_before_the_first() {
        let cwd = Path::new("/w");
        let mut files = HashMap::from([(cwd.join("a.txt"), "one\ntwo\n".to_string())]);
        let mut diff = TurnDiff::default();
        let first = plan(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+uno\n*** End Patch",
            cwd,
            &files,
        );
        diff.record(&first);
        files.insert(cwd.join("a.txt"), "uno\ntwo\n".to_string());
        let second = plan(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+dos\n*** End Patch",
            cwd,
            &files,
        );
        diff.record(&second);
        let text = diff.unified_diff(cwd);
        assert!(text.starts_with("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n"));
        assert!(text.contains("-one\n-two\n+uno\n+dos\n"), "{text}");
    }

    #[test]
    fn an_added_then_deleted_file_leaves_no_diff() {
        let cwd = Path::new("/w");
        let mut files = HashMap::new();
        let mut diff = TurnDiff::default();
        diff.record(&plan(
            "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** End Patch",
            cwd,
            &files,
        ));
        assert!(
            diff.unified_diff(cwd)
                .contains("new file mode 100644\n--- /dev/null\n+++ b/new.txt\n")
        );
        files.insert(cwd.join("new.txt"), "hi\n".to_string());
        diff.record(&plan(
            "*** Begin Patch\n*** Delete File: new.txt\n*** End Patch",
            cwd,
            &files,
        ));
        assert_eq!(diff.unified_diff(cwd), "");
    }
}
