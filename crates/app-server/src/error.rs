//! Errors of the app-server, each with its JSON-RPC code.

use interpreter_core::config::ConfigError;
use interpreter_core::config::edit::ConfigEditError;
use interpreter_core::review::ReviewError;
use interpreter_core::store::{RUNS_ELSEWHERE_CODE, StoreError};
use interpreter_core::{CoreError, McpClientError};
use serde_json::json;

use crate::protocol::v2::ConfigWriteErrorCode;
use crate::protocol::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, JsonRpcError, METHOD_NOT_FOUND,
};

#[derive(Debug, thiserror::Error)]
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
    #[error(
        "Input exceeds the maximum length of {} characters.",
        crate::turns::MAX_INPUT_CHARS
    )]
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

impl From<CoreError> for AppServerError {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::ThreadNotFound(id) => Self::ThreadNotFound(id.to_string()),
            CoreError::Config(e) => Self::Config(e),
            CoreError::Store(e) => Self::from(e),
            CoreError::TurnNotFound { .. }
            | CoreError::Goal(_)
            | CoreError::Mcp(
                McpClientError::UnknownServer(_)
                | McpClientError::UnknownTool(_)
                | McpClientError::InvalidArguments(_),
            ) => Self::InvalidRequest(err.to_string()),
            // A target that names nothing reviewable is the client's to fix; a thread
            // outside git cannot be reviewed whatever the params say.
            CoreError::Review(ReviewError::InvalidTarget(_) | ReviewError::UnknownRef { .. }) => {
                Self::InvalidParams(err.to_string())
            }
            CoreError::Review(ReviewError::NotARepository(_)) => {
                Self::InvalidRequest(err.to_string())
            }
            other => Self::Core(other),
        }
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
                    "max_chars": crate::turns::MAX_INPUT_CHARS,
                    "actual_chars": actual,
                }))
            }
            Self::Store(StoreError::InvalidCursor(_)) => {
                JsonRpcError::new(INVALID_REQUEST, message)
            }
            // Another replica of a fleet runs the thread: nothing happened here, and the
            // client may retry (the connection's replica cannot relay that turn).
            Self::Store(err @ StoreError::OwnedElsewhere { .. }) => {
                let rpc = JsonRpcError::new(i64::from(RUNS_ELSEWHERE_CODE), message);
                match err
                    .runs_elsewhere()
                    .and_then(|d| serde_json::to_value(d).ok())
                {
                    Some(data) => rpc.with_data(data),
                    None => rpc,
                }
            }
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
            Self::Store(_) | Self::Core(_) | Self::Internal(_) => {
                JsonRpcError::new(INTERNAL_ERROR, message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
