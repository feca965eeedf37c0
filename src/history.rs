//! The month at a glance, as data: per machine and per day (in the digest's timezone, else
//! UTC) its trips, time open, requests served, rerouted and rejected, and tasks finished
//! and failed. `GET /status/history` serves it, the dashboard draws its strips from it and
//! the digest renders it to a picture.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    let today = tz.to_datetime(now).date();
    (0..i64::from(days.clamp(1, MAX_DAYS)))
        .rev()
        .filter_map(|back| today.checked_sub(jiff::Span::new().days(back)).ok())
        .map(|d| d.to_string())
        .collect()
}

/// The history of the last `span` days in `tz` at `now` from the store at `path`, for
/// `machines` (the registry's, in its order) and any other machine the store names in the
/// span. No store yet: every day zero.
///
/// Skeleton: the days and the machines, every count zero; the store's reads come next.
pub fn read(
    path: &std::path::Path,
    machines: &[String],
    tz: &jiff::tz::TimeZone,
    span: u32,
    now: jiff::Timestamp,
) -> Result<History, crate::store::StoreError> {
    let _ = path;
    let days = days(now, tz, span);
    let row = |day: &String| Day {
        day: day.clone(),
        ..Day::default()
    };
    let machines = machines
        .iter()
        .map(|m| (m.clone(), days.iter().map(row).collect()))
        .collect();
    Ok(History {
        timezone: tz.iana_name().unwrap_or("UTC").to_string(),
        days,
        machines,
    })
}
