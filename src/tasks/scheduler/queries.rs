//! Reading the queue and the store for the API: show, list, wait, cancel, counts.

use super::*;

impl Scheduler {
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
}
