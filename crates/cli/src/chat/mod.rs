//! The interactive mode: `interpreter` on a terminal, or `interpreter chat`.
//!
//! A line-editing prompt in front of one thread at a time. Each message is a turn whose
//! events are rendered as they arrive by the same renderer as `exec` (agent messages
//! streamed); approval requests are asked inline and answered with the user's decision;
//! Ctrl-C interrupts the running turn. Slash commands switch threads and change settings
//! between turns; the thread's lifecycle (start, resume, restart with new settings)
//! stays in core's `ThreadManager`.

mod editor;
mod slash;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::FutureExt;
use interpreter_core::config::{Config, ConfigOverrides, load_config};
use interpreter_core::items::TurnItem;
use interpreter_core::store::{
    self, ListDirection, ListQuery, ListSortKey, RolloutItem, ThreadRecord, TurnEntry,
};
use interpreter_core::{CoreError, NewThread, Thread, ThreadManager};
use interpreter_protocol::{
    AskForApproval, EventMsg, GrantScope, Op, PermissionsDecision, PermissionsRequestEvent,
    ReviewDecision, SandboxMode, SessionConfiguredEvent, SessionSource, ThreadId, TokenUsageInfo,
    UserInput, UserInputQuestion, UserInputResponse,
};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::Instant;

use crate::cli::{ChatOptions, ColorArg, ConfigArgs};
use crate::config_inputs;
use crate::render::{HumanOutput, patch_preview};
use crate::terminal::neutralize_controls as clean;
use editor::{Input, LineEditor, Purpose};
use slash::{ResumeWhich, Slash};

const PROMPT: &str = "› ";
const ANSWER_PROMPT: &str = "[y/n/a] › ";
const TEXT_ANSWER_PROMPT: &str = "answer › ";
/// How long a thread may take to flush its rollout when it is left or restarted.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
const SPINNER_INTERVAL: Duration = Duration::from_millis(120);
/// Messages of a resumed thread shown again, and lines shown of each.
const RECAP_MESSAGES: usize = 6;
const RECAP_LINES: usize = 12;
/// Threads listed by `/resume` without an argument.
const RESUME_LIST_LEN: usize = 10;
/// Index rows scanned for this directory's threads.
const RESUME_SCAN: usize = 500;

/// Whether stdin and stdout are both terminals: the interactive mode needs both.
pub(crate) fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Settings the user chose for this process: flags first, slash commands later. `None`
/// leaves the config file's value.
#[derive(Debug, Clone, Default)]
struct Settings {
    model: Option<String>,
    approval: Option<AskForApproval>,
    sandbox: Option<SandboxMode>,
}

/// How a turn ended, for the loop around it.
enum TurnEnd {
    /// The prompt comes back.
    Done,
    /// The user asked to leave (a second Ctrl-C, or SIGTERM/SIGHUP).
    Exit,
}

struct Chat {
    manager: ThreadManager,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
    cwd: PathBuf,
    add_dirs: Vec<PathBuf>,
    settings: Settings,
    config: Config,
    thread: Arc<Thread>,
    configured: SessionConfiguredEvent,
    output: HumanOutput,
    editor: LineEditor,
    usage: Option<TokenUsageInfo>,
    signals: ChatSignals,
    /// The last turn ended because Ctrl-C interrupted it, and nothing was typed since: a
    /// SIGINT now is the second Ctrl-C of a pair.
    ctrl_c_ended_turn: bool,
    /// A stop signal arrived while an approval question was up.
    leave_requested: bool,
    /// The engine's request the user is being asked now (its call id): the question is
    /// withdrawn when the engine's deadline for it passes (the engine's clock is the only
    /// one; it decides then, timed out).
    asking: Option<String>,
    /// The engine expired the request that was being asked: nothing is answered to it.
    asked_request_expired: bool,
    /// Events that arrived while a question was up, shown once it is answered.
    deferred: std::collections::VecDeque<interpreter_protocol::Event>,
}

