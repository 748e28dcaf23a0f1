//! The TOML side of configuration: the on-disk schema ([`ConfigToml`]), reading a file
//! into a layer, `-c key.path=value` overrides, the deep merge of layers, the
//! unknown-key check (which must run per layer, so a message can name the file that
//! holds the key), and deserializing the merged table with errors attributed to the layer
//! that set the offending value.
//!
//! Keys that real Codex config files carry but that have no meaning here (`web_search`,
//! `[features]`, `[tools]`, `[history]`, `[tui]`, `[projects]`, `notify`,
//! `model_reasoning_summary`, `model_verbosity`, ...) are accepted and ignored, so such a
//! file loads unchanged even under `strict`. See [`ACCEPTED_IGNORED_KEYS`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use interpreter_model_client::ModelProviderInfo;
use interpreter_protocol::{AskForApproval, ReasoningEffort, SandboxMode};
use interpreter_tools::env_policy::ShellEnvironmentPolicy;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use toml::{Table, Value};

use super::error::{ConfigError, ConfigSource};
use super::types::{AppServerSettings, McpServerConfig, McpServerSettings};

/// The config file schema. Every field is optional; defaults are applied when the
/// resolved [`super::Config`] is built, so "unset" stays distinguishable from "default".
/// Unknown keys are removed (or rejected) before deserialization, per layer.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ConfigToml {
    pub model: Option<String>,
    pub model_provider: Option<String>,
    #[serde(default)]
    pub model_providers: BTreeMap<String, ModelProviderInfo>,
    pub approval_policy: Option<AskForApproval>,
    pub sandbox_mode: Option<SandboxMode>,
    pub sandbox_workspace_write: Option<SandboxWorkspaceWriteToml>,
    pub shell_environment_policy: Option<ShellEnvironmentPolicy>,
    pub model_reasoning_effort: Option<ReasoningEffort>,
    pub model_context_window: Option<u64>,
    pub model_max_output_tokens: Option<u64>,
    pub developer_instructions: Option<String>,
    pub base_instructions: Option<String>,
    /// A file whose text becomes `base_instructions`; relative paths are resolved against
    /// the home directory (where `config.toml` lives).
    pub model_instructions_file: Option<PathBuf>,
    pub compact_prompt: Option<String>,
    pub project_doc_max_bytes: Option<usize>,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    pub mcp_server: Option<McpServerSettings>,
    pub app_server: Option<AppServerSettings>,
    pub approval_timeout_sec: Option<u64>,
    pub shell_timeout_ms: Option<u64>,
    pub tool_output_max_bytes: Option<usize>,
    /// Replaces the built-in `openai` provider's base URL (a user-defined
    /// `[model_providers.openai]` still wins).
    pub openai_base_url: Option<String>,
    /// Where threads are kept: `local` (the default: rollouts under the home) or a
    /// `postgres://user@host/db` URL shared by a fleet (password from `PGPASSWORD`).
    pub thread_store: Option<String>,
    /// `[otel]`: telemetry export, read once at process start (see [`super::load_otel`]).
    pub otel: Option<interpreter_telemetry::settings::OtelToml>,
    /// `[skills]`: `[[skills.config]]` entries turn skills off or on by path; other keys
    /// (Codex's) are accepted and unused.
    pub skills: Option<SkillsToml>,
    /// `[hooks]`: lifecycle hooks, `[[hooks.EVENT]]` matcher groups; read by the hooks
    /// module, which reports (never fails on) what it cannot use.
    pub hooks: Option<toml::Table>,
}

/// `[skills]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub(crate) struct SkillsToml {
    pub config: Vec<SkillConfigToml>,
}

/// One `[[skills.config]]` entry: a skill chosen by `path` (its `SKILL.md`) or by `name`
/// (codex-acp turns one off by name on every thread it starts), on or off.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SkillConfigToml {
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub name: Option<String>,
    pub enabled: bool,
}

/// `[sandbox_workspace_write]`: settings that apply only in `workspace-write` mode.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub(crate) struct SandboxWorkspaceWriteToml {
    pub writable_roots: Vec<PathBuf>,
    pub network_access: bool,
    pub exclude_tmpdir_env_var: bool,
    pub exclude_slash_tmp: bool,
    /// Let commands create a git repository (`.git`) in the workspace.
    pub allow_git_init: bool,
}

