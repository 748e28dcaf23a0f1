//! Where hooks are configured and which may run: the agent home's `hooks.json` and the
//! user config's `[hooks]` (user hooks: they run as configured), and `.interpreter/hooks.json`
//! in the repository from its root down to the working directory (project hooks: they run
//! only once the user trusted each one's exact content, `[hooks.state."KEY"] trusted_hash`
//! in the user config, which a project file cannot set).
//!
//! The file shape is Codex's: `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks":
//! [{"type": "command", "command": "...", "timeout": 30}]}]}}`, and the same tables under
//! `[hooks]` in `config.toml`. What cannot be used (an unknown event, a handler type this
//! agent does not run, a bad matcher) is reported and skipped; it never stops a thread.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use interpreter_protocol::{HookEventName, HookSource};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::matcher::Matcher;

/// File name of a hooks file in the agent home and in a project's `.interpreter/`.
pub const HOOKS_FILE: &str = "hooks.json";
/// A hook's default and longest deadline.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Largest hooks file read.
const MAX_HOOKS_FILE_BYTES: u64 = 1024 * 1024;
/// Hooks read in all: a file with thousands costs every event that many processes.
const MAX_HANDLERS: usize = 256;

/// Whether a configured hook may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustStatus {
    /// A user hook, or a project hook whose trusted hash is its current one.
    Trusted,
    /// A project hook nobody trusted.
    Untrusted,
    /// A project hook trusted once, changed since.
    Modified,
}

impl TrustStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trusted => "trusted",
            Self::Untrusted => "untrusted",
            Self::Modified => "modified",
        }
    }
}

/// One configured command hook.
#[derive(Debug, Clone)]
pub struct HookHandler {
    /// `<source path>:<event_snake>:<group index>:<handler index>`: what trust and
    /// `enabled` are recorded under.
    pub key: String,
    pub event: HookEventName,
    /// The matcher as written (`None`: every occurrence of the event).
    pub matcher: Option<String>,
    pub(super) compiled: Matcher,
    pub command: String,
    pub timeout: Duration,
    pub status_message: Option<String>,
    /// Runs in the background; decides nothing.
    pub background: bool,
    pub source: HookSource,
    pub source_path: PathBuf,
    /// Order of configuration: results are reported, and decisions folded, in it.
    pub display_order: i64,
    /// `sha256:<hex>` of what the hook is (event, matcher, command, timeout).
    pub current_hash: String,
    pub trust: TrustStatus,
    /// Off when the user config says `[hooks.state."KEY"] enabled = false`.
    pub enabled: bool,
}

impl HookHandler {
    /// Whether it runs: enabled, and a user hook or a trusted project hook.
    pub fn runs(&self) -> bool {
        self.enabled && self.trust == TrustStatus::Trusted
    }
}

/// The hooks of one working directory, with what could not be used.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    pub handlers: Vec<HookHandler>,
    pub warnings: Vec<String>,
    /// Files that could not be read or parsed, with the reason.
    pub errors: Vec<(PathBuf, String)>,
}

/// What discovery reads besides the working directory.
#[derive(Debug, Clone, Default)]
pub struct HookSources {
    /// The agent home: `hooks.json` there, and `config.toml` named as the `[hooks]` source.
    pub agent_home: PathBuf,
    /// The user config's `[hooks]` as JSON (event tables and `state`).
    pub config_hooks: Option<Value>,
}

impl HookSources {
    pub fn of(config: &crate::config::Config) -> Self {
        Self {
            agent_home: config.home.clone(),
            config_hooks: config.hooks.clone(),
        }
    }
}

/// `[hooks.state."KEY"]` entries of the user config.
#[derive(Debug, Default)]
struct HookState {
    trusted_hash: BTreeMap<String, String>,
    disabled: Vec<String>,
}

