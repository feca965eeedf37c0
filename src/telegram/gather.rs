//! The digest's inputs, gathered: ledger rows and counter samples from the store, the
//! host's health, and for `labrouter digest` (no router at hand) the machines' states as the
//! ledger last recorded them.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::digest::{self, Host, MachineNow, Row, Sample};
use super::TelegramError;
use crate::outcome::Phase;
use crate::registry::Registry;
use crate::store::{self, StoreError};

/// What the digest reads from the store.
#[derive(Debug, Default)]
pub struct Stored {
    /// Ledger rows of the last day (at most [`DAY_ROWS`]), oldest first, after each
    /// machine's last row before it (its state when the day began); no registry rows.
    pub rows: Vec<Row>,
    /// Counter samples of the last two days.
    pub samples: Vec<Sample>,
    /// Trips per machine in the last 30 days, counted by SQLite.
    pub month_trips: Vec<(String, u32)>,
}

/// The most ledger rows one digest loads: a machine flapping all day is still a bounded read.
pub const DAY_ROWS: u32 = 100_000;

/// The digest's inputs from the store at `path`; nothing when there is no store yet. Reads
/// are bounded whatever the ledger holds: one day of rows, 30 days as counts.
pub fn read_store(path: &Path, now: Timestamp) -> Result<Stored, StoreError> {
    if !path.exists() {
        return Ok(Stored::default());
    }
    let day_start = now.as_millisecond() - digest::DAY_MS;
    let mut events = store::events(path, None, Some(day_start), None, DAY_ROWS)?;
    events.extend(store::last_rows_before(path, day_start)?);
    events.sort_by_key(|e| e.seq);
    let rows: Vec<Row> = events
        .into_iter()
        .filter(|e| e.machine != store::REGISTRY_ROW)
        // A row whose states this version cannot read says nothing it can count.
        .filter_map(|e| {
            let (from, to) = e.phases()?;
            Some(Row {
                at_ms: e.at_ms,
                machine: e.machine,
                from,
                to,
                reason: e.reason,
                failures: e.failures,
            })
        })
        .collect();
    let samples = store::counter_samples(path, now.as_millisecond() - 2 * digest::DAY_MS)?
        .into_iter()
        .map(|c| Sample {
            at_ms: c.at_ms,
            boot_ms: c.boot_ms,
            machine: c.machine,
            remote_attempts: c.remote_attempts,
            local_rejections: c.local_rejections,
            rerouted: c.rerouted,
        })
        .collect();
    let month_trips = store::trips_since(path, now.as_millisecond() - digest::MONTH_MS)?;
    Ok(Stored {
        rows,
        samples,
        month_trips,
    })
}

/// The live digest: store reads on the blocking pool (rusqlite is synchronous), then the
/// pure render.
pub(super) async fn render_from_store(
    path: Option<PathBuf>,
    now: Timestamp,
    tz: &TimeZone,
    machines: Vec<MachineNow>,
) -> Result<Vec<String>, StoreError> {
    let stored = match path {
        Some(p) => tokio::task::spawn_blocking(move || read_store(&p, now))
            .await
            .unwrap_or_else(|_| Ok(Stored::default()))?,
        None => Stored::default(),
    };
    let host = Host::from(&crate::host::stats());
    let input = digest::Input {
        now,
        tz,
        rows: &stored.rows,
        samples: &stored.samples,
        month_trips: Some(&stored.month_trips),
        machines: &machines,
        host: &host,
    };
    Ok(digest::render(&input))
}

/// `labrouter digest`: today's digest from the store alone (the router may be running or
/// not); a machine's current state is the last one its ledger recorded.
pub async fn render_offline(reg: &Registry, now: Timestamp) -> Result<Vec<String>, TelegramError> {
    let tz = match &reg.telegram {
        Some(t) => {
            TimeZone::get(&t.timezone).map_err(|e| TelegramError::TimeZone(e.to_string()))?
        }
        None => TimeZone::UTC,
    };
    let path = reg.server.state_dir.join(store::FILE);
    let stored = tokio::task::spawn_blocking(move || read_store(&path, now))
        .await
        .unwrap_or_else(|_| Ok(Stored::default()))?;
    let machines: Vec<MachineNow> = reg
        .machines
        .iter()
        .map(|m| MachineNow {
            name: m.name.clone(),
            state: stored
                .rows
                .iter()
                .rev()
                .find(|r| r.machine == m.name)
                .map_or(Phase::Closed, |r| r.to),
            counters: None,
        })
        .collect();
    let host = Host::from(&crate::host::stats());
    let input = digest::Input {
        now,
        tz: &tz,
        rows: &stored.rows,
        samples: &stored.samples,
        month_trips: Some(&stored.month_trips),
        machines: &machines,
        host: &host,
    };
    Ok(digest::render(&input))
}
