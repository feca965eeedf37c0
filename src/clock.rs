//! The one clock: tokio's [`Instant`] (pausable in tests), and the only arithmetic allowed
//! on it with a duration that came from outside; and wall-clock times as text ([`rfc3339`]).
//!
//! `std::time::Instant` is banned by clippy.toml, as in linkerd2-proxy: every timer runs on
//! tokio's clock so paused-clock tests are exact. `Instant + Duration` panics on overflow;
//! [`after`] cannot.

use std::time::{Duration, SystemTime};

pub use tokio::time::Instant;

/// About a century: far enough to mean "never" for a router, near enough for every clock.
const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);

/// `now + d`, saturating at a far future instead of panicking.
pub fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

/// `Instant::now() + d`, saturating.
pub fn from_now(d: Duration) -> Instant {
    after(Instant::now(), d)
}

/// How far the wall clock may drift from the system's before [`wall`] takes a new anchor: a
/// system clock set or stepped (NTP) shows within this; a slewed one never drifts this far.
const REANCHOR: Duration = Duration::from_secs(1);

/// The wall clock, moving with tokio's: in a running router the system's time to within
/// [`REANCHOR`], and in a test on the paused clock a time that advances exactly as far as the
/// paused clock did, and not at all while it stands. Times a router stores and shows (a
/// task's `created_at`, `finished_at`) are read here, so tests that let paused time pass see
/// stored times pass too, with no real sleep.
///
/// It is one anchor (the system's time and std's clock read together) plus how far tokio's
/// clock is from that anchor. Reading the three clocks afresh at every call would let a
/// preemption between the reads move a paused wall clock, backwards too, by its length.
#[allow(clippy::disallowed_types)] // std's Instant, only to compare it with tokio's
pub fn wall() -> SystemTime {
    use std::sync::{Mutex, PoisonError};
    static ANCHOR: Mutex<Option<(SystemTime, std::time::Instant)>> = Mutex::new(None);
    let ours = Instant::now().into_std();
    let mut anchor = ANCHOR.lock().unwrap_or_else(PoisonError::into_inner);
    let (sys, real) = (SystemTime::now(), std::time::Instant::now());
    let (at, then) = match *anchor {
        Some((at, then)) if drift(at, then, sys, real) <= REANCHOR => (at, then),
        _ => *anchor.insert((sys, real)),
    };
    drop(anchor);
    carried(at, then, ours)
}

/// The anchor's time `at`, read with std's clock at `then`, carried to std's `to` (either way).
#[allow(clippy::disallowed_types)] // std's Instant, as in `wall`
fn carried(at: SystemTime, then: std::time::Instant, to: std::time::Instant) -> SystemTime {
    match to.checked_duration_since(then) {
        Some(ahead) => at.checked_add(ahead).unwrap_or(at),
        None => at
            .checked_sub(then.saturating_duration_since(to))
            .unwrap_or(SystemTime::UNIX_EPOCH),
    }
}

/// How far the system's time `sys`, read with std's clock at `real`, is from the anchor's
/// time carried forward by std's clock.
#[allow(clippy::disallowed_types)] // std's Instant, as in `wall`
fn drift(
    at: SystemTime,
    then: std::time::Instant,
    sys: SystemTime,
    real: std::time::Instant,
) -> Duration {
    match sys.duration_since(carried(at, then, real)) {
        Ok(d) => d,
        Err(e) => e.duration(),
    }
}

/// UTC, to the second: `2026-11-30T14:02:11Z` (empty if `t` is beyond jiff's range).
pub fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_saturates_instead_of_panicking() {
        let now = Instant::now();
        assert!(after(now, Duration::MAX) > now);
        assert_eq!(
            after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_stands_while_the_paused_clock_does_and_moves_as_far() {
        let t0 = wall();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(wall(), t0, "real time passed, paused time did not");
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(wall(), t0 + Duration::from_millis(1500));
    }

    #[test]
    fn drift_is_how_far_the_system_time_left_the_anchor_either_way() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        #[allow(clippy::disallowed_types)]
        let then = std::time::Instant::now();
        let later = then + Duration::from_secs(5);
        assert_eq!(
            drift(at, then, at + Duration::from_secs(5), later),
            Duration::ZERO
        );
        assert_eq!(
            drift(at, then, at + Duration::from_secs(8), later),
            Duration::from_secs(3)
        );
        assert_eq!(drift(at, then, at, later), Duration::from_secs(5));
    }

    #[test]
    fn rfc3339_is_utc_to_the_second() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_047_331_999);
        assert_eq!(rfc3339(t), "2026-11-30T14:02:11Z");
    }
}
