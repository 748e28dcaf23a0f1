//! The signals that ask a front end to stop: SIGINT (Ctrl-C), SIGTERM and SIGHUP. Every
//! front end reacts the same way: interrupt running turns (their commands' process
//! groups are killed and the turn is recorded as interrupted), then exit within a bounded
//! time. Without a handler the default action would end the process at once and leave
//! the rollout without its last lines.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listens for the stop signals from creation on.
pub(crate) struct StopSignals {
    signals: Vec<Signal>,
}

impl StopSignals {
    /// Install the handlers. Errors only if the runtime cannot register them.
    pub(crate) fn install() -> std::io::Result<Self> {
        let signals = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ]
        .into_iter()
        .map(signal)
        .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self { signals })
    }

    /// Resolves at the next stop signal.
    pub(crate) async fn recv(&mut self) {
        let waits = self.signals.iter_mut().map(|s| Box::pin(s.recv()));
        let _ = futures::future::select_all(waits).await;
    }
}

/// Cancel `stop` at the first stop signal.
pub(crate) fn cancel_on_stop_signal(stop: tokio_util::sync::CancellationToken) {
    match StopSignals::install() {
        Ok(mut signals) => {
            tokio::spawn(async move {
                signals.recv().await;
                stop.cancel();
            });
        }
        Err(e) => tracing::warn!("could not install signal handlers: {e}"),
    }
}
