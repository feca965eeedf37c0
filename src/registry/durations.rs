//! Durations as registry.yaml writes them (`timeouts`, `breaker.cooldown`, `health.every`,
//! `server.*_timeout`, ...): above zero and bounded, the error pointing at the value.

use std::time::Duration;

use serde_saphyr::Spanned;

use super::invalid::Invalid;
use super::units::parse_duration_max;
use super::SPAN_MAX;

/// A timeout, cooldown or interval: above zero, at most [`SPAN_MAX`].
pub(super) fn duration(
    s: &Option<Spanned<String>>,
    fallback: Duration,
    what: &str,
) -> Result<Duration, Invalid> {
    duration_within(s, fallback, what, SPAN_MAX)
}

/// A duration above zero and at most `max`, or `fallback` when not written.
pub(super) fn duration_within(
    s: &Option<Spanned<String>>,
    fallback: Duration,
    what: &str,
    max: Duration,
) -> Result<Duration, Invalid> {
    match s {
        None => Ok(fallback),
        Some(s) => positive(&s.value, max).map_err(|e| (s.referenced, format!("{what}: {e}"))),
    }
}

/// `s` as a duration above zero and at most `max`; the error is the message without the
/// key's name.
pub(super) fn positive(s: &str, max: Duration) -> Result<Duration, String> {
    match parse_duration_max(s, max)? {
        d if d.is_zero() => Err("expected a duration above zero".to_string()),
        d => Ok(d),
    }
}
