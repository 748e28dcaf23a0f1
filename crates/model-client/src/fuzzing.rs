//! Entry points for the fuzz targets and their corpus replay (`crates/fuzz-targets`),
//! not an API: the production decoding of streamed answers, driven from bytes in memory
//! instead of an HTTP response. Text tool-call recovery is public already
//! ([`crate::text_tools::recover_tool_calls`]).

pub use crate::client::decode_stream_in_memory;

use crate::sse::{FrameError, SseFramer};

/// The SSE framing of a body that arrived in `reads`, refusing a line or an event's data
/// over `max_bytes`: each event as `(name, data)`, or the error that ended the body.
pub fn frame_sse_in_memory(
    reads: &[Vec<u8>],
    max_bytes: usize,
) -> Vec<Result<(String, String), String>> {
    let mut framer = SseFramer::new(max_bytes);
    let mut out = Vec::new();
    for read in reads {
        framer.push(read);
        while let Some(item) = framer.next_event() {
            out.push(match item {
                Ok(event) => Ok((event.event, event.data)),
                Err(FrameError::TooLarge(bound)) => Err(bound.what().to_string()),
                Err(FrameError::NotUtf8) => Err("not UTF-8".to_string()),
            });
        }
    }
    out
}
