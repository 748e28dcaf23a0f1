//! The engine's item events as v2 notifications: `item/started`, the per-kind delta
//! notifications, `item/completed`. Pure; the driver sends what this returns.

use interpreter_core::items::{DeltaKind, ItemDelta, ItemEvent, TurnItem};
use serde_json::Value;

use crate::mapping;
use crate::protocol::notification_names;
use crate::protocol::v2;

/// The turn an item event belongs to, as the wire names it.
pub(crate) struct ItemContext<'a> {
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    /// The id the client gave the user message of `turn/start` (`clientUserMessageId`),
    /// with the engine's id of that message once it is known.
    pub client_user_message: Option<(&'a str, &'a str)>,
    pub now_ms: i64,
}

/// The notification announcing `event`: its method and params.
pub(crate) fn item_notification(
    context: &ItemContext<'_>,
    event: ItemEvent,
) -> (&'static str, Value) {
    let thread_id = context.thread_id.to_string();
    let turn_id = context.turn_id.to_string();
    let params = match event {
        ItemEvent::Started(item) => {
            return (
                notification_names::ITEM_STARTED,
                to_value(&v2::ItemStartedNotification {
                    item: wire_item(context, &item),
                    thread_id,
                    turn_id,
                    started_at_ms: context.now_ms,
                }),
            );
        }
        // A client closes the item with what streamed of it (Codex's `item/completed`
        // has no other way to end an item).
        ItemEvent::Completed(item) | ItemEvent::Unfinished(item) => {
            return (
                notification_names::ITEM_COMPLETED,
                to_value(&v2::ItemCompletedNotification {
                    item: wire_item(context, &item),
                    thread_id,
                    turn_id,
                    completed_at_ms: context.now_ms,
                }),
            );
        }
        ItemEvent::Delta(delta) => delta,
    };
    let ItemDelta {
        item_id,
        kind,
        text,
    } = params;
    let plain = |method: &'static str| {
        (
            method,
            to_value(&v2::ItemDeltaNotification {
                thread_id: context.thread_id.to_string(),
                turn_id: context.turn_id.to_string(),
                item_id: item_id.clone(),
                delta: text.clone(),
            }),
        )
    };
    match kind {
        DeltaKind::AgentText => plain(notification_names::ITEM_AGENT_MESSAGE_DELTA),
        DeltaKind::CommandOutput => plain(notification_names::ITEM_COMMAND_EXECUTION_OUTPUT_DELTA),
        DeltaKind::ReasoningText => (
            notification_names::ITEM_REASONING_TEXT_DELTA,
            to_value(&v2::ReasoningTextDeltaNotification {
                thread_id,
                turn_id,
                item_id,
                delta: text,
                content_index: 0,
            }),
        ),
        DeltaKind::ReasoningSummaryPart { index } => (
            notification_names::ITEM_REASONING_SUMMARY_PART_ADDED,
            to_value(&v2::ReasoningSummaryPartAddedNotification {
                thread_id,
                turn_id,
                item_id,
                summary_index: index,
            }),
        ),
        DeltaKind::ReasoningSummaryText { index } => (
            notification_names::ITEM_REASONING_SUMMARY_TEXT_DELTA,
            to_value(&v2::ReasoningSummaryTextDeltaNotification {
                thread_id,
                turn_id,
                item_id,
                delta: text,
                summary_index: index,
            }),
        ),
        DeltaKind::PlanText => (
            notification_names::ITEM_PLAN_DELTA,
            to_value(&v2::PlanDeltaNotification {
                thread_id,
                turn_id,
                item_id,
                delta: text,
            }),
        ),
        DeltaKind::FileChangeOutput => (
            notification_names::ITEM_FILE_CHANGE_OUTPUT_DELTA,
            to_value(&v2::FileChangeOutputDeltaNotification {
                thread_id,
                turn_id,
                item_id,
                delta: text,
            }),
        ),
        DeltaKind::McpProgress => (
            notification_names::ITEM_MCP_TOOL_CALL_PROGRESS,
            to_value(&v2::McpToolCallProgressNotification {
                thread_id,
                turn_id,
                item_id,
                message: text,
            }),
        ),
    }
}

