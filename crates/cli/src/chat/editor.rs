//! The line editor, on a thread of its own.
//!
//! rustyline reads the terminal with blocking calls, so it runs on a dedicated thread and
//! the async side asks it for one line at a time. Between two requests the terminal is in
//! its normal mode: Ctrl-C typed during a turn reaches the process as SIGINT, which the
//! turn loop turns into an interrupt.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use rustyline::completion::Completer;
use rustyline::error::{ReadlineError, Signal};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::Validator;
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Editor, Event, EventContext, EventHandler, Helper,
    KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};
use tokio::sync::oneshot;

/// Entries kept in the history file.
const HISTORY_SIZE: usize = 2000;

/// What one read produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Input {
    Line(String),
    /// Ctrl-C at an empty prompt, or anywhere at an approval question.
    Interrupted,
    /// Ctrl-D at an empty prompt, or the terminal went away.
    Eof,
}

/// What a read is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A message or slash command: kept in the history.
    Message,
    /// An answer to an approval question: not kept, and Ctrl-C always interrupts (so it
    /// denies) whatever was typed.
    Answer,
}

struct Request {
    prompt: String,
    purpose: Purpose,
    reply: oneshot::Sender<anyhow::Result<Input>>,
}

/// Handle on the editor thread.
pub(super) struct LineEditor {
    requests: std::sync::mpsc::Sender<Request>,
}

impl LineEditor {
    /// Start the editor thread, with its history in `history` when given (created with
    /// mode 0600 on first write).
    pub(super) fn start(history: Option<PathBuf>) -> anyhow::Result<Self> {
        let (requests, incoming) = std::sync::mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
        std::thread::Builder::new()
            .name("line-editor".to_string())
            .spawn(move || {
                let strict = Arc::new(AtomicBool::new(false));
                let mut editor = match new_editor(strict.clone(), history.as_ref()) {
                    Ok(editor) => {
                        let _ = ready_tx.send(Ok(()));
                        editor
                    }
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                for request in incoming {
                    strict.store(request.purpose == Purpose::Answer, Ordering::SeqCst);
                    let result = read_one(&mut editor, &request, history.as_ref());
                    let _ = request.reply.send(result);
                }
            })
            .context("cannot start the line editor thread")?;
        ready_rx
            .recv()
            .context("the line editor thread stopped while starting")??;
        Ok(Self { requests })
    }

    /// Show `prompt` and read one line.
    pub(super) async fn read(&self, prompt: &str, purpose: Purpose) -> anyhow::Result<Input> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request {
                prompt: prompt.to_string(),
                purpose,
                reply,
            })
            .map_err(|_| anyhow::anyhow!("the line editor has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the line editor has stopped"))?
    }
}

fn new_editor(
    strict: Arc<AtomicBool>,
    history: Option<&PathBuf>,
) -> anyhow::Result<Editor<SlashCompleter, FileHistory>> {
    let config = Config::builder()
        .max_history_size(HISTORY_SIZE)
        .context("invalid history size")?
        .history_ignore_dups(true)
        .context("invalid history setting")?
        .history_ignore_space(true)
        .auto_add_history(false)
        .build();
    let mut editor: Editor<SlashCompleter, FileHistory> =
        Editor::with_config(config).context("cannot open the terminal for line editing")?;
    editor.set_helper(Some(SlashCompleter));
    // Enter sends; Alt-Enter starts a new line of the same message.
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    editor.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(CtrlC { strict })),
    );
    if let Some(path) = history {
        // The agent home may not exist yet on a first run. The history is private from
        // its creation: it holds every message typed.
        if let Some(dir) = path.parent()
            && let Err(err) = interpreter_private_fs::create_dir_all(dir)
        {
            tracing::warn!("cannot create {}: {err}", dir.display());
        }
        if let Err(err) = interpreter_private_fs::ensure_file(path) {
            tracing::warn!("cannot create history {}: {err}", path.display());
        }
        match editor.load_history(path) {
            Ok(()) => {}
            Err(ReadlineError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => tracing::warn!("cannot read history {}: {err}", path.display()),
        }
    }
    Ok(editor)
}

fn read_one(
    editor: &mut Editor<SlashCompleter, FileHistory>,
    request: &Request,
    history: Option<&PathBuf>,
) -> anyhow::Result<Input> {
    loop {
        match editor.readline(&request.prompt) {
            Ok(line) => {
                if request.purpose == Purpose::Message && !line.trim().is_empty() {
                    remember(editor, &line, history);
                }
                return Ok(Input::Line(line));
            }
            Err(ReadlineError::Interrupted) => return Ok(Input::Interrupted),
            // While it reads, the editor holds SIGINT itself: a Ctrl-C pressed just as the
            // prompt came back (the terminal not yet raw) arrives as this, not as a key,
            // and is the Ctrl-C it was. Taken for a resize it was lost, and the second
            // Ctrl-C after an interrupt did not leave (found by chat_pty's
            // `a_second_ctrl_c_leaves` under load).
            Err(ReadlineError::Signal(Signal::Interrupt)) => return Ok(Input::Interrupted),
            Err(ReadlineError::Eof) => return Ok(Input::Eof),
            // A window resize while reading: read again.
            Err(ReadlineError::Signal(Signal::Resize)) => {}
            Err(err) => return Err(anyhow::anyhow!("cannot read from the terminal: {err}")),
        }
    }
}

/// Add a line to the history, and to the file at once so that a crash loses nothing.
fn remember(
    editor: &mut Editor<SlashCompleter, FileHistory>,
    line: &str,
    history: Option<&PathBuf>,
) {
    match editor.add_history_entry(line) {
        Ok(true) => {}
        // A duplicate or space-prefixed line: not kept.
        Ok(false) => return,
        Err(err) => {
            tracing::warn!("cannot add to history: {err}");
            return;
        }
    }
    if let Some(path) = history
        && let Err(err) = editor.append_history(path)
    {
        tracing::warn!("cannot write history {}: {err}", path.display());
    }
}

/// Tab completes a slash command's name at the start of the line.
pub(super) struct SlashCompleter;

impl Completer for SlashCompleter {
    type Candidate = &'static str;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<&'static str>)> {
        let typed = line.get(..pos).unwrap_or(line);
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Ok((0, Vec::new()));
        }
        let matches = super::slash::NAMES
            .iter()
            .copied()
            .filter(|name| name.starts_with(typed))
            .collect();
        Ok((0, matches))
    }
}

impl Hinter for SlashCompleter {
    type Hint = String;
}
impl Highlighter for SlashCompleter {}
impl Validator for SlashCompleter {}
impl Helper for SlashCompleter {}

/// Ctrl-C at the prompt: clears a line being typed (as shells do), and interrupts, which
/// exits, only at an empty line. At an approval question it always interrupts, so that
/// the request is denied.
struct CtrlC {
    strict: Arc<AtomicBool>,
}

impl ConditionalEventHandler for CtrlC {
    fn handle(
        &self,
        _event: &Event,
        _count: RepeatCount,
        _positive: bool,
        ctx: &EventContext<'_>,
    ) -> Option<Cmd> {
        if self.strict.load(Ordering::SeqCst) || ctx.line().is_empty() {
            Some(Cmd::Interrupt)
        } else {
            Some(Cmd::Kill(Movement::WholeLine))
        }
    }
}