pub(crate) async fn run_chat(
    options: ChatOptions,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    // The line editor restores the terminal when a read ends; leaving while a read is
    // still blocked (SIGTERM at the prompt, an error) would leave it in raw mode.
    let terminal = crate::terminal::TerminalGuard::save();
    // Boxed: the chat loop holds a whole `Config`, too large to keep on the stack.
    let result = Box::pin(chat(options, config_args, env)).await;
    drop(terminal);
    result
}

async fn chat(
    options: ChatOptions,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let cwd = crate::exec::resolve_cwd(options.cwd.as_deref())?;
    let config_args = if options.oss {
        config_inputs::with_local_server(config_args, &env, &cwd, options.model.as_deref()).await?
    } else {
        config_args
    };
    let settings = if options.full_auto {
        Settings {
            model: options.model.clone(),
            approval: Some(AskForApproval::OnRequest),
            sandbox: Some(SandboxMode::WorkspaceWrite),
        }
    } else {
        Settings {
            model: options.model.clone(),
            approval: options.approval.map(|arg| arg.to_policy()),
            sandbox: options.sandbox.map(|arg| arg.to_mode()),
        }
    };
    let config = build_config(&config_args, &env, &cwd, &options.add_dirs, &settings)?;
    let history = (!config.ephemeral).then(|| config.home.join("history.txt"));
    let signals = ChatSignals::install().context("cannot install the Ctrl-C handler")?;
    let editor = LineEditor::start(history)?;
    let mut output = HumanOutput::interactive(ColorArg::Auto);

    // Index repairs reach the user as the first thread's warning events.
    let manager = ThreadManager::new();
    let NewThread {
        thread,
        session_configured,
        ..
    } = manager
        .start_thread(config.clone(), SessionSource::Cli)
        .await?;
    output.session_header(&session_configured);
    output.line(
        &output
            .style()
            .dim("Type a message, /help for commands, Ctrl-D to leave."),
    );

    let mut chat = Chat {
        manager,
        config_args,
        env,
        cwd,
        add_dirs: options.add_dirs,
        settings,
        config,
        thread,
        configured: session_configured,
        output,
        editor,
        usage: None,
        signals,
        ctrl_c_ended_turn: false,
        leave_requested: false,
        asking: None,
        asked_request_expired: false,
        deferred: std::collections::VecDeque::new(),
    };

    let outcome = chat.converse(options.prompt).await;
    // Also after an error, so the rollout is complete on disk.
    chat.leave().await;
    outcome.map(|()| ExitCode::SUCCESS)
}

fn build_config(
    config_args: &ConfigArgs,
    env: &HashMap<String, String>,
    cwd: &Path,
    add_dirs: &[PathBuf],
    settings: &Settings,
) -> anyhow::Result<Config> {
    let overrides = ConfigOverrides {
        model: settings.model.clone(),
        cwd: Some(cwd.to_path_buf()),
        approval_policy: settings.approval,
        sandbox_mode: settings.sandbox,
        add_dirs: add_dirs.to_vec(),
        ..Default::default()
    };
    let inputs = config_inputs::build(config_args, env.clone(), cwd.to_path_buf(), overrides)?;
    let mut config = load_config(inputs)?;
    // The person at the terminal answers the model's questions and permission requests.
    config.can_ask_user = true;
    Ok(config)
}

impl Chat {
    /// The first message, if any, then the prompt until the user leaves.
    async fn converse(&mut self, first: Option<String>) -> anyhow::Result<()> {
        if let Some(prompt) = first.filter(|prompt| !prompt.trim().is_empty()) {
            let label = self.output.style().bold("user");
            self.say(&label);
            self.say(&prompt);
            if let TurnEnd::Exit = self.turn(prompt).await? {
                return Ok(());
            }
        }
        self.prompt_loop().await
    }

