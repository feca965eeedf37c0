//! The digest's inputs, gathered: ledger rows, counter samples and the day's tasks from
//! the store, the host's health, and for `labrouter digest` (no router at hand) the
//! machines' states as the ledger last recorded them.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::digest::{self, FailedTask, Host, MachineNow, Row, Sample, Succeeded, Tasks};
use super::TelegramError;
use crate::outcome::Phase;
use crate::registry::Registry;
use crate::store::tasks as stored;
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
    /// The day's tasks; `None` when the store has none (no task lines then).
    pub tasks: Option<Tasks>,
}

/// The most succeeded tasks one digest reads for their waits.
pub const DAY_TASKS: u32 = 100_000;

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
        .filter(|e| e.machine != store::REGISTRY_ROW && e.machine != store::CLUSTER_ROW)
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
    let tasks = read_tasks(path, day_start)?;
    Ok(Stored {
        rows,
        samples,
        month_trips,
        tasks,
    })
}

/// The tasks of the day since `day_start` (one read-only connection); `None` when there
/// are none, or no tasks table yet (a store of a version before tasks).
fn read_tasks(path: &Path, day_start: i64) -> Result<Option<Tasks>, StoreError> {
    let tasks = stored::read_at(path, |c| {
        if !stored::has_table(c)? {
            return Ok(None);
        }
        let mut t = Tasks {
            finished: stored::finished_since(c, day_start)?,
            unfinished: stored::unfinished_count(c)?,
            failed: stored::failures(c, None, day_start, digest::FAILED_SHOWN as u32)?
                .into_iter()
                .map(|f| FailedTask {
                    id: f.id.to_string(),
                    status: f.status,
                    code: f.error.map(|e| e.code),
                })
                .collect(),
            succeeded: stored::succeeded_after_waiting(c, day_start, DAY_TASKS)?
                .into_iter()
                .map(|w| Succeeded {
                    created_ms: w.created_ms,
                    started_ms: w.started_ms,
                    finished_ms: w.finished_ms,
                    attempts: w.attempts,
                })
                .collect(),
        };
        t.finished.sort();
        Ok(Some(t))
    })?;
    Ok(tasks.filter(|t| !t.is_empty()))
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
        tasks: stored.tasks.as_ref(),
    };
    Ok(digest::render(&input))
}

/// The digest's zone: `telegram.timezone`, else UTC.
pub(super) fn zone(reg: &Registry) -> Result<TimeZone, TelegramError> {
    match &reg.telegram {
        Some(t) => TimeZone::get(&t.timezone).map_err(|e| TelegramError::TimeZone(e.to_string())),
        None => Ok(TimeZone::UTC),
    }
}

/// `labrouter digest`: today's digest from the store alone (the router may be running or
/// not); a machine's current state is the last one its ledger recorded.
pub async fn render_offline(reg: &Registry, now: Timestamp) -> Result<Vec<String>, TelegramError> {
    let tz = zone(reg)?;
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
        tasks: stored.tasks.as_ref(),
    };
    Ok(digest::render(&input))
}
