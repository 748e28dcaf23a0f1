//! `PgStore`: threads in PostgreSQL, shared by every replica of a fleet.
//!
//! Three tables (created and migrated at start-up, under an advisory lock so replicas
//! starting together do not race):
//!
//! - `interpreter_threads`: the index (what `LocalStore` keeps in SQLite) plus who runs
//!   the thread: `owner` (a replica id), `lease_epoch` and `lease_expires_at`;
//! - `interpreter_items`: one row per record, `line` holding exactly the JSON line a
//!   rollout file would (so `threads export` writes a rollout back byte for byte);
//! - `interpreter_replicas`: the live processes, with a heartbeat and the address other
//!   replicas may reach them at.
//!
//! Ownership is a lease with a fencing token. A replica takes a thread by bumping its
//! `lease_epoch`; every append locks the thread row and checks that the epoch is still
//! the one it took, so a replica that was paused (or cut off) while another took over
//! cannot write one more record after it wakes. Leases are renewed by a heartbeat every
//! [`HEARTBEAT`] and expire after [`LEASE_TTL`]; an idle thread's lease is released at
//! once, so the next turn may run on any replica. All lease times are the database's
//! clock (`now()`), never a replica's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use deadpool_postgres::Transaction;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use interpreter_protocol::ThreadId;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use tokio_util::sync::CancellationToken;

use super::{
    CreatedThread, FleetStatus, Imported, ListDirection, ListPage, ListQuery, ListSortKey,
    OpenedThread, RemoteOwner, RolloutItem, RolloutRead, SessionMeta, StoreError, StoreStatus,
    ThreadGitInfo, ThreadRecord, ThreadStore, ThreadWriter,
};
use crate::store::rollout::{self, RolloutLine, StoredLine};

/// How long a lease lasts without a heartbeat: a dead replica's threads are taken over
/// this long after its last heartbeat.
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often a replica renews its leases (a third of the TTL: two missed beats are
/// survivable).
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// The deadline of every database call, connection included.
const DEADLINE: Duration = Duration::from_secs(30);
/// Connections per replica: enough for the turns and listings of one process.
const POOL_SIZE: usize = 16;
/// Key of the advisory lock migrations run under (any constant; "interp" in ASCII).
const MIGRATION_LOCK: i64 = 0x696e_7465_7270;

/// The schema, one entry per version; each runs once, in order, in one transaction.
const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE interpreter_replicas (
    id TEXT PRIMARY KEY,
    internal_url TEXT,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE interpreter_threads (
    id TEXT PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    cwd TEXT NOT NULL,
    model_provider TEXT,
    model TEXT,
    source TEXT NOT NULL,
    preview TEXT,
    name TEXT,
    git_info TEXT,
    archived BOOLEAN NOT NULL DEFAULT FALSE,
    owner TEXT,
    lease_epoch BIGINT NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ,
    item_count BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX interpreter_threads_by_updated
    ON interpreter_threads (archived, updated_at DESC, id DESC);
CREATE INDEX interpreter_threads_by_created
    ON interpreter_threads (archived, created_at DESC, id DESC);
CREATE INDEX interpreter_threads_by_owner
    ON interpreter_threads (owner) WHERE owner IS NOT NULL;
CREATE TABLE interpreter_items (
    thread_id TEXT NOT NULL REFERENCES interpreter_threads (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
"#];

const SELECT_COLUMNS: &str = "id, created_at, updated_at, cwd, model_provider, model, source, \
                              preview, name, git_info";

/// This process, as the fleet sees it.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Unique per process: `<host>-<pid>-<random>`.
    pub id: String,
    /// Where other replicas reach this one (`mcp-server --internal-url`), if it said.
    pub internal_url: Option<String>,
}

impl Replica {
    pub fn this_process(internal_url: Option<String>) -> Self {
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        // The random tail of a v7 id (its head is the time).
        let random = uuid::Uuid::now_v7().simple().to_string();
        Self {
            id: format!("{host}-{}-{}", std::process::id(), &random[24..]),
            internal_url,
        }
    }
}

#[derive(Debug)]
struct Shared {
    pool: Pool,
    /// `postgres (host:port/db)`, for messages.
    label: String,
    replica: Replica,
}

impl Shared {
    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Database {
            store: self.label.clone(),
            message: message.to_string(),
        }
    }

    fn db(&self, err: tokio_postgres::Error) -> StoreError {
        // The server's own message and detail: `Display` alone says only "db error".
        match err.as_db_error() {
            Some(db) => self.error(match db.detail() {
                Some(detail) => format!("{} ({detail})", db.message()),
                None => db.message().to_string(),
            }),
            None => self.error(err),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|err| match err {
            deadpool_postgres::PoolError::Backend(err) => self.db(err),
            other => self.error(format!("cannot connect: {other}")),
        })
    }

    /// Runs `work` under the deadline.
    async fn deadline<T>(
        &self,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(DEADLINE, work).await {
            Ok(result) => result,
            Err(_) => Err(self.error(format!("no answer within {} s", DEADLINE.as_secs()))),
        }
    }

    /// One statement on a pooled connection, under the deadline: its rows.
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.deadline(async {
            let client = self.client().await?;
            client.query(sql, params).await.map_err(|e| self.db(e))
        })
        .await
    }

    /// [`Shared::query`] of a statement with at most one row.
    async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        self.deadline(async {
            let client = self.client().await?;
            client.query_opt(sql, params).await.map_err(|e| self.db(e))
        })
        .await
    }

    /// [`Shared::query`] of a statement that returns no rows: how many it changed.
    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        self.deadline(async {
            let client = self.client().await?;
            client.execute(sql, params).await.map_err(|e| self.db(e))
        })
        .await
    }

    /// Locks the lease of thread `id` until `tx` ends (appends and claims take the same
    /// row lock, so they are ordered).
    async fn lock_lease(&self, tx: &Transaction<'_>, id: ThreadId) -> Result<Lease, StoreError> {
        let row = tx
            .query_opt(
                &format!("{LEASE_QUERY} FOR UPDATE OF t"),
                &[&id.to_string()],
            )
            .await
            .map_err(|e| self.db(e))?
            .ok_or(StoreError::NotFound(id))?;
        Ok(self.lease_of(id, &row))
    }

    /// The lease of thread `id` as it stands, without locking it (`None`: no such thread).
    async fn read_lease(&self, id: ThreadId) -> Result<Option<Lease>, StoreError> {
        let row = self.query_opt(LEASE_QUERY, &[&id.to_string()]).await?;
        Ok(row.map(|row| self.lease_of(id, &row)))
    }

    fn lease_of(&self, id: ThreadId, row: &Row) -> Lease {
        let owner: Option<String> = row.get(1);
        Lease {
            thread_id: id,
            epoch: row.get(0),
            // Another replica's, that is; this one's own lease is no obstacle.
            other_owner: owner.filter(|owner| *owner != self.replica.id),
            live: row.get::<_, Option<bool>>(2).unwrap_or(false),
            internal_url: row.get(3),
        }
    }
}

