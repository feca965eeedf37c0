//! The per-machine circuit breaker as a pure state machine (README "What trips a breaker").
//!
//! [`Breaker::step`] takes the state, one [`Event`] and `now`, and returns the next state
//! with a [`Decision`] and, when the phase changed, a [`Transition`] for the ledger. It
//! performs no I/O and reads no clock: the server ([`crate::machines`]), the health checker
//! and `labrouter replay` all drive this same function.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

mod adopt;
mod policy;
mod step;
#[cfg(test)]
mod tests;
mod verdict;

pub use crate::outcome::{Failure, FailureKind, Phase, Skip};
pub use adopt::Adopted;
pub use policy::Policy;
pub use verdict::{Restored, Transitioned, Verdict, RETRY_AFTER_MAX};

/// The whole state of one breaker. Plain data, so it can be stored and restored.
#[derive(Clone, Debug, PartialEq)]
pub struct Breaker {
    pub phase: Phase,
    /// Consecutive qualifying failures (closed) — reset by any success.
    pub failures: u32,
    /// Probe successes so far in this half-open cycle.
    pub successes: u32,
    /// The cooldown of the current (or next) open interval.
    pub cooldown: Duration,
    /// When an open breaker admits its next probe.
    pub open_until: Option<Instant>,
    /// When the breaker last opened.
    pub opened_at: Option<Instant>,
    /// A probe lease is out (half-open admits exactly one).
    pub probe_in_flight: bool,
    /// Bumped on every phase change: an outcome admitted in an earlier cycle is ignored.
    pub generation: u64,
    /// The machine asked us (429 + Retry-After) to stay away until then; not a failure.
    pub rate_limited_until: Option<Instant>,
    pub last_reason: Option<String>,
    pub last_retry_after: Option<Duration>,
    /// Another router holds the pool's probe lease until then (README "Several routers"): this
    /// half-open breaker answers `probe_in_flight` meanwhile.
    pub peer_probe_until: Option<Instant>,
    /// The router whose verdict this is, when another router decided it (README "Several routers").
    pub decided_by: Option<Arc<str>>,
}

impl Breaker {
    pub fn new(policy: &Policy) -> Self {
        Breaker {
            phase: Phase::Closed,
            failures: 0,
            successes: 0,
            cooldown: policy.cooldown,
            open_until: None,
            opened_at: None,
            probe_in_flight: false,
            generation: 0,
            rate_limited_until: None,
            last_reason: None,
            last_retry_after: None,
            peer_probe_until: None,
            decided_by: None,
        }
    }
}

/// What one admitted call carries back with its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub generation: u64,
    pub probe: bool,
}

/// Everything that can happen to a breaker.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A call asks to be sent.
    Request,
    Success(Ticket),
    Failure(Ticket, Failure),
    /// 429 whose Retry-After fits the deadline: not counted, the machine is skipped until then.
    RateLimited(Ticket, Instant),
    /// 401/403: not counted as a failure, the machine is paused.
    AuthFailed(Ticket, String),
    /// The admitted call ended with no verdict (client gone, 400, 404): releases a probe lease.
    Cancel(Ticket),
    /// The probe this ticket was admitted as is another router's until then (README "Several
    /// routers"): the local probe lease goes back, and the breaker answers `probe_in_flight`
    /// meanwhile.
    PeerProbe(Ticket, Instant),
    /// An active health check (docs/registry.md "machines:").
    HealthPassed,
    HealthFailed(Failure),
    /// Manual control, with who/why for the ledger.
    ForceOpen(String),
    ForceClose(String),
    Reset(String),
}

/// The answer to an [`Event`].
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Admit(Ticket),
    /// Not sent; `retry_after` is when this machine may admit again, if known.
    Reject {
        skip: Skip,
        retry_after: Option<Duration>,
    },
    /// The outcome was applied.
    Recorded,
    /// An outcome from an earlier cycle, which never decides the current one.
    Stale,
}

/// One phase change, as the ledger records it (README "What it remembers").
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub from: Phase,
    pub to: Phase,
    pub reason: String,
    pub failures: u32,
    pub cooldown_until: Option<Instant>,
    /// Whether the event came from a call that reached the machine.
    pub remote_attempted: bool,
}

/// The result of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    pub decision: Decision,
    pub transition: Option<Transition>,
}
