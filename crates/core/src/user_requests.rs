//! The model asks the person behind the front end: `request_user_input` (questions,
//! Codex's shape) and `request_permissions` (more sandbox permissions for the rest of the
//! turn or the session).
//!
//! Both are offered only when the front end said it can ask someone
//! ([`crate::config::Config::can_ask_user`]), and `request_permissions` only where the
//! approval policy may ask for it and a sandbox of ours is in force. Both wait through
//! the session's pending answers: an interrupt stops the turn, a deadline or a malformed
//! answer is "no answer" / "nothing granted".

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use interpreter_model_client::ToolSpec;
use interpreter_protocol::{
    EventMsg, GrantScope, PermissionGrant, PermissionsDecision, PermissionsRequestEvent, Question,
    SandboxPolicy, UserInputOption, UserInputQuestion, UserInputRequestEvent, UserInputResponse,
};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::pending::NoAnswer;
use crate::permissions;
use crate::session::Session;
use crate::tool_output::ToolOutcome;

pub(crate) const REQUEST_USER_INPUT_TOOL: &str = "request_user_input";
pub(crate) const REQUEST_PERMISSIONS_TOOL: &str = "request_permissions";

/// Bounds on what the model may put in front of a person in one call.
const MAX_QUESTIONS: usize = 5;
const MAX_OPTIONS: usize = 10;
const MAX_TEXT_CHARS: usize = 2000;
const MAX_PATHS: usize = 16;
/// The most of the person's answers the model is given back.
const ANSWERS_MAX_BYTES: usize = 16 * 1024;

/// Whether `request_user_input` is offered in this thread.
pub(crate) fn offers_user_input(sess: &Session) -> bool {
    sess.config.can_ask_user
}

/// Whether `request_permissions` is offered to the thread: someone can answer, the
/// policy may ask for permissions, and a sandbox of ours is in force. Not the turn's
/// mode: the tool list stays the same across turns, for the prompt cache.
pub(crate) fn offers_permissions(sess: &Session) -> bool {
    sess.config.can_ask_user
        && sess.config.approval_policy.may_ask(Question::Permissions)
        && !sess.config.sandbox_policy.runs_unsandboxed()
}

pub(crate) fn user_input_spec() -> ToolSpec {
    ToolSpec {
        name: REQUEST_USER_INPUT_TOOL.to_string(),
        description:
            "Ask the user one to five short questions and wait for the answers. Use it only \
            for a decision you cannot make from the repository or the conversation. Give options \
            when the answer is one of a few choices."
                .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_QUESTIONS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Key of this question's answer (snake_case)."},
                            "header": {"type": "string", "description": "A label of a few words."},
                            "question": {"type": "string", "description": "The question, one sentence."},
                            "options": {
                                "type": "array",
                                "maxItems": MAX_OPTIONS,
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string", "description": "What choosing it means."}
                                    },
                                    "required": ["label", "description"],
                                    "additionalProperties": false
                                }
                            }
                        },
                        "required": ["id", "header", "question"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["questions"],
            "additionalProperties": false
        }),
    }
}

