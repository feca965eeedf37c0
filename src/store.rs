//! Memory across restarts (README "What it remembers"): breaker verdicts, the transition ledger and
//! the digest's counter samples in one SQLite file under `state_dir`.
//!
//! rusqlite is synchronous, so every write goes over a channel to one writer thread: a
//! breaker decision never waits on disk. Reads (start-up, `/status/events`, the digest) open
//! their own connection; WAL mode lets them run beside the writer.
//!
//! This file holds the [`Store`] (open, recall, the writer's lifetime); each table's SQL
//! lives with its concept:
//! - `schema`: migrations and connection settings.
//! - `writer`: the writer thread and its [`Msg`].
//! - `verdict`: one breaker verdict per machine, read back at start.
//! - `ledger`: the transition ledger, its [`LedgerRow`] and its reads.
//! - `meta`: small named values ([`meta()`]); `counters`: counter samples.
//! - [`history`]: the history's aggregated reads (SPEC §16), cut into days by SQLite.
//! - [`tasks`]: tasks (docs/api.md "Tasks"), written in the batch that acknowledges them.
//! - `answers`: answers kept for `Idempotency-Key` ([`KeptAnswer`], [`answer()`]).
//! - [`responses`]: Responses kept for their conversations (`previous_response_id`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

mod answers;
mod counters;
pub mod history;
mod ledger;
mod meta;
pub mod responses;
mod schema;
pub mod tasks;
mod verdict;
mod writer;

pub use answers::{answer, KeptAnswer, ANSWERS_KEEP};
pub use counters::{counter_samples, CounterSample, Counts};
pub use ledger::{events, last_rows_before, trips_since, LedgerRow, CLUSTER_ROW, REGISTRY_ROW};
pub use meta::meta;
pub use verdict::{Restored, Verdict};
pub use writer::Msg;

pub use schema::Durability;
use schema::{migrate, open_conn_with};

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

/// The lock file inside `state_dir`: held shared by every open [`Store`] (a router), and
/// exclusively by `labrouter task import`, so an import never writes under a running router.
const LOCK: &str = "labrouter.lock";

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
    /// [`LOCK`], held shared while the store is open (`None` where it cannot be made).
    _lock: Option<std::fs::File>,
    tx: mpsc::Sender<Msg>,
    /// Taken by `Drop` to wait for the last writes.
    writer: Option<JoinHandle<()>>,
    /// Read-only connections kept for [`Store::read`]: opening one re-reads the schema,
    /// which was most of a task submit's cost.
    readers: std::sync::Mutex<Vec<Connection>>,
}

/// At most this many idle read connections are kept.
const READERS_KEPT: usize = 4;

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

impl Store {
    /// Opens (creating and migrating) the store in `state_dir` and reads its verdicts.
    /// A file that cannot be read is moved aside and a fresh one created; its machines are
    /// reported [`Restored::Unreadable`] so they start open (fail closed).
    pub fn open(state_dir: &Path) -> Result<(Store, Recalled), StoreError> {
        Store::open_with(state_dir, Durability::Full)
    }

