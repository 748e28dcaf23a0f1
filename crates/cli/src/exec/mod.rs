//! `interpreter exec`: one non-interactive turn on a new or resumed thread.
//!
//! This module owns the exec front end's flow: checks that run before any model call
//! (working directory, Git repository, prompt, output schema), building the config with
//! exec's forced settings (approval policy `never`), starting or resuming the thread,
//! pumping its events into the JSONL or human renderer, Ctrl-C, and the exit code.

pub(crate) mod jsonl;
mod prompt;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use interpreter_core::config::{Config, ConfigOverrides, load_config};
use interpreter_core::{NewThread, Thread, ThreadManager};
use interpreter_protocol::{
    AskForApproval, ElicitationResponse, EventMsg, Op, PermissionsDecision, ReviewDecision,
    ReviewTarget, SandboxMode, SessionSource, ThreadId, UserInput, UserInputResponse,
};

use crate::cli::{ConfigArgs, ExecArgs, ExecCommand, ReviewArgs};
use crate::config_inputs;
use crate::render::HumanOutput;
use jsonl::{JsonlTranslator, ThreadEvent};

const NOT_IN_GIT_REPO: &str =
    "Not inside a trusted directory and --skip-git-repo-check was not specified.";

/// How long the thread may take to flush its rollout after the turn.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
const SPINNER_INTERVAL: Duration = Duration::from_millis(120);

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TurnOutcome {
    Completed {
        last_agent_message: Option<String>,
    },
    Failed {
        message: String,
    },
    Interrupted,
    /// The thread's task ended without finishing the turn.
    EngineStopped,
}

/// Which thread the run continues, if any.
enum ResumeTarget {
    Id(String),
    Last { all_directories: bool },
}

