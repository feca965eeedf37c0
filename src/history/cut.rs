//! Cutting time into the history's days: each day's bounds in its zone (a day that changes
//! the clocks is 23 or 25 hours long), the day an instant falls in, and an interval split
//! between the days it crosses. Pure: the zone and `now` are arguments.

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// The last `n` days (today included) in a zone, as unix-ms bounds: day `i` is
/// `[starts[i], starts[i + 1])`, so `starts` holds one more entry than `names`.
#[derive(Clone, Debug, PartialEq)]
pub struct Days {
    /// `YYYY-MM-DD`, oldest first; the last is today.
    pub names: Vec<String>,
    /// Each day's first millisecond, then tomorrow's.
    pub starts: Vec<i64>,
}

/// The unix ms at which `date` begins in `tz` (its first instant, should midnight itself be
/// skipped by a clock change).
fn start_of(date: jiff::civil::Date, tz: &TimeZone) -> Option<i64> {
    let zoned = date
        .to_zoned_datetime(tz.clone())
        .ok()?
        .start_of_day()
        .ok()?;
    Some(zoned.timestamp().as_millisecond())
}

impl Days {
    /// The last `n` days at `now` in `tz` (`n` clamped to 1..=[`super::MAX_DAYS`]).
    pub fn new(now: Timestamp, tz: &TimeZone, n: u32) -> Days {
        let today = tz.to_datetime(now).date();
        let n = i64::from(n.clamp(1, super::MAX_DAYS));
        let mut names = Vec::new();
        let mut starts = Vec::new();
        for back in (-1..n).rev() {
            let Ok(date) = today.checked_sub(jiff::Span::new().days(back)) else {
                continue;
            };
            let Some(start) = start_of(date, tz) else {
                continue;
            };
            starts.push(start);
            if back >= 0 {
                names.push(date.to_string());
            }
        }
        Days { names, starts }
    }

    /// The first millisecond of the oldest day.
    pub fn lo(&self) -> i64 {
        self.starts.first().copied().unwrap_or(0)
    }

    /// The first millisecond after today.
    pub fn hi(&self) -> i64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The day `at_ms` falls in, if it is inside the span.
    pub fn index(&self, at_ms: i64) -> Option<usize> {
        if at_ms < self.lo() || at_ms >= self.hi() {
            return None;
        }
        Some(self.starts.partition_point(|&s| s <= at_ms) - 1)
    }

    /// `[from, to)` cut at the days' bounds: each day it touches with the milliseconds it
    /// spent there; nothing outside the span.
    pub fn split(&self, from: i64, to: i64) -> Vec<(usize, i64)> {
        let (from, to) = (from.max(self.lo()), to.min(self.hi()));
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let Some(i) = self.index(at) else { break };
            let end = self.starts[i + 1].min(to);
            out.push((i, end - at));
            at = end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn ms(s: &str) -> i64 {
        at(s).as_millisecond()
    }

    const HOUR: i64 = 3_600_000;

    #[test]
    fn utc_days_are_24_hours_and_the_last_is_today() {
        let d = Days::new(at("2026-12-06T05:00:00Z"), &TimeZone::UTC, 3);
        assert_eq!(d.names, ["2026-12-04", "2026-12-05", "2026-12-06"]);
        assert_eq!(d.starts.len(), 4);
        assert_eq!(d.lo(), ms("2026-12-04T00:00:00Z"));
        assert_eq!(d.hi(), ms("2026-12-07T00:00:00Z"));
        assert!(d.starts.windows(2).all(|w| w[1] - w[0] == 24 * HOUR));
    }

    #[test]
    fn berlin_days_around_the_clock_changes_are_23_and_25_hours() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let autumn = Days::new(at("2026-10-26T12:00:00Z"), &tz, 3);
        assert_eq!(autumn.names, ["2026-10-24", "2026-10-25", "2026-10-26"]);
        let len: Vec<i64> = autumn.starts.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(len, [24 * HOUR, 25 * HOUR, 24 * HOUR]);
        // Midnight in Berlin: 22:00 UTC in summer time, 23:00 UTC after the change.
        assert_eq!(autumn.starts[1], ms("2026-10-24T22:00:00Z"));
        assert_eq!(autumn.starts[2], ms("2026-10-25T23:00:00Z"));
        let spring = Days::new(at("2026-03-30T12:00:00Z"), &tz, 2);
        let len: Vec<i64> = spring.starts.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(len, [23 * HOUR, 24 * HOUR]);
    }

    #[test]
    fn an_interval_across_midnight_is_split_between_the_days() {
        let d = Days::new(at("2026-12-06T05:00:00Z"), &TimeZone::UTC, 3);
        let cut = d.split(ms("2026-12-04T23:59:00Z"), ms("2026-12-05T00:01:30Z"));
        assert_eq!(cut, [(0, 60_000), (1, 90_000)]);
        // A whole 25-hour Berlin day, an hour either side.
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let b = Days::new(at("2026-10-26T12:00:00Z"), &tz, 3);
        let cut = b.split(ms("2026-10-24T21:00:00Z"), ms("2026-10-26T00:00:00Z"));
        assert_eq!(cut, [(0, HOUR), (1, 25 * HOUR), (2, HOUR)]);
    }

    #[test]
    fn what_lies_outside_the_span_is_dropped() {
        let d = Days::new(at("2026-12-06T05:00:00Z"), &TimeZone::UTC, 2);
        assert_eq!(d.index(ms("2026-12-04T23:59:59Z")), None);
        assert_eq!(d.index(ms("2026-12-05T00:00:00Z")), Some(0));
        assert_eq!(d.index(ms("2026-12-07T00:00:00Z")), None);
        let cut = d.split(ms("2026-12-01T00:00:00Z"), ms("2026-12-05T01:00:00Z"));
        assert_eq!(cut, [(0, HOUR)]);
        assert!(d
            .split(ms("2026-12-06T02:00:00Z"), ms("2026-12-06T01:00:00Z"))
            .is_empty());
    }

    #[test]
    fn the_span_is_clamped_to_one_to_ninety_days() {
        let now = at("2026-12-06T05:00:00Z");
        assert_eq!(Days::new(now, &TimeZone::UTC, 0).names.len(), 1);
        assert_eq!(Days::new(now, &TimeZone::UTC, 500).names.len(), 90);
    }
}
