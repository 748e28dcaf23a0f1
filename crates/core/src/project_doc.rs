//! The initial context a thread starts with: AGENTS.md files and the environment.
//!
//! AGENTS.md files are collected from the repository root (the nearest ancestor of the cwd
//! holding `.git`) down to the cwd, so instructions closer to the work come last and win.
//! Their total is capped so a huge file cannot crowd the model's context.

use std::path::Path;

use crate::config::Config;

const PROJECT_DOC_FILENAME: &str = "AGENTS.md";

/// The AGENTS.md instructions in force for a directory, and what the byte budget cut.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ProjectDocs {
    /// `None` when there is no (non-empty) AGENTS.md.
    pub text: Option<String>,
    /// One line per file cut short or left out, for the user: instructions the model
    /// never sees must not go unnoticed.
    pub warnings: Vec<String>,
}

/// The AGENTS.md files for `cwd`, within `max_bytes` in total.
pub(crate) fn load_project_docs(cwd: &Path, max_bytes: usize) -> ProjectDocs {
    let mut docs = ProjectDocs::default();
    if max_bytes == 0 {
        return docs;
    }
    let mut parts = Vec::new();
    let mut remaining = max_bytes;
    for dir in crate::repo_dirs::dirs_from_root(cwd) {
        let path = dir.join(PROJECT_DOC_FILENAME);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if remaining == 0 {
            docs.warnings.push(format!(
                "{} left out: the files before it used up project_doc_max_bytes ({max_bytes} bytes)",
                path.display()
            ));
            continue;
        }
        let taken = truncate_to_char_boundary(text, remaining);
        if taken.len() < text.len() {
            docs.warnings.push(format!(
                "{} truncated to {} of its {} bytes to fit project_doc_max_bytes ({max_bytes} bytes); \
                 raise it with `-c project_doc_max_bytes=N`",
                path.display(),
                taken.len(),
                text.len()
            ));
        }
        remaining -= taken.len();
        parts.push(taken.to_string());
    }
    docs.text = (!parts.is_empty()).then(|| parts.join("\n\n"));
    docs
}

fn truncate_to_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What a thread's history starts with, and what the user should know about it.
#[derive(Debug, Default)]
pub(crate) struct InitialContext {
    pub items: Vec<interpreter_protocol::ResponseItem>,
    /// From [`ProjectDocs::warnings`].
    pub warnings: Vec<String>,
}

/// What every thread's history starts with: developer instructions, AGENTS.md, the skills
/// on offer and the environment. Compaction keeps it, so the model never loses its ground
/// rules.
pub(crate) fn initial_context(config: &Config, skills: &crate::skills::Skills) -> InitialContext {
    use interpreter_protocol::ResponseItem;
    let mut context = InitialContext::default();
    if let Some(dev) = &config.developer_instructions {
        context
            .items
            .push(ResponseItem::developer_text(dev.clone()));
    }
    let docs = load_project_docs(&config.cwd, config.project_doc_max_bytes);
    if let Some(docs) = docs.text {
        context.items.push(ResponseItem::user_text(format!(
            "# AGENTS.md instructions for {}\n\n<INSTRUCTIONS>\n{docs}\n</INSTRUCTIONS>",
            config.cwd.display()
        )));
    }
    context.warnings = docs.warnings;
    if let Some(catalog) = skills.catalog_message() {
        context.items.push(catalog);
    }
    context.warnings.extend(skills.warnings());
    context
        .items
        .push(ResponseItem::user_text(environment_context(config)));
    context
}

/// How the environment context message starts (used to find the one in force).
pub(crate) const ENVIRONMENT_CONTEXT_OPEN: &str = "<environment_context>";

/// A short description of where and how commands run, so the model knows its limits.
pub(crate) fn environment_context(config: &Config) -> String {
    let network = if config.sandbox_policy.has_full_network_access() {
        "enabled"
    } else {
        "restricted"
    };
    format!(
        "<environment_context>\n  <cwd>{}</cwd>\n  <approval_policy>{}</approval_policy>\n  <sandbox_mode>{}</sandbox_mode>\n  <network_access>{network}</network_access>\n  <shell>bash</shell>\n</environment_context>",
        config.cwd.display(),
        config.approval_policy.as_str(),
        match config.sandbox_policy {
            interpreter_protocol::SandboxPolicy::ExternalSandbox { .. } => "external-sandbox",
            _ => config.sandbox_policy.mode().as_str(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_from_repo_root_down_to_cwd_within_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join(".git")).unwrap();
        let sub = root.join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(root.join("AGENTS.md"), "root rules").unwrap();
        std::fs::write(sub.join("AGENTS.md"), "leaf rules").unwrap();

        let docs = load_project_docs(&sub, 1024);
        assert_eq!(docs.text.as_deref(), Some("root rules\n\nleaf rules"));
        assert!(docs.warnings.is_empty(), "{:?}", docs.warnings);

        let capped = load_project_docs(&sub, 4);
        assert_eq!(capped.text.as_deref(), Some("root"));
        let [truncated, left_out] = capped.warnings.as_slice() else {
            panic!("two warnings expected: {:?}", capped.warnings);
        };
        assert!(truncated.contains(&root.join("AGENTS.md").display().to_string()));
        assert!(
            truncated.contains("truncated to 4 of its 10 bytes"),
            "{truncated}"
        );
        assert!(left_out.contains(&sub.join("AGENTS.md").display().to_string()));
        assert!(left_out.contains("left out"), "{left_out}");
    }

    #[test]
    fn outside_a_repo_only_cwd_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("x");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(tmp.path().join("AGENTS.md"), "parent").unwrap();
        assert_eq!(load_project_docs(&sub, 1024), ProjectDocs::default());
        std::fs::write(sub.join("AGENTS.md"), "here").unwrap();
        assert_eq!(load_project_docs(&sub, 1024).text.as_deref(), Some("here"));
    }
}
