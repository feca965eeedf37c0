//! The task queue (SPEC §10): durable through the store, fair to interactive work, waiting
//! (not failing) while every machine of a task's chain is down, and woken by breakers, not
//! by timers that poll dead machines.
//!
//! The store holds the durable record; this queue holds the live state of every unfinished
//! task (its status, why it waits, its attempts), so waiting and queued flips cost no disk
//! write. A task's record is written when it is submitted, when it starts, when a walk
//! sends something, and when it finishes — the last two before anyone is told.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use tokio::sync::{broadcast, oneshot, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::follow::{self, Output};
use super::model::{AttemptRecord, Task, TaskError, TaskId};
use super::submit::NewTask;
use super::walk::{walk, Walked};
use crate::fleet::Fleet;
use crate::outcome::{Attempted, Delivery, MachineId, ModelId, TaskCode, TaskStatus};
use crate::request::Parsed;
use crate::store::tasks::{Idem, Inserted, TaskInsert, TaskWrite};
use crate::store::{from_ms, ms, Msg, Store};

/// At most this many attempt records are kept per task (oldest dropped first).
const MAX_RECORDS: usize = 100;
/// At most this many tasks are routed per tick (each reads its request from the store),
/// so a long queue after a restart does not hold up the tasks already routed.
const ROUTE_BATCH: usize = 256;
/// The backoff after a walk that failed: 1 s, doubling, at most 1 min (SPEC §10).
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Where the scheduler reads the fleet serving now (it changes on reload).
pub type FleetNow = Arc<dyn Fn() -> Arc<Fleet> + Send + Sync>;

/// Tasks running per machine, by name (a reload keeps the count of a machine that stays).
#[derive(Debug, Default)]
pub struct Slots {
    running: Mutex<HashMap<String, u32>>,
}

/// A machine slot held by a running walk; released when dropped.
pub struct Slot<'a> {
    slots: &'a Slots,
    machine: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut r = lock(&self.slots.running);
        if let Some(n) = r.get_mut(&self.machine) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Slots {
    /// Takes a slot on `machine` if a task may start there now: fewer than `task_slots`
    /// tasks on it, and its bulkhead not full — with one slot always left to interactive
    /// requests where `max_concurrency` > 1 (SPEC §10: fair to interactive work).
    pub fn take(&self, fleet: &Fleet, machine: MachineId, task_slots: u32) -> Option<Slot<'_>> {
        let name = &fleet.registry.machines[machine].name;
        let (inflight, max) = fleet.machines.load(machine);
        let room = if max > 1 { max - 1 } else { max };
        let mut r = lock(&self.running);
        let n = r.entry(name.clone()).or_insert(0);
        if *n >= task_slots || inflight >= room {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self,
            machine: name.clone(),
        })
    }

    /// Whether [`Slots::take`] could succeed on any of `machines` now (no slot taken).
    fn any_free(&self, fleet: &Fleet, machines: &[MachineId]) -> bool {
        let r = lock(&self.running);
        machines.iter().any(|&m| {
            let mm = &fleet.registry.machines[m];
            let (inflight, max) = fleet.machines.load(m);
            let room = if max > 1 { max - 1 } else { max };
            r.get(&mm.name).copied().unwrap_or(0) < mm.task_slots && inflight < room
        })
    }
}

/// A finished task and the commit of its last state: its waiters are told after it.
type Told = (TaskId, Option<oneshot::Receiver<()>>);

/// Waits for the store's writer to answer. The wait runs on the blocking pool: the writer
/// is a thread tokio does not see, and a blocking task keeps a paused test clock from
/// jumping ahead while a commit is on its way to the disk.
async fn committed<T: Send + 'static>(rx: oneshot::Receiver<T>) -> Result<T, ()> {
    tokio::task::spawn_blocking(move || rx.blocking_recv().map_err(|_| ()))
        .await
        .map_err(|_| ())?
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a submit was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("after[{index}]: no task {id}")]
    UnknownAfter { index: usize, id: TaskId },
    #[error("the queue holds tasks.max_queued ({max}) unfinished tasks; try again later")]
    QueueFull { max: u32 },
    #[error("this Idempotency-Key was used with a different body")]
    KeyReused,
    #[error("the task store failed: {0}")]
    Store(String),
}

