//! Approval rules: given the policy, the sandbox and a proposed action, decide whether it
//! runs, asks, or is refused. Pure functions, so the whole policy × sandbox matrix is unit
//! tested without a model.

use interpreter_mcp_client::{McpApprovalMode, ToolHints};
use interpreter_protocol::{AskForApproval, Question, SandboxPolicy};
use interpreter_tools::safety;

/// What to do with a shell command before running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandAssessment {
    /// Run it; `sandboxed` says whether under the OS sandbox.
    Run { sandboxed: bool },
    /// Ask the user; if approved, run it with `sandboxed` as given.
    Ask { sandboxed: bool, reason: String },
    /// Refuse without asking; the text goes back to the model.
    Reject(String),
}

/// Assess a command the model wants to run.
///
/// `escalation_requested` is the model asking to run outside the sandbox
/// (`sandbox_permissions: "require_escalated"`).
pub(crate) fn assess_command(
    policy: AskForApproval,
    sandbox: &SandboxPolicy,
    argv: &[String],
    escalation_requested: bool,
    approved_for_session: bool,
) -> CommandAssessment {
    let unsandboxed = sandbox.runs_unsandboxed();
    if approved_for_session {
        return CommandAssessment::Run {
            sandboxed: !unsandboxed && !escalation_requested,
        };
    }
    let dangerous = safety::is_dangerous_command(argv);
    match policy {
        AskForApproval::Untrusted => {
            if safety::is_known_safe_command(argv) && !escalation_requested {
                CommandAssessment::Run {
                    sandboxed: !unsandboxed,
                }
            } else {
                CommandAssessment::Ask {
                    sandboxed: !unsandboxed && !escalation_requested,
                    reason: if escalation_requested {
                        "the command asks to run outside the sandbox".to_string()
                    } else {
                        "approval policy `untrusted` asks before any command that is not known to be read-only".to_string()
                    },
                }
            }
        }
        AskForApproval::OnRequest | AskForApproval::OnFailure | AskForApproval::Granular(_) => {
            if escalation_requested && !unsandboxed {
                if !policy.may_ask(Question::Sandbox) {
                    return CommandAssessment::Reject(
                        "running outside the sandbox needs approval, but the approval policy turns sandbox questions off; run the command inside the sandbox or do without it".to_string(),
                    );
                }
                CommandAssessment::Ask {
                    sandboxed: false,
                    reason: "the command asks to run outside the sandbox".to_string(),
                }
            } else if dangerous {
                if !policy.may_ask(Question::Rules) {
                    return CommandAssessment::Reject(
                        "this command deletes files forcefully and needs approval, but the approval policy turns rule questions off".to_string(),
                    );
                }
                CommandAssessment::Ask {
                    sandboxed: !unsandboxed,
                    reason: "the command deletes files forcefully".to_string(),
                }
            } else {
                CommandAssessment::Run {
                    sandboxed: !unsandboxed,
                }
            }
        }
        AskForApproval::Never => {
            if escalation_requested && !unsandboxed {
                CommandAssessment::Reject(
                    "running outside the sandbox needs approval, but the approval policy is `never`; run the command inside the sandbox or do without it".to_string(),
                )
            } else if dangerous {
                CommandAssessment::Reject(
                    "this command deletes files forcefully and needs approval, but the approval policy is `never`".to_string(),
                )
            } else {
                CommandAssessment::Run {
                    sandboxed: !unsandboxed,
                }
            }
        }
    }
}

/// Whether a sandboxed command that failed (apparently because of the sandbox) may be
/// retried without it after asking the user.
pub(crate) fn may_ask_to_retry_unsandboxed(policy: AskForApproval) -> bool {
    matches!(
        policy,
        AskForApproval::OnFailure | AskForApproval::Untrusted
    )
}

/// What to do with a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatchAssessment {
    Apply,
    Ask { reason: String },
    Reject(String),
}

