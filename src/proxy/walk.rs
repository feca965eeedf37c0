//! The chain walk, written once for interactive requests and tasks: for each target, skip
//! what a breaker (or the caller's own gate) holds back, attempt the next, classify,
//! record, and move on while the request may fail over. Every attempt's outcome is kept, in
//! order. The callers differ only in what they do with the answer and with a chain that
//! held everything back: the proxy answers or waits (`x-labrouter-wait`), a task parks.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use bytes::Bytes;
use tokio::time::Instant;

use super::{count_attempt, count_served, given, skipped, Front};
use crate::breaker::{FailureKind, Phase};
use crate::fleet::Fleet;
use crate::machines::Lease;
use crate::outcome::{Attempted, Fault, Held, MachineId, ModelId, Skip, Wire};
use crate::pick::Why;
use crate::upstream::{Answer, Chunks};

/// What a caller adds to each target's admission.
pub trait Gate {
    /// Held while the target is tried, released when dropped.
    type Held;
    /// Before the breaker is asked: whether the caller may use `machine` now (a task takes
    /// one of the machine's task slots, the pool's too with a shared queue). `None` skips
    /// the target as busy.
    fn hold(
        &mut self,
        fleet: &Fleet,
        machine: MachineId,
    ) -> impl Future<Output = Option<Self::Held>> + Send;
    /// Once per walk, after a machine admitted the call and before anything is sent.
    fn sending(&mut self) -> impl Future<Output = ()> + Send;
}

/// No gate: an interactive request is held back by the breakers alone.
pub struct Open;

impl Gate for Open {
    type Held = ();

    fn hold(&mut self, _: &Fleet, _: MachineId) -> impl Future<Output = Option<()>> + Send {
        std::future::ready(Some(()))
    }

    fn sending(&mut self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// Where a walk runs: the fleet serving now, the route's label (for metrics), when the
/// request started and its deadline.
pub struct Walk<'a> {
    pub fleet: &'a Fleet,
    pub label: &'a str,
    pub started: Instant,
    pub deadline: Instant,
    /// Nanoseconds spent waiting on machines, attempt by attempt (from sending to the
    /// answer or its failure): what is not labrouter's own time (`labrouter_overhead_seconds`).
    pub waited: AtomicU64,
}

/// How a walk ended.
pub enum Walked {
    /// A machine answered whole.
    Full {
        target: ModelId,
        /// Why the pick chose the target, when it stood in a tier.
        pick: Option<Why>,
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
        attempts: Vec<Attempted>,
    },
    /// A machine is streaming; the lease travels with the stream, which decides it.
    Stream {
        target: ModelId,
        pick: Option<Why>,
        wire: Wire,
        status: StatusCode,
        content_type: Option<HeaderValue>,
        first: Bytes,
        rest: Chunks,
        lease: Lease,
        attempts: Vec<Attempted>,
    },
    /// A machine refused the request itself (400, 413, 422): the chain stops there.
    Refused {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
        attempts: Vec<Attempted>,
    },
    /// Nothing served: every target was held back, failed, or the request ran out of time.
    Unserved { attempts: Vec<Attempted> },
}

/// What one target's try leaves the walk to do. Returned once per target on the stack,
/// never stored: boxing the answer would cost every request an allocation.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// Answered (or refused): the walk ends with this.
    Done(Walked),
    /// Held back, or failed in a way the chain may fail over: the next target.
    Next,
    /// Failed in a way the chain may not fail over (the request's fault, its deadline).
    Stop,
}