/// A thread's lease and its owner's advertised address ([`Shared::lease_of`] reads it).
const LEASE_QUERY: &str = "SELECT t.lease_epoch, t.owner, t.lease_expires_at > now(), \
     r.internal_url FROM interpreter_threads t \
     LEFT JOIN interpreter_replicas r ON r.id = t.owner WHERE t.id = $1";

/// A replica is live while it has heartbeaten within the lease time (`$2`: [`lease_seconds`]).
const REPLICA_LIVE: &str = "heartbeat_at > now() - make_interval(secs => $2)";

/// A thread's lease as [`Shared::lock_lease`] found it.
struct Lease {
    thread_id: ThreadId,
    epoch: i64,
    /// The replica holding it, when that is not this one.
    other_owner: Option<String>,
    /// Whether it has not expired.
    live: bool,
    internal_url: Option<String>,
}

impl Lease {
    /// The other replica that holds the thread, while its lease has not expired.
    fn held_elsewhere(&self) -> Option<RemoteOwner> {
        let owner = self.other_owner.as_ref().filter(|_| self.live)?;
        Some(RemoteOwner {
            replica: owner.clone(),
            internal_url: self.internal_url.clone(),
        })
    }

    /// Refuses while another live replica holds the thread, naming it.
    fn refuse_if_held_elsewhere(&self) -> Result<(), StoreError> {
        match self.held_elsewhere() {
            Some(owner) => Err(StoreError::OwnedElsewhere {
                thread_id: self.thread_id,
                owner: owner.replica,
                internal_url: owner.internal_url,
            }),
            None => Ok(()),
        }
    }
}

/// Appends `lines` to thread `id` as records `first`, `first + 1`, … in `tx`.
async fn insert_lines(
    shared: &Shared,
    tx: &Transaction<'_>,
    id: &str,
    first: i64,
    lines: &[String],
) -> Result<(), StoreError> {
    let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
    let seqs: Vec<i64> = (first..first + count).collect();
    tx.execute(
        "INSERT INTO interpreter_items (thread_id, seq, line) \
         SELECT $1, * FROM UNNEST($2::BIGINT[], $3::TEXT[])",
        &[&id, &seqs, &lines],
    )
    .await
    .map_err(|e| shared.db(e))?;
    Ok(())
}

