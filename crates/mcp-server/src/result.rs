//! Building `tools/call` results. Every result, success or failure, carries
//! `structuredContent {threadId, content}` so it validates against the tools'
//! `outputSchema` (strict clients reject a result without it); `threadId` is empty when
//! no thread exists yet.

use interpreter_protocol::ThreadId;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Serialize)]
struct TextContent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Debug, Serialize)]
struct Structured<'a> {
    #[serde(rename = "threadId")]
    thread_id: String,
    content: &'a str,
}

#[derive(Debug, Serialize)]
struct CallToolResult<'a> {
    content: [TextContent<'a>; 1],
    #[serde(rename = "structuredContent")]
    structured_content: Structured<'a>,
    #[serde(rename = "isError", skip_serializing_if = "std::ops::Not::not")]
    is_error: bool,
}

fn build(thread_id: Option<ThreadId>, text: &str, is_error: bool) -> Value {
    let result = CallToolResult {
        content: [TextContent { kind: "text", text }],
        structured_content: Structured {
            thread_id: thread_id.map(|t| t.to_string()).unwrap_or_default(),
            content: text,
        },
        is_error,
    };
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// A finished turn.
pub fn success(thread_id: ThreadId, text: &str) -> Value {
    build(Some(thread_id), text, false)
}

/// An agent-level failure on a known thread.
pub fn thread_error(thread_id: ThreadId, text: &str) -> Value {
    build(Some(thread_id), text, true)
}

/// A failure before any thread exists (bad arguments, bad config).
pub fn error(text: &str) -> Value {
    build(None, text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand check of the tools' `outputSchema`: an object with string `threadId` and
    /// `content`, both required.
    fn validates(result: &Value) -> bool {
        let Some(sc) = result.get("structuredContent").and_then(Value::as_object) else {
            return false;
        };
        sc.get("threadId").is_some_and(Value::is_string)
            && sc.get("content").is_some_and(Value::is_string)
    }

    #[test]
    fn every_shape_validates_and_mirrors_text() {
        let id = ThreadId::new();
        for (result, is_error) in [
            (success(id, "done"), false),
            (thread_error(id, "boom"), true),
            (error("bad args"), true),
        ] {
            assert!(validates(&result), "{result}");
            assert_eq!(
                result["content"][0]["text"],
                result["structuredContent"]["content"]
            );
            assert_eq!(result.get("isError").is_some(), is_error);
        }
        assert_eq!(
            success(id, "x")["structuredContent"]["threadId"],
            id.to_string()
        );
    }
}
