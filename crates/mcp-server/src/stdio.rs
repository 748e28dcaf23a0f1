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
//! It also reports the end of input at once (`input_closed`): rmcp lets in-flight
//! handlers finish for up to 5 s after EOF, and ours wait for their turns, so the turns
//! must be interrupted as soon as the client is gone.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// Server transport over this process's stdin and stdout; `input_closed` fires when
/// stdin ends.
pub fn transport(input_closed: CancellationToken) -> impl Transport<RoleServer> {
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
        inner: AsyncRwTransport::new_server(read, write),
        seen_request: false,
        in_flight: Arc::default(),
        input_closed,
    }
}

pub(crate) struct Guarded<R: AsyncRead, W: AsyncWrite> {
    inner: AsyncRwTransport<RoleServer, R, W>,
    seen_request: bool,
    /// Ids of client requests not yet answered.
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    input_closed: CancellationToken,
}

impl<R: AsyncRead, W: AsyncWrite> Guarded<R, W> {
    fn settle(&self, id: &RequestId) {
        if let Ok(mut ids) = self.in_flight.lock() {
            ids.remove(id);
        }
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
            let Some(message) = self.inner.receive().await else {
                self.input_closed.cancel();
                return None;
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
                        // Sent directly: rmcp never sees the duplicate. Spawned, not
                        // awaited: rmcp polls `receive` inside a select and may drop this
                        // future at any await, which would lose the answer.
                        let send = self
                            .inner
                            .send(JsonRpcMessage::error(error, Some(request.id.clone())));
                        tokio::spawn(async move {
                            if let Err(e) = send.await {
                                tracing::debug!("could not refuse a duplicate request id: {e}");
                            }
                        });
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
