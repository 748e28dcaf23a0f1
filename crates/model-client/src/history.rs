//! The wire-independent rules that make a model-visible history acceptable to a server.
//! Both request builders send what [`well_formed`] returns and only spell it in their own
//! wire format.
//!
//! The rules, and why (servers reject histories that break them):
//! * Every function call is answered exactly once. A call still unanswered when the next
//!   model turn starts, or when the history ends (interrupted turn, crash), gets the
//!   synthetic [`ABORTED_TOOL_OUTPUT`] output.
//! * An output that matches no open call (a duplicate, an orphan, or one that arrives
//!   after its call was already aborted) is dropped with a warning.
//! * A user, developer or system message that arrives while calls are open is held back
//!   until they are all answered, so nothing comes between a call and its outputs.
//! * A run of consecutive model items (reasoning, assistant text, calls) is one model
//!   turn, whose calls may all be answered after the run. Any output or message ends the
//!   run, even one that is then dropped or held back.

use std::collections::HashSet;

use interpreter_protocol::{ResponseItem, Role};

/// Content of a tool call that never got an output (interrupted turn, crash).
pub const ABORTED_TOOL_OUTPUT: &str = "aborted";

/// One step of a well-formed history, in the order it goes on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// One model turn: consecutive reasoning, assistant message and function call items,
    /// never empty and never anything else.
    ModelTurn(Vec<ResponseItem>),
    /// A function call output (real or [`ABORTED_TOOL_OUTPUT`]) or a user, developer or
    /// system message.
    Item(ResponseItem),
}

/// Applies the rules in the module doc. Callers leave out beforehand the items their wire
/// has nothing to send for, because a dropped item must neither start nor end a turn.
pub(crate) fn well_formed<'a>(history: impl IntoIterator<Item = &'a ResponseItem>) -> Vec<Step> {
    let mut pairing = Pairing::default();
    for item in history {
        pairing.item(item);
    }
    pairing.finish()
}

/// The call/output bookkeeping of one walk over the history.
#[derive(Default)]
struct Pairing {
    steps: Vec<Step>,
    /// The model turn being collected; non-empty exactly while inside a turn.
    turn: Vec<ResponseItem>,
    /// Calls emitted so far that still await their output, oldest first.
    open_calls: Vec<String>,
    /// Every call id ever emitted, to tell a duplicate output from an orphan in the log.
    emitted_calls: HashSet<String>,
    /// Messages held back until the open calls are answered.
    deferred: Vec<ResponseItem>,
}

impl Pairing {
    fn item(&mut self, item: &ResponseItem) {
        match item {
            ResponseItem::Reasoning { .. }
            | ResponseItem::Message {
                role: Role::Assistant,
                ..
            }
            | ResponseItem::FunctionCall { .. } => self.model_item(item),
            ResponseItem::FunctionCallOutput { call_id, .. } => {
                self.end_turn();
                let Some(position) = self.open_calls.iter().position(|id| id == call_id) else {
                    tracing::warn!(
                        call_id,
                        already_answered = self.emitted_calls.contains(call_id),
                        "dropping a tool output that matches no open tool call"
                    );
                    return;
                };
                self.open_calls.remove(position);
                self.steps.push(Step::Item(item.clone()));
                if self.open_calls.is_empty() {
                    self.release_deferred();
                }
            }
            ResponseItem::Message { .. } => {
                self.end_turn();
                if self.open_calls.is_empty() {
                    self.steps.push(Step::Item(item.clone()));
                } else {
                    self.deferred.push(item.clone());
                }
            }
        }
    }

    fn model_item(&mut self, item: &ResponseItem) {
        // A new turn starts only once the previous one is fully answered.
        let starts_turn = self.turn.is_empty();
        if starts_turn && (!self.open_calls.is_empty() || !self.deferred.is_empty()) {
            self.close_open_calls();
        }
        if let ResponseItem::FunctionCall { call_id, .. } = item {
            self.open_calls.push(call_id.clone());
            self.emitted_calls.insert(call_id.clone());
        }
        self.turn.push(item.clone());
    }

    fn end_turn(&mut self) {
        if !self.turn.is_empty() {
            self.steps
                .push(Step::ModelTurn(std::mem::take(&mut self.turn)));
        }
    }

    /// Answers every still-open call with the synthetic output and releases the held-back
    /// messages.
    fn close_open_calls(&mut self) {
        for call_id in std::mem::take(&mut self.open_calls) {
            self.steps
                .push(Step::Item(ResponseItem::FunctionCallOutput {
                    call_id,
                    output: ABORTED_TOOL_OUTPUT.to_string(),
                }));
        }
        self.release_deferred();
    }

