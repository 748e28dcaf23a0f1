//! Editing `<home>/config.toml` in place: comments, key order and formatting survive
//! (`toml_edit`), every edit is checked with the real loader before the file is replaced,
//! and the replacement is atomic. A file's version is a hash of its bytes, so a client can
//! say which version its edit is based on and lose no concurrent change.

use std::path::{Path, PathBuf};

use super::caller::program_settings_json;
use super::error::{ConfigError, ConfigSource};
use super::load::{ConfigInputs, load_config};

/// File name of the user config under the home.
pub const CONFIG_FILE: &str = "config.toml";

/// How a value is written at its key path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeStrategy {
    /// The value replaces whatever was there (a table loses keys the value lacks).
    #[default]
    Replace,
    /// Tables are merged key by key; other values replace.
    Upsert,
}

/// One edit: `value` JSON `null` removes the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEdit {
    /// Dotted key path, e.g. `model` or `model_providers.local.base_url`.
    pub key_path: String,
    pub value: serde_json::Value,
    pub merge: MergeStrategy,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigEditError {
    #[error("config version conflict: expected {expected}, the file is at {actual}")]
    VersionConflict { expected: String, actual: String },
    #[error("invalid key path `{0}`")]
    InvalidKeyPath(String),
    #[error("cannot write `{key_path}`: {message}")]
    NotATable { key_path: String, message: String },
    #[error("{} is not valid TOML: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the edit would break the configuration: {0}")]
    Validation(#[source] ConfigError),
    #[error("`{key}` is the operator's to set; a caller of this server may not write it")]
    OperatorKey { key: String },
    #[error("{0}")]
    CallerProgram(#[source] ConfigError),
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a successful write leaves behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Version of the file as written.
    pub version: String,
    pub path: PathBuf,
}

/// The version of a config text: FNV-1a 64 of its bytes. Not a security measure, only a
/// change detector; an absent file is the empty text.
pub fn config_version(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}

/// The current text (empty when there is no file) and its version.
pub fn read_config_text(path: &Path) -> Result<(String, String), ConfigEditError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigEditError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let version = config_version(&text);
    Ok((text, version))
}

/// A server's caller writing the file would otherwise outlast the limits it is held to:
/// the next start reads what it wrote. So its edits may not touch the operator's keys
/// (where the limits come from), nor name programs unless it may set those.
fn refuse_callers_edits(
    inputs: &ConfigInputs,
    edits: &[ConfigEdit],
) -> Result<(), ConfigEditError> {
    let Some(limits) = &inputs.caller_limits else {
        return Ok(());
    };
    for edit in edits {
        let mut leaves = Vec::new();
        json_leaf_paths(&edit.key_path, &edit.value, &mut leaves);
        for leaf in &leaves {
            let segments: Vec<&str> = leaf.split('.').collect();
            // A profile's table is read as the top level when that profile is selected.
            let effective = match segments.as_slice() {
                ["profiles", _, rest @ ..] => rest,
                // All profiles at once: a parent of every key.
                ["profiles"] => &[],
                all => all,
            };
            for key in &limits.operator_keys {
                let operator: Vec<&str> = key.split('.').collect();
                if effective.starts_with(&operator) || operator.starts_with(effective) {
                    return Err(ConfigEditError::OperatorKey { key: leaf.clone() });
                }
            }
        }
        if !limits.allow_programs
            && let Some(key) = program_settings_json(&edit.key_path, &edit.value)
                .into_iter()
                .next()
        {
            return Err(ConfigEditError::CallerProgram(ConfigError::CallerProgram {
                key,
                origin: ConfigSource::Caller,
                rule: limits.programs_key.clone(),
            }));
        }
    }
    Ok(())
}

/// Every key path `value` sets at `key` (a removal or an empty table: `key` itself).
fn json_leaf_paths(key: &str, value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (child, inner) in map {
                json_leaf_paths(&format!("{key}.{child}"), inner, out);
            }
        }
        _ => out.push(key.to_string()),
    }
}

/// Applies `edits` to `<inputs.home>/config.toml` as one change: all or nothing, checked
/// against `expected_version` and with the config loader (from a scratch home, so the real
/// file is untouched until the result loads).
pub fn apply_edits(
    inputs: &ConfigInputs,
    edits: &[ConfigEdit],
    expected_version: Option<&str>,
) -> Result<WriteOutcome, ConfigEditError> {
    refuse_callers_edits(inputs, edits)?;
    let path = inputs.home.join(CONFIG_FILE);
    let (original, version) = read_config_text(&path)?;
    if let Some(expected) = expected_version
        && expected != version
    {
        return Err(ConfigEditError::VersionConflict {
            expected: expected.to_string(),
            actual: version,
        });
    }
    let mut document: toml_edit::DocumentMut =
        original
            .parse()
            .map_err(|err: toml_edit::TomlError| ConfigEditError::Parse {
                path: path.clone(),
                message: err.message().to_string(),
            })?;
    for edit in edits {
        apply_one(&mut document, edit)?;
    }
    let candidate = document.to_string();
    validate(inputs, &original, &candidate)?;
    interpreter_private_fs::create_dir_all(&inputs.home).map_err(|source| ConfigEditError::Io {
        action: "create",
        path: inputs.home.clone(),
        source,
    })?;
    // Keep a symlinked config.toml (dotfile managers) a symlink: replace its target.
    let write_path = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            std::fs::canonicalize(&path).map_err(|source| ConfigEditError::Io {
                action: "resolve",
                path: path.clone(),
                source,
            })?
        }
        _ => path.clone(),
    };
    write_atomically(&write_path, &candidate).map_err(|source| ConfigEditError::Io {
        action: "write",
        path: write_path.clone(),
        source,
    })?;
    Ok(WriteOutcome {
        version: config_version(&candidate),
        path,
    })
}

