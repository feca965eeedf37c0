//! A peer's verdict taken over by the pure breaker (README "Several routers"), and the peer-held
//! probe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::super::{Breaker, Decision, Event, Failure, FailureKind, Phase, Policy, Skip};
use super::Adopted;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn peer(state: Phase, cooldown: u64, left_ms: u64) -> Adopted {
    Adopted {
        state,
        cooldown: secs(cooldown),
        left: Duration::from_millis(left_ms),
        node: Arc::from("mac-mini"),
        reason: "connection refused".into(),
        failures: 3,
    }
}

fn request(b: Breaker, now: Instant, p: &Policy) -> (Breaker, Decision) {
    let (b, out) = b.step(Event::Request, now, p);
    (b, out.decision)
}

/// A peer's open verdict with nothing left, and the request it then admits as the probe.
fn probing(now: Instant, p: &Policy) -> (Breaker, super::super::Ticket) {
    let (b, _) = Breaker::new(p).adopt(&peer(Phase::Open, 60, 0), now, p);
    let (b, d) = request(b, now, p);
    match d {
        Decision::Admit(ticket) if ticket.probe => (b, ticket),
        d => panic!("expected the probe, got {d:?}"),
    }
}

#[test]
fn an_adopted_open_skips_without_a_failure_and_ends_when_redis_said() {
    let p = Policy::default();
    let now = Instant::now();
    let (b, t) = Breaker::new(&p).adopt(&peer(Phase::Open, 120, 90_000), now, &p);
    let t = t.expect("closed -> open is a transition");
    assert_eq!(
        (t.from, t.to, t.remote_attempted),
        (Phase::Closed, Phase::Open, false)
    );
    assert!(t.reason.starts_with("opened by mac-mini: "), "{}", t.reason);
    assert_eq!(b.decided_by.as_deref(), Some("mac-mini"));
    assert_eq!(
        b.cooldown,
        secs(120),
        "the peer's cooldown, within this policy"
    );
    // 90 s left, whatever the peer's clock said: rejected before, probed after.
    let (b, d) = request(b, now + secs(89), &p);
    assert!(
        matches!(d, Decision::Reject { skip: Skip::CircuitOpen, retry_after: Some(r) } if r == secs(1))
    );
    let (b, d) = request(b, now + secs(90), &p);
    assert!(matches!(d, Decision::Admit(t) if t.probe));
    assert_eq!(b.phase, Phase::HalfOpen);
    assert_eq!(b.decided_by, None, "the probe is this router's own again");
}

#[test]
fn values_out_of_this_policy_are_clamped() {
    let p = Policy {
        cooldown: secs(10),
        max_cooldown: secs(60),
        ..Policy::default()
    };
    let now = Instant::now();
    let (b, _) = Breaker::new(&p).adopt(&peer(Phase::Open, 86_400 * 30, u64::MAX / 4), now, &p);
    assert_eq!(b.cooldown, secs(60));
    assert_eq!(
        b.open_until,
        Some(now + secs(60)),
        "never longer than max_cooldown"
    );
    let (b, _) = Breaker::new(&p).adopt(&peer(Phase::Open, 0, 0), now, &p);
    assert_eq!(b.cooldown, secs(10));
    assert_eq!(b.open_until, Some(now), "nothing left: due for a probe");
}

#[test]
fn an_open_breaker_moves_its_end_without_a_new_transition() {
    let p = Policy::default();
    let now = Instant::now();
    let (b, _) = Breaker::new(&p).adopt(&peer(Phase::Open, 60, 60_000), now, &p);
    let generation = b.generation;
    let (b, t) = b.adopt(&peer(Phase::Open, 120, 120_000), now + secs(1), &p);
    assert!(t.is_none());
    assert_eq!(b.generation, generation);
    assert_eq!(b.open_until, Some(now + secs(121)));
    assert_eq!(b.cooldown, secs(120));
}

