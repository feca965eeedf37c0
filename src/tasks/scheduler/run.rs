//! The runner: what wakes the queue, what a tick does (expire, route, start), one walk in
//! its own tokio task, and the drain on shutdown.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::{lock, Scheduler};
use crate::fleet::Fleet;
use crate::outcome::{ModelId, TaskCode};
use crate::request::Parsed;
use crate::tasks::follow;
use crate::tasks::model::{Task, TaskId};
use crate::tasks::queue::{Group, Start, WalkEnd, ROUTE_BATCH};
use crate::tasks::walk::{chain_of, label_of, ready_to_send, walk, Job};

impl Scheduler {
    /// Runs the queue until the process ends (or the task is aborted). It wakes when a
    /// breaker changes (parked groups may try again: one may be the probe), when a call
    /// ends (a slot freed), when a task comes or goes, and when a backoff, a cooldown or
    /// a deadline is due — never on a timer that polls a machine.
    pub async fn run(self: Arc<Self>) {
        // Walks run in their own tokio tasks; they stop with the queue's runner.
        struct StopWalks(Arc<Scheduler>);
        impl Drop for StopWalks {
            fn drop(&mut self) {
                for (_, walk) in lock(&self.0.state).walks.drain() {
                    walk.abort();
                }
            }
        }
        let _stop = StopWalks(Arc::clone(&self));
        let mut transitions = (self.fleet)().machines.bus().subscribe();
        loop {
            let fleet = (self.fleet)();
            // An empty queue has nothing a freed slot could start: it does not wake at the
            // end of every interactive call (a wake-up on another worker per request).
            let idle = lock(&self.state).queue.is_empty();
            let changed = fleet.machines.changed();
            tokio::pin!(changed);
            if !idle {
                changed.as_mut().enable();
            }
            let wake = self.wake.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            while transitions.try_recv().is_ok() {
                lock(&self.state).queue.breaker_changed();
            }
            let next = self.tick(&fleet).await;
            let sleep = tokio::time::sleep_until(
                next.unwrap_or_else(|| crate::clock::from_now(Duration::from_secs(3600))),
            );
            tokio::select! {
                got = transitions.recv() => {
                    if !matches!(got, Err(broadcast::error::RecvError::Closed)) {
                        lock(&self.state).queue.breaker_changed();
                    }
                }
                () = &mut changed, if !idle => {}
                () = &mut wake => {}
                () = sleep => {}
            }
        }
    }

