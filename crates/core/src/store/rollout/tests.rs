use std::io::Write;
use std::path::Path;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use interpreter_protocol::{
    AgentMessageEvent, AskForApproval, DeltaEvent, EventMsg, ResponseItem, SandboxPolicy,
    SessionSource, TaskStartedEvent, ThreadId, UserMessageEvent,
};
use pretty_assertions::assert_eq;

use super::*;

fn meta(cwd: &Path) -> SessionMeta {
    SessionMeta {
        id: ThreadId::new(),
        // Rollouts keep millisecond precision.
        timestamp: DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap(),
        cwd: cwd.to_path_buf(),
        originator: "test".into(),
        cli_version: "0.0.0".into(),
        source: SessionSource::Exec,
        model_provider: Some("ollama".into()),
        model: Some("qwen".into()),
        base_instructions: None,
        forked_from_id: None,
    }
}

fn sample_items() -> Vec<RolloutItem> {
    vec![
        RolloutItem::TurnContext(TurnContextItem {
            turn_id: Some("1".into()),
            cwd: "/w".into(),
            approval_policy: AskForApproval::Never,
            sandbox_policy: SandboxPolicy::ReadOnly {
                network_access: false,
            },
            model: "qwen".into(),
            effort: None,
            collaboration_mode: None,
        }),
        RolloutItem::EventMsg(EventMsg::TaskStarted(TaskStartedEvent {
            turn_id: "1".into(),
            model_context_window: Some(8192),
        })),
        RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: "list the files".into(),
        })),
        RolloutItem::ResponseItem(ResponseItem::user_text("list the files")),
        RolloutItem::ResponseItem(ResponseItem::reasoning_text("think", None)),
        RolloutItem::ResponseItem(ResponseItem::FunctionCall {
            name: "shell".into(),
            arguments: "{\"command\":[\"ls\"]}".into(),
            call_id: "call_1".into(),
        }),
        RolloutItem::ResponseItem(ResponseItem::FunctionCallOutput {
            call_id: "call_1".into(),
            output: "a\nb".into(),
        }),
        RolloutItem::ResponseItem(ResponseItem::assistant_text("a and b")),
        RolloutItem::EventMsg(EventMsg::AgentMessage(AgentMessageEvent {
            item_id: String::new(),
            message: "a and b".into(),
        })),
    ]
}

