//! The task queue as a plain value: every unfinished task's live state, and every decision
//! the queue makes — admitting a submit and linking its `after`, what is due at a tick,
//! what a walk's end means, how a task ends and what follows from it. Like the breaker's
//! `step`, none of these locks, reads a clock, touches the store or spawns: each takes `now`
//! (tokio's clock) and the wall time as arguments and returns [`Effect`]s, which the
//! scheduler (`super::scheduler`) carries out under its lock.
//!
//! **How a task waits for a machine**, in this file and its two parts:
//! 1. A ready task (queued or waiting) is *routed* once: its chain, filtered by `accept`,
//!    becomes its *group*; tasks with the same targets wait together.
//! 2. At a tick ([`Queue::scan`], `due.rs`) ready tasks are looked at by priority, then age.
//!    A group whose last walk served is *open*: its tasks start as slots allow
//!    (`max_running`, and the caller's `free`: `task_slots` per machine and one slot left to
//!    interactive requests). A group not known to serve is walked by one task at a time:
//!    one probe per recovering machine, never one per waiting task.
//! 3. The walk goes through the same breakers as any request. When every target was held
//!    back, nothing was sent and the group is *parked* ([`Queue::walked`], `walked.rs`):
//!    its tasks are `waiting`, cost no attempt, and are not walked again until a breaker
//!    changes ([`Queue::breaker_changed`]) or the soonest cooldown ends.
//! 4. When something was sent and nothing served, the walk costs an attempt only when a try
//!    failed on a machine that stayed closed ([`crate::outcome::Attempted::charges_task`]);
//!    the next walk follows a backoff. A task whose probe failed goes behind the others of
//!    its priority, so the probe role rotates.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::model::{AttemptRecord, Task, TaskError, TaskId};
use crate::outcome::{ModelId, TaskCode, TaskStatus};
use crate::request::Parsed;
use crate::store::ms;

mod admit;
mod due;
pub mod lone;
mod ready;
mod views;
mod walked;

pub use due::{Cursor, Due, Start, ROUTE_BATCH};
pub use walked::{Tried, WalkEnd};

/// At most this many attempt records are kept per task (oldest dropped first).
const MAX_RECORDS: usize = 100;
/// The bytes of prepared requests the queue holds in memory, all tasks together; past it a
/// task's request is read from the store again when it starts.
const HELD_MAX: usize = 64 << 20;

/// A task's chain as the queue groups it: tasks with the same targets wait together.
pub type Group = Arc<[ModelId]>;

/// What the scheduler carries out after a decision, in order.
#[derive(Debug)]
pub enum Effect {
    /// These tasks' new states, in one transaction; with `ack`, the announcements that
    /// follow wait for the commit.
    Write { tasks: Vec<Task>, ack: bool },
    /// A task finished: once the writes before it committed, tell its waiters (and its
    /// callback).
    Announce(TaskId),
    /// Stop this task's running walk (its lease is then a cancel: neutral for the breaker).
    Abort(TaskId),
}

/// Why a submit was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("after[{index}]: no task {id} (of yours)")]
    UnknownAfter { index: usize, id: TaskId },
    #[error("the queue holds tasks.max_queued ({max}) unfinished tasks; try again later")]
    QueueFull { max: u32 },
    #[error("your key has tasks.max_queued_per_key ({max}) unfinished tasks; try again later")]
    KeyFull { max: u32 },
    #[error("this Idempotency-Key was already used with a different body")]
    KeyReused,
    #[error("the task store failed: {0}")]
    Store(String),
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

/// One unfinished task.
struct Entry {
    task: Task,
    /// Queue position within its priority: its age, or the back after a failed probe.
    order: u64,
    /// When it joined the queue, in order: ties of `created_ms` go by it.
    arrival: u64,
    /// Parents not yet known to have succeeded.
    pending: usize,
    deadline: Instant,
    /// Not walked again before this (backoff after a failed walk).
    next_walk: Option<Instant>,
    /// Walks in a row that failed without serving (for the backoff).
    failed_walks: u32,
    /// The chain, once routed; with the registry version it was routed under.
    group: Option<(Group, String)>,
    /// Its request, ready to send (parents' text filled in), while the budget allows.
    prepared: Option<Arc<Parsed>>,
    /// A walk of it is under way.
    running: bool,
}

/// A parked group: until when (`None`: until a breaker changes), and what its tasks wait for.
struct Parked {
    until: Option<Instant>,
    why: String,
}

/// Run order: priority (higher first), then position.
type Key = (i64, u64, TaskId);

fn key(e: &Entry) -> Key {
    (-i64::from(e.task.priority), e.order, e.task.id.clone())
}

/// The queue's whole live state.
#[derive(Default)]
pub struct Queue {
    entries: HashMap<TaskId, Entry>,
    /// Queued and waiting tasks (not blocked, not running) in the order they run, by the
    /// group they were routed into.
    ready: ready::Ready,
    /// Children waiting on a parent.
    children: HashMap<TaskId, Vec<TaskId>>,
    /// Groups whose last walk found every target held back, until a breaker changes or
    /// their soonest cooldown ends.
    parked: HashMap<Group, Parked>,
    /// Groups with a walk in flight while not known to serve: one walk at a time.
    probing: HashSet<Group>,
    /// Groups whose last walk served: their tasks start as slots allow.
    open: HashSet<Group>,
    /// Every entry's deadline, soonest first (kept by `put` and `take`).
    deadlines: BTreeSet<(Instant, TaskId)>,
    next_order: u64,
    running: u32,
    /// Tasks finished whose last state is on its way to the disk: reads find them here
    /// until it is committed and they are announced.
    ending: HashMap<TaskId, Task>,
    /// Unfinished tasks per owner (`tasks.max_queued_per_key`).
    owners: HashMap<String, u32>,
    /// Bytes of the prepared requests held.
    held: usize,
    /// Shutting down: nothing more starts.
    stopping: bool,
}

