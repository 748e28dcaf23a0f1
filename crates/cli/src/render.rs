//! Human-readable rendering of a thread's events, shared by `exec` and the interactive
//! mode (`chat`).
//!
//! For exec, everything but the final answer goes to stderr (header, commands and their
//! output, patches, plan updates, warnings, errors, token total), so that `interpreter
//! exec … > answer.txt` captures just the answer. The final agent message is held back
//! until the turn ends and then printed to stdout; earlier agent messages go to stderr as
//! they arrive.
//!
//! In the interactive mode stdout is the conversation: everything goes there, and agent
//! messages stream as their deltas arrive. A spinner runs only when its stream is a
//! terminal, and never while a streamed line is open (it would erase it).

use std::io::{IsTerminal, Write};
use std::path::Path;

use interpreter_core::items::{DeltaKind, ItemEvent, ItemProjector, ItemStatus, TurnItem};
use interpreter_protocol::{
    EventMsg, FileChange, FileChanges, McpStartupStatus, SessionConfiguredEvent, StepStatus,
    TokenUsage,
};

use crate::cli::ColorArg;
use crate::terminal::neutralize_controls as clean;

/// Lines of command output shown per command; the rest is summarized.
const MAX_OUTPUT_LINES: usize = 20;
const SPINNER_FRAMES: [&str; 4] = ["-", "\\", "|", "/"];

pub(crate) struct Style {
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
    pub(crate) fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    pub(crate) fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    pub(crate) fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
    pub(crate) fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    pub(crate) fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
    pub(crate) fn magenta(&self, text: &str) -> String {
        self.paint("35", text)
    }
}

pub(crate) struct HumanOutput {
    style: Style,
    /// Interactive mode: stdout is the conversation and agent messages stream.
    interactive: bool,
    /// A streamed agent message whose line is not finished yet.
    streaming: bool,
    spinner: bool,
    spinner_frame: usize,
    spinner_visible: bool,
    turn_running: bool,
    /// The latest agent message, not yet shown: it is the final answer unless another
    /// event follows it.
    pending_agent_message: Option<String>,
    last_total_usage: Option<TokenUsage>,
    /// Which items are open: the engine's projector, the one every front end uses.
    projector: ItemProjector,
}

impl HumanOutput {
    /// exec's renderer: the answer on stdout, the rest on stderr.
    pub(crate) fn new(color: ColorArg) -> Self {
        Self::with_target(color, false)
    }

    /// The interactive mode's renderer: everything on stdout, agent messages streamed.
    pub(crate) fn interactive(color: ColorArg) -> Self {
        Self::with_target(color, true)
    }

    fn with_target(color: ColorArg, interactive: bool) -> Self {
        let is_terminal = if interactive {
            std::io::stdout().is_terminal()
        } else {
            std::io::stderr().is_terminal()
        };
        let enabled = match color {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => is_terminal,
        };
        Self {
            style: Style { enabled },
            interactive,
            streaming: false,
            spinner: is_terminal,
            spinner_frame: 0,
            spinner_visible: false,
            turn_running: false,
            pending_agent_message: None,
            last_total_usage: None,
            projector: ItemProjector::new(),
        }
    }

    pub(crate) fn style(&self) -> &Style {
        &self.style
    }

