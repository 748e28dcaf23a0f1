//! Which model servers on this machine answer: the probe behind `--oss`.
//!
//! Each candidate provider is asked for its model list at its configured `base_url`
//! (so a `[model_providers.ollama] base_url = ...` override is what gets asked), all at
//! once and each within a short deadline: a server that is not running refuses the
//! connection at once, and one that hangs costs at most the deadline. Ollama is also asked
//! at its own `/api/tags`, which every Ollama version serves. Which answer wins is the
//! caller's choice (the config loader's).

use std::collections::HashMap;
use std::time::Duration;

use crate::model_list::{ModelListError, ModelListing, list_models, list_ollama_tags};
use crate::provider::ModelProviderInfo;

/// Deadline of each probe: long enough for a loaded machine to answer a local request,
/// short enough that `--oss` starts promptly when a server hangs.
pub const LOCAL_PROBE_DEADLINE: Duration = Duration::from_millis(1500);

/// What one candidate answered.
#[derive(Debug)]
pub struct LocalServerProbe {
    pub provider_id: String,
    /// The provider's display name (`Ollama`, `LM Studio`, ...).
    pub name: String,
    /// The configured `base_url`, as asked.
    pub base_url: String,
    pub answer: Result<ModelListing, ModelListError>,
}

/// Asks every candidate at once; the result keeps the candidates' order.
pub async fn probe_local_servers(
    candidates: &[(String, ModelProviderInfo)],
    env: &HashMap<String, String>,
    deadline: Duration,
) -> Vec<LocalServerProbe> {
    let probes = candidates.iter().map(|(provider_id, provider)| async move {
        let answer = if provider_id == "ollama" {
            let (models, tags) = tokio::join!(
                list_models(provider_id, provider, env, deadline),
                list_ollama_tags(provider_id, provider, env, deadline),
            );
            // `/v1/models` is the list the chat API serves from; the tags stand in for
            // servers too old to have it.
            models.or_else(|err| tags.map_err(|_| err))
        } else {
            list_models(provider_id, provider, env, deadline).await
        };
        LocalServerProbe {
            provider_id: provider_id.clone(),
            name: provider.name.clone(),
            base_url: provider.base_url.clone().unwrap_or_default(),
            answer,
        }
    });
    futures::future::join_all(probes).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str, base_url: String) -> ModelProviderInfo {
        ModelProviderInfo {
            name: name.to_string(),
            base_url: Some(base_url),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_server_that_never_answers_costs_one_deadline_and_says_so() {
        // Connections complete in the kernel's backlog, and nothing ever reads them.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", silent.local_addr().unwrap());
        let candidates = vec![("ollama".to_string(), provider("Ollama", url.clone()))];
        let probes =
            probe_local_servers(&candidates, &HashMap::new(), Duration::from_millis(200)).await;
        assert_eq!(probes.len(), 1);
        match &probes[0].answer {
            Err(ModelListError::Timeout { url: asked, .. }) => {
                assert_eq!(asked, &format!("{url}/models"));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        drop(silent);
    }
}
