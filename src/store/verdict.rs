//! Verdicts in SQLite: one row per machine, written with each transition, read at start.

use std::time::{Duration, SystemTime};

use rusqlite::{params, Connection, Row};

use super::{from_ms, ms};
pub use crate::breaker::{Restored, Verdict};

pub(super) fn upsert(
    conn: &Connection,
    machine: &str,
    v: &Verdict,
    registry_version: &str,
    at: SystemTime,
) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT INTO verdicts (machine, state, failures, opened_at_ms, cooldown_ms, open_until_ms,
                               last_reason, last_retry_after_ms, registry_version, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (machine) DO UPDATE SET state = ?2, failures = ?3, opened_at_ms = ?4,
             cooldown_ms = ?5, open_until_ms = ?6, last_reason = ?7, last_retry_after_ms = ?8,
             registry_version = ?9, updated_at_ms = ?10",
        params![
            machine,
            v.state.as_str(),
            v.failures,
            v.opened_at.map(ms),
            v.cooldown.as_millis() as i64,
            v.open_until.map(ms),
            v.last_reason,
            v.last_retry_after.map(|d| d.as_millis() as i64),
            registry_version,
            ms(at),
        ],
    )
}

pub(super) fn read_verdicts(conn: &Connection) -> rusqlite::Result<Vec<(String, Restored)>> {
    let mut stmt = conn.prepare(
        "SELECT machine, state, failures, opened_at_ms, cooldown_ms, open_until_ms, last_reason,
                last_retry_after_ms, updated_at_ms FROM verdicts",
    )?;
    let rows = stmt.query_map([], |r| {
        let machine: String = r.get(0)?;
        Ok((machine, read_row(r)))
    })?;
    rows.collect()
}

/// One row; any value out of shape makes the verdict unreadable rather than healthy.
fn read_row(r: &Row<'_>) -> Restored {
    let read = || -> Result<Restored, String> {
        let state: String = r.get(1).map_err(|e| e.to_string())?;
        let state = state
            .parse()
            .map_err(|e: crate::outcome::phase::UnknownPhase| e.to_string())?;
        let failures: i64 = r.get(2).map_err(|e| e.to_string())?;
        let cooldown: i64 = r.get(4).map_err(|e| e.to_string())?;
        if failures < 0 || cooldown < 0 {
            return Err("negative count or cooldown".into());
        }
        let opt_ms = |i: usize| r.get::<_, Option<i64>>(i).map_err(|e| e.to_string());
        let verdict = Verdict {
            state,
            failures: failures.min(u32::MAX as i64) as u32,
            opened_at: opt_ms(3)?.map(from_ms),
            cooldown: Duration::from_millis(cooldown as u64),
            open_until: opt_ms(5)?.map(from_ms),
            last_reason: r.get(6).map_err(|e| e.to_string())?,
            last_retry_after: opt_ms(7)?.map(|m| Duration::from_millis(m.max(0) as u64)),
        };
        let written: i64 = r.get(8).map_err(|e| e.to_string())?;
        Ok(Restored::Found {
            verdict,
            written: from_ms(written),
        })
    };
    read().unwrap_or_else(Restored::Unreadable)
}
