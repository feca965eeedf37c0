//! What the API and the views read of the queue: a task, a page of tasks, the counts, the
//! task waiting longest.

use std::time::SystemTime;

use super::{Counts, Queue};
use crate::outcome::TaskStatus;
use crate::store::ms;
use crate::tasks::model::{Task, TaskId};

impl Queue {
    /// A task of `owner` (any when `None`), unfinished or ending.
    pub fn get(&self, id: &TaskId, owner: Option<&str>) -> Option<Option<Task>> {
        let t = self
            .entries
            .get(id)
            .map(|e| &e.task)
            .or_else(|| self.ending.get(id))?;
        Some(owner.is_none_or(|o| o == t.owner).then(|| t.clone()))
    }

    /// Unfinished tasks in `status`, newest first.
    pub fn list(
        &self,
        status: TaskStatus,
        owner: Option<&str>,
        before: Option<i64>,
        limit: u32,
    ) -> Vec<Task> {
        let mut out: Vec<Task> = self
            .entries
            .values()
            .filter(|e| e.task.status == status)
            .filter(|e| owner.is_none_or(|o| o == e.task.owner))
            .filter(|e| before.is_none_or(|b| e.task.seq < b))
            .map(|e| e.task.clone())
            .collect();
        out.sort_by_key(|t| std::cmp::Reverse(t.seq));
        out.truncate(limit as usize);
        out
    }

    /// Stored rows with the live state of those still unfinished laid over them.
    pub fn overlay(&self, rows: &mut [Task]) {
        for t in rows {
            if let Some(e) = self.entries.get(&t.id) {
                *t = e.task.clone();
            }
        }
    }

    /// Live counts for `/status` and metrics, ages from `wall`.
    pub fn counts(&self, wall: SystemTime) -> Counts {
        let mut c = Counts::default();
        let now_ms = ms(wall);
        for e in self.entries.values() {
            match e.task.status {
                TaskStatus::Blocked => c.blocked += 1,
                TaskStatus::Queued => c.queued += 1,
                TaskStatus::Waiting => {
                    c.waiting += 1;
                    let age =
                        u64::try_from(now_ms.saturating_sub(e.task.created_ms)).unwrap_or(0) / 1000;
                    c.oldest_waiting_s = Some(c.oldest_waiting_s.map_or(age, |o| o.max(age)));
                }
                TaskStatus::Running => c.running += 1,
                _ => {}
            }
        }
        c
    }

    /// The task of `owner` (any when `None`) waiting longest, by creation.
    pub fn oldest_waiting(&self, owner: Option<&str>) -> Option<Task> {
        self.entries
            .values()
            .filter(|e| e.task.status == TaskStatus::Waiting)
            .filter(|e| owner.is_none_or(|o| o == e.task.owner))
            .min_by_key(|e| (e.task.created_ms, e.arrival))
            .map(|e| e.task.clone())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Walks under way.
    pub fn running(&self) -> u32 {
        self.running
    }
}