impl HookSet {
    /// The hooks for `cwd`. Blocking: it reads files.
    pub fn discover(cwd: &Path, sources: &HookSources) -> Self {
        let mut set = Self::default();
        let mut events = sources.config_hooks.clone().unwrap_or(Value::Null);
        let state = match events.as_object_mut().and_then(|map| map.remove("state")) {
            Some(state) => read_state(&state),
            None => HookState::default(),
        };
        let user_file = sources.agent_home.join(HOOKS_FILE);
        if let Some(hooks) = set.read_file(&user_file) {
            set.add_events(&hooks, HookSource::User, &user_file, &state);
        }
        if let Value::Object(_) = &events {
            let config_path = sources.agent_home.join(crate::config::edit::CONFIG_FILE);
            set.add_events(&events, HookSource::User, &config_path, &state);
        }
        for dir in crate::repo_dirs::dirs_from_root(cwd) {
            let path = dir.join(".interpreter").join(HOOKS_FILE);
            if let Some(hooks) = set.read_file(&path) {
                set.add_events(&hooks, HookSource::Project, &path, &state);
            }
        }
        let waiting = set
            .handlers
            .iter()
            .filter(|h| h.enabled && h.trust != TrustStatus::Trusted)
            .count();
        if waiting > 0 {
            set.warnings.push(format!(
                "{waiting} project hook(s) are not trusted and do not run; review them with \
                 `interpreter hooks list` and trust them with `interpreter hooks trust`"
            ));
        }
        set
    }

    /// The hooks that run for `event` whose matcher accepts one of `targets` (the tool
    /// name and its aliases, the session source, the compaction trigger), in order.
    pub fn matching(&self, event: HookEventName, targets: &[&str]) -> Vec<&HookHandler> {
        self.handlers
            .iter()
            .filter(|h| h.event == event && h.runs() && h.compiled.accepts_any(targets))
            .collect()
    }