/// Threads in PostgreSQL. Cloning shares the pool and the replica identity.
#[derive(Debug, Clone)]
pub struct PgStore {
    shared: Arc<Shared>,
    /// Stops the heartbeat when the last clone is dropped.
    _heartbeat: Arc<HeartbeatGuard>,
}

#[derive(Debug)]
struct HeartbeatGuard(CancellationToken);

impl Drop for HeartbeatGuard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl PgStore {
    /// Connects to `url` (with `password` when the URL has none), brings the schema up to
    /// date and registers this process as a replica.
    pub async fn connect(
        url: &str,
        password: Option<String>,
        label: String,
        replica: Replica,
    ) -> Result<Self, StoreError> {
        let error = |message: String| StoreError::Database {
            store: label.clone(),
            message,
        };
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|err| error(format!("invalid URL: {err}")))?;
        if config.get_password().is_none()
            && let Some(password) = password
        {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let manager = Manager::from_config(
            config,
            tls_connector(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(DEADLINE))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|err| error(format!("cannot build the connection pool: {err}")))?;
        let shared = Arc::new(Shared {
            pool,
            label,
            replica,
        });
        shared.deadline(migrate(&shared)).await?;
        // Replicas that stopped without a word (killed, or short-lived commands such as
        // `threads list`) are forgotten after an hour; the threads they held were free to
        // take since their leases expired.
        shared
            .execute(
                "DELETE FROM interpreter_replicas WHERE heartbeat_at < now() - interval '1 hour'",
                &[],
            )
            .await?;
        shared
            .execute(
                "INSERT INTO interpreter_replicas (id, internal_url) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), \
                 internal_url = EXCLUDED.internal_url",
                &[&shared.replica.id, &shared.replica.internal_url],
            )
            .await?;
        let token = CancellationToken::new();
        tokio::spawn(heartbeat(Arc::clone(&shared), token.clone()));
        Ok(Self {
            shared,
            _heartbeat: Arc::new(HeartbeatGuard(token)),
        })
    }

    pub fn replica(&self) -> &Replica {
        &self.shared.replica
    }

    /// Takes thread `id` for this replica: refused while another live replica holds
    /// it; a lease that expired (its replica died or hung) is taken over. Returns the new
    /// epoch and, for a takeover, the replica it was taken from.
    async fn claim(&self, id: ThreadId) -> Result<(i64, Option<String>), StoreError> {
        let shared = &self.shared;
        shared
            .deadline(async {
                let mut client = shared.client().await?;
                let tx = client.transaction().await.map_err(|e| shared.db(e))?;
                let lease = shared.lock_lease(&tx, id).await?;
                lease.refuse_if_held_elsewhere()?;
                let epoch: i64 = tx
                    .query_one(
                        "UPDATE interpreter_threads SET owner = $2, \
                         lease_epoch = lease_epoch + 1, \
                         lease_expires_at = now() + make_interval(secs => $3) \
                         WHERE id = $1 RETURNING lease_epoch",
                        &[&id.to_string(), &shared.replica.id, &lease_seconds()],
                    )
                    .await
                    .map_err(|e| shared.db(e))?
                    .get(0);
                tx.commit().await.map_err(|e| shared.db(e))?;
                Ok((epoch, lease.other_owner))
            })
            .await
    }

    fn writer(&self, id: ThreadId, epoch: i64) -> Arc<dyn ThreadWriter> {
        Arc::new(PgWriter {
            shared: Arc::clone(&self.shared),
            thread_id: id,
            epoch: AtomicI64::new(epoch),
            fenced: AtomicBool::new(false),
        })
    }

    /// A thread's records. A line over [`rollout::MAX_LINE_BYTES`] stays in the database:
    /// only its size is fetched, for the note that says it was skipped, so one huge row
    /// costs this process no more memory than it would from a local rollout.
    async fn read_lines(&self, id: ThreadId) -> Result<Option<RolloutRead>, StoreError> {
        let shared = &self.shared;
        let max = i64::try_from(rollout::MAX_LINE_BYTES).unwrap_or(i64::MAX);
        // One statement: the thread and its lines as of one snapshot; a thread without
        // lines reads as empty, a missing thread is `None`.
        let rows = shared
            .query(
                "SELECT CASE WHEN octet_length(i.line) <= $2::BIGINT THEN i.line END, \
                 octet_length(i.line)::BIGINT, i.seq IS NOT NULL \
                 FROM interpreter_threads t \
                 LEFT JOIN interpreter_items i ON i.thread_id = t.id \
                 WHERE t.id = $1 ORDER BY i.seq",
                &[&id.to_string(), &max],
            )
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let lines = rows
            .into_iter()
            .filter(|row| row.get::<_, bool>(2))
            .map(|row| match row.get::<_, Option<String>>(0) {
                Some(text) => StoredLine::Text(text),
                None => StoredLine::TooLong {
                    bytes: u64::try_from(row.get::<_, Option<i64>>(1).unwrap_or(0)).unwrap_or(0),
                },
            });
        let label = PathBuf::from(format!("{}/{id}", shared.label));
        Ok(Some(rollout::read_stored_lines(&label, lines)))
    }
}

