//! What a walk's end means for its task — served, refused, parked, an attempt used or not,
//! backoff, failure, expiry — and the other ways a running or waiting task changes: the
//! durable "running" mark before a walk sends, a cancel, a breaker that changed, a drain.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::{error, finish, key, push_records, Effect, Group, Queue};
use crate::outcome::{TaskCode, TaskStatus};
use crate::tasks::model::{AttemptRecord, TaskError, TaskId, TaskResult};

/// The backoff after a walk that failed: 1 s, doubling, at most 1 min.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// The backoff after the `n`th walk in a row that failed: 1 s, doubling, at most 1 min.
pub(super) fn backoff(n: u32) -> Duration {
    BACKOFF_FIRST
        .saturating_mul(1 << n.saturating_sub(1).min(6))
        .min(BACKOFF_MAX)
}

/// A task whose deadline passed before it finished ends with this.
pub(super) fn deadline_passed() -> TaskError {
    error(
        TaskCode::DeadlineExceeded,
        "its deadline passed before it finished",
    )
}

/// How a task whose request cannot be made ready ends: a parent's unusable answer cancels
/// it, a request of its own that cannot be sent fails it.
pub(super) fn unprepared(code: TaskCode) -> TaskStatus {
    if code == TaskCode::DependencyUnusable {
        TaskStatus::Cancelled
    } else {
        TaskStatus::Failed
    }
}

/// What a task held back by `tried` waits for: busy machines (slots), or breakers.
pub(super) fn held_back_for(tried: &Tried) -> String {
    if tried.by_breaker {
        format!("every target it accepts is held back: {}", tried.held)
    } else {
        "every machine it accepts is busy with other tasks or interactive requests".into()
    }
}

/// What a task whose walk failed waits for: its next walk after `wait` when the attempt was
/// charged, else its machines (they failed as down machines do).
pub(super) fn failed_for(task: &crate::task::Task, charged: bool, wait: Duration) -> String {
    if charged {
        format!(
            "attempt {} of {} failed; the next walk is in {}",
            task.attempts_used,
            task.max_attempts,
            crate::outcome::words(wait)
        )
    } else {
        "its machines failed the way down machines do; it waits for them".to_string()
    }
}

/// What one walk tried, as the queue decides on it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tried {
    /// Every target's part, as the task lists them.
    pub records: Vec<AttemptRecord>,
    /// Something reached a machine.
    pub sent: bool,
    /// Some try failed on a machine that stayed closed: the walk uses an attempt.
    pub charged: bool,
    /// The task was a machine's probe, and the probe failed.
    pub probe_failed: bool,
    /// The task's deadline ran out during the walk.
    pub expired: bool,
    /// Some target was held back by a breaker (not only by slots or a full machine).
    pub by_breaker: bool,
    /// When a breaker may admit again, if known.
    pub soonest: Option<Duration>,
    /// What held each target back, in plain words.
    pub held: String,
}

/// How a walk ended.
#[derive(Debug)]
pub enum WalkEnd {
    /// A machine answered: the task succeeded.
    Served(TaskResult, Tried),
    /// A machine refused the request itself (400, 413, 422): the task fails at once.
    Refused(TaskError, Tried),
    /// Nothing served.
    Unserved(Tried),
    /// Its request could not be made ready to send: the task ends with this code.
    Unprepared(TaskCode, String),
}