    /// `hooks.json`'s `hooks` object, or `None` (absent, or reported as an error).
    fn read_file(&mut self, path: &Path) -> Option<Value> {
        use interpreter_tools::regular_file::{RegularFileError, read_capped};
        // Resolved first: a hooks file kept by a dotfile manager is a symlink; what is
        // read must still be a regular file (a FIFO would block the thread's start).
        let read = std::fs::canonicalize(path)
            .map_err(RegularFileError::Io)
            .and_then(|resolved| read_capped(&resolved, MAX_HOOKS_FILE_BYTES));
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(RegularFileError::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
                return None;
            }
            Err(RegularFileError::TooLarge { .. }) => {
                self.errors
                    .push((path.to_path_buf(), "larger than 1 MiB; not read".into()));
                return None;
            }
            Err(error) => {
                self.errors.push((path.to_path_buf(), error.to_string()));
                return None;
            }
        };
        let value: Value = match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(error) => {
                self.errors
                    .push((path.to_path_buf(), format!("not valid JSON: {error}")));
                return None;
            }
        };
        let Value::Object(mut top) = value else {
            self.errors
                .push((path.to_path_buf(), "not a JSON object".into()));
            return None;
        };
        if let Some(unknown) = top
            .keys()
            .find(|key| !matches!(key.as_str(), "hooks" | "description"))
        {
            self.errors.push((
                path.to_path_buf(),
                format!("unknown top-level field `{unknown}` (events go under `hooks`)"),
            ));
            return None;
        }
        top.remove("hooks")
    }

    fn add_events(&mut self, hooks: &Value, source: HookSource, path: &Path, state: &HookState) {
        let Value::Object(events) = hooks else {
            self.errors.push((
                path.to_path_buf(),
                "`hooks` must be an object of events".into(),
            ));
            return;
        };
        for (name, groups) in events {
            let Some(event) = event_named(name) else {
                self.warnings.push(format!(
                    "{}: `{name}` is not a hook event this agent runs; skipped",
                    path.display()
                ));
                continue;
            };
            let Some(groups) = groups.as_array() else {
                self.warnings.push(format!(
                    "{}: `{name}` must be a list of matcher groups",
                    path.display()
                ));
                continue;
            };
            for (group_index, group) in groups.iter().enumerate() {
                self.add_group(event, group, group_index, source, path, state);
            }
        }
    }

    fn add_group(
        &mut self,
        event: HookEventName,
        group: &Value,
        group_index: usize,
        source: HookSource,
        path: &Path,
        state: &HookState,
    ) {
        let where_ = format!(
            "{}: {}[{group_index}]",
            path.display(),
            event_config_name(event)
        );
        // UserPromptSubmit and Stop have nothing to match: their matcher is ignored.
        let matcher = if matches!(event, HookEventName::UserPromptSubmit | HookEventName::Stop) {
            None
        } else {
            group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let compiled = match Matcher::new(matcher.as_deref()) {
            Ok(compiled) => compiled,
            Err(error) => {
                self.warnings.push(format!(
                    "{where_}: matcher is not a valid pattern ({error}); skipped"
                ));
                return;
            }
        };
        let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
            self.warnings
                .push(format!("{where_}: no `hooks` list; skipped"));
            return;
        };
        for (handler_index, handler) in handlers.iter().enumerate() {
            if self.handlers.len() >= MAX_HANDLERS {
                self.warnings.push(format!(
                    "more than {MAX_HANDLERS} hooks are configured; the rest are skipped"
                ));
                return;
            }
            let kind = handler.get("type").and_then(Value::as_str).unwrap_or("");
            if kind != "command" {
                self.warnings.push(format!(
                    "{where_}.hooks[{handler_index}]: handler type `{kind}` is not run here \
                     (only `command`); skipped"
                ));
                continue;
            }
            let command = handler
                .get("command")
                .and_then(Value::as_str)
                .map(str::trim)
                .unwrap_or_default();
            if command.is_empty() {
                self.warnings.push(format!(
                    "{where_}.hooks[{handler_index}]: empty command; skipped"
                ));
                continue;
            }
            let timeout = handler
                .get("timeout")
                .and_then(Value::as_u64)
                .map(|secs| Duration::from_secs(secs.max(1)).min(MAX_TIMEOUT))
                .unwrap_or(DEFAULT_TIMEOUT);
            let background = handler.get("async").and_then(Value::as_bool) == Some(true);
            let key = format!(
                "{}:{}:{group_index}:{handler_index}",
                path.display(),
                event_snake_name(event)
            );
            let current_hash = hook_hash(event, matcher.as_deref(), command, timeout, background);
            let trust = match source {
                HookSource::User => TrustStatus::Trusted,
                HookSource::Project => match state.trusted_hash.get(&key) {
                    Some(trusted) if *trusted == current_hash => TrustStatus::Trusted,
                    Some(_) => TrustStatus::Modified,
                    None => TrustStatus::Untrusted,
                },
            };
            let display_order = self.handlers.len() as i64;
            self.handlers.push(HookHandler {
                enabled: !state.disabled.contains(&key),
                key,
                event,
                matcher: matcher.clone(),
                compiled: compiled.clone(),
                command: command.to_string(),
                timeout,
                status_message: handler
                    .get("statusMessage")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                background,
                source,
                source_path: path.to_path_buf(),
                display_order,
                current_hash,
                trust,
            });
        }
    }
}

fn read_state(state: &Value) -> HookState {
    let mut out = HookState::default();
    if let Value::Object(entries) = state {
        for (key, entry) in entries {
            if let Some(hash) = entry.get("trusted_hash").and_then(Value::as_str) {
                out.trusted_hash.insert(key.clone(), hash.to_string());
            }
            if entry.get("enabled").and_then(Value::as_bool) == Some(false) {
                out.disabled.push(key.clone());
            }
        }
    }
    out
}