/// Seconds of [`LEASE_TTL`] as PostgreSQL's `make_interval` takes them.
fn lease_seconds() -> f64 {
    LEASE_TTL.as_secs_f64()
}

/// Timestamps are kept to the millisecond, like the rollouts' and the SQLite index's, so
/// a listing cursor (which carries milliseconds) compares exactly with the rows.
fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::milliseconds(1)).unwrap_or(at)
}

fn serialize_line(
    shared: &Shared,
    at: DateTime<Utc>,
    item: &RolloutItem,
) -> Result<String, StoreError> {
    serde_json::to_string(&RolloutLine {
        timestamp: at,
        item: item.clone(),
    })
    .map_err(|source| StoreError::Serialize {
        path: PathBuf::from(&shared.label),
        source,
    })
}

async fn migrate(shared: &Shared) -> Result<(), StoreError> {
    let mut client = shared.client().await?;
    let tx = client.transaction().await.map_err(|e| shared.db(e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| shared.db(e))?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS interpreter_schema (version INTEGER NOT NULL)")
        .await
        .map_err(|e| shared.db(e))?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM interpreter_schema",
            &[],
        )
        .await
        .map_err(|e| shared.db(e))?
        .get(0);
    let known = i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX);
    if current > known {
        return Err(shared.error(format!(
            "its schema is version {current}, newer than this interpreter knows ({known}); \
             upgrade this replica"
        )));
    }
    for (version, sql) in (1..)
        .zip(MIGRATIONS)
        .skip(usize::try_from(current).unwrap_or(0))
    {
        tx.batch_execute(sql).await.map_err(|e| shared.db(e))?;
        tx.execute(
            "INSERT INTO interpreter_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(|e| shared.db(e))?;
        tracing::info!("{}: applied schema version {version}", shared.label);
    }
    tx.commit().await.map_err(|e| shared.db(e))
}

/// Renews this replica's heartbeat and its leases until `stop`.
async fn heartbeat(shared: Arc<Shared>, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(HEARTBEAT);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = ticks.tick() => {}
        }
        let beat = async {
            shared
                .execute(
                    "UPDATE interpreter_replicas SET heartbeat_at = now() WHERE id = $1",
                    &[&shared.replica.id],
                )
                .await?;
            shared
                .execute(
                    "UPDATE interpreter_threads \
                     SET lease_expires_at = now() + make_interval(secs => $2) \
                     WHERE owner = $1",
                    &[&shared.replica.id, &lease_seconds()],
                )
                .await
        };
        if let Err(err) = beat.await {
            tracing::warn!("lease heartbeat failed: {err}");
        }
    }
    // Let go of everything so other replicas need not wait for the TTL. Best effort:
    // the process may be exiting.
    let release = async {
        shared
            .execute(
                "UPDATE interpreter_threads SET owner = NULL, lease_expires_at = NULL \
                 WHERE owner = $1",
                &[&shared.replica.id],
            )
            .await?;
        shared
            .execute(
                "DELETE FROM interpreter_replicas WHERE id = $1",
                &[&shared.replica.id],
            )
            .await
    };
    match tokio::time::timeout(Duration::from_secs(5), release).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => tracing::debug!("releasing leases at shutdown: {err}"),
        Err(_) => tracing::debug!("releasing leases at shutdown: no answer within 5 s"),
    }
}

/// rustls with the webpki roots: `sslmode=require` (or `prefer` against a server that
/// offers TLS) verifies the server like a browser would; no system OpenSSL.
fn tls_connector() -> tokio_postgres_rustls::MakeRustlsConnect {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|builder| {
        builder
            .with_root_certificates(roots.clone())
            .with_no_client_auth()
    })
    .unwrap_or_else(|_| {
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth()
    });
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

