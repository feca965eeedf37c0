//! A task's walk: the chain walk every request takes ([`crate::proxy::Walk`]), through the
//! task's own gate — a task slot on each machine, and its "running" state made durable
//! before anything is sent — with the answer kept whole; and what the walk tried, summed
//! up for the queue to decide on ([`Tried`]).

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use axum::http::HeaderValue;
use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::model::{Accept, AttemptRecord, Task, TaskResult};
use super::queue::{error, Group, Tried, WalkEnd};
use super::slots::{PoolSlots, Slot, Slots};
use crate::fleet::Fleet;
use crate::outcome::{Attempted, Endpoint, Fault, MachineId, ModelId, Reason, TaskCode, Wire};
use crate::proxy::{Front, Gate, Walk, Walked};
use crate::registry::{Api, Registry};
use crate::request::Parsed;
use crate::upstream::{Framing, Payload};

/// A task's request as every target is sent it: only `model` rewritten; the answer kept
/// whole (a stream is a malformed answer: a task never asks for one).
struct Whole {
    endpoint: Endpoint,
    parsed: Arc<Parsed>,
}

impl Front for Whole {
    fn request(&self, backend: &str, _: Api) -> (Wire, Payload) {
        (
            Wire::OpenAi(self.endpoint),
            self.parsed.body_for(backend).into(),
        )
    }

    fn embeds(&self) -> bool {
        false
    }

