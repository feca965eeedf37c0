//! What is remembered of a breaker: its verdict in wall-clock time (README "What it remembers") and
//! each transition as the ledger, alerts and the demo receive it (README "What it remembers").

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::{Breaker, Phase, Policy, Transition};

/// The longest `Retry-After` believed (README "Safety"): a machine that asks for more is clamped.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(86_400);

/// One breaker transition, with what the ledger and alerts need beside it.
#[derive(Clone, Debug)]
pub struct Transitioned {
    pub machine: String,
    pub transition: Transition,
    /// Wall-clock time of the transition (stored and shown; intervals use tokio's clock).
    pub at: SystemTime,
    /// `cooldown_until` as wall-clock time.
    pub cooldown_until: Option<SystemTime>,
    pub registry_version: String,
    /// The breaker after the transition, for the verdicts table.
    pub verdict: Verdict,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    /// The router whose verdict this was, when another router decided it (README "Several
    /// routers").
    pub decided_by: Option<std::sync::Arc<str>>,
}

/// What is stored per machine (README "What it remembers").
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub state: Phase,
    pub failures: u32,
    pub opened_at: Option<SystemTime>,
    pub cooldown: Duration,
    pub open_until: Option<SystemTime>,
    pub last_reason: Option<String>,
    pub last_retry_after: Option<Duration>,
}

/// A verdict read back at start.
#[derive(Clone, Debug, PartialEq)]
pub enum Restored {
    Found {
        verdict: Verdict,
        written: SystemTime,
    },
    /// The row (or the whole file, machine `*`) could not be read: fail closed.
    Unreadable(String),
}

impl Verdict {
    /// The verdict of a breaker, with tokio instants turned into wall-clock times.
    pub fn of(b: &Breaker, now: Instant, wall: SystemTime) -> Verdict {
        let to_wall = |t: Instant| {
            if t >= now {
                wall + (t - now)
            } else {
                wall - (now - t)
            }
        };
        Verdict {
            state: b.phase,
            failures: b.failures,
            opened_at: b.opened_at.map(to_wall),
            cooldown: b.cooldown,
            open_until: b.open_until.map(to_wall),
            last_reason: b.last_reason.clone(),
            last_retry_after: b.last_retry_after,
        }
    }

    /// The breaker this verdict seeds, on tokio's clock. A half-open verdict comes back
    /// without its probe: that lease died with the old process.
    pub fn to_breaker(&self, policy: &Policy, now: Instant, wall: SystemTime) -> Breaker {
        let to_instant = |t: SystemTime| match t.duration_since(wall) {
            Ok(ahead) => crate::clock::after(now, ahead),
            Err(e) => now.checked_sub(e.duration()).unwrap_or(now),
        };
        let mut b = Breaker::new(policy);
        b.phase = self.state;
        b.failures = self.failures;
        b.cooldown = self.cooldown.clamp(policy.cooldown, policy.max_cooldown);
        b.opened_at = self.opened_at.map(to_instant);
        // A stored time is outside input: an open breaker waits at most max_cooldown more.
        let latest = crate::clock::after(now, policy.max_cooldown);
        b.open_until = match self.state {
            Phase::Open => Some(self.open_until.map_or(now, to_instant).min(latest)),
            _ => None,
        };
        b.last_reason = self.last_reason.as_deref().map(crate::text::bounded);
        b.last_retry_after = self.last_retry_after.map(|d| d.min(RETRY_AFTER_MAX));
        b
    }
}
