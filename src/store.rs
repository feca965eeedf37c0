//! Memory across restarts (SPEC §3.6, §3.7): breaker verdicts and the transition ledger in
//! one SQLite file under `state_dir`.
//!
//! rusqlite is synchronous, so every write goes over a channel to one writer thread: a
//! breaker decision never waits on disk. Reads (start-up, `/status/events`) open their own
//! connection; WAL mode lets them run beside the writer.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection};

use crate::breaker::{Phase, Transitioned};

mod verdict;

pub use verdict::{Restored, Verdict};

/// What the store remembered at start.
#[derive(Clone, Debug, PartialEq)]
pub enum Recalled {
    /// Each machine's verdict, as its row was read.
    Verdicts(Vec<(String, Restored)>),
    /// The whole file was unreadable and moved aside: every machine starts open.
    Unreadable(String),
}

/// The database file inside `state_dir`.
pub const FILE: &str = "labrouter.db";

/// Schema migrations, applied in order; `PRAGMA user_version` says how many ran.
const MIGRATIONS: &[&str] = &[
    // 1: verdicts, the ledger, meta.
    "CREATE TABLE verdicts (
        machine TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        failures INTEGER NOT NULL,
        opened_at_ms INTEGER,
        cooldown_ms INTEGER NOT NULL,
        open_until_ms INTEGER,
        last_reason TEXT,
        last_retry_after_ms INTEGER,
        registry_version TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL
    );
    CREATE TABLE ledger (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        machine TEXT NOT NULL,
        from_state TEXT NOT NULL,
        to_state TEXT NOT NULL,
        reason TEXT NOT NULL,
        failures INTEGER NOT NULL,
        cooldown_until_ms INTEGER,
        remote_attempted INTEGER NOT NULL,
        registry_version TEXT NOT NULL,
        remote_attempts INTEGER NOT NULL,
        local_rejections INTEGER NOT NULL
    );
    CREATE INDEX ledger_machine_seq ON ledger (machine, seq);
    CREATE INDEX ledger_at ON ledger (at_ms);
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 2: counter samples, for the digest's per-day request counts.
    "CREATE TABLE counters (
        at_ms INTEGER NOT NULL,
        boot_ms INTEGER NOT NULL,
        machine TEXT NOT NULL,
        remote_attempts INTEGER NOT NULL,
        local_rejections INTEGER NOT NULL,
        rerouted INTEGER NOT NULL
    );
    CREATE INDEX counters_at ON counters (at_ms);",
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    #[error("state store {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// The writer side: owned by the running lab; dropping it flushes and stops the thread.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    tx: mpsc::Sender<Msg>,
    /// Taken by `Drop` to wait for the last writes.
    writer: Option<JoinHandle<()>>,
}

/// What the writer thread is asked to do.
#[derive(Debug)]
pub enum Msg {
    Transition(Box<Transitioned>),
    /// A registry reload, applied or rejected: a ledger row for machine `(registry)`.
    Registry {
        at: SystemTime,
        from: String,
        to: String,
        reason: String,
    },
    /// Remember a small value across restarts (Telegram: when the last digest went out).
    Meta {
        key: String,
        value: String,
    },
    /// Live counters of every machine, `(machine, remote_attempts, local_rejections)`, for
    /// the digest's per-day counts; `boot_ms` names the process (counters restart with it).
    Counters {
        at_ms: i64,
        boot_ms: i64,
        /// `(machine, remote_attempts, local_rejections, rerouted)`.
        machines: Vec<(String, u64, u64, u64)>,
    },
    /// Delete ledger rows older than this (unix ms): `server.keep_ledger`.
    Prune {
        before_ms: i64,
    },
    /// Answer on this channel once everything sent before is on disk.
    Flush(mpsc::Sender<()>),
    Stop,
}

/// One ledger row as `/status/events` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LedgerRow {
    pub seq: i64,
    pub at: String,
    pub at_ms: i64,
    pub machine: String,
    pub from: String,
    pub to: String,
    pub reason: String,
    pub failures: i64,
    pub cooldown_until: Option<String>,
    pub remote_attempted: bool,
    pub registry_version: String,
    pub remote_attempts: i64,
    pub local_rejections: i64,
}

