//! Unit tests of the pure breaker state machine (docs/api.md "Breaker classification", README "What
//! trips a breaker", docs/registry.md "machines:").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::outcome::words;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn refused() -> Failure {
    Failure::of_kind(FailureKind::Refused)
}

fn with_retry_after(retry_after: Duration) -> Failure {
    Failure {
        retry_after: Some(retry_after),
        ..Failure::of_kind(FailureKind::RateLimited)
    }
}

/// A breaker driven by hand: the state, its policy and an injected clock.
struct Rig {
    b: Breaker,
    p: Policy,
    base: Instant,
    now: Instant,
}

impl Rig {
    fn new(p: Policy) -> Rig {
        let base = Instant::now();
        Rig {
            b: Breaker::new(&p),
            p,
            base,
            now: base,
        }
    }

    fn default() -> Rig {
        Rig::new(Policy::default())
    }

    /// Sets the clock to `base + d`.
    fn at(&mut self, d: Duration) {
        self.now = self.base + d;
    }

    fn step(&mut self, event: Event) -> Output {
        let (b, out) = self.b.clone().step(event, self.now, &self.p);
        self.b = b;
        out
    }

    fn admit(&mut self) -> Ticket {
        let out = self.step(Event::Request);
        match out.decision {
            Decision::Admit(t) => t,
            other => panic!("expected an admission, got {other:?} (state {:?})", self.b),
        }
    }

    fn reject(&mut self) -> (Skip, Option<Duration>) {
        let out = self.step(Event::Request);
        match out.decision {
            Decision::Reject { skip, retry_after } => (skip, retry_after),
            other => panic!("expected a rejection, got {other:?} (state {:?})", self.b),
        }
    }

    fn fail(&mut self, t: Ticket) -> Output {
        self.step(Event::Failure(t, refused()))
    }

    fn succeed(&mut self, t: Ticket) -> Output {
        self.step(Event::Success(t))
    }

    /// Admits and fails `n` calls one after another.
    fn fail_n(&mut self, n: u32) -> Vec<Output> {
        (0..n)
            .map(|_| {
                let t = self.admit();
                self.fail(t)
            })
            .collect()
    }

    /// Opens a closed breaker with `failure_threshold` failures at the current time.
    fn open_now(&mut self) {
        let n = self.p.failure_threshold;
        self.fail_n(n);
        assert_eq!(self.b.phase, Phase::Open);
    }
}

fn transition(out: &Output) -> &Transition {
    out.transition
        .as_ref()
        .unwrap_or_else(|| panic!("expected a transition, got none ({out:?})"))
}

fn assert_transition(out: &Output, from: Phase, to: Phase, remote_attempted: bool) {
    let t = transition(out);
    assert_eq!((t.from, t.to), (from, to), "transition {t:?}");
    assert_eq!(
        t.remote_attempted, remote_attempted,
        "remote_attempted of {t:?}"
    );
}

// === closed ===

#[test]
fn closed_counts_consecutive_failures_and_opens_exactly_at_threshold() {
    let mut r = Rig::default();
    for n in 1..=2 {
        let t = r.admit();
        assert!(!t.probe, "a closed breaker admits ordinary calls");
        let out = r.fail(t);
        assert_eq!(out.decision, Decision::Recorded);
        assert_eq!(out.transition, None, "failure {n} is below the threshold");
        assert_eq!(r.b.phase, Phase::Closed);
        assert_eq!(r.b.failures, n);
    }
    let t = r.admit();
    let out = r.fail(t);
    assert_eq!(out.decision, Decision::Recorded);
    assert_eq!(r.b.phase, Phase::Open);
    assert_transition(&out, Phase::Closed, Phase::Open, true);
    let tr = transition(&out);
    assert_eq!(tr.failures, 3);
    assert_eq!(tr.cooldown_until, Some(r.now + secs(60)));
    assert_eq!(tr.reason, "connection refused");
    assert_eq!(r.b.open_until, Some(r.now + secs(60)));
    assert_eq!(r.b.opened_at, Some(r.now));
    assert_eq!(r.b.last_reason.as_deref(), Some("connection refused"));
}

#[test]
fn threshold_of_one_opens_on_first_failure() {
    let mut r = Rig::new(Policy {
        failure_threshold: 1,
        ..Policy::default()
    });
    let out = r.fail_n(1).remove(0);
    assert_transition(&out, Phase::Closed, Phase::Open, true);
}

