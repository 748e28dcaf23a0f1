//! The model's questions and permission requests, put to the client:
//! `item/tool/requestUserInput` (the engine's `UserInputRequest` event, answered with
//! `Op::ResolveUserInput`) and `item/permissions/requestApproval` (`PermissionsRequest`,
//! answered with `Op::ResolvePermissions`), each followed by `serverRequest/resolved`.
//!
//! Both fail closed like approvals: no v2 client to ask, an error reply, a reply of the
//! wrong shape, the deadline (`approval_timeout_sec`), the connection closing or the turn
//! ending mean no answer and nothing granted. What a grant may contain is the engine's
//! rule; this module only maps shapes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use interpreter_protocol::{
    GrantScope, Op, PermissionGrant, PermissionsDecision, PermissionsRequestEvent,
    UserInputRequestEvent, UserInputResponse,
};
use tokio_util::sync::CancellationToken;

use crate::connection::{ClientAnswer, Connection};
use crate::protocol::v2;
use crate::protocol::{RequestId, now_ms};
use crate::state::LoadedThread;

/// Put the model's questions to `connection` (the turn's owner, else a follower).
pub(crate) fn ask_user_input(
    loaded: &Arc<LoadedThread>,
    connection: Option<Arc<Connection>>,
    turn_id: &str,
    request: UserInputRequestEvent,
    turn_over: &CancellationToken,
) {
    let call_id = request.call_id.clone();
    let answer = move |response| Op::ResolveUserInput {
        id: call_id,
        response,
    };
    let Some(connection) = connection.filter(|c| !c.legacy_approvals()) else {
        // Nobody who speaks this request: no answer at once, not at the deadline.
        settle(loaded, None, Some(answer(UserInputResponse::Declined)));
        return;
    };
    let params = v2::ToolRequestUserInputParams {
        thread_id: loaded.id().to_string(),
        turn_id: turn_id.to_string(),
        item_id: request.call_id.clone(),
        questions: request
            .questions
            .iter()
            .map(|q| v2::ToolRequestUserInputQuestion {
                id: q.id.clone(),
                header: q.header.clone(),
                question: q.question.clone(),
                is_other: q.is_other,
                is_secret: q.is_secret,
                options: q.options.as_ref().map(|options| {
                    options
                        .iter()
                        .map(|o| v2::ToolRequestUserInputOption {
                            label: o.label.clone(),
                            description: o.description.clone(),
                        })
                        .collect()
                }),
            })
            .collect(),
        is_blocking: true,
        auto_resolution_ms: None,
    };
    ask(
        loaded,
        connection,
        "item/tool/requestUserInput",
        &params,
        &request.call_id,
        turn_over,
        move |reply| answer(reply.map_or(UserInputResponse::Declined, decode_user_input)),
    );
}

/// Ask `connection` for the permissions the engine let through.
pub(crate) fn ask_permissions(
    loaded: &Arc<LoadedThread>,
    connection: Option<Arc<Connection>>,
    turn_id: &str,
    request: PermissionsRequestEvent,
    turn_over: &CancellationToken,
) {
    let call_id = request.call_id.clone();
    let answer = move |decision| Op::ResolvePermissions {
        id: call_id,
        decision,
    };
    let Some(connection) = connection.filter(|c| !c.legacy_approvals()) else {
        settle(loaded, None, Some(answer(PermissionsDecision::Denied)));
        return;
    };
    let params = v2::PermissionsRequestApprovalParams {
        thread_id: loaded.id().to_string(),
        turn_id: turn_id.to_string(),
        item_id: request.call_id.clone(),
        cwd: request.cwd.to_string_lossy().into_owned(),
        environment_id: None,
        permissions: requested_profile(&request.permissions),
        reason: request.reason.clone(),
        started_at_ms: now_ms(),
    };
    ask(
        loaded,
        connection,
        "item/permissions/requestApproval",
        &params,
        &request.call_id,
        turn_over,
        move |reply| answer(reply.map_or(PermissionsDecision::Denied, decode_permissions)),
    );
}

/// Send `method`, wait for the reply (until the engine expires request `call_id`, the
/// turn ends or the connection closes), then settle: `serverRequest/resolved` and the
/// engine's answer, which `decode` makes from the reply (`None`: none came).
fn ask(
    loaded: &Arc<LoadedThread>,
    connection: Arc<Connection>,
    method: &'static str,
    params: &impl serde::Serialize,
    call_id: &str,
    turn_over: &CancellationToken,
    decode: impl FnOnce(Option<ClientAnswer>) -> Op + Send + 'static,
) {
    let (request_id, reply) = connection.request(method, params);
    let expired = loaded.open_requests.open(call_id);
    let call_id = call_id.to_string();
    let turn_over = turn_over.clone();
    let loaded = loaded.clone();
    tokio::spawn(async move {
        let reply = tokio::select! {
            answer = reply => answer.ok(),
            () = expired.cancelled() => None,
            () = turn_over.cancelled() => None,
            () = connection.closed.cancelled() => None,
        };
        loaded.open_requests.close(&call_id);
        connection.forget_request(&request_id);
        // A request the engine expired is already decided there.
        let answer = (!expired.is_cancelled()).then(|| decode(reply));
        settle(&loaded, Some(request_id), answer);
    });
}

