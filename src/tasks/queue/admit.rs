//! Submits and restarts: room in the queue, a new task and its parents linked, a follow-up
//! decided by how its parents ended, the queue of a store resumed after a restart.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::{error, finish, push_records, Effect, Queue, SubmitError};
use crate::outcome::{AttemptOutcome, Delivery, TaskCode, TaskStatus};
use crate::request::Parsed;
use crate::store::ms;
use crate::tasks::model::{AttemptRecord, Task, TaskError, TaskId};
use crate::tasks::submit::NewTask;

impl Queue {
    /// Whether `id` is an unfinished task of `owner` in the queue (a parent that blocks).
    pub fn live_parent(&self, owner: &str, id: &TaskId) -> bool {
        self.entries.get(id).is_some_and(|e| e.task.owner == owner)
    }

    /// Whether `owner` may queue one more task.
    pub fn room(&self, owner: &str, max: u32, per_key: Option<u32>) -> Result<(), SubmitError> {
        if self.entries.len() >= max as usize {
            return Err(SubmitError::QueueFull { max });
        }
        match per_key {
            Some(max) if self.owners.get(owner).copied().unwrap_or(0) >= max => {
                Err(SubmitError::KeyFull { max })
            }
            _ => Ok(()),
        }
    }

    /// A new task as it is stored: blocked when it has parents, cancelled at once when one
    /// of them already ended without success (`doomed`: its code and why).
    pub fn new_task(
        owner: &str,
        new: NewTask,
        doomed: Option<(TaskCode, String)>,
        wall: SystemTime,
    ) -> Task {
        let mut task = Task {
            seq: 0,
            id: TaskId::new(),
            owner: owner.to_string(),
            status: if new.after.is_empty() {
                TaskStatus::Queued
            } else {
                TaskStatus::Blocked
            },
            endpoint: new.endpoint,
            route: new.route,
            accept: new.accept,
            priority: new.priority,
            after: new.after,
            metadata: new.metadata,
            created_ms: ms(wall),
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
            callback: new.callback.map(|url| crate::task::Callback {
                url,
                state: Delivery::Pending,
                attempts: 0,
                last_error: None,
            }),
        };
        if let Some((code, why)) = doomed {
            Queue::doom(&mut task, code, &why, wall);
        }
        task
    }

    /// A new task cancelled at once: a parent it names (`why`) already ended without
    /// success.
    pub fn doom(task: &mut Task, code: TaskCode, why: &str, wall: SystemTime) {
        let why = format!("a task it follows did not succeed: {why}");
        finish(task, TaskStatus::Cancelled, Some(error(code, &why)), wall);
    }

    /// A stored task joins the queue. Each parent is live (it blocks the task), finished
    /// as `known` (or `ending`) says, or unknown: the store must say how it ended
    /// ([`Queue::parent_ended`]); the ids of those are returned. `prepared` is its request
    /// when it needs no parent's text.
    pub fn admit(
        &mut self,
        task: Task,
        known: &HashMap<TaskId, TaskStatus>,
        prepared: Option<Arc<Parsed>>,
        now: Instant,
        wall: SystemTime,
    ) -> (Vec<Effect>, Vec<TaskId>) {
        let (id, after) = (task.id.clone(), task.after.clone());
        let mut pending = 0;
        let mut unknown = Vec::new();
        let mut failed: Option<(TaskId, TaskStatus)> = None;
        for p in after {
            let status = self
                .ending
                .get(&p)
                .map(|t| t.status)
                .or_else(|| known.get(&p).copied());
            if self.entries.contains_key(&p) {
                self.children.entry(p).or_default().push(id.clone());
                pending += 1;
            } else if let Some(status) = status {
                if status != TaskStatus::Succeeded {
                    failed.get_or_insert((p, status));
                }
            } else {
                unknown.push(p);
                pending += 1;
            }
        }
        self.admit_entry(task, pending, now, wall);
        self.hold_for(&id, prepared);
        let effects = match failed {
            Some((p, status)) => self.end(
                &id,
                TaskStatus::Cancelled,
                dependency(&p, Some(status)),
                wall,
            ),
            None => Vec::new(),
        };
        (effects, unknown)
    }

