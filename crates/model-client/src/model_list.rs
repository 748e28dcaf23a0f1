//! `GET {base_url}/models`: the OpenAI-compatible list of the models a server serves.
//!
//! One owner for asking a provider what it serves: `interpreter doctor` checks the
//! configured endpoint with it, the app-server lists models with it, and `--oss` finds
//! the local server that answers with it (see [`crate::local_servers`]). The request
//! carries the provider's credentials, headers and query parameters, exactly as model
//! requests do, and the whole exchange (body included) has one deadline.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{ACCEPT, HeaderValue};
use serde::Deserialize;

use crate::client::{classify_transport_error, provider_headers, read_body_capped};
use crate::error::{ProviderError, body_summary, collapse_whitespace};
use crate::limits::{human_bytes, to_usize};
use crate::provider::ModelProviderInfo;

/// How much of an unexpected response body an error quotes.
const BODY_EXCERPT_CHARS: usize = 120;
/// Largest model list read: thousands of models with their metadata fit many times over.
const MODEL_LIST_CAP: u64 = 16 * 1024 * 1024;

/// What a server said it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelListing {
    /// The URL that answered.
    pub url: String,
    /// Model ids in the server's order.
    pub ids: Vec<String>,
}

/// Why a model list could not be had. Each message names the URL asked.
#[derive(Debug, thiserror::Error)]
pub enum ModelListError {
    #[error("base_url is not set")]
    NoBaseUrl,
    /// The provider's headers cannot be built (an invalid header name or value).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("no answer from {url} within {deadline:?}")]
    Timeout { url: String, deadline: Duration },
    #[error("cannot reach {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{url} is reachable but answered HTTP {status}: {excerpt}")]
    Status {
        url: String,
        status: u16,
        excerpt: String,
    },
    #[error("{url} is reachable but its model list is not readable: {excerpt}")]
    Unreadable { url: String, excerpt: String },
}

impl ModelListError {
    /// The server refused the credentials (HTTP 401 or 403).
    pub fn is_auth_refusal(&self) -> bool {
        matches!(
            self,
            Self::Status {
                status: 401 | 403,
                ..
            }
        )
    }
}

/// `{"data": [{"id": ...}, ...]}`.
#[derive(Debug, Deserialize)]
struct OpenAiModelList {
    data: Vec<OpenAiModel>,
}

#[derive(Debug, Deserialize)]
struct OpenAiModel {
    id: String,
}

/// Ollama's own `GET /api/tags`: `{"models": [{"name": ...}, ...]}`.
#[derive(Debug, Deserialize)]
struct OllamaTags {
    models: Vec<OllamaModel>,
}

#[derive(Debug, Deserialize)]
struct OllamaModel {
    name: String,
}

/// `GET {base_url}/models` of this provider, within `deadline`.
pub async fn list_models(
    provider_id: &str,
    provider: &ModelProviderInfo,
    env: &HashMap<String, String>,
    deadline: Duration,
) -> Result<ModelListing, ModelListError> {
    let base_url = base_url(provider)?;
    let url = format!("{base_url}/models");
    fetch_listing(
        provider_id,
        provider,
        env,
        url,
        deadline,
        |list: OpenAiModelList| list.data.into_iter().map(|model| model.id).collect(),
    )
    .await
}

/// Ollama's `GET /api/tags`, next to its `/v1` API root: what older Ollama servers
/// without `/v1/models` answer.
pub(crate) async fn list_ollama_tags(
    provider_id: &str,
    provider: &ModelProviderInfo,
    env: &HashMap<String, String>,
    deadline: Duration,
) -> Result<ModelListing, ModelListError> {
    let base_url = base_url(provider)?;
    let root = base_url.strip_suffix("/v1").unwrap_or(&base_url);
    let url = format!("{root}/api/tags");
    fetch_listing(
        provider_id,
        provider,
        env,
        url,
        deadline,
        |tags: OllamaTags| tags.models.into_iter().map(|model| model.name).collect(),
    )
    .await
}

