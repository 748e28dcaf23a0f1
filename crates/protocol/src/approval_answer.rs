//! The one decoder of approval answers, shared by every front end that asks a client
//! (MCP `elicitation/create`, MCP MRTR `inputResponses`, app-server v1 and v2 approval
//! requests).
//!
//! It fails closed: only a well-formed answer that names an approving decision approves.
//! Anything else — an unknown shape, unknown fields, an `accept` without the decision the
//! form requires, a decision we do not know, a wrong type — is a denial. An answer that
//! carries an error instead of (or beside) a result never reaches this function: the
//! transport refuses it, and the waiting request then ends at its deadline, which denies.

use serde_json::{Map, Value};

use crate::ReviewDecision;

/// Decisions a client may pick in the approval form, in the order shown.
pub const APPROVAL_FORM_DECISIONS: [&str; 4] =
    ["approved", "approved_for_session", "denied", "abort"];

/// Name of the one field of the approval form.
pub const APPROVAL_FORM_FIELD: &str = "decision";

/// The `requestedSchema` of the approval form: a flat object with one required enum, the
/// primitive subset every elicitation-capable client renders.
pub fn approval_form_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            APPROVAL_FORM_FIELD: {
                "type": "string",
                "title": "Decision",
                "description": "approved: run once; approved_for_session: run and stop asking for this; denied: refuse, the agent goes on; abort: refuse and stop the turn.",
                "enum": APPROVAL_FORM_DECISIONS,
                "default": "approved"
            }
        },
        "required": [APPROVAL_FORM_FIELD]
    })
}

/// Decode a client's answer to an approval request.
///
/// Accepted shapes, nothing else:
/// * the spec `ElicitResult`: `{"action": "accept", "content": {"decision": D}}` (plus an
///   optional `_meta` object), `{"action": "decline"}`, `{"action": "cancel"}`;
/// * the reference's legacy answer `{"decision": D}`, where `D` is one of the form's
///   decisions or `{"approved_execpolicy_amendment": {...}}` (approve once);
/// * the app-server v2 answer `{"decision": D}`, where `D` is `accept`,
///   `acceptForSession`, `decline`, `cancel` (refuse and stop the turn) or
///   `{"acceptWithExecpolicyAmendment": {...}}` (approve once) or
///   `{"applyNetworkPolicyAmendment": {...}}` (approve once when its action is `allow`).
pub fn decode_approval_answer(answer: &Value) -> ReviewDecision {
    let Some(object) = answer.as_object() else {
        return ReviewDecision::Denied;
    };
    if object.contains_key("action") {
        return decode_elicit_result(object);
    }
    decode_legacy(object)
}

fn decode_elicit_result(object: &Map<String, Value>) -> ReviewDecision {
    if !only_keys(object, &["action", "content", "_meta"]) || !meta_is_object(object) {
        return ReviewDecision::Denied;
    }
    match object.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let Some(content) = object.get("content").and_then(Value::as_object) else {
                return ReviewDecision::Denied;
            };
            if !only_keys(content, &[APPROVAL_FORM_FIELD]) {
                return ReviewDecision::Denied;
            }
            content
                .get(APPROVAL_FORM_FIELD)
                .and_then(Value::as_str)
                .map_or(ReviewDecision::Denied, form_decision)
        }
        // `decline` and `cancel` refuse; an action we do not know cannot be consent.
        _ => ReviewDecision::Denied,
    }
}

fn decode_legacy(object: &Map<String, Value>) -> ReviewDecision {
    if !only_keys(object, &[APPROVAL_FORM_FIELD, "_meta"]) || !meta_is_object(object) {
        return ReviewDecision::Denied;
    }
    match object.get(APPROVAL_FORM_FIELD) {
        Some(Value::String(s)) => match s.as_str() {
            "accept" => ReviewDecision::Approved,
            "acceptForSession" => ReviewDecision::ApprovedForSession,
            "cancel" => ReviewDecision::Abort,
            other => form_decision(other),
        },
        Some(Value::Object(map))
            if map.len() == 1
                && (map.contains_key("approved_execpolicy_amendment")
                    || map
                        .get("acceptWithExecpolicyAmendment")
                        .is_some_and(Value::is_object)) =>
        {
            ReviewDecision::Approved
        }
        Some(Value::Object(map)) if map.len() == 1 => {
            match map.get("applyNetworkPolicyAmendment") {
                Some(amendment) => network_amendment(amendment),
                None => ReviewDecision::Denied,
            }
        }
        _ => ReviewDecision::Denied,
    }
}

/// `{"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host", "action"}}}`:
/// the person chose a rule for a host. `allow` approves this command once (no rule is
/// kept: the sandbox has no per-host policy); `deny`, and anything else, denies.
fn network_amendment(amendment: &Value) -> ReviewDecision {
    let Some(outer) = amendment.as_object() else {
        return ReviewDecision::Denied;
    };
    let rule = match outer.get("network_policy_amendment") {
        Some(Value::Object(rule)) if outer.len() == 1 => rule,
        _ => return ReviewDecision::Denied,
    };
    let host_ok = rule.get("host").is_some_and(Value::is_string);
    match rule.get("action") {
        Some(Value::String(action)) if action == "allow" && host_ok && rule.len() == 2 => {
            ReviewDecision::Approved
        }
        _ => ReviewDecision::Denied,
    }
}

fn form_decision(decision: &str) -> ReviewDecision {
    match decision {
        "approved" => ReviewDecision::Approved,
        "approved_for_session" => ReviewDecision::ApprovedForSession,
        "abort" => ReviewDecision::Abort,
        _ => ReviewDecision::Denied,
    }
}

