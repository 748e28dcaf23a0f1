//! Agent Skills: folders holding a `SKILL.md` (YAML front matter with `name` and
//! `description`, then instructions) that the model reads when a task calls for them.
//!
//! Where they are found, nearest first (a name found twice keeps the nearest):
//! `.agents/skills/*/SKILL.md` in the working directory and each directory above it up to
//! the repository root, then the user's `~/.agents/skills/` and the agent home's
//! `skills/`. Disclosure is progressive: the thread's instructions list each enabled
//! skill's name, description and path, and nothing else; the model reads a body (and the
//! files it names) only when it uses the skill, and a prompt that mentions `$name` gets
//! the body added for it. A skill whose front matter is wrong is reported with the reason
//! and left out; it never stops a thread.
//!
//! The model must not be able to write a skill the agent will load: `.agents` is kept
//! read-only in the sandbox (and one a command creates is removed), the agent home is
//! out of reach, and the user's home is outside the writable roots unless the user made
//! it one.

use std::path::{Path, PathBuf};

use interpreter_protocol::ResponseItem;
use serde::Deserialize;

use crate::config::{SkillSelector, SkillSetting};

/// Largest `SKILL.md` read; a bigger one is reported, not loaded.
const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;
/// Skill folders read per skills directory: a directory with thousands of entries costs
/// a thread start little and is reported.
const MAX_SKILLS_PER_DIRECTORY: usize = 256;
/// Skills listed to the model; more would crowd its context (the rest are reported).
const MAX_LISTED_SKILLS: usize = 100;
/// Skill bodies added for one prompt's mentions.
const MAX_MENTIONS_PER_PROMPT: usize = 8;
/// The specification's limits.
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillScope {
    /// `.agents/skills` of the working directory or a directory above it in its repository.
    Repo,
    /// The user's `~/.agents/skills` or the agent home's `skills/`.
    User,
}

impl SkillScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Repo => "repo",
            Self::User => "user",
        }
    }
}

/// One skill, from its front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// `metadata.short-description`, when the front matter has one.
    pub short_description: Option<String>,
    /// The `SKILL.md` (absolute): its folder holds the files the body refers to.
    pub path: PathBuf,
    pub scope: SkillScope,
    /// Off when the user config turns it off (`[[skills.config]]`).
    pub enabled: bool,
}

/// A skill left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProblem {
    pub path: PathBuf,
    pub message: String,
}

/// The skills for one working directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skills {
    pub skills: Vec<Skill>,
    pub problems: Vec<SkillProblem>,
}

/// What discovery needs besides the working directory.
#[derive(Debug, Clone, Default)]
pub struct SkillSources {
    /// The user's home (`$HOME`), for `~/.agents/skills`.
    pub user_home: Option<PathBuf>,
    /// The agent home (`INTERPRETER_HOME`), for its `skills/`.
    pub agent_home: Option<PathBuf>,
    /// `[[skills.config]]`, in order (a later entry for a skill wins).
    pub settings: Vec<SkillSetting>,
}

impl SkillSources {
    /// The sources a thread's configuration names.
    pub fn of(config: &crate::config::Config) -> Self {
        Self {
            user_home: config
                .env
                .get("HOME")
                .filter(|home| !home.is_empty())
                .map(PathBuf::from),
            agent_home: Some(config.home.clone()),
            settings: config.skills_config.clone(),
        }
    }
}

impl Skills {
    /// The skills for `cwd`. Blocking: it reads directories and files.
    pub fn discover(cwd: &Path, sources: &SkillSources) -> Self {
        let mut found = Self::default();
        // Nearest first: a name found nearer the work wins.
        for dir in crate::repo_dirs::dirs_from_root(cwd).into_iter().rev() {
            found.read_directory(&dir.join(".agents").join("skills"), SkillScope::Repo);
        }
        if let Some(home) = &sources.user_home {
            found.read_directory(&home.join(".agents").join("skills"), SkillScope::User);
        }
        if let Some(home) = &sources.agent_home {
            found.read_directory(&home.join("skills"), SkillScope::User);
        }
        for skill in &mut found.skills {
            skill.enabled = sources
                .settings
                .iter()
                .rev()
                .find(|setting| match &setting.selector {
                    SkillSelector::Path(path) => same_file(path, &skill.path),
                    SkillSelector::Name(name) => *name == skill.name,
                })
                .is_none_or(|setting| setting.enabled);
        }
        found
    }