    fn answer(
        &self,
        _: Wire,
        body: Bytes,
        _: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String> {
        Ok((body, None))
    }

    fn framing(&self, _: Wire, _: Instant) -> (Framing, Option<HeaderValue>) {
        (Framing::sse(), None)
    }

    fn takes_stream(&self) -> bool {
        false
    }
}

/// A task takes at most `task_slots` of a machine, never the last interactive slot (and,
/// with a shared queue, at most `task_slots` in the pool); and marks itself running on disk
/// once, before the first request is sent.
struct TaskGate<M> {
    slots: Arc<Slots>,
    pool: Option<Arc<dyn PoolSlots>>,
    mark: Option<M>,
}

impl<M, Fut> Gate for TaskGate<M>
where
    M: FnOnce() -> Fut + Send,
    Fut: Future<Output = ()> + Send,
{
    type Held = Slot;

    fn hold(
        &mut self,
        fleet: &Fleet,
        machine: MachineId,
    ) -> impl Future<Output = Option<Slot>> + Send {
        let m = &fleet.registry.machines[machine];
        let (name, task_slots) = (m.name.clone(), m.task_slots);
        let here = self.slots.take(fleet, machine, task_slots);
        let pool = self.pool.clone();
        async move {
            let slot = here?;
            match pool {
                Some(pool) if !pool.take(&name, task_slots).await => None,
                _ => Some(slot),
            }
        }
    }

    fn sending(&mut self) -> impl Future<Output = ()> + Send {
        let mark = self.mark.take();
        async move {
            if let Some(mark) = mark {
                mark().await;
            }
        }
    }
}

/// What one walk of a task needs.
pub struct Job {
    pub fleet: Arc<Fleet>,
    pub group: Group,
    pub endpoint: Endpoint,
    pub parsed: Arc<Parsed>,
    pub deadline: Instant,
    pub slots: Arc<Slots>,
    /// The pool's count of each machine's task slots, with a shared queue.
    pub pool: Option<Arc<dyn PoolSlots>>,
    /// The route's name, for metrics.
    pub label: String,
}

/// Walks the task's group once; `mark` runs after a machine admitted it and before
/// anything is sent.
pub async fn walk<M, Fut>(job: Job, mark: M) -> WalkEnd
where
    M: FnOnce() -> Fut + Send,
    Fut: Future<Output = ()> + Send,
{
    let fleet = &job.fleet;
    let walk = Walk {
        fleet,
        label: &job.label,
        started: Instant::now(),
        deadline: job.deadline,
        waited: Default::default(),
    };
    let front = Whole {
        endpoint: job.endpoint,
        parsed: job.parsed,
    };
    let mut gate = TaskGate {
        slots: job.slots,
        pool: job.pool,
        mark: Some(mark),
    };
    let walked = walk.run(&job.group, &front, &mut gate).await;
    let (reg, wall) = (&fleet.registry, crate::clock::wall());
    let tried = |attempts: &[Attempted]| tried(reg, attempts, wall, job.deadline);
    match walked {
        Walked::Full {
            target,
            status,
            body,
            attempts,
            ..
        } => WalkEnd::Served(
            TaskResult::new(status.as_u16(), reg.target_name(target), &body),
            tried(&attempts),
        ),
        Walked::Refused {
            status,
            body,
            attempts,
            ..
        } => {
            let mut err = error(
                TaskCode::RequestRejected,
                &format!(
                    "the machine refused the request itself (HTTP {}); see error.upstream",
                    status.as_u16()
                ),
            );
            err.upstream = serde_json::from_slice::<&RawValue>(&body)
                .ok()
                .map(|r| r.to_owned());
            WalkEnd::Refused(err, tried(&attempts))
        }
        // Never given to a front that takes no stream; a dropped stream served nothing.
        Walked::Stream { attempts, .. } | Walked::Unserved { attempts } => {
            WalkEnd::Unserved(tried(&attempts))
        }
    }
}

/// A walk's attempts summed up for the queue: what it shows and what it means.
fn tried(reg: &Registry, attempts: &[Attempted], wall: SystemTime, deadline: Instant) -> Tried {
    let at = crate::clock::rfc3339(wall);
    let by_breaker = |a: &&Attempted| !a.was_sent() && a.reason != Reason::Busy;
    Tried {
        records: attempts
            .iter()
            .map(|a| AttemptRecord {
                at: at.clone(),
                target: reg.target_name(a.target),
                outcome: a.outcome(),
                reason: Some(a.reason),
                detail: a.was_sent().then(|| a.detail.clone()),
                charged: false,
            })
            .collect(),
        sent: attempts.iter().any(Attempted::was_sent),
        charged: attempts.iter().any(Attempted::charges_task),
        probe_failed: attempts.iter().any(Attempted::failed_probe),
        expired: attempts.iter().any(|a| a.fault == Fault::Deadline) || Instant::now() >= deadline,
        by_breaker: attempts.iter().any(|a| by_breaker(&a)),
        soonest: attempts
            .iter()
            .filter(by_breaker)
            .filter_map(|a| a.retry_after)
            .min(),
        held: attempts
            .iter()
            .map(|a| a.describe(&reg.target_name(a.target)))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// A task's request as it is sent: within `tasks.max_request_body` (`max`), parsed as any
/// request is; or why it cannot be.
pub fn ready_to_send(
    endpoint: Endpoint,
    request: Bytes,
    max: usize,
) -> Result<Arc<Parsed>, (TaskCode, String)> {
    if request.len() > max {
        return Err((
            TaskCode::InvalidRequest,
            format!(
                "its request is {} bytes, larger than tasks.max_request_body ({max} bytes)",
                request.len()
            ),
        ));
    }
    Parsed::new(endpoint, request)
        .map(Arc::new)
        .map_err(|e| (TaskCode::InvalidRequest, e.0))
}

/// A task's chain: its request read by the same matcher as any request, filtered by
/// `accept`; or why it cannot be routed.
pub fn chain_of(fleet: &Fleet, task: &Task, parsed: &Parsed) -> Result<Group, (TaskCode, String)> {
    let reg = &fleet.registry;
    let ask = crate::route::Ask {
        kind: task.endpoint.kind(),
        path: task.endpoint.client_path(),
        header: task.route.as_deref(),
        model: parsed.model.as_deref(),
        text: &parsed.text,
        has_image: parsed.has_image,
    };
    fleet
        .matcher
        .decide_for(reg, &ask)
        .map_err(|e| (TaskCode::InvalidRequest, e.to_string()))
        .map(|routed| accepted(fleet, routed.chain(reg), task.accept))
}

/// The chain a task accepts: every target, or only those with the first's backend name.
fn accepted(fleet: &Fleet, chain: &[ModelId], accept: Accept) -> Group {
    let reg = &fleet.registry;
    match (accept, chain.first()) {
        (Accept::SameModel, Some(&first)) => {
            let backend = &reg.models[first].backend;
            chain
                .iter()
                .copied()
                .filter(|&m| &reg.models[m].backend == backend)
                .collect()
        }
        _ => chain.iter().copied().collect(),
    }
}

/// The name of the route whose chain `group` starts, for metrics (`task` when none).
pub fn label_of(fleet: &Fleet, group: &Group) -> String {
    fleet
        .registry
        .routes
        .iter()
        .find(|r| r.chain.first() == group.first())
        .map_or_else(|| "task".to_string(), |r| r.name.clone())
}
