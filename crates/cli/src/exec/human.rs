//! Human-readable exec output.
//!
//! Everything but the final answer goes to stderr (header, commands and their output,
//! patches, plan updates, warnings, errors, token total), so that `interpreter exec … >
//! answer.txt` captures just the answer. The final agent message is held back until the
//! turn ends and then printed to stdout; earlier agent messages go to stderr as they
//! arrive. A spinner runs only when stderr is a terminal.

use std::io::{IsTerminal, Write};

use interpreter_protocol::{
    EventMsg, ExecCommandStatus, McpStartupStatus, SessionConfiguredEvent, StepStatus, TokenUsage,
};

use crate::cli::ColorArg;

/// Lines of command output shown per command; the rest is summarized.
const MAX_OUTPUT_LINES: usize = 20;
const SPINNER_FRAMES: [&str; 4] = ["-", "\\", "|", "/"];

struct Style {
    enabled: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
    fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
    fn magenta(&self, text: &str) -> String {
        self.paint("35", text)
    }
}

pub struct HumanOutput {
    style: Style,
    spinner: bool,
    spinner_frame: usize,
    spinner_visible: bool,
    turn_running: bool,
    /// The latest agent message, not yet shown: it is the final answer unless another
    /// event follows it.
    pending_agent_message: Option<String>,
    last_total_usage: Option<TokenUsage>,
}

impl HumanOutput {
    pub fn new(color: ColorArg) -> Self {
        let stderr_is_terminal = std::io::stderr().is_terminal();
        let enabled = match color {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => stderr_is_terminal,
        };
        Self {
            style: Style { enabled },
            spinner: stderr_is_terminal,
            spinner_frame: 0,
            spinner_visible: false,
            turn_running: false,
            pending_agent_message: None,
            last_total_usage: None,
        }
    }

    fn err(&mut self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        if self.spinner_visible {
            let _ = write!(stderr, "\r\x1b[K");
            self.spinner_visible = false;
        }
        let _ = writeln!(stderr, "{text}");
    }

    pub fn spinner_enabled(&self) -> bool {
        self.spinner && self.turn_running
    }

    pub fn spin(&mut self) {
        let frame = SPINNER_FRAMES[self.spinner_frame % SPINNER_FRAMES.len()];
        self.spinner_frame += 1;
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r{} working", self.style.dim(frame));
        let _ = stderr.flush();
        self.spinner_visible = true;
    }

    pub fn header(&mut self, configured: &SessionConfiguredEvent, prompt: &str) {
        let mut lines = vec![
            format!("interpreter v{}", env!("CARGO_PKG_VERSION")),
            "--------".to_string(),
            format!(
                "{} {}",
                self.style.bold("workdir:"),
                configured.cwd.display()
            ),
            format!("{} {}", self.style.bold("model:"), configured.model),
            format!(
                "{} {}",
                self.style.bold("provider:"),
                configured.model_provider_id
            ),
            format!(
                "{} {}",
                self.style.bold("approval:"),
                configured.approval_policy.as_str()
            ),
            format!(
                "{} {}",
                self.style.bold("sandbox:"),
                configured.sandbox_policy.mode().as_str()
            ),
        ];
        if let Some(effort) = configured.reasoning_effort {
            lines.push(format!(
                "{} {}",
                self.style.bold("reasoning effort:"),
                effort.as_str()
            ));
        }
        lines.push(format!(
            "{} {}",
            self.style.bold("session id:"),
            configured.thread_id
        ));
        lines.push("--------".to_string());
        lines.push(self.style.bold("user"));
        lines.push(prompt.to_string());
        for line in lines {
            self.err(&line);
        }
    }

    fn flush_pending_agent_message(&mut self) {
        if let Some(message) = self.pending_agent_message.take() {
            let label = self.style.magenta("interpreter");
            self.err(&label);
            self.err(&message);
        }
    }