    async fn prompt_loop(&mut self) -> anyhow::Result<()> {
        loop {
            // The read is not dropped for a signal it outlives: a line typed meanwhile
            // would be lost with it.
            let input = {
                let read = self.editor.read(PROMPT, Purpose::Message);
                tokio::pin!(read);
                loop {
                    tokio::select! {
                        input = &mut read => break input?,
                        signal = self.signals.next() => match signal {
                            ChatSignal::Stop => return Ok(()),
                            // While the editor reads, Ctrl-C is a key, not a signal; a SIGINT
                            // here was pressed just as the turn ended, before the editor
                            // took the terminal. After a Ctrl-C interrupt it is the second
                            // Ctrl-C of a pair, which leaves.
                            ChatSignal::CtrlC if self.ctrl_c_ended_turn => return Ok(()),
                            ChatSignal::CtrlC => {}
                        },
                    }
                }
            };
            self.ctrl_c_ended_turn = false;
            let line = match input {
                // Ctrl-C reaches here only at an empty line (it clears a typed one).
                Input::Interrupted | Input::Eof => return Ok(()),
                Input::Line(line) => line,
            };
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            if text.starts_with('/') {
                match slash::parse(text) {
                    Ok(Slash::Exit) => return Ok(()),
                    Ok(command) => self.slash(command).await,
                    Err(message) => self.output.warning(&message),
                }
                continue;
            }
            if let TurnEnd::Exit = self.turn(line).await? {
                return Ok(());
            }
        }
    }