    /// The enabled skills.
    pub fn enabled(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|skill| skill.enabled)
    }

    /// The enabled skill called `name`.
    pub fn named(&self, name: &str) -> Option<&Skill> {
        self.enabled().find(|skill| skill.name == name)
    }

    /// What the thread's instructions say about skills: each enabled skill's name,
    /// description and path, and how to use one. `None` without skills.
    pub(crate) fn catalog_message(&self) -> Option<ResponseItem> {
        let listed: Vec<&Skill> = self.enabled().take(MAX_LISTED_SKILLS).collect();
        if listed.is_empty() {
            return None;
        }
        let mut text = String::from(
            "<skills_instructions>\nSkills are folders of instructions for particular tasks. \
             Each one below has a name, a description and the path of its SKILL.md. When a \
             task matches a description, or the user names a skill (`$name`), read that \
             SKILL.md in full before starting and follow it; it may point to other files, \
             which are relative to its folder: read those only when you need them. Do not \
             read skills the task does not need.\n\n",
        );
        for skill in listed {
            text.push_str(&format!(
                "- {}: {} (file: {})\n",
                skill.name,
                one_line(&skill.description),
                skill.path.display()
            ));
        }
        text.push_str("</skills_instructions>");
        Some(ResponseItem::developer_text(text))
    }

    /// Warnings for the user when a thread starts: skills left out, and why.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self
            .problems
            .iter()
            .map(|problem| {
                format!(
                    "skill {} left out: {}",
                    problem.path.display(),
                    problem.message
                )
            })
            .collect();
        let enabled = self.enabled().count();
        if enabled > MAX_LISTED_SKILLS {
            warnings.push(format!(
                "{} skills are enabled; only the first {MAX_LISTED_SKILLS} are listed to the model",
                enabled
            ));
        }
        warnings
    }

    /// The bodies of the enabled skills `text` mentions as `$name`, each as a message
    /// for the model, in the order first mentioned; and a line per skill that could not be
    /// read.
    pub(crate) fn mentioned_in(&self, text: &str) -> (Vec<ResponseItem>, Vec<String>) {
        let mut items = Vec::new();
        let mut failures = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for name in mentions(text) {
            if seen.len() >= MAX_MENTIONS_PER_PROMPT || seen.contains(&name) {
                continue;
            }
            let Some(skill) = self.named(name) else {
                continue;
            };
            seen.push(name);
            match read_bounded(&skill.path) {
                Ok(body) => {
                    tracing::info!(skill = %skill.name, path = %skill.path.display(), "skill loaded by mention");
                    items.push(ResponseItem::user_text(format!(
                        "<skill>\n<name>{}</name>\n<path>{}</path>\n{}\n</skill>",
                        skill.name,
                        skill.path.display(),
                        body.trim_end()
                    )));
                }
                Err(error) => failures.push(format!(
                    "skill {} could not be read: {error}",
                    skill.path.display()
                )),
            }
        }
        (items, failures)
    }

    fn read_directory(&mut self, dir: &Path, scope: SkillScope) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut folders: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect();
        // Directory order is the file system's; a stable order keeps the model's
        // instructions (and its prompt cache) the same from one thread to the next.
        folders.sort();
        if folders.len() > MAX_SKILLS_PER_DIRECTORY {
            self.problems.push(SkillProblem {
                path: dir.to_path_buf(),
                message: format!(
                    "{} skill folders; only the first {MAX_SKILLS_PER_DIRECTORY} are read",
                    folders.len()
                ),
            });
            folders.truncate(MAX_SKILLS_PER_DIRECTORY);
        }
        for folder in folders {
            let path = folder.join("SKILL.md");
            if !path.exists() {
                continue;
            }
            match parse_skill(&folder, &path, scope) {
                Ok(skill) => {
                    if let Some(first) = self.skills.iter().find(|s| s.name == skill.name) {
                        self.problems.push(SkillProblem {
                            path,
                            message: format!(
                                "a skill named `{}` was already found nearer, at {}",
                                skill.name,
                                first.path.display()
                            ),
                        });
                    } else {
                        self.skills.push(skill);
                    }
                }
                Err(message) => self.problems.push(SkillProblem { path, message }),
            }
        }
    }
}

/// Turns the skill at `skill_path` (its `SKILL.md`) on or off in the user config
/// (`[[skills.config]]`, one entry per path, replacing an earlier one for the same path).
/// Blocking: it reads and writes the config file.
pub fn write_enabled(
    inputs: &crate::config::ConfigInputs,
    skill_path: &Path,
    enabled: bool,
) -> Result<crate::config::edit::WriteOutcome, crate::config::edit::ConfigEditError> {
    use crate::config::edit::{self, ConfigEdit, MergeStrategy};
    let (text, _) = edit::read_config_text(&inputs.home.join(edit::CONFIG_FILE))?;
    let file: toml::Table = text.parse().unwrap_or_default();
    let mut entries: Vec<serde_json::Value> = file
        .get("skills")
        .and_then(|skills| skills.get("config"))
        .and_then(toml::Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter(|entry| {
                    entry
                        .get("path")
                        .and_then(toml::Value::as_str)
                        .is_none_or(|path| !same_file(Path::new(path), skill_path))
                })
                .filter_map(|entry| serde_json::to_value(entry).ok())
                .collect()
        })
        .unwrap_or_default();
    entries.push(serde_json::json!({
        "path": skill_path.to_string_lossy(),
        "enabled": enabled,
    }));
    edit::apply_edits(
        inputs,
        &[ConfigEdit {
            key_path: "skills.config".into(),
            value: serde_json::Value::Array(entries),
            merge: MergeStrategy::Replace,
        }],
        None,
    )
}