#[tokio::test]
async fn write_then_read_back_in_order() {
    let home = tempfile::tempdir().unwrap();
    let meta = meta(home.path());
    let recorder = RolloutRecorder::create(home.path(), meta.clone())
        .await
        .unwrap()
        .0;

    // The file layout and the session_meta line exist before anything else is recorded.
    let path = recorder.path().to_path_buf();
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(name.starts_with("rollout-"), "{name}");
    assert!(name.ends_with(&format!("-{}.jsonl", meta.id)), "{name}");
    assert!(path.starts_with(home.path().join("sessions")));
    assert_eq!(
        read_rollout(&path).unwrap(),
        vec![RolloutItem::SessionMeta(meta.clone())]
    );

    let items = sample_items();
    recorder.record(&items[..3]).await.unwrap();
    recorder.record(&items[3..]).await.unwrap();

    let read = read_rollout(&path).unwrap();
    let mut expected = vec![RolloutItem::SessionMeta(meta.clone())];
    expected.extend(items.clone());
    assert_eq!(read, expected);
    assert_eq!(
        history_from_rollout(&read),
        items
            .iter()
            .filter_map(|i| match i {
                RolloutItem::ResponseItem(r) => Some(r.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    );

    // Line format: timestamp, type, payload.
    let text = std::fs::read_to_string(&path).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "session_meta");
    assert_eq!(first["payload"]["source"], "exec");
    let ts = first["timestamp"].as_str().unwrap();
    assert!(
        ts.ends_with('Z') && ts.len() == "2026-01-02T03:04:05.678Z".len(),
        "{ts}"
    );
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "event_msg");
    assert_eq!(last["payload"]["type"], "agent_message");

    // The index learned the thread and its preview.
    let index = ThreadIndex::open(home.path()).unwrap();
    let record = index.get(meta.id).unwrap().unwrap();
    assert_eq!(record.rollout_path, Some(path));
    assert_eq!(record.preview.as_deref(), Some("list the files"));
    assert_eq!(record.source, SessionSource::Exec);
    assert_eq!(record.model.as_deref(), Some("qwen"));
}

#[tokio::test]
async fn truncated_last_line_is_skipped_and_appending_starts_clean() {
    let home = tempfile::tempdir().unwrap();
    let meta = meta(home.path());
    let recorder = RolloutRecorder::create(home.path(), meta.clone())
        .await
        .unwrap()
        .0;
    let items = sample_items();
    recorder.record(&items).await.unwrap();
    let path = recorder.path().to_path_buf();
    drop(recorder);

    // A crash in the middle of a write: half a line, no newline.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    file.write_all(br#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"response_item","payl"#)
        .unwrap();
    drop(file);

    let read = read_rollout(&path).unwrap();
    assert_eq!(read.len(), 1 + items.len());
    let resumable = read_resumable(&path).unwrap();
    assert_eq!(resumable.items, read);
    let skipped = resumable.skipped.unwrap();
    assert!(skipped.includes_last);
    let line = items.len() + 2;
    assert_eq!(
        skipped.to_string(),
        format!(
            "{}: skipped truncated last line {line} ({})",
            path.display(),
            skipped.first_error
        )
    );

    let recorder = RolloutRecorder::open_existing(&path).await.unwrap();
    let extra = RolloutItem::ResponseItem(ResponseItem::user_text("again"));
    recorder.record(std::slice::from_ref(&extra)).await.unwrap();

    let read = read_rollout(&path).unwrap();
    assert_eq!(read.len(), 2 + items.len());
    assert_eq!(read.last(), Some(&extra));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let last_line = text.lines().last().unwrap();
    assert!(last_line.starts_with("{\"timestamp\""), "{last_line}");
}

#[test]
fn unreadable_middle_line_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let good = |text: &str| {
        format!(
            "{{\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"type\":\"response_item\",\"payload\":{}}}\n",
            serde_json::to_string(&ResponseItem::user_text(text)).unwrap()
        )
    };
    let content = format!("{}not json at all\n{}", good("one"), good("two"));
    std::fs::write(&path, content).unwrap();
    assert_eq!(
        history_from_rollout(&read_rollout(&path).unwrap()),
        vec![
            ResponseItem::user_text("one"),
            ResponseItem::user_text("two")
        ]
    );

    let content = format!(
        "{}not json at all\n{}{{\"also\": \"garbage\"}}\n",
        good("one"),
        good("two")
    );
    std::fs::write(&path, content).unwrap();
    let (items, skipped) = super::reader::parse_rollout(&path).unwrap();
    assert_eq!(items.len(), 2);
    let skipped = skipped.unwrap();
    assert_eq!(skipped.lines, vec![2, 4]);
    assert!(!skipped.includes_last);
    let message = skipped.to_string();
    assert!(
        message.starts_with(&format!(
            "{}: skipped 2 unreadable lines (2, 4; first: ",
            path.display()
        )),
        "{message}"
    );
}

#[test]
fn read_missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.jsonl");
    let err = read_rollout(&path).err().unwrap().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
}

#[test]
fn only_lasting_events_are_persisted() {
    assert!(should_persist_event(&EventMsg::UserMessage(
        UserMessageEvent {
            item_id: String::new(),
            message: "x".into()
        }
    )));
    assert!(!should_persist_event(&EventMsg::AgentMessageDelta(
        DeltaEvent {
            item_id: String::new(),
            delta: "x".into()
        }
    )));
    assert!(!should_persist_event(&EventMsg::ShutdownComplete));
}

/// A record whose rollout file exists (`latest` skips threads whose file is gone).
fn record_at(dir: &Path, id: ThreadId, cwd: &str, minutes: i64) -> ThreadRecord {
    let at = Utc::now() - ChronoDuration::hours(1) + ChronoDuration::minutes(minutes);
    let rollout_path = dir.join(format!("r-{id}.jsonl"));
    std::fs::write(&rollout_path, "{}\n").unwrap();
    ThreadRecord {
        id,
        rollout_path: Some(rollout_path),
        created_at: at,
        updated_at: at,
        cwd: cwd.into(),
        model_provider: Some("p".into()),
        model: None,
        source: SessionSource::Mcp,
        preview: None,
        name: None,
        git_info: None,
    }
}