/// Top-level keys accepted for compatibility with existing Codex config files and
/// otherwise ignored: they configure features this agent does not have (web search, the
/// TUI, prompt history, notifications, project trust, reasoning summaries/verbosity,
/// feature flags). `profile` (selects a profile when no `--profile` is given) and the
/// selected `[profiles.NAME]` table are read from the raw file before deserialization.
pub const ACCEPTED_IGNORED_KEYS: &[&str] = &[
    "profile",
    "profiles",
    "web_search",
    "projects",
    "model_reasoning_summary",
    "model_verbosity",
    "model_supports_reasoning_summaries",
    "hide_agent_reasoning",
    "show_raw_agent_reasoning",
    "features",
    "tools",
    "history",
    "notify",
    "tui",
    "notice",
    "file_opener",
    "instructions",
    "model_auto_compact_token_limit",
    "oss_provider",
    "project_root_markers",
    "project_doc_fallback_filenames",
    "tool_output_token_limit",
    "approvals_reviewer",
    "personality",
    "check_for_update_on_startup",
    "disable_response_storage",
    "preferred_auth_method",
    "chatgpt_base_url",
];

/// One source of configuration, already parsed into a table.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub origin: ConfigSource,
    /// Key path of `table` inside its file (`profiles.NAME` for a profile table), used
    /// only to report keys the way they are spelled in the file.
    pub key_prefix: Vec<String>,
    pub table: Table,
}

