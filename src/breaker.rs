//! The per-machine circuit breaker as a pure state machine (SPEC §3.4).
//!
//! [`Breaker::step`] takes the state, one [`Event`] and `now`, and returns the next state
//! with a [`Decision`] and, when the phase changed, a [`Transition`] for the ledger. It
//! performs no I/O and reads no clock: the server ([`crate::machines`]), the health checker
//! and `labrouter replay` all drive this same function.

use std::time::Duration;

use tokio::time::Instant;

#[cfg(test)]
mod tests;
mod verdict;

use crate::outcome::words;
pub use crate::outcome::{Failure, FailureKind, Phase, Skip};
pub use verdict::{Restored, Transitioned, Verdict, RETRY_AFTER_MAX};

/// The breaker settings of one machine (registry `breaker:`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub failure_threshold: u32,
    pub cooldown: Duration,
    pub backoff: f64,
    pub max_cooldown: Duration,
    pub success_threshold: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            failure_threshold: 3,
            cooldown: Duration::from_secs(60),
            backoff: 2.0,
            max_cooldown: Duration::from_secs(15 * 60),
            success_threshold: 1,
        }
    }
}

impl Policy {
    /// The cooldown after a failed probe: `current × backoff`, capped at `max_cooldown`.
    fn backed_off(&self, current: Duration) -> Duration {
        let secs = current.as_secs_f64() * self.backoff;
        if !secs.is_finite() || secs >= self.max_cooldown.as_secs_f64() {
            self.max_cooldown
        } else {
            Duration::from_secs_f64(secs).max(current)
        }
    }

    /// An upstream's Retry-After lengthens a cooldown (never beyond `max_cooldown`).
    fn with_retry_after(&self, cooldown: Duration, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(ra) if ra > cooldown => ra.min(self.max_cooldown).max(cooldown),
            _ => cooldown,
        }
    }
}

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
    /// An active health check (SPEC §3.5).
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

/// One phase change, as the ledger records it (SPEC §3.7).
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

// === impl Breaker: the step function ===

impl Breaker {
    /// Applies one event at `now`. Pure: same inputs, same outputs.
    pub fn step(mut self, event: Event, now: Instant, policy: &Policy) -> (Breaker, Output) {
        let mut transition = None;
        let decision = match event {
            Event::Request => self.admit(now, &mut transition),
            Event::Success(t) => {
                if t.generation != self.generation {
                    Decision::Stale
                } else {
                    self.on_success(t, policy, &mut transition);
                    Decision::Recorded
                }
            }
            Event::Failure(t, failure) => {
                if t.generation != self.generation {
                    Decision::Stale
                } else {
                    self.on_failure(Some(t), failure, now, policy, &mut transition);
                    Decision::Recorded
                }
            }
            Event::RateLimited(t, until) => {
                self.rate_limited_until =
                    Some(self.rate_limited_until.map_or(until, |u| u.max(until)));
                self.release(t);
                Decision::Recorded
            }
            Event::AuthFailed(t, why) => {
                // A credentials problem is not a property of one cycle: it applies whatever
                // the generation, and only a reload or a person lifts it.
                self.release(t);
                if self.phase != Phase::AuthFailed {
                    self.last_reason = Some(why.clone());
                    self.enter(Phase::AuthFailed, why, true, None, &mut transition);
                }
                Decision::Recorded
            }
            Event::Cancel(t) => {
                self.release(t);
                Decision::Recorded
            }
            Event::HealthPassed => {
                self.on_health_passed(now, policy, &mut transition);
                Decision::Recorded
            }
            Event::HealthFailed(failure) => {
                if matches!(self.phase, Phase::Closed | Phase::HalfOpen) {
                    self.on_failure(None, failure, now, policy, &mut transition);
                }
                Decision::Recorded
            }
            // A manual action that would change nothing is no transition: nothing to ledger.
            Event::ForceOpen(_) if self.phase == Phase::ForcedOpen => Decision::Recorded,
            Event::ForceClose(_) | Event::Reset(_) if self.is_pristine() => Decision::Recorded,
            Event::ForceOpen(why) => {
                self.enter(Phase::ForcedOpen, why, false, None, &mut transition);
                Decision::Recorded
            }
            Event::ForceClose(why) => {
                self.close(why, false, &mut transition);
                Decision::Recorded
            }
            Event::Reset(why) => {
                let from = self.phase;
                let generation = self.generation;
                self = Breaker::new(policy);
                self.generation = generation + 1;
                transition = Some(Transition {
                    from,
                    to: Phase::Closed,
                    reason: why,
                    failures: 0,
                    cooldown_until: None,
                    remote_attempted: false,
                });
                Decision::Recorded
            }
        };
        (
            self,
            Output {
                decision,
                transition,
            },
        )
    }

