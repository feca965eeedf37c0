//! The live breakers: one per machine, the shell around the pure [`Breaker`].
//!
//! Admission is a [`Lease`]: it holds a concurrency slot and the breaker's ticket, and
//! reports exactly one outcome. A lease dropped without an outcome (the client went away,
//! the request future was cancelled) reports `Cancel`, so a probe lease is never lost and
//! never counts as a success.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;

pub use crate::breaker::Transitioned;
use crate::breaker::{
    Breaker, Decision, Event, Failure, Phase, Policy, Restored, Skip, Ticket, Transition, Verdict,
};
use crate::outcome::{Attempted, Effect, Held, MachineId, Reason};
use crate::registry::Registry;
use crate::store::Msg;

/// One machine's breaker and counters. A machine keeps its one tracker for as long as it is in
/// the registry: a reload changes its policy and bulkhead limit in place, so a lease in
/// flight (a probe above all) always reports to the breaker that serves on.
#[derive(Debug)]
pub struct Tracker {
    pub name: String,
    /// The bulkhead limit; a reload may change it while calls are in flight.
    max_concurrency: AtomicU32,
    /// The breaker and the policy it steps by, under one lock: a step takes it once, and a
    /// reload swaps the policy between steps. A std Mutex: each step is a few comparisons
    /// and is never held across an await.
    state: Mutex<Locked>,
    inflight: AtomicU32,
    remote_attempts: AtomicU64,
    local_rejections: AtomicU64,
    /// Requests this machine skipped or failed that another target then served.
    rerouted: AtomicU64,
}

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

/// What outlives a registry reload: where transitions go and who is woken by them.
#[derive(Debug)]
pub struct Bus {
    /// Woken on every change that may let a waiting request in (`x-labrouter-wait`).
    changed: Notify,
    transitions: broadcast::Sender<Transitioned>,
    /// The store's writer, when the lab remembers (SPEC §3.6).
    ledger: Option<std::sync::mpsc::Sender<Msg>>,
    /// The registry version recorded with each transition; replaced on reload.
    registry_version: Mutex<String>,
}

impl Bus {
    pub fn new(ledger: Option<std::sync::mpsc::Sender<Msg>>) -> Arc<Bus> {
        let (transitions, _) = broadcast::channel(1024);
        Arc::new(Bus {
            changed: Notify::new(),
            transitions,
            ledger,
            registry_version: Mutex::new(String::new()),
        })
    }

    /// Every transition from now on, for alerts and the demo's narration.
    pub fn subscribe(&self) -> broadcast::Receiver<Transitioned> {
        self.transitions.subscribe()
    }

    /// Queues a ledger message (registry reloads); nothing happens without a store.
    pub fn ledger(&self, msg: Msg) {
        if let Some(l) = &self.ledger {
            let _ = l.send(msg);
        }
    }

    /// The registry version recorded with each transition from now on.
    pub fn set_version(&self, version: &str) {
        *self
            .registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version.to_string();
    }

    fn version(&self) -> String {
        self.registry_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What a tracker's lock guards.
#[derive(Debug)]
struct Locked {
    breaker: Breaker,
    policy: Policy,
}

/// Why a call was not admitted, when the machine may admit again, and what its breaker
/// showed at that moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    pub skip: Skip,
    pub retry_after: Option<Duration>,
    pub held: Held,
}

fn new_tracker(m: &crate::registry::Machine) -> Tracker {
    Tracker {
        name: m.name.clone(),
        max_concurrency: AtomicU32::new(m.max_concurrency),
        state: Mutex::new(Locked {
            breaker: Breaker::new(&m.breaker),
            policy: m.breaker.clone(),
        }),
        inflight: AtomicU32::new(0),
        remote_attempts: AtomicU64::new(0),
        local_rejections: AtomicU64::new(0),
        rerouted: AtomicU64::new(0),
    }
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
                lock(&prev.state).policy = m.breaker.clone();
                Arc::clone(prev)
            })
            .collect();
        Machines { trackers, bus }
    }

    /// Lifts every 401/403 pause: SPEC §3.2 pauses a machine "until config reload or
    /// manual reset", and this is the reload.
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
                Ok(Lease {
                    tracker: Arc::clone(tracker),
                    bus: Arc::clone(&self.bus),
                    ticket,
                    done: false,
                })
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
        let wall = SystemTime::now();
        match restored {
            Restored::Found { verdict, written } => {
                let age = wall.duration_since(*written).unwrap_or(Duration::ZERO);
                // A breaker forced open by hand stays open until closed by hand (SPEC §7).
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while stepping cannot leave a half-written Breaker (step is by value), so a
    // poisoned lock still holds a whole state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn step_tracker(tracker: &Tracker, bus: &Bus, event: Event) -> Decision {
    step_tracker_then(tracker, bus, event, |_, _| ()).0
}

/// Steps the breaker and, under the same lock, lets `peek` read the state it left.
fn step_tracker_then<R>(
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
        let wall = output.transition.as_ref().map(|_| SystemTime::now());
        let seen = peek(&g.breaker, &output.decision);
        (output, wall, seen)
    };
    if let (Some(t), Some(wall)) = (output.transition, wall) {
        announce(tracker, bus, t, now, wall);
    }
    (output.decision, seen)
}

fn announce(tracker: &Tracker, bus: &Bus, transition: Transition, now: Instant, wall: SystemTime) {
    let verdict = Verdict::of(&lock(&tracker.state).breaker, now, wall);
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
    };
    if let Some(ledger) = &bus.ledger {
        // The writer thread is gone only at shutdown; the transition is still logged above.
        let _ = ledger.send(Msg::Transition(Box::new(record.clone())));
    }
    // No subscriber is fine too.
    let _ = bus.transitions.send(record);
    bus.changed.notify_waiters();
}

/// An admitted call to one machine: a concurrency slot plus the breaker's ticket.
#[derive(Debug)]
pub struct Lease {
    tracker: Arc<Tracker>,
    bus: Arc<Bus>,
    ticket: Ticket,
    done: bool,
}

impl Lease {
    /// The call served: the machine works.
    pub fn succeed(self) -> Decision {
        let t = self.ticket;
        self.report(Event::Success(t), None)
    }

    /// The call failed in a way that counts (a stream cut after bytes reached the client).
    pub fn fail(self, failure: Failure) -> Decision {
        let t = self.ticket;
        self.report(Event::Failure(t, failure), None)
    }

    /// The call did not serve: its breaker records what `attempted` says it should.
    pub fn finish(self, attempted: &Attempted) -> Decision {
        let t = self.ticket;
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

    /// Reports how the call ended. Consumes the lease: one outcome per admission.
    fn report(mut self, event: Event, no_verdict: Option<&'static str>) -> Decision {
        self.done = true;
        let decision = step_tracker(&self.tracker, &self.bus, event);
        if let Some(why) = no_verdict {
            self.probe_released(why);
        }
        decision
    }

    /// Says so when a probe ended without a verdict and the breaker, still half-open, will
    /// admit the next request as its probe (SPEC §3.4): once per probe, never per request.
    fn probe_released(&self, why: &'static str) {
        if !self.ticket.probe {
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
        if !self.done {
            step_tracker(&self.tracker, &self.bus, Event::Cancel(self.ticket));
            self.probe_released("client gone");
        }
        self.tracker.inflight.fetch_sub(1, Ordering::AcqRel);
        self.bus.changed.notify_waiters();
    }
}
