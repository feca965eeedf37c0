//! Submits: stored first (group commit), then queued; parents decided before the task can start.

use super::*;

impl Scheduler {
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
            callback: new.callback.map(|url| crate::task::Callback {
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
                                    q.parent_succeeded(&task.id);
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
}
