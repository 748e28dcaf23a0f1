//! One module per suite; each file says what it covers.

mod engine;
mod mcp_pool;
mod module_layers;
mod open_models;
mod real_llama;
mod store_contract;
