//! How long one durable append takes in a thread store: the cost every recorded item of
//! a turn pays. `scripts/bench` runs it against the local store and PostgreSQL and
//! writes the numbers to docs/performance.md.
//!
//! ```sh
//! cargo run --release -p interpreter-core --example store_append -- local 500
//! cargo run --release -p interpreter-core --example store_append -- postgres://u@host/db 500
//! ```
//!
//! Prints one JSON object on stdout: the store, the number of appends, and the median,
//! 90th percentile and maximum latency in milliseconds. The thread it writes is deleted
//! at the end.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::Utc;
use interpreter_core::store::{self, RolloutItem, SessionMeta, StoreLocation};
use interpreter_protocol::{EventMsg, SessionSource, ThreadId, UserMessageEvent};

fn percentile(sorted: &[Duration], fraction: f64) -> f64 {
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(location), Some(count)) = (args.next(), args.next()) else {
        bail!("usage: store_append (local | postgres://…) APPENDS");
    };
    let count: usize = count.parse().context("APPENDS must be a number")?;
    if count == 0 {
        bail!("APPENDS must be at least 1");
    }
    let home = tempfile::tempdir()?;
    let location = StoreLocation::parse(Some(&location), home.path().to_path_buf())
        .map_err(anyhow::Error::msg)?;
    let store = store::open(&location, None, std::env::var("PGPASSWORD").ok()).await?;
    let meta = SessionMeta {
        id: ThreadId::new(),
        timestamp: Utc::now(),
        cwd: PathBuf::from("/bench/store-append"),
        originator: "store-append".into(),
        cli_version: env!("CARGO_PKG_VERSION").into(),
        source: SessionSource::Exec,
        model_provider: None,
        model: None,
        base_instructions: None,
        forked_from_id: None,
    };
    let thread_id = meta.id;
    let created = store.create(meta).await?;
    // About the size of a short agent message, as most recorded items are.
    let text = "x".repeat(400);
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let item = RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: text.clone(),
        }));
        let started = Instant::now();
        created.writer.append(&[item]).await?;
        samples.push(started.elapsed());
    }
    created.writer.release().await?;
    store.delete(thread_id).await?;
    samples.sort();
    let report = serde_json::json!({
        "store": store.describe(),
        "appends": count,
        "median_ms": percentile(&samples, 0.5),
        "p90_ms": percentile(&samples, 0.9),
        "max_ms": percentile(&samples, 1.0),
    });
    writeln!(std::io::stdout().lock(), "{report}")?;
    Ok(())
}
