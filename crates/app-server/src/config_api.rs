//! `config/read`, `config/value/write`, `config/batchWrite` over the user config.toml,
//! through the engine's comment-preserving editor (`interpreter_core::config::edit`).

use std::collections::BTreeMap;

use interpreter_core::config::edit::{self, CONFIG_FILE};
use serde_json::{Value, json};

use crate::error::AppServerError;
use crate::protocol::v2;
use crate::state::{Reply, ServerState};

pub(crate) async fn read(
    state: &ServerState,
    params: v2::ConfigReadParams,
) -> Result<Reply, AppServerError> {
    let path = state.inputs.home.join(CONFIG_FILE);
    let (text, version) = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || edit::read_config_text(&path))
            .await
            .map_err(|e| AppServerError::Internal(e.to_string()))??
    };
    let file: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        AppServerError::InvalidRequest(format!("failed to load configuration: {e}"))
    })?;
    let file_json = serde_json::to_value(&file).unwrap_or_else(|_| json!({}));
    let user = v2::ConfigLayerSource::User {
        file: path.to_string_lossy().into_owned(),
        profile: state.inputs.profile.clone(),
    };
    let mut origins = BTreeMap::new();
    collect_origins(&file_json, "", &mut |key| {
        origins.insert(
            key,
            v2::ConfigLayerMetadata {
                name: user.clone(),
                version: version.clone(),
            },
        );
    });
    // The effective values of the keys every client needs, resolved by the engine's
    // loader; everything else as written in the file.
    let mut config = file_json.clone();
    let mut inputs = state.inputs.clone();
    if let Some(cwd) = params.cwd {
        inputs.overrides.cwd = Some(cwd.into());
    }
    let effective =
        tokio::task::spawn_blocking(move || interpreter_core::config::load_config(inputs))
            .await
            .map_err(|e| AppServerError::Internal(e.to_string()))??;
    if let Value::Object(map) = &mut config {
        map.insert("model".into(), json!(effective.model));
        map.insert("model_provider".into(), json!(effective.model_provider_id));
        map.insert(
            "approval_policy".into(),
            json!(effective.approval_policy.as_str()),
        );
        map.insert(
            "sandbox_mode".into(),
            json!(effective.sandbox_policy.mode().as_str()),
        );
        map.insert(
            "model_reasoning_effort".into(),
            json!(effective.model_reasoning_effort.map(|e| e.as_str())),
        );
        map.insert(
            "approval_timeout_sec".into(),
            json!(effective.approval_timeout.as_secs()),
        );
    }
    let layers = params.include_layers.then(|| {
        let mut layers = vec![v2::ConfigLayer {
            name: user.clone(),
            version: version.clone(),
            config: file_json,
            disabled_reason: None,
        }];
        if !state.inputs.cli_overrides.is_empty() {
            let flags: serde_json::Map<String, Value> = state
                .inputs
                .cli_overrides
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(Value::Null)))
                .collect();
            layers.push(v2::ConfigLayer {
                name: v2::ConfigLayerSource::SessionFlags,
                version: String::new(),
                config: Value::Object(flags),
                disabled_reason: None,
            });
        }
        layers
    });
    Reply::new(&v2::ConfigReadResponse {
        config,
        origins,
        layers,
    })
}

fn collect_origins(value: &Value, prefix: &str, add: &mut impl FnMut(String)) {
    if let Value::Object(map) = value {
        for (key, value) in map {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            if value.is_object() {
                collect_origins(value, &path, add);
            } else {
                add(path);
            }
        }
    }
}

pub(crate) async fn value_write(
    state: &ServerState,
    params: v2::ConfigValueWriteParams,
) -> Result<Reply, AppServerError> {
    write(
        state,
        vec![v2::ConfigEdit {
            key_path: params.key_path,
            value: params.value,
            merge_strategy: params.merge_strategy,
        }],
        params.file_path,
        params.expected_version,
    )
    .await
}

pub(crate) async fn batch_write(
    state: &ServerState,
    params: v2::ConfigBatchWriteParams,
) -> Result<Reply, AppServerError> {
    write(
        state,
        params.edits,
        params.file_path,
        params.expected_version,
    )
    .await
}

async fn write(
    state: &ServerState,
    edits: Vec<v2::ConfigEdit>,
    file_path: Option<String>,
    expected_version: Option<String>,
) -> Result<Reply, AppServerError> {
    let user_file = state.inputs.home.join(CONFIG_FILE);
    if let Some(requested) = file_path.filter(|p| !p.is_empty())
        && std::path::Path::new(&requested) != user_file
    {
        return Err(AppServerError::InvalidRequest(format!(
            "only the user config {} can be written, not {requested}",
            user_file.display()
        )));
    }
    let edits: Vec<edit::ConfigEdit> = edits
        .into_iter()
        .map(|e| edit::ConfigEdit {
            key_path: e.key_path,
            value: e.value,
            merge: match e.merge_strategy {
                v2::MergeStrategy::Replace => edit::MergeStrategy::Replace,
                v2::MergeStrategy::Upsert => edit::MergeStrategy::Upsert,
            },
        })
        .collect();
    // A `-c` flag of this server on a written key: the write is saved, but this server
    // keeps seeing the flag's value (the reference's `okOverridden`).
    let overriding: Option<(String, Value)> = edits.iter().find_map(|e| {
        state
            .inputs
            .cli_overrides
            .iter()
            .find(|(key, _)| key == &e.key_path)
            .map(|(key, value)| {
                (
                    key.clone(),
                    serde_json::to_value(value).unwrap_or(Value::Null),
                )
            })
    });
    let inputs = state.inputs.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        edit::apply_edits(&inputs, &edits, expected_version.as_deref())
    })
    .await
    .map_err(|e| AppServerError::Internal(e.to_string()))??;
    let (status, overridden_metadata) = match overriding {
        Some((key, value)) => (
            v2::WriteStatus::OkOverridden,
            Some(json!({
                "message": format!("`{key}` is overridden by a -c flag of this server"),
                "overridingLayer": {"name": {"type": "sessionFlags"}, "version": ""},
                "effectiveValue": value,
            })),
        ),
        None => (v2::WriteStatus::Ok, None),
    };
    Reply::new(&v2::ConfigWriteResponse {
        status,
        version: outcome.version,
        file_path: outcome.path.to_string_lossy().into_owned(),
        overridden_metadata,
    })
}