impl LedgerRow {
    /// The breaker states of a machine row; `None` for a registry row, or states this
    /// version cannot read.
    pub fn phases(&self) -> Option<(Phase, Phase)> {
        Some((self.from.parse().ok()?, self.to.parse().ok()?))
    }
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.display().to_string(),
        source,
    }
}

pub fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sqlite(path))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(sqlite(path))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite(path))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite(path))?;
    Ok(conn)
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sqlite(path))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        let tx = conn.transaction().map_err(sqlite(path))?;
        tx.execute_batch(sql).map_err(sqlite(path))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(sqlite(path))?;
        tx.commit().map_err(sqlite(path))?;
    }
    Ok(())
}

impl Store {
    /// Opens (creating and migrating) the store in `state_dir` and reads its verdicts.
    /// A file that cannot be read is moved aside and a fresh one created; its machines are
    /// reported [`Restored::Unreadable`] so they start open (fail closed).
    pub fn open(state_dir: &Path) -> Result<(Store, Recalled), StoreError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::Io {
            path: state_dir.display().to_string(),
            source,
        })?;
        let path = state_dir.join(FILE);
        let (conn, restored) = match Store::read_all(&path) {
            Ok(ok) => ok,
            Err(e) => {
                tracing::error!(error = %e, "state store unreadable: moving it aside; every machine starts open (state_unreadable)");
                let aside = path.with_extension(format!("db.unreadable-{}", ms(SystemTime::now())));
                for ext in ["", "-wal", "-shm"] {
                    let from = PathBuf::from(format!("{}{ext}", path.display()));
                    let to = PathBuf::from(format!("{}{ext}", aside.display()));
                    if from.exists() {
                        let _ = std::fs::rename(&from, &to);
                    }
                }
                let mut conn = open_conn(&path)?;
                migrate(&mut conn, &path)?;
                (conn, Recalled::Unreadable(e.to_string()))
            }
        };
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer_path = path.clone();
        let writer = std::thread::Builder::new()
            .name("labrouter-store".into())
            .spawn(move || write_loop(conn, rx, &writer_path))
            .map_err(|source| StoreError::Io {
                path: path.display().to_string(),
                source,
            })?;
        Ok((
            Store {
                path,
                tx,
                writer: Some(writer),
            },
            restored,
        ))
    }

    fn read_all(path: &Path) -> Result<(Connection, Recalled), StoreError> {
        let mut conn = open_conn(path)?;
        migrate(&mut conn, path)?;
        conn.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0))
            .map_err(sqlite(path))
            .and_then(|ok| {
                if ok == "ok" {
                    Ok(())
                } else {
                    Err(StoreError::Sqlite {
                        path: path.display().to_string(),
                        source: rusqlite::Error::InvalidQuery,
                    })
                }
            })?;
        let restored = verdict::read_verdicts(&conn).map_err(sqlite(path))?;
        Ok((conn, Recalled::Verdicts(restored)))
    }

    /// Where transitions go to be written: give it to [`crate::machines::Machines`].
    pub fn sender(&self) -> mpsc::Sender<Msg> {
        self.tx.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Asks the writer to delete ledger rows older than `keep` (SPEC §7: the database does
    /// not grow without bound).
    pub fn prune(&self, keep: Duration) {
        let before = SystemTime::now().checked_sub(keep).unwrap_or(UNIX_EPOCH);
        let _ = self.tx.send(Msg::Prune {
            before_ms: ms(before),
        });
    }

    /// Blocks until every transition sent so far is written (at most `limit`).
    pub fn flush(&self, limit: Duration) -> bool {
        let (ack, done) = mpsc::channel();
        self.tx.send(Msg::Flush(ack)).is_ok() && done.recv_timeout(limit).is_ok()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Msg>, path: &Path) {
    let mut batch: Vec<Msg> = Vec::new();
    let mut acks: Vec<mpsc::Sender<()>> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut stop = false;
        // Whatever queued up meanwhile goes into the same transaction.
        for msg in std::iter::once(first).chain(rx.try_iter()) {
            match msg {
                Msg::Transition(_)
                | Msg::Registry { .. }
                | Msg::Meta { .. }
                | Msg::Prune { .. }
                | Msg::Counters { .. } => batch.push(msg),
                Msg::Flush(ack) => acks.push(ack),
                Msg::Stop => stop = true,
            }
        }
        if !batch.is_empty() {
            if let Err(e) = write_batch(&mut conn, &batch) {
                tracing::error!(path = %path.display(), error = %e, rows = batch.len(), "cannot write breaker transitions");
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
        if stop {
            break;
        }
    }
}

/// The machine name of registry rows in the ledger.
pub const REGISTRY_ROW: &str = "(registry)";

fn write_batch(conn: &mut Connection, batch: &[Msg]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for msg in batch {
        let t = match msg {
            Msg::Transition(t) => t,
            Msg::Registry {
                at,
                from,
                to,
                reason,
            } => {
                tx.execute(
                    "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                                         remote_attempted, registry_version, remote_attempts, local_rejections)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL, 0, ?6, 0, 0)",
                    params![ms(*at), REGISTRY_ROW, from, to, reason, to],
                )?;
                continue;
            }
            Msg::Meta { key, value } => {
                write_meta(&tx, key, value)?;
                continue;
            }
            Msg::Counters {
                at_ms,
                boot_ms,
                machines,
            } => {
                write_counters(&tx, *at_ms, *boot_ms, machines)?;
                continue;
            }
            Msg::Prune { before_ms } => {
                let gone = tx.execute("DELETE FROM ledger WHERE at_ms < ?1", params![before_ms])?;
                if gone > 0 {
                    tracing::info!(
                        rows = gone,
                        "ledger rows older than server.keep_ledger pruned"
                    );
                }
                continue;
            }
            Msg::Flush(_) | Msg::Stop => continue,
        };
        let tr = &t.transition;
        tx.execute(
            "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                                 remote_attempted, registry_version, remote_attempts, local_rejections)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                ms(t.at),
                t.machine,
                tr.from.as_str(),
                tr.to.as_str(),
                tr.reason,
                tr.failures,
                t.cooldown_until.map(ms),
                tr.remote_attempted,
                t.registry_version,
                t.remote_attempts as i64,
                t.local_rejections as i64,
            ],
        )?;
        verdict::upsert(&tx, &t.machine, &t.verdict, &t.registry_version, t.at)?;
    }
    tx.commit()
}

/// The columns an [`LedgerRow`] is read from, in [`event_row`]'s order.
const EVENT_COLUMNS: &str = "seq, at_ms, machine, from_state, to_state, reason, failures, \
    cooldown_until_ms, remote_attempted, registry_version, remote_attempts, local_rejections";

fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LedgerRow> {
    let at_ms: i64 = r.get(1)?;
    let until: Option<i64> = r.get(7)?;
    Ok(LedgerRow {
        seq: r.get(0)?,
        at: crate::clock::rfc3339(from_ms(at_ms)),
        at_ms,
        machine: r.get(2)?,
        from: r.get(3)?,
        to: r.get(4)?,
        reason: r.get(5)?,
        failures: r.get(6)?,
        cooldown_until: until.map(|u| crate::clock::rfc3339(from_ms(u))),
        remote_attempted: r.get(8)?,
        registry_version: r.get(9)?,
        remote_attempts: r.get(10)?,
        local_rejections: r.get(11)?,
    })
}

/// Ledger rows selected by `filter` (SQL after `FROM ledger`) with `params`.
fn select_events(
    path: &Path,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<LedgerRow>, StoreError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(path))?;
    let mut stmt = conn
        .prepare(&format!("SELECT {EVENT_COLUMNS} FROM ledger {filter}"))
        .map_err(sqlite(path))?;
    let rows = stmt.query_map(params, event_row).map_err(sqlite(path))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sqlite(path))
}

