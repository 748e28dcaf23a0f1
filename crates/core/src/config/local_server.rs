//! `--oss`: use the model server that answers on this machine.
//!
//! The local built-in providers (Ollama, LM Studio, llama.cpp, vLLM, in
//! [`LOCAL_PROVIDER_IDS`] order) are asked for their model lists at their configured
//! `base_url`s, all at once. The first in that order that answers becomes
//! `model_provider`; the model is the one given on the command line, else the
//! configuration's `model` when that server serves it, else the server's (its only one,
//! or the first it lists). The choice is returned as `-c`-style overrides, so it sits
//! with the other command-line settings: later `-c` flags and per-call settings (an MCP
//! call's `model`, `/model`) still win, and every config the front end loads from these
//! inputs agrees.

use interpreter_model_client::{
    LOCAL_PROBE_DEADLINE, LOCAL_PROVIDER_IDS, LocalServerProbe, ModelListError, probe_local_servers,
};
use toml::Value;

use super::error::{ConfigError, ConfigSource};
use super::load::{ConfigInputs, merged_providers, read_layered};
use super::toml_file::layer_setting;

/// The server `--oss` chose, and the model to use there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServerChoice {
    pub provider_id: String,
    /// Display name (`Ollama`).
    pub provider_name: String,
    pub base_url: String,
    pub model: String,
    /// Why this model, for the line the front end prints.
    pub model_reason: ModelReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelReason {
    /// `-m` / `-c model=` / a per-call model.
    Given,
    /// `model` in config.toml or the profile, which the server serves (or the server lists
    /// no models, so there is nothing to check it against).
    Configured,
    /// The only model the server lists.
    OnlyServed,
    /// The first of several the server lists.
    FirstServed,
    /// The first the server lists, because the configured `model` is not among them.
    ConfiguredNotServed,
}

impl LocalServerChoice {
    /// The settings that apply the choice, in `-c key=value` form.
    pub fn cli_overrides(&self) -> Vec<(String, Value)> {
        let mut overrides = vec![(
            "model_provider".to_string(),
            Value::String(self.provider_id.clone()),
        )];
        if self.model_reason != ModelReason::Given {
            overrides.push(("model".to_string(), Value::String(self.model.clone())));
        }
        overrides
    }

    /// One line saying what was chosen, for stderr.
    pub fn summary(&self) -> String {
        let why = match self.model_reason {
            ModelReason::Given => "as given",
            ModelReason::Configured => "from the config",
            ModelReason::OnlyServed => "the only one it serves",
            ModelReason::FirstServed => "the first it lists; -m picks another",
            ModelReason::ConfiguredNotServed => {
                "the first it lists: the configured model is not served there"
            }
        };
        format!(
            "--oss: using {} at {} (model_provider {}), model {} ({why})",
            self.provider_name, self.base_url, self.provider_id, self.model
        )
    }
}

/// Why `--oss` found nothing to use. One line each.
#[derive(Debug, thiserror::Error)]
pub enum LocalServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "--oss: no local model server answered ({tried}); start one (ollama serve, lms server start, llama-server, vllm serve) or point --oss at yours with -c model_providers.ollama.base_url=http://HOST:PORT/v1 (likewise lmstudio, llamacpp, vllm)"
    )]
    NoneAnswered { tried: String },
    #[error(
        "--oss: {name} at {url} serves no models; load or pull one on the server, or pass -m MODEL"
    )]
    NoModels {
        provider_id: String,
        name: String,
        url: String,
    },
}

impl LocalServerError {
    /// The local provider a long-running server (`mcp-server`, `app-server`) keeps when
    /// the probe at start finds nothing usable: the one that answered, else the first
    /// preferred. Its calls then fail naming that server until it is up, and never go to
    /// a provider elsewhere. `None` when the config itself does not load.
    pub fn fallback_provider(&self) -> Option<&str> {
        match self {
            Self::Config(_) => None,
            Self::NoneAnswered { .. } => LOCAL_PROVIDER_IDS.first().copied(),
            Self::NoModels { provider_id, .. } => Some(provider_id),
        }
    }
}

/// Probes the local servers configured in `inputs` and chooses one.
pub async fn select_local_server(
    inputs: &ConfigInputs,
) -> Result<LocalServerChoice, LocalServerError> {
    let config_path = inputs.home.join("config.toml");
    // Its warnings are raised again, and reported, by the load that follows the choice.
    let (toml, layers, _warnings) = read_layered(inputs, &config_path)?;
    let providers = merged_providers(toml.openai_base_url, toml.model_providers);
    let candidates: Vec<_> = LOCAL_PROVIDER_IDS
        .iter()
        .filter_map(|id| Some((id.to_string(), providers.get(*id)?.clone())))
        .collect();
    let configured = match inputs.overrides.model.clone() {
        Some(model) => Some((model, ModelReason::Given)),
        None => toml.model.map(|model| {
            let origin = layer_setting(&layers, &["model".to_string()]).map(|l| &l.origin);
            let reason = if origin == Some(&ConfigSource::CliOverride) {
                ModelReason::Given
            } else {
                ModelReason::Configured
            };
            (model, reason)
        }),
    }
    .filter(|(model, _)| !model.trim().is_empty());
    let probes = probe_local_servers(&candidates, &inputs.env, LOCAL_PROBE_DEADLINE).await;
    choose(&probes, configured)
}