#[test]
fn index_upsert_get_latest_list_touch() {
    let home = tempfile::tempdir().unwrap();
    let index = ThreadIndex::open(home.path()).unwrap();
    let ids: Vec<ThreadId> = (0..4).map(|_| ThreadId::new()).collect();
    index
        .upsert(&record_at(home.path(), ids[0], "/a", 0))
        .unwrap();
    index
        .upsert(&record_at(home.path(), ids[1], "/b", 1))
        .unwrap();
    index
        .upsert(&record_at(home.path(), ids[2], "/a", 2))
        .unwrap();
    index
        .upsert(&record_at(home.path(), ids[3], "/b", 3))
        .unwrap();

    let got = index.get(ids[1]).unwrap().unwrap();
    assert_eq!(got.cwd, Path::new("/b"));
    assert_eq!(got.source, SessionSource::Mcp);
    assert!(index.get(ThreadId::new()).unwrap().is_none());

    assert_eq!(index.latest(None).unwrap().unwrap().id, ids[3]);
    assert_eq!(
        index.latest(Some(Path::new("/a"))).unwrap().unwrap().id,
        ids[2]
    );
    assert!(index.latest(Some(Path::new("/c"))).unwrap().is_none());

    // Touching moves a thread to the front and sets its preview once.
    index
        .touch(ids[0], Utc::now(), Some("first question"))
        .unwrap();
    index.touch(ids[0], Utc::now(), Some("second")).unwrap();
    let latest = index.latest(None).unwrap().unwrap();
    assert_eq!(latest.id, ids[0]);
    assert_eq!(latest.preview.as_deref(), Some("first question"));

    let page1 = index.list(3, None).unwrap();
    let page1_ids: Vec<ThreadId> = page1.iter().map(|r| r.id).collect();
    assert_eq!(page1_ids, vec![ids[0], ids[3], ids[2]]);
    let page2 = index
        .list(3, Some(&page1.last().unwrap().cursor()))
        .unwrap();
    assert_eq!(page2.iter().map(|r| r.id).collect::<Vec<_>>(), vec![ids[1]]);
}

#[test]
fn long_previews_are_truncated() {
    let home = tempfile::tempdir().unwrap();
    let index = ThreadIndex::open(home.path()).unwrap();
    let id = ThreadId::new();
    index.upsert(&record_at(home.path(), id, "/a", 0)).unwrap();
    index
        .touch(id, Utc::now(), Some(&"é".repeat(PREVIEW_MAX_CHARS * 2)))
        .unwrap();
    let preview = index.get(id).unwrap().unwrap().preview.unwrap();
    assert_eq!(preview.chars().count(), PREVIEW_MAX_CHARS + 1);
}

#[tokio::test]
async fn find_rollout_survives_a_deleted_index() {
    let home = tempfile::tempdir().unwrap();
    let meta = meta(home.path());
    let recorder = RolloutRecorder::create(home.path(), meta.clone())
        .await
        .unwrap()
        .0;
    recorder.record(&sample_items()).await.unwrap();
    let path = recorder.path().to_path_buf();
    drop(recorder);

    assert_eq!(
        find_rollout(home.path(), meta.id).unwrap(),
        Some(path.clone())
    );

    for suffix in ["", "-wal", "-shm"] {
        let db = home.path().join(format!("{STATE_DB_FILE}{suffix}"));
        if db.exists() {
            std::fs::remove_file(db).unwrap();
        }
    }
    assert_eq!(
        find_rollout(home.path(), meta.id).unwrap(),
        Some(path.clone())
    );
    // The index was repaired from the rollout.
    let record = ThreadIndex::open(home.path())
        .unwrap()
        .get(meta.id)
        .unwrap()
        .unwrap();
    assert_eq!(record.rollout_path, Some(path));
    assert_eq!(record.preview.as_deref(), Some("list the files"));

    assert_eq!(find_rollout(home.path(), ThreadId::new()).unwrap(), None);
}