fn settle(loaded: &Arc<LoadedThread>, request_id: Option<RequestId>, answer: Option<Op>) {
    crate::approvals::settle_request(
        loaded.clone(),
        request_id,
        answer,
        "answering the model's request to the user",
    );
}

/// The answers, strictly: anything but a well-formed response is no answer.
fn decode_user_input(reply: ClientAnswer) -> UserInputResponse {
    let Ok(value) = reply else {
        return UserInputResponse::Declined;
    };
    match serde_json::from_value::<v2::ToolRequestUserInputResponse>(value) {
        Ok(response) => UserInputResponse::Answered {
            answers: response
                .answers
                .into_iter()
                .map(|(id, answer)| (id, answer.answers))
                .collect::<BTreeMap<_, _>>(),
        },
        Err(e) => {
            tracing::info!("malformed requestUserInput answer ({e}); no answer");
            UserInputResponse::Declined
        }
    }
}

/// The grant, strictly: an error or a reply of the wrong shape denies; only exact
/// directories with write access and the network flag grant anything; a grant that asks
/// for an automatic review we do not have denies.
fn decode_permissions(reply: ClientAnswer) -> PermissionsDecision {
    let Ok(value) = reply else {
        return PermissionsDecision::Denied;
    };
    let response = match serde_json::from_value::<v2::PermissionsRequestApprovalResponse>(value) {
        Ok(response) => response,
        Err(e) => {
            tracing::info!("malformed permissions answer ({e}); denied");
            return PermissionsDecision::Denied;
        }
    };
    if response.strict_auto_review == Some(true) {
        return PermissionsDecision::Denied;
    }
    let mut writable_roots: Vec<PathBuf> = Vec::new();
    if let Some(fs) = &response.permissions.file_system {
        let listed = fs.write.iter().flatten().cloned();
        let entries = fs
            .entries
            .iter()
            .flatten()
            .filter(|entry| entry.access == v2::FileSystemAccessMode::Write)
            .filter_map(|entry| match &entry.path {
                v2::FileSystemPath::Path { path } => Some(path.clone()),
                _ => None,
            });
        for path in listed.chain(entries).map(PathBuf::from) {
            if !writable_roots.contains(&path) {
                writable_roots.push(path);
            }
        }
    }
    let network = response
        .permissions
        .network
        .as_ref()
        .and_then(|n| n.enabled)
        .unwrap_or(false);
    let permissions = PermissionGrant {
        writable_roots,
        network,
    };
    if permissions.is_empty() {
        return PermissionsDecision::Denied;
    }
    PermissionsDecision::Granted {
        permissions,
        scope: match response.scope {
            v2::PermissionGrantScope::Turn => GrantScope::Turn,
            v2::PermissionGrantScope::Session => GrantScope::Session,
        },
    }
}

fn requested_profile(grant: &PermissionGrant) -> v2::RequestPermissionProfile {
    let paths: Vec<String> = grant
        .writable_roots
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    v2::RequestPermissionProfile {
        file_system: (!paths.is_empty()).then(|| v2::AdditionalFileSystemPermissions {
            entries: Some(
                paths
                    .iter()
                    .map(|path| v2::FileSystemSandboxEntry {
                        access: v2::FileSystemAccessMode::Write,
                        path: v2::FileSystemPath::Path { path: path.clone() },
                    })
                    .collect(),
            ),
            glob_scan_max_depth: None,
            read: None,
            write: Some(paths.clone()),
        }),
        network: grant.network.then_some(v2::AdditionalNetworkPermissions {
            enabled: Some(true),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn wrong_or_empty_grants_deny() {
        let denials = [
            Err(crate::protocol::JsonRpcError {
                code: -1,
                message: "no".into(),
                data: None,
            }),
            Ok(json!(null)),
            Ok(json!({})),
            Ok(json!({"permissions": "all"})),
            Ok(json!({"permissions": {}})),
            Ok(json!({"permissions": {"network": {"enabled": false}}})),
            Ok(json!({"permissions": {"network": {"enabled": true}}, "scope": "forever"})),
            Ok(json!({"permissions": {"network": {"enabled": true}}, "strictAutoReview": true})),
            Ok(
                json!({"permissions": {"fileSystem": {"entries": [{"access": "read", "path": {"type": "path", "path": "/x"}}]}}}),
            ),
            Ok(
                json!({"permissions": {"fileSystem": {"entries": [{"access": "write", "path": {"type": "glob_pattern", "pattern": "/**"}}]}}}),
            ),
        ];
        for reply in denials {
            let shown = format!("{reply:?}");
            assert_eq!(
                decode_permissions(reply),
                PermissionsDecision::Denied,
                "{shown}"
            );
        }
    }

    #[test]
    fn a_grant_names_directories_network_and_scope() {
        let reply = Ok(json!({
            "permissions": {
                "fileSystem": {"write": ["/a"], "entries": [{"access": "write", "path": {"type": "path", "path": "/b"}}]},
                "network": {"enabled": true}
            },
            "scope": "session"
        }));
        assert_eq!(
            decode_permissions(reply),
            PermissionsDecision::Granted {
                permissions: PermissionGrant {
                    writable_roots: vec![PathBuf::from("/a"), PathBuf::from("/b")],
                    network: true,
                },
                scope: GrantScope::Session,
            }
        );
    }
}