#[test]
fn a_peer_close_ends_the_outage_and_cancels_our_probe() {
    let p = Policy::default();
    let now = Instant::now();
    let (b, ticket) = probing(now, &p);
    let (b, t) = b.adopt(&peer(Phase::Closed, 60, 0), now + secs(1), &p);
    assert_eq!(
        t.map(|t| (t.from, t.to)),
        Some((Phase::HalfOpen, Phase::Closed))
    );
    // Our own probe's outcome came from an older cycle: it decides nothing.
    let failure = Failure::of_kind(FailureKind::Refused);
    let (b, out) = b.step(Event::Failure(ticket, failure), now + secs(2), &p);
    assert_eq!(out.decision, Decision::Stale);
    assert_eq!(b.phase, Phase::Closed);
}

#[test]
fn auth_pauses_and_hand_forced_opens_are_this_routers_own() {
    let p = Policy::default();
    let now = Instant::now();
    let (paused, _) = Breaker::new(&p).step(
        Event::AuthFailed(
            super::super::Ticket {
                generation: 0,
                probe: false,
            },
            "401".into(),
        ),
        now,
        &p,
    );
    for state in [Phase::Open, Phase::ForcedOpen, Phase::Closed] {
        let (b, t) = paused.clone().adopt(&peer(state, 60, 1000), now, &p);
        assert!(t.is_none());
        assert_eq!(b.phase, Phase::AuthFailed);
    }
    let (forced, _) = Breaker::new(&p).step(Event::ForceOpen("manual open".into()), now, &p);
    let (b, t) = forced.clone().adopt(&peer(Phase::Open, 60, 1000), now, &p);
    assert!(t.is_none() && b.phase == Phase::ForcedOpen);
    let (b, t) = forced.clone().adopt(&peer(Phase::Closed, 60, 0), now, &p);
    assert!(
        t.is_none() && b.phase == Phase::ForcedOpen,
        "a probe elsewhere does not undo a hand"
    );
    let by_hand = Adopted {
        reason: "manual close by alice".into(),
        ..peer(Phase::Closed, 60, 0)
    };
    let (b, t) = forced.adopt(&by_hand, now, &p);
    assert!(
        t.is_some() && b.phase == Phase::Closed,
        "a hand elsewhere does"
    );
    let (b, t) = Breaker::new(&p).adopt(&peer(Phase::ForcedOpen, 60, 0), now, &p);
    assert_eq!(t.map(|t| t.to), Some(Phase::ForcedOpen));
    assert_eq!(b.phase, Phase::ForcedOpen);
}

#[test]
fn a_probe_held_by_a_peer_answers_probe_in_flight_until_its_lease_would_expire() {
    let p = Policy::default();
    let now = Instant::now();
    let (b, ticket) = probing(now, &p);
    let (b, _) = b.step(Event::PeerProbe(ticket, now + secs(15)), now, &p);
    assert!(!b.probe_in_flight, "our lease went back");
    let (b, d) = request(b, now + secs(14), &p);
    assert!(
        matches!(d, Decision::Reject { skip: Skip::ProbeInFlight, retry_after: Some(r) } if r == secs(1))
    );
    // The peer died mid-probe: its lease expired, and this router may probe.
    let (b, d) = request(b, now + secs(15), &p);
    assert!(matches!(d, Decision::Admit(t) if t.probe));
    assert_eq!(b.phase, Phase::HalfOpen);
}

#[test]
fn a_peer_probe_from_an_older_cycle_changes_nothing() {
    let p = Policy::default();
    let now = Instant::now();
    let (b, ticket) = probing(now, &p);
    let (b, _) = b.adopt(&peer(Phase::Closed, 60, 0), now, &p);
    let (b, _) = b.step(Event::PeerProbe(ticket, now + secs(15)), now, &p);
    assert_eq!(b.peer_probe_until, None);
    let (_, d) = request(b, now, &p);
    assert!(matches!(d, Decision::Admit(t) if !t.probe));
}