impl Walk<'_> {
    /// Walks `chain` once for `front`, through `gate`: strictly in order, except that the
    /// targets of a tier (docs/registry.md "routes:") are tried in the order the pick gives.
    pub async fn run<F: Front, G: Gate>(
        &self,
        chain: &[ModelId],
        front: &F,
        gate: &mut G,
    ) -> Walked {
        let reg = &self.fleet.registry;
        let tiers = reg.tiers(self.label);
        let mut attempts: Vec<Attempted> = Vec::new();
        let mut i = 0;
        while i < chain.len() {
            let tier = tiers.iter().find(|t| t.contains(&chain[i]));
            let end = tier.map_or(i + 1, |t| {
                i + chain[i..].iter().take_while(|m| t.contains(m)).count()
            });
            let step = if end == i + 1 {
                self.step(chain, chain[i], None, front, gate, &mut attempts)
                    .await
            } else {
                self.tier(chain, &chain[i..end], front, gate, &mut attempts)
                    .await
            };
            match step {
                Step::Done(walked) => return walked,
                Step::Next => i = end,
                Step::Stop => break,
            }
        }
        Walked::Unserved { attempts }
    }

    /// A tier's targets in the pick's order, until one answers.
    async fn tier<F: Front, G: Gate>(
        &self,
        chain: &[ModelId],
        tier: &[ModelId],
        front: &F,
        gate: &mut G,
        attempts: &mut Vec<Attempted>,
    ) -> Step {
        let fleet = self.fleet;
        let mut seen: Vec<crate::pick::Seen> = tier
            .iter()
            .map(|&m| {
                let (in_flight, _) = fleet.machines.load(fleet.registry.models[m].machine);
                fleet.picks.seen(&fleet.registry, m, in_flight)
            })
            .collect();
        for (model, why) in crate::pick::order(&mut seen) {
            match self
                .step(chain, model, Some(why), front, gate, attempts)
                .await
            {
                Step::Next => {}
                done_or_stop => return done_or_stop,
            }
        }
        Step::Next
    }

    /// One target of `chain`, picked for `why` when it stands in a tier: skipped when the
    /// request may not use it, tried otherwise.
    async fn step<F: Front, G: Gate>(
        &self,
        chain: &[ModelId],
        model: ModelId,
        why: Option<Why>,
        front: &F,
        gate: &mut G,
        attempts: &mut Vec<Attempted>,
    ) -> Step {
        let reg = &self.fleet.registry;
        // Embeddings fall back only to the same backend model: vectors of another model
        // would corrupt the client's index without a word.
        let first_backend = chain
            .first()
            .map_or("", |&m| reg.models[m].backend.as_str());
        if front.embeds() && reg.models[model].backend != first_backend {
            return Step::Next;
        }
        // The chain moves on while the request's deadline allows.
        if Instant::now() >= self.deadline && !attempts.is_empty() {
            return Step::Stop;
        }
        match self.try_target(model, front, gate, attempts).await {
            Step::Done(mut walked) => {
                if let Some(why) = why {
                    walked.picked(self.fleet, self.label, why);
                }
                Step::Done(walked)
            }
            other => other,
        }
    }

    /// One target: admitted (by the gate and its breaker) or skipped, then tried.
    async fn try_target<F: Front, G: Gate>(
        &self,
        model: ModelId,
        front: &F,
        gate: &mut G,
        attempts: &mut Vec<Attempted>,
    ) -> Step {
        let (fleet, reg) = (self.fleet, &self.fleet.registry);
        let machine = reg.models[model].machine;
        let Some(_held) = gate.hold(fleet, machine).await else {
            let held = Held {
                phase: fleet.machines.phase(machine),
                failures: 0,
                last_reason: None,
            };
            attempts.push(Attempted::skipped(model, Skip::Busy, None, &held));
            return Step::Next;
        };
        // A shared machine's probe is the pool's.
        let lease = match fleet.machines.admit_pooled(machine).await {
            Ok(lease) => lease,
            Err(rej) => {
                attempts.push(skipped(fleet, model, &rej));
                return Step::Next;
            }
        };
        let probe = lease.is_probe();
        gate.sending().await;
        let upstream = &fleet.upstreams[machine];
        let (wire, body) = front.request(&reg.models[model].backend, upstream.api);
        let sent = Instant::now();
        fleet.picks.sending(model);
        let answer = upstream
            .attempt(model, wire, body, self.deadline, &lease)
            .await
            .and_then(|answer| given(front, model, wire, answer, self.started));
        self.waited_for(sent);
        if let Ok(Answer::Full { .. } | Answer::Stream { .. }) = &answer {
            fleet.picks.answered(model, sent.elapsed());
        }
        let (mut failed, lease) = match answer {
            Ok(answer) => match self.answered(model, wire, answer, lease, front, attempts) {
                Ok(walked) => return Step::Done(walked),
                Err(failed) => failed,
            },
            Err(failed) => (failed, lease),
        };
        count_attempt(fleet, machine, &failed);
        lease.finish(&failed);
        failed.probe = probe;
        failed.closed_after = fleet.machines.phase(machine) == Phase::Closed;
        let move_on = failed.fault.may_fail_over();
        attempts.push(failed);
        if move_on {
            Step::Next
        } else {
            Step::Stop
        }
    }

    /// Adds the time since `sent` to the time spent waiting on machines.
    fn waited_for(&self, sent: Instant) {
        let nanos = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The time spent waiting on machines so far.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited.load(Ordering::Relaxed))
    }

    /// A machine's answer: served whole or streaming, or refused (the walk ends), or a
    /// stream to a caller that keeps answers whole (a failed try, with its lease back).
    #[allow(clippy::result_large_err)] // on the stack once per answer, never stored
    fn answered<F: Front>(
        &self,
        target: ModelId,
        wire: Wire,
        answer: Answer,
        lease: Lease,
        front: &F,
        attempts: &mut Vec<Attempted>,
    ) -> Result<Walked, (Attempted, Lease)> {
        let fleet = self.fleet;
        let served = |attempts: &[Attempted]| {
            count_served(fleet, self.label, target, attempts, self.started);
        };
        match answer {
            Answer::Full {
                status,
                content_type,
                body,
            } => {
                lease.succeed();
                served(attempts);
                Ok(Walked::Full {
                    target,
                    pick: None,
                    status,
                    content_type,
                    body,
                    attempts: std::mem::take(attempts),
                })
            }
            Answer::Stream {
                status,
                content_type,
                first,
                rest,
            } if front.takes_stream() => {
                served(attempts);
                Ok(Walked::Stream {
                    target,
                    pick: None,
                    wire,
                    status,
                    content_type,
                    first,
                    rest,
                    lease,
                    attempts: std::mem::take(attempts),
                })
            }
            // A request that asked for no stream got one: the machine answered badly.
            Answer::Stream { .. } => Err((
                Attempted::counted(
                    target,
                    FailureKind::Malformed,
                    Fault::BadAnswer,
                    "malformed answer: a stream to a request that asked for none",
                ),
                lease,
            )),
            // The request's own fault: the machine's answer goes back as is.
            Answer::Refused {
                status,
                content_type,
                body,
                attempted,
            } => {
                count_attempt(fleet, reg_machine(fleet, target), &attempted);
                lease.finish(&attempted);
                attempts.push(attempted);
                Ok(Walked::Refused {
                    status,
                    content_type,
                    body,
                    attempts: std::mem::take(attempts),
                })
            }
        }
    }
}

impl Walked {
    /// Marks a served answer as the pick's for `why`, and counts the pick.
    fn picked(&mut self, fleet: &Fleet, label: &str, why: Why) {
        if let Walked::Full { target, pick, .. } | Walked::Stream { target, pick, .. } = self {
            *pick = Some(why);
            let machine = &fleet.registry.machines[reg_machine(fleet, *target)].name;
            metrics::counter!(
                "labrouter_picks_total",
                "route" => label.to_string(),
                "machine" => machine.clone(),
                "why" => why.as_str()
            )
            .increment(1);
        }
    }

    /// Why the pick chose the target that answered, when it stood in a tier.
    pub fn pick(&self) -> Option<Why> {
        match self {
            Walked::Full { pick, .. } | Walked::Stream { pick, .. } => *pick,
            Walked::Refused { .. } | Walked::Unserved { .. } => None,
        }
    }
}

fn reg_machine(fleet: &Fleet, model: ModelId) -> MachineId {
    fleet.registry.models[model].machine
}
