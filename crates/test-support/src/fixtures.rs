//! Recorded and documented server answers, kept as files under `fixtures/` so fast tests
//! replay what real servers send. Each file says where its shape was seen.
//!
//! * `fixtures/overflow/<family>.json`: how each server family rejects a prompt that does
//!   not fit the context window (`status`, `body`, the `context_window` the body names).
//! * `fixtures/streams/<name>.sse`: raw SSE bodies recorded from real servers, replayed
//!   byte for byte (see [`crate::MockResponse::raw_sse`]).
//! * `fixtures/tool-markup/<family>.json`: answers whose tool calls are written as text.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `fixtures/` directory of this crate.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// One server family's context-overflow answer.
#[derive(Debug, Clone, Deserialize)]
pub struct OverflowFixture {
    /// File stem: the family and where it was seen.
    #[serde(skip)]
    pub name: String,
    /// Where this shape comes from.
    pub source: String,
    pub status: u16,
    pub body: String,
    /// The window size the body names, if it names one.
    pub context_window: Option<u64>,
}

/// A text answer that carries tool calls as markup, and the calls that must be recovered.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolMarkupFixture {
    #[serde(skip)]
    pub name: String,
    pub source: String,
    /// What the model wrote (streamed as text deltas).
    pub text: String,
    /// `(name, arguments as JSON)` expected, in order. Empty when nothing is recoverable.
    #[serde(default)]
    pub calls: Vec<ExpectedCall>,
    /// Whether the answer must end up as a tool error the model can read.
    #[serde(default)]
    pub unrecoverable: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExpectedCall {
    pub name: String,
    pub arguments: serde_json::Value,
}

fn load_all<T: for<'de> Deserialize<'de>>(
    sub: &str,
    set_name: impl Fn(&mut T, String),
) -> anyhow::Result<Vec<T>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir().join(sub))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        let mut fixture: T = serde_json::from_str(&text)
            .map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        set_name(&mut fixture, stem);
        out.push(fixture);
    }
    Ok(out)
}

/// Every `fixtures/overflow/*.json`, sorted by name.
pub fn overflow() -> anyhow::Result<Vec<OverflowFixture>> {
    load_all("overflow", |f: &mut OverflowFixture, name| f.name = name)
}

/// Every `fixtures/tool-markup/*.json`, sorted by name.
pub fn tool_markup() -> anyhow::Result<Vec<ToolMarkupFixture>> {
    load_all("tool-markup", |f: &mut ToolMarkupFixture, name| {
        f.name = name
    })
}

/// The bytes of `fixtures/streams/<name>`.
pub fn stream(name: &str) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(dir().join("streams").join(name))?)
}
