//! The bodies of the fuzz targets: one `pub fn TARGET(data: &[u8])` per parser of input
//! that comes from outside the process (model answers, patches, client messages, files on
//! disk), each calling the production function. The cargo-fuzz crate in `fuzz/` (outside
//! the workspace, nightly) calls them from `fuzz/fuzz_targets/TARGET.rs`, and
//! `tests/corpus.rs` replays every file of `fuzz/corpus/TARGET/` through them on stable,
//! so a crash once found stays fixed. A target fails only by panicking (or by running
//! out of time or memory under the fuzzer); errors are the parsers' normal answers.
//!
//! See `docs/reliability.md` § Fuzzing for how to run them.

use std::path::PathBuf;
use std::sync::OnceLock;

use interpreter_model_client::{ProviderError, ResponseEvent, StreamLimits, WireApi};
use interpreter_protocol::ResponseItem;

/// A target's body: runs one input.
pub type Target = fn(&[u8]);

/// Every target by name, the name of its `fuzz/fuzz_targets/` file and corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("text_tools", text_tools),
    ("chat_stream", chat_stream),
    ("responses_stream", responses_stream),
    ("messages_stream", messages_stream),
    ("stream_bounds", stream_bounds),
    ("apply_patch", apply_patch),
    ("approval_answer", approval_answer),
    ("rollout", rollout),
    ("config_toml", config_toml),
    ("mcp_stdio", mcp_stdio),
    ("app_server_stdio", app_server_stdio),
];

/// The tool names offered to the model in the targets that recover tool calls from text.
fn offered_tools() -> Vec<String> {
    ["shell", "apply_patch", "update_plan"]
        .map(String::from)
        .to_vec()
}

/// A finished model answer, searched for tool calls written as text.
pub fn text_tools(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _recovered =
        interpreter_model_client::text_tools::recover_tool_calls(&text, &offered_tools());
}

/// A Chat Completions SSE body. See [`stream_input`] for the first byte.
pub fn chat_stream(data: &[u8]) {
    decode_stream(WireApi::Chat, data);
}

/// A Responses API SSE body. See [`stream_input`] for the first byte.
pub fn responses_stream(data: &[u8]) {
    decode_stream(WireApi::Responses, data);
}

/// An Anthropic Messages SSE body. See [`stream_input`] for the first byte.
pub fn messages_stream(data: &[u8]) {
    decode_stream(WireApi::Messages, data);
}

fn decode_stream(wire_api: WireApi, data: &[u8]) {
    let Some((chunks, tools)) = stream_input(data) else {
        return;
    };
    let _events = interpreter_model_client::fuzzing::decode_stream_in_memory(
        wire_api,
        chunks,
        tools,
        StreamLimits::default(),
    );
}

/// The stream targets' input: a control byte, then the body as it came off the wire.
/// The control byte's low 7 bits are the size of the network reads the body arrives in
/// (0: all at once), so events and UTF-8 characters split across reads are exercised; its
/// high bit turns text tool-call recovery off (a provider without `text_tool_calls`).
fn stream_input(data: &[u8]) -> Option<(Vec<Vec<u8>>, Vec<String>)> {
    let (&control, body) = data.split_first()?;
    let read_size = usize::from(control & 0x7f);
    let chunks = if read_size == 0 {
        vec![body.to_vec()]
    } else {
        body.chunks(read_size).map(<[u8]>::to_vec).collect()
    };
    let tools = if control & 0x80 == 0 {
        offered_tools()
    } else {
        Vec::new()
    };
    Some((chunks, tools))
}

/// A streamed answer (either wire format) read under small size bounds, through the
/// bounded SSE framer alone and through the whole decoding path. See [`bounds_input`] for
/// the three control bytes. Asserts that the bounds hold: no event's data and no line is
/// kept past the event bound, the streamed text, reasoning and summaries stay within the
/// answer bound, no tool call reaches the consumer with arguments past their bound, a
/// too-large error names the bound that was configured, and nothing follows an error.
pub fn stream_bounds(data: &[u8]) {
    let Some((wire_api, reads, limits)) = bounds_input(data) else {
        return;
    };
    let framed = interpreter_model_client::fuzzing::frame_sse_in_memory(&reads, limits.event_bytes);
    for (at, item) in framed.iter().enumerate() {
        match item {
            Ok((name, data)) => assert!(
                name.len() <= limits.event_bytes && data.len() <= limits.event_bytes,
                "an event over {} bytes was framed: {} + {}",
                limits.event_bytes,
                name.len(),
                data.len()
            ),
            Err(_) => assert_eq!(at + 1, framed.len(), "the framer went on after an error"),
        }
    }

    // Without tools, so no text recovery: every call comes from the wire.
    let events = interpreter_model_client::fuzzing::decode_stream_in_memory(
        wire_api,
        reads,
        Vec::new(),
        limits,
    );
    let mut streamed = 0usize;
    for (at, event) in events.iter().enumerate() {
        match event {
            Ok(ResponseEvent::OutputTextDelta(delta) | ResponseEvent::ReasoningDelta(delta))
            | Ok(ResponseEvent::ReasoningSummaryDelta { delta, .. }) => {
                streamed += delta.len();
            }
            Ok(ResponseEvent::OutputItemDone(ResponseItem::FunctionCall { arguments, .. })) => {
                assert!(
                    arguments.len() <= limits.arguments_bytes,
                    "a call with {} bytes of arguments passed a bound of {}",
                    arguments.len(),
                    limits.arguments_bytes
                );
            }
            Ok(_) => {}
            Err(err) => {
                assert_eq!(at + 1, events.len(), "events after the error {err}");
                if let ProviderError::ResponseTooLarge { what, limit, .. } = err {
                    assert_eq!(
                        usize::try_from(*limit).ok(),
                        Some(limits.limit_of(*what)),
                        "{err}"
                    );
                }
            }
        }
        assert!(
            streamed <= limits.answer_bytes,
            "{streamed} bytes streamed past an answer bound of {}",
            limits.answer_bytes
        );
    }
}

