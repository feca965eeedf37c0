//! The step function: one event applied to one breaker at `now` (README "What trips a breaker").

use std::time::Duration;

use tokio::time::Instant;

use super::{Breaker, Decision, Event, Output, Phase, Policy, Skip, Ticket, Transition};
use crate::outcome::{words, Failure};

impl Breaker {
    /// Applies one event at `now`. Pure: same inputs, same outputs.
    pub fn step(mut self, event: Event, now: Instant, policy: &Policy) -> (Breaker, Output) {
        let mut transition = None;
        let t = &mut transition;
        let decision = match event {
            Event::Request => self.admit(now, t),
            // An outcome from an earlier cycle never decides the current one.
            Event::Success(ticket) | Event::Failure(ticket, _)
                if ticket.generation != self.generation =>
            {
                Decision::Stale
            }
            Event::Success(ticket) => self.on_success(ticket, policy, t),
            Event::Failure(ticket, failure) => {
                self.on_failure(Some(ticket), failure, now, policy, t);
                Decision::Recorded
            }
            Event::RateLimited(ticket, until) => self.on_rate_limited(ticket, until),
            Event::AuthFailed(ticket, why) => self.on_auth_failed(ticket, why, t),
            Event::Cancel(ticket) => {
                self.release(ticket);
                Decision::Recorded
            }
            Event::PeerProbe(ticket, until) => self.on_peer_probe(ticket, until),
            Event::HealthPassed => self.on_health_passed(now, policy, t),
            Event::HealthFailed(failure) => self.on_health_failed(failure, now, policy, t),
            Event::ForceOpen(why) => self.force_open(why, t),
            Event::ForceClose(why) => self.force_close(why, t),
            Event::Reset(why) => self.reset(why, policy, t),
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
        if let Some(until) = self.peer_probe_until {
            if until > now {
                return reject(Skip::ProbeInFlight, Some(until - now));
            }
            self.peer_probe_until = None;
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

    /// A call of the current cycle succeeded.
    fn on_success(
        &mut self,
        t: Ticket,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) -> Decision {
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
        Decision::Recorded
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

    /// An active health check passed: it counts as a probe once the cooldown is over.
    fn on_health_passed(
        &mut self,
        now: Instant,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) -> Decision {
        let due = match self.phase {
            Phase::Open => self.open_until.is_none_or(|u| u <= now),
            Phase::HalfOpen => !self.probe_in_flight,
            _ => false,
        };
        if !due {
            return Decision::Recorded;
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
        Decision::Recorded
    }

    /// An active health check failed: a qualifying failure while calls are admitted.
    fn on_health_failed(
        &mut self,
        failure: Failure,
        now: Instant,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) -> Decision {
        if matches!(self.phase, Phase::Closed | Phase::HalfOpen) {
            self.on_failure(None, failure, now, policy, transition);
        }
        Decision::Recorded
    }

    /// 429 with a Retry-After that fits: not counted; the machine is skipped until the
    /// latest such time.
    fn on_rate_limited(&mut self, t: Ticket, until: Instant) -> Decision {
        self.rate_limited_until = Some(self.rate_limited_until.map_or(until, |u| u.max(until)));
        self.release(t);
        Decision::Recorded
    }

    /// 401/403: the machine is paused until a reload or a person lifts it.
    fn on_auth_failed(
        &mut self,
        t: Ticket,
        why: String,
        transition: &mut Option<Transition>,
    ) -> Decision {
        // A credentials problem is not a property of one cycle: it applies whatever
        // the generation, and only a reload or a person lifts it.
        self.release(t);
        if self.phase != Phase::AuthFailed {
            self.last_reason = Some(why.clone());
            self.enter(Phase::AuthFailed, why, true, None, transition);
        }
        Decision::Recorded
    }

    /// Another router holds the probe this ticket was admitted as, until `until`.
    fn on_peer_probe(&mut self, t: Ticket, until: Instant) -> Decision {
        if t.probe && t.generation == self.generation && self.phase == Phase::HalfOpen {
            self.peer_probe_until = Some(until);
        }
        self.release(t);
        Decision::Recorded
    }

    /// Opened by a person until one closes it. A manual action that would change nothing
    /// is no transition: nothing to ledger.
    fn force_open(&mut self, why: String, transition: &mut Option<Transition>) -> Decision {
        if self.phase != Phase::ForcedOpen {
            self.enter(Phase::ForcedOpen, why, false, None, transition);
        }
        Decision::Recorded
    }

    /// Closed by a person; nothing to ledger when it is closed with nothing counted.
    fn force_close(&mut self, why: String, transition: &mut Option<Transition>) -> Decision {
        if !self.is_pristine() {
            self.close(why, false, transition);
        }
        Decision::Recorded
    }

    /// Back to a new breaker, in a new cycle so no call of the old one decides it; nothing
    /// to ledger when it is closed with nothing counted.
    fn reset(
        &mut self,
        why: String,
        policy: &Policy,
        transition: &mut Option<Transition>,
    ) -> Decision {
        if self.is_pristine() {
            return Decision::Recorded;
        }
        let from = self.phase;
        let generation = self.generation;
        *self = Breaker::new(policy);
        self.generation = generation + 1;
        *transition = Some(Transition {
            from,
            to: Phase::Closed,
            reason: why,
            failures: 0,
            cooldown_until: None,
            remote_attempted: false,
        });
        Decision::Recorded
    }

    pub(super) fn open(
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

    pub(super) fn close(
        &mut self,
        reason: String,
        remote: bool,
        transition: &mut Option<Transition>,
    ) {
        self.enter(Phase::Closed, reason, remote, None, transition);
        self.open_until = None;
        self.last_retry_after = None;
    }

    /// Moves to `to`, starting a new cycle; chains with a transition already made in this
    /// step (open → half_open → closed by one health check) by keeping its `from`.
    pub(super) fn enter(
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
        self.peer_probe_until = None;
        self.decided_by = None;
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
