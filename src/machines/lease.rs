//! An admitted call: a concurrency slot and the breaker's ticket, reporting exactly one
//! outcome (a lease dropped without one reports `Cancel`). A probe's outcome may come early,
//! from [`Lease::vouch`], as soon as the machine shows it works (README "What trips a breaker").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::tracker::{lock, step_tracker, Tracker};
use super::Bus;
use crate::breaker::{Decision, Event, Failure, Phase, Ticket};
use crate::outcome::{Attempted, Effect};

/// An admitted call to one machine: a concurrency slot plus the breaker's ticket.
#[derive(Debug)]
pub struct Lease {
    tracker: Arc<Tracker>,
    bus: Arc<Bus>,
    ticket: Ticket,
    done: bool,
    /// The probe's verdict already came ([`Lease::vouch`]). Atomic, not a `Cell`: the
    /// attempt holds `&Lease` across awaits in a future that must be `Send`.
    vouched: AtomicBool,
    /// The pool's probe lease in Redis (README "Several routers"), released when this lease ends:
    /// after its outcome, so the verdict is published before another router may probe.
    pool: Option<crate::cluster::Hold>,
}

/// Whether a probe is still undecided: its breaker is in the cycle it was admitted in.
/// The pool's lease renews itself while it is, knowing no more of the breaker than this.
#[derive(Clone, Debug)]
pub(super) struct ProbeWatch {
    tracker: Arc<Tracker>,
    generation: u64,
}

impl crate::cluster::Probe for ProbeWatch {
    fn machine(&self) -> &str {
        &self.tracker.name
    }

    fn undecided(&self) -> bool {
        lock(&self.tracker.state).breaker.generation == self.generation
    }
}

impl Lease {
    /// The lease of a call `tracker`'s breaker admitted with `ticket`.
    pub(super) fn new(tracker: Arc<Tracker>, bus: Arc<Bus>, ticket: Ticket) -> Lease {
        Lease {
            tracker,
            bus,
            ticket,
            done: false,
            vouched: AtomicBool::new(false),
            pool: None,
        }
    }

    pub(super) fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    pub(super) fn watch(&self) -> ProbeWatch {
        ProbeWatch {
            tracker: Arc::clone(&self.tracker),
            generation: self.ticket.generation,
        }
    }

    pub(super) fn hold(&mut self, hold: crate::cluster::Hold) {
        self.pool = Some(hold);
    }

    /// The probe is another router's for `left` (README "Several routers"): this lease ends without
    /// a verdict and the breaker answers `probe_in_flight` meanwhile.
    pub(super) fn peer_probe(mut self, left: std::time::Duration) -> super::Rejected {
        self.done = true;
        let until = crate::clock::after(tokio::time::Instant::now(), left);
        step_tracker(
            &self.tracker,
            &self.bus,
            Event::PeerProbe(self.ticket, until),
        );
        // Not sent after all: a local rejection, not a remote attempt.
        self.tracker.remote_attempts.fetch_sub(1, Ordering::Relaxed);
        self.tracker
            .local_rejections
            .fetch_add(1, Ordering::Relaxed);
        let b = &lock(&self.tracker.state).breaker;
        super::Rejected {
            skip: crate::breaker::Skip::ProbeInFlight,
            retry_after: Some(left),
            held: crate::outcome::Held {
                phase: b.phase,
                failures: b.failures,
                last_reason: b.last_reason.clone(),
            },
        }
    }

    /// The machine showed it works (2xx headers, a stream's first chunk, a passed liveness
    /// check): a probe's verdict comes now, not when a long generation ends (README "What trips a
    /// breaker"). Once per lease; a call that is no probe has no verdict to give early. The slot is
    /// still held until the lease ends.
    pub fn vouch(&self) {
        if !self.ticket.probe || self.vouched.swap(true, Ordering::AcqRel) {
            return;
        }
        step_tracker(&self.tracker, &self.bus, Event::Success(self.ticket));
        tracing::debug!(machine = %self.tracker.name, "probe vouched: the machine works");
        // Below `success_threshold` the breaker stays half-open and admits the next probe now.
        self.bus.changed.notify_waiters();
    }

    fn is_vouched(&self) -> bool {
        self.vouched.load(Ordering::Acquire)
    }

    /// The ticket this call's end reports with: once vouched, no longer a probe's, so it
    /// cannot decide the cycle again or hand back a probe lease the next probe now holds.
    fn ticket(&self) -> Ticket {
        Ticket {
            probe: self.ticket.probe && !self.is_vouched(),
            ..self.ticket
        }
    }
}

impl Lease {
    /// This call is the half-open breaker's probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.probe
    }

    /// The call served: the machine works.
    pub fn succeed(self) -> Decision {
        let t = self.ticket();
        self.report(Event::Success(t), None)
    }

    /// The call failed in a way that counts (a stream cut after bytes reached the client).
    pub fn fail(self, failure: Failure) -> Decision {
        let t = self.ticket();
        self.report(Event::Failure(t, failure), None)
    }

    /// The call did not serve: its breaker records what `attempted` says it should.
    pub fn finish(self, attempted: &Attempted) -> Decision {
        let t = self.ticket();
        match attempted.effect {
            Effect::Counted(kind) => self.fail(Failure {
                kind,
                detail: attempted.detail.clone(),
                retry_after: attempted.retry_after,
            }),
            Effect::Throttled(until) => {
                self.report(Event::RateLimited(t, until), Some("rate limited"))
            }
            Effect::Paused => self.report(Event::AuthFailed(t, attempted.detail.clone()), None),
            Effect::None => self.report(Event::Cancel(t), Some("no verdict")),
        }
    }

    /// Reports how the call ended. Consumes the lease: one outcome per admission. A vouched
    /// probe gave its verdict already: success, failure or no verdict at the end is stale,
    /// as it would be for any call admitted before the cycle it closed (a 429's wait and a
    /// 401's pause still apply: they are not verdicts on the cycle).
    fn report(mut self, event: Event, no_verdict: Option<&'static str>) -> Decision {
        self.done = true;
        let verdict = matches!(
            event,
            Event::Success(_) | Event::Failure(..) | Event::Cancel(_)
        );
        if verdict && self.is_vouched() {
            return Decision::Stale;
        }
        let decision = step_tracker(&self.tracker, &self.bus, event);
        if let Some(why) = no_verdict {
            self.probe_released(why);
        }
        decision
    }

    /// Says so when a probe ended without a verdict and the breaker, still half-open, will
    /// admit the next request as its probe (README "What trips a breaker"): once per probe, never
    /// per request.
    fn probe_released(&self, why: &'static str) {
        if !self.ticket.probe || self.is_vouched() {
            return;
        }
        let b = &lock(&self.tracker.state).breaker;
        if b.phase == Phase::HalfOpen
            && !b.probe_in_flight
            && b.generation == self.ticket.generation
        {
            tracing::info!(machine = %self.tracker.name, why, "probe ended without a verdict; the next request may probe");
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.done && !self.is_vouched() {
            step_tracker(&self.tracker, &self.bus, Event::Cancel(self.ticket));
            self.probe_released("client gone");
        }
        self.tracker.inflight.fetch_sub(1, Ordering::AcqRel);
        self.bus.changed.notify_waiters();
    }
}