#[test]
fn success_resets_consecutive_failures() {
    let mut r = Rig::default();
    r.fail_n(2);
    assert_eq!(r.b.failures, 2);
    let t = r.admit();
    let out = r.succeed(t);
    assert_eq!(out.decision, Decision::Recorded);
    assert_eq!(out.transition, None);
    assert_eq!(r.b.failures, 0);
    // Two more failures are again below the threshold: the count restarted.
    r.fail_n(2);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(r.b.failures, 2);
    r.fail_n(1);
    assert_eq!(r.b.phase, Phase::Open);
}

#[test]
fn success_from_a_concurrent_call_interleaves_with_failures() {
    // Failures are consecutive by outcome order, not by admission order.
    let mut r = Rig::default();
    let tickets: Vec<Ticket> = (0..4).map(|_| r.admit()).collect();
    r.fail(tickets[0]);
    r.fail(tickets[1]);
    r.succeed(tickets[2]);
    assert_eq!(r.b.failures, 0);
    r.fail(tickets[3]);
    assert_eq!(r.b.failures, 1);
    assert_eq!(r.b.phase, Phase::Closed);
}

// === open ===

#[test]
fn open_rejects_with_circuit_open_and_exact_retry_after() {
    let mut r = Rig::default();
    r.open_now();
    let before = r.b.clone();
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(60))));
    r.at(secs(10));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(50))));
    r.at(secs(59) + ms(999));
    let out = r.step(Event::Request);
    assert_eq!(
        out.decision,
        Decision::Reject {
            skip: Skip::CircuitOpen,
            retry_after: Some(ms(1)),
        }
    );
    assert_eq!(out.transition, None, "a rejection is not a phase change");
    assert_eq!(r.b, before, "rejections change nothing");
}

// === half-open ===

#[test]
fn after_cooldown_first_request_is_the_probe_and_others_get_probe_in_flight() {
    let mut r = Rig::default();
    r.open_now();
    let open_gen = r.b.generation;
    r.at(secs(60));
    let out = r.step(Event::Request);
    let Decision::Admit(probe) = out.decision else {
        panic!("expected the probe to be admitted, got {:?}", out.decision);
    };
    assert!(
        probe.probe,
        "the first call after the cooldown is the probe"
    );
    assert_transition(&out, Phase::Open, Phase::HalfOpen, false);
    assert_eq!(transition(&out).cooldown_until, None);
    assert_eq!(r.b.phase, Phase::HalfOpen);
    assert!(r.b.probe_in_flight);
    assert_eq!(probe.generation, r.b.generation);
    assert!(r.b.generation > open_gen);

    for later in [secs(60), secs(61), secs(600)] {
        r.at(later);
        let out = r.step(Event::Request);
        assert_eq!(
            out.decision,
            Decision::Reject {
                skip: Skip::ProbeInFlight,
                retry_after: None,
            }
        );
        assert_eq!(out.transition, None);
    }
    assert_eq!(r.b.phase, Phase::HalfOpen);
}

#[test]
fn probe_success_closes_with_success_threshold_one() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    let out = r.succeed(probe);
    assert_eq!(out.decision, Decision::Recorded);
    assert_transition(&out, Phase::HalfOpen, Phase::Closed, true);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(r.b.failures, 0);
    assert_eq!(r.b.successes, 0);
    assert!(!r.b.probe_in_flight);
    assert_eq!(r.b.open_until, None);
    let t = r.admit();
    assert!(!t.probe);
}

#[test]
fn success_threshold_two_needs_two_sequential_probes() {
    let mut r = Rig::new(Policy {
        success_threshold: 2,
        ..Policy::default()
    });
    r.open_now();
    r.at(secs(60));
    let first = r.admit();
    assert!(first.probe);
    assert_eq!(r.reject().0, Skip::ProbeInFlight);
    let out = r.succeed(first);
    assert_eq!(
        out.transition, None,
        "one probe success of two does not close"
    );
    assert_eq!(r.b.phase, Phase::HalfOpen);
    assert_eq!(r.b.successes, 1);
    assert!(!r.b.probe_in_flight);

    let second = r.admit();
    assert!(second.probe, "the next call is the second probe");
    assert_eq!(r.reject().0, Skip::ProbeInFlight);
    let out = r.succeed(second);
    assert_transition(&out, Phase::HalfOpen, Phase::Closed, true);
    assert_eq!(r.b.phase, Phase::Closed);
}