pub(crate) async fn run_exec(
    args: ExecArgs,
    config_args: ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let cwd = resolve_cwd(args.cwd.as_deref())?;
    let yolo = args.dangerously_bypass_approvals_and_sandbox;
    if !args.skip_git_repo_check && !yolo && !is_inside_git_repo(&cwd) {
        anyhow::bail!(NOT_IN_GIT_REPO);
    }

    let mut images = args.images.clone();
    let mut review = None;
    let (resume, positional, config_args) = match &args.command {
        None => (None, args.prompt.clone(), config_args),
        Some(ExecCommand::Review(review_args)) => {
            let (target, positional) = review_target(review_args);
            review = target;
            (None, positional, config_args.merged(&review_args.config))
        }
        Some(ExecCommand::Resume(resume)) => {
            images.extend(resume.images.iter().cloned());
            let (id, prompt) = resume.target_and_prompt();
            let target = match id {
                Some(id) => ResumeTarget::Id(id.to_string()),
                None if resume.last => ResumeTarget::Last {
                    all_directories: resume.all,
                },
                None => anyhow::bail!(
                    "`resume` needs a thread id or --last (see `interpreter exec resume --help`)"
                ),
            };
            (
                Some(target),
                prompt.map(str::to_string),
                config_args.merged(&resume.config),
            )
        }
    };

    let prompt = match (&review, positional) {
        // Reviews of a diff have no prompt of their own.
        (Some(_), _) => String::new(),
        (None, positional) => {
            tokio::task::spawn_blocking(move || prompt::resolve_prompt(positional.as_deref()))
                .await
                .context("stdin reader stopped")??
        }
    };
    let review = match review {
        Some(target) => Some(target),
        // `exec review PROMPT`: custom instructions (`-` read from stdin above).
        None if matches!(args.command, Some(ExecCommand::Review(_))) => {
            Some(ReviewTarget::Custom {
                instructions: prompt.clone(),
            })
        }
        None => None,
    };

    let output_schema = match &args.output_schema {
        Some(path) => Some(read_output_schema(path)?),
        None => None,
    };

    let (sandbox_mode, approval_policy) = if yolo {
        (Some(SandboxMode::DangerFullAccess), AskForApproval::Never)
    } else {
        // Nobody can answer an approval in exec, so requests are never made: what would
        // need one is refused and the model is told.
        let sandbox = if args.full_auto {
            Some(SandboxMode::WorkspaceWrite)
        } else {
            args.sandbox.map(|mode| mode.to_mode())
        };
        (sandbox, AskForApproval::Never)
    };

    let config_args = if args.oss {
        config_inputs::with_local_server(config_args, &env, &cwd, args.model.as_deref()).await?
    } else {
        config_args
    };
    let overrides = ConfigOverrides {
        model: args.model.clone(),
        cwd: Some(cwd.clone()),
        approval_policy: Some(approval_policy),
        sandbox_mode,
        add_dirs: args.add_dirs.clone(),
        output_schema,
        ephemeral: args.ephemeral,
        ..Default::default()
    };
    let inputs = config_inputs::build(&config_args, env, cwd.clone(), overrides)?;
    let mut config = load_config(inputs)?;
    apply_codex_api_key(&mut config);

    let mut output = if args.json {
        Output::Json(Box::new(JsonlTranslator::new()))
    } else {
        Output::Human(Box::new(HumanOutput::new(args.color)))
    };

    // Index repairs, skipped rollout lines and the like arrive as the thread's warning
    // events, rendered with the turn.
    let manager = ThreadManager::new();
    let new_thread = match resume {
        None => manager.start_thread(config, SessionSource::Exec).await?,
        Some(ResumeTarget::Id(raw)) => {
            let thread_id = raw.parse::<ThreadId>().map_err(|_| {
                anyhow::anyhow!(
                    "no thread with id `{raw}`: thread ids are UUIDs, as printed in `thread.started` or the `session id` header"
                )
            })?;
            manager.resume_thread(config, thread_id).await?
        }
        Some(ResumeTarget::Last { all_directories }) => {
            let filter = (!all_directories).then(|| cwd.clone());
            match manager.resume_latest(config, filter).await? {
                Some(thread) => thread,
                None if all_directories => anyhow::bail!("no earlier thread found"),
                None => anyhow::bail!(
                    "no earlier thread found for {} (use --all to look in every directory)",
                    cwd.display()
                ),
            }
        }
    };

    let op = match review {
        Some(target) => {
            // Before any model call: a directory outside git or a bad ref ends exec here.
            let request = match new_thread.thread.prepare_review(target).await {
                Ok(request) => request,
                Err(error) => {
                    shutdown(&new_thread.thread).await;
                    return Err(error.into());
                }
            };
            output.started(&new_thread, &format!("review: {}", request.description));
            Op::Review { request }
        }
        None => {
            output.started(&new_thread, &prompt);
            let mut items = vec![UserInput::Text { text: prompt }];
            items.extend(
                images
                    .into_iter()
                    .map(|path| UserInput::LocalImage { path }),
            );
            Op::UserInput { items }
        }
    };
    let NewThread { thread, .. } = new_thread;
    // A parent process hands its trace over in TRACEPARENT/TRACESTATE.
    let trace = interpreter_telemetry::W3cTraceContext::from_env(&thread.config().env);
    thread.submit_traced(op, trace).await?;

    let outcome = pump_events(&thread, &mut output).await;
    shutdown(&thread).await;
    // The pool would stop idle servers only after its idle timeout; exec is done now.
    manager.mcp_pool().shutdown().await;

    let code = match &outcome {
        TurnOutcome::Completed { last_agent_message } => {
            if let Some(path) = &args.output_last_message {
                write_last_message(path, last_agent_message.as_deref(), &mut output)?;
            }
            output.final_message(last_agent_message.as_deref());
            ExitCode::SUCCESS
        }
        TurnOutcome::Failed { .. } | TurnOutcome::Interrupted => ExitCode::from(1),
        TurnOutcome::EngineStopped => {
            output.notice("the engine stopped before the turn finished");
            ExitCode::from(1)
        }
    };
    Ok(code)
}

/// What `exec review` reviews, and its positional prompt: the custom instructions, read
/// like any exec prompt (`None` target: they are the target).
fn review_target(args: &ReviewArgs) -> (Option<ReviewTarget>, Option<String>) {
    if let Some(branch) = &args.base {
        return (
            Some(ReviewTarget::BaseBranch {
                branch: branch.clone(),
            }),
            None,
        );
    }
    if let Some(sha) = &args.commit {
        return (
            Some(ReviewTarget::Commit {
                sha: sha.clone(),
                title: args.title.clone(),
            }),
            None,
        );
    }
    match &args.prompt {
        Some(prompt) => (None, Some(prompt.clone())),
        None => (Some(ReviewTarget::UncommittedChanges), None),
    }
}

