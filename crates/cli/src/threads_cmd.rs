//! `interpreter threads list|show|migrate|export`: past threads from the engine's thread
//! store (this machine's home, or the PostgreSQL store of a fleet), whichever front end
//! made them, readable without opening JSONL by hand; and copied between stores.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use interpreter_core::config::ConfigOverrides;
use interpreter_core::config::load_store_location;
use interpreter_core::items::{CommandItem, FileChangeItem, ItemStatus, TurnItem};
use interpreter_core::store::StoreLocation;
use interpreter_core::store::{
    self, ListDirection, ListQuery, ListSortKey, RolloutItem, ThreadRecord, ThreadStore, TurnEntry,
    TurnOutcome,
};
use interpreter_protocol::{FileChange, ThreadId};
use serde_json::json;

use crate::cli::{ConfigArgs, ThreadsArgs, ThreadsCommand};
use crate::config_inputs;
use crate::terminal::neutralize_controls;

/// Output lines of one command shown before the rest is summarised.
const OUTPUT_LINES_SHOWN: usize = 20;
/// Page size when reading the whole index.
const PAGE: usize = 500;

pub(crate) async fn run(
    args: ThreadsArgs,
    config: &ConfigArgs,
    env: HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    let cwd = crate::exec::resolve_cwd(None)?;
    let inputs = config_inputs::build(config, env, cwd.clone(), ConfigOverrides::default())?;
    let location = load_store_location(&inputs)?;
    let password = inputs.env.get("PGPASSWORD").cloned();
    let store = store::open(&location, None, password.clone()).await?;
    let text = match args.command {
        ThreadsCommand::Migrate { to } => {
            let target = StoreLocation::parse(Some(&to), inputs.home.clone())
                .map_err(|message| anyhow::anyhow!("--to: {message}"))?;
            if target == location {
                eprintln!("Error: --to names the store the threads are already in ({location})");
                return Ok(ExitCode::from(2));
            }
            let target = store::open(&target, None, password).await?;
            return migrate(store.as_ref(), target.as_ref()).await;
        }
        ThreadsCommand::List {
            json,
            cwd: dir,
            limit,
            archived,
        } => {
            let dir = dir.map(|d| {
                let d = cwd.join(d);
                std::fs::canonicalize(&d).unwrap_or(d)
            });
            let records = list(store.as_ref(), dir.as_deref(), limit, archived).await?;
            Ok(if json {
                render_json(&records)?
            } else {
                neutralize_controls(&render_list(&records)).into_owned()
            })
        }
        // Everything `show` prints (messages, command output, paths, errors) came from
        // the model, its commands or a provider, and none of it is styled: it is
        // neutralised as a whole.
        ThreadsCommand::Show { id } => show(store.as_ref(), &id)
            .await?
            .map(|text| neutralize_controls(&text).into_owned()),
        ThreadsCommand::Export { id, output } => {
            return export(store.as_ref(), &id, output.map(|o| cwd.join(o))).await;
        }
    };
    match text {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("Error: {}", neutralize_controls(&message));
            Ok(ExitCode::from(1))
        }
    }
}

