//! Entry points for the fuzz targets and their corpus replay (`crates/fuzz-targets`),
//! not an API: the production readers of what an MCP client sends, driven from bytes in
//! memory.

use interpreter_protocol::{ElicitationResponse, ReviewDecision};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::turns::{Answer, decision_of, elicitation_response_of};

/// A client's answer to a question the server asked, decoded both ways it is read: as an
/// approval decision (command and patch approvals) and as the `ElicitResult` passed on
/// to a downstream server that asked.
pub fn decode_client_answer(answer: Value) -> (ReviewDecision, ElicitationResponse) {
    let answer = Answer::Client(answer);
    (decision_of(&answer), elicitation_response_of(&answer))
}

/// Reads `input` as the stdio transport reads stdin (rmcp's line framing plus the guards
/// of `stdio`), answering nothing; returns how many messages reached the server. Refusals
/// of duplicate request ids are written to a sink.
pub fn read_stdio_messages(input: Vec<u8>) -> usize {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    runtime.block_on(async move {
        let mut transport = crate::stdio::guarded(
            std::io::Cursor::new(input),
            tokio::io::sink(),
            CancellationToken::new(),
        );
        let mut received = 0;
        while transport.receive().await.is_some() {
            received += 1;
        }
        received
    })
}
