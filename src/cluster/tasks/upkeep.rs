//! The shared queue's upkeep: a finished task's `doc` written again (its callback's
//! delivery), waiting tasks woken when a breaker changed, finished tasks pruned, the queue
//! counted.

use std::time::Duration;

use super::{millis, record, QueueError, SharedQueue, SCAN_MAX};
use crate::task::Task;

impl SharedQueue {
    /// Writes a finished task's `doc` again (its callback's delivery, as
    /// [`crate::tasks::deliver`] records it); false when the task is gone or unfinished.
    pub async fn note(&self, task: &Task) -> Result<bool, QueueError> {
        let mut call = self.scripts.note.prepare_invoke();
        call.key(self.task_key(&task.id)).arg(record::doc(task));
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }

    /// A breaker changed: up to `max` of the waiting tasks due soonest may run at once;
    /// how many were woken.
    pub async fn wake_waiting(&self, max: u32) -> Result<u64, QueueError> {
        let mut call = self.scripts.wake.prepare_invoke();
        call.key(self.key("later"))
            .key(self.key("ready"))
            .arg(self.key("t:"))
            .arg(max.max(1));
        self.bounded(call.invoke_async(&mut self.conn().await?))
            .await
    }

    /// Drops tasks that finished more than `keep` ago (`tasks.keep`), and their
    /// idempotency keys, looking at no more than [`SCAN_MAX`] tasks; how many went.
    pub async fn prune(&self, keep: Duration) -> Result<u64, QueueError> {
        let mut call = self.scripts.prune.prepare_invoke();
        call.key(self.key("all"))
            .arg(self.key("t:"))
            .arg(millis(keep))
            .arg(SCAN_MAX);
        self.bounded(call.invoke_async(&mut self.conn().await?))
            .await
    }

    /// The pool's queue in numbers, for `/status`.
    pub async fn counts(&self) -> Result<PoolCounts, QueueError> {
        let mut call = self.scripts.counts.prepare_invoke();
        call.key(self.key("open"))
            .key(self.key("leases"))
            .key(self.key("ready"))
            .key(self.key("later"));
        let n: Vec<u64> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        let at = |i: usize| n.get(i).copied().unwrap_or(0);
        Ok(PoolCounts {
            unfinished: at(0),
            running: at(1),
            due: at(2),
            later: at(3),
        })
    }
}

/// The pool's queue in numbers: unfinished tasks (any router's), running (under a lease),
/// due now, and due later (a backoff, or waiting for a breaker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounts {
    pub unfinished: u64,
    pub running: u64,
    pub due: u64,
    pub later: u64,
}