    /// Run one turn: submit the message and render events until the turn ends, asking
    /// approvals and handling Ctrl-C on the way.
    async fn turn(&mut self, text: String) -> anyhow::Result<TurnEnd> {
        // A Ctrl-C from before this turn (e.g. sent while the prompt was up) must not
        // interrupt it.
        self.signals.forget_pending();
        self.ctrl_c_ended_turn = false;
        self.thread
            .submit(Op::UserInput {
                items: vec![UserInput::Text { text }],
            })
            .await?;

        let thread = self.thread.clone();
        let mut interrupted_at: Option<Instant> = None;
        let mut exit_after_turn = false;
        let mut spinner = tokio::time::interval(SPINNER_INTERVAL);
        spinner.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let interrupted = interrupted_at;
            let grace = async move {
                match interrupted {
                    Some(at) => {
                        tokio::time::sleep_until(
                            at + interpreter_core::Thread::INTERRUPT_CONFIRM_DEADLINE,
                        )
                        .await
                    }
                    None => std::future::pending().await,
                }
            };
            // What arrived while a question was up comes first, in order.
            let deferred = self.deferred.pop_front();
            let event = match deferred {
                Some(event) => Ok(event),
                None => tokio::select! {
                event = thread.next_event() => event,
                signal = self.signals.next() => {
                    if signal == ChatSignal::Stop {
                        self.output.warning("interrupting the turn and leaving (stop signal)");
                        thread.submit(Op::Interrupt).await?;
                        interrupted_at.get_or_insert_with(Instant::now);
                        exit_after_turn = true;
                        continue;
                    }
                    // However long the interrupted turn takes to stop, a second Ctrl-C
                    // means leave now.
                    if interrupted_at.is_some() {
                        return Ok(TurnEnd::Exit);
                    }
                    self.output.warning("interrupting the turn (Ctrl-C again to leave)");
                    thread.submit(Op::Interrupt).await?;
                    interrupted_at = Some(Instant::now());
                    self.ctrl_c_ended_turn = true;
                    continue;
                }
                () = grace => {
                    self.output.warning("the turn did not confirm the interrupt in time");
                    return Ok(if exit_after_turn { TurnEnd::Exit } else { TurnEnd::Done });
                }
                _ = spinner.tick(), if self.output.spinner_enabled() => {
                    self.output.spin();
                    continue;
                }
                },
            };
            let event = match event {
                Ok(event) => event,
                Err(err) => anyhow::bail!("the thread stopped: {err}"),
            };
            self.output.event(&event.msg);
            match event.msg {
                EventMsg::TokenCount(count) => {
                    if let Some(info) = count.info {
                        self.usage = Some(info);
                    }
                }
                EventMsg::ExecApprovalRequest(request) => {
                    let command =
                        clean(&interpreter_tools::display_command(&request.command)).into_owned();
                    // The command and where it runs are on its card, shown just above.
                    let mut details = Vec::new();
                    if let Some(reason) = &request.reason {
                        details.push(format!("reason: {}", clean(reason)));
                    }
                    let question =
                        format!("Run `{command}`? [y]es / [n]o / [a]lways for this session");
                    self.asking = Some(request.call_id.clone());
                    let decision = self.ask(&details, &question).await?;
                    if self.engine_decided() {
                        continue;
                    }
                    thread
                        .submit(Op::ExecApproval {
                            id: request.call_id,
                            decision,
                        })
                        .await?;
                    if std::mem::take(&mut self.leave_requested) {
                        thread.submit(Op::Interrupt).await?;
                        interrupted_at.get_or_insert_with(Instant::now);
                        exit_after_turn = true;
                    }
                }
                EventMsg::ApplyPatchApprovalRequest(request) => {
                    let mut details =
                        patch_preview(self.output.style(), &request.changes, &self.configured.cwd);
                    if let Some(reason) = &request.reason {
                        details.push(format!("reason: {}", clean(reason)));
                    }
                    if let Some(root) = &request.grant_root {
                        details.push(format!(
                            "\"always\" also allows writing under {} for this session",
                            root.display()
                        ));
                    }
                    let question = "Apply these changes? [y]es / [n]o / [a]lways for this session";
                    self.asking = Some(request.call_id.clone());
                    let decision = self.ask(&details, question).await?;
                    if self.engine_decided() {
                        continue;
                    }
                    thread
                        .submit(Op::PatchApproval {
                            id: request.call_id,
                            decision,
                        })
                        .await?;
                    if std::mem::take(&mut self.leave_requested) {
                        thread.submit(Op::Interrupt).await?;
                        interrupted_at.get_or_insert_with(Instant::now);
                        exit_after_turn = true;
                    }
                }
                EventMsg::UserInputRequest(request) => {
                    self.asking = Some(request.call_id.clone());
                    let response = self.ask_questions(&request.questions).await;
                    if self.engine_decided() {
                        continue;
                    }
                    thread
                        .submit(Op::ResolveUserInput {
                            id: request.call_id,
                            response,
                        })
                        .await?;
                    if std::mem::take(&mut self.leave_requested) {
                        thread.submit(Op::Interrupt).await?;
                        interrupted_at.get_or_insert_with(Instant::now);
                        exit_after_turn = true;
                    }
                }
                EventMsg::PermissionsRequest(request) => {
                    let id = request.call_id.clone();
                    self.asking = Some(id.clone());
                    let decision = self.ask_permissions(request).await?;
                    if self.engine_decided() {
                        continue;
                    }
                    thread
                        .submit(Op::ResolvePermissions { id, decision })
                        .await?;
                    if std::mem::take(&mut self.leave_requested) {
                        thread.submit(Op::Interrupt).await?;
                        interrupted_at.get_or_insert_with(Instant::now);
                        exit_after_turn = true;
                    }
                }
                EventMsg::TaskComplete(_) | EventMsg::TurnAborted(_) => {
                    return Ok(if exit_after_turn {
                        TurnEnd::Exit
                    } else {
                        TurnEnd::Done
                    });
                }
                _ => {}
            }
        }
    }

    /// Ask an approval question until the answer is y, n or a. Ctrl-C, Ctrl-D, a
    /// terminal that went away or a stop signal deny: nothing runs without a yes.
    /// The question just asked is over; whether the engine decided it itself (its
    /// deadline passed), so nothing is to be answered.
    fn engine_decided(&mut self) -> bool {
        self.asking = None;
        std::mem::take(&mut self.asked_request_expired)
    }

    async fn ask(&mut self, details: &[String], question: &str) -> anyhow::Result<ReviewDecision> {
        for line in details {
            self.output.line(line);
        }
        let question = self.output.style().bold(question);
        self.output.line(&question);
        loop {
            let Some(answer) = self.read_answer(ANSWER_PROMPT).await else {
                if self.asked_request_expired {
                    return Ok(ReviewDecision::TimedOut);
                }
                self.output.warning("no answer: denied");
                return Ok(ReviewDecision::Denied);
            };
            match parse_answer(&answer) {
                Some(decision) => return Ok(decision),
                None => self
                    .output
                    .warning("please answer y (yes), n (no) or a (always for this session)"),
            }
        }
    }

    /// One line typed as an answer; `None` when none was: Ctrl-C, Ctrl-D, a terminal that
    /// went away, or a stop signal (which also asks to leave after the turn).
    ///
    /// While a request of the engine is asked (`asking`), its events are watched: when
    /// the engine's deadline for the request passes, the user is told the engine decided
    /// (timed out) and what is typed at the question is dropped; other events wait in
    /// `deferred` until then.
    async fn read_answer(&mut self, prompt: &str) -> Option<String> {
        let thread = self.thread.clone();
        let read = self.editor.read(prompt, Purpose::Answer);
        tokio::pin!(read);
        let answer = loop {
            tokio::select! {
                answer = &mut read => break answer,
                signal = self.signals.next() => {
                    if signal == ChatSignal::Stop {
                        self.leave_requested = true;
                    }
                    // The question's prompt line is still open.
                    self.output.line("");
                    return None;
                }
                event = thread.next_event(), if self.asking.is_some() => {
                    let Ok(event) = event else {
                        self.output.line("");
                        return None;
                    };
                    match &event.msg {
                        EventMsg::RequestExpired(expired)
                            if self.asking.as_deref() == Some(expired.id.as_str()) =>
                        {
                            // The line editor cannot take its prompt back: what is typed
                            // there now is read and dropped, and the turn's events wait.
                            self.output.line("");
                            self.output.warning(&format!(
                                "no answer within {}s (approval_timeout_sec): timed out, declined; press Enter to go on",
                                expired.timeout_sec
                            ));
                            self.asked_request_expired = true;
                            self.asking = None;
                            let _dropped = (&mut read).await;
                            return None;
                        }
                        _ => self.deferred.push_back(event),
                    }
                }
            }
        };
        match answer {
            Ok(Input::Line(line)) => Some(line),
            Ok(Input::Interrupted | Input::Eof) => None,
            Err(err) => {
                self.output.warning(&crate::one_line(&err));
                None
            }
        }
    }

    /// The model's questions, one by one. An option is picked by its number; anything
    /// else typed is the answer itself; an empty line leaves that question unanswered.
    /// Ctrl-C, Ctrl-D or leaving answers none of them.
    async fn ask_questions(&mut self, questions: &[UserInputQuestion]) -> UserInputResponse {
        let mut answers = std::collections::BTreeMap::new();
        for question in questions {
            let header = self.output.style().bold(&clean(&question.header));
            self.output.line(&header);
            self.output.line(&clean(&question.question));
            let options = question.options.as_deref().unwrap_or_default();
            for (n, option) in options.iter().enumerate() {
                self.output.line(&format!(
                    "  {}. {} — {}",
                    n + 1,
                    clean(&option.label),
                    clean(&option.description)
                ));
            }
            let Some(line) = self.read_answer(TEXT_ANSWER_PROMPT).await else {
                if !self.asked_request_expired {
                    self.output.warning("no answer given to the model");
                }
                return UserInputResponse::Declined;
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let picked = line
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|n| options.get(n))
                .map(|option| option.label.clone());
            answers.insert(
                question.id.clone(),
                vec![picked.unwrap_or_else(|| line.to_string())],
            );
        }
        UserInputResponse::Answered { answers }
    }

    /// A permission request: yes grants it for the rest of the turn, always for the
    /// session; anything else grants nothing.
    async fn ask_permissions(
        &mut self,
        request: PermissionsRequestEvent,
    ) -> anyhow::Result<PermissionsDecision> {
        let mut details: Vec<String> = request
            .permissions
            .writable_roots
            .iter()
            .map(|root| format!("write {}", clean(&root.display().to_string())))
            .collect();
        if request.permissions.network {
            details.push("use the network".to_string());
        }
        if let Some(reason) = &request.reason {
            details.push(format!("reason: {}", clean(reason)));
        }
        let question =
            "Let commands do this? [y]es for this turn / [n]o / [a]lways for this session";
        let scope = match self.ask(&details, question).await? {
            ReviewDecision::Approved => GrantScope::Turn,
            ReviewDecision::ApprovedForSession => GrantScope::Session,
            ReviewDecision::Denied | ReviewDecision::Abort | ReviewDecision::TimedOut => {
                return Ok(PermissionsDecision::Denied);
            }
        };
        Ok(PermissionsDecision::Granted {
            permissions: request.permissions,
            scope,
        })
    }

    async fn slash(&mut self, command: Slash) {
        let result = match command {
            Slash::New => self.new_thread().await,
            Slash::Resume(None) => self.list_threads().await,
            Slash::Resume(Some(which)) => self.resume(which).await,
            Slash::Model(None) => {
                self.say(&format!("model: {}", self.configured.model));
                Ok(())
            }
            Slash::Model(Some(model)) => {
                let mut settings = self.settings.clone();
                settings.model = Some(model);
                self.change_settings(settings).await
            }
            Slash::Approval(None) => {
                self.say(&format!(
                    "approval: {} (choices: untrusted, on-failure, on-request, never)",
                    self.configured.approval_policy.as_str()
                ));
                Ok(())
            }
            Slash::Approval(Some(policy)) => {
                let mut settings = self.settings.clone();
                settings.approval = Some(policy);
                self.change_settings(settings).await
            }
            Slash::Sandbox(None) => {
                self.say(&format!(
                    "sandbox: {} (choices: read-only, workspace-write, danger-full-access)",
                    self.configured.sandbox_policy.mode().as_str()
                ));
                Ok(())
            }
            Slash::Sandbox(Some(mode)) => {
                let mut settings = self.settings.clone();
                settings.sandbox = Some(mode);
                self.change_settings(settings).await
            }
            Slash::Status => {
                self.status();
                Ok(())
            }
            Slash::Help => {
                for (usage, what) in slash::HELP {
                    let usage = self.output.style().bold(usage);
                    self.say(&format!("{usage:<28} {what}"));
                }
                self.say(
                    "Ctrl-C interrupts a turn; a second Ctrl-C, or one at an empty prompt, leaves.",
                );
                Ok(())
            }
            // Handled by the prompt loop.
            Slash::Exit => Ok(()),
        };
        if let Err(err) = result {
            self.output.warning(&crate::one_line(&err));
        }
    }

    fn say(&mut self, text: &str) {
        self.output.line(text);
    }

    /// Apply new settings from the next turn on: rebuild the config and restart the
    /// thread with it (same id, same history).
    async fn change_settings(&mut self, settings: Settings) -> anyhow::Result<()> {
        let config = build_config(
            &self.config_args,
            &self.env,
            &self.cwd,
            &self.add_dirs,
            &settings,
        )?;
        match self
            .manager
            .reconfigure_thread(self.thread.id(), config.clone(), SHUTDOWN_GRACE)
            .await
        {
            Ok(restarted) => self.adopt(restarted),
            Err(CoreError::ThreadNotPersisted(_)) => {
                self.settings = settings;
                self.config = config;
                self.output.warning(
                    "this thread is ephemeral and keeps its settings; the new ones apply from /new on",
                );
                return Ok(());
            }
            Err(err) => return Err(err.into()),
        }
        self.settings = settings;
        self.config = config;
        self.say(&format!(
            "model: {}, approval: {}, sandbox: {} (from the next turn)",
            self.config.model,
            self.config.approval_policy.as_str(),
            self.config.sandbox_policy.mode().as_str()
        ));
        Ok(())
    }

    fn adopt(&mut self, new: NewThread) {
        self.thread = new.thread;
        self.configured = new.session_configured;
    }

    async fn new_thread(&mut self) -> anyhow::Result<()> {
        let new = self
            .manager
            .start_thread(self.config.clone(), SessionSource::Cli)
            .await?;
        self.switch_to(new).await;
        Ok(())
    }

    async fn resume(&mut self, which: ResumeWhich) -> anyhow::Result<()> {
        let id = match which {
            ResumeWhich::Id(raw) => raw.parse::<ThreadId>().map_err(|_| {
                anyhow::anyhow!("`{raw}` is not a thread id (a UUID, as /resume lists them)")
            })?,
            ResumeWhich::Last => {
                let (latest, notices) = self
                    .manager
                    .store(&self.config)
                    .await?
                    .latest(Some(self.cwd.clone()))
                    .await?;
                for notice in notices {
                    self.output.warning(&notice);
                }
                // The current thread is the newest one here as soon as it has a message.
                let latest = match latest {
                    Some(record) if record.id != self.thread.id() => Some(record.id),
                    _ => self
                        .recent_threads()
                        .await?
                        .into_iter()
                        .map(|record| record.id)
                        .find(|id| *id != self.thread.id()),
                };
                latest
                    .ok_or_else(|| anyhow::anyhow!("no earlier thread in {}", self.cwd.display()))?
            }
        };
        if id == self.thread.id() {
            self.say("already on that thread");
            return Ok(());
        }
        let resumed = self.manager.resume_thread(self.config.clone(), id).await?;
        self.usage = None;
        self.switch_to(resumed).await;
        self.recap().await;
        self.say(&format!(
            "resumed thread {id}; the model sees its earlier history"
        ));
        Ok(())
    }

    /// The end of the current thread's conversation, read back from its rollout, so the
    /// user sees where a resumed thread left off; also its token usage so far.
    async fn recap(&mut self) {
        let read = match self.manager.store(&self.config).await {
            Ok(store) => store
                .read(self.thread.id())
                .await
                .map_err(anyhow::Error::from),
            Err(err) => Err(err.into()),
        };
        let items = match read {
            Ok(read) => read.map(|read| read.items).unwrap_or_default(),
            Err(err) => {
                self.output
                    .warning(&format!("cannot show the earlier conversation: {err}"));
                return;
            }
        };
        // `/status` shows the thread's usage so far before its next turn.
        if let Some(info) = items.iter().rev().find_map(|item| match item {
            RolloutItem::EventMsg(EventMsg::TokenCount(count)) => count.info.clone(),
            _ => None,
        }) {
            self.usage = Some(info);
        }
        // The conversation as every front end reads a thread back: its items.
        let messages: Vec<(bool, String)> = store::turns_from_rollout(&items)
            .into_iter()
            .flat_map(|turn| turn.entries)
            .filter_map(|entry| match entry {
                TurnEntry::Item(TurnItem::UserMessage { text, .. }) => Some((true, text)),
                TurnEntry::Item(TurnItem::AgentMessage { text, .. }) => Some((false, text)),
                _ => None,
            })
            .collect();
        let skipped = messages.len().saturating_sub(RECAP_MESSAGES);
        if skipped > 0 {
            let note = self
                .output
                .style()
                .dim(&format!("… {skipped} earlier messages"));
            self.say(&note);
        }
        for (from_user, text) in messages.into_iter().skip(skipped) {
            let label = if from_user {
                self.output.style().bold("user")
            } else {
                self.output.style().magenta("interpreter")
            };
            self.say(&label);
            self.say(&crate::render::truncate_lines(&clean(&text), RECAP_LINES));
        }
    }

    /// Make `new` the current thread and let the old one go (its rollout stays).
    async fn switch_to(&mut self, new: NewThread) {
        let old = std::mem::replace(&mut self.thread, new.thread);
        self.configured = new.session_configured;
        self.usage = None;
        self.manager.remove_thread(old.id()).await;
        crate::exec::shutdown(&old).await;
        self.output.session_header(&self.configured);
    }

    /// This directory's threads, most recently updated first.
    async fn recent_threads(&self) -> anyhow::Result<Vec<ThreadRecord>> {
        let page = self
            .manager
            .store(&self.config)
            .await?
            .list(ListQuery {
                limit: RESUME_SCAN,
                sort_key: ListSortKey::UpdatedAt,
                direction: ListDirection::Desc,
                cwds: vec![self.cwd.clone()],
                ..ListQuery::default()
            })
            .await?;
        Ok(page.records)
    }

    async fn list_threads(&mut self) -> anyhow::Result<()> {
        let current = self.thread.id();
        let records: Vec<_> = self
            .recent_threads()
            .await?
            .into_iter()
            .filter(|record| record.id != current)
            .take(RESUME_LIST_LEN)
            .collect();
        if records.is_empty() {
            self.say(&format!("no earlier thread in {}", self.cwd.display()));
            return Ok(());
        }
        self.say(&format!("recent threads in {}:", self.cwd.display()));
        for record in records {
            let preview = record
                .preview
                .as_deref()
                .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            let preview: String = preview.chars().take(60).collect();
            let when = record.updated_at.format("%Y-%m-%d %H:%M");
            self.say(&format!("  {}  {when}  {}", record.id, clean(&preview)));
        }
        self.say("resume one with /resume ID, or the newest with /resume --last");
        Ok(())
    }

    fn status(&mut self) {
        let configured = self.configured.clone();
        let mut lines = vec![
            format!("model:        {}", configured.model),
            format!("provider:     {}", configured.model_provider_id),
            format!("thread:       {}", configured.thread_id),
            format!("workdir:      {}", configured.cwd.display()),
            format!("approval:     {}", configured.approval_policy.as_str()),
            format!(
                "sandbox:      {}",
                configured.sandbox_policy.mode().as_str()
            ),
        ];
        match &self.usage {
            Some(info) => {
                let total = info.total_token_usage;
                lines.push(format!(
                    "tokens used:  {} (input {}, output {})",
                    total.input_tokens.saturating_add(total.output_tokens),
                    total.input_tokens,
                    total.output_tokens
                ));
                let window = info
                    .model_context_window
                    .or(self.config.model_context_window);
                if let Some(window) = window.filter(|window| *window > 0) {
                    let last = info.last_token_usage;
                    let in_context = last.input_tokens.saturating_add(last.output_tokens);
                    let left = window.saturating_sub(in_context);
                    lines.push(format!(
                        "context left: {left} of {window} tokens ({}%)",
                        left.saturating_mul(100) / window
                    ));
                }
            }
            None => lines.push("tokens used:  none yet in this session".to_string()),
        }
        for line in lines {
            self.say(&line);
        }
    }

    /// Stop the thread (bounded) so its rollout is complete, and say how to come back.
    async fn leave(&mut self) {
        let id = self.thread.id();
        self.manager.remove_thread(id).await;
        crate::exec::shutdown(&self.thread).await;
        if !self.config.ephemeral {
            let hint = format!(
                "to continue this thread: /resume {id} (or `interpreter exec resume {id} PROMPT`)"
            );
            let hint = self.output.style().dim(&hint);
            self.say(&hint);
        }
    }
}

