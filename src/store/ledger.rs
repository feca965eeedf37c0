//! The transition ledger (README "What it remembers"): one row per breaker transition and per
//! registry reload, written by the writer thread; read newest first by `/status/events`, and by the
//! digest as one day of rows, 30 days of trip counts, and each machine's state at a window's start.

use std::path::Path;
use std::time::SystemTime;

use rusqlite::{params, Transaction};

use super::schema::open_read_only;
use super::{from_ms, ms, sqlite, StoreError};
use crate::breaker::{Phase, Transitioned};

/// The machine name of registry rows in the ledger.
pub const REGISTRY_ROW: &str = "(registry)";
/// The machine name of the rows that record the link to the other routers (README "Several
/// routers").
pub const CLUSTER_ROW: &str = "(cluster)";

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

// === writes (the writer thread) ===

pub(super) fn insert_transition(tx: &Transaction<'_>, t: &Transitioned) -> rusqlite::Result<()> {
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
    Ok(())
}

/// A row that is no breaker's: a registry reload ([`REGISTRY_ROW`]) or the cluster link
/// going down or up ([`CLUSTER_ROW`]).
pub(super) fn insert_note(
    tx: &Transaction<'_>,
    at: SystemTime,
    row: &str,
    from: &str,
    to: &str,
    reason: &str,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                             remote_attempted, registry_version, remote_attempts, local_rejections)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL, 0, ?6, 0, 0)",
        params![ms(at), row, from, to, reason, to],
    )?;
    Ok(())
}

/// Deletes rows older than `before_ms` (`server.keep_ledger`).
pub(super) fn prune(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<()> {
    let gone = tx.execute("DELETE FROM ledger WHERE at_ms < ?1", params![before_ms])?;
    if gone > 0 {
        tracing::info!(
            rows = gone,
            "ledger rows older than server.keep_ledger pruned"
        );
    }
    Ok(())
}

// === reads (their own read-only connection) ===

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
    let conn = open_read_only(path)?;
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
    let conn = open_read_only(path)?;
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