    /// [`Store::open`] with the writer committing as `durability` says (benchmarks).
    pub fn open_with(
        state_dir: &Path,
        durability: Durability,
    ) -> Result<(Store, Recalled), StoreError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::Io {
            path: state_dir.display().to_string(),
            source,
        })?;
        let lock = lock_shared(state_dir)?;
        let path = state_dir.join(FILE);
        let (conn, restored) = match Store::read_all(&path, durability) {
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
                let mut conn = open_conn_with(&path, durability)?;
                migrate(&mut conn, &path)?;
                (conn, Recalled::Unreadable(e.to_string()))
            }
        };
        let (tx, rx) = mpsc::channel::<Msg>();
        let writer_path = path.clone();
        let writer = std::thread::Builder::new()
            .name("labrouter-store".into())
            .spawn(move || writer::write_loop(conn, rx, &writer_path))
            .map_err(|source| StoreError::Io {
                path: path.display().to_string(),
                source,
            })?;
        Ok((
            Store {
                path,
                _lock: lock,
                tx,
                writer: Some(writer),
                readers: std::sync::Mutex::new(Vec::new()),
            },
            restored,
        ))
    }

    fn read_all(path: &Path, durability: Durability) -> Result<(Connection, Recalled), StoreError> {
        let mut conn = open_conn_with(path, durability)?;
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

    /// Where transitions go to be written: the breakers' bus sends them here.
    pub fn sender(&self) -> mpsc::Sender<Msg> {
        self.tx.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on a fresh read-only connection (blocking: call it off the async threads).
    pub fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let kept = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match kept {
            Some(c) => c,
            None => schema::open_read_only(&self.path)?,
        };
        let out = f(&conn).map_err(sqlite(&self.path));
        let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if readers.len() < READERS_KEPT {
            readers.push(conn);
        }
        out
    }

    /// Asks the writer to delete ledger rows older than `keep`, and idempotent answers older
    /// than [`ANSWERS_KEEP`] (README "Safety": the database does not grow without bound).
    pub fn prune(&self, keep: Duration) {
        let now = crate::clock::wall();
        let before = |keep| ms(now.checked_sub(keep).unwrap_or(UNIX_EPOCH));
        let _ = self.tx.send(Msg::Prune {
            before_ms: before(keep),
        });
        let _ = self.tx.send(Msg::PruneAnswers {
            before_ms: before(ANSWERS_KEEP),
        });
    }

    /// Asks the writer to delete tasks finished longer than `keep` ago (`tasks.keep`), and
    /// with them their Idempotency-Keys; a parent that a follow-up still waits on stays.
    pub fn prune_tasks(&self, keep: Duration) {
        let before = crate::clock::wall().checked_sub(keep).unwrap_or(UNIX_EPOCH);
        let _ = self.tx.send(Msg::TaskPrune {
            before_ms: ms(before),
        });
    }

    /// Asks the writer to delete Responses kept longer than `keep` (`server.keep_responses`).
    pub fn prune_responses(&self, keep: Duration) {
        let before = crate::clock::wall().checked_sub(keep).unwrap_or(UNIX_EPOCH);
        let _ = self.tx.send(Msg::PruneResponses {
            before_ms: ms(before),
        });
    }

    /// Blocks until every transition sent so far is written (at most `limit`).
    pub fn flush(&self, limit: Duration) -> bool {
        let (ack, done) = mpsc::channel();
        self.tx.send(Msg::Flush(ack)).is_ok() && done.recv_timeout(limit).is_ok()
    }
}

/// [`LOCK`] in `state_dir`, shared: refused while an import holds it; `None` where the file
/// cannot be made or locked (a read-only directory): the store opens anyway.
fn lock_shared(state_dir: &Path) -> Result<Option<std::fs::File>, StoreError> {
    let path = state_dir.join(LOCK);
    let Ok(file) = lock_file(&path) else {
        return Ok(None);
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(
                "labrouter task import is writing this store; start again once it finished",
            ),
        }),
        Err(std::fs::TryLockError::Error(e)) => {
            tracing::warn!(error = %e, path = %path.display(), "state store: cannot lock; an import could run beside this router");
            Ok(None)
        }
    }
}

/// [`LOCK`] in `state_dir`, exclusive (`labrouter task import`): refused while a router
/// has the store open.
pub(crate) fn lock_alone(state_dir: &Path) -> Result<std::fs::File, tasks::moving::Refused> {
    let path = state_dir.join(LOCK);
    let file = lock_file(&path).map_err(|source| StoreError::Io {
        path: path.display().to_string(),
        source,
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(tasks::moving::Refused::RouterRunning(
            state_dir.join(FILE).display().to_string(),
        )),
        Err(std::fs::TryLockError::Error(source)) => Err(StoreError::Io {
            path: path.display().to_string(),
            source,
        }
        .into()),
    }
}

fn lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}
