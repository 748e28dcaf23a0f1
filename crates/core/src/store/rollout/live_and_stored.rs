//! The item model's promise, checked on the engine's own events: what a live front end
//! shows (the projector over every event) equals what a reader of the rollout gets (the
//! projector over the recorded events).

use std::path::PathBuf;

use interpreter_protocol::{
    AgentMessageEvent, AgentReasoningEvent, ApplyPatchApprovalRequestEvent, DeltaEvent, EventMsg,
    ExecApprovalRequestEvent, ExecCommandBeginEvent, ExecCommandEndEvent,
    ExecCommandOutputDeltaEvent, ExecCommandSource, ExecCommandStatus, ExecOutputStream,
    FileChange, FileChanges, McpInvocation, McpToolCallBeginEvent, ParsedCommand,
    PatchApplyBeginEvent, PatchApplyEndEvent, TaskCompleteEvent, TaskStartedEvent, TurnAbortReason,
    TurnAbortedEvent, UserMessageEvent,
};

use crate::items::{
    ENDED_WITH_THE_TURN, ItemEvent, ItemLedger, ItemProjector, ItemStatus, TurnItem,
};
use crate::store::{RolloutItem, TurnEntry, should_persist_event, turns_from_rollout};

/// The engine's side as `Session::emit` runs it: what goes live, and what is recorded.
#[derive(Default)]
struct Engine {
    ledger: ItemLedger,
    live: Vec<EventMsg>,
    stored: Vec<RolloutItem>,
}

impl Engine {
    fn emit(&mut self, sub_id: &str, msg: EventMsg) {
        for msg in self.ledger.prepare(sub_id, msg) {
            if should_persist_event(&msg) {
                self.stored.push(RolloutItem::EventMsg(msg.clone()));
            }
            self.live.push(msg);
        }
    }

    /// What a live front end shows: every item as it completed, in order.
    fn live_items(&self) -> Vec<TurnItem> {
        let mut projector = ItemProjector::new();
        let mut started = std::collections::HashSet::new();
        let mut completed = Vec::new();
        for msg in &self.live {
            for event in projector.push(msg) {
                match event {
                    ItemEvent::Started(item) => {
                        assert!(
                            started.insert(item.id().to_string()),
                            "{item:?} started twice"
                        );
                    }
                    ItemEvent::Delta(delta) => {
                        assert!(
                            started.contains(&delta.item_id),
                            "{delta:?} before its item"
                        );
                    }
                    // What app-server shows: an unfinished answer completes with what
                    // streamed.
                    ItemEvent::Completed(item) | ItemEvent::Unfinished(item) => {
                        assert!(started.contains(item.id()), "{item:?} completed unstarted");
                        completed.push(item);
                    }
                }
            }
        }
        completed
    }

    /// What a client reading the thread later sees.
    fn stored_items(&self) -> Vec<TurnItem> {
        turns_from_rollout(&self.stored)
            .into_iter()
            .flat_map(|turn| turn.entries)
            .filter_map(|entry| match entry {
                TurnEntry::Item(item) => Some(item),
                TurnEntry::Error { .. } => None,
            })
            .collect()
    }
}

fn started(turn: &str) -> EventMsg {
    EventMsg::TaskStarted(TaskStartedEvent {
        turn_id: turn.into(),
        model_context_window: None,
    })
}

fn complete(turn: &str) -> EventMsg {
    EventMsg::TaskComplete(TaskCompleteEvent {
        turn_id: turn.into(),
        last_agent_message: None,
        error: None,
        output_limit: false,
    })
}

fn delta(text: &str) -> DeltaEvent {
    DeltaEvent {
        item_id: String::new(),
        delta: text.into(),
    }
}

fn argv(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_string).collect()
}

fn parsed(text: &str) -> Vec<ParsedCommand> {
    vec![ParsedCommand::Unknown { cmd: text.into() }]
}

fn approval(turn: &str, call: &str, command: &str) -> EventMsg {
    EventMsg::ExecApprovalRequest(ExecApprovalRequestEvent {
        call_id: call.into(),
        turn_id: turn.into(),
        command: argv(command),
        cwd: PathBuf::from("/w"),
        reason: None,
        parsed_cmd: parsed(command),
    })
}

fn begin(turn: &str, call: &str, command: &str) -> EventMsg {
    EventMsg::ExecCommandBegin(ExecCommandBeginEvent {
        call_id: call.into(),
        turn_id: turn.into(),
        command: argv(command),
        cwd: PathBuf::from("/w"),
        parsed_cmd: parsed(command),
        source: ExecCommandSource::Agent,
    })
}

fn end(turn: &str, call: &str, command: &str, status: ExecCommandStatus) -> EventMsg {
    EventMsg::ExecCommandEnd(ExecCommandEndEvent {
        call_id: call.into(),
        turn_id: turn.into(),
        command: argv(command),
        cwd: PathBuf::from("/w"),
        exit_code: (status == ExecCommandStatus::Completed).then_some(0),
        aggregated_output: "out\n".into(),
        duration_ms: 3,
        status,
        source: ExecCommandSource::Agent,
        parsed_cmd: parsed(command),
    })
}

