//! Reading tasks back: one, a page, what the scheduler resumes, what the views count.

use super::*;

pub(super) fn row(r: &Row<'_>) -> rusqlite::Result<Task> {
    let text = |i: usize| r.get::<_, String>(i);
    let bad = |i: usize, what: String| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
    };
    let parse = |i: usize| -> rusqlite::Result<serde_json::Value> {
        serde_json::from_str(&text(i)?).map_err(|e| bad(i, e.to_string()))
    };
    let id: TaskId = text(1)?.parse().map_err(|e| bad(1, e))?;
    let status: TaskStatus = text(3)?
        .parse()
        .map_err(|e: crate::outcome::task::UnknownStatus| bad(3, e.to_string()))?;
    let endpoint = endpoint_from(&text(4)?).ok_or_else(|| bad(4, "unknown endpoint".into()))?;
    let accept = match text(6)?.as_str() {
        "same_model" => Accept::SameModel,
        _ => Accept::Chain,
    };
    let after: Vec<TaskId> =
        serde_json::from_value(parse(8)?).map_err(|e| bad(8, e.to_string()))?;
    let metadata: BTreeMap<String, String> =
        serde_json::from_value(parse(9)?).map_err(|e| bad(9, e.to_string()))?;
    let attempts = serde_json::from_value(parse(17)?).map_err(|e| bad(17, e.to_string()))?;
    let error = match r.get::<_, Option<String>>(20)? {
        None => None,
        Some(s) => Some(serde_json::from_str(&s).map_err(|e| bad(20, e.to_string()))?),
    };
    let result = match r.get::<_, Option<String>>(19)? {
        None => None,
        Some(s) => Some(serde_json::from_str(&s).map_err(|e| bad(19, e.to_string()))?),
    };
    let callback = match r.get::<_, Option<String>>(21)? {
        None => None,
        Some(url) => Some(Callback {
            url,
            state: r
                .get::<_, Option<String>>(22)?
                .as_deref()
                .and_then(Delivery::parse)
                .unwrap_or(Delivery::Pending),
            attempts: r.get(23)?,
            last_error: r.get(24)?,
        }),
    };
    Ok(Task {
        seq: r.get(0)?,
        id,
        owner: r.get(2)?,
        status,
        endpoint,
        route: r.get(5)?,
        accept,
        priority: r.get(7)?,
        after,
        metadata,
        created_ms: r.get(10)?,
        started_ms: r.get(11)?,
        finished_ms: r.get(12)?,
        deadline_ms: r.get(13)?,
        attempts_used: r.get(14)?,
        max_attempts: r.get(15)?,
        interrupted: r.get(16)?,
        attempts,
        waiting_for: r.get(18)?,
        result,
        error,
        callback,
    })
}

/// One task by id, if it exists (and belongs to `owner`, when given).
pub fn task(conn: &Connection, id: &TaskId, owner: Option<&str>) -> rusqlite::Result<Option<Task>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)"),
        params![id.as_str(), owner],
        row,
    )
    .optional()
}

/// A task's request body.
pub fn request(conn: &Connection, id: &TaskId) -> rusqlite::Result<Option<Bytes>> {
    conn.query_row(
        "SELECT request FROM tasks WHERE id = ?1",
        params![id.as_str()],
        |r| r.get::<_, Vec<u8>>(0),
    )
    .optional()
    .map(|b| b.map(Bytes::from))
}

/// Tasks newest first: of `owner` (all when `None`), with `status` when given, older than
/// the `before` seq, at most `limit`.
pub fn list(
    conn: &Connection,
    owner: Option<&str>,
    status: Option<TaskStatus>,
    before: Option<i64>,
    limit: u32,
) -> rusqlite::Result<Vec<Task>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM tasks
         WHERE (?1 IS NULL OR owner = ?1) AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR seq < ?3)
         ORDER BY seq DESC LIMIT ?4"
    ))?;
    let rows = stmt.query_map(
        params![owner, status.map(TaskStatus::as_str), before, limit],
        row,
    )?;
    rows.collect()
}