    /// Where everything but exec's final answer goes.
    fn sink(&self) -> Box<dyn Write + '_> {
        if self.interactive {
            Box::new(std::io::stdout().lock())
        } else {
            Box::new(std::io::stderr().lock())
        }
    }

    /// Finish a streamed line and erase the spinner, so the next text starts a fresh line.
    fn clear_line(&mut self) {
        let streaming = std::mem::take(&mut self.streaming);
        let spinner_visible = std::mem::take(&mut self.spinner_visible);
        let mut sink = self.sink();
        if streaming {
            let _ = writeln!(sink);
        }
        if spinner_visible {
            let _ = write!(sink, "\r\x1b[K");
        }
        let _ = sink.flush();
    }

    /// One line of output, written as given: untrusted parts must already have been
    /// through [`clean`] (before styling, so the renderer's colours survive).
    pub(crate) fn line(&mut self, text: &str) {
        self.clear_line();
        let mut sink = self.sink();
        let _ = writeln!(sink, "{text}");
        let _ = sink.flush();
    }

    pub(crate) fn spinner_enabled(&self) -> bool {
        self.spinner && self.turn_running && !self.streaming
    }

    pub(crate) fn spin(&mut self) {
        let frame = SPINNER_FRAMES[self.spinner_frame % SPINNER_FRAMES.len()];
        self.spinner_frame += 1;
        let text = format!("\r{} working", self.style.dim(frame));
        let mut sink = self.sink();
        let _ = write!(sink, "{text}");
        let _ = sink.flush();
        drop(sink);
        self.spinner_visible = true;
    }

    /// Stream a fragment of the agent's message (interactive mode).
    fn agent_delta(&mut self, delta: &str) {
        if !self.streaming {
            let label = self.style.magenta("interpreter");
            self.line(&label);
        } else if self.spinner_visible {
            self.clear_line();
        }
        let mut sink = self.sink();
        let _ = write!(sink, "{}", clean(delta));
        let _ = sink.flush();
        drop(sink);
        self.streaming = true;
    }

    pub(crate) fn header(&mut self, configured: &SessionConfiguredEvent, prompt: &str) {
        self.session_header(configured);
        let label = self.style.bold("user");
        self.line(&label);
        self.line(&clean(prompt));
    }

    /// The settings a thread runs with, between two rules.
    pub(crate) fn session_header(&mut self, configured: &SessionConfiguredEvent) {
        let mut lines = vec![
            format!("interpreter v{}", env!("CARGO_PKG_VERSION")),
            "--------".to_string(),
            format!(
                "{} {}",
                self.style.bold("workdir:"),
                clean(&configured.cwd.display().to_string())
            ),
            format!("{} {}", self.style.bold("model:"), clean(&configured.model)),
            format!(
                "{} {}",
                self.style.bold("provider:"),
                clean(&configured.model_provider_id)
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
        for line in lines {
            self.line(&line);
        }
    }

    fn flush_pending_agent_message(&mut self) {
        if let Some(message) = self.pending_agent_message.take() {
            let label = self.style.magenta("interpreter");
            self.line(&label);
            self.line(&clean(&message));
        }
    }

    /// Show one engine event: its items through the engine's projector (the one every
    /// front end uses), then what it says of the turn.
    pub(crate) fn event(&mut self, msg: &EventMsg) {
        for event in self.projector.push(msg) {
            self.item(event);
        }
        self.turn_event(msg);
    }

    fn item(&mut self, event: ItemEvent) {
        match event {
            ItemEvent::Delta(delta) => {
                if self.interactive && delta.kind == DeltaKind::AgentText {
                    self.agent_delta(&delta.text);
                }
            }
            // An answer cut short streamed as far as it came; the turn's end ends its line.
            ItemEvent::Unfinished(_) => {}
            ItemEvent::Started(item) => self.item_started(&item),
            ItemEvent::Completed(item) => self.item_completed(&item),
        }
    }

    /// A tool call is shown as soon as it is known (asked about, or begun).
    fn item_started(&mut self, item: &TurnItem) {
        match item {
            TurnItem::Command(command) => {
                self.flush_pending_agent_message();
                let label = self.style.magenta("exec");
                self.line(&label);
                let line = format!(
                    "{} in {}",
                    self.style.bold(&clean(&interpreter_tools::display_command(
                        &command.command
                    ))),
                    clean(&command.cwd.display().to_string())
                );
                self.line(&line);
            }
            TurnItem::FileChange(change) => {
                self.flush_pending_agent_message();
                let label = self.style.magenta("apply patch");
                self.line(&label);
                for (path, change) in &change.changes {
                    let marker = match change.kind() {
                        "add" => "A",
                        "delete" => "D",
                        _ => "M",
                    };
                    self.line(&format!(
                        "  {marker} {}",
                        clean(&path.display().to_string())
                    ));
                }
            }
            TurnItem::McpToolCall(call) => {
                self.flush_pending_agent_message();
                let line = format!(
                    "{} {}/{} started",
                    self.style.magenta("mcp:"),
                    clean(&call.invocation.server),
                    clean(&call.invocation.tool)
                );
                self.line(&line);
            }
            // Shown once complete.
            TurnItem::UserMessage { .. }
            | TurnItem::AgentMessage { .. }
            | TurnItem::Reasoning { .. }
            | TurnItem::Plan { .. }
            | TurnItem::EnteredReview { .. }
            | TurnItem::ExitedReview { .. }
            | TurnItem::Compaction { .. } => {}
        }
    }

    fn item_completed(&mut self, item: &TurnItem) {
        if let TurnItem::AgentMessage { text, .. } = item {
            if !self.interactive {
                // The final answer unless something follows it.
                self.flush_pending_agent_message();
                self.pending_agent_message = Some(text.clone());
            } else if self.streaming {
                // Already on screen, delta by delta: just end its line.
                self.clear_line();
            } else {
                let label = self.style.magenta("interpreter");
                self.line(&label);
                self.line(&clean(text));
            }
            return;
        }
        if let TurnItem::UserMessage { .. } = item {
            // The user typed it (or exec was given it).
            return;
        }
        self.flush_pending_agent_message();
        match item {
            TurnItem::Reasoning { text, .. } if !text.trim().is_empty() => {
                let label = self.style.dim("thinking");
                self.line(&label);
                let text = self.style.dim(&clean(text));
                self.line(&text);
            }
            TurnItem::Command(command) => {
                let duration_ms = command.duration_ms.unwrap_or(0);
                let summary = match (command.status, command.exit_code) {
                    (ItemStatus::Declined, _) => self.style.yellow(" declined"),
                    (_, Some(0)) => self.style.green(&format!(" succeeded in {duration_ms}ms:")),
                    (_, Some(code)) => self
                        .style
                        .red(&format!(" exited {code} in {duration_ms}ms:")),
                    (_, None) => self.style.red(&format!(" killed after {duration_ms}ms:")),
                };
                self.line(&summary);
                let shown = truncate_lines(&clean(&command.output), MAX_OUTPUT_LINES);
                if !shown.is_empty() {
                    let shown = self.style.dim(&shown);
                    self.line(&shown);
                }
            }
            TurnItem::FileChange(change) => {
                if change.status == ItemStatus::Completed {
                    let line = self.style.green("patch: completed");
                    self.line(&line);
                } else {
                    let line = self.style.red("patch: failed");
                    self.line(&line);
                    if !change.output.trim().is_empty() {
                        self.line(&clean(change.output.trim_end()));
                    }
                }
            }
            TurnItem::McpToolCall(call) => {
                let status = match &call.result {
                    Some(Ok(_)) => self.style.green("(completed)"),
                    Some(Err(message)) => self.style.red(&format!("(failed: {})", clean(message))),
                    None => self.style.red("(failed)"),
                };
                let line = format!(
                    "{} {}/{} {status}",
                    self.style.magenta("mcp:"),
                    clean(&call.invocation.server),
                    clean(&call.invocation.tool)
                );
                self.line(&line);
            }
            TurnItem::EnteredReview { review, .. } => {
                let line = format!("{} {}", self.style.magenta("review"), clean(review));
                self.line(&line);
            }
            // Outside the interactive mode the review is the final message, on stdout.
            TurnItem::ExitedReview { review, .. } if self.interactive => {
                let label = self.style.magenta("review");
                self.line(&label);
                self.line(&clean(review));
            }
            TurnItem::Compaction {
                items_before,
                items_after,
                ..
            } => self.warning(&format!(
                "context compacted: {items_before} history items summarised into {items_after}"
            )),
            // An empty reasoning says nothing; exec never runs a turn in Plan mode.
            TurnItem::Reasoning { .. }
            | TurnItem::ExitedReview { .. }
            | TurnItem::Plan { .. }
            | TurnItem::UserMessage { .. }
            | TurnItem::AgentMessage { .. } => {}
        }
    }

    /// What an event says of the turn, the thread or the user (its items are shown
    /// above).
    fn turn_event(&mut self, msg: &EventMsg) {
        match msg {
            EventMsg::TokenCount(count) => {
                if let Some(info) = &count.info {
                    self.last_total_usage = Some(info.total_token_usage);
                }
            }
            EventMsg::TaskComplete(done) => {
                self.turn_running = false;
                if done.error.is_some() {
                    self.flush_pending_agent_message();
                }
                if self.interactive {
                    // The conversation goes on; the total is in `/status`.
                    self.clear_line();
                } else {
                    self.token_total();
                }
            }
            EventMsg::TaskStarted(_) => {
                self.flush_pending_agent_message();
                self.turn_running = true;
            }
            EventMsg::McpStartupUpdate(update) => {
                self.flush_pending_agent_message();
                let status = match &update.status {
                    McpStartupStatus::Starting => "starting".to_string(),
                    McpStartupStatus::Ready { tools } => {
                        self.style.green(&format!("ready ({tools} tools)"))
                    }
                    McpStartupStatus::Failed { error } => {
                        self.style.red(&format!("failed: {}", clean(error)))
                    }
                };
                let line = format!(
                    "{} server {} {status}",
                    self.style.magenta("mcp:"),
                    clean(&update.server)
                );
                self.line(&line);
            }
            EventMsg::PlanUpdate(plan) => {
                self.flush_pending_agent_message();
                let label = self.style.magenta("update plan");
                self.line(&label);
                if let Some(explanation) = &plan.explanation {
                    let text = self.style.dim(&clean(explanation));
                    self.line(&text);
                }
                for step in &plan.plan {
                    let line = match step.status {
                        StepStatus::Completed => {
                            format!("  {} {}", self.style.green("✓"), clean(&step.step))
                        }
                        StepStatus::InProgress => {
                            format!("  {} {}", self.style.yellow("→"), clean(&step.step))
                        }
                        StepStatus::Pending => format!("  • {}", clean(&step.step)),
                    };
                    self.line(&line);
                }
            }
            EventMsg::Warning(warning) => {
                self.flush_pending_agent_message();
                self.warning(&warning.message);
            }
            EventMsg::HookCompleted(done) => {
                if let Some(line) = interpreter_core::hooks::run_line(&done.run) {
                    self.flush_pending_agent_message();
                    self.warning(&line);
                }
            }
            EventMsg::HookStarted(_) => {}
            EventMsg::Error(error) => {
                self.flush_pending_agent_message();
                let line = self.style.red(&format!("ERROR: {}", clean(&error.message)));
                self.line(&line);
            }
            EventMsg::StreamError(error) => {
                self.flush_pending_agent_message();
                let line = self.style.yellow(&format!(
                    "retry {}/{}: {}",
                    error.attempt,
                    error.max_attempts,
                    clean(&error.message)
                ));
                self.line(&line);
            }
            EventMsg::TurnAborted(_) => {
                self.flush_pending_agent_message();
                self.turn_running = false;
                let line = self.style.red("turn interrupted");
                self.line(&line);
            }
            // Asked (and answered) by the caller, after what the model said before it.
            EventMsg::ExecApprovalRequest(_)
            | EventMsg::ApplyPatchApprovalRequest(_)
            | EventMsg::ElicitationRequest(_)
            | EventMsg::UserInputRequest(_)
            | EventMsg::PermissionsRequest(_) => self.flush_pending_agent_message(),
            // Items (shown above), and what the human renderer has no place for: each
            // patch's own diff is shown as it is applied; goals are set through
            // app-server, which shows them.
            EventMsg::SessionConfigured(_)
            | EventMsg::UserMessage(_)
            | EventMsg::AgentMessageDelta(_)
            | EventMsg::AgentMessage(_)
            | EventMsg::AgentReasoningDelta(_)
            | EventMsg::AgentReasoningSummaryPartAdded(_)
            | EventMsg::AgentReasoningSummaryDelta(_)
            | EventMsg::AgentReasoning(_)
            | EventMsg::ExecCommandBegin(_)
            | EventMsg::ExecCommandOutputDelta(_)
            | EventMsg::ExecCommandEnd(_)
            | EventMsg::PatchApplyBegin(_)
            | EventMsg::PatchApplyEnd(_)
            | EventMsg::TurnDiff(_)
            | EventMsg::GoalUpdated(_)
            | EventMsg::GoalCleared(_)
            | EventMsg::ProposedPlanDelta(_)
            | EventMsg::ProposedPlan(_)
            | EventMsg::EnteredReviewMode(_)
            | EventMsg::ExitedReviewMode(_)
            | EventMsg::McpToolCallBegin(_)
            | EventMsg::McpToolCallProgress(_)
            | EventMsg::McpToolCallEnd(_)
            | EventMsg::RequestExpired(_)
            | EventMsg::ContextCompacted(_)
            | EventMsg::ShutdownComplete => {}
        }
    }

    pub(crate) fn warning(&mut self, message: &str) {
        let line = self.style.yellow(&format!("warning: {}", clean(message)));
        self.line(&line);
    }

    fn token_total(&mut self) {
        if let Some(total) = &self.last_total_usage {
            let blended = total
                .input_tokens
                .saturating_sub(total.cached_input_tokens)
                .saturating_add(total.output_tokens);
            let label = self.style.dim("tokens used");
            self.line(&label);
            self.line(&blended.to_string());
        }
    }

    /// The answer: on stdout, alone, so it can be piped or redirected.
    pub(crate) fn final_message(&mut self, message: Option<&str>) {
        self.pending_agent_message = None;
        if let Some(message) = message {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", clean(message));
            let _ = stdout.flush();
        }
    }
}

/// A patch as the user reviews it before approving: each file (relative to `cwd` when
/// inside it) with its diff (added and deleted files in full), `+`/`-` lines colored.
pub(crate) fn patch_preview(style: &Style, changes: &FileChanges, cwd: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, change) in changes {
        let path = path.strip_prefix(cwd).unwrap_or(path);
        let path = clean(&path.display().to_string()).into_owned();
        match change {
            FileChange::Add { content } => {
                lines.push(style.bold(&format!("A {path}")));
                lines.extend(
                    content
                        .lines()
                        .map(|line| style.green(&format!("+{}", clean(line)))),
                );
            }
            FileChange::Delete { content } => {
                lines.push(style.bold(&format!("D {path}")));
                lines.extend(
                    content
                        .lines()
                        .map(|line| style.red(&format!("-{}", clean(line)))),
                );
            }
            FileChange::Update {
                unified_diff,
                move_path,
            } => {
                let header = match move_path {
                    Some(to) => format!("M {path} → {}", clean(&to.display().to_string())),
                    None => format!("M {path}"),
                };
                lines.push(style.bold(&header));
                for line in unified_diff.lines() {
                    let line = &*clean(line);
                    let painted = if line.starts_with("+++") || line.starts_with("---") {
                        style.dim(line)
                    } else if line.starts_with('+') {
                        style.green(line)
                    } else if line.starts_with('-') {
                        style.red(line)
                    } else {
                        line.to_string()
                    };
                    lines.push(painted);
                }
            }
        }
    }
    lines
}

/// The first `max` lines, plus a note of how many were left out.
pub(crate) fn truncate_lines(text: &str, max: usize) -> String {
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