/// Copies every thread, archived ones too, with its name, archive flag and git
/// metadata; a thread already in `target` is skipped, so an interrupted run is finished
/// by running it again. Progress goes to stderr, the summary to stdout.
async fn migrate(source: &dyn ThreadStore, target: &dyn ThreadStore) -> anyhow::Result<ExitCode> {
    let mut records: Vec<(ThreadRecord, bool)> = Vec::new();
    for archived in [false, true] {
        let listed = list(source, None, None, archived).await?;
        records.extend(listed.into_iter().map(|record| (record, archived)));
    }
    // Oldest first: an interrupted copy leaves the target's newest threads missing,
    // not a gap in the middle.
    records.reverse();
    let total = records.len();
    eprintln!(
        "copying {total} threads from {} to {}",
        source.describe(),
        target.describe()
    );
    let (mut copied, mut present, mut failed) = (0usize, 0usize, 0usize);
    for (n, (record, archived)) in records.iter().enumerate() {
        match copy_thread(source, target, record, *archived).await {
            Ok(store::Imported::Created) => copied += 1,
            Ok(store::Imported::AlreadyPresent) => present += 1,
            Err(err) => {
                failed += 1;
                eprintln!(
                    "thread {}: not copied: {}",
                    record.id,
                    neutralize_controls(&err.to_string())
                );
            }
        }
        if (n + 1) % 50 == 0 || n + 1 == total {
            eprintln!("{}/{total} threads done", n + 1);
        }
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{copied} copied, {present} already there, {failed} failed"
    )?;
    out.flush()?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn copy_thread(
    source: &dyn ThreadStore,
    target: &dyn ThreadStore,
    record: &ThreadRecord,
    archived: bool,
) -> anyhow::Result<store::Imported> {
    let read = source
        .read(record.id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("it was deleted meanwhile"))?;
    if let Some(skipped) = &read.skipped {
        eprintln!("thread {}: {skipped}", record.id);
    }
    let mut items = read.items.into_iter();
    let Some(RolloutItem::SessionMeta(meta)) = items.next() else {
        anyhow::bail!("its first record is not the thread's metadata");
    };
    let imported = target
        .import(meta, items.collect(), Some(record.updated_at))
        .await?;
    if imported == store::Imported::Created {
        if record.name.is_some() {
            target.set_name(record.id, record.name.clone()).await?;
        }
        if record.git_info.is_some() {
            target
                .set_git_info(record.id, record.git_info.clone())
                .await?;
        }
        if archived {
            target.set_archived(record.id, true).await?;
        }
    }
    Ok(imported)
}

/// Writes the thread's records as JSON lines to `output` (a new file) or stdout.
async fn export(
    store: &dyn ThreadStore,
    id: &str,
    output: Option<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let Ok(thread_id) = ThreadId::from_str(id) else {
        eprintln!("Error: `{}` is not a thread id", neutralize_controls(id));
        return Ok(ExitCode::from(1));
    };
    let Some(bytes) = store.export(thread_id).await? else {
        eprintln!(
            "Error: no thread {thread_id} in the {} thread store",
            store.describe()
        );
        return Ok(ExitCode::from(1));
    };
    match output {
        Some(path) => {
            let mut file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            eprintln!("wrote thread {thread_id} to {}", path.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every matching thread, most recently updated first.
async fn list(
    store: &dyn ThreadStore,
    cwd: Option<&Path>,
    limit: Option<usize>,
    archived: bool,
) -> anyhow::Result<Vec<ThreadRecord>> {
    // Threads written while the index was unusable, or by another version.
    for notice in store.refresh().await? {
        eprintln!("note: {notice}");
    }
    let mut records = Vec::new();
    let mut cursor = None;
    loop {
        let want = limit.map_or(PAGE, |l| l.saturating_sub(records.len()).min(PAGE));
        if want == 0 {
            break;
        }
        let page = store
            .list(ListQuery {
                limit: want,
                cursor,
                sort_key: ListSortKey::UpdatedAt,
                direction: ListDirection::Desc,
                archived,
                cwds: cwd.map(Path::to_path_buf).into_iter().collect(),
                ..ListQuery::default()
            })
            .await?;
        records.extend(page.records);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(records)
}

fn source_name(record: &ThreadRecord) -> String {
    serde_json::to_value(record.source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn render_json(records: &[ThreadRecord]) -> anyhow::Result<String> {
    let rows: Vec<_> = records
        .iter()
        .map(|r| {
            json!({
                "id": r.id.to_string(),
                "createdAt": r.created_at.to_rfc3339(),
                "updatedAt": r.updated_at.to_rfc3339(),
                "cwd": r.cwd,
                "source": source_name(r),
                "modelProvider": r.model_provider,
                "model": r.model,
                "preview": r.preview,
                "path": r.rollout_path,
            })
        })
        .collect();
    Ok(serde_json::to_string_pretty(&rows)? + "\n")
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

fn render_list(records: &[ThreadRecord]) -> String {
    if records.is_empty() {
        return "No threads.\n".to_string();
    }
    let mut out = String::new();
    for r in records {
        let _ = writeln!(
            out,
            "{}  {}  {:<9} {}",
            r.id,
            r.updated_at.format("%Y-%m-%d %H:%M"),
            source_name(r),
            r.cwd.display()
        );
        let preview = r.preview.as_deref().map(|p| one_line(p, 100));
        let _ = writeln!(
            out,
            "    {}",
            preview.as_deref().unwrap_or("(no message yet)")
        );
    }
    out
}

/// The thread as text, or the user-facing reason it cannot be shown.
async fn show(store: &dyn ThreadStore, id: &str) -> anyhow::Result<Result<String, String>> {
    let Ok(thread_id) = ThreadId::from_str(id) else {
        return Ok(Err(format!("`{id}` is not a thread id")));
    };
    let Some(read) = store.read(thread_id).await? else {
        return Ok(Err(format!(
            "no thread {thread_id} in the {} thread store",
            store.describe()
        )));
    };
    let path = store
        .get(thread_id)
        .await?
        .and_then(|record| record.rollout_path);
    let shown_as = path
        .as_ref()
        .map_or_else(|| thread_id.to_string(), |path| path.display().to_string());
    for oversized in &read.oversized {
        eprintln!("note: {shown_as}: {oversized}");
    }
    if let Some(skipped) = read
        .skipped
        .as_ref()
        .filter(|skipped| skipped.lines.len() > read.oversized.len())
    {
        eprintln!("note: {}", neutralize_controls(&skipped.to_string()));
    }
    let items = read.items;
    let mut out = String::new();
    if let Some(RolloutItem::SessionMeta(meta)) = items.first() {
        let source = serde_json::to_value(meta.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(out, "Thread {}", meta.id);
        let _ = writeln!(
            out,
            "  started {} in {} ({source}, model {} from {})",
            meta.timestamp.format("%Y-%m-%d %H:%M:%S UTC"),
            meta.cwd.display(),
            meta.model.as_deref().unwrap_or("?"),
            meta.model_provider.as_deref().unwrap_or("?"),
        );
        if let Some(parent) = meta.forked_from_id {
            let _ = writeln!(out, "  forked from {parent}");
        }
        match &path {
            Some(path) => {
                let _ = writeln!(out, "  rollout {}", path.display());
            }
            None => {
                let _ = writeln!(out, "  stored in {}", store.describe());
            }
        }
    }
    let turns = store::turns_from_rollout(&items);
    if turns.is_empty() {
        let _ = writeln!(out, "\n(no turns yet)");
    }
    for (n, turn) in turns.iter().enumerate() {
        let outcome = match turn.outcome {
            TurnOutcome::InProgress => "in progress or cut short",
            TurnOutcome::Completed => "completed",
            TurnOutcome::Interrupted => "interrupted",
            TurnOutcome::Failed => "failed",
        };
        let _ = writeln!(out, "\n── Turn {} ({outcome}) ──", n + 1);
        for entry in &turn.entries {
            render_entry(&mut out, entry);
        }
        if let Some(error) = &turn.error {
            let _ = writeln!(out, "! turn failed: {error}");
        }
    }
    Ok(Ok(out))
}

fn indented(out: &mut String, prefix: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{prefix}{line}");
    }
}

fn render_entry(out: &mut String, entry: &TurnEntry) {
    let item = match entry {
        TurnEntry::Item(item) => item,
        TurnEntry::Error { message } => {
            let _ = writeln!(out, "! {message}");
            return;
        }
    };
    match item {
        TurnItem::UserMessage { text, .. } => {
            out.push('\n');
            indented(out, "> ", text);
        }
        TurnItem::AgentMessage { text, .. } => {
            out.push('\n');
            indented(out, "", text);
        }
        TurnItem::Reasoning { text, .. } => indented(out, "  (thinking) ", text),
        TurnItem::Plan { text, .. } => {
            out.push('\n');
            indented(out, "  (proposed plan) ", text);
        }
        TurnItem::EnteredReview { review, .. } => indented(out, "  (reviewing) ", review),
        TurnItem::ExitedReview { review, .. } => {
            out.push('\n');
            indented(out, "  (review) ", review);
        }
        TurnItem::Command(CommandItem {
            command,
            cwd,
            exit_code,
            output,
            duration_ms,
            status,
            ..
        }) => {
            let duration_ms = duration_ms.unwrap_or(0);
            let how = match (status, exit_code) {
                (ItemStatus::Declined, _) => "declined".to_string(),
                (_, Some(code)) => format!("exit {code}, {duration_ms} ms"),
                (_, None) => format!("no exit code, {duration_ms} ms"),
            };
            let _ = writeln!(
                out,
                "\n$ {}    [{how}; in {}]",
                interpreter_tools::display_command(command),
                cwd.display()
            );
            let lines: Vec<&str> = output.lines().collect();
            for line in lines.iter().take(OUTPUT_LINES_SHOWN) {
                let _ = writeln!(out, "  │ {line}");
            }
            if lines.len() > OUTPUT_LINES_SHOWN {
                let _ = writeln!(out, "  │ … {} more lines", lines.len() - OUTPUT_LINES_SHOWN);
            }
        }
        TurnItem::FileChange(FileChangeItem {
            changes, status, ..
        }) => {
            let _ = writeln!(
                out,
                "\n~ patch {}",
                match status {
                    ItemStatus::Completed => "applied",
                    ItemStatus::InProgress => "not finished",
                    ItemStatus::Failed => "failed",
                    ItemStatus::Declined => "declined",
                }
            );
            for (path, change) in changes {
                match change {
                    FileChange::Add { content } => {
                        let _ = writeln!(out, "  A {}", path.display());
                        indented(out, "    + ", content);
                    }
                    FileChange::Delete { .. } => {
                        let _ = writeln!(out, "  D {}", path.display());
                    }
                    FileChange::Update {
                        unified_diff,
                        move_path,
                    } => {
                        match move_path {
                            Some(to) => {
                                let _ = writeln!(out, "  M {} → {}", path.display(), to.display());
                            }
                            None => {
                                let _ = writeln!(out, "  M {}", path.display());
                            }
                        }
                        indented(out, "    ", unified_diff);
                    }
                }
            }
        }
        TurnItem::McpToolCall(call) => {
            let outcome = match &call.result {
                Some(Ok(result))
                    if result.get("isError").and_then(|e| e.as_bool()) == Some(true) =>
                {
                    "returned an error"
                }
                Some(Ok(_)) => "done",
                Some(Err(_)) => "failed",
                None => "not finished",
            };
            let _ = writeln!(
                out,
                "\n⚙ {}.{} {outcome} ({} ms)",
                call.invocation.server,
                call.invocation.tool,
                call.duration_ms.unwrap_or(0)
            );
            if let Some(Err(message)) = &call.result {
                indented(out, "  │ ", message);
            }
        }
        TurnItem::Compaction {
            items_before,
            items_after,
            ..
        } => {
            let _ = writeln!(
                out,
                "\n~ conversation compacted ({items_before} items of history → {items_after})"
            );
        }
    }
}
