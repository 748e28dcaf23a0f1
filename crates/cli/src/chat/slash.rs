//! Slash commands typed at the interactive prompt.

use interpreter_protocol::{AskForApproval, SandboxMode};

/// The commands and what they do, for `/help`.
pub(super) const HELP: &[(&str, &str)] = &[
    ("/new", "start a new thread"),
    (
        "/resume [ID|--last]",
        "continue an earlier thread (without an argument: list this directory's recent ones)",
    ),
    ("/model [NAME]", "show or change the model"),
    (
        "/approval [POLICY]",
        "show or change when to ask: untrusted, on-failure, on-request, never",
    ),
    (
        "/sandbox [MODE]",
        "show or change the sandbox: read-only, workspace-write, danger-full-access",
    ),
    (
        "/status",
        "model, provider, thread, directory, approvals, sandbox, tokens",
    ),
    ("/help", "this list"),
    ("/exit", "leave (also /quit, Ctrl-D at an empty prompt)"),
];

/// The command names, for completion.
pub(super) const NAMES: &[&str] = &[
    "/new",
    "/resume",
    "/model",
    "/approval",
    "/sandbox",
    "/status",
    "/help",
    "/exit",
    "/quit",
];

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Slash {
    New,
    /// `/resume` alone lists threads.
    Resume(Option<ResumeWhich>),
    Model(Option<String>),
    Approval(Option<AskForApproval>),
    Sandbox(Option<SandboxMode>),
    Status,
    Help,
    Exit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ResumeWhich {
    Id(String),
    Last,
}

/// Parse a line that starts with `/`. The error is the message to show.
pub(super) fn parse(line: &str) -> Result<Slash, String> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or("/");
    let argument = words.next();
    if words.next().is_some() {
        return Err(format!("{name} takes at most one argument (see /help)"));
    }
    let no_argument = |slash: Slash| match argument {
        None => Ok(slash),
        Some(_) => Err(format!("{name} takes no argument")),
    };
    match name {
        "/new" => no_argument(Slash::New),
        "/resume" => Ok(Slash::Resume(argument.map(|arg| match arg {
            "--last" => ResumeWhich::Last,
            id => ResumeWhich::Id(id.to_string()),
        }))),
        "/model" => Ok(Slash::Model(argument.map(str::to_string))),
        "/approval" | "/approvals" => argument
            .map(parse_approval)
            .transpose()
            .map(Slash::Approval),
        "/sandbox" => argument.map(parse_sandbox).transpose().map(Slash::Sandbox),
        "/status" => no_argument(Slash::Status),
        "/help" | "/?" => no_argument(Slash::Help),
        "/exit" | "/quit" => no_argument(Slash::Exit),
        other => Err(format!("unknown command {other} (see /help)")),
    }
}

fn parse_approval(value: &str) -> Result<AskForApproval, String> {
    match value {
        "untrusted" => Ok(AskForApproval::Untrusted),
        "on-failure" => Ok(AskForApproval::OnFailure),
        "on-request" => Ok(AskForApproval::OnRequest),
        "never" => Ok(AskForApproval::Never),
        other => Err(format!(
            "unknown approval policy `{other}`: untrusted, on-failure, on-request or never"
        )),
    }
}

fn parse_sandbox(value: &str) -> Result<SandboxMode, String> {
    match value {
        "read-only" => Ok(SandboxMode::ReadOnly),
        "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
        "danger-full-access" => Ok(SandboxMode::DangerFullAccess),
        other => Err(format!(
            "unknown sandbox mode `{other}`: read-only, workspace-write or danger-full-access"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse() {
        assert_eq!(parse("/new"), Ok(Slash::New));
        assert_eq!(parse("  /status  "), Ok(Slash::Status));
        assert_eq!(parse("/resume"), Ok(Slash::Resume(None)));
        assert_eq!(
            parse("/resume --last"),
            Ok(Slash::Resume(Some(ResumeWhich::Last)))
        );
        assert_eq!(
            parse("/resume abc"),
            Ok(Slash::Resume(Some(ResumeWhich::Id("abc".to_string()))))
        );
        assert_eq!(parse("/model"), Ok(Slash::Model(None)));
        assert_eq!(
            parse("/model qwen3"),
            Ok(Slash::Model(Some("qwen3".into())))
        );
        assert_eq!(
            parse("/approval untrusted"),
            Ok(Slash::Approval(Some(AskForApproval::Untrusted)))
        );
        assert_eq!(
            parse("/sandbox workspace-write"),
            Ok(Slash::Sandbox(Some(SandboxMode::WorkspaceWrite)))
        );
        assert_eq!(parse("/quit"), Ok(Slash::Exit));
    }

    #[test]
    fn every_completion_parses() {
        for name in NAMES {
            let line = match *name {
                "/model" => "/model m".to_string(),
                other => other.to_string(),
            };
            assert!(parse(&line).is_ok(), "{line}");
        }
    }

    #[test]
    fn mistakes_are_explained() {
        assert!(parse("/frobnicate").unwrap_err().contains("/help"));
        assert!(
            parse("/approval sometimes")
                .unwrap_err()
                .contains("on-request")
        );
        assert!(parse("/sandbox open").unwrap_err().contains("read-only"));
        assert!(parse("/new thread").is_err());
        assert!(parse("/model a b").is_err());
    }
}
