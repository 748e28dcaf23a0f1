//! One module per suite; each file says what it covers.

mod bounds;
mod chat_stream;
mod open_models;
mod responses_stream;