#[test]
fn failed_probe_reopens_with_cooldown_times_backoff() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    let out = r.fail(probe);
    assert_transition(&out, Phase::HalfOpen, Phase::Open, true);
    assert_eq!(transition(&out).cooldown_until, Some(r.now + secs(120)));
    assert_eq!(r.b.cooldown, secs(120));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(120))));
    r.at(secs(60 + 119));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(1))));
    r.at(secs(60 + 120));
    assert!(r.admit().probe);
}

#[test]
fn repeated_probe_failures_cap_at_max_cooldown() {
    let mut r = Rig::default();
    r.open_now();
    let mut elapsed = secs(0);
    let mut cooldowns = Vec::new();
    for _ in 0..7 {
        elapsed += r.b.cooldown;
        r.at(elapsed);
        let probe = r.admit();
        assert!(probe.probe);
        r.fail(probe);
        assert_eq!(r.b.phase, Phase::Open);
        cooldowns.push(r.b.cooldown.as_secs());
        assert_eq!(r.reject(), (Skip::CircuitOpen, Some(r.b.cooldown)));
    }
    assert_eq!(cooldowns, [120, 240, 480, 900, 900, 900, 900]);
}

#[test]
fn cooldown_starts_over_after_the_breaker_closes() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let p = r.admit();
    r.fail(p);
    assert_eq!(r.b.cooldown, secs(120));
    r.at(secs(180));
    let p = r.admit();
    r.succeed(p);
    assert_eq!(r.b.phase, Phase::Closed);
    r.open_now();
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(60))));
}

#[test]
fn cancelled_probe_leaves_half_open_and_admits_the_next_probe() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    for _ in 0..5 {
        let probe = r.admit();
        assert!(probe.probe);
        assert_eq!(r.reject().0, Skip::ProbeInFlight);
        let out = r.step(Event::Cancel(probe));
        assert_eq!(out.decision, Decision::Recorded);
        assert_eq!(out.transition, None, "a cancel never changes the phase");
        assert_eq!(r.b.phase, Phase::HalfOpen);
        assert_eq!(r.b.successes, 0, "a cancel never counts as a success");
        assert!(!r.b.probe_in_flight);
    }
    // The next probe still decides.
    let probe = r.admit();
    let out = r.fail(probe);
    assert_transition(&out, Phase::HalfOpen, Phase::Open, true);
}

#[test]
fn cancel_of_an_ordinary_call_changes_nothing() {
    let mut r = Rig::default();
    r.fail_n(2);
    let t = r.admit();
    let before = r.b.clone();
    let out = r.step(Event::Cancel(t));
    assert_eq!(out.transition, None);
    assert_eq!(r.b, before);
}

// === stale tickets ===

#[test]
fn stale_tickets_from_an_earlier_generation_change_nothing() {
    let mut r = Rig::default();
    let tickets: Vec<Ticket> = (0..5).map(|_| r.admit()).collect();
    for t in &tickets[..3] {
        r.fail(*t);
    }
    assert_eq!(r.b.phase, Phase::Open);
    let opened = r.b.clone();

    let out = r.fail(tickets[3]);
    assert_eq!(out.decision, Decision::Stale);
    assert_eq!(out.transition, None);
    assert_eq!(r.b, opened);

    let out = r.succeed(tickets[4]);
    assert_eq!(out.decision, Decision::Stale);
    assert_eq!(out.transition, None);
    assert_eq!(r.b, opened, "a late success does not close an open breaker");

    // Still stale in the half-open cycle that follows, and it does not take the probe's place.
    r.at(secs(60));
    let probe = r.admit();
    let half_open = r.b.clone();
    assert_eq!(r.succeed(tickets[4]).decision, Decision::Stale);
    assert_eq!(r.fail(tickets[3]).decision, Decision::Stale);
    assert_eq!(r.step(Event::Cancel(tickets[3])).transition, None);
    assert_eq!(r.b, half_open);
    assert_eq!(r.reject().0, Skip::ProbeInFlight);
    let out = r.succeed(probe);
    assert_transition(&out, Phase::HalfOpen, Phase::Closed, true);
}