#[tokio::test]
async fn find_rollout_survives_a_corrupt_index() {
    let home = tempfile::tempdir().unwrap();
    let meta = meta(home.path());
    let recorder = RolloutRecorder::create(home.path(), meta.clone())
        .await
        .unwrap()
        .0;
    let path = recorder.path().to_path_buf();
    drop(recorder);
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(home.path().join(format!("{STATE_DB_FILE}{suffix}")));
    }
    std::fs::write(home.path().join(STATE_DB_FILE), b"this is not a database").unwrap();
    assert_eq!(find_rollout(home.path(), meta.id).unwrap(), Some(path));
}

/// Writes a thread with one user message through the recorder; returns its id and file.
async fn recorded_thread(home: &Path, message: &str) -> (ThreadId, std::path::PathBuf) {
    let meta = meta(home);
    let recorder = RolloutRecorder::create(home, meta.clone()).await.unwrap().0;
    recorder
        .record(&[RolloutItem::EventMsg(EventMsg::UserMessage(
            UserMessageEvent {
                item_id: String::new(),
                message: message.into(),
            },
        ))])
        .await
        .unwrap();
    (meta.id, recorder.path().to_path_buf())
}

fn remove_index(home: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(home.join(format!("{STATE_DB_FILE}{suffix}")));
    }
}

fn indexed_ids(home: &Path) -> Vec<ThreadId> {
    let mut ids: Vec<ThreadId> = ThreadIndex::open(home)
        .unwrap()
        .list(usize::MAX, None)
        .unwrap()
        .into_iter()
        .map(|record| record.id)
        .collect();
    ids.sort_by_key(ToString::to_string);
    ids
}

fn sorted(mut ids: Vec<ThreadId>) -> Vec<ThreadId> {
    ids.sort_by_key(ToString::to_string);
    ids
}

#[tokio::test]
async fn deleted_index_is_rebuilt_on_open_and_says_so() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    let (b, _) = recorded_thread(home.path(), "second").await;
    remove_index(home.path());

    let (index, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    assert_eq!(
        repairs,
        vec![IndexRepair::Rebuilt {
            db: home.path().join(STATE_DB_FILE),
            cause: RebuildCause::Missing,
            indexed: 2,
            skipped: vec![],
        }]
    );
    assert!(
        repairs[0]
            .to_string()
            .contains("was missing; rebuilt it from 2 rollouts")
    );
    assert_eq!(
        index.get(a).unwrap().unwrap().preview.as_deref(),
        Some("first")
    );
    drop(index);
    assert_eq!(indexed_ids(home.path()), sorted(vec![a, b]));
    // Healthy now: opening again repairs nothing.
    assert!(
        ThreadIndex::open_with_repairs(home.path())
            .unwrap()
            .1
            .is_empty()
    );
}

#[test]
fn first_open_without_rollouts_reports_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (_, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    assert!(repairs.is_empty(), "{repairs:?}");
}

#[tokio::test]
async fn a_new_thread_reports_what_healing_the_index_repaired() {
    let home = tempfile::tempdir().unwrap();
    // A fresh home's first thread is no repair.
    let (_, repairs) = RolloutRecorder::create(home.path(), meta(home.path()))
        .await
        .unwrap();
    assert!(repairs.is_empty(), "{repairs:?}");

    remove_index(home.path());
    std::fs::write(home.path().join(STATE_DB_FILE), b"not SQLite at all").unwrap();
    let (_, repairs) = RolloutRecorder::create(home.path(), meta(home.path()))
        .await
        .unwrap();
    assert!(
        matches!(
            repairs.as_slice(),
            [IndexRepair::Rebuilt {
                cause: RebuildCause::Unreadable { .. },
                indexed: 1,
                ..
            }]
        ),
        "{repairs:?}"
    );
}

#[tokio::test]
async fn garbage_index_is_moved_aside_and_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    remove_index(home.path());
    let garbage = b"this is not a database, just some bytes that look nothing like one";
    std::fs::write(home.path().join(STATE_DB_FILE), garbage).unwrap();

    let (index, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    let [
        IndexRepair::Rebuilt {
            cause: RebuildCause::Unreadable { moved_to, .. },
            indexed: 1,
            ..
        },
    ] = repairs.as_slice()
    else {
        panic!("unexpected repairs {repairs:?}");
    };
    // The bad file is kept, byte for byte, next to the new index.
    assert_eq!(std::fs::read(moved_to).unwrap(), garbage);
    let name = moved_to.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("state.sqlite.corrupt-"), "{name}");
    assert!(index.get(a).unwrap().is_some());
    assert!(repairs[0].to_string().contains("unreadable"));
}