fn wire_item(context: &ItemContext<'_>, item: &TurnItem) -> v2::ThreadItem {
    let client_id = context
        .client_user_message
        .filter(|(engine_id, _)| *engine_id == item.id())
        .map(|(_, client_id)| client_id.to_string());
    mapping::thread_item(item, client_id)
}

fn to_value<T: serde::Serialize>(params: &T) -> Value {
    // The notification types are plain data; serialising them cannot fail.
    serde_json::to_value(params).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use interpreter_core::items::{CommandItem, ItemStatus};
    use interpreter_protocol::ExecCommandSource;

    use super::*;

    fn context<'a>() -> ItemContext<'a> {
        ItemContext {
            thread_id: "t",
            turn_id: "1",
            client_user_message: Some(("1-user-1", "c-7")),
            now_ms: 5,
        }
    }

    #[test]
    fn a_started_user_message_carries_the_clients_id_only_when_it_is_that_message() {
        let ours = TurnItem::UserMessage {
            id: "1-user-1".into(),
            text: "hi".into(),
        };
        let (method, params) = item_notification(&context(), ItemEvent::Started(ours));
        assert_eq!(method, "item/started");
        assert_eq!(params["item"]["clientId"], "c-7");
        assert_eq!(params["item"]["id"], "1-user-1");
        assert_eq!(params["startedAtMs"], 5);
        let other = TurnItem::UserMessage {
            id: "1-user-4".into(),
            text: "more".into(),
        };
        let (_, params) = item_notification(&context(), ItemEvent::Completed(other));
        assert!(params["item"].get("clientId").is_none_or(Value::is_null));
    }

    #[test]
    fn every_delta_kind_has_its_method() {
        let cases = [
            (DeltaKind::AgentText, "item/agentMessage/delta"),
            (DeltaKind::ReasoningText, "item/reasoning/textDelta"),
            (
                DeltaKind::ReasoningSummaryPart { index: 1 },
                "item/reasoning/summaryPartAdded",
            ),
            (
                DeltaKind::ReasoningSummaryText { index: 1 },
                "item/reasoning/summaryTextDelta",
            ),
            (DeltaKind::PlanText, "item/plan/delta"),
            (
                DeltaKind::CommandOutput,
                "item/commandExecution/outputDelta",
            ),
            (DeltaKind::FileChangeOutput, "item/fileChange/outputDelta"),
            (DeltaKind::McpProgress, "item/mcpToolCall/progress"),
        ];
        for (kind, expected) in cases {
            let delta = ItemEvent::Delta(ItemDelta {
                item_id: "x".into(),
                kind,
                text: "piece".into(),
            });
            let (method, params) = item_notification(&context(), delta);
            assert_eq!(method, expected);
            assert_eq!(params["itemId"], "x");
            assert_eq!(params["threadId"], "t");
            assert_eq!(params["turnId"], "1");
        }
    }

    #[test]
    fn a_declined_command_completes_as_declined_with_no_output() {
        let item = TurnItem::Command(CommandItem {
            id: "call_1".into(),
            command: vec!["rm".into(), "-rf".into(), "x".into()],
            cwd: "/w".into(),
            parsed: Vec::new(),
            source: ExecCommandSource::Agent,
            status: ItemStatus::Declined,
            output: String::new(),
            exit_code: None,
            duration_ms: Some(0),
        });
        let (method, params) = item_notification(&context(), ItemEvent::Completed(item));
        assert_eq!(method, "item/completed");
        assert_eq!(params["item"]["type"], "commandExecution");
        assert_eq!(params["item"]["status"], "declined");
        assert!(params["item"]["aggregatedOutput"].is_null());
        assert_eq!(params["item"]["command"], "rm -rf x");
    }
}