fn split_key_path(key_path: &str) -> Result<Vec<&str>, ConfigEditError> {
    let parts: Vec<&str> = key_path.split('.').collect();
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(ConfigEditError::InvalidKeyPath(key_path.to_string()));
    }
    Ok(parts)
}

fn apply_one(
    document: &mut toml_edit::DocumentMut,
    edit: &ConfigEdit,
) -> Result<(), ConfigEditError> {
    let parts = split_key_path(&edit.key_path)?;
    let Some((leaf, parents)) = parts.split_last() else {
        return Err(ConfigEditError::InvalidKeyPath(edit.key_path.clone()));
    };
    let not_a_table = |message: &str| ConfigEditError::NotATable {
        key_path: edit.key_path.clone(),
        message: message.to_string(),
    };
    let mut table: &mut dyn toml_edit::TableLike = document.as_table_mut();
    for part in parents {
        if !table.contains_key(part) {
            if edit.value.is_null() {
                return Ok(());
            }
            let mut new = toml_edit::Table::new();
            new.set_implicit(true);
            table.insert(part, toml_edit::Item::Table(new));
        }
        table = match table.get_mut(part) {
            Some(item) => item
                .as_table_like_mut()
                .ok_or_else(|| not_a_table(&format!("`{part}` is not a table")))?,
            None => return Err(not_a_table(&format!("`{part}` is missing"))),
        };
    }
    if edit.value.is_null() {
        table.remove(leaf);
        return Ok(());
    }
    match (&edit.value, edit.merge) {
        (serde_json::Value::Object(map), MergeStrategy::Upsert)
            if table.get(leaf).is_some_and(toml_edit::Item::is_table_like) =>
        {
            for (key, value) in map {
                apply_one(
                    document,
                    &ConfigEdit {
                        key_path: format!("{}.{key}", edit.key_path),
                        value: value.clone(),
                        merge: MergeStrategy::Upsert,
                    },
                )?;
            }
            Ok(())
        }
        (serde_json::Value::Object(map), _) => {
            let mut new = toml_edit::Table::new();
            for (key, value) in map {
                if let Some(value) = json_to_toml(value) {
                    new.insert(key, toml_edit::Item::Value(value));
                }
            }
            table.insert(leaf, toml_edit::Item::Table(new));
            Ok(())
        }
        (value, _) => {
            let mut value = json_to_toml(value)
                .ok_or_else(|| not_a_table("the value cannot be written as TOML"))?;
            match table.get_mut(leaf) {
                // Replace the value in place: the key, and the comments attached to it,
                // stay where the user put them.
                Some(toml_edit::Item::Value(old)) => {
                    let decor = old.decor().clone();
                    *value.decor_mut() = decor;
                    *old = value;
                }
                _ => {
                    table.insert(leaf, toml_edit::Item::Value(value));
                }
            }
            Ok(())
        }
    }
}

/// JSON → a TOML value; `null` has no TOML form (`None`; inside arrays and tables it is
/// dropped).
fn json_to_toml(value: &serde_json::Value) -> Option<toml_edit::Value> {
    Some(match value {
        serde_json::Value::Null => return None,
        serde_json::Value::Bool(b) => (*b).into(),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64()?.into(),
        },
        serde_json::Value::String(s) => s.as_str().into(),
        serde_json::Value::Array(items) => {
            let array: toml_edit::Array = items.iter().filter_map(json_to_toml).collect();
            toml_edit::Value::Array(array)
        }
        serde_json::Value::Object(map) => {
            let mut table = toml_edit::InlineTable::new();
            for (key, value) in map {
                if let Some(value) = json_to_toml(value) {
                    table.insert(key, value);
                }
            }
            toml_edit::Value::InlineTable(table)
        }
    })
}