fn only_keys(object: &Map<String, Value>, allowed: &[&str]) -> bool {
    object.keys().all(|k| allowed.contains(&k.as_str()))
}

fn meta_is_object(object: &Map<String, Value>) -> bool {
    object.get("_meta").is_none_or(Value::is_object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every answer here must deny: malformed, ambiguous, or not approving.
    #[test]
    fn malformed_and_ambiguous_answers_deny() {
        let denials = [
            json!(null),
            json!(true),
            json!(1),
            json!("approved"),
            json!(["approved"]),
            json!({}),
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {}}),
            json!({"action": "accept", "content": null}),
            json!({"action": "accept", "content": "approved"}),
            json!({"action": "accept", "content": ["approved"]}),
            json!({"action": "accept", "content": {"decision": "bogus"}}),
            json!({"action": "accept", "content": {"decision": "APPROVED"}}),
            json!({"action": "accept", "content": {"decision": "timed_out"}}),
            json!({"action": "accept", "content": {"decision": true}}),
            json!({"action": "accept", "content": {"decision": ["approved"]}}),
            json!({"action": "accept", "content": {"decision": {"approved": {}}}}),
            json!({"action": "accept", "content": {"decision": "approved", "extra": 1}}),
            json!({"action": "accept", "content": {"decision": "approved"}, "error": {"code": 1}}),
            json!({"action": "accept", "content": {"decision": "approved"}, "extra": 1}),
            json!({"action": "accept", "content": {"decision": "approved"}, "_meta": "x"}),
            json!({"action": "Accept", "content": {"decision": "approved"}}),
            json!({"action": "approve", "content": {"decision": "approved"}}),
            json!({"action": 1, "content": {"decision": "approved"}}),
            json!({"action": null, "content": {"decision": "approved"}}),
            json!({"action": "decline"}),
            json!({"action": "decline", "content": {"decision": "approved"}}),
            json!({"action": "cancel"}),
            json!({"action": "cancel", "content": {"decision": "approved"}}),
            json!({"action": "accept", "decision": "approved"}),
            json!({"decision": "bogus"}),
            json!({"decision": null}),
            json!({"decision": 1}),
            json!({"decision": "approved", "extra": true}),
            json!({"decision": "approved", "error": "no"}),
            json!({"decision": {"denied": {"rejection": "no"}}}),
            json!({"decision": {"approved_execpolicy_amendment": {}, "extra": 1}}),
            json!({"decision": "denied"}),
            json!({"result": {"action": "accept", "content": {"decision": "approved"}}}),
            json!({"decision": "decline"}),
            json!({"decision": "Accept"}),
            json!({"decision": "accept", "extra": 1}),
            json!({"decision": {"acceptWithExecpolicyAmendment": "ls"}}),
            json!({"decision": {"acceptWithExecpolicyAmendment": {}, "accept": {}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "x.org", "action": "deny"}}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "x.org", "action": "Allow"}}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"action": "allow"}}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "x.org", "action": "allow", "extra": 1}}}}),
            json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "x.org", "action": "allow"}, "x": 1}}}),
            json!({"action": "accept", "content": {"decision": "accept"}}),
            json!({"whatever": 1}),
        ];
        assert!(denials.len() >= 30);
        for answer in denials {
            let decision = decode_approval_answer(&answer);
            assert!(
                !decision.is_approved() && decision != ReviewDecision::Abort,
                "{answer} decoded as {decision:?}"
            );
        }
    }

    #[test]
    fn well_formed_answers_decode() {
        let cases = [
            (
                json!({"action": "accept", "content": {"decision": "approved"}}),
                ReviewDecision::Approved,
            ),
            (
                json!({"action": "accept", "content": {"decision": "approved_for_session"}, "_meta": {}}),
                ReviewDecision::ApprovedForSession,
            ),
            (
                json!({"action": "accept", "content": {"decision": "denied"}}),
                ReviewDecision::Denied,
            ),
            (
                json!({"action": "accept", "content": {"decision": "abort"}}),
                ReviewDecision::Abort,
            ),
            (json!({"decision": "approved"}), ReviewDecision::Approved),
            (json!({"decision": "abort"}), ReviewDecision::Abort),
            (
                json!({"decision": {"approved_execpolicy_amendment": {"command": ["ls"]}}}),
                ReviewDecision::Approved,
            ),
            (json!({"decision": "accept"}), ReviewDecision::Approved),
            (
                json!({"decision": "acceptForSession"}),
                ReviewDecision::ApprovedForSession,
            ),
            (json!({"decision": "cancel"}), ReviewDecision::Abort),
            (
                json!({"decision": {"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "x.org", "action": "allow"}}}}),
                ReviewDecision::Approved,
            ),
            (
                json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}}),
                ReviewDecision::Approved,
            ),
        ];
        for (answer, expected) in cases {
            assert_eq!(decode_approval_answer(&answer), expected, "{answer}");
        }
    }

    #[test]
    fn form_is_flat_and_lists_every_decision() {
        let schema = approval_form_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(
            schema["properties"][APPROVAL_FORM_FIELD]["enum"],
            json!(APPROVAL_FORM_DECISIONS)
        );
        for decision in APPROVAL_FORM_DECISIONS {
            let answer = json!({"action": "accept", "content": {"decision": decision}});
            assert_eq!(
                serde_json::to_value(decode_approval_answer(&answer)).ok(),
                Some(json!(decision))
            );
        }
    }
}