    /// Expires what is past its deadline, routes and starts what may; the next time
    /// something is due.
    async fn tick(self: &Arc<Self>, fleet: &Arc<Fleet>) -> Option<Instant> {
        let (now, wall) = (Instant::now(), crate::clock::wall());
        let reg = &fleet.registry;
        let (mut due, carried) = self.decide(|q| {
            let (effects, due) = q.expire(now, wall);
            (due, effects)
        });
        self.settle(carried).await;
        // The ready tasks in order, a chunk per lock: a long queue held back by a machine
        // that is down is looked through, but a submit never waits for the whole of it.
        let free = |group: &[ModelId]| self.slots.any_free(fleet, group);
        let mut cursor = None;
        loop {
            let next = lock(&self.state).queue.scan(
                &mut due,
                cursor.as_ref(),
                now,
                wall,
                reg.tasks.max_running,
                &reg.version,
                &free,
            );
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        if due.route.len() >= ROUTE_BATCH {
            // More to route: come back at once, after starting what can start.
            self.wake.notify_one();
        }
        for id in std::mem::take(&mut due.route) {
            self.route(fleet, &id).await;
        }
        for start in std::mem::take(&mut due.start) {
            self.start(fleet, start).await;
        }
        due.next
    }

    /// Decides a task's chain: its request (after `{{after.N}}`) read by the same
    /// matcher as any request, filtered by `accept`.
    async fn route(&self, fleet: &Arc<Fleet>, id: &TaskId) {
        let Some((task, held)) = lock(&self.state).queue.routing(id) else {
            return;
        };
        let routed = match held {
            Some(parsed) => Ok(parsed),
            None => self.prepare(fleet, &task).await,
        }
        .and_then(|parsed| chain_of(fleet, &task, &parsed).map(|group| (group, parsed)));
        let wall = crate::clock::wall();
        let version = fleet.registry.version.clone();
        let (_, carried) = self.decide(|q| ((), q.routed(id, routed, &version, wall)));
        self.settle(carried).await;
        self.wake.notify_one();
    }

    /// A task's request ready to send: read from the store, `{{after.N}}` filled from its
    /// parents' answers within `tasks.max_request_body`; or why it cannot run.
    async fn prepare(&self, fleet: &Fleet, task: &Task) -> Result<Arc<Parsed>, (TaskCode, String)> {
        let unreadable = |why: String| (TaskCode::InvalidRequest, why);
        let request: Bytes = self
            .request(&task.id)
            .await
            .map_err(|e| unreadable(e.to_string()))?
            .filter(|b| !b.is_empty())
            .ok_or_else(|| unreadable("its request is not in the store".into()))?;
        let max = fleet.registry.tasks.max_request_body;
        let request = if follow::needs_parents(task, &request) {
            let mut parents = Vec::with_capacity(task.after.len());
            for p in &task.after {
                parents.push(self.get(p, None).await.ok().flatten());
            }
            follow::filled(task, &request, &parents, max)?
        } else {
            request
        };
        ready_to_send(task.endpoint, request, max)
    }

    /// Starts one walk of a task in its own tokio task.
    async fn start(self: &Arc<Self>, fleet: &Arc<Fleet>, start: Start) {
        let Start {
            id,
            group,
            endpoint,
            deadline,
            prepared,
            waited,
        } = start;
        if let Some(waited) = waited {
            metrics::histogram!("labrouter_task_wait_seconds").record(waited.as_secs_f64());
        }
        // Over the queue's budget for held requests: read it again.
        let parsed = match prepared {
            Some(p) => p,
            None => {
                let Some((task, _)) = lock(&self.state).queue.routing(&id) else {
                    return;
                };
                match self.prepare(fleet, &task).await {
                    Ok(p) => p,
                    Err((code, why)) => {
                        let end = WalkEnd::Unprepared(code, why);
                        return self.walked(&id, &group, end).await;
                    }
                }
            }
        };
        let label = label_of(fleet, &group);
        let job = Job {
            fleet: Arc::clone(fleet),
            group: Arc::clone(&group),
            endpoint,
            parsed,
            deadline,
            slots: Arc::clone(&self.slots),
            pool: None,
            label,
        };
        let me = Arc::clone(self);
        let id2 = id.clone();
        let mut st = lock(&self.state);
        let handle = tokio::spawn(async move {
            // Durable before anything is sent: a restart then knows it was interrupted.
            let mark = || {
                let (_, carried) = me.decide(|q| ((), q.mark_running(&id2).into_iter().collect()));
                let me = Arc::clone(&me);
                async move { me.settle(carried).await }
            };
            let end = walk(job, mark).await;
            me.walked(&id2, &group, end).await;
        });
        st.walks.insert(id, handle.abort_handle());
    }

    /// What a walk's end does to its task.
    async fn walked(&self, id: &TaskId, group: &Group, end: WalkEnd) {
        let (now, wall) = (Instant::now(), crate::clock::wall());
        let carried = {
            let mut st = lock(&self.state);
            st.walks.remove(id);
            let effects = st.queue.walked(id, group, end, now, wall);
            self.carry(&mut st, effects)
        };
        self.settle(carried).await;
        self.walk_ended.notify_waiters();
        self.wake.notify_one();
    }

    /// Shutting down: no task starts from now on.
    pub fn stop_starting(&self) {
        lock(&self.state).queue.stop_starting();
    }

    /// Lets the walks under way finish until `until`; then stops the rest and writes their
    /// tasks back as queued (a clean stop is no interruption: they run again, uncounted,
    /// at the next start).
    pub async fn drain(&self, until: Instant) {
        self.stop_starting();
        loop {
            let ended = self.walk_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if lock(&self.state).queue.running() == 0 {
                break;
            }
            tokio::select! {
                () = &mut ended => {}
                () = tokio::time::sleep_until(until) => break,
            }
        }
        let (_, carried) = self.decide(|q| ((), q.stop()));
        self.settle(carried).await;
    }
}