/// Loads `candidate` with the engine's loader from a scratch home. A config that already
/// failed the same way before the edit is not this edit's fault and does not block it.
fn validate(inputs: &ConfigInputs, original: &str, candidate: &str) -> Result<(), ConfigEditError> {
    let scratch = tempfile::Builder::new()
        .prefix("interpreter-config-check-")
        .tempdir()
        .map_err(|source| ConfigEditError::Io {
            action: "create a scratch directory in",
            path: std::env::temp_dir(),
            source,
        })?;
    let load = |text: &str| -> Result<Result<(), ConfigError>, ConfigEditError> {
        let scratch_config = scratch.path().join(CONFIG_FILE);
        std::fs::write(&scratch_config, text).map_err(|source| ConfigEditError::Io {
            action: "write",
            path: scratch_config,
            source,
        })?;
        let mut scratch_inputs = inputs.clone();
        scratch_inputs.home = scratch.path().to_path_buf();
        // Profiles in separate files live beside the real config; the check is about
        // config.toml itself.
        scratch_inputs.profile = None;
        Ok(load_config(scratch_inputs).map(drop))
    };
    let Err(candidate_error) = load(candidate)? else {
        return Ok(());
    };
    match load(original)? {
        Err(original_error) if original_error.to_string() == candidate_error.to_string() => Ok(()),
        _ => Err(ConfigEditError::Validation(candidate_error)),
    }
}

/// Replaces `path` with `text` at once (readers see the old file or the new one, never a
/// partial write), mode 0600: config.toml may hold secrets, and it lies in the agent's
/// private home.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    interpreter_private_fs::write_atomically(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(home: &Path) -> ConfigInputs {
        ConfigInputs {
            home: home.to_path_buf(),
            cwd: home.to_path_buf(),
            ..ConfigInputs::default()
        }
    }

    #[test]
    fn edits_keep_comments_and_check_versions() {
        let home = tempfile::tempdir().expect("home");
        let path = home.path().join(CONFIG_FILE);
        std::fs::write(&path, "# my model\nmodel = \"a\"\n").expect("write");
        let (_, v1) = read_config_text(&path).expect("read");
        let edit = |key: &str, value: serde_json::Value| ConfigEdit {
            key_path: key.to_string(),
            value,
            merge: MergeStrategy::Replace,
        };
        let out = apply_edits(
            &inputs(home.path()),
            &[
                edit("model", serde_json::json!("b")),
                edit("mcp_server.approval_timeout_sec", serde_json::json!(5)),
            ],
            Some(&v1),
        )
        .expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("# my model\nmodel = \"b\"\n"), "{text}");
        assert!(text.contains("approval_timeout_sec = 5"), "{text}");
        assert_eq!(out.version, config_version(&text));
        let stale = apply_edits(
            &inputs(home.path()),
            &[edit("model", serde_json::json!("c"))],
            Some(&v1),
        );
        assert!(matches!(
            stale,
            Err(ConfigEditError::VersionConflict { .. })
        ));
        let broken = apply_edits(
            &inputs(home.path()),
            &[edit("approval_policy", serde_json::json!("sometimes"))],
            None,
        );
        assert!(
            matches!(broken, Err(ConfigEditError::Validation(_))),
            "{broken:?}"
        );
        apply_edits(
            &inputs(home.path()),
            &[edit("mcp_server", serde_json::Value::Null)],
            None,
        )
        .expect("remove");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("mcp_server"), "{text}");
    }

    #[test]
    fn a_callers_edits_may_not_touch_the_operators_keys_or_programs() {
        let home = tempfile::tempdir().expect("home");
        let limited = ConfigInputs {
            caller_limits: Some(crate::config::CallerLimits {
                sandbox: None,
                allow_programs: false,
                programs_key: "mcp_server.allow_caller_programs".to_string(),
                operator_keys: vec!["mcp_server".to_string()],
            }),
            ..inputs(home.path())
        };
        let edit = |key: &str, value: serde_json::Value| ConfigEdit {
            key_path: key.to_string(),
            value,
            merge: MergeStrategy::Replace,
        };
        for (key, value) in [
            (
                "mcp_server.max_sandbox",
                serde_json::json!("danger-full-access"),
            ),
            ("mcp_server", serde_json::Value::Null),
            (
                "profiles.x.mcp_server.allow_caller_programs",
                serde_json::json!(true),
            ),
            (
                "profiles",
                serde_json::json!({"x": {"mcp_server": {"events": false}}}),
            ),
        ] {
            let refused = apply_edits(&limited, &[edit(key, value)], None);
            assert!(
                matches!(refused, Err(ConfigEditError::OperatorKey { .. })),
                "{key}: {refused:?}"
            );
        }
        for (key, value) in [
            ("mcp_servers.x.command", serde_json::json!("sh")),
            ("mcp_servers", serde_json::json!({"x": {"url": "http://e"}})),
            ("notify", serde_json::json!(["sh"])),
        ] {
            let refused = apply_edits(&limited, &[edit(key, value)], None);
            let text = refused
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                text.contains("mcp_server.allow_caller_programs"),
                "{key}: {refused:?}"
            );
        }
        assert!(!home.path().join(CONFIG_FILE).exists());
        // The operator (no caller limits) writes them as before.
        apply_edits(
            &inputs(home.path()),
            &[edit(
                "mcp_server.max_sandbox",
                serde_json::json!("read-only"),
            )],
            None,
        )
        .expect("the operator's write");
    }
}