#[test]
fn probe_ticket_is_stale_after_a_reset() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    r.step(Event::Reset("by hand".into()));
    let after_reset = r.b.clone();
    assert_eq!(r.fail(probe).decision, Decision::Stale);
    assert_eq!(r.b, after_reset);
}

// === 429 with Retry-After ===

#[test]
fn rate_limited_skips_until_then_without_counting_or_changing_phase() {
    let mut r = Rig::default();
    r.fail_n(2);
    let t = r.admit();
    let until = r.now + secs(30);
    let out = r.step(Event::RateLimited(t, until));
    assert_eq!(out.decision, Decision::Recorded);
    assert_eq!(out.transition, None);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(
        r.b.failures, 2,
        "a 429 that fits the deadline is not a failure"
    );

    assert_eq!(r.reject(), (Skip::RateLimited, Some(secs(30))));
    r.at(secs(29));
    assert_eq!(r.reject(), (Skip::RateLimited, Some(secs(1))));
    r.at(secs(30));
    let t = r.admit();
    assert!(!t.probe);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(r.b.failures, 2);
    // One more failure is the third consecutive one.
    r.fail(t);
    assert_eq!(r.b.phase, Phase::Open);
}

#[test]
fn rate_limited_keeps_the_later_of_two_deadlines() {
    let mut r = Rig::default();
    let a = r.admit();
    let b = r.admit();
    r.step(Event::RateLimited(a, r.base + secs(40)));
    r.step(Event::RateLimited(b, r.base + secs(10)));
    assert_eq!(r.reject(), (Skip::RateLimited, Some(secs(40))));
}

#[test]
fn rate_limited_probe_releases_the_lease_and_stays_half_open() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    let out = r.step(Event::RateLimited(probe, r.base + secs(70)));
    assert_eq!(out.transition, None);
    assert_eq!(r.b.phase, Phase::HalfOpen);
    assert_eq!(r.b.successes, 0);
    assert!(!r.b.probe_in_flight);
    assert_eq!(r.reject(), (Skip::RateLimited, Some(secs(10))));
    r.at(secs(70));
    assert!(r.admit().probe);
}

#[test]
fn failure_retry_after_lengthens_the_opening_cooldown() {
    // Longer than the cooldown: used.
    let mut r = Rig::default();
    r.fail_n(2);
    let t = r.admit();
    let out = r.step(Event::Failure(t, with_retry_after(secs(300))));
    assert_transition(&out, Phase::Closed, Phase::Open, true);
    assert_eq!(transition(&out).cooldown_until, Some(r.now + secs(300)));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(300))));
    assert_eq!(r.b.last_retry_after, Some(secs(300)));

    // Beyond max_cooldown: capped.
    let mut r = Rig::default();
    r.fail_n(2);
    let t = r.admit();
    r.step(Event::Failure(t, with_retry_after(secs(3 * 3600))));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(15 * 60))));

    // Shorter than the cooldown: the cooldown stands.
    let mut r = Rig::default();
    r.fail_n(2);
    let t = r.admit();
    r.step(Event::Failure(t, with_retry_after(secs(5))));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(60))));
}

#[test]
fn failed_probe_retry_after_beyond_backoff_is_used() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    r.step(Event::Failure(probe, with_retry_after(secs(500))));
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(500))));
}

// === 401/403 and manual control ===

#[test]
fn auth_failed_pauses_until_reset() {
    let mut r = Rig::default();
    r.fail_n(1);
    let t = r.admit();
    let out = r.step(Event::AuthFailed(t, "HTTP 401".into()));
    assert_eq!(out.decision, Decision::Recorded);
    assert_transition(&out, Phase::Closed, Phase::AuthFailed, true);
    assert_eq!(transition(&out).reason, "HTTP 401");
    assert_eq!(r.b.phase, Phase::AuthFailed);
    assert_eq!(r.b.failures, 1, "a 401 is not counted as a failure");

    for later in [secs(0), secs(3600), secs(7 * 24 * 3600)] {
        r.at(later);
        assert_eq!(r.reject(), (Skip::AuthFailed, None));
    }
    // Health checks do not lift it.
    let out = r.step(Event::HealthPassed);
    assert_eq!(out.transition, None);
    let out = r.step(Event::HealthFailed(Failure::of_kind(
        FailureKind::HealthCheck,
    )));
    assert_eq!(out.transition, None);
    assert_eq!(r.reject(), (Skip::AuthFailed, None));

    let out = r.step(Event::Reset("config reloaded".into()));
    assert_transition(&out, Phase::AuthFailed, Phase::Closed, false);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(r.b.failures, 0);
    assert!(!r.admit().probe);
}