/// Assess a patch. `unwritable` is `None` when every path it touches is writable in the
/// sandbox (resolved, so symlinks and `..` cannot escape), otherwise why not, in words
/// (the sandbox is read-only; a path is protected; a path lies outside the roots).
pub(crate) fn assess_patch(
    policy: AskForApproval,
    unwritable: Option<&str>,
    approved_for_session: bool,
) -> PatchAssessment {
    if approved_for_session {
        return PatchAssessment::Apply;
    }
    match policy {
        // The sandbox's own reason first: the person must see that the patch writes
        // outside the roots (or through a symlink that leads there), not only the policy.
        AskForApproval::Untrusted => PatchAssessment::Ask {
            reason: unwritable.map_or_else(
                || "approval policy `untrusted` asks before every file change".to_string(),
                str::to_string,
            ),
        },
        AskForApproval::OnRequest | AskForApproval::OnFailure => match unwritable {
            None => PatchAssessment::Apply,
            Some(why) => PatchAssessment::Ask {
                reason: why.to_string(),
            },
        },
        AskForApproval::Granular(_) => match unwritable {
            None => PatchAssessment::Apply,
            Some(why) if policy.may_ask(Question::Sandbox) => PatchAssessment::Ask {
                reason: why.to_string(),
            },
            Some(why) => PatchAssessment::Reject(format!(
                "{why}; writing there needs approval, but the approval policy turns sandbox questions off"
            )),
        },
        AskForApproval::Never => match unwritable {
            None => PatchAssessment::Apply,
            Some(why) => PatchAssessment::Reject(format!(
                "{why}; writing there needs approval, but the approval policy is `never`"
            )),
        },
    }
}

/// What to do with an MCP tool call before making it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpAssessment {
    Run,
    Ask(String),
    /// Refuse without asking; the text goes back to the model.
    Reject(String),
}

