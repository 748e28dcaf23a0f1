//! `model/list` and `collaborationMode/list`.

use std::time::Duration;

use interpreter_model_client::list_models;

use crate::error::AppServerError;
use crate::protocol::v2;
use crate::state::{Reply, ServerState};

/// Deadline of the endpoint's `GET /models`; a slow or absent endpoint leaves the list to
/// the configured model.
const MODELS_TIMEOUT: Duration = Duration::from_secs(5);

fn model(id: &str, is_default: bool) -> v2::Model {
    v2::Model {
        id: id.to_string(),
        model: id.to_string(),
        upgrade: None,
        upgrade_info: None,
        availability_nux: None,
        display_name: id.to_string(),
        description: String::new(),
        model_specialty: None,
        hidden: false,
        supported_reasoning_efforts: ["low", "medium", "high"]
            .iter()
            .map(|e| v2::ReasoningEffortOption {
                reasoning_effort: (*e).to_string(),
                description: String::new(),
            })
            .collect(),
        default_reasoning_effort: "medium".to_string(),
        input_modalities: vec!["text".to_string()],
        supports_personality: false,
        multi_agent_version: None,
        additional_speed_tiers: Vec::new(),
        service_tiers: Vec::new(),
        default_service_tier: None,
        is_default,
    }
}

/// The configured model first (the provider catalog), then what the endpoint's
/// `/models` lists, without duplicates; paged by a decimal offset cursor.
pub(crate) async fn list(
    state: &ServerState,
    params: v2::ModelListParams,
) -> Result<Reply, AppServerError> {
    let offset = match params.cursor.as_deref() {
        None | Some("") => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|e| AppServerError::InvalidRequest(format!("invalid cursor: {e}")))?,
    };
    let mut inputs = state.inputs.clone();
    if let Some(provider) = params.model_provider {
        inputs.overrides.model_provider = Some(provider);
    }
    let config = tokio::task::spawn_blocking(move || interpreter_core::config::load_config(inputs))
        .await
        .map_err(|e| AppServerError::Internal(e.to_string()))??;
    let mut models = vec![model(&config.model, true)];
    for id in endpoint_models(&config).await {
        if !models.iter().any(|m| m.id == id) {
            models.push(model(&id, false));
        }
    }
    let total = models.len();
    if offset > total {
        return Err(AppServerError::InvalidRequest(format!(
            "invalid cursor: offset {offset} is past the {total} models"
        )));
    }
    let limit = params.limit.map_or(total, |l| l.max(1) as usize);
    let data: Vec<v2::Model> = models.into_iter().skip(offset).take(limit).collect();
    let end = offset + data.len();
    Reply::new(&v2::ModelListResponse {
        data,
        next_cursor: (end < total).then(|| end.to_string()),
    })
}

async fn endpoint_models(config: &interpreter_core::config::Config) -> Vec<String> {
    match list_models(
        &config.model_provider_id,
        &config.model_provider,
        &config.env,
        MODELS_TIMEOUT,
    )
    .await
    {
        Ok(listing) => listing.ids,
        Err(err) => {
            tracing::debug!("model list: {err}");
            Vec::new()
        }
    }
}

/// Built-in presets. `model: null` and `reasoning_effort: null` keep the thread's own.
pub(crate) fn collaboration_modes() -> Result<Reply, AppServerError> {
    Reply::new(&v2::CollaborationModeListResponse {
        data: vec![
            v2::CollaborationModeMask {
                name: "Plan".to_string(),
                mode: Some(v2::ModeKind::Plan),
                model: None,
                reasoning_effort: Some("medium".to_string()),
            },
            v2::CollaborationModeMask {
                name: "Default".to_string(),
                mode: Some(v2::ModeKind::Default),
                model: None,
                reasoning_effort: None,
            },
        ],
    })
}