/// `sha256:<hex>` of the hook's identity as sorted, compact JSON: the same hook in the
/// same file keeps its hash; any change to what runs, when, or for how long changes it.
fn hook_hash(
    event: HookEventName,
    matcher: Option<&str>,
    command: &str,
    timeout: Duration,
    background: bool,
) -> String {
    let mut handler = Map::new();
    handler.insert("async".into(), Value::Bool(background));
    handler.insert("command".into(), Value::String(command.to_string()));
    handler.insert("timeout".into(), Value::from(timeout.as_secs()));
    handler.insert("type".into(), Value::String("command".into()));
    let mut identity = Map::new();
    identity.insert(
        "event_name".into(),
        Value::String(event_snake_name(event).into()),
    );
    identity.insert("hooks".into(), Value::Array(vec![Value::Object(handler)]));
    if let Some(matcher) = matcher {
        identity.insert("matcher".into(), Value::String(matcher.to_string()));
    }
    // `Map` keeps keys sorted (no `preserve_order`), so the text is canonical.
    let text = Value::Object(identity).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

pub(super) const EVENTS: [HookEventName; 8] = [
    HookEventName::SessionStart,
    HookEventName::UserPromptSubmit,
    HookEventName::PreToolUse,
    HookEventName::PermissionRequest,
    HookEventName::PostToolUse,
    HookEventName::PreCompact,
    HookEventName::PostCompact,
    HookEventName::Stop,
];

/// The event's name in configuration and in a hook's input (`PreToolUse`).
pub fn event_config_name(event: HookEventName) -> &'static str {
    match event {
        HookEventName::SessionStart => "SessionStart",
        HookEventName::UserPromptSubmit => "UserPromptSubmit",
        HookEventName::PreToolUse => "PreToolUse",
        HookEventName::PermissionRequest => "PermissionRequest",
        HookEventName::PostToolUse => "PostToolUse",
        HookEventName::PreCompact => "PreCompact",
        HookEventName::PostCompact => "PostCompact",
        HookEventName::Stop => "Stop",
    }
}

pub(crate) fn event_snake_name(event: HookEventName) -> &'static str {
    match event {
        HookEventName::SessionStart => "session_start",
        HookEventName::UserPromptSubmit => "user_prompt_submit",
        HookEventName::PreToolUse => "pre_tool_use",
        HookEventName::PermissionRequest => "permission_request",
        HookEventName::PostToolUse => "post_tool_use",
        HookEventName::PreCompact => "pre_compact",
        HookEventName::PostCompact => "post_compact",
        HookEventName::Stop => "stop",
    }
}

fn event_named(name: &str) -> Option<HookEventName> {
    EVENTS
        .into_iter()
        .find(|event| event_config_name(*event) == name)
}

