//! JSON-RPC framing shared by every method: ids, errors, and the message shapes.
//!
//! As in the reference, the `"jsonrpc": "2.0"` member is optional on input and never sent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id: a string or an integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Integer(n) => write!(f, "{n}"),
            Self::String(s) => f.write_str(s),
        }
    }
}

pub use interpreter_transport::jsonrpc::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
/// Ingress saturated; retry with backoff.
pub const SERVER_OVERLOADED: i64 = -32001;

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl JsonRpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// A client→server or server→client request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcRequest {
    pub id: RequestId,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    /// The caller's W3C trace context (a sibling of `params`, as Codex's JSON-RPC carries
    /// it): the turn a request starts is a child of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<interpreter_telemetry::W3cTraceContext>,
}

/// A notification; server notifications also carry `emittedAtMs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonRpcNotification {
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emitted_at_ms: Option<i64>,
}

/// A successful response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcResponse {
    pub id: RequestId,
    pub result: Value,
}

/// An error response (`id` is null when the request could not be read at all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcErrorResponse {
    pub id: Option<RequestId>,
    pub error: JsonRpcError,
}

/// Any message, told apart by its members.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonRpcMessage {
    Request(JsonRpcRequest),
    Notification(JsonRpcNotification),
    Response(JsonRpcResponse),
    Error(JsonRpcErrorResponse),
}

impl JsonRpcMessage {
    /// Classify a decoded JSON value. `Err` carries the id (when there is one) and why the
    /// value is not a message.
    pub fn from_value(value: Value) -> Result<Self, (Option<RequestId>, String)> {
        let Value::Object(mut object) = value else {
            return Err((None, "a JSON-RPC message must be an object".into()));
        };
        if let Some(version) = object.remove("jsonrpc")
            && version != Value::String("2.0".into())
        {
            return Err((None, "`jsonrpc` must be \"2.0\" when present".into()));
        }
        let id = match object.get("id") {
            None | Some(Value::Null) => None,
            Some(raw) => Some(
                serde_json::from_value::<RequestId>(raw.clone())
                    .map_err(|_| (None, "`id` must be a string or an integer".to_string()))?,
            ),
        };
        let value = Value::Object(object.clone());
        let fail = |e: serde_json::Error, id: Option<RequestId>| (id, e.to_string());
        if object.contains_key("method") {
            return match id {
                Some(id) => serde_json::from_value(value)
                    .map(Self::Request)
                    .map_err(|e| fail(e, Some(id))),
                None => serde_json::from_value(value)
                    .map(Self::Notification)
                    .map_err(|e| fail(e, None)),
            };
        }
        if object.contains_key("error") {
            return serde_json::from_value(value)
                .map(Self::Error)
                .map_err(|e| fail(e, id));
        }
        if object.contains_key("result") {
            return serde_json::from_value(value)
                .map(Self::Response)
                .map_err(|e| fail(e, id));
        }
        Err((id, "not a request, notification or response".into()))
    }
}

/// Milliseconds since the Unix epoch, for `emittedAtMs`, `startedAtMs` and the like.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_are_told_apart_with_or_without_the_jsonrpc_member() {
        let request = JsonRpcMessage::from_value(json!({"id": 1, "method": "thread/list"}));
        assert!(matches!(request, Ok(JsonRpcMessage::Request(r)) if r.id == RequestId::Integer(1)));
        let request = JsonRpcMessage::from_value(
            json!({"jsonrpc": "2.0", "id": "a", "method": "x", "params": {}}),
        );
        assert!(matches!(request, Ok(JsonRpcMessage::Request(_))));
        let note = JsonRpcMessage::from_value(json!({"method": "initialized"}));
        assert!(matches!(note, Ok(JsonRpcMessage::Notification(_))));
        let response = JsonRpcMessage::from_value(json!({"id": "srv-0", "result": {}}));
        assert!(matches!(response, Ok(JsonRpcMessage::Response(_))));
        let error = JsonRpcMessage::from_value(
            json!({"id": "srv-1", "error": {"code": -32601, "message": "no"}}),
        );
        assert!(matches!(error, Ok(JsonRpcMessage::Error(e)) if e.error.code == METHOD_NOT_FOUND));
        for bad in [
            json!([]),
            json!({"jsonrpc": "1.0", "id": 1, "method": "x"}),
            json!({"id": 1.5, "method": "x"}),
            json!({"id": 1}),
        ] {
            assert!(JsonRpcMessage::from_value(bad.clone()).is_err(), "{bad}");
        }
    }
}