#[tokio::test]
async fn index_with_a_foreign_schema_is_moved_aside_and_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    remove_index(home.path());
    {
        let conn = rusqlite::Connection::open(home.path().join(STATE_DB_FILE)).unwrap();
        conn.execute_batch("CREATE TABLE threads (name TEXT); INSERT INTO threads VALUES ('x');")
            .unwrap();
    }
    let (index, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    assert!(
        matches!(
            repairs.as_slice(),
            [IndexRepair::Rebuilt {
                cause: RebuildCause::Unreadable { reason, .. },
                indexed: 1,
                ..
            }] if reason.contains("wrong schema")
        ),
        "{repairs:?}"
    );
    assert!(index.get(a).unwrap().is_some());
}

#[tokio::test]
async fn zero_byte_index_is_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    remove_index(home.path());
    std::fs::write(home.path().join(STATE_DB_FILE), b"").unwrap();
    let (index, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    assert!(
        matches!(
            repairs.as_slice(),
            [IndexRepair::Rebuilt {
                cause: RebuildCause::Empty,
                indexed: 1,
                ..
            }]
        ),
        "{repairs:?}"
    );
    assert!(index.get(a).unwrap().is_some());
}

#[tokio::test]
async fn stale_index_catches_up_for_latest() {
    let home = tempfile::tempdir().unwrap();
    let (older, _) = recorded_thread(home.path(), "older").await;
    let (newer, _) = recorded_thread(home.path(), "newer").await;
    // The index lost the newest thread (written while it was unusable, say).
    {
        let conn = rusqlite::Connection::open(home.path().join(STATE_DB_FILE)).unwrap();
        conn.execute("DELETE FROM threads WHERE id = ?1", [newer.to_string()])
            .unwrap();
    }
    let (latest, repairs) = find_latest(home.path(), None).unwrap();
    assert_eq!(latest.map(|record| record.id), Some(newer));
    assert_eq!(
        repairs,
        vec![IndexRepair::CaughtUp {
            indexed: 1,
            skipped: vec![]
        }]
    );
    assert_eq!(indexed_ids(home.path()), sorted(vec![older, newer]));
    // Caught up: nothing more to do.
    assert!(find_latest(home.path(), None).unwrap().1.is_empty());
}

#[tokio::test]
async fn latest_skips_threads_whose_rollout_is_gone() {
    let home = tempfile::tempdir().unwrap();
    let (older, _) = recorded_thread(home.path(), "older").await;
    let (_, newer_path) = recorded_thread(home.path(), "newer").await;
    std::fs::remove_file(&newer_path).unwrap();
    let (latest, _) = find_latest(home.path(), None).unwrap();
    assert_eq!(latest.map(|record| record.id), Some(older));
    assert_eq!(
        find_latest(home.path(), Some(home.path()))
            .unwrap()
            .0
            .map(|r| r.id),
        Some(older)
    );
}

#[tokio::test]
async fn zero_byte_rollout_is_an_error_naming_the_file() {
    let home = tempfile::tempdir().unwrap();
    let (id, path) = recorded_thread(home.path(), "first").await;
    std::fs::write(&path, b"").unwrap();
    let err = read_resumable(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("0 bytes"), "{err}");
    // Still found (so resuming reports the file), and reported when indexing.
    assert_eq!(find_rollout(home.path(), id).unwrap(), Some(path.clone()));
    remove_index(home.path());
    let (_, repairs) = ThreadIndex::open_with_repairs(home.path()).unwrap();
    assert!(
        matches!(repairs.as_slice(), [IndexRepair::Rebuilt { indexed: 0, skipped, .. }] if skipped == &vec![path.clone()]),
        "{repairs:?}"
    );

    std::fs::write(&path, b"garbage\n").unwrap();
    let err = read_resumable(&path).unwrap_err().to_string();
    assert!(err.contains("session_meta"), "{err}");
}