fn record_from_row(row: &tokio_postgres::Row) -> Result<ThreadRecord, String> {
    let id: &str = row.get(0);
    let git_info: Option<String> = row.get(9);
    let git_info = git_info
        .map(|text| serde_json::from_str::<ThreadGitInfo>(&text))
        .transpose()
        .map_err(|err| format!("git metadata of {id}: {err}"))?;
    Ok(ThreadRecord {
        id: id
            .parse()
            .map_err(|_| format!("`{id}` is not a thread id"))?,
        rollout_path: None,
        created_at: row.get(1),
        updated_at: row.get(2),
        cwd: PathBuf::from(row.get::<_, String>(3)),
        model_provider: row.get(4),
        model: row.get(5),
        source: rollout::source_from_text(row.get(6)),
        preview: row.get(7),
        name: row.get(8),
        git_info,
    })
}

#[async_trait]
impl ThreadStore for PgStore {
    fn describe(&self) -> String {
        self.shared.label.clone()
    }

    async fn create(&self, meta: SessionMeta) -> Result<CreatedThread, StoreError> {
        let shared = &self.shared;
        let id = meta.id;
        let now = to_millis(Utc::now());
        let line = serialize_line(shared, now, &RolloutItem::SessionMeta(meta.clone()))?;
        let epoch = shared
            .deadline(async {
                let mut client = shared.client().await?;
                let tx = client.transaction().await.map_err(|e| shared.db(e))?;
                let epoch: i64 = tx
                    .query_one(
                        "INSERT INTO interpreter_threads (id, created_at, updated_at, cwd, \
                         model_provider, model, source, owner, lease_epoch, lease_expires_at, \
                         item_count) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, \
                         now() + make_interval(secs => $9), 1) RETURNING lease_epoch",
                        &[
                            &id.to_string(),
                            &to_millis(meta.timestamp),
                            &now,
                            &meta.cwd.to_string_lossy().into_owned(),
                            &meta.model_provider,
                            &meta.model,
                            &rollout::source_to_text(meta.source),
                            &shared.replica.id,
                            &lease_seconds(),
                        ],
                    )
                    .await
                    .map_err(|e| shared.db(e))?
                    .get(0);
                insert_lines(shared, &tx, &id.to_string(), 0, std::slice::from_ref(&line)).await?;
                tx.commit().await.map_err(|e| shared.db(e))?;
                Ok(epoch)
            })
            .await?;
        Ok(CreatedThread {
            writer: self.writer(id, epoch),
            notices: Vec::new(),
        })
    }

    async fn open(&self, id: ThreadId) -> Result<OpenedThread, StoreError> {
        let (epoch, previous) = self.claim(id).await?;
        let read = self.read_lines(id).await?.ok_or(StoreError::NotFound(id))?;
        if !matches!(read.items.first(), Some(RolloutItem::SessionMeta(_))) {
            return Err(StoreError::Unusable {
                path: PathBuf::from(format!("{}/{id}", self.shared.label)),
                reason: "its first record is not the thread's metadata".into(),
            });
        }
        let mut notices: Vec<String> = read.skipped.iter().map(ToString::to_string).collect();
        if let Some(previous) = previous {
            tracing::info!("took thread {id} over from replica {previous}");
            notices.push(format!(
                "thread {id} was last run by replica {previous}, which stopped answering; \
                 it continues here"
            ));
        }
        Ok(OpenedThread {
            items: read.items,
            notices,
            writer: self.writer(id, epoch),
        })
    }

    async fn read(&self, id: ThreadId) -> Result<Option<RolloutRead>, StoreError> {
        self.read_lines(id).await
    }

    async fn get(&self, id: ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let shared = &self.shared;
        let row = shared
            .query_opt(
                &format!("SELECT {SELECT_COLUMNS} FROM interpreter_threads WHERE id = $1"),
                &[&id.to_string()],
            )
            .await?;
        row.map(|row| record_from_row(&row).map_err(|m| shared.error(m)))
            .transpose()
    }

    async fn latest(
        &self,
        cwd: Option<PathBuf>,
    ) -> Result<(Option<ThreadRecord>, Vec<String>), StoreError> {
        let page = self
            .list(ListQuery {
                limit: 1,
                cwds: cwd.into_iter().collect(),
                ..ListQuery::default()
            })
            .await?;
        Ok((page.records.into_iter().next(), Vec::new()))
    }

