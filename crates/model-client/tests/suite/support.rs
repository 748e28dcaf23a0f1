//! What the suites share: the mock provider on a wire, a client with its key, reading a
//! whole response within a deadline, and its items.

use std::time::Duration;

use std::collections::HashMap;

use interpreter_model_client::{
    ModelClient, ModelProviderInfo, Prompt, ProviderError, ResponseEvent, WireApi,
};
use interpreter_protocol::{ReasoningEffort, ResponseItem};
use interpreter_test_support::MockModelServer;
use tokio_util::sync::CancellationToken;

/// Generous upper bound so a broken client fails the test instead of hanging it.
pub(crate) const TEST_DEADLINE: Duration = Duration::from_secs(30);

/// Provider `mock` at `server` on `wire_api`, its key in `MODEL_API_KEY`, two retries.
pub(crate) fn provider(server: &MockModelServer, wire_api: WireApi) -> ModelProviderInfo {
    ModelProviderInfo {
        name: "mock".into(),
        base_url: Some(server.base_url()),
        env_key: Some("MODEL_API_KEY".into()),
        wire_api,
        request_max_retries: Some(2),
        ..Default::default()
    }
}

/// A client of model `test-model` on `info`, with `MODEL_API_KEY` set.
pub(crate) fn client_for(
    info: ModelProviderInfo,
    effort: Option<ReasoningEffort>,
) -> anyhow::Result<ModelClient> {
    let env = HashMap::from([("MODEL_API_KEY".to_string(), "sk-test".to_string())]);
    Ok(ModelClient::new(
        "mock".into(),
        info,
        "test-model".into(),
        effort,
        &env,
    )?)
}

/// Streams one response to the end and returns its events, or the first error.
pub(crate) async fn collect(
    client: &ModelClient,
    prompt: &Prompt,
) -> Result<Vec<ResponseEvent>, ProviderError> {
    let cancel = CancellationToken::new();
    let run = async {
        let mut stream = client.stream(prompt, &cancel).await?;
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event?);
        }
        Ok(events)
    };
    match tokio::time::timeout(TEST_DEADLINE, run).await {
        Ok(result) => result,
        Err(_) => panic!("client did not finish within {TEST_DEADLINE:?}"),
    }
}

/// The finished items among `events`, in order.
pub(crate) fn done_items(events: &[ResponseEvent]) -> Vec<ResponseItem> {
    events
        .iter()
        .filter_map(|event| match event {
            ResponseEvent::OutputItemDone(item) => Some(item.clone()),
            _ => None,
        })
        .collect()
}