/// The first probe in order that answered, and the model to use there.
fn choose(
    probes: &[LocalServerProbe],
    configured: Option<(String, ModelReason)>,
) -> Result<LocalServerChoice, LocalServerError> {
    let Some((probe, served)) = probes
        .iter()
        .find_map(|probe| Some((probe, &probe.answer.as_ref().ok()?.ids)))
    else {
        let tried = probes
            .iter()
            .map(|probe| match &probe.answer {
                Err(err) => format!("{}: {}", probe.name, describe(err, &probe.base_url)),
                Ok(_) => format!("{}: answered", probe.name),
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(LocalServerError::NoneAnswered { tried });
    };
    let serves = |model: &str| {
        served
            .iter()
            .any(|id| id == model || id.strip_suffix(":latest") == Some(model))
    };
    let (model, model_reason) = match configured {
        Some((model, ModelReason::Given)) => (model, ModelReason::Given),
        Some((model, _)) if served.is_empty() || serves(&model) => (model, ModelReason::Configured),
        configured => {
            let Some(first) = served.first() else {
                return Err(LocalServerError::NoModels {
                    provider_id: probe.provider_id.clone(),
                    name: probe.name.clone(),
                    url: probe.base_url.clone(),
                });
            };
            let reason = if configured.is_some() {
                ModelReason::ConfiguredNotServed
            } else if served.len() == 1 {
                ModelReason::OnlyServed
            } else {
                ModelReason::FirstServed
            };
            (first.clone(), reason)
        }
    };
    Ok(LocalServerChoice {
        provider_id: probe.provider_id.clone(),
        provider_name: probe.name.clone(),
        base_url: probe.base_url.clone(),
        model,
        model_reason,
    })
}

/// A failed probe in a few words, naming the URL (the base URL when nothing was asked).
fn describe(err: &ModelListError, base_url: &str) -> String {
    match err {
        ModelListError::NoBaseUrl => "base_url is not set".to_string(),
        ModelListError::Provider(err) => format!("{base_url}: {err}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use interpreter_model_client::ModelListing;
    use pretty_assertions::assert_eq;

    fn answered(id: &str, ids: &[&str]) -> LocalServerProbe {
        LocalServerProbe {
            provider_id: id.to_string(),
            name: id.to_uppercase(),
            base_url: format!("http://{id}/v1"),
            answer: Ok(ModelListing {
                url: format!("http://{id}/v1/models"),
                ids: ids.iter().map(|id| id.to_string()).collect(),
            }),
        }
    }

    fn refused(id: &str) -> LocalServerProbe {
        LocalServerProbe {
            provider_id: id.to_string(),
            name: id.to_uppercase(),
            base_url: format!("http://{id}/v1"),
            answer: Err(ModelListError::Unreachable {
                url: format!("http://{id}/v1/models"),
                detail: "connection failed: Connection refused".to_string(),
            }),
        }
    }

    fn pick(
        probes: &[LocalServerProbe],
        configured: Option<(&str, ModelReason)>,
    ) -> (String, String, ModelReason) {
        let choice = choose(probes, configured.map(|(m, r)| (m.to_string(), r))).unwrap();
        (choice.provider_id, choice.model, choice.model_reason)
    }

    #[test]
    fn the_first_answering_server_in_order_wins() {
        let probes = [
            refused("ollama"),
            answered("lmstudio", &["a", "b"]),
            answered("llamacpp", &["c"]),
        ];
        assert_eq!(
            pick(&probes, None),
            ("lmstudio".into(), "a".into(), ModelReason::FirstServed)
        );
        assert_eq!(
            pick(&probes[2..], None),
            ("llamacpp".into(), "c".into(), ModelReason::OnlyServed)
        );
    }

    #[test]
    fn a_given_model_always_wins_and_a_configured_one_when_served() {
        let probes = [answered("ollama", &["qwen:latest", "llama3"])];
        assert_eq!(
            pick(&probes, Some(("other", ModelReason::Given))),
            ("ollama".into(), "other".into(), ModelReason::Given)
        );
        assert_eq!(
            pick(&probes, Some(("qwen", ModelReason::Configured))),
            ("ollama".into(), "qwen".into(), ModelReason::Configured)
        );
        assert_eq!(
            pick(&probes, Some(("gpt-5", ModelReason::Configured))),
            (
                "ollama".into(),
                "qwen:latest".into(),
                ModelReason::ConfiguredNotServed
            )
        );
        let choice = choose(&probes, Some(("m".into(), ModelReason::Given))).unwrap();
        assert_eq!(
            choice.cli_overrides(),
            vec![("model_provider".into(), Value::String("ollama".into()))]
        );
    }

    #[test]
    fn nothing_answering_names_every_url_tried() {
        let err = choose(&[refused("ollama"), refused("vllm")], None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("--oss: no local model server answered (OLLAMA: cannot reach http://ollama/v1/models: connection failed: Connection refused; VLLM: cannot reach http://vllm/v1/models"),
            "{text}"
        );
        assert!(
            text.contains("-c model_providers.ollama.base_url="),
            "{text}"
        );
        assert!(!text.contains('\n'));
        let err = choose(&[answered("ollama", &[])], None).unwrap_err();
        assert!(err.to_string().contains("serves no models"), "{err}");
    }
}