/// `--cd` made absolute and checked, or the process's current directory.
pub(crate) fn resolve_cwd(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let current = std::env::current_dir().context("cannot read the current directory")?;
    let Some(dir) = dir else {
        return Ok(current);
    };
    let joined = current.join(dir);
    std::fs::canonicalize(&joined)
        .with_context(|| format!("working directory {} does not exist", joined.display()))
}

/// Whether `dir` or one of its ancestors has a `.git` entry (a directory, or a file for
/// worktrees and submodules).
fn is_inside_git_repo(dir: &Path) -> bool {
    dir.ancestors()
        .any(|ancestor| ancestor.join(".git").exists())
}

fn read_output_schema(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read output schema {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("output schema {} is not valid JSON", path.display()))
}

/// The SDK passes its API key as `CODEX_API_KEY`. The provider's `env_key` is only known
/// once config is loaded, so the key is copied into the config's injected environment
/// under that name (the process environment is never touched).
fn apply_codex_api_key(config: &mut Config) {
    let Some(env_key) = config.model_provider.env_key.clone() else {
        return;
    };
    let provider_key_set = config
        .env
        .get(&env_key)
        .is_some_and(|value| !value.trim().is_empty());
    if provider_key_set {
        return;
    }
    if let Some(key) = config.env.get("CODEX_API_KEY").cloned() {
        config.env.insert(env_key, key);
    }
}

/// Read events until the turn ends, handling Ctrl-C and approval requests.
async fn pump_events(thread: &Arc<Thread>, output: &mut Output) -> TurnOutcome {
    // SIGINT, SIGTERM and SIGHUP all interrupt the turn (recorded), then exec exits.
    let mut stop_signals = match crate::signals::StopSignals::install() {
        Ok(signals) => Some(signals),
        Err(e) => {
            tracing::warn!("could not install signal handlers: {e}");
            None
        }
    };
    let mut interrupt_deadline: Option<tokio::time::Instant> = None;
    let mut spinner = tokio::time::interval(SPINNER_INTERVAL);
    spinner.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_agent_message: Option<String> = None;

    loop {
        let grace = async {
            match interrupt_deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            event = thread.next_event() => event,
            () = async {
                match stop_signals.as_mut() {
                    Some(signals) => signals.recv().await,
                    None => std::future::pending().await,
                }
            }, if interrupt_deadline.is_none() => {
                output.progress("interrupting the turn (stop signal)");
                interrupt_deadline = Some(tokio::time::Instant::now() + interpreter_core::Thread::INTERRUPT_CONFIRM_DEADLINE);
                if thread.submit(Op::Interrupt).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
                continue;
            }
            _ = grace => {
                // The engine never confirmed: end the output as if it had.
                output.event(&EventMsg::TurnAborted(interpreter_protocol::TurnAbortedEvent {
                    turn_id: String::new(),
                    reason: interpreter_protocol::TurnAbortReason::Interrupted,
                }));
                return TurnOutcome::Interrupted;
            }
            _ = spinner.tick(), if output.wants_spinner() => {
                output.spin();
                continue;
            }
        };
        let Ok(event) = event else {
            return TurnOutcome::EngineStopped;
        };
        output.event(&event.msg);
        match event.msg {
            EventMsg::AgentMessage(message) => last_agent_message = Some(message.message),
            EventMsg::ExitedReviewMode(exited) => last_agent_message = Some(exited.review),
            EventMsg::ExecApprovalRequest(request) => {
                output.notice(&format!(
                    "refused approval request for `{}`: exec cannot ask for approval",
                    interpreter_tools::display_command(&request.command)
                ));
                let answer = Op::ExecApproval {
                    id: request.call_id,
                    decision: ReviewDecision::Denied,
                };
                if thread.submit(answer).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
            }
            EventMsg::ApplyPatchApprovalRequest(request) => {
                output.notice("refused patch approval request: exec cannot ask for approval");
                let answer = Op::PatchApproval {
                    id: request.call_id,
                    decision: ReviewDecision::Denied,
                };
                if thread.submit(answer).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
            }
            EventMsg::ElicitationRequest(request) => {
                // The engine's message names the server (`MCP server `NAME` asks: …`).
                let question = request.request["message"].as_str().unwrap_or_default();
                output.notice(&format!(
                    "declined a question ({question}): exec cannot ask the user"
                ));
                let answer = Op::ResolveElicitation {
                    id: request.id,
                    response: ElicitationResponse::decline(),
                };
                if thread.submit(answer).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
            }
            // Not offered to the model here (nobody can answer); a request that comes
            // anyway gets no answer at once rather than at the deadline.
            EventMsg::UserInputRequest(request) => {
                output.notice("the model asked the user a question: exec has no user to ask");
                let answer = Op::ResolveUserInput {
                    id: request.call_id,
                    response: UserInputResponse::Declined,
                };
                if thread.submit(answer).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
            }
            EventMsg::PermissionsRequest(request) => {
                output.notice("refused a permission request: exec cannot ask the user");
                let answer = Op::ResolvePermissions {
                    id: request.call_id,
                    decision: PermissionsDecision::Denied,
                };
                if thread.submit(answer).await.is_err() {
                    return TurnOutcome::EngineStopped;
                }
            }
            EventMsg::TurnAborted(_) => return TurnOutcome::Interrupted,
            EventMsg::TaskComplete(done) => {
                if interrupt_deadline.is_some() {
                    return TurnOutcome::Interrupted;
                }
                return match done.error {
                    Some(message) => TurnOutcome::Failed { message },
                    None => TurnOutcome::Completed {
                        last_agent_message: done.last_agent_message.or(last_agent_message),
                    },
                };
            }
            _ => {}
        }
    }
}

