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

mod ending;
mod intake;
mod queries;
mod slots;
mod tick;

pub use slots::{Slot, Slots};

/// At most this many attempt records are kept per task (oldest dropped first).
const MAX_RECORDS: usize = 100;
/// At most this many tasks are routed per tick (each reads its request from the store),
/// so a long queue after a restart does not hold up the tasks already routed.
const ROUTE_BATCH: usize = 256;
/// A tick looks through the ready tasks this many at a time, the queue's lock released
/// in between.
const READY_CHUNK: usize = 256;
/// The backoff after a walk that failed: 1 s, doubling, at most 1 min (SPEC §10).
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Where the scheduler reads the fleet serving now (it changes on reload).
pub type FleetNow = Arc<dyn Fn() -> Arc<Fleet> + Send + Sync>;

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
    /// Every entry's deadline, soonest first: a tick finds what expired and what is due
    /// next without looking at every entry (kept by [`Queue::put`] and [`Queue::take`]).
    deadlines: BTreeSet<(Instant, TaskId)>,
    next_order: u64,
    running: u32,
    /// Tasks finished whose last state is on its way to the disk: reads find them here
    /// until it is committed, then in the store.
    ending: HashMap<TaskId, Task>,
}

impl Queue {
    fn put(&mut self, e: Entry) {
        self.deadlines.insert((e.deadline, e.task.id.clone()));
        self.entries.insert(e.task.id.clone(), e);
    }

    fn take(&mut self, id: &TaskId) -> Option<Entry> {
        let e = self.entries.remove(id)?;
        self.deadlines.remove(&(e.deadline, e.task.id.clone()));
        Some(e)
    }

    /// One of `child`'s parents succeeded: with none left pending, it is ready.
    fn parent_succeeded(&mut self, child: &TaskId) {
        let Some(e) = self.entries.get_mut(child) else {
            return;
        };
        e.pending = e.pending.saturating_sub(1);
        if e.pending == 0 && e.task.status == TaskStatus::Blocked {
            e.task.status = TaskStatus::Queued;
            let k = key(e);
            self.ready.insert(k);
        }
    }
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

impl Counts {
    /// The unfinished counts by status (the `labrouter_tasks{status}` gauges).
    pub fn by_status(&self) -> Vec<(TaskStatus, u64)> {
        vec![
            (TaskStatus::Blocked, self.blocked),
            (TaskStatus::Queued, self.queued),
            (TaskStatus::Waiting, self.waiting),
            (TaskStatus::Running, self.running),
        ]
    }
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

    /// The store the queue keeps its tasks in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The fleet serving now.
    pub fn fleet(&self) -> Arc<Fleet> {
        (self.fleet)()
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
        q.put(e);
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
