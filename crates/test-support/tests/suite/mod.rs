//! One module per suite; each file says what it covers.

mod mcp_client;
mod mock_model_bin;
