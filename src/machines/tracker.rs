//! One machine's tracker: its breaker and policy under one lock, its counters, and the
//! step that announces each transition to the ledger, the gauges and subscribers.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::time::Instant;

use super::Bus;
use crate::breaker::{Breaker, Decision, Event, Policy, Transition, Transitioned, Verdict};
use crate::store::Msg;

/// One machine's breaker and counters. A machine keeps its one tracker for as long as it is in
/// the registry: a reload changes its policy and bulkhead limit in place, so a lease in
/// flight (a probe above all) always reports to the breaker that serves on.
#[derive(Debug)]
pub struct Tracker {
    pub name: String,
    /// The bulkhead limit; a reload may change it while calls are in flight.
    pub(super) max_concurrency: AtomicU32,
    /// The breaker and the policy it steps by, under one lock: a step takes it once, and a
    /// reload swaps the policy between steps. A std Mutex: each step is a few comparisons
    /// and is never held across an await.
    pub(super) state: Mutex<Locked>,
    pub(super) inflight: AtomicU32,
    pub(super) remote_attempts: AtomicU64,
    pub(super) local_rejections: AtomicU64,
    /// Requests this machine skipped or failed that another target then served.
    pub(super) rerouted: AtomicU64,
}

/// What a tracker's lock guards.
#[derive(Debug)]
pub(super) struct Locked {
    pub(super) breaker: Breaker,
    pub(super) policy: Policy,
    /// The key its verdict is shared under (README "Several routers"), when shared.
    pub(super) share: Option<Arc<str>>,
}

/// The key machine `m`'s verdict is shared under, when it is shared.
pub(super) fn share_of(m: &crate::registry::Machine) -> Option<Arc<str>> {
    m.shared
        .then(|| Arc::from(crate::registry::share_key(&m.url)))
}

pub(super) fn new_tracker(m: &crate::registry::Machine) -> Tracker {
    Tracker {
        name: m.name.clone(),
        max_concurrency: AtomicU32::new(m.max_concurrency),
        state: Mutex::new(Locked {
            breaker: Breaker::new(&m.breaker),
            policy: m.breaker.clone(),
            share: share_of(m),
        }),
        inflight: AtomicU32::new(0),
        remote_attempts: AtomicU64::new(0),
        local_rejections: AtomicU64::new(0),
        rerouted: AtomicU64::new(0),
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while stepping cannot leave a half-written Breaker (step is by value), so a
    // poisoned lock still holds a whole state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn step_tracker(tracker: &Tracker, bus: &Bus, event: Event) -> Decision {
    step_tracker_then(tracker, bus, event, |_, _| ()).0
}

/// Steps the breaker and, under the same lock, lets `peek` read the state it left.
pub(super) fn step_tracker_then<R>(
    tracker: &Tracker,
    bus: &Bus,
    event: Event,
    peek: impl FnOnce(&Breaker, &Decision) -> R,
) -> (Decision, R) {
    let now = Instant::now();
    let (output, wall, seen) = {
        let mut g = lock(&tracker.state);
        let g = &mut *g;
        let state = std::mem::replace(&mut g.breaker, Breaker::new(&g.policy));
        let (next, output) = state.step(event, now, &g.policy);
        g.breaker = next;
        // A transition's wall-clock time is read under the lock: no call the new state
        // admits can reach a machine before the time the ledger gives the transition.
        let wall = output.transition.as_ref().map(|_| crate::clock::wall());
        let seen = peek(&g.breaker, &output.decision);
        (output, wall, seen)
    };
    if let (Some(t), Some(wall)) = (output.transition, wall) {
        announce(tracker, bus, t, now, wall);
    }
    (output.decision, seen)
}

/// Logs, counts, ledgers and broadcasts a transition. What that keeps (a new metric series,
/// the record in the broadcast's ring) outlives the request that caused it: it is made in
/// the default heap (`crate::heap`).
pub(super) fn announce(
    tracker: &Tracker,
    bus: &Bus,
    transition: Transition,
    now: Instant,
    wall: SystemTime,
) {
    crate::heap::in_default(|| tell(tracker, bus, transition, now, wall));
}

fn tell(tracker: &Tracker, bus: &Bus, transition: Transition, now: Instant, wall: SystemTime) {
    let (verdict, decided_by, share) = {
        let g = lock(&tracker.state);
        (
            Verdict::of(&g.breaker, now, wall),
            g.breaker.decided_by.clone(),
            g.share.clone(),
        )
    };
    let cooldown_until = transition
        .cooldown_until
        .map(|u| wall + u.saturating_duration_since(now));
    tracing::warn!(
        machine = %tracker.name,
        from = %transition.from,
        to = %transition.to,
        failures = transition.failures,
        reason = %transition.reason,
        "breaker {} -> {}",
        transition.from,
        transition.to,
    );
    metrics::counter!("labrouter_breaker_transitions_total",
        "machine" => tracker.name.clone(), "from" => transition.from.as_str(), "to" => transition.to.as_str())
    .increment(1);
    metrics::gauge!("labrouter_breaker_state", "machine" => tracker.name.clone())
        .set(crate::telemetry::phase_value(transition.to));
    let record = Transitioned {
        machine: tracker.name.clone(),
        transition,
        at: wall,
        cooldown_until,
        registry_version: bus.version(),
        verdict,
        remote_attempts: tracker.remote_attempts.load(Ordering::Relaxed),
        local_rejections: tracker.local_rejections.load(Ordering::Relaxed),
        decided_by,
    };
    // Shared machines tell the other routers (README "Several routers"); never waits on Redis.
    if let (Some(link), Some(share)) = (bus.cluster(), share) {
        link.transition(&record, share);
    }
    if let Some(ledger) = &bus.ledger {
        // The writer thread is gone only at shutdown; the transition is still logged above.
        let _ = ledger.send(Msg::Transition(Box::new(record.clone())));
    }
    // No subscriber is fine too.
    let _ = bus.transitions.send(record);
    bus.changed.notify_waiters();
}
