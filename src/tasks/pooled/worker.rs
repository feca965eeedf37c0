//! This router's worker on the pool's queue: it claims due tasks while it runs fewer than
//! `tasks.max_running`, runs each through the walk local tasks take (`crate::tasks::walk`),
//! renews the lease every third of `cluster.task_lease` while the walk runs, and then writes
//! the task's end (compare-and-set: the first end written wins) or gives it back with its
//! backoff (held back by every breaker: `waiting`, no attempt used) as
//! [`crate::tasks::queue::lone`] decides.
//!
//! It looks for work when a walk ends, when a task is submitted here, when a breaker of
//! this router changes (verdicts of the pool arrive as such changes, §12: waiting tasks then
//! walk again at once), and every [`POLL`] otherwise (tasks submitted on another router,
//! leases that lapsed).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::{lock, PoolError, PoolQueue};
use crate::cluster::tasks::{Claimed, Ended, QueueError};
use crate::fleet::Fleet;
use crate::outcome::TaskCode;
use crate::request::Parsed;
use crate::task::{Task, TaskId};
use crate::tasks::follow;
use crate::tasks::queue::lone::{self, Next};
use crate::tasks::queue::{Group, WalkEnd};
use crate::tasks::slots::PoolSlots;
use crate::tasks::walk::{chain_of, label_of, ready_to_send, walk, Job};

/// Looked for work at least this often.
const POLL: Duration = Duration::from_millis(500);
/// The pool's queue is counted for `/status` this often.
const COUNT_EVERY: Duration = Duration::from_secs(2);
/// Tasks ended by a claim taken off the pool's list per count, at most.
const ENDED_MAX: u32 = 64;
/// The pool's due callback deliveries are looked for this often (the first retry is due
/// 5 s after the first attempt).
const CALLBACKS_EVERY: Duration = Duration::from_millis(500);
/// Tasks past their deadline expired per count, at most.
const EXPIRE_MAX: u32 = 256;
/// Finished tasks past `tasks.keep` are looked for this often.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Claims in a row at most before the worker waits again (spoiled tasks are set aside one
/// per claim).
const CLAIMS_MAX: usize = 64;
/// While Redis is away, a write is tried again this often...
const RETRY: Duration = Duration::from_secs(1);
/// ...for at most this long for a task's end (a result waits for Redis to return).
const END_PATIENCE: Duration = Duration::from_secs(600);

pub(super) async fn run(pq: Arc<PoolQueue>) {
    let mut transitions = (pq.fleet)().machines.bus().subscribe();
    let mut pruned = Instant::now();
    let mut counted: Option<Instant> = None;
    let mut called: Option<Instant> = None;
    loop {
        claim_while_room(&pq).await;
        if counted.is_none_or(|c| c.elapsed() >= COUNT_EVERY) {
            counted = Some(Instant::now());
            if let Ok(n) = pq.saw(pq.queue.counts().await) {
                *lock(&pq.counted) = n;
            }
            // Tasks past their deadline while they waited (blocked, queued, in a backoff)
            // expire now, not when next claimed; their callbacks go with the claims' ends.
            let _ = pq.saw(pq.queue.expire_due(EXPIRE_MAX).await);
            ended_by_claims(&pq).await;
        }
        if called.is_none_or(|c| c.elapsed() >= CALLBACKS_EVERY) {
            called = Some(Instant::now());
            due_callbacks(&pq).await;
        }
        if pruned.elapsed() >= PRUNE_EVERY {
            // Finished tasks go after tasks.keep, with their idempotency keys; any router
            // may prune (a script at a time, so two never trip on each other).
            pruned = Instant::now();
            let keep = (pq.fleet)().registry.tasks.keep;
            let _ = pq.saw(pq.queue.prune(keep).await);
        }
        tokio::select! {
            () = pq.wake.notified() => {}
            got = transitions.recv() => {
                if !matches!(got, Err(broadcast::error::RecvError::Closed)) {
                    // Waiting tasks walk again now (one may be the probe), not at their poll.
                    wake_waiting(&pq).await;
                }
            }
            () = tokio::time::sleep(POLL) => pq.saturated.store(false, Ordering::Release),
        }
    }
}

/// Tasks a script ended (a claim at their second interruption, a deadline passed while they
/// waited, a parent's end) have no router that wrote their end: the router that takes them
/// off the pool's list sends their callbacks.
async fn ended_by_claims(pq: &PoolQueue) {
    let Ok(ids) = pq.saw(pq.queue.take_ended(ENDED_MAX).await) else {
        return;
    };
    for id in ids {
        if let Ok(Some(f)) = pq.get(&id, None).await {
            pq.finished(&f.task).await;
        }
    }
}

