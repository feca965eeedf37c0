//! Counter samples: each machine's cumulative counters written every minute
//! ([`crate::sample`]), so the daily digest can count a day's requests across restarts.
//! Counters restart at zero with the process, so each sample names its process (`boot_ms`).

use std::path::Path;

use rusqlite::{params, Transaction};

use super::schema::open_read_only;
use super::{sqlite, StoreError};

/// Every sample is kept this long (the digest reads two days).
const COUNTERS_KEEP_MS: i64 = 3 * 24 * 3600 * 1000;

/// Older samples are thinned to the last of each hour of each process and kept this long
/// (`GET /status/history` spans up to 90 days; a day before the span is its baseline).
pub const COUNTERS_HOURLY_KEEP_MS: i64 = 92 * 24 * 3600 * 1000;

const HOUR_MS: i64 = 3600 * 1000;

/// One machine's live counters, as [`super::Msg::Counters`] carries them.
#[derive(Clone, Debug, PartialEq)]
pub struct Counts {
    pub machine: String,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    /// Requests this machine skipped or failed that another target served.
    pub rerouted: u64,
}

/// One counter sample written with [`super::Msg::Counters`].
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSample {
    pub at_ms: i64,
    pub boot_ms: i64,
    pub machine: String,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    pub rerouted: u64,
}

/// One row per machine at `at_ms`. Samples older than [`COUNTERS_KEEP_MS`] are thinned to
/// the last of their hour and process: counters are cumulative, so a day's increase stays
/// the same, only placed by the hour (the thinning looks one day back, so a router stopped
/// longer leaves some minutes unthinned). Older than [`COUNTERS_HOURLY_KEEP_MS`]: gone.
pub(super) fn write(
    tx: &Transaction<'_>,
    at_ms: i64,
    boot_ms: i64,
    machines: &[Counts],
) -> rusqlite::Result<()> {
    for c in machines {
        tx.execute(
            "INSERT INTO counters (at_ms, boot_ms, machine, remote_attempts, local_rejections, rerouted) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                at_ms,
                boot_ms,
                c.machine,
                c.remote_attempts as i64,
                c.local_rejections as i64,
                c.rerouted as i64
            ],
        )?;
    }
    let fine = at_ms - COUNTERS_KEEP_MS;
    tx.execute(
        "DELETE FROM counters WHERE at_ms >= ?1 AND at_ms < ?2 AND rowid NOT IN (
            SELECT MAX(rowid) FROM counters WHERE at_ms >= ?1 AND at_ms < ?2
            GROUP BY machine, boot_ms, at_ms / ?3)",
        params![fine - 24 * HOUR_MS, fine, HOUR_MS],
    )?;
    tx.execute(
        "DELETE FROM counters WHERE at_ms < ?1",
        params![at_ms - COUNTERS_HOURLY_KEEP_MS],
    )?;
    Ok(())
}

/// Counter samples at or after `since_ms`, oldest first; none before the first sample.
pub fn counter_samples(path: &Path, since_ms: i64) -> Result<Vec<CounterSample>, StoreError> {
    let conn = open_read_only(path)?;
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