    fn release_deferred(&mut self) {
        self.steps.extend(
            std::mem::take(&mut self.deferred)
                .into_iter()
                .map(Step::Item),
        );
    }

    fn finish(mut self) -> Vec<Step> {
        self.end_turn();
        self.close_open_calls();
        self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn call(id: &str) -> ResponseItem {
        ResponseItem::FunctionCall {
            name: "shell".into(),
            arguments: "{}".into(),
            call_id: id.into(),
        }
    }

    fn output(id: &str, text: &str) -> ResponseItem {
        ResponseItem::FunctionCallOutput {
            call_id: id.into(),
            output: text.into(),
        }
    }

    fn aborted(id: &str) -> Step {
        Step::Item(output(id, ABORTED_TOOL_OUTPUT))
    }

    #[test]
    fn answered_history_passes_through_with_model_items_grouped_into_turns() {
        let history = vec![
            ResponseItem::developer_text("be brief"),
            ResponseItem::user_text("hi"),
            ResponseItem::reasoning_text("think", None),
            ResponseItem::assistant_text("running"),
            call("a"),
            call("b"),
            output("b", "2"),
            output("a", "1"),
            ResponseItem::assistant_text("done"),
        ];
        assert_eq!(
            well_formed(&history),
            vec![
                Step::Item(ResponseItem::developer_text("be brief")),
                Step::Item(ResponseItem::user_text("hi")),
                Step::ModelTurn(vec![
                    ResponseItem::reasoning_text("think", None),
                    ResponseItem::assistant_text("running"),
                    call("a"),
                    call("b"),
                ]),
                Step::Item(output("b", "2")),
                Step::Item(output("a", "1")),
                Step::ModelTurn(vec![ResponseItem::assistant_text("done")]),
            ]
        );
    }

    #[test]
    fn open_calls_are_aborted_when_the_next_turn_starts_and_at_the_end() {
        let history = vec![call("a"), call("b"), output("a", "1"), call("c")];
        assert_eq!(
            well_formed(&history),
            vec![
                Step::ModelTurn(vec![call("a"), call("b")]),
                Step::Item(output("a", "1")),
                aborted("b"),
                Step::ModelTurn(vec![call("c")]),
                aborted("c"),
            ]
        );
    }

    #[test]
    fn messages_arriving_while_calls_are_open_follow_the_outputs() {
        let history = vec![
            call("a"),
            call("b"),
            ResponseItem::user_text("also this"),
            output("a", "1"),
            ResponseItem::developer_text("note"),
            output("b", "2"),
            call("c"),
            ResponseItem::user_text("and this"),
        ];
        assert_eq!(
            well_formed(&history),
            vec![
                Step::ModelTurn(vec![call("a"), call("b")]),
                Step::Item(output("a", "1")),
                Step::Item(output("b", "2")),
                Step::Item(ResponseItem::user_text("also this")),
                Step::Item(ResponseItem::developer_text("note")),
                Step::ModelTurn(vec![call("c")]),
                aborted("c"),
                Step::Item(ResponseItem::user_text("and this")),
            ]
        );
    }

    #[test]
    fn duplicate_orphan_and_late_outputs_are_dropped() {
        let history = vec![
            call("a"),
            output("a", "first"),
            output("a", "second"),
            output("ghost", "orphan"),
            call("b"),
            ResponseItem::user_text("stop"),
            call("c"),
            output("b", "too late"),
        ];
        assert_eq!(
            well_formed(&history),
            vec![
                Step::ModelTurn(vec![call("a")]),
                Step::Item(output("a", "first")),
                Step::ModelTurn(vec![call("b")]),
                aborted("b"),
                Step::Item(ResponseItem::user_text("stop")),
                Step::ModelTurn(vec![call("c")]),
                aborted("c"),
            ]
        );
    }

    #[test]
    fn a_dropped_output_still_ends_the_model_turn() {
        let history = vec![
            ResponseItem::assistant_text("one"),
            output("ghost", "orphan"),
            ResponseItem::assistant_text("two"),
        ];
        assert_eq!(
            well_formed(&history),
            vec![
                Step::ModelTurn(vec![ResponseItem::assistant_text("one")]),
                Step::ModelTurn(vec![ResponseItem::assistant_text("two")]),
            ]
        );
    }
}
