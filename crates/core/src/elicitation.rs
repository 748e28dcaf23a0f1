//! Elicitations from the thread's MCP servers, as an event/op pair: the engine emits
//! `elicitation_request` with an id and the server's request, the front end answers with
//! `Op::ResolveElicitation`. Nobody answering within the approval timeout counts as
//! `decline`, so a server's question never hangs a turn. Front ends only translate: exec
//! declines at once (it has nobody to ask); the MCP server forwards the question to its
//! client.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use interpreter_mcp_client::{ElicitationAction, ElicitationAnswer, ElicitationSink};
use interpreter_protocol::{
    ElicitationRequestEvent, ElicitationResponse, Event, EventMsg, WarningEvent,
};
use tokio::sync::{mpsc, oneshot};

/// The pending elicitations of one thread.
#[derive(Clone)]
pub(crate) struct ElicitationBroker {
    inner: Arc<Inner>,
}

struct Inner {
    tx_event: mpsc::UnboundedSender<Event>,
    timeout: Duration,
    /// The approval policy lets the user be asked; otherwise every question is declined
    /// at once.
    may_ask: bool,
    next_id: AtomicU64,
    pending: std::sync::Mutex<HashMap<String, oneshot::Sender<ElicitationResponse>>>,
}

impl Inner {
    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ElicitationResponse>>> {
        // Single inserts and removes only: a poisoned map is still consistent.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn send(&self, msg: EventMsg) {
        // A closed receiver means the front end is gone; the deadline then declines.
        let _ = self.tx_event.send(Event {
            id: String::new(),
            msg,
        });
    }
}

impl ElicitationBroker {
    pub(crate) fn new(
        tx_event: mpsc::UnboundedSender<Event>,
        timeout: Duration,
        may_ask: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                tx_event,
                timeout,
                may_ask,
                next_id: AtomicU64::new(1),
                pending: std::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The front end's answer to request `id`; unknown ids (answered late) are ignored.
    pub(crate) fn resolve(&self, id: &str, response: ElicitationResponse) {
        match self.inner.pending().remove(id) {
            Some(tx) => {
                let _ = tx.send(response);
            }
            None => tracing::warn!(id, "elicitation answer for no pending request; ignored"),
        }
    }
}

impl ElicitationSink for ElicitationBroker {
    fn elicit(
        &self,
        server: String,
        request: serde_json::Value,
    ) -> BoxFuture<'static, ElicitationAnswer> {
        let inner = self.inner.clone();
        Box::pin(async move {
            if !inner.may_ask {
                inner.send(EventMsg::Warning(WarningEvent {
                    message: format!(
                        "MCP server `{server}` asked a question; declined, because the approval policy turns MCP questions off"
                    ),
                }));
                return ElicitationAnswer {
                    action: ElicitationAction::Decline,
                    content: None,
                };
            }
            let id = format!(
                "mcp-elicitation-{}",
                inner.next_id.fetch_add(1, Ordering::Relaxed)
            );
            let (tx, rx) = oneshot::channel();
            inner.pending().insert(id.clone(), tx);
            inner.send(EventMsg::ElicitationRequest(ElicitationRequestEvent {
                id: id.clone(),
                server: server.clone(),
                request,
                timeout_sec: inner.timeout.as_secs(),
            }));
            let response = tokio::select! {
                answer = rx => answer.unwrap_or_else(|_| ElicitationResponse::decline()),
                () = tokio::time::sleep(inner.timeout) => {
                    inner.pending().remove(&id);
                    inner.send(EventMsg::Warning(WarningEvent {
                        message: format!(
                            "MCP server `{server}` asked a question ({id}) that got no answer within {}s; declined",
                            inner.timeout.as_secs()
                        ),
                    }));
                    ElicitationResponse::decline()
                }
            };
            ElicitationAnswer {
                action: match response.action {
                    interpreter_protocol::ElicitationAction::Accept => ElicitationAction::Accept,
                    interpreter_protocol::ElicitationAction::Decline => ElicitationAction::Decline,
                    interpreter_protocol::ElicitationAction::Cancel => ElicitationAction::Cancel,
                },
                content: response.content,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_reaches_the_server_and_silence_declines() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let broker = ElicitationBroker::new(tx, Duration::from_secs(3600), true);
        let asking = broker.elicit("srv".into(), serde_json::json!({"message": "name?"}));
        let answering = async {
            let Some(Event {
                msg: EventMsg::ElicitationRequest(request),
                ..
            }) = rx.recv().await
            else {
                panic!("no elicitation_request event");
            };
            assert_eq!(request.server, "srv");
            broker.resolve(
                &request.id,
                ElicitationResponse {
                    action: interpreter_protocol::ElicitationAction::Accept,
                    content: Some(serde_json::json!({"name": "Ada"})),
                },
            );
        };
        let (answer, ()) = tokio::join!(asking, answering);
        assert_eq!(answer.action, ElicitationAction::Accept);
        assert_eq!(answer.content, Some(serde_json::json!({"name": "Ada"})));

        let (tx, _rx) = mpsc::unbounded_channel();
        let impatient = ElicitationBroker::new(tx, Duration::from_millis(1), true);
        let answer = impatient
            .elicit("srv".into(), serde_json::json!({"message": "?"}))
            .await;
        assert_eq!(answer.action, ElicitationAction::Decline);
    }
}