/// Ask the thread to stop and wait (bounded) so its rollout is complete on disk.
pub(crate) async fn shutdown(thread: &Arc<Thread>) {
    if thread.submit(Op::Shutdown).await.is_err() {
        return;
    }
    let drain = async {
        loop {
            match thread.next_event().await {
                Ok(event) if matches!(event.msg, EventMsg::ShutdownComplete) => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!("thread did not confirm shutdown in time");
    }
}

fn write_last_message(
    path: &Path,
    message: Option<&str>,
    output: &mut Output,
) -> anyhow::Result<()> {
    if message.is_none() {
        output.notice(&format!(
            "no agent message to write; {} is left empty",
            path.display()
        ));
    }
    std::fs::write(path, message.unwrap_or_default())
        .with_context(|| format!("failed to write {}", path.display()))
}

/// The two renderers behind one interface.
enum Output {
    // Boxed: each holds the item projector, and the enum is kept small.
    Json(Box<JsonlTranslator>),
    Human(Box<HumanOutput>),
}

impl Output {
    fn started(&mut self, thread: &NewThread, prompt: &str) {
        match self {
            Self::Json(_) => write_jsonl(&[JsonlTranslator::thread_started(
                &thread.thread_id.to_string(),
            )]),
            Self::Human(human) => human.header(&thread.session_configured, prompt),
        }
    }

    fn event(&mut self, msg: &EventMsg) {
        match self {
            Self::Json(translator) => write_jsonl(&translator.translate(msg)),
            Self::Human(human) => human.event(msg),
        }
    }

    /// Something exec itself wants the user to know.
    fn notice(&mut self, message: &str) {
        match self {
            Self::Json(translator) => write_jsonl(&[translator.warning_item(message.to_string())]),
            Self::Human(human) => human.warning(message),
        }
    }

    /// Progress of exec itself that is not part of the turn: stderr in both modes, so the
    /// JSONL stream carries only the turn's events.
    fn progress(&mut self, message: &str) {
        match self {
            Self::Json(_) => eprintln!("{message}"),
            Self::Human(human) => human.warning(message),
        }
    }

    fn final_message(&mut self, message: Option<&str>) {
        if let Self::Human(human) = self {
            human.final_message(message);
        }
    }

    fn wants_spinner(&self) -> bool {
        matches!(self, Self::Human(human) if human.spinner_enabled())
    }

    fn spin(&mut self) {
        if let Self::Human(human) = self {
            human.spin();
        }
    }
}

fn write_jsonl(events: &[ThreadEvent]) {
    if events.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    for event in events {
        match serde_json::to_string(event) {
            Ok(line) => {
                // A vanished reader (closed pipe) is not worth failing the turn over.
                let _ = writeln!(stdout, "{line}");
            }
            Err(err) => tracing::error!("cannot serialize exec event: {err}"),
        }
    }
    let _ = stdout.flush();
}
