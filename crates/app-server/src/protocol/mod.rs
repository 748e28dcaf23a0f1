//! The app-server wire types: every method's params and result, every notification and
//! every server→client request, as serde + schemars structs (the JSON Schema that
//! `interpreter app-server generate-json-schema` writes is derived from these).
//!
//! Naming follows the reference protocol: `*Params` for a request's params, `*Response`
//! for its result, `*Notification` for a notification's params. Fields are camelCase,
//! with the reference's snake_case exceptions kept on purpose (they are on the wire that
//! way): `thread/list` sort keys, `UserInput::Text::text_elements`, `fileChange` kinds'
//! `move_path`, `fuzzyFileSearch` results, `collaborationMode/list`'s `reasoning_effort`,
//! and v1 payloads (`ReviewDecision`, `ParsedCommand`, `gitInfo`).

pub mod common;
pub(crate) mod notification_names;
pub mod v1;
pub mod v2;

pub use common::*;