/// Every task not finished, oldest first: what the scheduler resumes at start.
pub fn unfinished(conn: &Connection) -> rusqlite::Result<Vec<Task>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM tasks WHERE status IN (?1, ?2, ?3, ?4) ORDER BY seq"
    ))?;
    let s = |t: TaskStatus| t.as_str();
    let rows = stmt.query_map(
        params![
            s(TaskStatus::Blocked),
            s(TaskStatus::Queued),
            s(TaskStatus::Waiting),
            s(TaskStatus::Running)
        ],
        row,
    )?;
    rows.collect()
}

/// The task an Idempotency-Key of `owner` made, with the fingerprint of its body.
pub fn by_key(
    conn: &Connection,
    owner: &str,
    key: &str,
) -> rusqlite::Result<Option<(TaskId, String)>> {
    let seen: Option<(String, String)> = conn
        .query_row(
            "SELECT id, idem_fingerprint FROM tasks WHERE owner = ?1 AND idem_key = ?2",
            params![owner, key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(seen.and_then(|(id, f)| Some((id.parse().ok()?, f))))
}

/// How each finished task that an unfinished one follows ended: a restart decides the
/// follow-ups of parents that ended without success.
pub fn finished_parents(
    conn: &Connection,
) -> rusqlite::Result<std::collections::HashMap<TaskId, TaskStatus>> {
    let mut stmt = conn.prepare(
        "SELECT p.id, p.status FROM tasks AS p WHERE p.finished_ms IS NOT NULL AND p.id IN (
            SELECT j.value FROM tasks AS c, json_each(c.after) AS j WHERE c.finished_ms IS NULL)",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = std::collections::HashMap::new();
    for r in rows {
        let (id, status) = r?;
        if let (Ok(id), Ok(status)) = (id.parse::<TaskId>(), status.parse::<TaskStatus>()) {
            out.insert(id, status);
        }
    }
    Ok(out)
}

/// Tasks whose callback is still to be delivered.
pub fn undelivered(conn: &Connection) -> rusqlite::Result<Vec<Task>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM tasks WHERE callback_state = ?1 AND finished_ms IS NOT NULL
         ORDER BY seq"
    ))?;
    let rows = stmt.query_map(params![Delivery::Pending.as_str()], row)?;
    rows.collect()
}

/// Finished tasks whose callback is still to be delivered, oldest first, each with when
/// its next attempt is due (unix ms; `None`: none made yet, due now).
pub fn pending_callbacks(conn: &Connection) -> rusqlite::Result<Vec<(TaskId, Option<i64>)>> {
    let mut stmt = conn.prepare(
        "SELECT id, callback_next_ms FROM tasks
         WHERE callback_state = ?1 AND finished_ms IS NOT NULL ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![Delivery::Pending.as_str()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (id, next) = r?;
        // A row with a malformed id cannot be shown either; it is skipped, not fatal.
        if let Ok(id) = id.parse::<TaskId>() {
            out.push((id, next));
        }
    }
    Ok(out)
}

/// How many tasks finished in each terminal status since `since_ms`.
pub fn finished_since(
    conn: &Connection,
    since_ms: i64,
) -> rusqlite::Result<Vec<(TaskStatus, u64)>> {
    let mut stmt =
        conn.prepare("SELECT status, COUNT(*) FROM tasks WHERE finished_ms >= ?1 GROUP BY status")?;
    let rows = stmt.query_map(params![since_ms], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for r in rows {
        let (s, n) = r?;
        if let Ok(s) = s.parse::<TaskStatus>() {
            out.push((s, n.max(0) as u64));
        }
    }
    Ok(out)
}

// === reads for the views (`/status`, the dashboard, the digest) ===

/// A task that ended failed or expired, as the views list it (no bodies).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub id: TaskId,
    pub status: TaskStatus,
    pub finished_ms: i64,
    pub error: Option<TaskError>,
}

/// The `limit` latest tasks of `owner` (any when `None`) that ended failed or expired at
/// or after `since_ms`, newest first. A row this version cannot read is skipped, not an
/// error: a view stays up.
pub fn failures(
    conn: &Connection,
    owner: Option<&str>,
    since_ms: i64,
    limit: u32,
) -> rusqlite::Result<Vec<Failure>> {
    let mut stmt = conn.prepare(
        "SELECT id, status, finished_ms, error FROM tasks
         WHERE status IN (?1, ?2) AND finished_ms >= ?3 AND (?5 IS NULL OR owner = ?5)
         ORDER BY finished_ms DESC, seq DESC LIMIT ?4",
    )?;
    let rows = stmt.query_map(
        params![
            TaskStatus::Failed.as_str(),
            TaskStatus::Expired.as_str(),
            since_ms,
            limit,
            owner
        ],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        },
    )?;
    let mut out = Vec::new();
    for r in rows {
        let (id, status, finished_ms, error) = r?;
        let (Ok(id), Ok(status)) = (id.parse::<TaskId>(), status.parse::<TaskStatus>()) else {
            continue;
        };
        out.push(Failure {
            id,
            status,
            finished_ms,
            error: error.and_then(|e| serde_json::from_str(&e).ok()),
        });
    }
    Ok(out)
}

