//! One contract for every thread store: each test runs against `LocalStore` (a scratch
//! home) and `PgStore` (the PostgreSQL server `scripts/test` starts and names in
//! `INTERPRETER_TEST_PG_URL`). Without that variable the PostgreSQL half is skipped,
//! unless `INTERPRETER_REQUIRE_PG=1` (set by `scripts/test`), where it is a failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DurationRound, TimeDelta, Utc};
use interpreter_core::store::{
    Imported, ListQuery, LocalStore, MAX_LINE_BYTES, PgStore, Replica, RolloutItem, SessionMeta,
    StoreError, ThreadGitInfo, ThreadStore,
};
use interpreter_protocol::{EventMsg, SessionSource, ThreadId, UserMessageEvent};
use interpreter_test_support::postgres;
use tempfile::TempDir;

async fn pg_store(url: &str, replica: &str) -> PgStore {
    PgStore::connect(
        url,
        None,
        "postgres (test)".into(),
        Replica {
            id: format!("{replica}-{}", ThreadId::new()),
            internal_url: Some(format!("http://{replica}.internal:8080")),
        },
    )
    .await
    .expect("connect to the test PostgreSQL")
}

/// Every store under test. The scratch home lives as long as the returned guard.
async fn stores() -> (TempDir, Vec<Arc<dyn ThreadStore>>) {
    let home = TempDir::new().unwrap();
    let mut stores: Vec<Arc<dyn ThreadStore>> =
        vec![Arc::new(LocalStore::new(home.path().to_path_buf()))];
    if let Some(url) = postgres::test_url() {
        stores.push(Arc::new(pg_store(&url, "contract").await));
    }
    (home, stores)
}

fn meta(cwd: &Path) -> SessionMeta {
    SessionMeta {
        id: ThreadId::new(),
        // Records keep milliseconds.
        timestamp: Utc::now()
            .duration_trunc(TimeDelta::milliseconds(1))
            .unwrap(),
        cwd: cwd.to_path_buf(),
        originator: "store-contract".into(),
        cli_version: "0.0.0".into(),
        source: SessionSource::Exec,
        model_provider: Some("mock".into()),
        model: Some("mock-model".into()),
        base_instructions: None,
        forked_from_id: None,
    }
}

fn user(text: &str) -> RolloutItem {
    RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
        item_id: String::new(),
        message: text.into(),
    }))
}

/// A cwd no other test uses, so listings filtered by it see only this test's threads
/// in a database other tests share.
fn unique_cwd() -> PathBuf {
    PathBuf::from(format!("/work/contract-{}", ThreadId::new()))
}