fn changes() -> FileChanges {
    let mut changes = FileChanges::new();
    changes.insert(
        PathBuf::from("/w/a.txt"),
        FileChange::Add {
            content: "a\n".into(),
        },
    );
    changes
}

/// A turn with reasoning, an approved command, a patch, a declined command, a command
/// whose approval the turn's end overtook, and a second turn with an interrupted command.
fn busy_thread() -> Engine {
    let mut engine = Engine::default();
    let e = &mut engine;
    e.emit("1", started("1"));
    e.emit(
        "1",
        EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: "go".into(),
        }),
    );
    e.emit("1", EventMsg::AgentReasoningDelta(delta("let me ")));
    e.emit("1", EventMsg::AgentReasoningDelta(delta("think")));
    e.emit(
        "1",
        EventMsg::AgentReasoning(AgentReasoningEvent {
            item_id: String::new(),
            text: "let me think".into(),
            summary: Vec::new(),
            content: vec!["let me think".into()],
        }),
    );
    e.emit("1", approval("1", "call_a", "ls -l"));
    e.emit("1", begin("1", "call_a", "ls -l"));
    e.emit(
        "1",
        EventMsg::ExecCommandOutputDelta(ExecCommandOutputDeltaEvent {
            call_id: "call_a".into(),
            stream: ExecOutputStream::Stdout,
            chunk: "out\n".into(),
        }),
    );
    e.emit(
        "1",
        end("1", "call_a", "ls -l", ExecCommandStatus::Completed),
    );
    e.emit(
        "1",
        EventMsg::PatchApplyBegin(PatchApplyBeginEvent {
            call_id: "call_p".into(),
            turn_id: "1".into(),
            auto_approved: true,
            changes: changes(),
        }),
    );
    e.emit(
        "1",
        EventMsg::PatchApplyEnd(PatchApplyEndEvent {
            call_id: "call_p".into(),
            turn_id: "1".into(),
            stdout: "A a.txt".into(),
            stderr: String::new(),
            success: true,
            changes: changes(),
        }),
    );
    e.emit("1", approval("1", "call_d", "rm -rf x"));
    e.emit(
        "1",
        end("1", "call_d", "rm -rf x", ExecCommandStatus::Declined),
    );
    e.emit(
        "1",
        EventMsg::ApplyPatchApprovalRequest(ApplyPatchApprovalRequestEvent {
            call_id: "call_q".into(),
            turn_id: "1".into(),
            changes: changes(),
            reason: None,
            grant_root: None,
        }),
    );
    e.emit("1", approval("1", "call_o", "make"));
    e.emit("1", EventMsg::AgentMessageDelta(delta("do")));
    e.emit("1", EventMsg::AgentMessageDelta(delta("ne")));
    e.emit(
        "1",
        EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "done".into(),
        }),
    );
    e.emit("1", complete("1"));

    e.emit("2", started("2"));
    e.emit("2", begin("2", "call_i", "sleep 100"));
    e.emit(
        "2",
        end("2", "call_i", "sleep 100", ExecCommandStatus::Failed),
    );
    e.emit(
        "2",
        EventMsg::McpToolCallBegin(McpToolCallBeginEvent {
            call_id: "call_m".into(),
            invocation: McpInvocation {
                server: "s".into(),
                tool: "t".into(),
                arguments: None,
            },
        }),
    );
    e.emit(
        "2",
        EventMsg::TurnAborted(TurnAbortedEvent {
            turn_id: "2".into(),
            reason: TurnAbortReason::Interrupted,
        }),
    );
    engine
}

#[test]
fn live_items_equal_stored_items_ids_order_and_content() {
    let engine = busy_thread();
    let live = engine.live_items();
    let stored = engine.stored_items();
    assert_eq!(live, stored);
    let ids: Vec<&str> = live.iter().map(TurnItem::id).collect();
    assert_eq!(
        ids,
        [
            "1-user-1",
            "1-reasoning-2",
            "call_a",
            "call_p",
            "call_d",
            "1-msg-3",
            "call_q",
            "call_o",
            "call_i",
            "call_m",
        ]
    );
}