impl Layer {
    pub(crate) fn display_key(&self, path: &[String]) -> String {
        self.key_prefix
            .iter()
            .chain(path.iter())
            .cloned()
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// Reads and parses a TOML file; `Ok(None)` when it does not exist.
pub(crate) fn read_toml_file(path: &Path) -> Result<Option<Table>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse_toml_text(path, &text).map(Some)
}

pub(crate) fn parse_toml_text(path: &Path, text: &str) -> Result<Table, ConfigError> {
    text.parse::<Table>().map_err(|err| {
        let location = err
            .span()
            .map(|span| {
                let (line, column) = line_column(text, span.start);
                format!(" at line {line}, column {column}")
            })
            .unwrap_or_default();
        ConfigError::Parse {
            path: path.to_path_buf(),
            location,
            message: one_line(err.message()),
        }
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before
        .get(line_start..)
        .map(|s| s.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses `key.path=value`. The value is read as a TOML value (`true`, `42`, `[1, 2]`,
/// `"quoted"`, `{ a = 1 }`); anything that is not valid TOML is taken as a raw string with
/// surrounding quotes stripped, so `-c model=gpt-x` works without shell-escaped quotes.
pub fn parse_cli_override(input: &str) -> Result<(String, Value), ConfigError> {
    let invalid = |reason: &str| ConfigError::InvalidOverride {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let (key, raw_value) = input
        .split_once('=')
        .ok_or_else(|| invalid("expected key=value"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(invalid("empty key"));
    }
    if key.split('.').any(|segment| segment.trim().is_empty()) {
        return Err(invalid("empty segment in key path"));
    }
    let raw_value = raw_value.trim();
    // Parsing as the right-hand side of a throwaway assignment accepts exactly the TOML
    // value grammar, including inline tables and arrays.
    let parsed = format!("value = {raw_value}")
        .parse::<Table>()
        .ok()
        .and_then(|mut table| table.remove("value"));
    let value = parsed.unwrap_or_else(|| {
        Value::String(
            raw_value
                .trim_matches(|c| c == '"' || c == '\'')
                .to_string(),
        )
    });
    Ok((key.to_string(), value))
}

/// Builds the layer of one `-c` override: `a.b.c = v` becomes `{a = {b = {c = v}}}`.
pub(crate) fn cli_override_layer(key: &str, value: Value) -> Layer {
    let segments: Vec<&str> = key.split('.').map(str::trim).collect();
    let mut nested = value;
    for segment in segments.iter().skip(1).rev() {
        let mut table = Table::new();
        table.insert((*segment).to_string(), nested);
        nested = Value::Table(table);
    }
    let mut table = Table::new();
    if let Some(first) = segments.first() {
        table.insert((*first).to_string(), nested);
    }
    Layer {
        origin: ConfigSource::CliOverride,
        key_prefix: Vec::new(),
        table,
    }
}

/// Merges `overlay` into `base`: tables merge key by key, anything else replaces, except
/// `skills.config`, whose entries add up: each is about one skill and a later one for the
/// same skill wins, so a caller turning one skill off (codex-acp does on every thread)
/// keeps the user's own settings for the others.
pub(crate) fn merge_into(base: &mut Table, overlay: Table) {
    merge_at(base, overlay, &mut Vec::new());
}

fn merge_at(base: &mut Table, overlay: Table, path: &mut Vec<String>) {
    for (key, value) in overlay {
        let appends = path.len() == 1 && path[0] == "skills" && key == "config";
        match (base.get_mut(&key), value) {
            (Some(Value::Table(base_table)), Value::Table(overlay_table)) => {
                path.push(key);
                merge_at(base_table, overlay_table, path);
                path.pop();
            }
            (Some(Value::Array(entries)), Value::Array(more)) if appends => {
                entries.extend(more);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The expected shape of a table, derived from the serde structs so it cannot drift
/// from what deserialization accepts.
enum Shape {
    /// Any value; contents are not checked.
    Opaque,
    /// A struct: a fixed set of keys.
    Struct(Vec<(&'static str, Shape)>),
    /// A map with arbitrary keys whose values all have one shape.
    MapOf(Box<Shape>),
}

fn struct_shape<T: DeserializeOwned>() -> Shape {
    Shape::Struct(
        field_names::<T>()
            .iter()
            .map(|name| (*name, Shape::Opaque))
            .collect(),
    )
}

fn config_toml_shape() -> Shape {
    let mut fields: Vec<(&'static str, Shape)> = Vec::new();
    for name in field_names::<ConfigToml>() {
        let shape = match *name {
            "model_providers" => Shape::MapOf(Box::new(struct_shape::<ModelProviderInfo>())),
            "mcp_servers" => Shape::MapOf(Box::new(struct_shape::<McpServerConfig>())),
            "mcp_server" => struct_shape::<McpServerSettings>(),
            "app_server" => struct_shape::<AppServerSettings>(),
            "shell_environment_policy" => struct_shape::<ShellEnvironmentPolicy>(),
            "sandbox_workspace_write" => struct_shape::<SandboxWorkspaceWriteToml>(),
            "otel" => struct_shape::<interpreter_telemetry::settings::OtelToml>(),
            _ => Shape::Opaque,
        };
        fields.push((name, shape));
    }
    fields.extend(ACCEPTED_IGNORED_KEYS.iter().map(|k| (*k, Shape::Opaque)));
    Shape::Struct(fields)
}

/// Removes keys the schema does not know from `layer`, adding a warning naming each (as
/// spelled in the layer's file) to `warnings`. With `strict`, the first one is an error
/// instead.
pub(crate) fn remove_unknown_keys(
    layer: &mut Layer,
    strict: bool,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let shape = config_toml_shape();
    let mut unknown = Vec::new();
    collect_unknown(&mut layer.table, &shape, &mut Vec::new(), &mut unknown);
    for path in unknown {
        let key = layer.display_key(&path);
        if strict {
            return Err(ConfigError::UnknownKey {
                key,
                origin: layer.origin.clone(),
            });
        }
        let hint = misplaced_top_level_key(&shape, &path)
            .map(|name| {
                format!(
                    " (`{name}` is a top-level key: below a `[table]` header it belongs to \
                     that table, so move it above the file's first table)"
                )
            })
            .unwrap_or_default();
        warnings.push(format!(
            "ignoring unknown config key `{key}` in {}{hint}",
            layer.origin
        ));
    }
    Ok(())
}

/// The top-level key an unknown nested key `path` names, if it names one: written after
/// a table header, `thread_store = …` silently became `model_providers.x.thread_store`,
/// and a replica so configured would fall back to its local store.
fn misplaced_top_level_key<'a>(shape: &Shape, path: &'a [String]) -> Option<&'a str> {
    let (last, parents) = path.split_last()?;
    let Shape::Struct(fields) = shape else {
        return None;
    };
    (!parents.is_empty() && fields.iter().any(|(name, _)| name == last)).then_some(last.as_str())
}

fn collect_unknown(
    table: &mut Table,
    shape: &Shape,
    path: &mut Vec<String>,
    unknown: &mut Vec<Vec<String>>,
) {
    let keys: Vec<String> = table.keys().cloned().collect();
    for key in keys {
        let child_shape = match shape {
            Shape::Opaque => return,
            Shape::MapOf(inner) => Some(inner.as_ref()),
            Shape::Struct(fields) => fields
                .iter()
                .find(|(name, _)| *name == key)
                .map(|(_, shape)| shape),
        };
        path.push(key.clone());
        match child_shape {
            None => {
                if let Some(value) = table.remove(&key) {
                    leaf_paths(&value, path, unknown);
                }
            }
            Some(child_shape) => {
                if let Some(Value::Table(child)) = table.get_mut(&key) {
                    collect_unknown(child, child_shape, path, unknown);
                }
            }
        }
        path.pop();
    }
}

/// Key paths of the leaves under `value` (reported instead of the table holding them,
/// so the message points at the line the user wrote).
fn leaf_paths(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Table(table) if !table.is_empty() => {
            for (key, child) in table {
                path.push(key.clone());
                leaf_paths(child, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

/// Deserializes the merged table. A type error names the key path and the highest-
/// precedence layer that set it.
pub(crate) fn deserialize_merged<T: DeserializeOwned>(
    merged: Table,
    layers: &[Layer],
    fallback_origin: &ConfigSource,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize::<_, T>(Value::Table(merged)).map_err(|err| {
        let path: Vec<String> = err
            .path()
            .iter()
            .filter_map(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                _ => None,
            })
            .collect();
        let message = one_line(err.inner().message());
        let (origin, key) = match layer_setting(layers, &path) {
            Some(layer) => (layer.origin.clone(), layer.display_key(&path)),
            None => (fallback_origin.clone(), path.join(".")),
        };
        ConfigError::InvalidValue {
            key,
            origin,
            message,
        }
    })
}

/// The highest-precedence layer that holds the deepest part of `path`.
pub(crate) fn layer_setting<'a>(layers: &'a [Layer], path: &[String]) -> Option<&'a Layer> {
    let mut best: Option<(usize, &Layer)> = None;
    for layer in layers.iter().rev() {
        let depth = matched_depth(&layer.table, path);
        if depth > 0 && best.is_none_or(|(best_depth, _)| depth > best_depth) {
            best = Some((depth, layer));
        }
    }
    best.map(|(_, layer)| layer)
}

fn matched_depth(table: &Table, path: &[String]) -> usize {
    let mut depth = 0;
    let mut current = table;
    for segment in path {
        match current.get(segment) {
            Some(Value::Table(child)) => {
                depth += 1;
                current = child;
            }
            Some(_) => return depth + 1,
            None => return depth,
        }
    }
    depth
}

/// The field names a derived `Deserialize` struct declares. Serde passes them to
/// `deserialize_struct`; a deserializer that records them and stops there reads them
/// without any input.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNameCollector { names: &mut names });
    names
}

struct FieldNameCollector<'a> {
    names: &'a mut &'static [&'static str],
}

impl<'de> serde::Deserializer<'de> for FieldNameCollector<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.names = fields;
        Err(serde::de::Error::custom("field names collected"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn cli_override_values_parse_as_toml_or_fall_back_to_strings() -> anyhow::Result<()> {
        assert_eq!(
            parse_cli_override("model=gpt-x")?,
            ("model".to_string(), Value::String("gpt-x".into()))
        );
        assert_eq!(
            parse_cli_override("sandbox_workspace_write.network_access=true")?,
            (
                "sandbox_workspace_write.network_access".to_string(),
                Value::Boolean(true)
            )
        );
        assert_eq!(
            parse_cli_override("x=[1,2]")?,
            (
                "x".to_string(),
                Value::Array(vec![Value::Integer(1), Value::Integer(2)])
            )
        );
        assert_eq!(
            parse_cli_override("model='qwen3:8b'")?.1,
            Value::String("qwen3:8b".into())
        );
        assert_eq!(
            parse_cli_override("model=\"a=b\"")?.1,
            Value::String("a=b".into())
        );
        assert_eq!(
            parse_cli_override("n = 42")?,
            ("n".into(), Value::Integer(42))
        );
        Ok(())
    }

    #[test]
    fn cli_override_rejects_empty_or_missing_key() {
        assert!(matches!(
            parse_cli_override("=x"),
            Err(ConfigError::InvalidOverride { .. })
        ));
        assert!(matches!(
            parse_cli_override("model"),
            Err(ConfigError::InvalidOverride { .. })
        ));
        assert!(matches!(
            parse_cli_override("a..b=1"),
            Err(ConfigError::InvalidOverride { .. })
        ));
    }

    #[test]
    fn cli_override_layer_nests_dotted_path() {
        let layer = cli_override_layer("a.b.c", Value::Integer(1));
        let expected: Table = "a = { b = { c = 1 } }".parse().unwrap_or_default();
        assert_eq!(layer.table, expected);
    }

    #[test]
    fn merge_is_deep_for_tables() -> anyhow::Result<()> {
        let mut base: Table = "x = 1\n[t]\na = 1\nb = 2".parse()?;
        merge_into(&mut base, "[t]\nb = 3\nc = 4".parse()?);
        let expected: Table = "x = 1\n[t]\na = 1\nb = 3\nc = 4".parse()?;
        assert_eq!(base, expected);
        Ok(())
    }

    #[test]
    fn skill_settings_add_up_across_layers() -> Result<(), toml::de::Error> {
        let mut base: Table = "[[skills.config]]\nname = \"a\"\nenabled = false".parse()?;
        merge_into(
            &mut base,
            "[[skills.config]]\nname = \"b\"\nenabled = false".parse()?,
        );
        let entries = base["skills"]["config"].as_array().map(Vec::len);
        assert_eq!(entries, Some(2));
        Ok(())
    }

    #[test]
    fn field_names_are_read_from_the_derive() {
        assert!(field_names::<ConfigToml>().contains(&"model_providers"));
        assert!(field_names::<ModelProviderInfo>().contains(&"base_url"));
    }

    #[test]
    fn parse_error_is_one_line_with_position() {
        let err = parse_toml_text(Path::new("/h/config.toml"), "model = \"x\"\nbad = \n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("failed to parse /h/config.toml at line 2"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }
}