/// Callback deliveries of the pool that are due (a backoff ended, or the router that held
/// one died) are this router's now: each one attempt, then back to the pool.
async fn due_callbacks(pq: &PoolQueue) {
    if let Ok(ids) = pq.saw(pq.queue.due_callbacks(ENDED_MAX).await) {
        for id in ids {
            pq.hand_over(id);
        }
    }
}

/// Up to `tasks.max_running` of the waiting tasks due soonest walk again now.
async fn wake_waiting(pq: &PoolQueue) {
    let max = (pq.fleet)().registry.tasks.max_running;
    let _ = pq.saw(pq.queue.wake_waiting(max).await);
}

/// Claims and starts tasks while this router runs fewer than `tasks.max_running`.
async fn claim_while_room(pq: &Arc<PoolQueue>) {
    for _ in 0..CLAIMS_MAX {
        let max = (pq.fleet)().registry.tasks.max_running;
        let held = pq.stopping.load(Ordering::Acquire) || pq.saturated.load(Ordering::Acquire);
        if pq.running.load(Ordering::Acquire) >= max || held {
            return;
        }
        // The pool's count too: at most max_running at once, whichever routers run them.
        match pq.saw(pq.queue.claim_within(max).await) {
            Ok(Some(claimed)) => {
                pq.running.fetch_add(1, Ordering::AcqRel);
                let kept = (claimed.task.clone(), claimed.token.clone());
                let id = claimed.task.id.clone();
                let mut walks = lock(&pq.walks);
                let walk = tokio::spawn(run_one(Arc::clone(pq), claimed));
                walks.insert(id, (kept.0, kept.1, walk.abort_handle()));
            }
            Ok(None) | Err(QueueError::Unavailable(_)) => return,
            // Set aside by the queue, and logged: the next one.
            Err(_) => {}
        }
    }
}

/// One claimed task: walked, then ended or given back.
async fn run_one(pq: Arc<PoolQueue>, claimed: Claimed) {
    let Claimed {
        mut task,
        request,
        token,
    } = claimed;
    let fleet = (pq.fleet)();
    let next = if lone::expire_if_due(&mut task, crate::clock::wall()) {
        Some(Next::End)
    } else {
        match prepare(&pq, &fleet, &task, request).await {
            // Its parents could not be read (Redis away): again shortly.
            Err(None) => Some(Next::Again(RETRY)),
            Err(Some((code, why))) => {
                let end = WalkEnd::Unprepared(code, why);
                Some(lone::walked(&mut task, end, crate::clock::wall()))
            }
            Ok((parsed, group)) => walked(&pq, &fleet, &mut task, &token, parsed, group).await,
        }
    };
    // Every machine busy: claiming more would only give them back; a walk's end frees a slot.
    pq.saturated
        .store(matches!(next, Some(Next::Busy)), Ordering::Release);
    match next {
        Some(Next::End) => {
            end(&pq, &task).await;
            if task.status == crate::outcome::TaskStatus::Succeeded {
                // Its machine serves: tasks waiting for it may run now, not at their poll.
                wake_waiting(&pq).await;
            }
        }
        Some(Next::Again(delay)) => give_back(&pq, &task, &token, delay).await,
        Some(Next::Busy) => give_back(&pq, &task, &token, lone::BUSY_AGAIN).await,
        // No longer this router's: cancelled (its running place and machine slot come back
        // now), or its lease lapsed and another took it.
        None => {
            let _ = pq.saw(pq.queue.let_go(&task, &token).await);
        }
    }
    lock(&pq.walks).remove(&task.id);
    pq.running.fetch_sub(1, Ordering::AcqRel);
    pq.wake.notify_one();
}