    /// The store says how `parent` of `child` ended (`None`: it has no such task).
    pub fn parent_ended(
        &mut self,
        child: &TaskId,
        parent: &TaskId,
        status: Option<TaskStatus>,
        wall: SystemTime,
    ) -> Vec<Effect> {
        if status == Some(TaskStatus::Succeeded) {
            self.parent_succeeded(child);
            return Vec::new();
        }
        self.end(
            child,
            TaskStatus::Cancelled,
            dependency(parent, status),
            wall,
        )
    }

    /// The queue of a store after a restart: blocked, queued and waiting tasks go on; a task
    /// that was running is queued again with an `interrupted` attempt, or failed if that is
    /// its second interruption. A task whose parent ended without success (`parents`: the
    /// finished parents' statuses, as the store has them) is cancelled, down its chain.
    pub fn resume(
        &mut self,
        tasks: Vec<Task>,
        parents: &HashMap<TaskId, TaskStatus>,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<Effect> {
        let (mut written, mut failed, mut resumed) = (Vec::new(), Vec::new(), Vec::new());
        for mut t in tasks {
            if t.status == TaskStatus::Running {
                match interrupted(&mut t, wall) {
                    true => written.push(t.clone()),
                    false => {
                        failed.push(t);
                        continue;
                    }
                }
            }
            resumed.push(t);
        }
        let mut ended: HashMap<TaskId, TaskStatus> = parents.clone();
        ended.extend(failed.iter().map(|t| (t.id.clone(), t.status)));
        let doomed = self.link_resumed(resumed, &ended, now, wall);
        written.extend(failed.iter().cloned());
        let mut effects = Vec::new();
        if !written.is_empty() {
            effects.push(Effect::Write {
                tasks: written,
                ack: true,
            });
        }
        for t in failed {
            effects.push(Effect::Announce(t.id.clone()));
            self.ending.insert(t.id.clone(), t);
        }
        for (child, p, status) in doomed {
            let err = dependency(&p, status);
            effects.extend(self.end(&child, TaskStatus::Cancelled, err, wall));
        }
        effects
    }

    /// Resumed tasks join the queue, each blocked on its resumed parents; those with a
    /// parent that `ended` without success (or is gone) are returned, with that parent.
    fn link_resumed(
        &mut self,
        resumed: Vec<Task>,
        ended: &HashMap<TaskId, TaskStatus>,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(TaskId, TaskId, Option<TaskStatus>)> {
        let live: HashSet<TaskId> = resumed.iter().map(|t| t.id.clone()).collect();
        let mut doomed = Vec::new();
        for t in resumed {
            let mut pending = 0;
            let mut bad: Option<(TaskId, Option<TaskStatus>)> = None;
            for p in &t.after {
                if live.contains(p) {
                    pending += 1;
                    self.children
                        .entry(p.clone())
                        .or_default()
                        .push(t.id.clone());
                } else if ended.get(p) != Some(&TaskStatus::Succeeded) {
                    bad.get_or_insert((p.clone(), ended.get(p).copied()));
                }
            }
            if let Some((p, status)) = bad {
                doomed.push((t.id.clone(), p, status));
            }
            self.admit_entry(t, pending, now, wall);
        }
        doomed
    }
}

/// A task that was running when the router stopped uncleanly: its attempt is recorded
/// `interrupted`; queued again (`true`), or failed at its second interruption (`false`).
fn interrupted(t: &mut Task, wall: SystemTime) -> bool {
    t.interrupted += 1;
    let record = AttemptRecord {
        at: crate::clock::rfc3339(wall),
        target: String::new(),
        outcome: AttemptOutcome::Interrupted,
        reason: None,
        detail: Some(crate::task::INTERRUPTED.into()),
        charged: false,
    };
    push_records(t, vec![record]);
    if t.interrupted >= 2 {
        let why =
            "the router stopped twice while this task was running; it is not run a third time";
        finish(
            t,
            TaskStatus::Failed,
            Some(error(TaskCode::Interrupted, why)),
            wall,
        );
        return false;
    }
    t.status = TaskStatus::Queued;
    true
}

/// The error of a follow-up whose parent `p` ended `status` (`None`: it is gone).
fn dependency(p: &TaskId, status: Option<TaskStatus>) -> TaskError {
    let ended = status.map_or("and is gone".to_string(), |s| s.to_string());
    error(
        TaskCode::DependencyFailed,
        &format!("a task it follows, {p}, ended {ended}"),
    )
}