/// Reads the ledger, newest first: `machine` filters, `since` (unix ms) bounds the age,
/// `before` (a seq) pages back, `limit` caps the page.
pub fn events(
    path: &Path,
    machine: Option<&str>,
    since_ms: Option<i64>,
    before: Option<i64>,
    limit: u32,
) -> Result<Vec<LedgerRow>, StoreError> {
    select_events(
        path,
        "WHERE (?1 IS NULL OR machine = ?1) AND (?2 IS NULL OR at_ms >= ?2) AND (?3 IS NULL OR seq < ?3)
         ORDER BY seq DESC LIMIT ?4",
        params![machine, since_ms, before, limit],
    )
}

/// Trips (closed to open, forced_open or auth_failed) per machine since `since_ms`,
/// counted by SQLite: the digest's 30-day figure without loading 30 days of rows.
pub fn trips_since(path: &Path, since_ms: i64) -> Result<Vec<(String, u32)>, StoreError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(path))?;
    let mut stmt = conn
        .prepare(
            "SELECT machine, COUNT(*) FROM ledger
             WHERE at_ms >= ?1 AND from_state = ?3 AND to_state NOT IN (?3, ?4)
               AND machine != ?2
             GROUP BY machine",
        )
        .map_err(sqlite(path))?;
    let rows = stmt
        .query_map(
            params![
                since_ms,
                REGISTRY_ROW,
                Phase::Closed.as_str(),
                Phase::HalfOpen.as_str()
            ],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?.clamp(0, u32::MAX.into()) as u32,
                ))
            },
        )
        .map_err(sqlite(path))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sqlite(path))
}

