//! JSON-RPC 2.0 as every front end frames it: the standard error codes, and what a line
//! that cannot be served is answered with (the same code and words on every server).

use serde_json::{Value, json};

use crate::lines::MAX_LINE_BYTES;

/// The line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON, but not a request, notification or response; a line too long to read; a
/// precondition of the request that does not hold.
pub const INVALID_REQUEST: i64 = -32600;
/// A method the server does not serve.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Params that do not decode.
pub const INVALID_PARAMS: i64 = -32602;
/// Anything the server failed at.
pub const INTERNAL_ERROR: i64 = -32603;

/// Why a line got an error answer before any method saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unservable {
    /// Longer than [`MAX_LINE_BYTES`]; nothing of it was kept.
    TooLong,
    /// Not JSON (or not UTF-8), with the parser's words.
    NotJson(String),
}

impl Unservable {
    pub fn code(&self) -> i64 {
        match self {
            Self::TooLong => INVALID_REQUEST,
            Self::NotJson(_) => PARSE_ERROR,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Self::TooLong => format!(
                "Invalid request: message longer than {MAX_LINE_BYTES} bytes; it was dropped"
            ),
            Self::NotJson(error) => format!("Parse error: {error}"),
        }
    }

    /// The `error` member of the answer (sent with `id: null`: the id of a line that
    /// could not be read is unknown).
    pub fn error_object(&self) -> Value {
        json!({ "code": self.code(), "message": self.message() })
    }
}

/// The value on one line, or why it cannot be served.
pub fn decode(line: &[u8]) -> Result<Value, Unservable> {
    serde_json::from_slice(line).map_err(|error| Unservable::NotJson(error.to_string()))
}

/// The message for a method this server does not serve, the same on every server.
pub fn method_not_found_message(method: &str) -> String {
    format!("method not found: {method}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unservable_lines_have_one_answer_everywhere() {
        assert_eq!(decode(b"{\"a\":").map_err(|e| e.code()), Err(PARSE_ERROR));
        assert_eq!(decode(b"[1]"), Ok(json!([1])));
        let too_long = Unservable::TooLong.error_object();
        assert_eq!(too_long["code"], INVALID_REQUEST);
        assert!(
            too_long["message"]
                .as_str()
                .is_some_and(|m| m.contains("16777216 bytes")),
            "{too_long}"
        );
        assert_eq!(method_not_found_message("x/y"), "method not found: x/y");
    }
}
