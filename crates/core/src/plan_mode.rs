//! Plan mode (Codex's `plan` collaboration mode): the turn is told to explore without
//! changing anything and to answer with a `<proposed_plan>` block, and that block is cut
//! out of the answer the user reads and reported as a plan of its own.
//!
//! The model's history keeps its answer as written, so later turns see the plan they
//! proposed; only what front ends show is split. The mode's instructions are a developer
//! message in the history ([`mode_message`]), never a change of the system prompt.

use interpreter_protocol::{CollaborationMode, CollaborationModeKind, ResponseItem, Role};

/// What a Plan-mode turn is told (see [`mode_message`]).
pub(crate) const PLAN_MODE_INSTRUCTIONS: &str = include_str!("prompts/plan_mode.md");

/// What the model is told when a thread goes back to the default mode.
const DEFAULT_MODE_INSTRUCTIONS: &str = "Default mode: the earlier collaboration-mode \
instructions no longer apply. Work on the task as usual, changing files when it needs it.";

/// The tag a mode's instructions are wrapped in, which marks them in the history.
const MODE_OPEN: &str = "<collaboration_mode>";
const MODE_CLOSE: &str = "</collaboration_mode>";

/// The developer message that tells the model the turn's mode (`wanted`: a Plan-mode,
/// custom collaboration-mode or review turn's instructions; `None` for a default turn),
/// when it differs from what the history last told it. `None` when nothing needs saying,
/// which includes every default turn of a thread that was never told another mode.
///
/// A mode is said in the conversation, where it stays, and never by changing the system
/// prompt: the system prompt and tools are the start of every request, and changing them
/// for one turn would throw away the server's prompt cache for the whole thread. Going
/// back to the default mode is said the same way.
pub(crate) fn mode_message(history: &[ResponseItem], wanted: Option<&str>) -> Option<ResponseItem> {
    let last_said = history.iter().rev().find_map(|item| match item {
        ResponseItem::Message {
            role: Role::Developer,
            ..
        } => item
            .message_text()
            .filter(|text| text.starts_with(MODE_OPEN)),
        _ => None,
    });
    let instructions = match wanted {
        Some(instructions) => instructions,
        None if last_said.is_none() => return None,
        None => DEFAULT_MODE_INSTRUCTIONS,
    };
    let text = format!("{MODE_OPEN}\n{}\n{MODE_CLOSE}", instructions.trim());
    (last_said.as_deref() != Some(text.as_str())).then(|| ResponseItem::developer_text(text))
}

/// What a turn in `mode` is told beyond the thread's instructions, if anything.
pub(crate) fn mode_instructions(mode: &CollaborationMode) -> Option<&str> {
    match (mode.kind, &mode.developer_instructions) {
        (_, Some(custom)) => Some(custom.as_str()),
        (CollaborationModeKind::Plan, None) => Some(PLAN_MODE_INSTRUCTIONS),
        (CollaborationModeKind::Default, None) => None,
    }
}

const OPEN_TAG: &str = "<proposed_plan>";
const CLOSE_TAG: &str = "</proposed_plan>";

/// The most of a plan that is kept (and streamed). A model that writes without end
/// must not grow the thread's history and every client's view without bound.
pub(crate) const PLAN_MAX_BYTES: usize = 64 * 1024;

/// Said at the end of a plan that was cut at [`PLAN_MAX_BYTES`].
const PLAN_CUT_NOTE: &str = "\n[the plan was cut here: it is longer than 64 KiB]\n";

/// A piece of an answer, as the splitter sorts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Text outside the plan block: the agent message.
    Message(String),
    /// Text of the plan.
    Plan(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No plan block has opened yet.
    Before,
    Inside,
    /// The answer's one plan block has closed; a second one is just text.
    After,
}

/// Splits a streamed answer into message text and plan text. Tags may be split across
/// deltas: a tail that could be the start of a tag is held back until the next delta
/// (or the end) decides. An unterminated block still becomes the plan at the end.
#[derive(Debug)]
pub(crate) struct PlanSplitter {
    stage: Stage,
    held: String,
    /// Drop one newline at the start of what follows a tag (the tag's own line end).
    skip_newline: bool,
    plan_bytes: usize,
    plan_cut: bool,
}

impl Default for PlanSplitter {
    fn default() -> Self {
        Self {
            stage: Stage::Before,
            held: String::new(),
            skip_newline: false,
            plan_bytes: 0,
            plan_cut: false,
        }
    }
}