/// What a submit did.
#[derive(Debug)]
pub enum Submitted {
    New(Box<Task>),
    /// The Idempotency-Key was seen with the same body: this is its task.
    Replayed(Box<Task>),
}

/// A task's chain as the scheduler groups it: tasks with the same targets wait together.
type Group = Arc<[ModelId]>;

/// One unfinished task.
struct Entry {
    task: Task,
    /// Queue position within its priority: its age, or the back after a failed probe.
    order: u64,
    /// Parents not yet succeeded.
    pending: usize,
    deadline: Instant,
    /// Not walked again before this (backoff after a failed walk).
    next_walk: Option<Instant>,
    /// Walks in a row that failed without serving (for the backoff).
    failed_walks: u32,
    /// The chain, once routed; with the registry version it was routed under.
    group: Option<(Group, String)>,
    running: Option<AbortHandle>,
}

type Key = (i64, u64, TaskId);

fn key(e: &Entry) -> Key {
    (-i64::from(e.task.priority), e.order, e.task.id.clone())
}

#[derive(Default)]
struct Queue {
    entries: HashMap<TaskId, Entry>,
    /// Queued and waiting tasks in the order they run: priority, then age.
    ready: BTreeSet<Key>,
    /// Children waiting on a parent.
    children: HashMap<TaskId, Vec<TaskId>>,
    /// Groups whose last walk found every target held back, until a breaker changes or
    /// their soonest cooldown ends.
    parked: HashMap<Vec<ModelId>, Option<Instant>>,
    /// Groups with a walk in flight while not known to serve: one walk at a time, so a
    /// recovering machine is probed by one task, not by every waiting one.
    probing: HashSet<Vec<ModelId>>,
    /// Groups whose last walk served: their tasks start as slots allow.
    open: HashSet<Vec<ModelId>>,
    next_order: u64,
    running: u32,
    /// Tasks finished whose last state is on its way to the disk: reads find them here
    /// until it is committed, then in the store.
    ending: HashMap<TaskId, Task>,
}

/// The task queue and its scheduler.
pub struct Scheduler {
    fleet: FleetNow,
    store: Arc<Store>,
    queue: Mutex<Queue>,
    wake: Notify,
    slots: Arc<Slots>,
    finished: broadcast::Sender<TaskId>,
    /// Where finished tasks with a callback go to be delivered (SPEC §10), once
    /// [`crate::tasks::deliver`] runs; a send never waits.
    callbacks: Mutex<Option<tokio::sync::mpsc::UnboundedSender<TaskId>>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

/// Task counts for `/status` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub blocked: u64,
    pub queued: u64,
    pub waiting: u64,
    pub running: u64,
    /// Seconds the longest-waiting task has been waiting.
    pub oldest_waiting_s: Option<u64>,
}

impl Scheduler {
    /// The queue of `store`, resumed: blocked, queued and waiting tasks go on; a task that
    /// was running is queued again with an `interrupted` attempt, or failed if that is its
    /// second interruption (SPEC §10).
    pub fn resume(fleet: FleetNow, store: Arc<Store>) -> Result<Scheduler, String> {
        let unfinished = store
            .read(crate::store::tasks::unfinished)
            .map_err(|e| e.to_string())?;
        let (finished, _) = broadcast::channel(1024);
        let s = Scheduler {
            fleet,
            store,
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            slots: Arc::new(Slots::default()),
            finished,
            callbacks: Mutex::new(None),
        };
        let now = SystemTime::now();
        let mut resumed = Vec::new();
        for mut t in unfinished {
            if t.status == TaskStatus::Running {
                t.interrupted += 1;
                t.attempts.push(AttemptRecord {
                    at: crate::clock::rfc3339(now),
                    target: String::new(),
                    outcome: "interrupted".into(),
                    reason: None,
                    detail: Some("the router stopped while this task was running".into()),
                    charged: false,
                });
                if t.interrupted >= 2 {
                    finish_task(
                        &mut t,
                        TaskStatus::Failed,
                        Some(error(
                            TaskCode::Interrupted,
                            "the router stopped twice while this task was running; it is not run a third time",
                        )),
                        now,
                    );
                    s.write(t, false);
                    continue;
                }
                t.status = TaskStatus::Queued;
                s.write(t.clone(), false);
            }
            resumed.push(t);
        }
        // What resuming changed (interrupted tasks queued again or failed) is on disk
        // before anyone can read it.
        s.store.flush(Duration::from_secs(10));
        let ids: HashSet<TaskId> = resumed.iter().map(|t| t.id.clone()).collect();
        let mut q = lock(&s.queue);
        for t in resumed {
            // A parent no longer unfinished has succeeded, or its failure already
            // cascaded; find out which.
            let mut pending = 0;
            for p in &t.after {
                if ids.contains(p) {
                    pending += 1;
                    q.children.entry(p.clone()).or_default().push(t.id.clone());
                }
            }
            s.admit_entry(&mut q, t, pending);
        }
        drop(q);
        Ok(s)
    }

