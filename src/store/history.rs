//! The history's reads (SPEC §16, `GET /status/history`): four aggregated queries on one
//! read-only connection — trips, down intervals, counter increases and finished tasks — each
//! cut into the caller's day bounds by SQLite (`GROUP BY`), so a 90-day span never loads 90
//! days of rows. Down intervals are handed over one at a time, never collected.

use std::path::Path;

use rusqlite::{params, Connection};

use super::schema::open_read_only;
use super::{sqlite, StoreError, CLUSTER_ROW, REGISTRY_ROW};

/// Counter samples this long before the span are read too: the first sample inside it
/// counts from the one before, not from zero.
const MARGIN_MS: i64 = 24 * 3600 * 1000;

/// A span to read: `bounds[i]..bounds[i + 1]` is day `i`; nothing at or after `now_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Span<'a> {
    pub bounds: &'a [i64],
    pub now_ms: i64,
}

/// Trips of one machine on one day.
#[derive(Clone, Debug, PartialEq)]
pub struct DayTrips {
    pub machine: String,
    pub day: usize,
    pub trips: u32,
}

/// One machine's counter increases on one day, summed across restarts.
#[derive(Clone, Debug, PartialEq)]
pub struct DayCounts {
    pub machine: String,
    pub day: usize,
    /// The increase of `remote_attempts`: requests sent to it.
    pub served: u64,
    pub rejected: u64,
    pub rerouted: u64,
}

/// Tasks that ended on one day whose last attempt was `target` (`NAME@MACHINE`).
#[derive(Clone, Debug, PartialEq)]
pub struct DayTasks {
    pub target: String,
    pub day: usize,
    pub finished: u64,
    pub failed: u64,
}

/// A time a machine's breaker was not closed, from its ledger rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Down {
    pub machine: String,
    pub from_ms: i64,
    /// When it closed again; `None`: not by the ledger's last row.
    pub until_ms: Option<i64>,
    /// The machine's last ledger row at or before `now`.
    pub last_ms: i64,
}

/// What the aggregated queries returned (the down intervals went to the caller's closure).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregated {
    pub trips: Vec<DayTrips>,
    pub counts: Vec<DayCounts>,
    pub tasks: Vec<DayTasks>,
}

/// `WITH days(i, lo, hi) AS (VALUES ...)` for the bounds: integers only, no text from outside.
fn days_cte(bounds: &[i64]) -> String {
    let rows: Vec<String> = bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| format!("({i}, {}, {})", w[0], w[1]))
        .collect();
    format!("WITH days(i, lo, hi) AS (VALUES {})", rows.join(", "))
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        params![name],
        |r| r.get(0),
    )
}

fn count(v: i64) -> u64 {
    v.max(0) as u64
}

/// Reads the span from the store at `path`; each down interval that reaches into the span
/// goes to `on_down` as it is read.
pub fn history(
    path: &Path,
    span: Span<'_>,
    on_down: impl FnMut(Down),
) -> Result<Aggregated, StoreError> {
    if span.bounds.len() < 2 {
        return Ok(Aggregated::default());
    }
    let conn = open_read_only(path)?;
    let read = || -> rusqlite::Result<Aggregated> {
        down(&conn, span, on_down)?;
        Ok(Aggregated {
            trips: trips(&conn, span)?,
            counts: if has_table(&conn, "counters")? {
                counts(&conn, span)?
            } else {
                Vec::new()
            },
            tasks: if has_table(&conn, "tasks")? {
                tasks(&conn, span)?
            } else {
                Vec::new()
            },
        })
    };
    read().map_err(sqlite(path))
}

/// Only the counter increases of the span (the dashboard's last 24 h, by the hour).
pub fn counter_increases(path: &Path, span: Span<'_>) -> Result<Vec<DayCounts>, StoreError> {
    if span.bounds.len() < 2 {
        return Ok(Vec::new());
    }
    let conn = open_read_only(path)?;
    let read = || -> rusqlite::Result<Vec<DayCounts>> {
        if has_table(&conn, "counters")? {
            counts(&conn, span)
        } else {
            Ok(Vec::new())
        }
    };
    read().map_err(sqlite(path))
}

fn lo(span: Span<'_>) -> i64 {
    span.bounds.first().copied().unwrap_or(0)
}

/// Nothing after `now`, nothing after the last day.
fn hi(span: Span<'_>) -> i64 {
    span.bounds
        .last()
        .copied()
        .unwrap_or(0)
        .min(span.now_ms.saturating_add(1))
}