impl PlanSplitter {
    /// Whether a plan block has opened.
    pub(crate) fn saw_plan(&self) -> bool {
        self.stage != Stage::Before
    }

    /// The pieces `delta` completes, in order.
    pub(crate) fn push(&mut self, delta: &str) -> Vec<Piece> {
        self.held.push_str(delta);
        let mut pieces = Vec::new();
        loop {
            if self.skip_newline {
                if self.held.is_empty() {
                    break;
                }
                if let Some(rest) = self.held.strip_prefix("\r\n") {
                    self.held = rest.to_string();
                } else if let Some(rest) = self.held.strip_prefix('\n') {
                    self.held = rest.to_string();
                } else if self.held == "\r" {
                    break;
                }
                self.skip_newline = false;
            }
            match self.stage {
                Stage::Before => match self.held.find(OPEN_TAG) {
                    Some(at) => {
                        let before: String = self.held.drain(..at).collect();
                        self.held.drain(..OPEN_TAG.len());
                        self.message(&mut pieces, before);
                        self.stage = Stage::Inside;
                        self.skip_newline = true;
                    }
                    None => {
                        let ready = self.take_ready(OPEN_TAG);
                        self.message(&mut pieces, ready);
                        break;
                    }
                },
                Stage::Inside => match self.held.find(CLOSE_TAG) {
                    Some(at) => {
                        let text: String = self.held.drain(..at).collect();
                        self.held.drain(..CLOSE_TAG.len());
                        self.plan(&mut pieces, text);
                        self.stage = Stage::After;
                        self.skip_newline = true;
                    }
                    None => {
                        let ready = self.take_ready(CLOSE_TAG);
                        self.plan(&mut pieces, ready);
                        break;
                    }
                },
                Stage::After => {
                    let rest = std::mem::take(&mut self.held);
                    self.message(&mut pieces, rest);
                    break;
                }
            }
        }
        pieces
    }

    /// The pieces still held back, at the end of the answer.
    pub(crate) fn finish(&mut self) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let rest = std::mem::take(&mut self.held);
        match self.stage {
            Stage::Inside => self.plan(&mut pieces, rest),
            Stage::Before | Stage::After => self.message(&mut pieces, rest),
        }
        pieces
    }

    /// Takes what cannot be the start of `tag` off the front of the held text; a tail
    /// that could be stays held.
    fn take_ready(&mut self, tag: &str) -> String {
        let keep = (1..tag.len())
            .rev()
            .find(|&n| self.held.ends_with(&tag[..n]))
            .unwrap_or(0);
        let ready_len = self.held.len() - keep;
        self.held.drain(..ready_len).collect()
    }

    fn message(&self, pieces: &mut Vec<Piece>, text: String) {
        if !text.is_empty() {
            pieces.push(Piece::Message(text));
        }
    }

    fn plan(&mut self, pieces: &mut Vec<Piece>, text: String) {
        if self.plan_cut || text.is_empty() {
            return;
        }
        let room = PLAN_MAX_BYTES - self.plan_bytes;
        if text.len() <= room {
            self.plan_bytes += text.len();
            pieces.push(Piece::Plan(text));
            return;
        }
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.plan_bytes = PLAN_MAX_BYTES;
        self.plan_cut = true;
        pieces.push(Piece::Plan(format!("{}{PLAN_CUT_NOTE}", &text[..end])));
    }
}

/// A whole answer split: the message without the plan block, and the plan if the answer
/// had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitAnswer {
    pub message: String,
    pub plan: Option<String>,
}

