//! The live breakers: one per machine, the shell around the pure [`Breaker`].
//!
//! Admission is a [`Lease`]: it holds a concurrency slot and the breaker's ticket, and
//! reports exactly one outcome. A lease dropped without an outcome (the client went away,
//! the request future was cancelled) reports `Cancel`, so a probe lease is never lost and
//! never counts as a success.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use crate::breaker::Transitioned;
use crate::breaker::{Breaker, Decision, Event, Phase, Restored, Skip, Transition};
use crate::outcome::{Held, MachineId, Reason};
use crate::registry::Registry;

mod bus;
mod lease;
mod shared;
mod tracker;

pub use bus::Bus;
pub use lease::Lease;
pub use tracker::Tracker;
use tracker::{announce, lock, new_tracker, step_tracker, step_tracker_then};

/// A point-in-time view of one machine for `/status`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub name: String,
    pub breaker: Breaker,
    pub inflight: u32,
    pub remote_attempts: u64,
    pub local_rejections: u64,
    pub rerouted: u64,
}

/// The breakers of every machine of one registry.
#[derive(Debug)]
pub struct Machines {
    trackers: Vec<Arc<Tracker>>,
    bus: Arc<Bus>,
}

/// Why a call was not admitted, when the machine may admit again, and what its breaker
/// showed at that moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    pub skip: Skip,
    pub retry_after: Option<Duration>,
    pub held: Held,
}

impl Machines {
    /// Breakers for a registry, alone (tests, benchmarks).
    pub fn new(reg: &Registry) -> Machines {
        Machines::with_bus(reg, Bus::new(None), None)
    }

    /// Breakers for `reg` reporting to `bus`. With `old` (a reload), a machine that still
    /// exists keeps its tracker, retuned to the new policy and limit; removed ones go; new
    /// ones start closed. Nothing is announced: the service does that when it swaps the
    /// new fleet in.
    pub fn with_bus(reg: &Registry, bus: Arc<Bus>, old: Option<&Machines>) -> Machines {
        let trackers = reg
            .machines
            .iter()
            .map(|m| {
                let Some(prev) = old.and_then(|o| o.trackers.iter().find(|c| c.name == m.name))
                else {
                    return Arc::new(new_tracker(m));
                };
                // The same tracker, retuned: leases in flight report to the breaker that serves on.
                prev.max_concurrency
                    .store(m.max_concurrency, Ordering::Release);
                {
                    let mut g = lock(&prev.state);
                    g.policy = m.breaker.clone();
                    g.share = tracker::share_of(m);
                }
                Arc::clone(prev)
            })
            .collect();
        Machines { trackers, bus }
    }

    /// Lifts every 401/403 pause: docs/api.md "Breaker classification" pauses a machine "until
    /// config reload or manual reset", and this is the reload.
    pub fn lift_auth_pauses(&self) {
        for tracker in &self.trackers {
            if lock(&tracker.state).breaker.phase == Phase::AuthFailed {
                step_tracker(tracker, &self.bus, Event::Reset("registry reloaded".into()));
            }
        }
    }