/// The task's request ready to send (a follow-up's `{{after.N}}` filled from its parents'
/// answers, as the local queue fills them), and its chain; or why it cannot run (`None`:
/// its parents could not be read now).
async fn prepare(
    pq: &PoolQueue,
    fleet: &Fleet,
    task: &Task,
    request: Option<Bytes>,
) -> Result<(Arc<Parsed>, Group), Option<(TaskCode, String)>> {
    let unreadable = |why: String| Some((TaskCode::InvalidRequest, why));
    let request = request
        .filter(|b| !b.is_empty())
        .ok_or_else(|| unreadable("its request is not in the shared queue".into()))?;
    let max = fleet.registry.tasks.max_request_body;
    let request = if follow::needs_parents(task, &request) {
        let mut parents = Vec::with_capacity(task.after.len());
        for p in &task.after {
            match pq.get(p, None).await {
                Ok(f) => parents.push(f.map(|f| f.task)),
                Err(PoolError::Queue(QueueError::Unavailable(_))) => return Err(None),
                Err(_) => parents.push(None),
            }
        }
        follow::filled(task, &request, &parents, max)?
    } else {
        request
    };
    let parsed = ready_to_send(task.endpoint, request, max)?;
    let group = chain_of(fleet, task, &parsed)?;
    Ok((parsed, group))
}

/// Walks the task while its lease is kept; `None` when the lease was lost (the walk is
/// dropped: a cancel, neutral for the breaker).
async fn walked(
    pq: &Arc<PoolQueue>,
    fleet: &Arc<Fleet>,
    task: &mut Task,
    token: &str,
    parsed: Arc<Parsed>,
    group: Group,
) -> Option<Next> {
    let left = task
        .deadline_ms
        .saturating_sub(crate::store::ms(crate::clock::wall()));
    let deadline = crate::clock::after(
        Instant::now(),
        Duration::from_millis(u64::try_from(left).unwrap_or(0)),
    );
    let job = Job {
        fleet: Arc::clone(fleet),
        label: label_of(fleet, &group),
        group,
        endpoint: task.endpoint,
        parsed,
        deadline,
        slots: Arc::clone(&pq.slots),
        pool: Some(Arc::new(WalkSlots {
            pq: Arc::clone(pq),
            id: task.id.clone(),
            token: token.to_string(),
        })),
    };
    // Claimed is running already, in Redis: nothing to mark before sending.
    let end = tokio::select! {
        end = walk(job, || async {}) => end,
        () = keep_lease(pq, task, token) => return None,
    };
    Some(lone::walked(task, end, crate::clock::wall()))
}

/// A walk's task slots in the pool: taken in Redis under the task's lease, given back by
/// the queue's scripts (the next take, the end, the give-back, a lapse).
struct WalkSlots {
    pq: Arc<PoolQueue>,
    id: TaskId,
    token: String,
}

impl PoolSlots for WalkSlots {
    fn take<'a>(
        &'a self,
        machine: &'a str,
        max: u32,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let took = self
                .pq
                .queue
                .take_slot(&self.id, &self.token, machine, max)
                .await;
            matches!(self.pq.saw(took), Ok(true))
        })
    }
}

/// Renews the lease every third of it; returns when it is no longer this router's. While
/// Redis is away the walk goes on: its end is written when Redis returns.
async fn keep_lease(pq: &PoolQueue, task: &Task, token: &str) {
    let every = pq.queue.lease() / 3;
    loop {
        tokio::time::sleep(every).await;
        match pq.saw(pq.queue.renew(task, token).await) {
            Ok(true) | Err(_) => {}
            Ok(false) => {
                tracing::info!(task = %task.id, "shared task queue: a running task is no longer this router's (cancelled, or taken after its lease lapsed); its walk stops");
                return;
            }
        }
    }
}

/// Writes the task's end, waiting for Redis if it is away; the first end written wins.
async fn end(pq: &PoolQueue, task: &Task) {
    let until = Instant::now() + END_PATIENCE;
    loop {
        match pq.saw(pq.queue.finish(task).await) {
            Ok(Ended::Written) => return pq.finished(task).await,
            Ok(Ended::Dropped(status)) => {
                tracing::info!(task = %task.id, %status, "shared task queue: the task had already ended; this end is dropped");
                return;
            }
            Ok(Ended::Missing) => return,
            Err(QueueError::Unavailable(_)) if Instant::now() < until => {
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                tracing::error!(task = %task.id, error = %e, "shared task queue: a task's end could not be written");
                return;
            }
        }
    }
}

/// Gives the task back unfinished, due after `delay`; while Redis is away, tried again
/// within the lease (past it, the lease lapses and the task is queued again anyway).
async fn give_back(pq: &PoolQueue, task: &Task, token: &str, delay: Duration) {
    let until = Instant::now() + pq.queue.lease();
    loop {
        match pq.saw(pq.queue.release(task, token, delay).await) {
            Err(QueueError::Unavailable(_)) if Instant::now() < until => {
                tokio::time::sleep(RETRY).await;
            }
            _ => return,
        }
    }
}
