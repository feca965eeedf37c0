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

/// The wall clock, moving with tokio's: `SystemTime::now()` in a running router, and in a
/// test on the paused clock a time that advances exactly as far as the paused clock did.
/// Times a router stores and shows (a task's `created_at`, `finished_at`) are read here,
/// so tests that let paused time pass see stored times pass too, with no real sleep.
#[allow(clippy::disallowed_types)] // std's Instant, only to compare it with tokio's
pub fn wall() -> SystemTime {
    let real = std::time::Instant::now();
    let ours = Instant::now().into_std();
    match ours.checked_duration_since(real) {
        Some(ahead) => SystemTime::now()
            .checked_add(ahead)
            .unwrap_or_else(SystemTime::now),
        None => {
            let behind = real.saturating_duration_since(ours);
            SystemTime::now()
                .checked_sub(behind)
                .unwrap_or(SystemTime::UNIX_EPOCH)
        }
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

    #[test]
    fn rfc3339_is_utc_to_the_second() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_047_331_999);
        assert_eq!(rfc3339(t), "2026-11-30T14:02:11Z");
    }
}