impl Queue {
    /// What the end of task `id`'s walk of `group` does to it.
    pub fn walked(
        &mut self,
        id: &TaskId,
        group: &Group,
        end: WalkEnd,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<Effect> {
        self.probing.remove(group);
        // Taken out while it is decided; put back unless it ended.
        let Some(mut e) = self.take(id) else {
            // Ended meanwhile (cancelled, expired): `end` accounted for the walk.
            return Vec::new();
        };
        if e.running {
            self.running = self.running.saturating_sub(1);
        }
        e.running = false;
        match end {
            WalkEnd::Served(result, tried) => {
                self.open.insert(Arc::clone(group));
                push_records(&mut e.task, tried.records);
                e.task.result = Some(result);
                finish(&mut e.task, TaskStatus::Succeeded, None, wall);
                self.release(&mut e);
                for c in self.children.remove(id).unwrap_or_default() {
                    self.parent_succeeded(&c);
                }
                self.ended(vec![e.task], Vec::new())
            }
            WalkEnd::Refused(err, tried) => {
                self.open.insert(Arc::clone(group));
                push_records(&mut e.task, tried.records);
                self.put(e);
                self.end(id, TaskStatus::Failed, err, wall)
            }
            WalkEnd::Unprepared(code, why) => {
                self.put(e);
                self.end(id, unprepared(code), error(code, &why), wall)
            }
            WalkEnd::Unserved(tried) if !tried.sent => {
                self.parked_walk(e, group, tried, now);
                Vec::new()
            }
            WalkEnd::Unserved(tried) => self.failed_walk(e, group, tried, now, wall),
        }
    }

    /// Nothing was sent: every target was held back. Held back by a breaker, the task and
    /// its group wait (no attempt used) until a breaker changes or the soonest cooldown
    /// ends; held back only by slots, it stays queued.
    fn parked_walk(&mut self, mut e: super::Entry, group: &Group, tried: Tried, now: Instant) {
        let by_slots = !tried.by_breaker;
        let was = e.task.status;
        e.task.status = if by_slots {
            TaskStatus::Queued
        } else {
            TaskStatus::Waiting
        };
        e.task.waiting_for = Some(held_back_for(&tried));
        if was != TaskStatus::Waiting && !by_slots {
            push_records(&mut e.task, tried.records);
        }
        if !by_slots {
            // The tasks queued behind it accept the same targets: they wait too.
            let why = e.task.waiting_for.clone().unwrap_or_default();
            let behind: Vec<TaskId> = self.ready.of(&e.group).map(|k| k.2.clone()).collect();
            for id in &behind {
                let Some(other) = self.entries.get_mut(id) else {
                    continue;
                };
                if other.task.status == TaskStatus::Queued {
                    other.task.status = TaskStatus::Waiting;
                    other.task.waiting_for = Some(why.clone());
                }
            }
            self.open.remove(group);
            let until = tried.soonest.map(|d| crate::clock::after(now, d));
            self.parked
                .insert(Arc::clone(group), super::Parked { until, why });
        }
        self.ready.insert(&e.group, key(&e));
        self.put(e);
    }

    /// Something was sent and nothing served: an attempt used or not, then a backoff, or
    /// the end (attempts exhausted, deadline passed).
    fn failed_walk(
        &mut self,
        mut e: super::Entry,
        group: &Group,
        mut tried: Tried,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<Effect> {
        let id = e.task.id.clone();
        if let Some(last) = tried.records.last_mut() {
            last.charged = tried.charged;
        }
        push_records(&mut e.task, tried.records);
        if tried.charged {
            e.task.attempts_used += 1;
        }
        e.failed_walks += 1;
        if tried.expired {
            self.put(e);
            return self.end(&id, TaskStatus::Expired, deadline_passed(), wall);
        }
        if e.task.attempts_used >= e.task.max_attempts {
            let used = e.task.attempts_used;
            self.put(e);
            let why = format!("all {used} attempts failed; see attempts");
            return self.end(
                &id,
                TaskStatus::Failed,
                error(TaskCode::AttemptsExhausted, &why),
                wall,
            );
        }
        let backoff = backoff(e.failed_walks);
        e.next_walk = Some(crate::clock::after(now, backoff));
        e.task.status = if tried.charged {
            TaskStatus::Queued
        } else {
            TaskStatus::Waiting
        };
        e.task.waiting_for = Some(failed_for(&e.task, tried.charged, backoff));
        if !tried.charged {
            self.open.remove(group);
        }
        if tried.probe_failed {
            // The probe role rotates: behind the others of its priority.
            e.order = self.next_order;
            self.next_order += 1;
        }
        let write = Effect::Write {
            tasks: vec![e.task.clone()],
            ack: false,
        };
        self.ready.insert(&e.group, key(&e));
        self.put(e);
        vec![write]
    }

    /// Task `id` is about to send its first request of a walk: its "running" state, to be
    /// made durable first, so a restart knows it was interrupted.
    pub fn mark_running(&self, id: &TaskId) -> Option<Effect> {
        let e = self.entries.get(id).filter(|e| e.running)?;
        Some(Effect::Write {
            tasks: vec![e.task.clone()],
            ack: true,
        })
    }

    /// Cancels an unfinished task of `owner` (any when `None`) and its follow-ups; `None`
    /// when there is no such task.
    pub fn cancel(
        &mut self,
        id: &TaskId,
        owner: Option<&str>,
        wall: SystemTime,
    ) -> Option<Vec<Effect>> {
        let e = self.entries.get(id)?;
        if owner.is_some_and(|o| o != e.task.owner) {
            return None;
        }
        let err = error(TaskCode::Cancelled, "cancelled by its owner");
        Some(self.end(id, TaskStatus::Cancelled, err, wall))
    }

    /// A breaker changed: every parked group may walk again (one of its tasks may be the
    /// probe).
    pub fn breaker_changed(&mut self) {
        self.parked.clear();
    }

    /// Shutting down: nothing more starts.
    pub fn stop_starting(&mut self) {
        self.stopping = true;
    }

    /// The drain is over: the walks still running are stopped and their tasks written back
    /// as queued, with no interruption counted (a clean stop is no crash).
    pub fn stop(&mut self) -> Vec<Effect> {
        self.stopping = true;
        let mut written = Vec::new();
        let mut effects = Vec::new();
        for e in self.entries.values_mut().filter(|e| e.running) {
            e.running = false;
            e.task.status = TaskStatus::Queued;
            e.task.waiting_for = None;
            effects.push(Effect::Abort(e.task.id.clone()));
            written.push(e.task.clone());
        }
        self.running = 0;
        self.probing.clear();
        if !written.is_empty() {
            effects.push(Effect::Write {
                tasks: written,
                ack: true,
            });
        }
        effects
    }
}