/// The front matter fields read; others (`license`, `compatibility`, `allowed-tools`)
/// are allowed and not used.
#[derive(Debug, Default, Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    metadata: Option<serde_yaml::Mapping>,
}

fn parse_skill(folder: &Path, path: &Path, scope: SkillScope) -> Result<Skill, String> {
    let text = read_bounded(path)?;
    let yaml = front_matter(&text)
        .ok_or("SKILL.md must start with YAML front matter between `---` lines")?;
    let front: FrontMatter =
        serde_yaml::from_str(yaml).map_err(|error| format!("front matter: {error}"))?;
    let name = front
        .name
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .ok_or("front matter has no `name`")?;
    check_name(&name)?;
    let folder_name = folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if folder_name != name {
        return Err(format!(
            "`name` is `{name}` but the folder is `{folder_name}`; they must match"
        ));
    }
    let description = front
        .description
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
        .ok_or("front matter has no `description`")?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    let short_description = front.metadata.as_ref().and_then(|metadata| {
        metadata
            .get("short-description")
            .and_then(serde_yaml::Value::as_str)
            .map(str::to_string)
    });
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(Skill {
        name,
        description,
        short_description,
        path,
        scope,
        enabled: true,
    })
}

/// The specification's rule: 1-64 lowercase letters, digits and hyphens, no hyphen at
/// either end and no two in a row.
fn check_name(name: &str) -> Result<(), String> {
    let fits = name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if fits {
        Ok(())
    } else {
        Err(format!(
            "`name` `{name}` must be 1-{MAX_NAME_CHARS} lowercase letters, digits and single \
             hyphens, not starting or ending with one"
        ))
    }
}

/// The YAML between a first line `---` and the next line `---`.
fn front_matter(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..offset]);
        }
        offset += line.len();
    }
    None
}

/// `SKILL.md`'s text, refused when larger than [`MAX_SKILL_FILE_BYTES`] or not a regular
/// file (a FIFO would block the thread's start).
fn read_bounded(path: &Path) -> Result<String, String> {
    let resolved = std::fs::canonicalize(path).map_err(|error| error.to_string())?;
    let bytes = interpreter_tools::regular_file::read_capped(&resolved, MAX_SKILL_FILE_BYTES)
        .map_err(|error| match error {
            interpreter_tools::regular_file::RegularFileError::TooLarge { .. } => format!(
                "SKILL.md is larger than {} KiB",
                MAX_SKILL_FILE_BYTES / 1024
            ),
            other => other.to_string(),
        })?;
    String::from_utf8(bytes).map_err(|_| "SKILL.md is not UTF-8 text".to_string())
}

