//! What the suites share: reading a whole response within a deadline, and its items.

use std::time::Duration;

use interpreter_model_client::{ModelClient, Prompt, ProviderError, ResponseEvent};
use interpreter_protocol::ResponseItem;
use tokio_util::sync::CancellationToken;

/// Generous upper bound so a broken client fails the test instead of hanging it.
pub(crate) const TEST_DEADLINE: Duration = Duration::from_secs(30);

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