/// y / n / a, as words or letters, any case.
fn parse_answer(answer: &str) -> Option<ReviewDecision> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ReviewDecision::Approved),
        "n" | "no" => Some(ReviewDecision::Denied),
        "a" | "always" => Some(ReviewDecision::ApprovedForSession),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChatSignal {
    CtrlC,
    /// SIGTERM or SIGHUP.
    Stop,
}

/// The signals the interactive mode reacts to. While the line editor reads, the terminal
/// is in raw mode and Ctrl-C arrives as a key; during a turn it arrives as SIGINT.
struct ChatSignals {
    ctrl_c: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl ChatSignals {
    fn install() -> std::io::Result<Self> {
        Ok(Self {
            ctrl_c: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next Ctrl-C (SIGINT) or stop signal.
    async fn next(&mut self) -> ChatSignal {
        tokio::select! {
            _ = self.ctrl_c.recv() => ChatSignal::CtrlC,
            _ = self.terminate.recv() => ChatSignal::Stop,
            _ = self.hangup.recv() => ChatSignal::Stop,
        }
    }

    /// Drop a SIGINT delivered while nothing was listening.
    fn forget_pending(&mut self) {
        while let Some(Some(())) = self.ctrl_c.recv().now_or_never() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(parse_answer("y"), Some(ReviewDecision::Approved));
        assert_eq!(parse_answer(" Yes "), Some(ReviewDecision::Approved));
        assert_eq!(parse_answer("n"), Some(ReviewDecision::Denied));
        assert_eq!(parse_answer("A"), Some(ReviewDecision::ApprovedForSession));
        assert_eq!(parse_answer(""), None);
        assert_eq!(parse_answer("sure"), None);
    }
}