#[tokio::test]
async fn a_thread_reads_back_as_written_and_lists_with_its_preview() {
    let (_home, stores) = stores().await;
    for store in stores {
        let cwd = unique_cwd();
        let meta = meta(&cwd);
        let id = meta.id;
        let created = store.create(meta.clone()).await.unwrap();
        created
            .writer
            .append(&[user("fix the build")])
            .await
            .unwrap();
        created
            .writer
            .append(&[user("and the tests")])
            .await
            .unwrap();

        let read = store.read(id).await.unwrap().expect("recorded");
        assert_eq!(read.items.len(), 3, "{}", store.describe());
        assert_eq!(read.items[0], RolloutItem::SessionMeta(meta.clone()));
        assert_eq!(read.items[2], user("and the tests"));
        assert!(read.skipped.is_none());

        let record = store.get(id).await.unwrap().expect("indexed");
        assert_eq!(record.preview.as_deref(), Some("fix the build"));
        assert_eq!(record.cwd, cwd);
        let page = store
            .list(ListQuery {
                limit: 10,
                cwds: vec![cwd.clone()],
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(
            page.records.iter().map(|r| r.id).collect::<Vec<_>>(),
            [id],
            "{}",
            store.describe()
        );
        let (latest, _) = store.latest(Some(cwd)).await.unwrap();
        assert_eq!(latest.map(|r| r.id), Some(id));
        assert!(store.status().await.unwrap().threads >= 1);
    }
}

/// A record over the line cap (here a 9 MiB message) is left out with its size, on
/// every store, and the records around it still read back; PostgreSQL does not even send
/// it (`PgStore::read_lines`).
#[tokio::test]
async fn a_record_over_the_line_cap_is_skipped_with_its_size() {
    let (_home, stores) = stores().await;
    let huge = "x".repeat(MAX_LINE_BYTES + 1024 * 1024);
    for store in stores {
        let meta = meta(&unique_cwd());
        let created = store.create(meta.clone()).await.unwrap();
        for item in [user("before"), user(&huge), user("after")] {
            created.writer.append(&[item]).await.unwrap();
        }

        let read = store.read(meta.id).await.unwrap().expect("recorded");
        let name = store.describe();
        assert_eq!(
            read.items,
            [
                RolloutItem::SessionMeta(meta),
                user("before"),
                user("after")
            ],
            "{name}"
        );
        assert_eq!(read.oversized.len(), 1, "{name}");
        assert_eq!(read.oversized[0].line, 3, "{name}");
        assert!(read.oversized[0].bytes > huge.len() as u64, "{name}");
        assert_eq!(read.skipped.map(|s| s.lines), Some(vec![3]), "{name}");
    }
}

#[tokio::test]
async fn keyset_pages_list_every_thread_once_newest_first() {
    let (_home, stores) = stores().await;
    for store in stores {
        let cwd = unique_cwd();
        let mut ids = Vec::new();
        for n in 0..5 {
            let meta = meta(&cwd);
            ids.push(meta.id);
            let created = store.create(meta).await.unwrap();
            created
                .writer
                .append(&[user(&format!("task {n}"))])
                .await
                .unwrap();
            // Distinct update times (they are kept to the millisecond).
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = store
                .list(ListQuery {
                    limit: 2,
                    cursor,
                    cwds: vec![cwd.clone()],
                    ..ListQuery::default()
                })
                .await
                .unwrap();
            seen.extend(page.records.iter().map(|r| r.id));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        ids.reverse();
        assert_eq!(seen, ids, "{}", store.describe());

        let found = store
            .list(ListQuery {
                limit: 10,
                cwds: vec![cwd.clone()],
                search_term: Some("task 3".into()),
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(found.records.len(), 1, "{}", store.describe());
        let bad = store
            .list(ListQuery {
                limit: 10,
                cursor: Some("not-a-cursor".into()),
                ..ListQuery::default()
            })
            .await;
        assert!(matches!(bad, Err(StoreError::InvalidCursor(_))), "{bad:?}");
    }
}

#[tokio::test]
async fn archive_name_git_info_and_delete_change_only_their_thread() {
    let (_home, stores) = stores().await;
    for store in stores {
        let cwd = unique_cwd();
        let kept = meta(&cwd);
        let gone = meta(&cwd);
        for meta in [&kept, &gone] {
            let created = store.create(meta.clone()).await.unwrap();
            created.writer.append(&[user("hello")]).await.unwrap();
        }
        assert!(store.set_archived(kept.id, true).await.unwrap());
        assert_eq!(store.is_archived(kept.id).await.unwrap(), Some(true));
        assert_eq!(store.is_archived(gone.id).await.unwrap(), Some(false));
        let archived = store
            .list(ListQuery {
                limit: 10,
                archived: true,
                cwds: vec![cwd.clone()],
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(archived.records.len(), 1);
        assert!(
            store
                .set_name(kept.id, Some("release".into()))
                .await
                .unwrap()
        );
        let info = ThreadGitInfo {
            branch: Some("main".into()),
            sha: None,
            origin_url: None,
        };
        assert!(
            store
                .set_git_info(kept.id, Some(info.clone()))
                .await
                .unwrap()
        );
        let record = store.get(kept.id).await.unwrap().unwrap();
        assert_eq!(record.name.as_deref(), Some("release"));
        assert_eq!(record.git_info, Some(info));

        assert!(store.delete(gone.id).await.unwrap());
        assert!(store.read(gone.id).await.unwrap().is_none());
        assert!(store.get(gone.id).await.unwrap().is_none());
        assert!(!store.delete(gone.id).await.unwrap());
        let missing = ThreadId::new();
        assert!(!store.set_archived(missing, true).await.unwrap());
        assert!(store.is_archived(missing).await.unwrap().is_none());
        assert!(matches!(
            store.open(missing).await,
            Err(StoreError::NotFound(id)) if id == missing
        ));
    }
}

#[tokio::test]
async fn import_writes_a_whole_thread_once() {
    let (_home, stores) = stores().await;
    for store in stores {
        let meta = meta(&unique_cwd());
        let items = vec![user("imported"), user("twice?")];
        assert_eq!(
            store
                .import(meta.clone(), items.clone(), None)
                .await
                .unwrap(),
            Imported::Created
        );
        assert_eq!(
            store.import(meta.clone(), items, None).await.unwrap(),
            Imported::AlreadyPresent
        );
        let read = store.read(meta.id).await.unwrap().unwrap();
        assert_eq!(read.items.len(), 3, "{}", store.describe());
        let record = store.get(meta.id).await.unwrap().unwrap();
        assert_eq!(record.preview.as_deref(), Some("imported"));
        let exported = store.export(meta.id).await.unwrap().unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&exported).unwrap().lines().collect();
        assert_eq!(lines.len(), 3, "{}", store.describe());
        assert!(lines[0].contains(&meta.id.to_string()));
        // An imported thread is continued like any other.
        let opened = store.open(meta.id).await.unwrap();
        opened.writer.append(&[user("continued")]).await.unwrap();
        assert_eq!(store.read(meta.id).await.unwrap().unwrap().items.len(), 4);
    }
}

/// The fencing contract: a replica holding a thread keeps it from others until it lets
/// go, and once another replica took it the first cannot write one more record.
#[tokio::test]
async fn a_replica_that_lost_its_thread_cannot_append() {
    let Some(url) = postgres::test_url() else {
        return;
    };
    let first = pg_store(&url, "replica-1").await;
    let second = pg_store(&url, "replica-2").await;
    let meta = meta(&unique_cwd());
    let id = meta.id;
    let created = first.create(meta).await.unwrap();
    created
        .writer
        .append(&[user("started on 1")])
        .await
        .unwrap();

    // Running on replica 1: replica 2 is told where it runs.
    match second.open(id).await {
        Err(StoreError::OwnedElsewhere {
            thread_id,
            owner,
            internal_url,
        }) => {
            assert_eq!(thread_id, id);
            assert_eq!(owner, first.replica().id);
            assert_eq!(
                internal_url.as_deref(),
                Some("http://replica-1.internal:8080")
            );
        }
        other => panic!("expected OwnedElsewhere, got {other:?}"),
    }

    // Idle on 1 (released): replica 2 continues it.
    created.writer.release().await.unwrap();
    let opened = second.open(id).await.unwrap();
    assert_eq!(opened.items.len(), 2);
    opened
        .writer
        .append(&[user("continued on 2")])
        .await
        .unwrap();

    // Replica 1 wakes up with its old handle: fenced, for appends and new turns alike.
    let late = created.writer.append(&[user("stale write from 1")]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
    let again = created.writer.reacquire().await;
    assert!(
        matches!(
            again,
            Err(StoreError::Fenced { .. }) | Err(StoreError::OwnedElsewhere { .. })
        ),
        "{again:?}"
    );
    let items = second.read(id).await.unwrap().unwrap().items;
    assert_eq!(items.len(), 3);
    assert!(!items.contains(&user("stale write from 1")));

    // Released by 2 and untouched since: 2 takes it back for its next turn in place.
    opened.writer.release().await.unwrap();
    opened.writer.reacquire().await.unwrap();
    opened
        .writer
        .append(&[user("next turn on 2")])
        .await
        .unwrap();
}

/// A replica that died holding a thread: once its lease expires, another replica takes
/// the thread over and says so.
#[tokio::test]
async fn an_expired_lease_is_taken_over() {
    let Some(url) = postgres::test_url() else {
        return;
    };
    let first = pg_store(&url, "replica-dead").await;
    let second = pg_store(&url, "replica-alive").await;
    let meta = meta(&unique_cwd());
    let id = meta.id;
    let created = first.create(meta).await.unwrap();
    created.writer.append(&[user("interrupted")]).await.unwrap();

    // What a dead replica leaves behind: an owner whose lease ran out (the heartbeat
    // of a live one would have renewed it).
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .execute(
            "UPDATE interpreter_threads SET owner = 'a-dead-replica', \
             lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[&id.to_string()],
        )
        .await
        .unwrap();

    let opened = second.open(id).await.unwrap();
    assert!(
        opened.notices.iter().any(|n| n.contains("a-dead-replica")),
        "{:?}",
        opened.notices
    );
    opened
        .writer
        .append(&[user("after takeover")])
        .await
        .unwrap();
    let late = created.writer.append(&[user("from the dead")]).await;
    assert!(matches!(late, Err(StoreError::Fenced { .. })), "{late:?}");
}
