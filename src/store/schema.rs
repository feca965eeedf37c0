//! The schema: migrations applied in order on open, and the connection settings every
//! connection to the file shares (WAL beside one writer, a busy timeout).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{sqlite, StoreError};

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
    // 3: tasks (docs/api.md "Tasks"). The request body stays here until the task runs; `attempts`,
    // `result`, `error`, `after` and `metadata` are JSON text. `owner` is a hash of the API
    // key that submitted it ('' without keys); `idem_key` a hash of its Idempotency-Key.
    "CREATE TABLE tasks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        owner TEXT NOT NULL,
        status TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        route TEXT,
        accept TEXT NOT NULL,
        priority INTEGER NOT NULL,
        after TEXT NOT NULL,
        metadata TEXT NOT NULL,
        request BLOB NOT NULL,
        created_ms INTEGER NOT NULL,
        started_ms INTEGER,
        finished_ms INTEGER,
        deadline_ms INTEGER NOT NULL,
        attempts_used INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        interrupted INTEGER NOT NULL,
        attempts TEXT NOT NULL,
        waiting_for TEXT,
        result TEXT,
        error TEXT,
        callback_url TEXT,
        callback_state TEXT,
        callback_attempts INTEGER NOT NULL,
        callback_last_error TEXT,
        callback_next_ms INTEGER,
        idem_key TEXT,
        idem_fingerprint TEXT,
        UNIQUE (owner, idem_key)
    );
    CREATE INDEX tasks_status ON tasks (status, seq);
    CREATE INDEX tasks_finished ON tasks (finished_ms);
    CREATE INDEX tasks_owner_seq ON tasks (owner, seq);",
    // 4: answers kept for Idempotency-Key on completions and embeddings (docs/api.md "Tasks"): a
    // hash of the key scoped by `owner`, the body's fingerprint, and the machine's answer.
    "CREATE TABLE idempotent_answers (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        content_type TEXT,
        headers TEXT NOT NULL,
        body BLOB NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, key)
    );
    CREATE INDEX idempotent_answers_created ON idempotent_answers (created_ms);",
    // 5: the finished tasks' count and bytes, kept by triggers, so bounding them
    // (`tasks.max_finished`, `tasks.max_finished_bytes`) reads one row, not every task.
    "CREATE TABLE task_totals (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        finished INTEGER NOT NULL,
        finished_bytes INTEGER NOT NULL
    );
    INSERT INTO task_totals (id, finished, finished_bytes)
        SELECT 1, COUNT(*), IFNULL(SUM(octet_length(request) + IFNULL(octet_length(result), 0)
            + octet_length(attempts) + IFNULL(octet_length(error), 0)
            + octet_length(metadata) + octet_length(after)), 0)
        FROM tasks WHERE finished_ms IS NOT NULL;
    CREATE TRIGGER task_totals_insert AFTER INSERT ON tasks WHEN NEW.finished_ms IS NOT NULL
    BEGIN
        UPDATE task_totals SET finished = finished + 1,
            finished_bytes = finished_bytes + octet_length(NEW.request)
                + IFNULL(octet_length(NEW.result), 0) + octet_length(NEW.attempts)
                + IFNULL(octet_length(NEW.error), 0) + octet_length(NEW.metadata)
                + octet_length(NEW.after)
        WHERE id = 1;
    END;
    CREATE TRIGGER task_totals_update AFTER UPDATE ON tasks
        WHEN OLD.finished_ms IS NOT NULL OR NEW.finished_ms IS NOT NULL
    BEGIN
        UPDATE task_totals SET
            finished = finished + (NEW.finished_ms IS NOT NULL) - (OLD.finished_ms IS NOT NULL),
            finished_bytes = finished_bytes
                + CASE WHEN NEW.finished_ms IS NULL THEN 0 ELSE octet_length(NEW.request)
                    + IFNULL(octet_length(NEW.result), 0) + octet_length(NEW.attempts)
                    + IFNULL(octet_length(NEW.error), 0) + octet_length(NEW.metadata)
                    + octet_length(NEW.after) END
                - CASE WHEN OLD.finished_ms IS NULL THEN 0 ELSE octet_length(OLD.request)
                    + IFNULL(octet_length(OLD.result), 0) + octet_length(OLD.attempts)
                    + IFNULL(octet_length(OLD.error), 0) + octet_length(OLD.metadata)
                    + octet_length(OLD.after) END
        WHERE id = 1;
    END;
    CREATE TRIGGER task_totals_delete AFTER DELETE ON tasks WHEN OLD.finished_ms IS NOT NULL
    BEGIN
        UPDATE task_totals SET finished = finished - 1,
            finished_bytes = finished_bytes - octet_length(OLD.request)
                - IFNULL(octet_length(OLD.result), 0) - octet_length(OLD.attempts)
                - IFNULL(octet_length(OLD.error), 0) - octet_length(OLD.metadata)
                - octet_length(OLD.after)
        WHERE id = 1;
    END;",
    // 6: Responses kept for their conversations (`previous_response_id`), by owner.
    "CREATE TABLE responses (
        owner TEXT NOT NULL,
        id TEXT NOT NULL,
        previous TEXT,
        input TEXT NOT NULL,
        output TEXT NOT NULL,
        response TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, id)
    );
    CREATE INDEX responses_created ON responses (created_ms);",
];

/// The most the write-ahead log keeps on disk between checkpoints, in bytes.
const WAL_LIMIT: i64 = 8 << 20;

/// How hard a commit waits for the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a committed transaction survives a power cut.
    Full,
    /// `synchronous=NORMAL`: survives a crash of the process, not of the machine (benchmarks
    /// show what durability costs).
    Normal,
}

/// The writer's connection (and start-up's): WAL, so readers run beside it. With
/// [`Durability::Full`] (the default) a commit is on disk when it returns: a task is
/// acknowledged only after its commit (docs/api.md "Tasks"), and group commit keeps the cost per
/// submit small.
pub(super) fn open_conn_with(
    path: &Path,
    durability: Durability,
) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sqlite(path))?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(sqlite(path))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite(path))?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(sqlite(path))?;
    // The WAL is truncated to this after each checkpoint: a burst of large writes does not
    // leave a large file behind.
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT)
        .map_err(sqlite(path))?;
    #[cfg(target_os = "macos")]
    if durability == Durability::Full {
        conn.pragma_update(None, "fullfsync", "ON")
            .map_err(sqlite(path))?;
    }
    Ok(conn)
}

/// A reader's connection (`/status/events`, the digest): it never writes.
pub(super) fn open_read_only(path: &Path) -> Result<Connection, StoreError> {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sqlite(path))
}

/// Runs the migrations the file has not seen yet, each in its own transaction.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
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