    pub fn event(&mut self, msg: &EventMsg) {
        match msg {
            EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentReasoningDelta(_)
            | EventMsg::ExecCommandOutputDelta(_)
            | EventMsg::SessionConfigured(_)
            | EventMsg::UserMessage(_)
            | EventMsg::ShutdownComplete => return,
            EventMsg::TokenCount(count) => {
                if let Some(info) = &count.info {
                    self.last_total_usage = Some(info.total_token_usage);
                }
                return;
            }
            EventMsg::TaskComplete(done) => {
                self.turn_running = false;
                if done.error.is_some() {
                    self.flush_pending_agent_message();
                }
                self.token_total();
                return;
            }
            _ => {}
        }
        self.flush_pending_agent_message();
        match msg {
            EventMsg::TaskStarted(_) => self.turn_running = true,
            EventMsg::AgentMessage(message) => {
                self.pending_agent_message = Some(message.message.clone());
            }
            EventMsg::AgentReasoning(reasoning) if !reasoning.text.trim().is_empty() => {
                let label = self.style.dim("thinking");
                self.err(&label);
                let text = self.style.dim(&reasoning.text);
                self.err(&text);
            }
            EventMsg::ExecCommandBegin(begin) => {
                let label = self.style.magenta("exec");
                self.err(&label);
                let line = format!(
                    "{} in {}",
                    self.style
                        .bold(&interpreter_tools::display_command(&begin.command)),
                    begin.cwd.display()
                );
                self.err(&line);
            }
            EventMsg::ExecCommandEnd(end) => {
                let summary = match (end.status, end.exit_code) {
                    (ExecCommandStatus::Declined, _) => self.style.yellow(" declined"),
                    (_, Some(0)) => self
                        .style
                        .green(&format!(" succeeded in {}ms:", end.duration_ms)),
                    (_, Some(code)) => self
                        .style
                        .red(&format!(" exited {code} in {}ms:", end.duration_ms)),
                    (_, None) => self
                        .style
                        .red(&format!(" killed after {}ms:", end.duration_ms)),
                };
                self.err(&summary);
                let shown = truncate_lines(&end.aggregated_output, MAX_OUTPUT_LINES);
                if !shown.is_empty() {
                    let shown = self.style.dim(&shown);
                    self.err(&shown);
                }
            }
            EventMsg::PatchApplyBegin(begin) => {
                let label = self.style.magenta("apply patch");
                self.err(&label);
                for (path, change) in &begin.changes {
                    let marker = match change.kind() {
                        "add" => "A",
                        "delete" => "D",
                        _ => "M",
                    };
                    self.err(&format!("  {marker} {}", path.display()));
                }
            }
            EventMsg::PatchApplyEnd(end) => {
                if end.success {
                    let line = self.style.green("patch: completed");
                    self.err(&line);
                } else {
                    let line = self.style.red("patch: failed");
                    self.err(&line);
                    if !end.stderr.trim().is_empty() {
                        self.err(end.stderr.trim_end());
                    }
                }
            }
            EventMsg::McpToolCallBegin(begin) => {
                let line = format!(
                    "{} {}/{} started",
                    self.style.magenta("mcp:"),
                    begin.invocation.server,
                    begin.invocation.tool
                );
                self.err(&line);
            }
            EventMsg::McpToolCallEnd(end) => {
                let status = match &end.result {
                    Ok(_) => self.style.green("(completed)"),
                    Err(message) => self.style.red(&format!("(failed: {message})")),
                };
                let line = format!(
                    "{} {}/{} {status}",
                    self.style.magenta("mcp:"),
                    end.invocation.server,
                    end.invocation.tool
                );
                self.err(&line);
            }
            EventMsg::McpStartupUpdate(update) => {
                let status = match &update.status {
                    McpStartupStatus::Starting => "starting".to_string(),
                    McpStartupStatus::Ready { tools } => {
                        self.style.green(&format!("ready ({tools} tools)"))
                    }
                    McpStartupStatus::Failed { error } => {
                        self.style.red(&format!("failed: {error}"))
                    }
                };
                let line = format!(
                    "{} server {} {status}",
                    self.style.magenta("mcp:"),
                    update.server
                );
                self.err(&line);
            }
            EventMsg::PlanUpdate(plan) => {
                let label = self.style.magenta("update plan");
                self.err(&label);
                if let Some(explanation) = &plan.explanation {
                    let text = self.style.dim(explanation);
                    self.err(&text);
                }
                for step in &plan.plan {
                    let line = match step.status {
                        StepStatus::Completed => {
                            format!("  {} {}", self.style.green("✓"), step.step)
                        }
                        StepStatus::InProgress => {
                            format!("  {} {}", self.style.yellow("→"), step.step)
                        }
                        StepStatus::Pending => format!("  • {}", step.step),
                    };
                    self.err(&line);
                }
            }
            EventMsg::Warning(warning) => self.warning(&warning.message),
            EventMsg::ContextCompacted(compacted) => self.warning(&format!(
                "context compacted: {} history items summarised into {}",
                compacted.items_before, compacted.items_after
            )),
            EventMsg::Error(error) => {
                let line = self.style.red(&format!("ERROR: {}", error.message));
                self.err(&line);
            }
            EventMsg::StreamError(error) => {
                let line = self.style.yellow(&format!(
                    "stream error: {}; retrying ({}/{})",
                    error.message, error.attempt, error.max_attempts
                ));
                self.err(&line);
            }
            EventMsg::TurnAborted(_) => {
                self.turn_running = false;
                let line = self.style.red("turn interrupted");
                self.err(&line);
            }
            _ => {}
        }
    }

    pub fn warning(&mut self, message: &str) {
        let line = self.style.yellow(&format!("warning: {message}"));
        self.err(&line);
    }

    fn token_total(&mut self) {
        if let Some(total) = &self.last_total_usage {
            let blended = total
                .input_tokens
                .saturating_sub(total.cached_input_tokens)
                .saturating_add(total.output_tokens);
            let label = self.style.dim("tokens used");
            self.err(&label);
            self.err(&blended.to_string());
        }
    }

    /// The answer: on stdout, alone, so it can be piped or redirected.
    pub fn final_message(&mut self, message: Option<&str>) {
        self.pending_agent_message = None;
        if let Some(message) = message {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{message}");
            let _ = stdout.flush();
        }
    }
}

/// The first `max` lines, plus a note of how many were left out.
fn truncate_lines(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= max {
        return lines.join("\n");
    }
    let mut shown = lines[..max].join("\n");
    shown.push_str(&format!("\n… ({} more lines)", lines.len() - max));
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_notes_hidden_lines() {
        assert_eq!(truncate_lines("a\nb\nc\n", 2), "a\nb\n… (1 more lines)");
        assert_eq!(truncate_lines("a\nb\n", 2), "a\nb");
    }
}