    /// Each machine's name and phase, in registry order (gauges, views).
    pub fn phases(&self) -> impl Iterator<Item = (&str, Phase)> + '_ {
        self.trackers
            .iter()
            .map(|t| (t.name.as_str(), lock(&t.state).breaker.phase))
    }

    /// Resolves when some breaker changed or a lease ended (enable it before looking).
    pub fn bus(&self) -> &Arc<Bus> {
        &self.bus
    }

    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.bus.changed.notified()
    }

    pub fn len(&self) -> usize {
        self.trackers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trackers.is_empty()
    }

    /// Asks machine `i` to admit one call now: instant, no I/O.
    pub fn admit(&self, i: MachineId) -> Result<Lease, Rejected> {
        let tracker = &self.trackers[i.0];
        let held = |b: &Breaker| Held {
            phase: b.phase,
            failures: b.failures,
            last_reason: b.last_reason.clone(),
        };
        // The bulkhead first: a full machine is busy, not failing, and must not take a probe
        // lease it cannot use.
        let prev = tracker.inflight.fetch_add(1, Ordering::AcqRel);
        if prev >= tracker.max_concurrency.load(Ordering::Acquire) {
            tracker.inflight.fetch_sub(1, Ordering::AcqRel);
            tracker.local_rejections.fetch_add(1, Ordering::Relaxed);
            return Err(Rejected {
                skip: Skip::Busy,
                retry_after: None,
                held: held(&lock(&tracker.state).breaker),
            });
        }
        // What the breaker showed is read under the same lock as its decision.
        let (decision, seen) = step_tracker_then(tracker, &self.bus, Event::Request, |b, d| {
            matches!(d, Decision::Reject { .. }).then(|| held(b))
        });
        match (decision, seen) {
            (Decision::Admit(ticket), _) => {
                tracker.remote_attempts.fetch_add(1, Ordering::Relaxed);
                Ok(Lease::new(
                    Arc::clone(tracker),
                    Arc::clone(&self.bus),
                    ticket,
                ))
            }
            (Decision::Reject { skip, retry_after }, Some(held)) => {
                tracker.inflight.fetch_sub(1, Ordering::AcqRel);
                tracker.local_rejections.fetch_add(1, Ordering::Relaxed);
                Err(Rejected {
                    skip,
                    retry_after,
                    held,
                })
            }
            _ => {
                // A Request is always answered Admit or Reject; never leak the slot anyway.
                tracker.inflight.fetch_sub(1, Ordering::AcqRel);
                Err(Rejected {
                    skip: Skip::CircuitOpen,
                    retry_after: None,
                    held: held(&lock(&tracker.state).breaker),
                })
            }
        }
    }

    /// Applies one event to machine `i` (manual control, health checks).
    pub fn step(&self, i: MachineId, event: Event) -> Decision {
        step_tracker(&self.trackers[i.0], &self.bus, event)
    }

    pub fn snapshot(&self, i: MachineId) -> Snapshot {
        let tracker = &self.trackers[i.0];
        Snapshot {
            name: tracker.name.clone(),
            breaker: lock(&tracker.state).breaker.clone(),
            inflight: tracker.inflight.load(Ordering::Relaxed),
            remote_attempts: tracker.remote_attempts.load(Ordering::Relaxed),
            local_rejections: tracker.local_rejections.load(Ordering::Relaxed),
            rerouted: tracker.rerouted.load(Ordering::Relaxed),
        }
    }

    /// Calls in flight on machine `i` and its bulkhead limit (`max_concurrency`).
    pub fn load(&self, i: MachineId) -> (u32, u32) {
        let t = &self.trackers[i.0];
        (
            t.inflight.load(Ordering::Relaxed),
            t.max_concurrency.load(Ordering::Relaxed),
        )
    }

    /// Every machine's snapshot, in registry order.
    pub fn snapshots(&self) -> impl Iterator<Item = Snapshot> + '_ {
        (0..self.trackers.len()).map(|i| self.snapshot(MachineId(i)))
    }

    /// Counts a request that machine `i` did not serve and another target did.
    pub fn note_rerouted(&self, i: MachineId) {
        self.trackers[i.0].rerouted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn phase(&self, i: MachineId) -> Phase {
        lock(&self.trackers[i.0].state).breaker.phase
    }

    /// Seeds machine `i` from what the store remembered. An unreadable verdict opens the
    /// breaker (`state_unreadable`), ledgered like any transition.
    pub fn restore(&self, i: MachineId, restored: &Restored, max_age: Duration) {
        let tracker = &self.trackers[i.0];
        let now = Instant::now();
        let wall = crate::clock::wall();
        match restored {
            Restored::Found { verdict, written } => {
                let age = wall.duration_since(*written).unwrap_or(Duration::ZERO);
                // A breaker forced open by hand stays open until closed by hand (README "Safety").
                if age > max_age && verdict.state != Phase::ForcedOpen {
                    tracing::info!(machine = %tracker.name, age_s = age.as_secs(), "stored verdict is older than max_cooldown: ignored");
                    return;
                }
                let mut g = lock(&tracker.state);
                let b = verdict.to_breaker(&g.policy, now, wall);
                if b.phase != Phase::Closed || b.failures > 0 {
                    tracing::warn!(machine = %tracker.name, state = %b.phase, failures = b.failures, "breaker restored from the store");
                }
                g.breaker = b;
            }
            Restored::Unreadable(why) => {
                tracing::error!(machine = %tracker.name, error = %why, "stored verdict unreadable: starting open (state_unreadable)");
                let transition = {
                    let mut g = lock(&tracker.state);
                    let guard = &mut g.breaker;
                    let from = guard.phase;
                    guard.phase = Phase::Open;
                    guard.generation += 1;
                    guard.opened_at = Some(now);
                    guard.open_until = Some(crate::clock::after(now, guard.cooldown));
                    guard.last_reason = Some(Reason::StateUnreadable.as_str().into());
                    Transition {
                        from,
                        to: Phase::Open,
                        reason: Reason::StateUnreadable.as_str().into(),
                        failures: guard.failures,
                        cooldown_until: guard.open_until,
                        remote_attempted: false,
                    }
                };
                announce(tracker, &self.bus, transition, now, wall);
            }
        }
    }
}
