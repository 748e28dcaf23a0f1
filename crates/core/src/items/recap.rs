//! What a turn did before it stopped, for a caller that must decide whether to continue,
//! retry or undo: the commands it ran with their exit codes, the files it changed, the
//! MCP tools it called, and the last thing the model said. Folded from the turn's
//! events (the same events live and read back), bounded in size, and rendered once here
//! for every front end that reports a turn that failed, was interrupted or was cut off.

use interpreter_protocol::{EventMsg, ExecCommandStatus};
use interpreter_tools::safety::display_command;
use serde::Serialize;

/// Commands listed; more are counted.
const MAX_COMMANDS: usize = 20;
/// Files listed; more are counted.
const MAX_FILES: usize = 30;
/// MCP calls listed; more are counted.
const MAX_TOOL_CALLS: usize = 20;
/// Characters of one command line, and of the last message.
const MAX_COMMAND_CHARS: usize = 200;
const MAX_MESSAGE_CHARS: usize = 1000;

/// One command the turn ran (or was refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRecap {
    pub command: String,
    pub exit_code: Option<i32>,
    /// `completed` (exit 0), `failed`, or `declined` (it never ran).
    pub status: &'static str,
}

/// What a turn did, so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRecap {
    pub commands: Vec<CommandRecap>,
    #[serde(skip_serializing_if = "is_zero")]
    pub more_commands: usize,
    /// Files a patch changed, in the order first changed.
    pub files_changed: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub more_files: usize,
    /// `server/tool` of each MCP call, with whether it succeeded.
    pub tool_calls: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub more_tool_calls: usize,
    /// The model's last finished message, or what it had written of an unfinished one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
    #[serde(skip)]
    streaming: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

impl TurnRecap {
    /// Takes in one event of the turn.
    pub fn observe(&mut self, msg: &EventMsg) {
        match msg {
            EventMsg::ExecCommandEnd(end) => {
                if self.commands.len() >= MAX_COMMANDS {
                    self.more_commands += 1;
                    return;
                }
                let status = match end.status {
                    ExecCommandStatus::Declined => "declined",
                    ExecCommandStatus::Completed if end.exit_code == Some(0) => "completed",
                    ExecCommandStatus::Completed | ExecCommandStatus::Failed => "failed",
                };
                self.commands.push(CommandRecap {
                    command: clip(&display_command(&end.command), MAX_COMMAND_CHARS),
                    exit_code: end.exit_code,
                    status,
                });
            }
            EventMsg::PatchApplyEnd(end) if end.success => {
                for path in end.changes.keys() {
                    let path = path.display().to_string();
                    if self.files_changed.contains(&path) {
                        continue;
                    }
                    if self.files_changed.len() >= MAX_FILES {
                        self.more_files += 1;
                    } else {
                        self.files_changed.push(path);
                    }
                }
            }
            EventMsg::McpToolCallEnd(end) => {
                if self.tool_calls.len() >= MAX_TOOL_CALLS {
                    self.more_tool_calls += 1;
                    return;
                }
                let outcome = if end.result.is_ok() { "" } else { " (failed)" };
                self.tool_calls.push(format!(
                    "{}/{}{outcome}",
                    end.invocation.server, end.invocation.tool
                ));
            }
            EventMsg::AgentMessageDelta(delta) if self.streaming.len() < MAX_MESSAGE_CHARS * 4 => {
                self.streaming.push_str(&delta.delta);
            }
            EventMsg::AgentMessage(message) => {
                self.streaming.clear();
                if !message.message.trim().is_empty() {
                    self.last_message = Some(clip(&message.message, MAX_MESSAGE_CHARS));
                }
            }
            _ => {}
        }
    }

    /// The recap to report: an answer still streaming when the turn stopped counts as
    /// the last thing the model said.
    pub fn finished(mut self) -> Self {
        if !self.streaming.trim().is_empty() {
            self.last_message = Some(clip(&self.streaming, MAX_MESSAGE_CHARS));
        }
        self.streaming.clear();
        self
    }

