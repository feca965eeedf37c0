//! When the digest goes out (README "Telegram"), as pure functions of the wall clock, so tests
//! drive the clock instead of waiting for 08:00.
//!
//! Slots are local times in the registry's time zone (jiff, with the tz database bundled,
//! so a host without tzdata still knows Europe/Berlin). A slot that falls in a DST gap
//! moves forward like a clock would (02:30 on the spring-forward night is 03:30); a slot in
//! a repeated hour takes its first occurrence.

use std::time::Duration;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};

/// The router missed a slot if the last digest is older than this (README "Telegram": "over 24 h").
pub const CATCH_UP_AFTER: Duration = Duration::from_secs(24 * 3600);

/// A slot is skipped when a digest (a catch-up at start) went out this shortly before it:
/// two digests a few minutes apart would say the same thing twice.
pub const SKIP_IF_SENT_WITHIN: Duration = Duration::from_secs(2 * 3600);

/// The slot on `date`: `at` (hour, minute) local time in `tz`.
fn slot_on(date: Date, at: (u8, u8), tz: &TimeZone) -> Option<Timestamp> {
    let dt = date.at(at.0 as i8, at.1 as i8, 0, 0);
    tz.to_ambiguous_zoned_datetime(dt)
        .compatible()
        .ok()
        .map(|z| z.timestamp())
}

/// The first slot strictly after `now`.
pub fn next_send(now: Timestamp, at: (u8, u8), tz: &TimeZone) -> Timestamp {
    let today = now.to_zoned_datetime(tz.clone()).date();
    let mut date = today;
    // Two days always suffice; a few more tolerate odd zones that skip a whole day.
    for _ in 0..4 {
        if let Some(t) = slot_on(date, at, tz) {
            if t > now {
                return t;
            }
        }
        date = match date.tomorrow() {
            Ok(d) => d,
            Err(_) => break,
        };
    }
    now + jiff::SignedDuration::from_hours(24)
}

/// The last slot at or before `now`.
pub fn previous_send(now: Timestamp, at: (u8, u8), tz: &TimeZone) -> Timestamp {
    let mut date = now.to_zoned_datetime(tz.clone()).date();
    for _ in 0..4 {
        if let Some(t) = slot_on(date, at, tz) {
            if t <= now {
                return t;
            }
        }
        date = match date.yesterday() {
            Ok(d) => d,
            Err(_) => break,
        };
    }
    now - jiff::SignedDuration::from_hours(24)
}

/// Whether a digest is due at start: the last one is over 24 h old and a slot passed since
/// it (the router was down at `digest_at`). Never at the very first start (`None`): a fresh
/// install waits for its first slot.
pub fn catch_up_due(
    last_sent: Option<Timestamp>,
    now: Timestamp,
    at: (u8, u8),
    tz: &TimeZone,
) -> bool {
    let Some(last) = last_sent else { return false };
    let old = now.duration_since(last)
        > jiff::SignedDuration::try_from(CATCH_UP_AFTER).unwrap_or_default();
    old && previous_send(now, at, tz) > last
}

/// Whether the slot at `slot` should send, given the last digest queued.
pub fn slot_sends(last_sent: Option<Timestamp>, slot: Timestamp) -> bool {
    let within = jiff::SignedDuration::try_from(SKIP_IF_SENT_WITHIN).unwrap_or_default();
    last_sent.is_none_or(|last| slot.duration_since(last) >= within)
}

/// How long to sleep before looking again: until `next`, but at most `tick`, so a
/// suspended laptop or a changed wall clock is noticed within a tick.
pub fn sleep_for(now: Timestamp, next: Timestamp, tick: Duration) -> Duration {
    let left = next.duration_since(now);
    Duration::try_from(left).unwrap_or(Duration::ZERO).min(tick)
}

/// `now` in `tz`, for headers and alerts.
pub fn local(now: Timestamp, tz: &TimeZone) -> ZonedDateTime {
    now.to_zoned_datetime(tz.clone())
}