    async fn list(&self, query: ListQuery) -> Result<ListPage, StoreError> {
        let column = match query.sort_key {
            ListSortKey::CreatedAt => "created_at",
            ListSortKey::UpdatedAt => "updated_at",
        };
        let (order, compare) = match query.direction {
            ListDirection::Desc => ("DESC", "<"),
            ListDirection::Asc => ("ASC", ">"),
        };
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(query.archived)];
        let mut conditions = vec!["archived = $1".to_string()];
        let next = |params: &mut Vec<Box<dyn ToSql + Sync + Send>>,
                    value: Box<dyn ToSql + Sync + Send>| {
            params.push(value);
            format!("${}", params.len())
        };
        if query.require_preview {
            conditions.push("preview IS NOT NULL AND preview <> ''".to_string());
        }
        if let Some(cursor) = &query.cursor {
            let cursor = rollout::ListCursor::parse(cursor)?;
            let a = next(&mut params, Box::new(cursor.at));
            let b = next(&mut params, Box::new(cursor.id.to_string()));
            conditions.push(format!("({column}, id) {compare} ({a}, {b})"));
        }
        let text_list = |values: Vec<String>| -> Box<dyn ToSql + Sync + Send> { Box::new(values) };
        if !query.cwds.is_empty() {
            let cwds = query
                .cwds
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let p = next(&mut params, text_list(cwds));
            conditions.push(format!("cwd = ANY({p})"));
        }
        if !query.sources.is_empty() {
            let sources = query
                .sources
                .iter()
                .map(|s| rollout::source_to_text(*s))
                .collect();
            let p = next(&mut params, text_list(sources));
            conditions.push(format!("source = ANY({p})"));
        }
        if !query.model_providers.is_empty() {
            let p = next(&mut params, text_list(query.model_providers.clone()));
            conditions.push(format!("model_provider = ANY({p})"));
        }
        if !query.ids.is_empty() {
            let ids = query.ids.iter().map(ToString::to_string).collect();
            let p = next(&mut params, text_list(ids));
            conditions.push(format!("id = ANY({p})"));
        }
        if !query.excluded_ids.is_empty() {
            let ids = query.excluded_ids.iter().map(ToString::to_string).collect();
            let p = next(&mut params, text_list(ids));
            conditions.push(format!("NOT (id = ANY({p}))"));
        }
        if let Some(term) = query.search_term.as_deref().filter(|t| !t.is_empty()) {
            let p = next(&mut params, Box::new(term.to_string()));
            conditions.push(format!("strpos(preview, {p}) > 0"));
        }
        let limit = query.limit.max(1);
        let p = next(
            &mut params,
            Box::new(i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1)),
        );
        let sql = format!(
            "SELECT {SELECT_COLUMNS} FROM interpreter_threads WHERE {} \
             ORDER BY {column} {order}, id {order} LIMIT {p}",
            conditions.join(" AND ")
        );
        let shared = &self.shared;
        let refs: Vec<&(dyn ToSql + Sync)> = params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = shared.query(&sql, &refs).await?;
        let more = rows.len() > limit;
        let records = rows
            .iter()
            .take(limit)
            .map(|row| record_from_row(row).map_err(|m| shared.error(m)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListPage::of_records(records, more, query.sort_key))
    }

    async fn set_archived(&self, id: ThreadId, archived: bool) -> Result<bool, StoreError> {
        self.shared
            .execute(
                "UPDATE interpreter_threads SET archived = $2 WHERE id = $1",
                &[&id.to_string(), &archived],
            )
            .await
            .map(|changed| changed > 0)
    }

    async fn is_archived(&self, id: ThreadId) -> Result<Option<bool>, StoreError> {
        let row = self
            .shared
            .query_opt(
                "SELECT archived FROM interpreter_threads WHERE id = $1",
                &[&id.to_string()],
            )
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    async fn set_name(&self, id: ThreadId, name: Option<String>) -> Result<bool, StoreError> {
        self.shared
            .execute(
                "UPDATE interpreter_threads SET name = $2 WHERE id = $1",
                &[&id.to_string(), &name],
            )
            .await
            .map(|changed| changed > 0)
    }

    async fn set_git_info(
        &self,
        id: ThreadId,
        info: Option<ThreadGitInfo>,
    ) -> Result<bool, StoreError> {
        let text = info
            .filter(|info| !info.is_empty())
            .map(|info| serde_json::to_string(&info))
            .transpose()
            .map_err(|source| StoreError::Serialize {
                path: PathBuf::from(&self.shared.label),
                source,
            })?;
        self.shared
            .execute(
                "UPDATE interpreter_threads SET git_info = $2 WHERE id = $1",
                &[&id.to_string(), &text],
            )
            .await
            .map(|changed| changed > 0)
    }

    async fn delete(&self, id: ThreadId) -> Result<bool, StoreError> {
        // Items go with the thread (ON DELETE CASCADE).
        self.shared
            .execute(
                "DELETE FROM interpreter_threads WHERE id = $1",
                &[&id.to_string()],
            )
            .await
            .map(|changed| changed > 0)
    }

    async fn import(
        &self,
        meta: SessionMeta,
        items: Vec<RolloutItem>,
        updated_at: Option<DateTime<Utc>>,
    ) -> Result<Imported, StoreError> {
        let shared = &self.shared;
        let id = meta.id;
        let now = to_millis(updated_at.unwrap_or_else(Utc::now));
        let mut lines = vec![serialize_line(
            shared,
            to_millis(meta.timestamp),
            &RolloutItem::SessionMeta(meta.clone()),
        )?];
        for item in &items {
            lines.push(serialize_line(shared, now, item)?);
        }
        let preview = rollout::first_user_message(&items).map(rollout::truncate_preview);
        let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        shared
            .deadline(async {
                let mut client = shared.client().await?;
                let tx = client.transaction().await.map_err(|e| shared.db(e))?;
                let inserted = tx
                    .execute(
                        "INSERT INTO interpreter_threads (id, created_at, updated_at, cwd, \
                         model_provider, model, source, preview, item_count) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                         ON CONFLICT (id) DO NOTHING",
                        &[
                            &id.to_string(),
                            &to_millis(meta.timestamp),
                            &now,
                            &meta.cwd.to_string_lossy().into_owned(),
                            &meta.model_provider,
                            &meta.model,
                            &rollout::source_to_text(meta.source),
                            &preview,
                            &count,
                        ],
                    )
                    .await
                    .map_err(|e| shared.db(e))?;
                if inserted == 0 {
                    return Ok(Imported::AlreadyPresent);
                }
                insert_lines(shared, &tx, &id.to_string(), 0, &lines).await?;
                tx.commit().await.map_err(|e| shared.db(e))?;
                Ok(Imported::Created)
            })
            .await
    }

    async fn export(&self, id: ThreadId) -> Result<Option<Vec<u8>>, StoreError> {
        let shared = &self.shared;
        // One statement: the thread and its lines as of one snapshot (a thread without
        // lines still exports as empty, and a missing thread is `None`).
        let rows = shared
            .query(
                "SELECT i.line FROM interpreter_threads t \
                 LEFT JOIN interpreter_items i ON i.thread_id = t.id \
                 WHERE t.id = $1 ORDER BY i.seq",
                &[&id.to_string()],
            )
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        for line in rows.iter().filter_map(|row| row.get::<_, Option<&str>>(0)) {
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        Ok(Some(bytes))
    }

    async fn refresh(&self) -> Result<Vec<String>, StoreError> {
        // Every record goes through the store: nothing can be written behind its back.
        Ok(Vec::new())
    }

    async fn owner_elsewhere(&self, id: ThreadId) -> Result<Option<RemoteOwner>, StoreError> {
        let lease = self.shared.read_lease(id).await?;
        Ok(lease.and_then(|lease| lease.held_elsewhere()))
    }

    async fn replica_alive(&self, replica: &str) -> Result<bool, StoreError> {
        let row = self
            .shared
            .query_opt(
                &format!("SELECT {REPLICA_LIVE} FROM interpreter_replicas WHERE id = $1"),
                &[&replica, &lease_seconds()],
            )
            .await?;
        Ok(row.is_some_and(|row| row.get::<_, bool>(0)))
    }

    async fn status(&self) -> Result<StoreStatus, StoreError> {
        // One statement, one snapshot: the counts agree with each other.
        let row = self
            .shared
            .query_opt(
                &format!(
                    "SELECT (SELECT count(*) FROM interpreter_threads), \
                     (SELECT count(*) FROM interpreter_threads \
                      WHERE owner IS NOT NULL AND lease_expires_at > now()), \
                     (SELECT count(*) FROM interpreter_replicas WHERE id <> $1 AND {REPLICA_LIVE})"
                ),
                &[&self.shared.replica.id, &lease_seconds()],
            )
            .await?;
        let count = |i: usize| {
            row.as_ref()
                .and_then(|row| u64::try_from(row.get::<_, i64>(i)).ok())
                .unwrap_or(0)
        };
        Ok(StoreStatus {
            description: self.describe(),
            threads: count(0),
            fleet: Some(FleetStatus {
                running: count(1),
                other_processes: count(2),
            }),
        })
    }
}

/// Appends to one thread under the epoch this replica took it with.
#[derive(Debug)]
struct PgWriter {
    shared: Arc<Shared>,
    thread_id: ThreadId,
    epoch: AtomicI64,
    /// Set once an append found the epoch moved on: every later one fails at once.
    fenced: AtomicBool,
}

impl PgWriter {
    fn fenced(&self) -> StoreError {
        StoreError::Fenced {
            thread_id: self.thread_id,
            held: self.epoch.load(Ordering::SeqCst),
        }
    }
}

#[async_trait]
impl ThreadWriter for PgWriter {
    async fn append(&self, items: &[RolloutItem]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        if self.fenced.load(Ordering::SeqCst) {
            return Err(self.fenced());
        }
        let shared = &self.shared;
        let now = to_millis(Utc::now());
        let lines = items
            .iter()
            .map(|item| serialize_line(shared, now, item))
            .collect::<Result<Vec<_>, _>>()?;
        let preview = rollout::first_user_message(items).map(rollout::truncate_preview);
        let id = self.thread_id.to_string();
        let held = self.epoch.load(Ordering::SeqCst);
        let result = shared
            .deadline(async {
                let mut client = shared.client().await?;
                let tx = client.transaction().await.map_err(|e| shared.db(e))?;
                // The row lock orders appends and takeovers: a claim waits for this
                // transaction, and this one sees a claim that committed first.
                let row = tx
                    .query_opt(
                        "SELECT lease_epoch, item_count FROM interpreter_threads \
                         WHERE id = $1 FOR UPDATE",
                        &[&id],
                    )
                    .await
                    .map_err(|e| shared.db(e))?
                    .ok_or(StoreError::NotFound(self.thread_id))?;
                let epoch: i64 = row.get(0);
                let first: i64 = row.get(1);
                if epoch != held {
                    return Err(self.fenced());
                }
                insert_lines(shared, &tx, &id, first, &lines).await?;
                let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
                tx.execute(
                    "UPDATE interpreter_threads SET item_count = item_count + $2, \
                     updated_at = $3, preview = COALESCE(preview, $4) WHERE id = $1",
                    &[&id, &count, &now, &preview],
                )
                .await
                .map_err(|e| shared.db(e))?;
                tx.commit().await.map_err(|e| shared.db(e))
            })
            .await;
        if matches!(result, Err(StoreError::Fenced { .. })) {
            self.fenced.store(true, Ordering::SeqCst);
            tracing::warn!(
                "thread {} was taken over by another replica; this one stops writing to it",
                self.thread_id
            );
        }
        result
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    async fn reacquire(&self) -> Result<(), StoreError> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(self.fenced());
        }
        let shared = &self.shared;
        let held = self.epoch.load(Ordering::SeqCst);
        let id = self.thread_id;
        shared
            .deadline(async {
                let mut client = shared.client().await?;
                let tx = client.transaction().await.map_err(|e| shared.db(e))?;
                let lease = shared.lock_lease(&tx, id).await?;
                lease.refuse_if_held_elsewhere()?;
                if lease.epoch != held {
                    // Someone else continued the thread since: what this process holds
                    // in memory is stale.
                    return Err(self.fenced());
                }
                tx.execute(
                    "UPDATE interpreter_threads SET owner = $2, \
                     lease_expires_at = now() + make_interval(secs => $3) WHERE id = $1",
                    &[&id.to_string(), &shared.replica.id, &lease_seconds()],
                )
                .await
                .map_err(|e| shared.db(e))?;
                tx.commit().await.map_err(|e| shared.db(e))
            })
            .await
    }

    async fn is_stale(&self) -> bool {
        if self.fenced.load(Ordering::SeqCst) {
            return true;
        }
        let shared = &self.shared;
        let held = self.epoch.load(Ordering::SeqCst);
        let row = shared
            .query_opt(
                "SELECT lease_epoch, owner IS NOT NULL AND owner <> $2 \
                 AND lease_expires_at > now() FROM interpreter_threads WHERE id = $1",
                &[&self.thread_id.to_string(), &shared.replica.id],
            )
            .await;
        match row {
            Ok(Some(row)) => {
                row.get::<_, i64>(0) != held || row.get::<_, Option<bool>>(1) == Some(true)
            }
            // Deleted: nothing to continue here either.
            Ok(None) => true,
            Err(err) => {
                tracing::debug!("checking thread {}: {err}", self.thread_id);
                false
            }
        }
    }

    async fn release(&self) -> Result<(), StoreError> {
        let held = self.epoch.load(Ordering::SeqCst);
        self.shared
            .execute(
                "UPDATE interpreter_threads SET owner = NULL, lease_expires_at = NULL \
                 WHERE id = $1 AND owner = $2 AND lease_epoch = $3",
                &[&self.thread_id.to_string(), &self.shared.replica.id, &held],
            )
            .await?;
        Ok(())
    }
}
