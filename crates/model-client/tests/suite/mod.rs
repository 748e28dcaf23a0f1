//! One module per suite; each file says what it covers.

mod bounds;
mod chat_stream;
mod messages_wire;
mod open_models;
mod responses_stream;
mod support;