    /// From now on, hands every task that finishes with a callback to `deliveries` (tasks
    /// that finished before are the deliveries' to find in the store).
    pub fn deliver_callbacks_to(&self, deliveries: tokio::sync::mpsc::UnboundedSender<TaskId>) {
        *lock(&self.callbacks) = Some(deliveries);
    }

    /// Tells those waiting on a task that it finished, and hands its callback on; called
    /// once its finished state is on its way to the store.
    fn announce(&self, task: &Task) {
        let _ = self.finished.send(task.id.clone());
        if task.callback.is_some() {
            if let Some(deliveries) = lock(&self.callbacks).as_ref() {
                let _ = deliveries.send(task.id.clone());
            }
        }
    }

    /// Sends a task's new state to the store; with `ack`, waits for its commit.
    fn write(&self, task: Task, ack: bool) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        let msg = Msg::TaskWrite(Box::new(TaskWrite {
            task,
            ack: ack.then_some(tx),
        }));
        let _ = self.store.sender().send(msg);
        ack.then_some(rx)
    }

    fn admit_entry(&self, q: &mut Queue, t: Task, pending: usize) {
        let order = q.next_order;
        q.next_order += 1;
        let left = Duration::from_millis((t.deadline_ms - ms(SystemTime::now())).max(0) as u64);
        let mut task = t;
        task.status = if pending > 0 {
            TaskStatus::Blocked
        } else {
            TaskStatus::Queued
        };
        let e = Entry {
            task,
            order,
            pending,
            deadline: crate::clock::from_now(left),
            next_walk: None,
            failed_walks: 0,
            group: None,
            running: None,
        };
        if pending == 0 {
            q.ready.insert(key(&e));
        }
        q.entries.insert(e.task.id.clone(), e);
    }

    /// Stores a new task, then queues it (SPEC §10: a 202 means it is committed).
    pub async fn submit(
        &self,
        owner: &str,
        new: NewTask,
        idem: Option<Idem>,
        max_queued: u32,
    ) -> Result<Submitted, SubmitError> {
        // Parents: unfinished ones block it; finished ones decide it now.
        let mut pending = 0;
        let mut doomed: Option<(TaskCode, String)> = None;
        for (index, p) in new.after.iter().enumerate() {
            if let Some(e) = lock(&self.queue).entries.get(p) {
                if e.task.owner == owner {
                    pending += 1;
                    continue;
                }
            }
            let found = self.get(p, Some(owner)).await?;
            match found {
                None => {
                    return Err(SubmitError::UnknownAfter {
                        index,
                        id: p.clone(),
                    })
                }
                Some(t) if t.status == TaskStatus::Succeeded => {}
                Some(t) if t.status.is_finished() => {
                    doomed.get_or_insert((
                        TaskCode::DependencyFailed,
                        format!("after[{index}] {} {}", t.id, t.status),
                    ));
                }
                // Unfinished in the store but not in the queue: it is being finished now.
                Some(_) => pending += 1,
            }
        }
        let active = lock(&self.queue).entries.len();
        if active >= max_queued as usize {
            return Err(SubmitError::QueueFull { max: max_queued });
        }
        let now = SystemTime::now();
        let mut task = Task {
            seq: 0,
            id: TaskId::new(),
            owner: owner.to_string(),
            status: if pending > 0 {
                TaskStatus::Blocked
            } else {
                TaskStatus::Queued
            },
            endpoint: new.endpoint,
            route: new.route,
            accept: new.accept,
            priority: new.priority,
            after: new.after,
            metadata: new.metadata,
            created_ms: ms(now),
            started_ms: None,
            finished_ms: None,
            deadline_ms: ms(new.deadline),
            attempts_used: 0,
            max_attempts: new.max_attempts,
            interrupted: 0,
            attempts: Vec::new(),
            waiting_for: None,
            result: None,
            error: None,
            callback: new.callback.map(|url| crate::tasks::model::Callback {
                url,
                state: Delivery::Pending,
                attempts: 0,
                last_error: None,
            }),
        };
        if let Some((code, why)) = &doomed {
            finish_task(
                &mut task,
                TaskStatus::Cancelled,
                Some(error(
                    *code,
                    &format!("a task it follows did not succeed: {why}"),
                )),
                now,
            );
        }
        let (ack, done) = oneshot::channel();
        let msg = Msg::TaskInsert(Box::new(TaskInsert {
            task: task.clone(),
            request: new.request,
            idem,
            ack,
        }));
        self.store
            .sender()
            .send(msg)
            .map_err(|_| SubmitError::Store("the store's writer stopped".into()))?;
        let inserted = committed(done)
            .await
            .map_err(|_| SubmitError::Store("the store's writer stopped".into()))?
            .map_err(SubmitError::Store)?;
        match inserted {
            Inserted::KeyReused => Err(SubmitError::KeyReused),
            Inserted::Existing(id) => {
                let task = self
                    .get(&id, Some(owner))
                    .await?
                    .ok_or_else(|| SubmitError::Store(format!("{id} vanished")))?;
                Ok(Submitted::Replayed(Box::new(task)))
            }
            Inserted::New => {
                if task.status.is_finished() {
                    self.announce(&task);
                } else {
                    // Parents may have finished while the insert committed: link the live
                    // ones; the others count as pending until the store says how they
                    // ended, so the task cannot start before that is known.
                    let gone: Vec<TaskId> = {
                        let mut q = lock(&self.queue);
                        let mut gone = Vec::new();
                        for p in &task.after {
                            if q.entries.contains_key(p) {
                                q.children
                                    .entry(p.clone())
                                    .or_default()
                                    .push(task.id.clone());
                            } else {
                                gone.push(p.clone());
                            }
                        }
                        let pending = task.after.len();
                        self.admit_entry(&mut q, task.clone(), pending);
                        gone
                    };
                    for p in gone {
                        let ended = self.get(&p, None).await?.map(|t| t.status);
                        let acks = {
                            let mut q = lock(&self.queue);
                            match ended {
                                Some(TaskStatus::Succeeded) => {
                                    if let Some(e) = q.entries.get_mut(&task.id) {
                                        e.pending = e.pending.saturating_sub(1);
                                        if e.pending == 0 && e.task.status == TaskStatus::Blocked {
                                            e.task.status = TaskStatus::Queued;
                                            let k = key(e);
                                            q.ready.insert(k);
                                        }
                                    }
                                    Vec::new()
                                }
                                other => self.end(
                                    &mut q,
                                    &task.id,
                                    TaskStatus::Cancelled,
                                    error(
                                        TaskCode::DependencyFailed,
                                        &format!(
                                            "a task it follows, {p}, ended {}",
                                            other.map_or("unknown".to_string(), |s| s.to_string())
                                        ),
                                    ),
                                ),
                            }
                        };
                        self.told(acks).await;
                    }
                }
                self.wake.notify_one();
                Ok(Submitted::New(Box::new(task)))
            }
        }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, SubmitError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || store.read(f))
            .await
            .map_err(|e| SubmitError::Store(e.to_string()))?
            .map_err(|e| SubmitError::Store(e.to_string()))
    }

    /// A task of `owner` (any owner when `None`): live state for an unfinished one, the
    /// store's record for a finished one.
    pub async fn get(&self, id: &TaskId, owner: Option<&str>) -> Result<Option<Task>, SubmitError> {
        {
            let q = lock(&self.queue);
            if let Some(t) = q
                .entries
                .get(id)
                .map(|e| &e.task)
                .or_else(|| q.ending.get(id))
            {
                return Ok(owner.is_none_or(|o| o == t.owner).then(|| t.clone()));
            }
        }
        let (id, owner) = (id.clone(), owner.map(str::to_string));
        self.read(move |c| crate::store::tasks::task(c, &id, owner.as_deref()))
            .await
    }

    /// A task's request body, as submitted.
    pub async fn request(&self, id: &TaskId) -> Result<Option<Bytes>, SubmitError> {
        let id = id.clone();
        self.read(move |c| crate::store::tasks::request(c, &id))
            .await
    }

    /// Tasks newest first, live state overlaid on the store's records.
    pub async fn list(
        &self,
        owner: Option<&str>,
        status: Option<TaskStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Task>, SubmitError> {
        // Live statuses differ from stored ones (queued/waiting flips are not written): a
        // status filter on an unfinished status reads the queue.
        if let Some(s) = status.filter(|s| !s.is_finished()) {
            let q = lock(&self.queue);
            let mut out: Vec<Task> = q
                .entries
                .values()
                .filter(|e| e.task.status == s)
                .filter(|e| owner.is_none_or(|o| o == e.task.owner))
                .filter(|e| before.is_none_or(|b| e.task.seq < b))
                .map(|e| e.task.clone())
                .collect();
            out.sort_by_key(|t| std::cmp::Reverse(t.seq));
            out.truncate(limit as usize);
            return Ok(out);
        }
        let o = owner.map(str::to_string);
        let mut rows = self
            .read(move |c| crate::store::tasks::list(c, o.as_deref(), status, before, limit))
            .await?;
        let q = lock(&self.queue);
        for t in &mut rows {
            if let Some(e) = q.entries.get(&t.id) {
                *t = e.task.clone();
            }
        }
        Ok(rows)
    }

    /// Waits until the task finished or `wait` passed; the task as it then is.
    pub async fn wait(
        &self,
        id: &TaskId,
        owner: Option<&str>,
        wait: Duration,
    ) -> Result<Option<Task>, SubmitError> {
        let mut finished = self.finished.subscribe();
        let until = crate::clock::from_now(wait);
        loop {
            let task = self.get(id, owner).await?;
            match &task {
                Some(t) if !t.status.is_finished() => {}
                _ => return Ok(task),
            }
            tokio::select! {
                got = finished.recv() => match got {
                    Ok(f) if &f != id => continue,
                    _ => {}
                },
                () = tokio::time::sleep_until(until) => return self.get(id, owner).await,
            }
        }
    }

    /// Cancels an unfinished task of `owner` (a running attempt is aborted: neutral for the
    /// breaker) and, down the chain, its follow-ups. `Ok(None)` when there is no such task.
    pub async fn cancel(
        &self,
        id: &TaskId,
        owner: Option<&str>,
    ) -> Result<Option<Task>, SubmitError> {
        let done = {
            let mut q = lock(&self.queue);
            match q.entries.get(id) {
                Some(e) if owner.is_none_or(|o| o == e.task.owner) => Some(self.end(
                    &mut q,
                    id,
                    TaskStatus::Cancelled,
                    error(TaskCode::Cancelled, "cancelled by its owner"),
                )),
                _ => None,
            }
        };
        match done {
            Some(acks) => {
                self.told(acks).await;
                self.wake.notify_one();
                self.get(id, owner).await
            }
            None => self.get(id, owner).await,
        }
    }

    /// Live counts for `/status` and metrics.
    pub fn counts(&self) -> Counts {
        let q = lock(&self.queue);
        let mut c = Counts::default();
        let now = SystemTime::now();
        for e in q.entries.values() {
            match e.task.status {
                TaskStatus::Blocked => c.blocked += 1,
                TaskStatus::Queued => c.queued += 1,
                TaskStatus::Waiting => {
                    c.waiting += 1;
                    let age = now
                        .duration_since(from_ms(e.task.created_ms))
                        .unwrap_or_default()
                        .as_secs();
                    c.oldest_waiting_s = Some(c.oldest_waiting_s.map_or(age, |o| o.max(age)));
                }
                TaskStatus::Running => c.running += 1,
                _ => {}
            }
        }
        c
    }

    /// The task waiting longest (the oldest by creation, as [`Scheduler::counts`] ages
    /// them), with what it waits for: the dashboard shows it.
    pub fn oldest_waiting(&self) -> Option<Task> {
        let q = lock(&self.queue);
        q.entries
            .values()
            .filter(|e| e.task.status == TaskStatus::Waiting)
            .min_by_key(|e| (e.task.created_ms, e.task.seq))
            .map(|e| e.task.clone())
    }

    /// Ends an unfinished task (cancel, expire, fail, succeed) and cascades to its
    /// follow-ups; returns the commits to wait for before anyone is told.
    fn end(&self, q: &mut Queue, id: &TaskId, status: TaskStatus, err: TaskError) -> Vec<Told> {
        let mut acks = Vec::new();
        let mut todo = vec![(id.clone(), status, Some(err))];
        while let Some((id, status, err)) = todo.pop() {
            let Some(mut e) = q.entries.remove(&id) else {
                continue;
            };
            q.ready.remove(&key(&e));
            if let Some(h) = e.running.take() {
                // Its walk never reports: account for it here (the aborted lease is a
                // Cancel, neutral for the breaker).
                h.abort();
                q.running = q.running.saturating_sub(1);
                if let Some((g, _)) = &e.group {
                    q.probing.remove(&g.to_vec());
                }
            }
            finish_task(&mut e.task, status, err, SystemTime::now());
            acks.push((id.clone(), self.write(e.task.clone(), true)));
            q.ending.insert(id.clone(), e.task.clone());
            for child in q.children.remove(&id).unwrap_or_default() {
                todo.push((
                    child,
                    TaskStatus::Cancelled,
                    Some(error(
                        TaskCode::DependencyFailed,
                        &format!("a task it follows, {id}, ended {status}"),
                    )),
                ));
            }
        }
        acks
    }

    /// Waits for finished tasks' commits, then tells their waiters: a waiter that reads a
    /// finished task back finds it finished in the store.
    async fn told(&self, acks: Vec<Told>) {
        for (id, ack) in acks {
            if let Some(ack) = ack {
                let _ = committed(ack).await;
            }
            // Waiters and the callback worker hear of it once it is on disk.
            let ended = lock(&self.queue).ending.remove(&id);
            match ended {
                Some(task) => self.announce(&task),
                None => {
                    let _ = self.finished.send(id);
                }
            }
        }
    }

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
            let changed = fleet.machines.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
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
                () = &mut changed => {}
                () = &mut wake => {}
                () = sleep => {}
            }
        }
    }

    /// Expires what is past its deadline and starts what may start; the next time
    /// something is due.
    async fn tick(self: &Arc<Self>, fleet: &Arc<Fleet>) -> Option<Instant> {
        let now = Instant::now();
        let limits = &fleet.registry.tasks;
        let mut acks = Vec::new();
        let mut next: Option<Instant> = None;
        let mut soon = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let mut to_route: Vec<TaskId> = Vec::new();
        let mut to_start: Vec<(TaskId, Group)> = Vec::new();
        {
            let mut q = lock(&self.queue);
            let expired: Vec<TaskId> = q
                .entries
                .values()
                .filter(|e| e.deadline <= now)
                .map(|e| e.task.id.clone())
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
            for e in q.entries.values() {
                soon(e.deadline);
            }
            q.parked.retain(|_, until| until.is_none_or(|u| u > now));
            for until in q.parked.values().flatten() {
                soon(*until);
            }
            let mut full: HashSet<Vec<ModelId>> = HashSet::new();
            let mut starting: HashSet<Vec<ModelId>> = HashSet::new();
            let mut running = q.running;
            for k in &q.ready {
                if running >= limits.max_running || to_route.len() >= ROUTE_BATCH {
                    break;
                }
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
                let gk: Vec<ModelId> = group.to_vec();
                let open = q.open.contains(&gk);
                // A group not known to serve is walked by one task at a time: one probe
                // per recovering machine, not one per waiting task.
                if full.contains(&gk)
                    || q.parked.contains_key(&gk)
                    || (!open && (q.probing.contains(&gk) || starting.contains(&gk)))
                {
                    continue;
                }
                let machines: Vec<MachineId> = group
                    .iter()
                    .map(|&m| fleet.registry.models[m].machine)
                    .collect();
                if !self.slots.any_free(fleet, &machines) {
                    full.insert(gk);
                    continue;
                }
                if !open {
                    starting.insert(gk);
                }
                running += 1;
                to_start.push((k.2.clone(), Arc::clone(group)));
            }
            q.probing.extend(starting);
            if to_route.len() >= ROUTE_BATCH {
                // More to route: come back at once, after starting what can start.
                self.wake.notify_one();
            }
        }
        self.told(acks).await;
        for id in to_route {
            self.route(fleet, &id).await;
        }
        for (id, group) in to_start {
            self.start(fleet, &id, group).await;
        }
        if !lock(&self.queue).ready.is_empty() {
            // Routed tasks are looked at on the next tick.
        }
        next
    }

    /// Decides a task's chain: its request (after `{{after.N}}`) read by the same
    /// matcher as any request, filtered by `accept`.
    async fn route(&self, fleet: &Arc<Fleet>, id: &TaskId) {
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
                    if let Some(e) = q.entries.get_mut(id) {
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
    async fn prepare(&self, id: &TaskId) -> Option<(Task, Result<Bytes, (TaskCode, String)>)> {
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
    async fn start(self: &Arc<Self>, fleet: &Arc<Fleet>, id: &TaskId, group: Group) {
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

    /// What a walk's end does to its task.
    async fn walked(&self, fleet: &Fleet, id: &TaskId, group: &Group, walked: Walked) {
        let now = SystemTime::now();
        let reg = &fleet.registry;
        let records = |attempts: &[Attempted]| -> Vec<AttemptRecord> {
            attempts
                .iter()
                .map(|a| AttemptRecord {
                    at: crate::clock::rfc3339(now),
                    target: reg.target_name(a.target),
                    outcome: a.outcome().into(),
                    reason: Some(a.reason),
                    detail: a.was_sent().then(|| a.detail.clone()),
                    charged: false,
                })
                .collect()
        };
        let mut acks = Vec::new();
        let mut write = None;
        {
            let mut q = lock(&self.queue);
            let gk = group.to_vec();
            q.probing.remove(&gk);
            // Taken out while it is decided; put back unless it ended.
            let Some(mut e) = q.entries.remove(id) else {
                // Ended meanwhile (cancelled, expired): `end` accounted for the walk.
                drop(q);
                self.wake.notify_one();
                return;
            };
            q.running = q.running.saturating_sub(1);
            e.running = None;
            let mut end: Option<(TaskStatus, TaskError)> = None;
            let mut done = false;
            match walked {
                Walked::Served {
                    target,
                    status,
                    body,
                    attempts,
                } => {
                    q.open.insert(gk);
                    push_records(&mut e.task, records(&attempts));
                    let body_json = serde_json::from_slice::<serde_json::Value>(&body)
                        .unwrap_or(serde_json::Value::Null);
                    e.task.result = Some(
                        serde_json::json!({"status": status.as_u16(), "target": reg.target_name(target), "body": body_json})
                            .to_string(),
                    );
                    finish_task(&mut e.task, TaskStatus::Succeeded, None, now);
                    acks.push((id.clone(), self.write(e.task.clone(), true)));
                    q.ending.insert(id.clone(), e.task.clone());
                    for c in q.children.remove(id).unwrap_or_default() {
                        if let Some(ce) = q.entries.get_mut(&c) {
                            ce.pending = ce.pending.saturating_sub(1);
                            if ce.pending == 0 && ce.task.status == TaskStatus::Blocked {
                                ce.task.status = TaskStatus::Queued;
                                let k = key(ce);
                                q.ready.insert(k);
                            }
                        }
                    }
                    done = true;
                }
                Walked::Refused {
                    status,
                    body,
                    attempts,
                    ..
                } => {
                    q.open.insert(gk);
                    push_records(&mut e.task, records(&attempts));
                    let mut err = error(
                        TaskCode::RequestRejected,
                        &format!(
                            "the machine refused the request itself (HTTP {}); see error.upstream",
                            status.as_u16()
                        ),
                    );
                    err.upstream = serde_json::from_slice::<&serde_json::value::RawValue>(&body)
                        .ok()
                        .map(|r| r.to_owned());
                    end = Some((TaskStatus::Failed, err));
                }
                Walked::Parked {
                    attempts,
                    by_slots,
                    soonest,
                } => {
                    let was = e.task.status;
                    e.task.status = if by_slots {
                        TaskStatus::Queued
                    } else {
                        TaskStatus::Waiting
                    };
                    e.task.waiting_for = Some(waiting_for(reg, &attempts, by_slots));
                    if was != TaskStatus::Waiting && !by_slots {
                        push_records(&mut e.task, records(&attempts));
                    }
                    if !by_slots {
                        q.open.remove(&gk);
                        q.parked.insert(gk, soonest.map(crate::clock::from_now));
                    }
                }
                Walked::Failed {
                    attempts,
                    charged,
                    probe_failed,
                    expired,
                } => {
                    let mut recs = records(&attempts);
                    if let Some(last) = recs.last_mut() {
                        last.charged = charged;
                    }
                    push_records(&mut e.task, recs);
                    if charged {
                        e.task.attempts_used += 1;
                    }
                    e.failed_walks += 1;
                    if expired {
                        end = Some((
                            TaskStatus::Expired,
                            error(
                                TaskCode::DeadlineExceeded,
                                "its deadline passed before it finished",
                            ),
                        ));
                    } else if e.task.attempts_used >= e.task.max_attempts {
                        let used = e.task.attempts_used;
                        end = Some((
                            TaskStatus::Failed,
                            error(
                                TaskCode::AttemptsExhausted,
                                &format!("all {used} attempts failed; see attempts"),
                            ),
                        ));
                    } else {
                        let backoff = BACKOFF_FIRST
                            .saturating_mul(1 << e.failed_walks.saturating_sub(1).min(6))
                            .min(BACKOFF_MAX);
                        e.next_walk = Some(crate::clock::from_now(backoff));
                        e.task.status = if charged {
                            TaskStatus::Queued
                        } else {
                            TaskStatus::Waiting
                        };
                        e.task.waiting_for = Some(if charged {
                            format!(
                                "attempt {} of {} failed; the next walk is in {}",
                                e.task.attempts_used,
                                e.task.max_attempts,
                                crate::outcome::words(backoff)
                            )
                        } else {
                            "its machines failed the way down machines do; it waits for them"
                                .to_string()
                        });
                        if !charged {
                            q.open.remove(&gk);
                        }
                        if probe_failed {
                            // The probe role rotates: behind the others of its priority.
                            e.order = q.next_order;
                            q.next_order += 1;
                        }
                        write = Some(e.task.clone());
                    }
                }
            }
            let k = key(&e);
            if !done {
                q.entries.insert(id.clone(), e);
            }
            match end {
                Some((status, err)) => acks.extend(self.end(&mut q, id, status, err)),
                None if !done => {
                    q.ready.insert(k);
                }
                None => {}
            }
        }
        if let Some(t) = write {
            self.write(t, false);
        }
        self.told(acks).await;
        self.wake.notify_one();
    }
}

/// The chain a task accepts: every target, or only those with the first's backend name.
fn accepted(fleet: &Fleet, chain: &[ModelId], accept: super::Accept) -> Group {
    let reg = &fleet.registry;
    match (accept, chain.first()) {
        (super::Accept::SameModel, Some(&first)) => {
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

/// Plain words for why a task waits: what held each target back.
fn waiting_for(reg: &crate::registry::Registry, attempts: &[Attempted], by_slots: bool) -> String {
    if by_slots {
        return "every machine it accepts is busy with other tasks or interactive requests".into();
    }
    let parts: Vec<String> = attempts
        .iter()
        .map(|a| a.describe(&reg.target_name(a.target)))
        .collect();
    format!("every target it accepts is held back: {}", parts.join("; "))
}

fn push_records(task: &mut Task, records: Vec<AttemptRecord>) {
    task.attempts.extend(records);
    let over = task.attempts.len().saturating_sub(MAX_RECORDS);
    if over > 0 {
        task.attempts.drain(..over);
    }
}

fn error(code: TaskCode, message: &str) -> TaskError {
    TaskError {
        kind: "task_error".into(),
        code,
        message: message.to_string(),
        upstream: None,
    }
}

fn finish_task(task: &mut Task, status: TaskStatus, err: Option<TaskError>, now: SystemTime) {
    task.status = status;
    task.finished_ms = Some(ms(now));
    task.waiting_for = None;
    if status != TaskStatus::Succeeded {
        task.error = err;
    }
}