    fn admit(&mut self, now: Instant, transition: &mut Option<Transition>) -> Decision {
        if self.phase == Phase::Open {
            match self.open_until {
                Some(until) if until > now => {
                    return Decision::Reject {
                        skip: Skip::CircuitOpen,
                        retry_after: Some(until - now),
                    }
                }
                _ => {
                    let reason = format!("cooldown of {} passed", words(self.cooldown));
                    self.enter(Phase::HalfOpen, reason, false, None, transition);
                }
            }
        }
        match self.phase {
            Phase::AuthFailed => return reject(Skip::AuthFailed, None),
            Phase::ForcedOpen => return reject(Skip::ForcedOpen, None),
            _ => {}
        }
        if let Some(until) = self.rate_limited_until {
            if until > now {
                return reject(Skip::RateLimited, Some(until - now));
            }
            self.rate_limited_until = None;
        }
        match self.phase {
            Phase::HalfOpen if self.probe_in_flight => reject(Skip::ProbeInFlight, None),
            Phase::HalfOpen => {
                self.probe_in_flight = true;
                Decision::Admit(Ticket {
                    generation: self.generation,
                    probe: true,
                })
            }
            _ => Decision::Admit(Ticket {
                generation: self.generation,
                probe: false,
            }),
        }
    }

    fn on_success(&mut self, t: Ticket, policy: &Policy, transition: &mut Option<Transition>) {
        match self.phase {
            Phase::Closed => self.failures = 0,
            Phase::HalfOpen if t.probe => {
                self.probe_in_flight = false;
                self.successes += 1;
                if self.successes >= policy.success_threshold {
                    self.cooldown = policy.cooldown;
                    self.close("probe succeeded".into(), true, transition);
                }
            }
            _ => {}
        }
    }

    /// A qualifying failure, from a call (`ticket`) or a health check (`None`).
    fn on_failure(
        &mut self,
        ticket: Option<Ticket>,
        failure: Failure,
        now: Instant,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) {
        self.last_retry_after = failure.retry_after.or(self.last_retry_after);
        let retry_after = failure.retry_after;
        let reason = failure.to_string();
        self.last_reason = Some(reason.clone());
        match self.phase {
            Phase::Closed => {
                self.failures += 1;
                if self.failures >= policy.failure_threshold {
                    let cooldown = policy.with_retry_after(policy.cooldown, retry_after);
                    self.open(cooldown, reason, now, transition);
                }
            }
            Phase::HalfOpen => {
                // Only the probe (or a health check) speaks for a half-open machine.
                if ticket.is_some_and(|t| !t.probe) {
                    return;
                }
                self.probe_in_flight = false;
                let cooldown =
                    policy.with_retry_after(policy.backed_off(self.cooldown), retry_after);
                self.open(cooldown, format!("probe failed: {reason}"), now, transition);
            }
            _ => {}
        }
    }

    fn on_health_passed(
        &mut self,
        now: Instant,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) {
        let due = match self.phase {
            Phase::Open => self.open_until.is_none_or(|u| u <= now),
            Phase::HalfOpen => !self.probe_in_flight,
            _ => false,
        };
        if !due {
            return;
        }
        if self.phase == Phase::Open {
            let reason = "cooldown passed; health check as probe".to_string();
            self.enter(Phase::HalfOpen, reason, true, None, transition);
        }
        self.successes += 1;
        if self.successes >= policy.success_threshold {
            self.cooldown = policy.cooldown;
            self.close("health check passed".into(), true, transition);
        }
    }

    fn open(
        &mut self,
        cooldown: Duration,
        reason: String,
        now: Instant,
        transition: &mut Option<Transition>,
    ) {
        self.cooldown = cooldown;
        self.opened_at = Some(now);
        // A cooldown too large for the clock (a hand-written trace) saturates instead of panicking.
        let until = now
            .checked_add(cooldown)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        self.enter(Phase::Open, reason, true, Some(until), transition);
        self.open_until = Some(until);
    }

    fn close(&mut self, reason: String, remote: bool, transition: &mut Option<Transition>) {
        self.enter(Phase::Closed, reason, remote, None, transition);
        self.open_until = None;
        self.last_retry_after = None;
    }

    /// Moves to `to`, starting a new cycle; chains with a transition already made in this
    /// step (open → half_open → closed by one health check) by keeping its `from`.
    fn enter(
        &mut self,
        to: Phase,
        reason: String,
        remote_attempted: bool,
        cooldown_until: Option<Instant>,
        transition: &mut Option<Transition>,
    ) {
        let from = transition.as_ref().map_or(self.phase, |t| t.from);
        let failures = self.failures;
        self.phase = to;
        self.generation += 1;
        self.successes = 0;
        self.probe_in_flight = false;
        if to == Phase::Closed {
            self.failures = 0;
        }
        if to != Phase::Open {
            self.open_until = None;
        }
        *transition = Some(Transition {
            from,
            to,
            reason,
            failures,
            cooldown_until,
            remote_attempted,
        });
    }

    /// Closed with nothing counted: what a close or a reset would leave.
    fn is_pristine(&self) -> bool {
        self.phase == Phase::Closed && self.failures == 0 && self.rate_limited_until.is_none()
    }

    /// Ends an admitted call that gave no verdict: a probe lease goes back.
    fn release(&mut self, t: Ticket) {
        if t.probe && t.generation == self.generation {
            self.probe_in_flight = false;
        }
    }
}

fn reject(skip: Skip, retry_after: Option<Duration>) -> Decision {
    Decision::Reject { skip, retry_after }
}
