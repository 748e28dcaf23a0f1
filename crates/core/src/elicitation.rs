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
    ElicitationRequestEvent, ElicitationResponse, Event, EventMsg, RequestExpiredEvent,
    WarningEvent,
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
                request: attributed(&server, &request),
                timeout_sec: inner.timeout.as_secs(),
            }));
            let response = tokio::select! {
                answer = rx => answer.unwrap_or_else(|_| ElicitationResponse::decline()),
                () = tokio::time::sleep(inner.timeout) => {
                    inner.pending().remove(&id);
                    inner.send(EventMsg::RequestExpired(RequestExpiredEvent {
                        id: id.clone(),
                        timeout_sec: inner.timeout.as_secs(),
                    }));
                    inner.send(EventMsg::Warning(WarningEvent {
                        message: format!(
                            "MCP server `{server}` asked a question ({id}) that got no answer within {}s; declined",
                            inner.timeout.as_secs()
                        ),
                    }));
                    ElicitationResponse::decline()
                }
            };
            // An accepted form must fit what the server asked for: a front end (or a
            // client behind it) answering with anything else is treated as declining.
            let response = match (&response.action, request_schema(&request)) {
                (interpreter_protocol::ElicitationAction::Accept, Some(schema))
                    if !content_matches(schema, response.content.as_ref()) =>
                {
                    tracing::info!(
                        id,
                        "elicitation answer does not match the requested schema; declined"
                    );
                    ElicitationResponse::decline()
                }
                _ => response,
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

/// `request` with its `message` saying which MCP server asks: `MCP server `NAME` asks:
/// …`. Every front end shows this message wherever it forwards the question (to an MCP
/// client, an app-server client, an ACP client), and a server could otherwise word its
/// question exactly like the agent's own command approval.
fn attributed(server: &str, request: &serde_json::Value) -> serde_json::Value {
    let mut request = request.clone();
    if let Some(object) = request.as_object_mut() {
        let message = match object.get("message").and_then(serde_json::Value::as_str) {
            Some(text) => format!("MCP server `{server}` asks: {text}"),
            None => format!("MCP server `{server}` asks a question"),
        };
        object.insert("message".to_string(), serde_json::Value::String(message));
    }
    request
}

/// The `requestedSchema` of a form-mode request (`None` for URL mode, which has no content).
fn request_schema(request: &serde_json::Value) -> Option<&serde_json::Value> {
    match request.get("mode").and_then(|m| m.as_str()) {
        Some("url") => None,
        _ => request.get("requestedSchema"),
    }
}

/// Whether `content` fits a form's `requestedSchema`: an object with only the declared
/// properties, every `required` one present, each a value of its declared primitive type
/// (string, number, integer, boolean, or an array of strings for multi-select), within
/// its `enum` when it has one. MCP forms are flat, so this covers what a server may ask.
pub(crate) fn content_matches(
    schema: &serde_json::Value,
    content: Option<&serde_json::Value>,
) -> bool {
    use serde_json::Value;
    let Some(Value::Object(content)) = content else {
        return false;
    };
    let empty = serde_json::Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required_present = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .all(|name| content.contains_key(name));
    required_present
        && content.iter().all(|(name, value)| {
            properties
                .get(name)
                .is_some_and(|property| value_matches(property, value))
        })
}

fn value_matches(property: &serde_json::Value, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    let allowed = |v: &Value| {
        let listed = property
            .get("enum")
            .and_then(Value::as_array)
            .map(|options| options.contains(v));
        let one_of = property
            .get("oneOf")
            .and_then(Value::as_array)
            .map(|options| {
                options
                    .iter()
                    .any(|o| o.get("const").is_some_and(|c| c == v))
            });
        listed.or(one_of).unwrap_or(true)
    };
    match (property.get("type").and_then(Value::as_str), value) {
        (Some("string"), Value::String(_)) => allowed(value),
        (Some("number"), Value::Number(_)) => allowed(value),
        (Some("integer"), Value::Number(n)) => (n.is_i64() || n.is_u64()) && allowed(value),
        (Some("boolean"), Value::Bool(_)) => true,
        (Some("array"), Value::Array(items)) => {
            let item_schema = property.get("items").cloned().unwrap_or(Value::Null);
            items.iter().all(|item| {
                item.is_string()
                    && (item_schema.is_null() || value_matches_items(&item_schema, item))
            })
        }
        _ => false,
    }
}

/// A multi-select item against its `items` schema (`enum`, or `anyOf` of `const`s).
fn value_matches_items(items: &serde_json::Value, item: &serde_json::Value) -> bool {
    use serde_json::Value;
    if let Some(options) = items.get("enum").and_then(Value::as_array) {
        return options.contains(item);
    }
    if let Some(options) = items.get("anyOf").and_then(Value::as_array) {
        return options
            .iter()
            .any(|o| o.get("const").is_some_and(|c| c == item));
    }
    true
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
            assert_eq!(request.request["message"], "MCP server `srv` asks: name?");
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

    #[test]
    fn accepted_content_must_fit_the_requested_schema() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer"},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "ok": {"type": "boolean"}
            },
            "required": ["name"]
        });
        let fits = |v: serde_json::Value| content_matches(&schema, Some(&v));
        assert!(fits(serde_json::json!({"name": "Ada"})));
        assert!(fits(
            serde_json::json!({"name": "Ada", "age": 3, "color": "red", "ok": true})
        ));
        assert!(!fits(serde_json::json!({"age": 3})), "required missing");
        assert!(!fits(serde_json::json!({"name": 7})), "wrong type");
        assert!(
            !fits(serde_json::json!({"name": "Ada", "age": 1.5})),
            "not an integer"
        );
        assert!(
            !fits(serde_json::json!({"name": "Ada", "color": "green"})),
            "not in enum"
        );
        assert!(
            !fits(serde_json::json!({"name": "Ada", "extra": 1})),
            "undeclared"
        );
        assert!(!fits(serde_json::json!("Ada")), "not an object");
        assert!(!content_matches(&schema, None), "no content");
    }
}