/// Trips (closed to any down state but half-open) per machine and day.
fn trips(conn: &Connection, span: Span<'_>) -> rusqlite::Result<Vec<DayTrips>> {
    let sql = format!(
        "{} SELECT l.machine, d.i, COUNT(*) FROM ledger l
             JOIN days d ON l.at_ms >= d.lo AND l.at_ms < d.hi
         WHERE l.at_ms >= ?1 AND l.at_ms < ?2 AND l.machine NOT IN (?3, ?4)
           AND l.from_state = 'closed' AND l.to_state NOT IN ('closed', 'half_open')
         GROUP BY l.machine, d.i",
        days_cte(span.bounds)
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(
        params![lo(span), hi(span), REGISTRY_ROW, CLUSTER_ROW],
        |r| {
            Ok(DayTrips {
                machine: r.get(0)?,
                day: r.get::<_, i64>(1)?.max(0) as usize,
                trips: r.get::<_, i64>(2)?.clamp(0, u32::MAX.into()) as u32,
            })
        },
    )?;
    rows.collect()
}

/// The intervals each machine spent not closed that end in the span or run on, from its
/// rows in the span and its last row before it (its state when the span began). Only the
/// rows where a machine goes down or comes back up are paired, by SQLite.
fn down(conn: &Connection, span: Span<'_>, mut on_down: impl FnMut(Down)) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(
        "WITH marked AS (
            SELECT seq, machine, at_ms, to_state <> 'closed' AS down,
                   LAG(to_state <> 'closed') OVER (PARTITION BY machine ORDER BY seq) AS was,
                   MAX(at_ms) OVER (PARTITION BY machine) AS last_ms
            FROM ledger
            WHERE machine NOT IN (?3, ?4) AND at_ms < ?2
              AND (at_ms >= ?1 OR seq IN (SELECT MAX(seq) FROM ledger
                                          WHERE at_ms < ?1 AND machine NOT IN (?3, ?4)
                                          GROUP BY machine))
         ),
         edges AS (
            SELECT machine, at_ms, down, last_ms,
                   LEAD(at_ms) OVER (PARTITION BY machine ORDER BY seq) AS until
            FROM marked WHERE was IS NULL OR was <> down
         )
         SELECT machine, at_ms, until, last_ms FROM edges
         WHERE down AND (until IS NULL OR until > ?1)",
    )?;
    let mut rows = stmt.query(params![lo(span), hi(span), REGISTRY_ROW, CLUSTER_ROW])?;
    while let Some(r) = rows.next()? {
        on_down(Down {
            machine: r.get(0)?,
            from_ms: r.get(1)?,
            until_ms: r.get(2)?,
            last_ms: r.get(3)?,
        });
    }
    Ok(())
}

/// Counter increases per machine and day: each sample adds what it counted since the
/// sample before it of the same process; a process's first sample counts from zero when
/// the process started inside the read (else nothing can be attributed).
fn counts(conn: &Connection, span: Span<'_>) -> rusqlite::Result<Vec<DayCounts>> {
    let delta = |col: &str| {
        format!(
            "CASE WHEN LAG({col}) OVER w IS NULL
                  THEN (CASE WHEN boot_ms >= ?1 THEN {col} ELSE 0 END)
                  ELSE MAX({col} - LAG({col}) OVER w, 0) END AS {col}"
        )
    };
    let sql = format!(
        "{}, s AS (
            SELECT machine, at_ms, {}, {}, {} FROM counters
            WHERE at_ms >= ?1 AND at_ms < ?2
            WINDOW w AS (PARTITION BY machine, boot_ms ORDER BY at_ms, rowid)
         )
         SELECT s.machine, d.i, SUM(remote_attempts), SUM(local_rejections), SUM(rerouted)
         FROM s JOIN days d ON s.at_ms >= d.lo AND s.at_ms < d.hi
         GROUP BY s.machine, d.i",
        days_cte(span.bounds),
        delta("remote_attempts"),
        delta("local_rejections"),
        delta("rerouted"),
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![lo(span) - MARGIN_MS, hi(span)], |r| {
        Ok(DayCounts {
            machine: r.get(0)?,
            day: r.get::<_, i64>(1)?.max(0) as usize,
            served: count(r.get(2)?),
            rejected: count(r.get(3)?),
            rerouted: count(r.get(4)?),
        })
    })?;
    rows.collect()
}

/// Tasks that succeeded, failed or expired, per target of their last attempt and day of
/// their end (a succeeded task's target is the one its result names).
fn tasks(conn: &Connection, span: Span<'_>) -> rusqlite::Result<Vec<DayTasks>> {
    let sql = format!(
        "{} SELECT COALESCE(
                    CASE WHEN json_valid(t.result) THEN json_extract(t.result, '$.target') END,
                    CASE WHEN json_valid(t.attempts) THEN json_extract(t.attempts, '$[#-1].target') END
                ) AS target, d.i,
                SUM(t.status = 'succeeded'), SUM(t.status IN ('failed', 'expired'))
         FROM tasks t JOIN days d ON t.finished_ms >= d.lo AND t.finished_ms < d.hi
         WHERE t.finished_ms >= ?1 AND t.finished_ms < ?2
           AND t.status IN ('succeeded', 'failed', 'expired')
         GROUP BY target, d.i",
        days_cte(span.bounds)
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![lo(span), hi(span)], |r| {
        Ok(DayTasks {
            target: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
            day: r.get::<_, i64>(1)?.max(0) as usize,
            finished: count(r.get(2)?),
            failed: count(r.get(3)?),
        })
    })?;
    rows.collect()
}
