//! Errors of durable threads. File and database errors carry the path involved, because
//! "permission denied" alone does not tell a user which file to fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to serialize a rollout record for {}: {source}", path.display())]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("thread index {}: {source}", path.display())]
    Index {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A listing cursor that no listing produced.
    #[error("invalid cursor: `{0}`")]
    InvalidCursor(String),
    #[error("invalid value in thread index {}: {message}", path.display())]
    IndexValue { path: PathBuf, message: String },
    /// A rollout that exists but holds no thread (0 bytes, or no readable metadata).
    #[error("rollout {} cannot be used: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    #[error("writing to {} did not finish within {seconds} s", path.display())]
    WriteTimeout { path: PathBuf, seconds: u64 },
    #[error("the rollout writer for {} stopped unexpectedly: {message}", path.display())]
    WriterFailed { path: PathBuf, message: String },
}

impl RolloutError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