/// Assess a call of an MCP tool. `mode` is the user's setting for the tool; `auto` reads
/// the server's hints like the command rules read the command: read-only tools run
/// without asking, tools that say they are destructive are treated like dangerous
/// commands (asked for, refused where nobody can be asked), and the others are asked for
/// only under `untrusted`. MCP tools are never sandboxed, so there is no sandbox to fall
/// back on.
pub(crate) fn assess_mcp(
    policy: AskForApproval,
    mode: McpApprovalMode,
    hints: ToolHints,
    approved_for_session: bool,
) -> McpAssessment {
    if approved_for_session || mode == McpApprovalMode::Never {
        return McpAssessment::Run;
    }
    let cannot_ask = |why: &str| {
        McpAssessment::Reject(format!(
            "this MCP tool {why}, but approval policy `{}` cannot ask; the call was not made",
            policy.as_str()
        ))
    };
    match mode {
        McpApprovalMode::Never => McpAssessment::Run,
        McpApprovalMode::Always => match policy {
            _ if !policy.may_ask(Question::Rules) => {
                cannot_ask("is configured to always ask (`approval = \"always\"`)")
            }
            _ => McpAssessment::Ask(
                "the tool is configured to always ask (`approval = \"always\"`)".to_string(),
            ),
        },
        McpApprovalMode::Auto => {
            if hints.read_only == Some(true) {
                return McpAssessment::Run;
            }
            let destructive = hints.destructive == Some(true);
            match policy {
                AskForApproval::Untrusted => McpAssessment::Ask(
                    "approval policy `untrusted` asks before any MCP tool that is not read-only"
                        .to_string(),
                ),
                _ if destructive && !policy.may_ask(Question::Rules) => {
                    cannot_ask("is marked destructive by its server")
                }
                AskForApproval::OnRequest
                | AskForApproval::OnFailure
                | AskForApproval::Granular(_)
                    if destructive =>
                {
                    McpAssessment::Ask("the server marks this tool as destructive".to_string())
                }
                _ => McpAssessment::Run,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        vec!["bash".into(), "-lc".into(), s.into()]
    }

    fn granular(sandbox_approval: bool, rules: bool) -> AskForApproval {
        AskForApproval::Granular(interpreter_protocol::GranularApproval {
            sandbox_approval,
            rules,
            ..Default::default()
        })
    }

    #[test]
    fn granular_patches_and_mcp_tools_follow_their_kind_of_question() {
        let outside = Some("the path lies outside the writable roots");
        assert!(matches!(
            assess_patch(granular(false, true), outside, false),
            PatchAssessment::Reject(_)
        ));
        assert!(matches!(
            assess_patch(granular(true, false), outside, false),
            PatchAssessment::Ask { .. }
        ));
        assert_eq!(
            assess_patch(granular(false, false), None, false),
            PatchAssessment::Apply
        );
        let destructive = ToolHints {
            destructive: Some(true),
            ..Default::default()
        };
        assert!(matches!(
            assess_mcp(
                granular(true, false),
                McpApprovalMode::Auto,
                destructive,
                false
            ),
            McpAssessment::Reject(_)
        ));
        assert!(matches!(
            assess_mcp(
                granular(false, true),
                McpApprovalMode::Auto,
                destructive,
                false
            ),
            McpAssessment::Ask(_)
        ));
        assert!(matches!(
            assess_mcp(
                granular(true, false),
                McpApprovalMode::Always,
                ToolHints::default(),
                false
            ),
            McpAssessment::Reject(_)
        ));
        assert!(!may_ask_to_retry_unsandboxed(granular(true, true)));
    }

    #[test]
    fn granular_is_codex_wire_shape_and_elicitations_follow_their_flag() {
        let policy: AskForApproval = serde_json::from_value(serde_json::json!({
            "granular": {"sandbox_approval": true, "rules": false, "mcp_elicitations": false}
        }))
        .unwrap_or_default();
        assert_eq!(policy, granular(true, false));
        #[derive(serde::Deserialize)]
        struct File {
            approval_policy: AskForApproval,
        }
        let file: Result<File, _> = toml::from_str(
            "approval_policy = { granular = { sandbox_approval = true, rules = false, mcp_elicitations = false } }",
        );
        assert_eq!(file.map(|f| f.approval_policy).ok(), Some(policy));
        assert!(!policy.may_ask(Question::McpElicitation));
        assert!(AskForApproval::Never.may_ask(Question::McpElicitation));
        // The required flags are required: a policy missing one is not a guess.
        assert!(
            serde_json::from_value::<AskForApproval>(serde_json::json!({
                "granular": {"sandbox_approval": true}
            }))
            .is_err()
        );
    }

    fn ws() -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: vec![],
            network_access: false,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: false,
        }
    }

    #[test]
    fn command_matrix() {
        use AskForApproval::*;
        use CommandAssessment::*;
        let full = SandboxPolicy::DangerFullAccess;
        let ws = ws();
        let cases: Vec<(
            AskForApproval,
            &SandboxPolicy,
            &str,
            bool,
            CommandAssessment,
        )> = vec![
            (Untrusted, &ws, "ls", false, Run { sandboxed: true }),
            (Untrusted, &full, "ls", false, Run { sandboxed: false }),
            (
                Untrusted,
                &ws,
                "touch x",
                false,
                Ask {
                    sandboxed: true,
                    reason: String::new(),
                },
            ),
            (OnRequest, &ws, "touch x", false, Run { sandboxed: true }),
            (
                OnRequest,
                &ws,
                "touch x",
                true,
                Ask {
                    sandboxed: false,
                    reason: String::new(),
                },
            ),
            (OnRequest, &full, "touch x", true, Run { sandboxed: false }),
            (
                OnRequest,
                &ws,
                "rm -rf build",
                false,
                Ask {
                    sandboxed: true,
                    reason: String::new(),
                },
            ),
            (OnFailure, &ws, "touch x", false, Run { sandboxed: true }),
            (Never, &ws, "touch x", false, Run { sandboxed: true }),
            (Never, &ws, "touch x", true, Reject(String::new())),
            (Never, &ws, "rm -rf build", false, Reject(String::new())),
            // Granular: on-request, with each kind of question on or off.
            (
                granular(true, false),
                &ws,
                "touch x",
                false,
                Run { sandboxed: true },
            ),
            (
                granular(true, false),
                &ws,
                "touch x",
                true,
                Ask {
                    sandboxed: false,
                    reason: String::new(),
                },
            ),
            (
                granular(false, true),
                &ws,
                "touch x",
                true,
                Reject(String::new()),
            ),
            (
                granular(false, true),
                &ws,
                "rm -rf build",
                false,
                Ask {
                    sandboxed: true,
                    reason: String::new(),
                },
            ),
            (
                granular(true, false),
                &ws,
                "rm -rf build",
                false,
                Reject(String::new()),
            ),
        ];
        for (policy, sandbox, cmd, esc, want) in cases {
            let got = assess_command(policy, sandbox, &argv(cmd), esc, false);
            let same = match (&got, &want) {
                (Run { sandboxed: a }, Run { sandboxed: b }) => a == b,
                (Ask { sandboxed: a, .. }, Ask { sandboxed: b, .. }) => a == b,
                (Reject(_), Reject(_)) => true,
                _ => false,
            };
            assert!(
                same,
                "{policy:?} {sandbox:?} {cmd} esc={esc}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn session_approval_skips_asking() {
        let got = assess_command(
            AskForApproval::Untrusted,
            &ws(),
            &argv("touch x"),
            false,
            true,
        );
        assert_eq!(got, CommandAssessment::Run { sandboxed: true });
    }

    #[test]
    fn patch_matrix() {
        use AskForApproval::*;
        assert!(matches!(
            assess_patch(Untrusted, None, false),
            PatchAssessment::Ask { .. }
        ));
        assert_eq!(assess_patch(OnRequest, None, false), PatchAssessment::Apply);
        assert!(matches!(
            assess_patch(OnRequest, Some("outside"), false),
            PatchAssessment::Ask { .. }
        ));
        assert_eq!(assess_patch(Never, None, false), PatchAssessment::Apply);
        assert!(matches!(
            assess_patch(Never, Some("outside"), false),
            PatchAssessment::Reject(_)
        ));
        assert_eq!(
            assess_patch(Untrusted, Some("outside"), true),
            PatchAssessment::Apply
        );
    }

    #[test]
    fn mcp_calls_follow_mode_hints_and_policy() {
        use AskForApproval::*;
        use McpAssessment as A;
        let read_only = ToolHints {
            read_only: Some(true),
            destructive: None,
        };
        let destructive = ToolHints {
            read_only: Some(false),
            destructive: Some(true),
        };
        let plain = ToolHints::default();
        let kind = |a: McpAssessment| match a {
            A::Run => "run",
            A::Ask(_) => "ask",
            A::Reject(_) => "reject",
        };
        // (policy, mode, hints) → expected
        let cases = [
            (Untrusted, McpApprovalMode::Auto, read_only, "run"),
            (Untrusted, McpApprovalMode::Auto, plain, "ask"),
            (Untrusted, McpApprovalMode::Auto, destructive, "ask"),
            (OnRequest, McpApprovalMode::Auto, plain, "run"),
            (OnRequest, McpApprovalMode::Auto, destructive, "ask"),
            (OnFailure, McpApprovalMode::Auto, destructive, "ask"),
            (Never, McpApprovalMode::Auto, plain, "run"),
            (Never, McpApprovalMode::Auto, destructive, "reject"),
            (Never, McpApprovalMode::Auto, read_only, "run"),
            (OnRequest, McpApprovalMode::Always, read_only, "ask"),
            (Never, McpApprovalMode::Always, plain, "reject"),
            (Untrusted, McpApprovalMode::Never, destructive, "run"),
            (Never, McpApprovalMode::Never, destructive, "run"),
        ];
        for (policy, mode, hints, want) in cases {
            let got = kind(assess_mcp(policy, mode, hints, false));
            assert_eq!(got, want, "{policy:?} {mode:?} {hints:?}");
        }
        assert_eq!(
            assess_mcp(Untrusted, McpApprovalMode::Always, plain, true),
            A::Run,
            "approved for the session"
        );
    }
}
