//! The stdio transport: rmcp's line-delimited JSON-RPC over stdin/stdout, plus two
//! protections rmcp's runtime lacks, both about messages a client should not send.
//!
//! * rmcp ends the connection when the first message is not a request (its handshake
//!   expects `initialize`, a ping or a 2026-07-28 request). A client that sends
//!   `notifications/initialized` too early, or a stray response, would take the whole
//!   server down. Until the first request arrives, anything else is dropped (and logged).
//! * rmcp keys running requests by id, and a second request reusing the id of one still
//!   running replaces it: the first one's cancellation and its response are lost. Such a
//!   request is refused here with `-32600` before rmcp sees it, so the first turn is
//!   neither duplicated nor orphaned.
//!
//! * Lines are read and decoded here, not by rmcp's reader, which drops a line that is
//!   not JSON without a word and answers a malformed message with `-32600` and no id. A
//!   line that is not JSON gets `-32700` with `id: null`, as JSON-RPC 2.0 requires (a
//!   client that sent a truncated line otherwise waits forever); a malformed request gets
//!   `-32600` with its own id; and an unreadable answer to one of our requests (both
//!   `result` and `error`, say) settles that request as an error at once instead of at
//!   its deadline ([`approval::unreadable_answer_as_error`]). Our error answers are valid
//!   JSON-RPC, so a peer that echoes them back cannot start an error storm.
//!
//! It also reports the end of input at once (`input_closed`): rmcp lets in-flight
//! handlers finish for up to 5 s after EOF, and ours wait for their turns, so the turns
//! must be interrupted as soon as the client is gone.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use interpreter_transport::jsonrpc::{self, Unservable};
use interpreter_transport::lines::{BoundedLines, Line};
use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio_util::sync::CancellationToken;

use crate::approval;

/// Server transport over this process's stdin and stdout; `input_closed` fires when
/// stdin ends.
pub(crate) fn transport(input_closed: CancellationToken) -> impl Transport<RoleServer> {
    guarded(tokio::io::stdin(), tokio::io::stdout(), input_closed)
}

/// The guarded transport over any reader and writer: stdin/stdout in production, bytes
/// in memory for [`crate::fuzzing`].
pub(crate) fn guarded<R, W>(read: R, write: W, input_closed: CancellationToken) -> Guarded<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    Guarded {
        lines: BoundedLines::new(BufReader::new(read)),
        // rmcp's transport only writes here: reading is ours (see the module doc).
        inner: AsyncRwTransport::new_server(tokio::io::empty(), write),
        seen_request: false,
        in_flight: Arc::default(),
        input_closed,
    }
}

pub(crate) struct Guarded<R: AsyncRead, W: AsyncWrite> {
    /// Cancel safe: `receive` is polled inside a select and may be dropped mid-line.
    lines: BoundedLines<BufReader<R>>,
    inner: AsyncRwTransport<RoleServer, tokio::io::Empty, W>,
    seen_request: bool,
    /// Ids of client requests not yet answered.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    input_closed: CancellationToken,
}

impl<R, W> Guarded<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    fn settle(&self, id: &RequestId) {
        if let Ok(mut ids) = self.in_flight.lock() {
            ids.remove(id);
        }
    }

    /// Send a message of our own without going through rmcp. Spawned, not awaited: rmcp
    /// polls `receive` inside a select and may drop it at any await, which would lose
    /// the message.
    fn reply(&mut self, message: TxJsonRpcMessage<RoleServer>) {
        let send = self.inner.send(message);
        tokio::spawn(async move {
            if let Err(e) = send.await {
                tracing::debug!("could not answer on stdio: {e}");
            }
        });
    }

    /// Answer a line no handler can see, as every front end answers it.
    fn refuse(&mut self, unservable: &Unservable) {
        self.reply(JsonRpcMessage::error(
            ErrorData::new(
                rmcp::model::ErrorCode(i32::try_from(unservable.code()).unwrap_or(-32603)),
                unservable.message(),
                None,
            ),
            None,
        ));
    }

    /// Decode one line, answering what cannot be handed to rmcp (see the module doc).
    fn decode(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let value: Value = match jsonrpc::decode(line) {
            Ok(value) => value,
            Err(unservable) => {
                tracing::warn!("answering a line that is not JSON: {unservable:?}");
                self.refuse(&unservable);
                return None;
            }
        };
        let error = match serde_json::from_value(value.clone()) {
            Ok(message) => return Some(message),
            Err(error) => error,
        };
        if let Some(answer) = approval::unreadable_answer_as_error(&value, &error.to_string()) {
            tracing::warn!("an unreadable answer to our request, taken as an error: {error}");
            return serde_json::from_value(answer).ok();
        }
        let id = value
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        if id.is_none() && value.get("method").is_some_and(Value::is_string) {
            // A notification we do not know or cannot read: nobody waits for an answer,
            // and JSON-RPC forbids answering one.
            tracing::debug!("ignoring a notification that does not decode: {error}");
            return None;
        }
        self.reply(JsonRpcMessage::error(
            ErrorData::invalid_request(format!("not a valid JSON-RPC message: {error}"), None),
            id,
        ));
        None
    }
}

impl<R, W> Transport<RoleServer> for Guarded<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Response(response) => self.settle(&response.id),
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.settle(id);
                }
            }
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => {}
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let decoded = match self.lines.next().await {
                Ok(Some(Line::Message(line))) => self.decode(&line),
                Ok(Some(Line::TooLong)) => {
                    tracing::warn!("refusing a message longer than the line bound");
                    self.refuse(&Unservable::TooLong);
                    continue;
                }
                Ok(None) => {
                    self.input_closed.cancel();
                    return None;
                }
                Err(e) => {
                    tracing::warn!("could not read stdin: {e}");
                    self.input_closed.cancel();
                    return None;
                }
            };
            let Some(message) = decoded else {
                continue;
            };
            match &message {
                JsonRpcMessage::Request(request) => {
                    self.seen_request = true;
                    let fresh = self
                        .in_flight
                        .lock()
                        .map(|mut ids| ids.insert(request.id.clone()))
                        .unwrap_or(true);
                    if !fresh {
                        let error = ErrorData::invalid_request(
                            format!(
                                "request id {} is already in use by a running request",
                                request.id
                            ),
                            None,
                        );
                        // Sent directly: rmcp never sees the duplicate.
                        let id = request.id.clone();
                        self.reply(JsonRpcMessage::error(error, Some(id)));
                        continue;
                    }
                }
                // A cancelled request gets no response; its id is free again.
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                        && let Some(id) = &cancelled.params.request_id
                    {
                        self.settle(id);
                    }
                    if !self.seen_request {
                        tracing::warn!("ignoring a notification sent before the first request");
                        continue;
                    }
                }
                JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {
                    if !self.seen_request {
                        tracing::warn!("ignoring a response sent before the first request");
                        continue;
                    }
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