/// The `$name` mentions in `text`: a `$` not preceded by a word character, then a name.
fn mentions(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices('$').filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &text[at + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .unwrap_or(rest.len());
        let name = rest[..end].trim_end_matches('-');
        (!name.is_empty()).then_some(name)
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || std::fs::canonicalize(a).is_ok_and(|a| a == b)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, folder: &str, front: &str) -> PathBuf {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("SKILL.md");
        std::fs::write(
            &path,
            format!("---\n{front}\n---\n# Body of {folder}\nStep one.\n"),
        )
        .unwrap();
        path
    }

    #[test]
    fn nearest_wins_and_bad_skills_are_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let sub = repo.join("pkg");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        let near = sub.join(".agents/skills");
        let far = repo.join(".agents/skills");
        write_skill(
            &near,
            "deploy",
            "name: deploy\ndescription: Deploy the package.",
        );
        write_skill(
            &far,
            "deploy",
            "name: deploy\ndescription: Deploy everything.",
        );
        write_skill(
            &far,
            "lint",
            "name: lint\ndescription: >\n  Lint the\n  code.",
        );
        write_skill(&far, "Bad", "name: Bad\ndescription: x");
        write_skill(&far, "nodesc", "name: nodesc");
        write_skill(&far, "other", "name: mismatch\ndescription: x");
        write_skill(&far, "broken", "name: [unclosed\ndescription: x");
        let home = tmp.path().join("home");
        write_skill(
            &home.join(".agents/skills"),
            "notes",
            "name: notes\ndescription: Take notes.\nmetadata:\n  short-description: Notes",
        );

        let skills = Skills::discover(
            &sub,
            &SkillSources {
                user_home: Some(home.clone()),
                agent_home: None,
                settings: Vec::new(),
            },
        );
        let names: Vec<(&str, SkillScope)> = skills
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.scope))
            .collect();
        assert_eq!(
            names,
            vec![
                ("deploy", SkillScope::Repo),
                ("lint", SkillScope::Repo),
                ("notes", SkillScope::User)
            ]
        );
        assert_eq!(skills.skills[0].description, "Deploy the package.");
        assert_eq!(skills.skills[1].description, "Lint the code.");
        assert_eq!(skills.skills[2].short_description.as_deref(), Some("Notes"));
        let problems: Vec<String> = skills.problems.iter().map(|p| p.message.clone()).collect();
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(problems.iter().any(|m| m.contains("already found nearer")));
        assert!(problems.iter().any(|m| m.contains("lowercase")));
        assert!(problems.iter().any(|m| m.contains("no `description`")));
        assert!(problems.iter().any(|m| m.contains("must match")));
        assert!(problems.iter().any(|m| m.starts_with("front matter:")));
    }

    #[test]
    fn the_catalog_lists_names_descriptions_and_paths_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_skill(
            &tmp.path().join(".agents/skills"),
            "deploy",
            "name: deploy\ndescription: Deploy it.",
        );
        let mut skills = Skills::discover(tmp.path(), &SkillSources::default());
        let text = skills.catalog_message().unwrap().message_text().unwrap();
        assert!(text.contains(&format!(
            "- deploy: Deploy it. (file: {})",
            path.canonicalize().unwrap().display()
        )));
        assert!(
            !text.contains("Step one"),
            "the body is not disclosed: {text}"
        );
        skills.skills[0].enabled = false;
        assert!(skills.catalog_message().is_none());
    }

    #[test]
    fn a_mention_loads_the_body_once_and_only_whole_names() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            &tmp.path().join(".agents/skills"),
            "deploy",
            "name: deploy\ndescription: Deploy it.",
        );
        let skills = Skills::discover(tmp.path(), &SkillSources::default());
        let (items, failures) = skills
            .mentioned_in("use $deploy, then $deploy again; not a$deploy or $HOME or $deployx");
        assert!(failures.is_empty());
        assert_eq!(items.len(), 1);
        let text = items[0].message_text().unwrap();
        assert!(text.starts_with("<skill>\n<name>deploy</name>"), "{text}");
        assert!(text.contains("Step one."));
        assert!(skills.mentioned_in("no mention here").0.is_empty());
    }

    #[test]
    fn disabled_skills_are_listed_but_neither_offered_nor_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_skill(
            &tmp.path().join(".agents/skills"),
            "deploy",
            "name: deploy\ndescription: Deploy it.",
        );
        let setting = |selector, enabled| SkillSetting { selector, enabled };
        let skills = Skills::discover(
            tmp.path(),
            &SkillSources {
                settings: vec![setting(SkillSelector::Path(path.clone()), false)],
                ..SkillSources::default()
            },
        );
        assert_eq!(skills.skills.len(), 1);
        assert!(!skills.skills[0].enabled);
        assert!(skills.mentioned_in("$deploy").0.is_empty());
        // By name (as codex-acp writes it), and a later entry wins.
        let by_name = |settings| {
            Skills::discover(
                tmp.path(),
                &SkillSources {
                    settings,
                    ..SkillSources::default()
                },
            )
            .skills[0]
                .enabled
        };
        assert!(!by_name(vec![setting(
            SkillSelector::Name("deploy".into()),
            false
        )]));
        assert!(by_name(vec![
            setting(SkillSelector::Name("deploy".into()), false),
            setting(SkillSelector::Path(path), true),
        ]));
        assert!(by_name(vec![setting(
            SkillSelector::Name("visualize:visualize".into()),
            false
        )]));
    }

    #[test]
    fn front_matter_needs_both_fences_and_a_bounded_file() {
        assert_eq!(front_matter("---\nname: a\n---\nbody"), Some("name: a\n"));
        assert_eq!(
            front_matter("---\r\nname: a\r\n---\r\n"),
            Some("name: a\r\n")
        );
        assert_eq!(front_matter("name: a\n---\n"), None);
        assert_eq!(front_matter("---\nname: a\n"), None);
        let tmp = tempfile::tempdir().unwrap();
        let big = tmp.path().join("SKILL.md");
        std::fs::write(&big, vec![b'a'; MAX_SKILL_FILE_BYTES as usize + 1]).unwrap();
        assert!(read_bounded(&big).unwrap_err().contains("larger"));
    }
}