#[test]
fn auth_failed_of_a_probe_pauses_the_half_open_breaker() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    let out = r.step(Event::AuthFailed(probe, "HTTP 403".into()));
    assert_transition(&out, Phase::HalfOpen, Phase::AuthFailed, true);
    assert!(!r.b.probe_in_flight);
    assert_eq!(r.reject(), (Skip::AuthFailed, None));
}

#[test]
fn force_open_rejects_until_force_close() {
    let mut r = Rig::default();
    let t = r.admit();
    let out = r.step(Event::ForceOpen("maintenance".into()));
    assert_transition(&out, Phase::Closed, Phase::ForcedOpen, false);
    assert_eq!(transition(&out).reason, "maintenance");
    for later in [secs(0), secs(60), secs(86_400)] {
        r.at(later);
        assert_eq!(r.reject(), (Skip::ForcedOpen, None));
    }
    // An outcome admitted before the manual open does not change it.
    assert_eq!(r.succeed(t).decision, Decision::Stale);
    assert_eq!(r.step(Event::HealthPassed).transition, None);
    assert_eq!(r.reject(), (Skip::ForcedOpen, None));

    let out = r.step(Event::ForceClose("done".into()));
    assert_transition(&out, Phase::ForcedOpen, Phase::Closed, false);
    assert!(!r.admit().probe);
}

#[test]
fn force_open_rejects_until_reset() {
    let mut r = Rig::default();
    r.open_now();
    let out = r.step(Event::ForceOpen("by hand".into()));
    assert_transition(&out, Phase::Open, Phase::ForcedOpen, false);
    r.at(secs(3600));
    assert_eq!(r.reject(), (Skip::ForcedOpen, None));
    let out = r.step(Event::Reset("by hand".into()));
    assert_transition(&out, Phase::ForcedOpen, Phase::Closed, false);
    assert_eq!(r.b.cooldown, r.p.cooldown);
    assert!(!r.admit().probe);
}

#[test]
fn force_close_of_an_open_breaker_admits_at_once() {
    let mut r = Rig::default();
    r.open_now();
    let out = r.step(Event::ForceClose("by hand".into()));
    assert_transition(&out, Phase::Open, Phase::Closed, false);
    assert_eq!(r.b.failures, 0);
    assert_eq!(r.b.open_until, None);
    assert!(!r.admit().probe);
}

// === active health checks ===

fn health_failed() -> Event {
    Event::HealthFailed(Failure::new(
        FailureKind::HealthCheck,
        "health check: connection refused",
    ))
}

#[test]
fn health_failures_count_as_failures_in_closed() {
    let mut r = Rig::default();
    assert_eq!(r.step(health_failed()).transition, None);
    assert_eq!(r.step(health_failed()).transition, None);
    assert_eq!(r.b.failures, 2);
    let out = r.step(health_failed());
    assert_eq!(out.decision, Decision::Recorded);
    assert_transition(&out, Phase::Closed, Phase::Open, true);
    assert_eq!(r.b.phase, Phase::Open);
    assert_eq!(r.reject(), (Skip::CircuitOpen, Some(secs(60))));
}

#[test]
fn health_failures_and_request_failures_add_up() {
    let mut r = Rig::default();
    r.fail_n(1);
    r.step(health_failed());
    assert_eq!(r.b.phase, Phase::Closed);
    r.fail_n(1);
    assert_eq!(r.b.phase, Phase::Open);
}

#[test]
fn health_failed_while_open_changes_nothing() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(30));
    let before = r.b.clone();
    let out = r.step(health_failed());
    assert_eq!(out.transition, None);
    assert_eq!(
        r.b.open_until, before.open_until,
        "does not extend the cooldown"
    );
    assert_eq!(r.b.phase, Phase::Open);
}

#[test]
fn health_passed_after_the_cooldown_closes_an_open_breaker() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let out = r.step(Event::HealthPassed);
    assert_eq!(out.decision, Decision::Recorded);
    // One step, one transition: open -> closed (the half-open leg is folded in).
    assert_transition(&out, Phase::Open, Phase::Closed, true);
    assert_eq!(r.b.phase, Phase::Closed);
    assert_eq!(r.b.failures, 0);
    assert!(!r.admit().probe);
}

