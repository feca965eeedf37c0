//! The runner: what wakes the queue, what a tick starts, routing and preparing a task's request.

use super::*;

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
                let q = lock(&self.0.queue);
                for e in q.entries.values() {
                    if let Some(h) = &e.running {
                        h.abort();
                    }
                }
            }
        }
        let _stop = StopWalks(Arc::clone(&self));
        let mut transitions = (self.fleet)().machines.bus().subscribe();
        loop {
            let fleet = (self.fleet)();
            // An empty queue has nothing a freed slot could start: it does not wake at the
            // end of every interactive call (a wake-up on another worker per request).
            let idle = lock(&self.queue).entries.is_empty();
            let changed = fleet.machines.changed();
            tokio::pin!(changed);
            if !idle {
                changed.as_mut().enable();
            }
            let wake = self.wake.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            while transitions.try_recv().is_ok() {
                lock(&self.queue).parked.clear();
            }
            let next = self.tick(&fleet).await;
            let sleep = tokio::time::sleep_until(
                next.unwrap_or_else(|| crate::clock::from_now(Duration::from_secs(3600))),
            );
            tokio::select! {
                got = transitions.recv() => {
                    if !matches!(got, Err(broadcast::error::RecvError::Closed)) {
                        lock(&self.queue).parked.clear();
                    }
                }
                () = &mut changed, if !idle => {}
                () = &mut wake => {}
                () = sleep => {}
            }
        }
    }

    /// Expires what is past its deadline and starts what may start; the next time
    /// something is due.
    pub(super) async fn tick(self: &Arc<Self>, fleet: &Arc<Fleet>) -> Option<Instant> {
        let now = Instant::now();
        let limits = &fleet.registry.tasks;
        let mut acks = Vec::new();
        let mut next: Option<Instant> = None;
        let mut soon = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let mut to_route: Vec<TaskId> = Vec::new();
        let mut to_start: Vec<(TaskId, Group)> = Vec::new();
        let mut running = {
            let mut q = lock(&self.queue);
            let expired: Vec<TaskId> = q
                .deadlines
                .iter()
                .take_while(|(deadline, _)| *deadline <= now)
                .map(|(_, id)| id.clone())
                .collect();
            for id in expired {
                acks.extend(self.end(
                    &mut q,
                    &id,
                    TaskStatus::Expired,
                    error(
                        TaskCode::DeadlineExceeded,
                        "its deadline passed before it finished",
                    ),
                ));
            }
            if let Some((deadline, _)) = q.deadlines.first() {
                soon(*deadline);
            }
            q.parked.retain(|_, until| until.is_none_or(|u| u > now));
            for until in q.parked.values().flatten() {
                soon(*until);
            }
            q.running
        };
        // The ready tasks in order, a chunk per lock: a long queue held back by a machine
        // that is down is looked through, but a submit (a serving thread) never waits for
        // the whole of it.
        let mut full: HashSet<Vec<ModelId>> = HashSet::new();
        let mut after: Option<Key> = None;
        loop {
            let mut q = lock(&self.queue);
            let mut starting: HashSet<Vec<ModelId>> = HashSet::new();
            let from = match &after {
                None => std::ops::Bound::Unbounded,
                Some(k) => std::ops::Bound::Excluded(k),
            };
            let mut done = true;
            let mut last: Option<&Key> = None;
            let ready = q.ready.range((from, std::ops::Bound::Unbounded));
            for (seen, k) in ready.enumerate() {
                if running >= limits.max_running || to_route.len() >= ROUTE_BATCH {
                    break;
                }
                if seen == READY_CHUNK {
                    done = false;
                    break;
                }
                last = Some(k);
                let Some(e) = q.entries.get(&k.2) else {
                    continue;
                };
                if let Some(at) = e.next_walk.filter(|&at| at > now) {
                    soon(at);
                    continue;
                }
                let Some((group, _)) = e
                    .group
                    .as_ref()
                    .filter(|(_, v)| *v == fleet.registry.version)
                else {
                    to_route.push(k.2.clone());
                    continue;
                };
                let gk: &[ModelId] = group;
                let open = q.open.contains(gk);
                // A group not known to serve is walked by one task at a time: one probe
                // per recovering machine, not one per waiting task.
                if q.parked.contains_key(gk)
                    || full.contains(gk)
                    || (!open && (q.probing.contains(gk) || starting.contains(gk)))
                {
                    continue;
                }
                let machines: Vec<MachineId> = group
                    .iter()
                    .map(|&m| fleet.registry.models[m].machine)
                    .collect();
                if !self.slots.any_free(fleet, &machines) {
                    full.insert(gk.to_vec());
                    continue;
                }
                if !open {
                    starting.insert(gk.to_vec());
                }
                running += 1;
                to_start.push((k.2.clone(), Arc::clone(group)));
            }
            let last = last.cloned();
            q.probing.extend(starting);
            if done {
                break;
            }
            after = last;
        }
        if to_route.len() >= ROUTE_BATCH {
            // More to route: come back at once, after starting what can start.
            self.wake.notify_one();
        }
        self.told(acks).await;
        for id in to_route {
            self.route(fleet, &id).await;
        }
        for (id, group) in to_start {
            self.start(fleet, &id, group).await;
        }
        next
    }

    /// Decides a task's chain: its request (after `{{after.N}}`) read by the same
    /// matcher as any request, filtered by `accept`.
    pub(super) async fn route(&self, fleet: &Arc<Fleet>, id: &TaskId) {
        let Some((task, outputs)) = self.prepare(id).await else {
            return;
        };
        let request = match outputs {
            Ok(req) => req,
            Err((code, why)) => {
                let acks = {
                    let mut q = lock(&self.queue);
                    self.end(&mut q, id, TaskStatus::Cancelled, error(code, &why))
                };
                self.told(acks).await;
                return;
            }
        };
        let max = fleet.registry.tasks.max_request_body;
        let chain = (request.len() <= max)
            .then_some(request)
            .ok_or_else(|| {
                format!("with its parents' text filled in, its request is larger than tasks.max_request_body ({max} bytes)")
            })
            .and_then(|request| Parsed::new(task.endpoint, request).map_err(|e| e.0))
            .and_then(|p| {
                let reg = &fleet.registry;
                fleet
                    .matcher
                    .decide(
                        reg,
                        task.route.as_deref(),
                        p.model.as_deref(),
                        &p.text,
                        p.has_image,
                    )
                    .map_err(|e| e.to_string())
                    .map(|routed| accepted(fleet, routed.chain(reg), task.accept))
            });
        let acks = {
            let mut q = lock(&self.queue);
            match chain {
                Ok(group) => {
                    // Routed into a group that is parked: it waits with the others, for
                    // the same reason (it is not walked until a breaker changes).
                    let why = q
                        .parked
                        .contains_key(group.as_ref())
                        .then(|| {
                            q.entries.values().find_map(|o| {
                                let same = o
                                    .group
                                    .as_ref()
                                    .is_some_and(|(g, _)| g.as_ref() == group.as_ref());
                                (same && o.task.status == TaskStatus::Waiting)
                                    .then(|| o.task.waiting_for.clone())
                                    .flatten()
                            })
                        })
                        .flatten();
                    if let Some(e) = q.entries.get_mut(id) {
                        if let (Some(why), TaskStatus::Queued) = (why, e.task.status) {
                            e.task.status = TaskStatus::Waiting;
                            e.task.waiting_for = Some(why);
                        }
                        e.group = Some((group, fleet.registry.version.clone()));
                    }
                    Vec::new()
                }
                Err(why) => self.end(
                    &mut q,
                    id,
                    TaskStatus::Failed,
                    error(TaskCode::InvalidRequest, &why),
                ),
            }
        };
        self.told(acks).await;
        self.wake.notify_one();
    }

    /// A task and its request ready to send: `{{after.N}}` filled from its parents'
    /// answers, or why it cannot run.
    pub(super) async fn prepare(
        &self,
        id: &TaskId,
    ) -> Option<(Task, Result<Bytes, (TaskCode, String)>)> {
        let task = lock(&self.queue).entries.get(id)?.task.clone();
        let request = self.request(id).await.ok()??;
        if task.after.is_empty() || !request.windows(8).any(|w| w == b"{{after.") {
            return Some((task, Ok(request)));
        }
        let mut outputs = Vec::with_capacity(task.after.len());
        for (i, p) in task.after.clone().iter().enumerate() {
            let parent = self.get(p, None).await.ok().flatten();
            let text = parent
                .as_ref()
                .and_then(|t| t.result.as_deref())
                .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
                .map(|v| serde_json::to_vec(&v["body"]).unwrap_or_default());
            let out = match (parent, text) {
                (Some(t), Some(body)) => follow::output(t.endpoint, &body),
                _ => Output::Unusable("it has no answer".into()),
            };
            match out {
                Output::Text(t) => outputs.push(t),
                Output::Unusable(why) => {
                    return Some((
                        task,
                        Err((
                            TaskCode::DependencyUnusable,
                            format!("after[{i}] {p}: {why}"),
                        )),
                    ))
                }
            }
        }
        let filled = follow::substitute(task.endpoint, &request, &outputs)
            .map_err(|e| (TaskCode::InvalidRequest, e));
        Some((task, filled))
    }

    /// Starts one walk of a task in its own tokio task.
    pub(super) async fn start(self: &Arc<Self>, fleet: &Arc<Fleet>, id: &TaskId, group: Group) {
        let Some((task, request)) = self.prepare(id).await else {
            lock(&self.queue).probing.remove(&group.to_vec());
            return;
        };
        let Ok(request) = request else {
            lock(&self.queue).probing.remove(&group.to_vec());
            // Re-routing ends it with the reason.
            if let Some(e) = lock(&self.queue).entries.get_mut(id) {
                e.group = None;
            }
            return;
        };
        let Ok(parsed) = Parsed::new(task.endpoint, request) else {
            lock(&self.queue).probing.remove(&group.to_vec());
            return;
        };
        let (deadline, started) = {
            let mut q = lock(&self.queue);
            let Some(e) = q.entries.get_mut(id) else {
                q.probing.remove(&group.to_vec());
                return;
            };
            e.task.status = TaskStatus::Running;
            let first = e.task.started_ms.is_none();
            if first {
                e.task.started_ms = Some(ms(SystemTime::now()));
            }
            let k = key(e);
            let deadline = e.deadline;
            let created = e.task.created_ms;
            q.ready.remove(&k);
            q.running += 1;
            (deadline, first.then_some(created))
        };
        if let Some(created) = started {
            let waited = SystemTime::now()
                .duration_since(from_ms(created))
                .unwrap_or_default();
            metrics::histogram!("labrouter_task_wait_seconds").record(waited.as_secs_f64());
        }
        let me = Arc::clone(self);
        let fleet = Arc::clone(fleet);
        let id2 = id.clone();
        let label = fleet
            .registry
            .routes
            .iter()
            .find(|r| r.chain.first() == group.first())
            .map_or_else(|| "task".to_string(), |r| r.name.clone());
        let slots = Arc::clone(&self.slots);
        let handle = tokio::spawn(async move {
            // Durable before anything is sent: a restart then knows it was interrupted.
            let mark = || {
                let snapshot = lock(&me.queue).entries.get(&id2).map(|e| e.task.clone());
                let rx = snapshot.and_then(|t| me.write(t, true));
                async move {
                    if let Some(rx) = rx {
                        let _ = committed(rx).await;
                    }
                }
            };
            let walked = walk(
                Arc::clone(&fleet),
                Arc::clone(&group),
                task.endpoint,
                parsed,
                deadline,
                slots,
                label,
                Some(mark),
            )
            .await;
            me.walked(&fleet, &id2, &group, walked).await;
        });
        let mut q = lock(&self.queue);
        match q.entries.get_mut(id) {
            Some(e) => e.running = Some(handle.abort_handle()),
            None => handle.abort(),
        }
    }
}

/// The chain a task accepts: every target, or only those with the first's backend name.
fn accepted(fleet: &Fleet, chain: &[ModelId], accept: crate::tasks::Accept) -> Group {
    let reg = &fleet.registry;
    match (accept, chain.first()) {
        (crate::tasks::Accept::SameModel, Some(&first)) => {
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
