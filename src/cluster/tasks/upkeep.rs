//! The shared queue's upkeep: a finished task's `doc` written again (its callback's
//! delivery), waiting tasks woken when a breaker changed, finished tasks pruned.

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
}