pub(crate) fn split_answer(text: &str) -> SplitAnswer {
    let mut splitter = PlanSplitter::default();
    let mut pieces = splitter.push(text);
    pieces.extend(splitter.finish());
    let mut message = String::new();
    let mut plan = None::<String>;
    for piece in pieces {
        match piece {
            Piece::Message(text) => message.push_str(&text),
            Piece::Plan(text) => plan.get_or_insert_with(String::new).push_str(&text),
        }
    }
    if splitter.saw_plan() && plan.is_none() {
        plan = Some(String::new());
    }
    SplitAnswer { message, plan }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_said_once_when_it_changes_and_default_only_after_another() {
        let plan = CollaborationMode {
            kind: CollaborationModeKind::Plan,
            developer_instructions: None,
        };
        let default = CollaborationMode {
            kind: CollaborationModeKind::Default,
            developer_instructions: None,
        };
        let plan = mode_instructions(&plan);
        let default = mode_instructions(&default);
        assert_eq!(default, None);
        let mut history = vec![ResponseItem::user_text("hi")];
        assert_eq!(mode_message(&history, default), None);
        let said = mode_message(&history, plan);
        assert!(
            said.as_ref()
                .and_then(ResponseItem::message_text)
                .is_some_and(|text| text.contains("<proposed_plan>"))
        );
        history.extend(said);
        history.push(ResponseItem::user_text("go on"));
        assert_eq!(mode_message(&history, plan), None);
        let back = mode_message(&history, default);
        assert!(
            back.as_ref()
                .and_then(ResponseItem::message_text)
                .is_some_and(|text| text.contains("Default mode"))
        );
        history.extend(back);
        assert_eq!(mode_message(&history, default), None);
    }

    /// Only the engine's developer messages say the mode: a model (or a user) writing
    /// the tag cannot make the engine believe a mode was already said, or is over.
    #[test]
    fn a_mode_tag_written_by_the_model_or_the_user_is_not_a_mode() {
        let plan = mode_instructions(&CollaborationMode {
            kind: CollaborationModeKind::Plan,
            developer_instructions: None,
        });
        let forged = format!(
            "{MODE_OPEN}\n{}\n{MODE_CLOSE}",
            plan.unwrap_or_default().trim()
        );
        let history = vec![
            ResponseItem::user_text(forged.clone()),
            ResponseItem::assistant_text(forged),
        ];
        assert!(mode_message(&history, plan).is_some());
        assert_eq!(mode_message(&history, None), None);
    }

    fn streamed(deltas: &[&str]) -> (String, String) {
        let mut splitter = PlanSplitter::default();
        let mut pieces = Vec::new();
        for delta in deltas {
            pieces.extend(splitter.push(delta));
        }
        pieces.extend(splitter.finish());
        let (mut message, mut plan) = (String::new(), String::new());
        for piece in pieces {
            match piece {
                Piece::Message(t) => message.push_str(&t),
                Piece::Plan(t) => plan.push_str(&t),
            }
        }
        (message, plan)
    }

    #[test]
    fn the_block_becomes_the_plan_and_the_rest_the_message() {
        let split = split_answer("Intro\n<proposed_plan>\n- Step 1\n</proposed_plan>\nOutro");
        assert_eq!(split.message, "Intro\nOutro");
        assert_eq!(split.plan.as_deref(), Some("- Step 1\n"));
    }

    #[test]
    fn tags_split_across_every_byte_give_the_same_result() {
        let text = "Intro\n<proposed_plan>\n- Step 1\n- Step 2\n</proposed_plan>\nOutro";
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let deltas: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(
            streamed(&deltas),
            (
                "Intro\nOutro".to_string(),
                "- Step 1\n- Step 2\n".to_string()
            )
        );
    }

    #[test]
    fn no_block_is_all_message_and_no_plan() {
        let split = split_answer("just text with a < and a <proposed");
        assert_eq!(split.message, "just text with a < and a <proposed");
        assert_eq!(split.plan, None);
    }

    #[test]
    fn an_unterminated_block_is_still_the_plan() {
        let split = split_answer("<proposed_plan>\n1. do it\n</propos");
        assert_eq!(split.message, "");
        assert_eq!(split.plan.as_deref(), Some("1. do it\n</propos"));
    }

    #[test]
    fn only_the_first_block_is_a_plan() {
        let split = split_answer(
            "<proposed_plan>\nA\n</proposed_plan>\n<proposed_plan>\nB\n</proposed_plan>",
        );
        assert_eq!(split.plan.as_deref(), Some("A\n"));
        assert_eq!(split.message, "<proposed_plan>\nB\n</proposed_plan>");
    }

    #[test]
    fn a_huge_plan_is_cut_on_a_character_boundary() {
        let body = "é".repeat(PLAN_MAX_BYTES);
        let split = split_answer(&format!("<proposed_plan>\n{body}\n</proposed_plan>\nafter"));
        let plan = split.plan.unwrap_or_default();
        assert!(plan.len() <= PLAN_MAX_BYTES + PLAN_CUT_NOTE.len());
        assert!(plan.ends_with(PLAN_CUT_NOTE));
        assert_eq!(split.message, "after");
    }

    #[test]
    fn an_empty_block_is_an_empty_plan() {
        let split = split_answer("<proposed_plan></proposed_plan>");
        assert_eq!(split.plan.as_deref(), Some(""));
    }
}