#[tokio::test]
async fn compare_with_disk_reports_each_mismatch() {
    let home = tempfile::tempdir().unwrap();
    let (_, gone) = recorded_thread(home.path(), "gone").await;
    let (unindexed, unindexed_path) = recorded_thread(home.path(), "unindexed").await;
    let (_, empty) = recorded_thread(home.path(), "empty").await;
    recorded_thread(home.path(), "fine").await;
    std::fs::remove_file(&gone).unwrap();
    std::fs::write(&empty, b"").unwrap();
    {
        let conn = rusqlite::Connection::open(home.path().join(STATE_DB_FILE)).unwrap();
        conn.execute("DELETE FROM threads WHERE id = ?1", [unindexed.to_string()])
            .unwrap();
    }
    let index = ThreadIndex::open_without_repair(home.path()).unwrap();
    let health = index.compare_with_disk(home.path()).unwrap();
    assert_eq!(
        health,
        IndexHealth {
            indexed: 3,
            on_disk: 3,
            not_indexed: vec![unindexed_path],
            missing_files: vec![gone],
            unreadable: vec![empty],
        }
    );
    assert!(!health.is_consistent());
}

#[test]
fn open_without_repair_leaves_a_garbage_index_alone() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join(STATE_DB_FILE);
    std::fs::write(&db, b"not a database at all, not even close to one").unwrap();
    assert!(ThreadIndex::open_without_repair(home.path()).is_err());
    assert_eq!(
        std::fs::read(&db).unwrap(),
        b"not a database at all, not even close to one"
    );
}

#[tokio::test]
async fn unusable_index_falls_back_to_the_rollouts() {
    let home = tempfile::tempdir().unwrap();
    let (older, _) = recorded_thread(home.path(), "older").await;
    let (newer, newer_path) = recorded_thread(home.path(), "newer").await;
    // Make the newer one unambiguously newer by modification time.
    std::fs::File::options()
        .write(true)
        .open(&newer_path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    // A directory where the database should be: it cannot be opened, and it is not a
    // bad file that could be moved aside.
    remove_index(home.path());
    std::fs::create_dir(home.path().join(STATE_DB_FILE)).unwrap();
    assert!(ThreadIndex::open(home.path()).is_err());

    assert!(find_rollout(home.path(), older).unwrap().is_some());
    let (latest, repairs) = find_latest(home.path(), None).unwrap();
    assert_eq!(latest.map(|record| record.id), Some(newer));
    assert!(repairs.is_empty());
    assert!(home.path().join(STATE_DB_FILE).is_dir(), "left alone");
}

#[test]
fn repair_messages_are_one_line_and_name_the_files() {
    let skipped = vec![std::path::PathBuf::from(
        "/h/sessions/2026/01/01/rollout-x.jsonl",
    )];
    let only_unreadable = IndexRepair::CaughtUp {
        indexed: 0,
        skipped: skipped.clone(),
    }
    .to_string();
    assert!(
        only_unreadable.contains("1 unreadable rollout in sessions/ cannot be indexed")
            && only_unreadable.contains("rollout-x.jsonl"),
        "{only_unreadable}"
    );
    let caught_up = IndexRepair::CaughtUp {
        indexed: 2,
        skipped,
    }
    .to_string();
    assert!(
        caught_up.contains("indexed 2 rollouts it did not know; skipped 1 unreadable rollout"),
        "{caught_up}"
    );
    assert!(!caught_up.contains('\n') && !only_unreadable.contains('\n'));
}

#[tokio::test]
async fn archive_flags_survive_a_rebuilt_index_and_old_indexes_gain_the_column() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    let (b, _) = recorded_thread(home.path(), "second").await;
    let index = ThreadIndex::open(home.path()).unwrap();
    assert!(index.set_archived(a, true).unwrap());
    assert!(index.set_archived(b, true).unwrap());
    assert!(index.set_archived(b, false).unwrap());
    assert!(!index.set_archived(ThreadId::new(), true).unwrap());
    drop(index);
    remove_index(home.path());
    let index = ThreadIndex::open(home.path()).unwrap();
    assert_eq!(index.is_archived(a).unwrap(), Some(true));
    assert_eq!(index.is_archived(b).unwrap(), Some(false));
    let listed = |archived: bool| {
        index
            .list_page(&ListQuery {
                limit: 10,
                archived,
                ..ListQuery::default()
            })
            .unwrap()
            .records
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(true), vec![a]);
    assert_eq!(listed(false), vec![b]);
    drop(index);

    // An index written before the column existed gains it in place, nothing archived.
    remove_index(home.path());
    std::fs::remove_file(home.path().join(ARCHIVE_LOG_FILE)).unwrap();
    {
        let conn = rusqlite::Connection::open(home.path().join(STATE_DB_FILE)).unwrap();
        conn.execute_batch(
            "CREATE TABLE threads (id TEXT PRIMARY KEY NOT NULL, rollout_path TEXT NOT NULL,
                 created_at TEXT NOT NULL, updated_at TEXT NOT NULL, cwd TEXT NOT NULL,
                 model_provider TEXT, model TEXT, source TEXT NOT NULL, preview TEXT);",
        )
        .unwrap();
    }
    let index = ThreadIndex::open(home.path()).unwrap();
    index.catch_up(home.path()).unwrap();
    assert_eq!(index.is_archived(a).unwrap(), Some(false));
}

