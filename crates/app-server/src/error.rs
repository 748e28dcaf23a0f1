//! Errors of the app-server, each with its JSON-RPC code.

use interpreter_core::config::ConfigError;
use interpreter_core::config::edit::ConfigEditError;
use interpreter_core::store::{RUNS_ELSEWHERE_CODE, StoreError};
use interpreter_core::{CoreError, ErrorKind};
use serde_json::json;

/// Max total characters of text in one `input[]`, as the reference.
pub(crate) const MAX_INPUT_CHARS: usize = 1_048_576;

use crate::protocol::v2::ConfigWriteErrorCode;
use crate::protocol::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, JsonRpcError, METHOD_NOT_FOUND,
};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppServerError {
    #[error("Not initialized")]
    NotInitialized,
    #[error("Already initialized")]
    AlreadyInitialized,
    /// A method this server does not serve: `-32601`, as JSON-RPC says and as the other
    /// front ends answer. (Codex answers `-32600 "Invalid request: unknown variant"`; its
    /// SDKs take `-32601` for "method not found", which is what it is.)
    #[error("{}", interpreter_transport::jsonrpc::method_not_found_message(.0))]
    UnknownMethod(String),
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    #[error("Input exceeds the maximum length of {} characters.", MAX_INPUT_CHARS)]
    InputTooLarge { actual: usize },
    /// A precondition of the request does not hold (`-32600`, like the reference).
    #[error("{0}")]
    InvalidRequest(String),
    #[error("thread not found: {0}")]
    ThreadNotFound(String),
    #[error("failed to load configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    ConfigWrite(#[from] ConfigEditError),
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Core(CoreError),
    #[error("{0}")]
    Internal(String),
}

/// A thread the store does not have is "thread not found", as for the engine.
impl From<StoreError> for AppServerError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(id) => Self::ThreadNotFound(id.to_string()),
            other => Self::Store(other),
        }
    }
}

/// The engine's errors keep their kind ([`CoreError::kind`]); only the two whose message
/// this server words itself are unwrapped.
impl From<CoreError> for AppServerError {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::ThreadNotFound(id) => Self::ThreadNotFound(id.to_string()),
            CoreError::Config(e) => Self::Config(e),
            CoreError::Store(e) => Self::from(e),
            other => Self::Core(other),
        }
    }
}

/// The one table from the engine's kind of failure to this wire's error.
pub(crate) fn rpc_for_kind(kind: ErrorKind, message: String) -> JsonRpcError {
    match kind {
        // As Codex: a thread it does not have is an invalid request.
        ErrorKind::NotFound | ErrorKind::InvalidRequest | ErrorKind::Busy => {
            JsonRpcError::new(INVALID_REQUEST, message)
        }
        ErrorKind::InvalidParams => JsonRpcError::new(INVALID_PARAMS, message),
        // Another replica of a fleet runs the thread: nothing happened here, and the
        // client may retry (the connection's replica cannot relay that turn).
        ErrorKind::RunsElsewhere(data) => {
            let rpc = JsonRpcError::new(i64::from(RUNS_ELSEWHERE_CODE), message);
            match serde_json::to_value(data) {
                Ok(data) => rpc.with_data(data),
                Err(_) => rpc,
            }
        }
        ErrorKind::Unavailable | ErrorKind::Internal => JsonRpcError::new(INTERNAL_ERROR, message),
    }
}

impl AppServerError {
    pub fn to_rpc(&self) -> JsonRpcError {
        let message = self.to_string();
        match self {
            Self::NotInitialized | Self::AlreadyInitialized | Self::InvalidRequest(_) => {
                JsonRpcError::new(INVALID_REQUEST, message)
            }
            Self::UnknownMethod(_) => JsonRpcError::new(METHOD_NOT_FOUND, message),
            Self::ThreadNotFound(_) => JsonRpcError::new(INVALID_REQUEST, message),
            Self::InvalidParams(_) => JsonRpcError::new(INVALID_PARAMS, message),
            Self::InputTooLarge { actual } => {
                JsonRpcError::new(INVALID_PARAMS, message).with_data(json!({
                    "input_error_code": "input_too_large",
                    "max_chars": MAX_INPUT_CHARS,
                    "actual_chars": actual,
                }))
            }
            Self::Store(err) => rpc_for_kind(err.kind(), message),
            Self::Core(err) => rpc_for_kind(err.kind(), message),
            Self::Config(_) => JsonRpcError::new(INVALID_REQUEST, message),
            Self::ConfigWrite(err) => {
                let code = match err {
                    ConfigEditError::VersionConflict { .. } => {
                        ConfigWriteErrorCode::ConfigVersionConflict
                    }
                    ConfigEditError::InvalidKeyPath(_) | ConfigEditError::NotATable { .. } => {
                        ConfigWriteErrorCode::ConfigPathNotFound
                    }
                    ConfigEditError::Validation(_) | ConfigEditError::Parse { .. } => {
                        ConfigWriteErrorCode::ConfigValidationError
                    }
                    // What the caller may not write is, to it, a layer it cannot write.
                    ConfigEditError::Io { .. }
                    | ConfigEditError::OperatorKey { .. }
                    | ConfigEditError::CallerProgram(_) => {
                        ConfigWriteErrorCode::ConfigLayerReadonly
                    }
                };
                JsonRpcError::new(INVALID_REQUEST, message)
                    .with_data(json!({ "config_write_error_code": code }))
            }
            Self::Internal(_) => JsonRpcError::new(INTERNAL_ERROR, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_table() {
        let id = interpreter_protocol::ThreadId::new();
        let code = |kind| rpc_for_kind(kind, String::new()).code;
        assert_eq!(code(ErrorKind::NotFound), INVALID_REQUEST);
        assert_eq!(code(ErrorKind::InvalidRequest), INVALID_REQUEST);
        assert_eq!(code(ErrorKind::Busy), INVALID_REQUEST);
        assert_eq!(code(ErrorKind::InvalidParams), INVALID_PARAMS);
        assert_eq!(code(ErrorKind::Unavailable), INTERNAL_ERROR);
        assert_eq!(code(ErrorKind::Internal), INTERNAL_ERROR);
        assert_eq!(
            code(ErrorKind::RunsElsewhere(
                interpreter_core::store::RunsElsewhere::new(id, "r")
            )),
            i64::from(RUNS_ELSEWHERE_CODE)
        );
        // The engine's own messages stay; a missing thread is worded as Codex words it.
        let missing = AppServerError::from(CoreError::ThreadNotFound(id)).to_rpc();
        assert_eq!(missing.code, INVALID_REQUEST);
        assert_eq!(missing.message, format!("thread not found: {id}"));
    }

    #[test]
    fn a_thread_running_on_another_replica_is_a_retryable_refusal() {
        let thread_id = interpreter_protocol::ThreadId::new();
        let owned = StoreError::OwnedElsewhere {
            thread_id,
            owner: "replica-2".to_string(),
            internal_url: None,
        };
        for err in [
            AppServerError::from(CoreError::Store(owned)),
            AppServerError::from(StoreError::OwnedElsewhere {
                thread_id,
                owner: "replica-2".to_string(),
                internal_url: None,
            }),
        ] {
            let rpc = err.to_rpc();
            assert_eq!(rpc.code, i64::from(RUNS_ELSEWHERE_CODE));
            let data = rpc.data.unwrap_or_default();
            assert_eq!(data["retryable"], true);
            assert_eq!(data["owner"], "replica-2");
            assert_eq!(data["threadId"], thread_id.to_string());
        }
    }
}
