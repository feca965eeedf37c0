//! The month at a glance, as data: per machine and per day (in the digest's timezone, else
//! UTC) its trips, time open, requests served, rerouted and rejected, and tasks finished
//! and failed. `GET /status/history` serves it, the dashboard draws its strips from it and
//! the digest renders it to a picture.
//!
//! - [`cut`]: the days' bounds in a zone and intervals cut between them (pure).
//! - [`hourly`]: the last 24 hours by the hour, for the dashboard (`GET /status/hourly`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod cut;
pub mod hourly;

/// The days asked for when `days` is not given.
pub const DEFAULT_DAYS: u32 = 30;

/// The most days one history spans (the ledger keeps 90).
pub const MAX_DAYS: u32 = 90;

/// Per machine and per day, oldest day first; every machine has one [`Day`] per entry of
/// `days`, days without events included (all zero).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The IANA name of the zone the days are cut in (`UTC` without `telegram.timezone`).
    pub timezone: String,
    /// The days covered, `YYYY-MM-DD`, oldest first; the last is today.
    pub days: Vec<String>,
    /// By machine name: the registry's machines, and any machine the ledger or the counters
    /// name in the span that the registry no longer does.
    pub machines: BTreeMap<String, Vec<Day>>,
}

/// One machine's day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Day {
    /// `YYYY-MM-DD` in the history's timezone.
    pub day: String,
    /// Times its breaker opened from closed (a failed probe's reopen is not a new trip).
    pub trips: u32,
    /// Seconds of the day its breaker spent open or half-open.
    pub open_s: f64,
    /// Requests it answered.
    pub served: u64,
    /// Requests that left it for the next target of the chain.
    pub rerouted: u64,
    /// Requests refused without reaching it (its breaker open).
    pub rejected: u64,
    /// Tasks whose final attempt it served.
    pub tasks_finished: u64,
    /// Tasks that failed with it as their last target.
    pub tasks_failed: u64,
}

impl History {
    /// Machine names ordered flakiest first: most time open over the span, then most trips,
    /// then by name.
    pub fn flakiest_first(&self) -> Vec<&str> {
        let mut names: Vec<(&str, f64, u32)> = self
            .machines
            .iter()
            .map(|(name, days)| {
                let open: f64 = days.iter().map(|d| d.open_s).sum();
                let trips: u32 = days.iter().map(|d| d.trips).sum();
                (name.as_str(), open, trips)
            })
            .collect();
        names.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
        names.into_iter().map(|(name, _, _)| name).collect()
    }
}

/// The last `days` days (today included) in `tz` at `now`, `YYYY-MM-DD`, oldest first.
pub fn days(now: jiff::Timestamp, tz: &jiff::tz::TimeZone, days: u32) -> Vec<String> {
    cut::Days::new(now, tz, days).names
}

/// The history of the last `span` days in `tz` at `now` from the store at `path`, for
/// `machines` (the registry's) and any other machine the store names in the span. No store
/// yet: every day zero. A few aggregated queries (see [`crate::store::history`]); the down
/// intervals are cut into days here as they are read.
///
/// A breaker still down by the ledger is down until `now` for a machine of `machines`; for a
/// machine the registry no longer names, until its last ledger row.
pub fn read(
    path: &std::path::Path,
    machines: &[String],
    tz: &jiff::tz::TimeZone,
    span: u32,
    now: jiff::Timestamp,
) -> Result<History, crate::store::StoreError> {
    let cut = cut::Days::new(now, tz, span);
    let mut h = History {
        timezone: tz.iana_name().unwrap_or("UTC").to_string(),
        days: cut.names.clone(),
        machines: BTreeMap::new(),
    };
    for m in machines {
        h.machine(m);
    }
    if !path.exists() {
        return Ok(h);
    }
    let now_ms = now.as_millisecond();
    let mut open_ms: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let span = crate::store::history::Span {
        bounds: &cut.starts,
        now_ms,
    };
    let read = crate::store::history::history(path, span, |d| {
        let named = machines.contains(&d.machine);
        let end = d.until_ms.unwrap_or(if named { now_ms } else { d.last_ms });
        let days = open_ms
            .entry(d.machine)
            .or_insert_with(|| vec![0; cut.names.len()]);
        for (i, ms) in cut.split(d.from_ms, end.min(now_ms)) {
            days[i] += ms;
        }
    })?;
    for (machine, days) in open_ms {
        for (day, ms) in h.machine(&machine).iter_mut().zip(days) {
            day.open_s = ms as f64 / 1000.0;
        }
    }
    h.add(read);
    Ok(h)
}

impl History {
    /// The days of `machine`, added (all zero) if it had none.
    fn machine(&mut self, name: &str) -> &mut Vec<Day> {
        let days = &self.days;
        self.machines.entry(name.to_string()).or_insert_with(|| {
            days.iter()
                .map(|d| Day {
                    day: d.clone(),
                    ..Day::default()
                })
                .collect()
        })
    }

    /// The day `i` of `machine`, if the span has it.
    fn day(&mut self, machine: &str, i: usize) -> Option<&mut Day> {
        self.machine(machine).get_mut(i)
    }

    /// Adds the store's per-day counts; a task counts for the machine of its last target.
    fn add(&mut self, read: crate::store::history::Aggregated) {
        for t in read.trips {
            if let Some(d) = self.day(&t.machine, t.day) {
                d.trips += t.trips;
            }
        }
        for c in read.counts {
            if let Some(d) = self.day(&c.machine, c.day) {
                d.served += c.served;
                d.rejected += c.rejected;
                d.rerouted += c.rerouted;
            }
        }
        for t in read.tasks {
            let Some((_, machine)) = t.target.rsplit_once('@') else {
                continue;
            };
            if let Some(d) = self.day(machine, t.day) {
                d.tasks_finished += t.finished;
                d.tasks_failed += t.failed;
            }
        }
    }
}