/// `GET url`, read as the list type `T`, whose model ids `ids` takes out.
async fn fetch_listing<T: serde::de::DeserializeOwned>(
    provider_id: &str,
    provider: &ModelProviderInfo,
    env: &HashMap<String, String>,
    url: String,
    deadline: Duration,
    ids: impl FnOnce(T) -> Vec<String>,
) -> Result<ModelListing, ModelListError> {
    let body = get(provider_id, provider, env, &url, deadline).await?;
    match serde_json::from_slice::<T>(&body) {
        Ok(list) => Ok(ModelListing {
            url,
            ids: ids(list),
        }),
        Err(_) => Err(ModelListError::Unreadable {
            excerpt: excerpt(&body),
            url,
        }),
    }
}

fn base_url(provider: &ModelProviderInfo) -> Result<String, ModelListError> {
    provider
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(|url| url.trim_end_matches('/').to_string())
        .ok_or(ModelListError::NoBaseUrl)
}

/// The body of a successful `GET url`.
async fn get(
    provider_id: &str,
    provider: &ModelProviderInfo,
    env: &HashMap<String, String>,
    url: &str,
    deadline: Duration,
) -> Result<Vec<u8>, ModelListError> {
    let mut headers = provider_headers(provider_id, provider, env)?;
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    let http = reqwest::Client::builder()
        .connect_timeout(deadline)
        .build()
        .map_err(|err| ModelListError::Unreachable {
            url: url.to_string(),
            detail: format!("cannot build an HTTP client: {err}"),
        })?;
    let mut request = http.get(url).headers(headers);
    if let Some(query) = &provider.query_params {
        request = request.query(query);
    }
    let exchange = async {
        let response = request.send().await?;
        let status = response.status();
        let body = read_body_capped(response, to_usize(MODEL_LIST_CAP)).await?;
        Ok::<_, reqwest::Error>((status, body))
    };
    let (status, body) = match tokio::time::timeout(deadline, exchange).await {
        Err(_) => {
            return Err(ModelListError::Timeout {
                url: url.to_string(),
                deadline,
            });
        }
        Ok(Err(err)) => {
            return Err(ModelListError::Unreachable {
                url: url.to_string(),
                detail: describe_transport_error(&err),
            });
        }
        Ok(Ok((status, (body, complete)))) => {
            if !complete && status.is_success() {
                return Err(ModelListError::Unreadable {
                    url: url.to_string(),
                    excerpt: format!("the answer is over {}", human_bytes(MODEL_LIST_CAP)),
                });
            }
            (status, body)
        }
    };
    if !status.is_success() {
        return Err(ModelListError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            excerpt: excerpt(&body),
        });
    }
    Ok(body)
}

/// The transport's innermost cause ("Connection refused (os error 111)"), after what
/// kind of failure it was.
fn describe_transport_error(err: &reqwest::Error) -> String {
    let kind = if err.is_connect() {
        "connection failed"
    } else if err.is_timeout() {
        "timed out"
    } else {
        "request failed"
    };
    let (_, cause) = classify_transport_error(err);
    let cause = if cause.is_empty() {
        err.to_string()
    } else {
        cause
    };
    collapse_whitespace(&format!("{kind}: {cause}"))
}

/// A body quoted in an error: summarised as a failed model request's body is (see
/// [`body_summary`]), shorter.
fn excerpt(body: &[u8]) -> String {
    let summary = body_summary(&String::from_utf8_lossy(body), None, BODY_EXCERPT_CHARS);
    if summary.is_empty() {
        "(empty body)".to_string()
    } else {
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_one_short_line() {
        assert_eq!(excerpt(b""), "(empty body)");
        assert_eq!(excerpt(b"a\n  b"), "a b");
        let long = "x".repeat(500);
        assert_eq!(excerpt(long.as_bytes()).len(), BODY_EXCERPT_CHARS + 3);
    }
}
