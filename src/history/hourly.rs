//! The last 24 hours by the hour, for the dashboard's requests-and-fallbacks chart: each
//! machine's requests served, rerouted and rejected per UTC hour, from the counter samples
//! (`GET /status/hourly`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

const HOUR_MS: i64 = 3_600_000;

/// Hours shown, the current one last.
pub const HOURS: usize = 24;

/// Per machine, one [`Hour`] per entry of `hours`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hourly {
    /// Each hour's start, RFC 3339 UTC, oldest first; the last is the current hour.
    pub hours: Vec<String>,
    pub machines: BTreeMap<String, Vec<Hour>>,
}

/// One machine's hour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Hour {
    pub served: u64,
    pub rerouted: u64,
    pub rejected: u64,
}

/// The bounds of the last [`HOURS`] whole UTC hours at `now_ms`, the current one included.
pub fn bounds(now_ms: i64) -> Vec<i64> {
    let this = now_ms.div_euclid(HOUR_MS) * HOUR_MS;
    (0..=HOURS as i64)
        .map(|i| this - (HOURS as i64 - 1 - i) * HOUR_MS)
        .collect()
}

/// The last 24 hours at `now` from the store at `path`, for `machines` and any other the
/// counters name; one aggregated query. No store yet: every hour zero.
pub fn read(
    path: &std::path::Path,
    machines: &[String],
    now: jiff::Timestamp,
) -> Result<Hourly, crate::store::StoreError> {
    let now_ms = now.as_millisecond();
    let bounds = bounds(now_ms);
    let hours = bounds[..HOURS]
        .iter()
        .map(|&ms| crate::clock::rfc3339(crate::store::from_ms(ms)))
        .collect();
    let mut h = Hourly {
        hours,
        machines: machines
            .iter()
            .map(|m| (m.clone(), vec![Hour::default(); HOURS]))
            .collect(),
    };
    if !path.exists() {
        return Ok(h);
    }
    let span = crate::store::history::Span {
        bounds: &bounds,
        now_ms,
    };
    for c in crate::store::history::counter_increases(path, span)? {
        let hours = h
            .machines
            .entry(c.machine)
            .or_insert_with(|| vec![Hour::default(); HOURS]);
        if let Some(hour) = hours.get_mut(c.day) {
            hour.served += c.served;
            hour.rerouted += c.rerouted;
            hour.rejected += c.rejected;
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hours_end_with_the_current_one() {
        let now = 10 * 24 * HOUR_MS + 5 * HOUR_MS + 1234;
        let b = bounds(now);
        assert_eq!(b.len(), HOURS + 1);
        assert_eq!(b[HOURS - 1], 10 * 24 * HOUR_MS + 5 * HOUR_MS);
        assert_eq!(b[HOURS], b[HOURS - 1] + HOUR_MS);
        assert!(b[HOURS - 1] <= now && now < b[HOURS]);
        assert_eq!(b[0], b[HOURS] - 24 * HOUR_MS);
    }
}
