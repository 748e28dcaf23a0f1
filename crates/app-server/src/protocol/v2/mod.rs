//! v2 methods, notifications and approval requests, one file per method family (the
//! reference's domains); every type is re-exported here, so `v2::Name` names it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod account;
mod approvals;
mod command_exec;
mod config;
mod elicitation;
mod fs;
mod initialize;
mod listings;
mod mcp;
mod models;
mod notifications;
mod thread;
mod thread_admin;
mod turn;
mod user_requests;
mod values;

pub use account::*;
pub use approvals::*;
pub use command_exec::*;
pub use config::*;
pub use elicitation::*;
pub use fs::*;
pub use initialize::*;
pub use listings::*;
pub use mcp::*;
pub use models::*;
pub use notifications::*;
pub use thread::*;
pub use thread_admin::*;
pub use turn::*;
pub use user_requests::*;
pub use values::*;
