//! The one clock: tokio's [`Instant`] (pausable in tests), and the only arithmetic allowed
//! on it with a duration that came from outside.
//!
//! `std::time::Instant` is banned by clippy.toml, as in linkerd2-proxy: every timer runs on
//! tokio's clock so paused-clock tests are exact. `Instant + Duration` panics on overflow;
//! [`after`] cannot.

use std::time::Duration;

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
}