/// A succeeded task's times and attempt records, for the digest's "waited out an outage".
#[derive(Clone, Debug, PartialEq)]
pub struct Waited {
    pub id: TaskId,
    pub created_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: i64,
    pub attempts: Vec<AttemptRecord>,
}

/// Tasks that succeeded at or after `since_ms` and may have waited: with attempt records
/// (a task served by its first walk has none) or first started a second or more after
/// their submit. Oldest first, at most `limit`.
pub fn succeeded_after_waiting(
    conn: &Connection,
    since_ms: i64,
    limit: u32,
) -> rusqlite::Result<Vec<Waited>> {
    let mut stmt = conn.prepare(
        "SELECT id, created_ms, started_ms, finished_ms, attempts FROM tasks
         WHERE status = ?1 AND finished_ms >= ?2
           AND (attempts != '[]' OR started_ms - created_ms >= 1000)
         ORDER BY finished_ms, seq LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![TaskStatus::Succeeded.as_str(), since_ms, limit],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<i64>>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
            ))
        },
    )?;
    let mut out = Vec::new();
    for r in rows {
        let (id, created_ms, started_ms, finished_ms, attempts) = r?;
        let (Ok(id), Ok(attempts)) = (id.parse::<TaskId>(), serde_json::from_str(&attempts)) else {
            continue;
        };
        out.push(Waited {
            id,
            created_ms,
            started_ms,
            finished_ms,
            attempts,
        });
    }
    Ok(out)
}

/// How many tasks are not finished (blocked, queued, waiting or running), as the store
/// has them.
pub fn unfinished_count(conn: &Connection) -> rusqlite::Result<u64> {
    let s = |t: TaskStatus| t.as_str();
    conn.query_row(
        "SELECT COUNT(*) FROM tasks WHERE status IN (?1, ?2, ?3, ?4)",
        params![
            s(TaskStatus::Blocked),
            s(TaskStatus::Queued),
            s(TaskStatus::Waiting),
            s(TaskStatus::Running)
        ],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n.max(0) as u64)
}

/// Runs `f` on a read-only connection to the store at `path`: the digest reads a file it
/// may not own (`labrouter digest` beside a running router, or none).
pub fn read_at<T>(
    path: &std::path::Path,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> Result<T, crate::store::StoreError> {
    let conn = crate::store::schema::open_read_only(path)?;
    f(&conn).map_err(crate::store::sqlite(path))
}

/// Whether the file has a tasks table: a store last written by a version without tasks
/// has none, and a read-only connection cannot add it.
pub fn has_table(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks')",
        [],
        |r| r.get(0),
    )
}
