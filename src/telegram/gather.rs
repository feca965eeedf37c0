//! The digest's inputs, gathered: ledger rows and counter samples from the store, the
//! host's health, and for `labrouter digest` (no router at hand) the machines' states as the
//! ledger last recorded them.

use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::digest::{self, Host, MachineNow, Row, Sample};
use super::TelegramError;
use crate::registry::Registry;
use crate::store::{self, StoreError};

/// Ledger rows (31 days, oldest first, registry rows left out) and counter samples (two
/// days) from the store at `path`; nothing when there is no store yet.
pub fn read_store(path: &Path, now: Timestamp) -> Result<(Vec<Row>, Vec<Sample>), StoreError> {
    if !path.exists() {
        return Ok((Vec::new(), Vec::new()));
    }
    let since = now.as_millisecond() - digest::MONTH_MS - digest::DAY_MS;
    let mut rows: Vec<Row> = store::events(path, None, Some(since), None, 1_000_000)?
        .into_iter()
        .filter(|e| e.machine != store::REGISTRY_ROW)
        .map(|e| Row {
            at_ms: e.at_ms,
            machine: e.machine,
            from: e.from,
            to: e.to,
            reason: e.reason,
            failures: e.failures,
        })
        .collect();
    rows.reverse();
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
    Ok((rows, samples))
}

/// The live digest: store reads on the blocking pool (rusqlite is synchronous), then the
/// pure render.
pub(super) async fn render_from_store(
    path: Option<PathBuf>,
    now: Timestamp,
    tz: &TimeZone,
    machines: Vec<MachineNow>,
) -> Result<Vec<String>, StoreError> {
    let (rows, samples) = match path {
        Some(p) => tokio::task::spawn_blocking(move || read_store(&p, now))
            .await
            .unwrap_or_else(|_| Ok((Vec::new(), Vec::new())))?,
        None => (Vec::new(), Vec::new()),
    };
    let host = Host::from_stats(&crate::host::stats());
    let input = digest::Input {
        now,
        tz,
        rows: &rows,
        samples: &samples,
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
    let (rows, samples) = tokio::task::spawn_blocking(move || read_store(&path, now))
        .await
        .unwrap_or_else(|_| Ok((Vec::new(), Vec::new())))?;
    let machines: Vec<MachineNow> = reg
        .machines
        .iter()
        .map(|m| MachineNow {
            name: m.name.clone(),
            state: rows
                .iter()
                .rev()
                .find(|r| r.machine == m.name)
                .map_or("closed".into(), |r| r.to.clone()),
            counters: None,
        })
        .collect();
    let host = Host::from_stats(&crate::host::stats());
    let input = digest::Input {
        now,
        tz: &tz,
        rows: &rows,
        samples: &samples,
        machines: &machines,
        host: &host,
    };
    Ok(digest::render(&input))
}
