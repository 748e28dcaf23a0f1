//! What a tool call gives back to the turn, and the cap on what a tool may put in the
//! history. Below the handlers that produce outcomes and the session that records them.

/// How a tool call ended, for the turn that made it.
pub(crate) enum ToolOutcome {
    Output(String),
    /// The turn must stop. The text is what the model is told about this call, and it
    /// says what really happened: never started, refused, or stopped while running.
    Stop(String),
}

/// `text` cut to at most about `max_bytes`: its head and its tail, with what was cut
/// said between them, like shell output. An MCP server is not trusted to keep its answers
/// small, and the whole answer would go to the model in every later request.
pub(crate) fn cap_tool_result(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut head_end = max_bytes / 2;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - (max_bytes - max_bytes / 2);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let cut = (tail_start - head_end) as u64;
    format!(
        "{}\n[... {} cut from the middle of this tool result ...]\n{}",
        &text[..head_end],
        crate::store::rollout::human_bytes(cut),
        &text[tail_start..]
    )
}
