//! `mock-mcp-server`: a small MCP server over stdio for the MCP client's tests.
//!
//! Tools: `echo {text}` → the text; `add {a, b}` → the sum as text; `sleep {ms}` → waits,
//! then says so (for timeout and cancellation tests); `fail {}` → an `isError` result;
//! `env_var {name}` → the variable's value in this process, or `<unset>` (to check what
//! environment the client passed). Exits when stdin closes.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::stdio;
use rmcp::{ServerHandler, ServiceExt as _, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SleepArgs {
    ms: u64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct FailArgs {}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EnvVarArgs {
    name: String,
}

#[derive(Debug, Clone)]
struct MockServer {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl MockServer {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Returns `text` unchanged")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Adds two numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        let sum = a + b;
        // Whole sums print without a fractional part (`3`, not `3.0`).
        if sum.fract() == 0.0 && sum.abs() < 1e15 {
            format!("{}", sum as i64)
        } else {
            sum.to_string()
        }
    }

    #[tool(description = "Sleeps for `ms` milliseconds")]
    async fn sleep(&self, Parameters(SleepArgs { ms }): Parameters<SleepArgs>) -> String {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        format!("slept {ms} ms")
    }

    #[tool(description = "Always fails with an error result")]
    fn fail(&self, Parameters(FailArgs {}): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("this tool always fails")])
    }

    #[tool(description = "Returns the value of an environment variable of this server")]
    fn env_var(&self, Parameters(EnvVarArgs { name }): Parameters<EnvVarArgs>) -> String {
        std::env::var(&name).unwrap_or_else(|_| "<unset>".to_string())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MockServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let service = MockServer::new().serve(stdio()).await?;
    service.waiting().await?;
    Ok(())
}
