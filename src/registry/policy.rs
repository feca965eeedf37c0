//! A machine's breaker policy (README "What trips a breaker"): the checks of its values, one
//! implementation for registry.yaml's `breaker:` blocks and for the `breaker` of a `labrouter
//! replay` trace.
//!
//! Each check takes a value as the file wrote it and returns the message without the
//! field's name or place: registry.yaml adds `breaker.<field>` and the line and column, a
//! trace adds `breaker.<field>`.

use std::fmt::Display;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::durations::positive;
use super::invalid::{err, Invalid};
use super::raw::RawBreaker;
use super::SPAN_MAX;
use crate::breaker::Policy;

/// `failure_threshold` or `success_threshold`: a whole number of 1 or more. `None` stands
/// for a value that is not a whole number of 0 or more.
pub(crate) fn threshold(n: Option<u64>) -> Result<u32, &'static str> {
    n.and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n >= 1)
        .ok_or("expected a whole number of 1 or more")
}

/// `backoff`: a number of 1.0 or more. `None` stands for a value that is not a number.
pub(crate) fn backoff(b: Option<f64>) -> Result<f64, &'static str> {
    b.filter(|b| b.is_finite() && *b >= 1.0)
        .ok_or("expected a number of 1.0 or more")
}

/// `cooldown` or `max_cooldown`: a duration above zero and at most `max` (registry.yaml's
/// bound is [`SPAN_MAX`]).
pub(crate) fn cooldown(s: &str, max: Duration) -> Result<Duration, String> {
    positive(s, max)
}

/// Whether `max_cooldown` is no smaller than `cooldown`, as backing off needs.
pub(crate) fn cooldowns_in_order(p: &Policy) -> bool {
    p.max_cooldown >= p.cooldown
}

/// A `breaker:` block over `base` (the defaults' policy, or [`Policy::default`] for the
/// defaults' own block), checked field by field in the order they are declared.
pub(super) fn validate_policy(raw: &RawBreaker, base: &Policy) -> Result<Policy, Invalid> {
    let p = Policy {
        failure_threshold: field(
            &raw.failure_threshold,
            base.failure_threshold,
            "failure_threshold",
            |&n| threshold(Some(n.into())),
        )?,
        cooldown: field(&raw.cooldown, base.cooldown, "cooldown", |s| {
            cooldown(s, SPAN_MAX)
        })?,
        backoff: field(&raw.backoff, base.backoff, "backoff", |&b| backoff(Some(b)))?,
        max_cooldown: field(&raw.max_cooldown, base.max_cooldown, "max_cooldown", |s| {
            cooldown(s, SPAN_MAX)
        })?,
        success_threshold: field(
            &raw.success_threshold,
            base.success_threshold,
            "success_threshold",
            |&n| threshold(Some(n.into())),
        )?,
    };
    if !cooldowns_in_order(&p) {
        let at = raw
            .max_cooldown
            .as_ref()
            .or(raw.cooldown.as_ref())
            .map_or(Location::UNKNOWN, |s| s.referenced);
        return err(
            at,
            "breaker.max_cooldown: expected a value no smaller than breaker.cooldown",
        );
    }
    Ok(p)
}

/// The written value passed through `check`, or `fallback` when none is written; the error
/// names the field and points at the value.
fn field<T, U, E: Display>(
    v: &Option<Spanned<T>>,
    fallback: U,
    name: &str,
    check: impl FnOnce(&T) -> Result<U, E>,
) -> Result<U, Invalid> {
    match v {
        None => Ok(fallback),
        Some(v) => check(&v.value).map_err(|e| (v.referenced, format!("breaker.{name}: {e}"))),
    }
}