#[test]
fn over_long_line_is_skipped_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let good = |text: &str| {
        format!(
            "{{\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"type\":\"response_item\",\"payload\":{}}}\n",
            serde_json::to_string(&ResponseItem::user_text(text)).unwrap()
        )
    };
    let long = "x".repeat(super::MAX_LINE_BYTES + 1024 * 1024);
    // Exactly at the limit is still read (and here fails to parse, as garbage).
    let at_limit = "y".repeat(super::MAX_LINE_BYTES);
    let content = format!("{}{long}\n{at_limit}\n{}{long}", good("one"), good("two"));
    std::fs::write(&path, content).unwrap();

    let read = super::read_rollout_with_notes(&path).unwrap();
    assert_eq!(
        history_from_rollout(&read.items),
        vec![
            ResponseItem::user_text("one"),
            ResponseItem::user_text("two")
        ]
    );
    assert_eq!(
        read.oversized,
        vec![
            super::OversizedLine {
                line: 2,
                bytes: long.len() as u64
            },
            super::OversizedLine {
                line: 5,
                bytes: long.len() as u64
            }
        ]
    );
    assert_eq!(
        read.oversized[0].to_string(),
        "line 2 skipped: 9 MiB, over the 8 MiB limit"
    );
    let skipped = read.skipped.unwrap();
    assert_eq!(skipped.lines, vec![2, 3, 5]);
    assert!(skipped.includes_last);
    assert_eq!(read_rollout(&path).unwrap(), read.items);
}

#[test]
fn byte_sizes_read_naturally() {
    assert_eq!(super::human_bytes(12), "12 bytes");
    assert_eq!(super::human_bytes(1536), "1.5 KiB");
    assert_eq!(super::human_bytes(50 * 1024 * 1024), "50 MiB");
}

#[tokio::test]
async fn thread_names_survive_a_rebuilt_index_and_the_last_one_wins() {
    let home = tempfile::tempdir().unwrap();
    let (a, _) = recorded_thread(home.path(), "first").await;
    let (b, _) = recorded_thread(home.path(), "second").await;
    let index = ThreadIndex::open(home.path()).unwrap();
    assert!(index.set_name(a, Some("old name")).unwrap());
    assert!(index.set_name(a, Some("  new name ")).unwrap());
    assert!(index.set_name(b, Some("b")).unwrap());
    assert!(index.set_name(b, None).unwrap());
    assert!(!index.set_name(ThreadId::new(), Some("nobody")).unwrap());
    assert_eq!(
        index.get(a).unwrap().unwrap().name.as_deref(),
        Some("new name")
    );
    drop(index);
    remove_index(home.path());
    let index = ThreadIndex::open(home.path()).unwrap();
    assert_eq!(
        index.get(a).unwrap().unwrap().name.as_deref(),
        Some("new name")
    );
    assert_eq!(index.get(b).unwrap().unwrap().name, None);
}