#[test]
fn health_passed_with_success_threshold_two_acts_as_one_probe() {
    let mut r = Rig::new(Policy {
        success_threshold: 2,
        ..Policy::default()
    });
    r.open_now();
    r.at(secs(60));
    let out = r.step(Event::HealthPassed);
    assert_transition(&out, Phase::Open, Phase::HalfOpen, true);
    assert_eq!(r.b.successes, 1);
    let out = r.step(Event::HealthPassed);
    assert_transition(&out, Phase::HalfOpen, Phase::Closed, true);
}

#[test]
fn health_passed_before_the_cooldown_passes_does_nothing() {
    let mut r = Rig::default();
    r.open_now();
    for at in [secs(0), secs(30), secs(59) + ms(999)] {
        r.at(at);
        let before = r.b.clone();
        let out = r.step(Event::HealthPassed);
        assert_eq!(out.transition, None);
        assert_eq!(r.b, before);
    }
    assert_eq!(r.reject().0, Skip::CircuitOpen);
}

#[test]
fn health_passed_in_closed_never_resets_the_failure_count() {
    let mut r = Rig::default();
    r.fail_n(2);
    let before = r.b.clone();
    for _ in 0..5 {
        let out = r.step(Event::HealthPassed);
        assert_eq!(out.transition, None);
    }
    assert_eq!(r.b, before);
    assert_eq!(r.b.failures, 2);
    r.fail_n(1);
    assert_eq!(r.b.phase, Phase::Open);
}

#[test]
fn health_passed_does_not_take_over_a_probe_in_flight() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let probe = r.admit();
    let before = r.b.clone();
    let out = r.step(Event::HealthPassed);
    assert_eq!(out.transition, None);
    assert_eq!(r.b, before);
    let out = r.fail(probe);
    assert_transition(&out, Phase::HalfOpen, Phase::Open, true);
}

// === transitions ===

#[test]
fn every_phase_change_yields_exactly_one_transition() {
    let mut r = Rig::new(Policy {
        failure_threshold: 2,
        ..Policy::default()
    });
    let mut seen: Vec<(Phase, Phase, bool)> = Vec::new();
    let mut drive = |r: &mut Rig, event: Event| {
        let before = r.b.phase;
        let out = r.step(event);
        match &out.transition {
            Some(t) => {
                assert_eq!(t.from, before, "{t:?}");
                assert_eq!(t.to, r.b.phase, "{t:?}");
                seen.push((t.from, t.to, t.remote_attempted));
            }
            None => assert_eq!(r.b.phase, before, "a phase change without a transition"),
        }
        out
    };
    let t1 = match drive(&mut r, Event::Request).decision {
        Decision::Admit(t) => t,
        d => panic!("{d:?}"),
    };
    drive(&mut r, Event::Failure(t1, refused()));
    let t2 = match drive(&mut r, Event::Request).decision {
        Decision::Admit(t) => t,
        d => panic!("{d:?}"),
    };
    drive(&mut r, Event::Failure(t2, refused())); // closed -> open
    drive(&mut r, Event::Request); // rejected
    r.at(secs(60));
    let p = match drive(&mut r, Event::Request).decision {
        Decision::Admit(t) => t, // open -> half_open
        d => panic!("{d:?}"),
    };
    drive(&mut r, Event::Request); // probe in flight
    drive(&mut r, Event::Failure(p, refused())); // half_open -> open
    r.at(secs(180));
    let p = match drive(&mut r, Event::Request).decision {
        Decision::Admit(t) => t, // open -> half_open
        d => panic!("{d:?}"),
    };
    drive(&mut r, Event::Success(p)); // half_open -> closed
    drive(&mut r, Event::ForceOpen("x".into())); // closed -> forced_open
    drive(&mut r, Event::ForceClose("x".into())); // forced_open -> closed
    let t3 = match drive(&mut r, Event::Request).decision {
        Decision::Admit(t) => t,
        d => panic!("{d:?}"),
    };
    drive(&mut r, Event::AuthFailed(t3, "HTTP 401".into())); // closed -> auth_failed
    drive(&mut r, Event::Reset("reload".into())); // auth_failed -> closed

    use Phase::*;
    assert_eq!(
        seen,
        [
            (Closed, Open, true),
            (Open, HalfOpen, false),
            (HalfOpen, Open, true),
            (Open, HalfOpen, false),
            (HalfOpen, Closed, true),
            (Closed, ForcedOpen, false),
            (ForcedOpen, Closed, false),
            (Closed, AuthFailed, true),
            (AuthFailed, Closed, false),
        ]
    );
}