/// An error object of the task's own (not a machine's).
pub fn error(code: TaskCode, message: &str) -> TaskError {
    TaskError {
        kind: "task_error".into(),
        code,
        message: message.to_string(),
        upstream: None,
    }
}

/// Marks a task finished in `status` at `wall`.
fn finish(task: &mut Task, status: TaskStatus, err: Option<TaskError>, wall: SystemTime) {
    task.status = status;
    task.finished_ms = Some(ms(wall));
    task.waiting_for = None;
    if status != TaskStatus::Succeeded {
        task.error = err;
    }
}

fn push_records(task: &mut Task, records: Vec<AttemptRecord>) {
    task.attempts.extend(records);
    let over = task.attempts.len().saturating_sub(MAX_RECORDS);
    if over > 0 {
        task.attempts.drain(..over);
    }
}

/// Sets what `e` holds of its request, within the budget `held` counts against (`None`
/// releases it).
fn hold(held: &mut usize, e: &mut Entry, prepared: Option<Arc<Parsed>>) {
    if let Some(old) = e.prepared.take() {
        *held = held.saturating_sub(old.body.len());
    }
    if let Some(p) = prepared {
        if *held + p.body.len() <= HELD_MAX {
            *held += p.body.len();
            e.prepared = Some(p);
        }
    }
}

/// How long until `deadline_ms`, from `wall`, as a tokio instant after `now`.
fn deadline_of(deadline_ms: i64, now: Instant, wall: SystemTime) -> Instant {
    let left = u64::try_from(deadline_ms.saturating_sub(ms(wall))).unwrap_or(0);
    crate::clock::after(now, Duration::from_millis(left))
}

// === impl Queue: entries in and out ===

impl Queue {
    fn put(&mut self, e: Entry) {
        self.deadlines.insert((e.deadline, e.task.id.clone()));
        self.entries.insert(e.task.id.clone(), e);
    }

    /// Takes an entry out of every index (it is put back, or it ended: then
    /// [`Queue::release`] it).
    fn take(&mut self, id: &TaskId) -> Option<Entry> {
        let e = self.entries.remove(id)?;
        self.deadlines.remove(&(e.deadline, e.task.id.clone()));
        self.ready.remove(&e.group, &key(&e));
        Some(e)
    }

    /// An entry taken out for good: what it held and its place in its owner's count.
    fn release(&mut self, e: &mut Entry) {
        hold(&mut self.held, e, None);
        self.forget_owner(&e.task.owner);
    }

    /// Sets what task `id` holds of its request, within the budget.
    fn hold_for(&mut self, id: &TaskId, prepared: Option<Arc<Parsed>>) {
        if let Some(e) = self.entries.get_mut(id) {
            hold(&mut self.held, e, prepared);
        }
    }

    /// A task enters the queue, blocked on `pending` parents or ready.
    fn admit_entry(&mut self, mut task: Task, pending: usize, now: Instant, wall: SystemTime) {
        let order = self.next_order;
        self.next_order += 1;
        task.status = if pending > 0 {
            TaskStatus::Blocked
        } else {
            TaskStatus::Queued
        };
        *self.owners.entry(task.owner.clone()).or_default() += 1;
        let e = Entry {
            deadline: deadline_of(task.deadline_ms, now, wall),
            task,
            order,
            arrival: order,
            pending,
            next_walk: None,
            failed_walks: 0,
            group: None,
            prepared: None,
            running: false,
        };
        if pending == 0 {
            self.ready.insert(&e.group, key(&e));
        }
        self.put(e);
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
            self.ready.insert(&e.group, k);
        }
    }

    /// Ends an unfinished task and, down the chain, its follow-ups (`dependency_failed`):
    /// one write for them all, so a task's end and its cascade commit together.
    pub fn end(
        &mut self,
        id: &TaskId,
        status: TaskStatus,
        err: TaskError,
        wall: SystemTime,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut ended = Vec::new();
        let mut todo = vec![(id.clone(), status, err)];
        while let Some((id, status, err)) = todo.pop() {
            let Some(mut e) = self.take(&id) else {
                continue;
            };
            self.release(&mut e);
            if e.running {
                // Its walk never reports: account for it here.
                effects.push(Effect::Abort(id.clone()));
                self.running = self.running.saturating_sub(1);
                if let Some((g, _)) = &e.group {
                    self.probing.remove(g);
                }
            }
            finish(&mut e.task, status, Some(err), wall);
            for child in self.children.remove(&id).unwrap_or_default() {
                let why = format!("a task it follows, {id}, ended {status}");
                todo.push((
                    child,
                    TaskStatus::Cancelled,
                    error(TaskCode::DependencyFailed, &why),
                ));
            }
            ended.push(e.task);
        }
        self.ended(ended, effects)
    }

    /// The effects of tasks that finished: their last states in one write, then each
    /// announced.
    fn ended(&mut self, ended: Vec<Task>, mut effects: Vec<Effect>) -> Vec<Effect> {
        if ended.is_empty() {
            return effects;
        }
        effects.push(Effect::Write {
            tasks: ended.clone(),
            ack: true,
        });
        for t in ended {
            effects.push(Effect::Announce(t.id.clone()));
            self.ending.insert(t.id.clone(), t);
        }
        effects
    }

    fn forget_owner(&mut self, owner: &str) {
        if let Some(n) = self.owners.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owners.remove(owner);
            }
        }
    }

    /// A finished task was announced: it is the store's to show from now on.
    pub fn announced(&mut self, id: &TaskId) -> Option<Task> {
        self.ending.remove(id)
    }
}

#[cfg(test)]
mod tests;