pub(crate) fn permissions_spec() -> ToolSpec {
    ToolSpec {
        name: REQUEST_PERMISSIONS_TOOL.to_string(),
        description: "Ask the user for more sandbox permissions: directories your commands may also \
            write (absolute paths of existing directories) and/or network access. The user may grant \
            them for the rest of this turn or the session, or refuse. The agent's own home and \
            credential stores are never granted."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "One sentence on why, shown to the user."},
                "permissions": {
                    "type": "object",
                    "properties": {
                        "file_system": {
                            "type": "object",
                            "properties": {
                                "write": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PATHS}
                            },
                            "additionalProperties": false
                        },
                        "network": {
                            "type": "object",
                            "properties": {"enabled": {"type": "boolean"}},
                            "additionalProperties": false
                        }
                    },
                    "additionalProperties": false
                }
            },
            "required": ["reason", "permissions"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserInputArgs {
    questions: Vec<QuestionArg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuestionArg {
    id: String,
    header: String,
    question: String,
    #[serde(default)]
    options: Option<Vec<OptionArg>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionArg {
    label: String,
    description: String,
}

/// The questions as they are put to the person, or what was wrong with them.
fn questions_of(args: UserInputArgs) -> Result<Vec<UserInputQuestion>, String> {
    if args.questions.is_empty() || args.questions.len() > MAX_QUESTIONS {
        return Err(format!("ask between 1 and {MAX_QUESTIONS} questions"));
    }
    let too_long = |text: &str| text.chars().count() > MAX_TEXT_CHARS;
    let mut ids = HashSet::new();
    let mut questions = Vec::new();
    for q in args.questions {
        if q.id.trim().is_empty() || !ids.insert(q.id.clone()) {
            return Err(format!(
                "question ids must be unique and not empty (`{}`)",
                q.id
            ));
        }
        if q.question.trim().is_empty() || too_long(&q.question) || too_long(&q.header) {
            return Err(format!(
                "question `{}` must have a question of at most {MAX_TEXT_CHARS} characters",
                q.id
            ));
        }
        let options = match q.options {
            Some(options) if options.len() > MAX_OPTIONS => {
                return Err(format!(
                    "question `{}` has more than {MAX_OPTIONS} options",
                    q.id
                ));
            }
            Some(options)
                if options
                    .iter()
                    .any(|o| too_long(&o.label) || too_long(&o.description)) =>
            {
                return Err(format!("an option of question `{}` is too long", q.id));
            }
            Some(options) if !options.is_empty() => Some(
                options
                    .into_iter()
                    .map(|o| UserInputOption {
                        label: o.label,
                        description: o.description,
                    })
                    .collect(),
            ),
            _ => None,
        };
        questions.push(UserInputQuestion {
            id: q.id,
            header: q.header,
            question: q.question,
            is_other: options.is_some(),
            is_secret: false,
            options,
        });
    }
    Ok(questions)
}

/// The answers when they answer only questions that were asked; `None` otherwise (a
/// malformed answer is no answer).
fn valid_answers(
    questions: &[UserInputQuestion],
    response: UserInputResponse,
) -> Option<BTreeMap<String, Vec<String>>> {
    let UserInputResponse::Answered { answers } = response else {
        return None;
    };
    answers
        .keys()
        .all(|id| questions.iter().any(|q| &q.id == id))
        .then_some(answers)
}

pub(crate) async fn handle_user_input(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    args: UserInputArgs,
    cancel: &CancellationToken,
) -> ToolOutcome {
    if !offers_user_input(sess) {
        return ToolOutcome::Output(
            "request_user_input is not available: no user can be asked here; decide with what you know and say what you assumed".to_string(),
        );
    }
    let questions = match questions_of(args) {
        Ok(questions) => questions,
        Err(why) => return ToolOutcome::Output(format!("request_user_input rejected: {why}")),
    };
    let timeout = sess.config.approval_timeout;
    let answer = sess.user_input.register(call_id).await;
    sess.emit(
        sub_id,
        EventMsg::UserInputRequest(UserInputRequestEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            questions: questions.clone(),
            timeout_sec: timeout.as_secs(),
        }),
    )
    .await;
    let response = sess.user_input.wait(call_id, answer, timeout, cancel).await;
    match response {
        Ok(response) => match valid_answers(&questions, response) {
            Some(answers) => {
                let wire: BTreeMap<String, serde_json::Value> = answers
                    .into_iter()
                    .map(|(id, answers)| (id, json!({"answers": answers})))
                    .collect();
                ToolOutcome::Output(crate::tool_output::cap_tool_result(
                    json!({"answers": wire}).to_string(),
                    ANSWERS_MAX_BYTES,
                ))
            }
            None => ToolOutcome::Output(
                "the user did not answer (declined, or the answer was not usable); decide with what you know and say what you assumed".to_string(),
            ),
        },
        Err(NoAnswer::TimedOut) => {
            sess.request_expired(sub_id, call_id, timeout).await;
            sess.warn(
                sub_id,
                format!(
                    "question {call_id} got no answer within {}s",
                    timeout.as_secs()
                ),
            )
            .await;
            ToolOutcome::Output(format!(
                "the user did not answer within {}s; decide with what you know and say what you assumed",
                timeout.as_secs()
            ))
        }
        Err(NoAnswer::Dropped) => ToolOutcome::Output(
            "the user did not answer; decide with what you know and say what you assumed"
                .to_string(),
        ),
        Err(NoAnswer::Cancelled) => ToolOutcome::Stop(
            "interrupted: the turn was stopped while waiting for the user's answer".to_string(),
        ),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionsArgs {
    #[serde(default)]
    reason: Option<String>,
    permissions: PermissionsArg,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionsArg {
    #[serde(default, alias = "fileSystem")]
    file_system: Option<FileSystemArg>,
    #[serde(default)]
    network: Option<NetworkArg>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSystemArg {
    #[serde(default)]
    write: Vec<String>,
    /// Reading is already allowed everywhere but the protected paths, which stay
    /// unreadable; accepted so a model that asks is told so.
    #[serde(default)]
    read: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkArg {
    #[serde(default)]
    enabled: bool,
}

const DECLINED_PERMISSIONS: &str = "the permission request was declined (by the user or the approval policy); nothing changed. Do not ask again for the same; find another way or explain what you need";

pub(crate) async fn handle_permissions(
    sess: &Arc<Session>,
    sub_id: &str,
    call_id: &str,
    args: PermissionsArgs,
    cancel: &CancellationToken,
) -> ToolOutcome {
    // A Plan-mode turn stays read-only: it is offered the tool but cannot be granted.
    if !offers_permissions(sess) || sess.is_plan_turn() {
        return ToolOutcome::Output(
            "request_permissions is not available in this turn (nobody can be asked, the approval policy does not ask for permissions, commands are not sandboxed, or this is a Plan-mode turn); nothing changed".to_string(),
        );
    }
    let file_system = args.permissions.file_system.unwrap_or_default();
    if file_system.write.len() > MAX_PATHS {
        return ToolOutcome::Output(format!(
            "request_permissions rejected: ask for at most {MAX_PATHS} directories"
        ));
    }
    let network = args.permissions.network.is_some_and(|n| n.enabled);
    let mut confined = permissions::confine(
        &sess.config,
        &sess.root_anchors,
        &sess.config.sandbox_policy,
        &sess.granted(),
        &file_system.write,
        network,
    );
    if !file_system.read.is_empty() {
        confined.already.push(
            "reading: commands may already read everywhere except the agent's home and credential stores, which are never granted".to_string(),
        );
    }
    let mut notes = Vec::new();
    if !confined.refused.is_empty() {
        notes.push(format!(
            "refused without asking: {}",
            confined.refused.join("; ")
        ));
    }
    if !confined.already.is_empty() {
        notes.push(format!("already in force: {}", confined.already.join("; ")));
    }
    let notes = notes.join("\n");
    if confined.askable.is_empty() {
        return ToolOutcome::Output(format!("nothing was asked for.\n{notes}"));
    }
    let timeout = sess.config.approval_timeout;
    let answer = sess.permission_requests.register(call_id).await;
    sess.emit(
        sub_id,
        EventMsg::PermissionsRequest(PermissionsRequestEvent {
            call_id: call_id.to_string(),
            turn_id: sub_id.to_string(),
            cwd: sess.config.cwd.clone(),
            reason: args
                .reason
                .map(|reason| reason.chars().take(MAX_TEXT_CHARS).collect()),
            permissions: confined.askable.clone(),
            timeout_sec: timeout.as_secs(),
        }),
    )
    .await;
    let decision = sess
        .permission_requests
        .wait(call_id, answer, timeout, cancel)
        .await;
    let with_notes = |text: String| {
        if notes.is_empty() {
            text
        } else {
            format!("{text}\n{notes}")
        }
    };
    match decision {
        Ok(PermissionsDecision::Granted { permissions, scope }) => {
            let granted = confined.askable.intersect(&permissions);
            if granted.is_empty() {
                return ToolOutcome::Output(with_notes(DECLINED_PERMISSIONS.to_string()));
            }
            sess.grant(&granted, scope);
            ToolOutcome::Output(with_notes(granted_text(
                &granted,
                scope,
                &sess.turn_sandbox_policy(),
            )))
        }
        Ok(PermissionsDecision::Denied) | Err(NoAnswer::Dropped) => {
            ToolOutcome::Output(with_notes(DECLINED_PERMISSIONS.to_string()))
        }
        Err(NoAnswer::TimedOut) => {
            sess.request_expired(sub_id, call_id, timeout).await;
            sess.warn(
                sub_id,
                format!(
                    "permission request {call_id} got no answer within {}s; nothing was granted",
                    timeout.as_secs()
                ),
            )
            .await;
            ToolOutcome::Output(with_notes(DECLINED_PERMISSIONS.to_string()))
        }
        Err(NoAnswer::Cancelled) => ToolOutcome::Stop(
            "interrupted: the turn was stopped while waiting for the permission answer; nothing was granted".to_string(),
        ),
    }
}

fn granted_text(granted: &PermissionGrant, scope: GrantScope, now: &SandboxPolicy) -> String {
    let mut parts = Vec::new();
    if !granted.writable_roots.is_empty() {
        parts.push(format!(
            "commands may now write {}",
            granted
                .writable_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if granted.network {
        parts.push("commands may now use the network".to_string());
    }
    let until = match scope {
        GrantScope::Turn => "the rest of this turn",
        GrantScope::Session => "the rest of the session",
    };
    format!(
        "granted for {until}: {}. The sandbox mode stays {}.",
        parts.join("; "),
        now.mode().as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: &str) -> QuestionArg {
        QuestionArg {
            id: id.to_string(),
            header: "H".to_string(),
            question: "Q?".to_string(),
            options: None,
        }
    }

    #[test]
    fn bad_question_lists_are_rejected() {
        assert!(questions_of(UserInputArgs { questions: vec![] }).is_err());
        assert!(
            questions_of(UserInputArgs {
                questions: vec![question("a"), question("a")]
            })
            .is_err()
        );
        assert!(
            questions_of(UserInputArgs {
                questions: (0..6).map(|i| question(&i.to_string())).collect()
            })
            .is_err()
        );
        assert!(
            questions_of(UserInputArgs {
                questions: vec![question("a")]
            })
            .is_ok()
        );
    }

    #[test]
    fn answers_to_questions_not_asked_are_no_answer() {
        let questions = questions_of(UserInputArgs {
            questions: vec![question("a")],
        })
        .expect("valid");
        let answer = |id: &str| UserInputResponse::Answered {
            answers: BTreeMap::from([(id.to_string(), vec!["x".to_string()])]),
        };
        assert!(valid_answers(&questions, answer("a")).is_some());
        assert!(valid_answers(&questions, answer("b")).is_none());
        assert!(valid_answers(&questions, UserInputResponse::Declined).is_none());
    }
}