/// The last ledger row of each machine before `before_ms`: its state when a window opens.
pub fn last_rows_before(path: &Path, before_ms: i64) -> Result<Vec<LedgerRow>, StoreError> {
    select_events(
        path,
        "WHERE seq IN (SELECT MAX(seq) FROM ledger WHERE at_ms < ?1 GROUP BY machine)",
        params![before_ms],
    )
}

// === Telegram's memory: meta values and counter samples ===

/// Samples are kept this long (the digest reads two days).
const COUNTERS_KEEP_MS: i64 = 3 * 24 * 3600 * 1000;

fn write_meta(tx: &rusqlite::Transaction<'_>, key: &str, value: &str) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![key, value],
    )?;
    Ok(())
}

fn write_counters(
    tx: &rusqlite::Transaction<'_>,
    at_ms: i64,
    boot_ms: i64,
    machines: &[(String, u64, u64, u64)],
) -> rusqlite::Result<()> {
    for (machine, remote, local, rerouted) in machines {
        tx.execute(
            "INSERT INTO counters (at_ms, boot_ms, machine, remote_attempts, local_rejections, rerouted) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![at_ms, boot_ms, machine, *remote as i64, *local as i64, *rerouted as i64],
        )?;
    }
    tx.execute(
        "DELETE FROM counters WHERE at_ms < ?1",
        params![at_ms - COUNTERS_KEEP_MS],
    )?;
    Ok(())
}

/// A `meta` value written with [`Msg::Meta`]; `None` when never written.
pub fn meta(path: &Path, key: &str) -> Result<Option<String>, StoreError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(path))?;
    let mut stmt = conn
        .prepare("SELECT value FROM meta WHERE key = ?1")
        .map_err(sqlite(path))?;
    let mut rows = stmt.query(params![key]).map_err(sqlite(path))?;
    match rows.next().map_err(sqlite(path))? {
        Some(row) => row.get(0).map(Some).map_err(sqlite(path)),
        None => Ok(None),
    }
}

/// One counter sample written with [`Msg::Counters`].
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSample {
    pub at_ms: i64,
    pub boot_ms: i64,
    pub machine: String,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    pub rerouted: u64,
}

/// Counter samples at or after `since_ms`, oldest first; none before the first sample.
pub fn counter_samples(path: &Path, since_ms: i64) -> Result<Vec<CounterSample>, StoreError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(path))?;
    let mut stmt = conn
        .prepare(
            "SELECT at_ms, boot_ms, machine, remote_attempts, local_rejections, rerouted FROM counters
             WHERE at_ms >= ?1 ORDER BY at_ms, rowid",
        )
        .map_err(sqlite(path))?;
    let rows = stmt
        .query_map(params![since_ms], |r| {
            Ok(CounterSample {
                at_ms: r.get(0)?,
                boot_ms: r.get(1)?,
                machine: r.get(2)?,
                remote_attempts: r.get::<_, i64>(3)?.max(0) as u64,
                local_rejections: r.get::<_, i64>(4)?.max(0) as u64,
                rerouted: r.get::<_, i64>(5)?.max(0) as u64,
            })
        })
        .map_err(sqlite(path))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(sqlite(path))
}