#[test]
fn step_is_pure() {
    let p = Policy::default();
    let now = Instant::now();
    let mut b = Breaker::new(&p);
    for _ in 0..3 {
        let (next, _) = b.step(Event::Request, now, &p);
        let (next, _) = next.step(
            Event::Failure(
                Ticket {
                    generation: 0,
                    probe: false,
                },
                refused(),
            ),
            now,
            &p,
        );
        b = next;
    }
    let later = now + secs(60);
    let a = b.clone().step(Event::Request, later, &p);
    let c = b.clone().step(Event::Request, later, &p);
    assert_eq!(a, c);
}

// === failure::words ===

#[test]
fn words_formats_durations_as_people_say_them() {
    assert_eq!(words(ms(250)), "250ms");
    assert_eq!(words(ms(0)), "0ms");
    assert_eq!(words(secs(5)), "5s");
    assert_eq!(words(secs(90)), "1m30s");
    assert_eq!(words(secs(15 * 60)), "15m");
    assert_eq!(words(secs(3600)), "1h");
    assert_eq!(words(secs(3600 + 120)), "1h2m");
    assert_eq!(words(secs(3600 + 61)), "1h1m1s");
    assert_eq!(words(ms(1500)), "1.5s");
}

#[test]
fn failure_displays_its_plain_words() {
    assert_eq!(
        Failure::of_kind(FailureKind::Hung).to_string(),
        "no answer, liveness check failed"
    );
    assert_eq!(
        Failure::new(FailureKind::Http5xx, "HTTP 502").to_string(),
        "HTTP 502"
    );
}

#[test]
fn half_open_transition_reason_names_the_cooldown() {
    let mut r = Rig::default();
    r.open_now();
    r.at(secs(60));
    let out = r.step(Event::Request);
    assert_eq!(transition(&out).reason, "cooldown of 1m passed");
}

// === property: a long pseudo-random walk ===

