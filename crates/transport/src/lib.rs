//! The wire beneath every front end, so that each rule about it has one owner: the
//! bounded JSON-lines reader of the stdio servers and what an unservable line is
//! answered with ([`lines`], [`jsonrpc`]), who may use a listener ([`access`]), and the
//! listeners' token files, sockets and accept loop ([`listener`]).

pub mod access;
pub mod jsonrpc;
pub mod lines;
pub mod listener;