    /// Nothing ran, changed or was said.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
            && self.files_changed.is_empty()
            && self.tool_calls.is_empty()
            && self.last_message.is_none()
    }

    /// The recap as lines a calling agent reads (empty when there is nothing to say).
    pub fn render(&self) -> String {
        if self.is_empty() {
            return "Before it stopped, the turn ran no command and changed no file.".into();
        }
        let mut text = String::from("Before it stopped, the turn:");
        for command in &self.commands {
            let outcome = match (command.status, command.exit_code) {
                ("declined", _) => "declined; it did not run".to_string(),
                (_, Some(code)) => format!("exit {code}"),
                (_, None) => "no exit code".to_string(),
            };
            text.push_str(&format!("\n- ran `{}` ({outcome})", command.command));
        }
        if self.more_commands > 0 {
            text.push_str(&format!("\n- ran {} more commands", self.more_commands));
        }
        if !self.files_changed.is_empty() {
            text.push_str(&format!("\n- changed {}", self.files_changed.join(", ")));
            if self.more_files > 0 {
                text.push_str(&format!(" and {} more files", self.more_files));
            }
        }
        if !self.tool_calls.is_empty() {
            text.push_str(&format!("\n- called {}", self.tool_calls.join(", ")));
            if self.more_tool_calls > 0 {
                text.push_str(&format!(" and {} more", self.more_tool_calls));
            }
        }
        if let Some(message) = &self.last_message {
            text.push_str(&format!("\n- last said: {message}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use interpreter_protocol::{
        AgentMessageEvent, DeltaEvent, ExecCommandEndEvent, FileChange, PatchApplyEndEvent,
    };
    use pretty_assertions::assert_eq;

    use super::*;

    fn command(argv: &[&str], exit_code: Option<i32>, status: ExecCommandStatus) -> EventMsg {
        EventMsg::ExecCommandEnd(ExecCommandEndEvent {
            call_id: "c".into(),
            turn_id: "1".into(),
            command: argv.iter().map(|a| a.to_string()).collect(),
            cwd: PathBuf::from("/w"),
            parsed_cmd: Vec::new(),
            exit_code,
            aggregated_output: "output the recap must not carry".into(),
            duration_ms: 3,
            status,
            source: Default::default(),
        })
    }

    #[test]
    fn a_turn_that_stopped_part_way_says_what_ran_changed_and_was_said() {
        let mut recap = TurnRecap::default();
        recap.observe(&command(
            &["cargo", "test"],
            Some(101),
            ExecCommandStatus::Failed,
        ));
        recap.observe(&command(
            &["rm", "-rf", "/"],
            None,
            ExecCommandStatus::Declined,
        ));
        let mut changes = interpreter_protocol::FileChanges::new();
        changes.insert(
            PathBuf::from("/w/src/lib.rs"),
            FileChange::Update {
                unified_diff: String::new(),
                move_path: None,
            },
        );
        recap.observe(&EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: "p".into(),
            turn_id: "1".into(),
            stdout: String::new(),
            stderr: String::new(),
            success: true,
            changes,
        }));
        recap.observe(&EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "Fixed the test.".into(),
        }));
        recap.observe(&EventMsg::AgentMessageDelta(DeltaEvent {
            item_id: String::new(),
            delta: "Now running the".into(),
        }));
        let recap = recap.finished();
        assert_eq!(
            recap.render(),
            "Before it stopped, the turn:\n- ran `cargo test` (exit 101)\n- ran `rm -rf /` (declined; it did not run)\n- changed /w/src/lib.rs\n- last said: Now running the"
        );
        let json = serde_json::to_value(&recap).unwrap();
        assert_eq!(json["commands"][0]["exitCode"], 101);
        assert_eq!(json["filesChanged"][0], "/w/src/lib.rs");
        assert!(!json.to_string().contains("must not carry"));
    }

    #[test]
    fn the_recap_is_bounded() {
        let mut recap = TurnRecap::default();
        let long = "x".repeat(10_000);
        for _ in 0..100 {
            recap.observe(&command(
                &["echo", &long],
                Some(0),
                ExecCommandStatus::Completed,
            ));
        }
        recap.observe(&EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: long.clone(),
        }));
        assert_eq!(recap.commands.len(), MAX_COMMANDS);
        assert_eq!(recap.more_commands, 80);
        assert!(recap.render().len() < 8_000, "{}", recap.render().len());
    }
}