/// A small deterministic LCG (Knuth's MMIX constants); no new dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs `steps` random events and checks the invariants after each; returns the final state.
fn random_walk(seed: u64, steps: usize, p: &Policy) -> Breaker {
    let mut rng = Lcg(seed);
    let base = Instant::now();
    let mut now = base;
    let mut b = Breaker::new(p);
    // Admitted calls whose outcome has not been reported yet.
    let mut outstanding: Vec<Ticket> = Vec::new();
    let mut probes_admitted = 0u32;
    let mut seen: Vec<(Phase, Phase)> = Vec::new();

    for i in 0..steps {
        let roll = rng.below(100);
        let take = |rng: &mut Lcg, outstanding: &mut Vec<Ticket>| -> Option<Ticket> {
            if outstanding.is_empty() {
                None
            } else {
                let k = rng.below(outstanding.len() as u64) as usize;
                Some(outstanding.swap_remove(k))
            }
        };
        let event = match roll {
            0..=29 => Event::Request,
            30..=44 => match take(&mut rng, &mut outstanding) {
                Some(t) => Event::Success(t),
                None => Event::Request,
            },
            45..=59 => match take(&mut rng, &mut outstanding) {
                Some(t) => {
                    let mut f = refused();
                    if rng.below(4) == 0 {
                        f.retry_after = Some(ms(rng.below(2_000_000)));
                    }
                    Event::Failure(t, f)
                }
                None => Event::Request,
            },
            60..=64 => match take(&mut rng, &mut outstanding) {
                Some(t) => Event::Cancel(t),
                None => Event::Request,
            },
            65..=67 => match take(&mut rng, &mut outstanding) {
                Some(t) => Event::RateLimited(t, now + ms(rng.below(60_000))),
                None => Event::Request,
            },
            68 => match take(&mut rng, &mut outstanding) {
                Some(t) => Event::AuthFailed(t, "HTTP 401".into()),
                None => Event::Request,
            },
            69..=74 => Event::HealthPassed,
            75..=79 => Event::HealthFailed(Failure::of_kind(FailureKind::HealthCheck)),
            80 => Event::ForceOpen("walk".into()),
            81 => Event::ForceClose("walk".into()),
            82..=83 => Event::Reset("walk".into()),
            _ => {
                now += ms(rng.below(120_000));
                continue;
            }
        };
        let before = b.clone();
        let (after, out) = b.step(event.clone(), now, p);
        b = after;

        // The decision fits the event and the phase.
        match (&event, &out.decision) {
            (Event::Request, Decision::Admit(t)) => {
                assert_eq!(t.generation, b.generation, "step {i}");
                match b.phase {
                    Phase::HalfOpen => {
                        assert!(t.probe, "step {i}: half-open admits only probes");
                        assert!(
                            !outstanding
                                .iter()
                                .any(|o| o.probe && o.generation == b.generation),
                            "step {i}: a second probe admitted while one is in flight: {b:?}"
                        );
                        probes_admitted += 1;
                    }
                    Phase::Closed => assert!(!t.probe, "step {i}: closed admits no probe"),
                    other => panic!("step {i}: admitted while {other}"),
                }
                outstanding.push(*t);
            }
            (Event::Request, Decision::Reject { skip, retry_after }) => {
                if let (Skip::CircuitOpen, Some(ra)) = (skip, retry_after) {
                    assert!(
                        *ra > Duration::ZERO && *ra <= p.max_cooldown,
                        "step {i}: {ra:?}"
                    );
                }
            }
            (Event::Request, d) => panic!("step {i}: a request got {d:?}"),
            (_, Decision::Admit(_)) => panic!("step {i}: only a request is admitted"),
            _ => {}
        }

        // Transitions match phase changes.
        match &out.transition {
            Some(t) => {
                assert_eq!(t.from, before.phase, "step {i}: {t:?}");
                assert_eq!(t.to, b.phase, "step {i}: {t:?}");
                if !seen.contains(&(t.from, t.to)) {
                    seen.push((t.from, t.to));
                }
            }
            None => assert_eq!(b.phase, before.phase, "step {i}: phase changed silently"),
        }

        // State invariants.
        let probes_out = outstanding
            .iter()
            .filter(|o| o.probe && o.generation == b.generation)
            .count();
        assert!(probes_out <= 1, "step {i}: {probes_out} probes in flight");
        assert_eq!(
            b.probe_in_flight,
            probes_out == 1,
            "step {i}: lease and tickets disagree: {b:?}"
        );
        if b.probe_in_flight {
            assert_eq!(b.phase, Phase::HalfOpen, "step {i}");
        }
        assert_eq!(
            b.open_until.is_some(),
            b.phase == Phase::Open,
            "step {i}: {b:?}"
        );
        assert!(
            b.cooldown >= p.cooldown && b.cooldown <= p.max_cooldown,
            "step {i}: {b:?}"
        );
        if b.phase == Phase::Closed {
            assert!(b.failures < p.failure_threshold, "step {i}: {b:?}");
        }
        assert!(b.successes < p.success_threshold, "step {i}: {b:?}");
        assert!(b.generation >= before.generation, "step {i}");

        // Keep the set of outstanding calls bounded (old calls end without a report,
        // as when their lease expires upstream; they stay stale forever after).
        if outstanding.len() > 64 {
            let gen = b.generation;
            outstanding.retain(|o| o.generation == gen);
        }
    }
    assert!(
        probes_admitted > 0,
        "the walk never reached half-open: seed {seed}"
    );
    b
}

#[test]
fn random_walk_never_admits_two_probes_and_never_panics() {
    let policies = [
        Policy {
            failure_threshold: 3,
            cooldown: secs(10),
            backoff: 2.0,
            max_cooldown: secs(120),
            success_threshold: 1,
        },
        Policy {
            failure_threshold: 2,
            cooldown: secs(5),
            backoff: 1.5,
            max_cooldown: secs(60),
            success_threshold: 2,
        },
    ];
    for (k, p) in policies.iter().enumerate() {
        let seed = 0x5eed_0000 + k as u64;
        let a = random_walk(seed, 10_000, p);
        // Pure: the same walk ends in the same state.
        let b = random_walk(seed, 10_000, p);
        assert_eq!(a.phase, b.phase);
        assert_eq!(a.failures, b.failures);
        assert_eq!(a.generation, b.generation);
        assert_eq!(a.cooldown, b.cooldown);
    }
}
