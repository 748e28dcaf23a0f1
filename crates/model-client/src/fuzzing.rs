//! Entry points for the fuzz targets and their corpus replay (`crates/fuzz-targets`),
//! not an API: the production decoding of streamed answers, driven from bytes in memory
//! instead of an HTTP response. Text tool-call recovery is public already
//! ([`crate::text_tools::recover_tool_calls`]).

pub use crate::client::decode_stream_in_memory;
