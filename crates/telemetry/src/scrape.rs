//! `GET /metrics`: the listeners serve whatever the binary registered here, so the
//! transport needs no exporter and the exporter needs no listener.

use std::sync::OnceLock;

/// Renders the current metrics in Prometheus' text exposition format.
pub type Renderer = Box<dyn Fn() -> Result<String, String> + Send + Sync>;

static RENDERER: OnceLock<Renderer> = OnceLock::new();

/// The content type of [`render`]'s text (exposition format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Registers the renderer; the first registration wins (one per process).
pub fn register(renderer: Renderer) {
    let _ = RENDERER.set(renderer);
}

/// The metrics text, `None` when this process serves no metrics.
pub fn render() -> Option<Result<String, String>> {
    RENDERER.get().map(|render| render())
}
