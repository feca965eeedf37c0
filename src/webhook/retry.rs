//! When a failed callback is tried again, and when it is given up (docs/api.md "Tasks": the first
//! retry within 5 s, doubling, for up to 24 h). Pure: the caller says how long it has been.

use std::time::Duration;

/// The wait before the first retry.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);

/// The longest wait between two attempts.
pub const MAX_STEP: Duration = Duration::from_secs(60 * 60);

/// Past this since the first attempt, no attempt is made: the callback is `failed`.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The wait before the next attempt, after `attempts_made` attempts of which the first
/// started `since_first` ago; `None` once [`GIVE_UP_AFTER`] has passed (the callback's
/// state becomes `failed`).
///
/// The schedule, no jitter (one receiver per task; nothing to spread):
/// - no attempt made yet: now (`Some(0)`);
/// - after attempt n (n ≥ 1): 5 s × 2ⁿ⁻¹, at most 1 h: 5, 10, 20, 40, 80, 160, 320, 640,
///   1280, 2560 s, then 3600 s for every later one;
/// - a wait that would pass the 24 h mark is cut to end on it, so the last attempt is made
///   at 24 h; after it (or any attempt from 24 h on) the answer is `None`.
///
/// With instant failures that is 34 attempts: the first at 0, the eleventh at 85 min 15 s,
/// hourly from there, the last at 24 h. Slow failures (up to 10 s each) make it fewer.
pub fn next_retry(attempts_made: u32, since_first: Duration) -> Option<Duration> {
    if since_first >= GIVE_UP_AFTER {
        return None;
    }
    let Some(after_first) = attempts_made.checked_sub(1) else {
        return Some(Duration::ZERO);
    };
    // 2^10 × 5 s is already past MAX_STEP; capping the exponent keeps the product small.
    let step = FIRST_RETRY
        .saturating_mul(1 << after_first.min(10))
        .min(MAX_STEP);
    Some(step.min(GIVE_UP_AFTER - since_first))
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn first_retry_within_5s_then_doubling_up_to_an_hour() {
        assert_eq!(next_retry(0, s(0)), Some(s(0)));
        let waits: Vec<u64> = (1..=13)
            .map(|n| next_retry(n, s(0)).unwrap().as_secs())
            .collect();
        assert_eq!(
            waits,
            [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600]
        );
        assert_eq!(next_retry(u32::MAX, s(0)), Some(MAX_STEP));
    }

    #[test]
    fn nothing_after_24h_and_the_last_wait_ends_on_the_mark() {
        assert_eq!(next_retry(1, GIVE_UP_AFTER), None);
        assert_eq!(next_retry(30, GIVE_UP_AFTER + s(1)), None);
        assert_eq!(next_retry(20, GIVE_UP_AFTER - s(100)), Some(s(100)));
        assert_eq!(next_retry(1, GIVE_UP_AFTER - s(1)), Some(s(1)));
    }

    #[test]
    fn instant_failures_make_34_attempts_in_24h() {
        let mut at = Duration::ZERO;
        let mut times = vec![at];
        while let Some(wait) = next_retry(times.len() as u32, at) {
            at += wait;
            times.push(at);
        }
        assert_eq!(times.len(), 34);
        assert_eq!(times[10], s(5115), "the eleventh attempt, at 85 min 15 s");
        assert_eq!(times.last(), Some(&GIVE_UP_AFTER));
    }
}