#[test]
fn the_engine_closes_the_calls_a_turn_left_open_with_recorded_ends() {
    let engine = busy_thread();
    let items = engine.stored_items();
    let status_of = |id: &str| match items.iter().find(|item| item.id() == id) {
        Some(TurnItem::Command(command)) => command.status,
        Some(TurnItem::FileChange(change)) => change.status,
        Some(TurnItem::McpToolCall(call)) => call.status,
        other => panic!("{id}: {other:?}"),
    };
    // Asked about, never answered before the turn ended: not run.
    assert_eq!(status_of("call_o"), ItemStatus::Declined);
    assert_eq!(status_of("call_q"), ItemStatus::Failed);
    assert_eq!(status_of("call_d"), ItemStatus::Declined);
    assert_eq!(status_of("call_i"), ItemStatus::Failed);
    assert_eq!(status_of("call_m"), ItemStatus::Failed);
    match items.iter().find(|item| item.id() == "call_m") {
        Some(TurnItem::McpToolCall(call)) => {
            assert_eq!(call.result, Some(Err(ENDED_WITH_THE_TURN.to_string())))
        }
        other => panic!("{other:?}"),
    }
    // The closing ends come before the turn's end, on the wire too.
    let position = |pred: &dyn Fn(&EventMsg) -> bool| {
        engine.live.iter().position(pred).expect("event present")
    };
    let closed = position(&|m| matches!(m, EventMsg::ExecCommandEnd(e) if e.call_id == "call_o"));
    let ended = position(&|m| matches!(m, EventMsg::TaskComplete(_)));
    assert!(closed < ended);
}

#[test]
fn a_command_keeps_what_its_begin_said_it_does() {
    let engine = busy_thread();
    match engine
        .stored_items()
        .iter()
        .find(|item| item.id() == "call_a")
    {
        Some(TurnItem::Command(command)) => {
            assert_eq!(command.parsed, parsed("ls -l"));
            assert_eq!(command.output, "out\n");
            assert_eq!(command.exit_code, Some(0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deltas_and_the_finished_message_share_one_id_across_a_retried_stream() {
    let mut engine = Engine::default();
    engine.emit("7", started("7"));
    engine.emit("7", EventMsg::AgentMessageDelta(delta("half an ")));
    // The stream broke and was retried; the item stays the same.
    engine.emit("7", EventMsg::AgentMessageDelta(delta("answer")));
    engine.emit(
        "7",
        EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "answer".into(),
        }),
    );
    engine.emit("7", complete("7"));
    let ids: Vec<&str> = engine
        .live
        .iter()
        .filter_map(|m| match m {
            EventMsg::AgentMessageDelta(d) => Some(d.item_id.as_str()),
            EventMsg::AgentMessage(m) => Some(m.item_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["7-msg-1", "7-msg-1", "7-msg-1"]);
    assert_eq!(engine.live_items(), engine.stored_items());
}

#[test]
fn an_answer_that_never_completed_is_completed_live_and_not_kept() {
    let mut engine = Engine::default();
    engine.emit("3", started("3"));
    engine.emit("3", EventMsg::AgentMessageDelta(delta("half an ans")));
    engine.emit("3", complete("3"));
    assert!(
        !engine
            .live
            .iter()
            .any(|m| matches!(m, EventMsg::AgentMessage(_))),
        "a failed answer must not be presented as an answer"
    );
    assert_eq!(
        engine.live_items(),
        [TurnItem::AgentMessage {
            id: "3-msg-1".into(),
            text: "half an ans".into(),
        }]
    );
    assert!(engine.stored_items().is_empty());
}

#[test]
fn events_recorded_before_items_had_ids_get_ids_from_their_turn() {
    let stored = vec![
        RolloutItem::EventMsg(started("4")),
        RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: "hi".into(),
        })),
        RolloutItem::EventMsg(EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "hello".into(),
        })),
        RolloutItem::EventMsg(complete("4")),
    ];
    let ids: Vec<String> = turns_from_rollout(&stored)
        .into_iter()
        .flat_map(|turn| turn.entries)
        .filter_map(|entry| match entry {
            TurnEntry::Item(item) => Some(item.id().to_string()),
            TurnEntry::Error { .. } => None,
        })
        .collect();
    assert_eq!(ids, ["4-0", "4-1"]);
}

#[test]
fn a_stream_that_stops_short_leaves_nothing_open() {
    let mut projector = ItemProjector::new();
    projector.push(&started("5"));
    projector.push(&begin("5", "call_x", "true"));
    projector.push(&EventMsg::AgentReasoningDelta(DeltaEvent {
        item_id: "5-reasoning-1".into(),
        delta: "hmm".into(),
    }));
    let finished = projector.finish();
    let completed: Vec<(String, Option<ItemStatus>)> = finished
        .iter()
        .map(|event| match event {
            ItemEvent::Completed(TurnItem::Command(command)) => {
                (command.id.clone(), Some(command.status))
            }
            ItemEvent::Unfinished(item) => (item.id().to_string(), None),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        completed,
        [
            ("5-reasoning-1".to_string(), None),
            ("call_x".to_string(), Some(ItemStatus::Declined)),
        ]
    );
    assert!(projector.finish().is_empty());
    // A late output delta of a call already completed is not shown.
    let late = projector.push(&EventMsg::ExecCommandOutputDelta(
        ExecCommandOutputDeltaEvent {
            call_id: "call_x".into(),
            stream: ExecOutputStream::Stdout,
            chunk: "late".into(),
        },
    ));
    assert!(late.is_empty());
}