/// The bounds target's input: three control bytes, then the body as it came off the
/// wire. Byte 0: the low 7 bits are the size of the network reads (0: all at once), the
/// high bit picks the Responses wire format (else Chat Completions). Byte 1: the event
/// bound is 16 × (1 + its low nibble) bytes, the answer bound 64 × (1 + its high
/// nibble). Byte 2: the arguments bound is 1 + its value. Small bounds, so short inputs
/// reach them.
fn bounds_input(data: &[u8]) -> Option<(WireApi, Vec<Vec<u8>>, StreamLimits)> {
    let (control, body) = data.split_at_checked(3)?;
    let read_size = usize::from(control[0] & 0x7f);
    let wire_api = if control[0] & 0x80 == 0 {
        WireApi::Chat
    } else {
        WireApi::Responses
    };
    let reads = if read_size == 0 {
        vec![body.to_vec()]
    } else {
        body.chunks(read_size).map(<[u8]>::to_vec).collect()
    };
    let limits = StreamLimits {
        event_bytes: 16 * (1 + usize::from(control[1] & 0x0f)),
        answer_bytes: 64 * (1 + usize::from(control[1] >> 4)),
        arguments_bytes: 1 + usize::from(control[2]),
    };
    Some((wire_api, reads, limits))
}

/// Patch text as the model sends it to `apply_patch`, and as a shell command (`argv`
/// words separated by NUL) that may carry a patch.
pub fn apply_patch(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(patch) = interpreter_tools::parse_patch(&text) {
        let _paths = patch.affected_paths(std::path::Path::new("/work"));
    }
    let argv: Vec<String> = text.split('\0').map(String::from).collect();
    if let Some(patch) = interpreter_tools::apply_patch::extract_patch_from_shell(&argv) {
        let _parsed = interpreter_tools::parse_patch(&patch);
    }
}

/// A client's answer to an approval or elicitation request (MCP `elicitation/create`,
/// MRTR `inputResponses`, app-server approval requests all decode through these).
pub fn approval_answer(data: &[u8]) {
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let shared = interpreter_protocol::approval_answer::decode_approval_answer(&answer);
    let (decision, _passed_on) =
        interpreter_mcp_server::fuzzing::decode_client_answer(answer.clone());
    // The decoder fails closed: only an object can approve, and mcp-server adds nothing.
    assert_eq!(
        decision, shared,
        "mcp-server decided otherwise than the shared decoder"
    );
    assert!(
        !shared.is_approved() || answer.is_object(),
        "a non-object answer approved: {answer}"
    );
}

/// The content of a rollout file (`sessions/…/*.jsonl`), read every way one is read.
pub fn rollout(data: &[u8]) {
    let _records = interpreter_core::fuzzing::read_rollout_content(data);
}

/// The text of `<home>/config.toml`, loaded as `interpreter` loads it (profiles selected
/// by its `profile` key, unknown keys both stripped and, strictly, refused).
pub fn config_toml(data: &[u8]) {
    // A config may name files to read (`model_instructions_file`, `profile` picks
    // `NAME.config.toml`); device and process files could block or never end, which is
    // the user's own doing, not a parser failure. Inputs naming them are skipped.
    if ["/dev", "/proc", "/sys"].iter().any(|root| {
        data.windows(root.len())
            .any(|window| window == root.as_bytes())
    }) {
        return;
    }
    let Some(home) = config_home() else {
        return;
    };
    if std::fs::write(home.join("config.toml"), data).is_err() {
        return;
    }
    for strict in [false, true] {
        let _config =
            interpreter_core::config::load_config(interpreter_core::config::ConfigInputs {
                home: home.clone(),
                cwd: home.clone(),
                strict,
                ..Default::default()
            });
    }
}

/// One temporary home per process, kept until it exits.
fn config_home() -> Option<PathBuf> {
    static HOME: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().ok())
        .as_ref()
        .map(|dir| dir.path().to_path_buf())
}

/// What an MCP client writes to `interpreter mcp-server`'s stdin.
pub fn mcp_stdio(data: &[u8]) {
    let _messages = interpreter_mcp_server::fuzzing::read_stdio_messages(data.to_vec());
}

/// What a client writes to `interpreter app-server`'s (or `interpreter acp`'s) stdin: the
/// bounded line framing (a small bound, so long lines are refused too), then each message
/// classified as the processor does before dispatching it.
pub fn app_server_stdio(data: &[u8]) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    runtime.block_on(async {
        let mut lines = interpreter_transport::lines::BoundedLines::with_limit(data, 4096);
        while let Ok(Some(line)) = lines.next().await {
            if let interpreter_transport::lines::Line::Message(bytes) = line
                && let Ok(value) = interpreter_transport::jsonrpc::decode(&bytes)
            {
                let _classified =
                    interpreter_app_server::protocol::JsonRpcMessage::from_value(value);
            }
        }
    });
}
