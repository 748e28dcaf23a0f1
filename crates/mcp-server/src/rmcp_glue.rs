//! The one place this crate touches `rmcp`.
//!
//! We use rmcp's model types for the parts of the protocol whose vocabulary moves between
//! spec revisions (protocol versions, error codes, server info, the discovery result, and
//! the elicitation answer), so that an rmcp upgrade changes only this file. The JSON-RPC
//! loop itself is ours (see the crate documentation for why).

use rmcp::model::{
    DiscoverResult, ElicitResult, ElicitationAction, ErrorCode, Implementation, ProtocolVersion,
    ServerCapabilities,
};
use serde_json::Value;

/// Name our server reports in `serverInfo`.
pub const SERVER_NAME: &str = "interpreter";
/// Human title reported in `serverInfo`.
pub const SERVER_TITLE: &str = "Interpreter";

pub const PARSE_ERROR: i32 = ErrorCode::PARSE_ERROR.0;
pub const INVALID_REQUEST: i32 = ErrorCode::INVALID_REQUEST.0;
pub const METHOD_NOT_FOUND: i32 = ErrorCode::METHOD_NOT_FOUND.0;
pub const INVALID_PARAMS: i32 = ErrorCode::INVALID_PARAMS.0;
pub const INTERNAL_ERROR: i32 = ErrorCode::INTERNAL_ERROR.0;
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = ErrorCode::UNSUPPORTED_PROTOCOL_VERSION.0;

/// `_meta` key carrying the protocol version on 2026-07-28 requests.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client capabilities on 2026-07-28 requests.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Every protocol revision we serve, oldest first.
pub fn supported_versions() -> Vec<String> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(|v| v.as_str().to_string())
        .collect()
}

/// The version to answer a legacy `initialize` with: the client's own if we know it,
/// otherwise the newest revision that still has an `initialize` handshake.
pub fn negotiate_initialize_version(requested: &str) -> String {
    let known = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == requested && v.has_initialize());
    if known {
        requested.to_string()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE.as_str().to_string()
    }
}

/// Whether a per-request `_meta` protocol version is one we serve.
pub fn is_supported_version(version: &str) -> bool {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == version)
}

/// Whether this revision forbids server→client requests (2026-07-28 and later).
pub fn is_stateless_era(version: &str) -> bool {
    !ProtocolVersion::from_str_lossy(version).has_initialize()
}

trait FromStrLossy {
    fn from_str_lossy(s: &str) -> ProtocolVersion;
}

impl FromStrLossy for ProtocolVersion {
    fn from_str_lossy(s: &str) -> ProtocolVersion {
        ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .find(|v| v.as_str() == s)
            .cloned()
            // Dated revisions order lexically; an unknown later date is "stateless".
            .unwrap_or(if s >= ProtocolVersion::V_2026_07_28.as_str() {
                ProtocolVersion::V_2026_07_28
            } else {
                ProtocolVersion::V_2025_11_25
            })
    }
}

/// `serverInfo`: our product name and version.
pub fn server_info() -> Value {
    let info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")).with_title(SERVER_TITLE);
    serde_json::to_value(info).unwrap_or(Value::Null)
}

/// Server capabilities: tools, plus empty resources and prompts so clients that probe
/// them get an answer rather than an error.
pub fn server_capabilities() -> Value {
    serde_json::json!({
        "tools": {"listChanged": false},
        "resources": {},
        "prompts": {},
    })
}

/// The `server/discover` result (2026-07-28).
pub fn discover_result() -> Value {
    let capabilities: ServerCapabilities =
        serde_json::from_value(server_capabilities()).unwrap_or_default();
    let versions = ProtocolVersion::KNOWN_VERSIONS.to_vec();
    let mut info =
        Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")).with_title(SERVER_TITLE);
    info.description = Some("A coding agent for open models, as MCP tools.".to_string());
    let result = DiscoverResult::new(versions, capabilities).with_server_info(info);
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// What a client's answer to `elicitation/create` says, in spec terms.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// `accept`, with the form content (if any).
    Accept(Option<Value>),
    Decline,
    Cancel,
}

/// Read a spec `ElicitResult` (`{action, content?}`); `None` if it is not one.
pub fn parse_elicit_result(result: &Value) -> Option<ElicitAnswer> {
    let parsed: ElicitResult = serde_json::from_value(result.clone()).ok()?;
    Some(match parsed.action {
        ElicitationAction::Accept => ElicitAnswer::Accept(parsed.content),
        ElicitationAction::Decline => ElicitAnswer::Decline,
        ElicitationAction::Cancel => ElicitAnswer::Cancel,
        // A future action we do not know cannot be read as consent.
        _ => ElicitAnswer::Decline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_and_falls_back_to_latest_legacy() {
        assert_eq!(negotiate_initialize_version("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate_initialize_version("1999-01-01"), "2025-11-25");
        assert_eq!(negotiate_initialize_version("2026-07-28"), "2025-11-25");
    }

    #[test]
    fn elicit_results_parse() {
        let accept = serde_json::json!({"action": "accept", "content": {"decision": "denied"}});
        assert_eq!(
            parse_elicit_result(&accept),
            Some(ElicitAnswer::Accept(Some(
                serde_json::json!({"decision": "denied"})
            )))
        );
        assert_eq!(
            parse_elicit_result(&serde_json::json!({"action": "decline"})),
            Some(ElicitAnswer::Decline)
        );
        assert_eq!(
            parse_elicit_result(&serde_json::json!({"decision": "approved"})),
            None
        );
    }

    #[test]
    fn stateless_era_detection() {
        assert!(is_stateless_era("2026-07-28"));
        assert!(is_stateless_era("2027-01-01"));
        assert!(!is_stateless_era("2025-11-25"));
    }
}
