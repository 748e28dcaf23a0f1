//! The model providers a client may pick and edit: `modelProvider/list`,
//! `modelProvider/default/set`, `modelProvider/config/write` and
//! `modelProvider/capabilities/read`.
//!
//! Providers live in the user's config.toml (`[model_providers.ID]`, `model_provider`);
//! writes go through the engine's comment-preserving editor, which validates the result
//! like any config write. Built-in providers (`openai`, `ollama`, `lmstudio`, …) are
//! listed but not edited here: a `[model_providers.ID]` table of a built-in id is the way
//! to override one, by hand.

use std::sync::Arc;

use interpreter_core::config::edit::{self, ConfigEdit, MergeStrategy};
use interpreter_core::config::validate_provider_id;
use interpreter_model_client::{ModelProviderInfo, built_in_providers};
use serde_json::Value;

use crate::error::AppServerError;
use crate::protocol::v2;
use crate::state::{Reply, ServerState};

/// Every provider the config knows, the configured one marked as the default.
pub(crate) async fn list(state: &Arc<ServerState>) -> Result<Reply, AppServerError> {
    Reply::new(&listing(state).await?)
}

async fn listing(
    state: &Arc<ServerState>,
) -> Result<v2::ModelProviderListResponse, AppServerError> {
    let config = state.base_config().await?;
    let built_in = built_in_providers();
    let data = config
        .known_providers
        .iter()
        .map(|(id, provider)| summary(id, provider, !built_in.contains_key(id)))
        .collect();
    Ok(v2::ModelProviderListResponse {
        data,
        default_provider_id: config.model_provider_id,
        can_change_default: true,
    })
}

fn summary(id: &str, provider: &ModelProviderInfo, can_edit: bool) -> v2::ModelProviderSummary {
    v2::ModelProviderSummary {
        id: id.to_string(),
        name: provider.name.clone(),
        // A URL with credentials in it is not shown.
        base_url: provider.base_url.clone().filter(|url| !url.contains('@')),
        can_edit,
        settings: if id == "openai" {
            v2::ProviderSettings::Openai
        } else {
            v2::ProviderSettings::CustomGateway {
                auth: match (&provider.env_key, &provider.experimental_bearer_token) {
                    (Some(env_key), _) => v2::GatewayAuth::EnvironmentVariable {
                        env_key: env_key.clone(),
                    },
                    (None, Some(_)) => v2::GatewayAuth::ExternallyConfigured { env_key: None },
                    (None, None) => v2::GatewayAuth::None,
                },
            }
        },
    }
}

/// No provider here generates images or searches the web for the agent.
pub(crate) fn capabilities() -> Result<Reply, AppServerError> {
    Reply::new(&v2::ModelProviderCapabilitiesReadResponse {
        image_generation: false,
        web_search: false,
    })
}

/// `model_provider = ID` in the user config; the provider must be one the config knows.
/// Answers with the providers as they now are.
pub(crate) async fn default_set(
    state: &Arc<ServerState>,
    params: v2::ModelProviderDefaultSetParams,
) -> Result<Reply, AppServerError> {
    let config = state.base_config().await?;
    if !config.known_providers.contains_key(&params.provider_id) {
        return Err(AppServerError::InvalidParams(format!(
            "unknown model provider `{}`; modelProvider/list names the configured ones",
            params.provider_id
        )));
    }
    write(
        state,
        vec![ConfigEdit {
            key_path: "model_provider".to_string(),
            value: Value::from(params.provider_id),
            merge: MergeStrategy::Replace,
        }],
    )
    .await?;
    list(state).await
}

/// Creates or edits a custom provider (`[model_providers.ID]`: `name`, `base_url`,
/// `env_key`). Without `providerId`, a new id is made from `name`.
pub(crate) async fn config_write(
    state: &Arc<ServerState>,
    params: v2::ModelProviderConfigWriteParams,
) -> Result<Reply, AppServerError> {
    let v2::ProviderSettingsPatch::CustomGateway {
        base_url,
        env_key,
        name,
        provider_id,
    } = params.settings
    else {
        return Err(AppServerError::InvalidParams(
            "only `customGateway` providers (OpenAI-compatible endpoints) can be configured here"
                .to_string(),
        ));
    };
    let config = state.base_config().await?;
    let built_in = built_in_providers();
    let id = match provider_id {
        Some(id) => {
            if built_in.contains_key(&id) {
                return Err(AppServerError::InvalidParams(format!(
                    "`{id}` is a built-in provider; configure a new provider instead"
                )));
            }
            validate_provider_id(&id).map_err(AppServerError::InvalidParams)?;
            id
        }
        None => {
            let name = name.as_deref().ok_or_else(|| {
                AppServerError::InvalidParams(
                    "`name` is required to create a provider (or give `providerId`)".to_string(),
                )
            })?;
            new_id(name, |id| {
                config.known_providers.contains_key(id) || built_in.contains_key(id)
            })
        }
    };
    let is_new = !config.known_providers.contains_key(&id);
    let key = |field: &str| format!("model_providers.{id}.{field}");
    let mut edits = Vec::new();
    match name {
        Some(name) => edits.push(set(key("name"), Value::from(name))),
        // A new table needs a name; the id serves.
        None if is_new => edits.push(set(key("name"), Value::from(id.clone()))),
        None => {}
    }
    for (field, value) in [("base_url", base_url), ("env_key", env_key)] {
        if let Some(value) = value {
            edits.push(set(key(field), value.map_or(Value::Null, Value::from)));
        }
    }
    write(state, edits).await?;
    let config = state.base_config().await?;
    let provider = config.known_providers.get(&id).ok_or_else(|| {
        AppServerError::Internal(format!("provider `{id}` is missing after the write"))
    })?;
    Reply::new(&v2::ModelProviderConfigWriteResponse {
        provider: summary(&id, provider, true),
    })
}

fn set(key_path: String, value: Value) -> ConfigEdit {
    ConfigEdit {
        key_path,
        value,
        merge: MergeStrategy::Replace,
    }
}

/// An id made of `name`'s letters and digits (`My Gateway` → `my-gateway`), made unique
/// with a number when `taken`.
fn new_id(name: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut base = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            base.push(c.to_ascii_lowercase());
        } else if !base.is_empty() && !base.ends_with('-') {
            base.push('-');
        }
    }
    let base = match base.trim_end_matches('-') {
        "" => "provider".to_string(),
        trimmed => trimmed.to_string(),
    };
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|id| !taken(id))
        .unwrap_or(base)
}

async fn write(state: &ServerState, edits: Vec<ConfigEdit>) -> Result<(), AppServerError> {
    let inputs = state.inputs.clone();
    tokio::task::spawn_blocking(move || edit::apply_edits(&inputs, &edits, None))
        .await
        .map_err(|e| AppServerError::Internal(e.to_string()))??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_come_from_the_name_and_are_unique() {
        assert_eq!(new_id("My Gateway", |_| false), "my-gateway");
        assert_eq!(new_id("  --  ", |_| false), "provider");
        assert_eq!(
            new_id("vllm", |id| ["vllm", "vllm-2"].contains(&id)),
            "vllm-3"
        );
    }
}