/// Marks the project hooks of `set` trusted at their current content in the user config
/// (`[hooks.state."KEY"] trusted_hash`), all of them or those whose key is in `keys`.
/// Returns the keys trusted. Blocking: it writes the config file.
pub fn trust(
    inputs: &crate::config::ConfigInputs,
    set: &HookSet,
    keys: Option<&[String]>,
) -> Result<Vec<String>, crate::config::edit::ConfigEditError> {
    use crate::config::edit::{self, ConfigEdit, MergeStrategy};
    let mut state = Map::new();
    let mut trusted = Vec::new();
    for handler in &set.handlers {
        if handler.source != HookSource::Project || handler.trust == TrustStatus::Trusted {
            continue;
        }
        if keys.is_some_and(|keys| !keys.contains(&handler.key)) {
            continue;
        }
        let mut entry = Map::new();
        entry.insert(
            "trusted_hash".into(),
            Value::String(handler.current_hash.clone()),
        );
        state.insert(handler.key.clone(), Value::Object(entry));
        trusted.push(handler.key.clone());
    }
    if !state.is_empty() {
        edit::apply_edits(
            inputs,
            &[ConfigEdit {
                key_path: "hooks.state".into(),
                value: Value::Object(state),
                merge: MergeStrategy::Upsert,
            }],
            None,
        )?;
    }
    Ok(trusted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(path: &Path, value: &Value) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value.to_string()).unwrap();
    }

    #[test]
    fn user_hooks_run_and_project_hooks_wait_for_trust_of_their_content() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let group = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo hi", "timeout": 5},
            {"type": "prompt", "prompt": "x"}
        ]}], "Nope": []}});
        write(&home.join(HOOKS_FILE), &group);
        let project = repo.join(".interpreter").join(HOOKS_FILE);
        write(&project, &group);
        let sources = HookSources {
            agent_home: home.clone(),
            config_hooks: Some(json!({"Stop": [{"matcher": "ignored", "hooks": [
                {"type": "command", "command": "true"}]}]})),
        };
        let set = HookSet::discover(&repo, &sources);
        assert_eq!(set.handlers.len(), 3, "{:?}", set.warnings);
        assert_eq!(set.handlers[0].trust, TrustStatus::Trusted);
        assert_eq!(set.handlers[1].event, HookEventName::Stop);
        assert_eq!(set.handlers[1].matcher, None);
        assert_eq!(set.handlers[1].timeout, DEFAULT_TIMEOUT);
        let project_hook = &set.handlers[2];
        assert_eq!(project_hook.trust, TrustStatus::Untrusted);
        assert_eq!(
            project_hook.key,
            format!("{}:pre_tool_use:0:0", project.display())
        );
        assert_eq!(set.matching(HookEventName::PreToolUse, &["Bash"]).len(), 1);
        assert!(
            set.warnings
                .iter()
                .any(|w| w.contains("`prompt` is not run"))
        );
        assert!(set.warnings.iter().any(|w| w.contains("`Nope`")));
        assert!(set.warnings.iter().any(|w| w.contains("not trusted")));

        // Trusted at its current content, it runs; changed afterwards, it does not.
        let state = json!({"state": {project_hook.key.clone(): {"trusted_hash": project_hook.current_hash}}});
        let trusted = HookSet::discover(
            &repo,
            &HookSources {
                agent_home: home.clone(),
                config_hooks: Some(state.clone()),
            },
        );
        assert_eq!(trusted.handlers[1].trust, TrustStatus::Trusted);
        assert_eq!(
            trusted.matching(HookEventName::PreToolUse, &["Bash"]).len(),
            2
        );
        write(
            &project,
            &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo changed", "timeout": 5}]}]}}),
        );
        let changed = HookSet::discover(
            &repo,
            &HookSources {
                agent_home: home,
                config_hooks: Some(state),
            },
        );
        assert_eq!(changed.handlers[1].trust, TrustStatus::Modified);
        assert_eq!(
            changed.matching(HookEventName::PreToolUse, &["Bash"]).len(),
            1
        );
    }

    #[test]
    fn bad_files_are_reported_not_fatal() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(HOOKS_FILE), "{not json").unwrap();
        let set = HookSet::discover(
            tmp.path(),
            &HookSources {
                agent_home: tmp.path().to_path_buf(),
                config_hooks: None,
            },
        );
        assert!(set.handlers.is_empty());
        assert!(set.errors[0].1.contains("not valid JSON"));
        write(&tmp.path().join(HOOKS_FILE), &json!({"PreToolUse": []}));
        let set = HookSet::discover(
            tmp.path(),
            &HookSources {
                agent_home: tmp.path().to_path_buf(),
                config_hooks: None,
            },
        );
        assert!(
            set.errors[0]
                .1
                .contains("unknown top-level field `PreToolUse`")
        );
    }

    #[test]
    fn the_hash_follows_what_runs() {
        let a = hook_hash(
            HookEventName::PreToolUse,
            Some("Bash"),
            "x",
            DEFAULT_TIMEOUT,
            false,
        );
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
        assert_eq!(
            a,
            hook_hash(
                HookEventName::PreToolUse,
                Some("Bash"),
                "x",
                DEFAULT_TIMEOUT,
                false
            )
        );
        assert_ne!(
            a,
            hook_hash(
                HookEventName::PreToolUse,
                Some("Bash"),
                "y",
                DEFAULT_TIMEOUT,
                false
            )
        );
        assert_ne!(
            a,
            hook_hash(HookEventName::PreToolUse, None, "x", DEFAULT_TIMEOUT, false)
        );
        assert_ne!(
            a,
            hook_hash(
                HookEventName::PostToolUse,
                Some("Bash"),
                "x",
                DEFAULT_TIMEOUT,
                false
            )
        );
    }
}
