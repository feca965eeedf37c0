//! Submits: an idempotent resend answered first, parents decided, the task stored (group
//! commit) and only then queued.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{committed, lock, Scheduler, SubmitError};
use crate::outcome::{TaskCode, TaskStatus};
use crate::request::Parsed;
use crate::store::tasks::{Idem, Inserted, TaskInsert};
use crate::store::Msg;
use crate::tasks::follow;
use crate::tasks::model::{Task, TaskId};
use crate::tasks::queue::Queue;
use crate::tasks::submit::NewTask;

/// What a submit did.
#[derive(Debug)]
pub enum Submitted {
    New(Box<Task>),
    /// The Idempotency-Key was seen with the same body: this is its task.
    Replayed(Box<Task>),
}

impl Scheduler {
    /// Stores a new task, then queues it: a 202 means it is committed.
    pub async fn submit(
        &self,
        owner: &str,
        new: NewTask,
        idem: Option<Idem>,
    ) -> Result<Submitted, SubmitError> {
        // A resend of a keyed submit is its task, however full the queue is.
        if let Some(idem) = &idem {
            if let Some(replayed) = self.replayed(owner, idem).await? {
                return Ok(replayed);
            }
        }
        let (known, doomed) = self.parents(owner, &new.after).await?;
        let limits = self.fleet().registry.tasks.clone();
        lock(&self.state)
            .queue
            .room(owner, limits.max_queued, limits.max_queued_per_key)?;
        // Its request, ready to send when it needs no parent's text.
        let prepared = (new.after.is_empty() || !follow::has_placeholder(&new.request))
            .then(|| Parsed::new(new.endpoint, new.request.clone()).ok())
            .flatten()
            .map(Arc::new);
        let request = new.request.clone();
        let task = Queue::new_task(owner, new, doomed, crate::clock::wall());
        match self.insert(&task, request, idem).await? {
            Inserted::KeyReused => Err(SubmitError::KeyReused),
            Inserted::Existing(id) => self.existing(&id, owner).await,
            Inserted::New => {
                self.queue(task.clone(), &known, prepared).await?;
                Ok(Submitted::New(Box::new(task)))
            }
        }
    }

    /// The task an earlier submit with this key made, when it was the same body.
    async fn replayed(&self, owner: &str, idem: &Idem) -> Result<Option<Submitted>, SubmitError> {
        let (o, key) = (owner.to_string(), idem.key.clone());
        let seen = self
            .read(move |c| crate::store::tasks::by_key(c, &o, &key))
            .await?;
        match seen {
            None => Ok(None),
            Some((_, fingerprint)) if fingerprint != idem.fingerprint => {
                Err(SubmitError::KeyReused)
            }
            Some((id, _)) => self.existing(&id, owner).await.map(Some),
        }
    }

    async fn existing(&self, id: &TaskId, owner: &str) -> Result<Submitted, SubmitError> {
        let task = self
            .get(id, Some(owner))
            .await?
            .ok_or_else(|| SubmitError::Store(format!("{id} vanished")))?;
        Ok(Submitted::Replayed(Box::new(task)))
    }

    /// The parents that are not live in the queue, as the store has them (each must be the
    /// owner's), and the first that ended without success.
    async fn parents(
        &self,
        owner: &str,
        after: &[TaskId],
    ) -> Result<(HashMap<TaskId, TaskStatus>, Option<(TaskCode, String)>), SubmitError> {
        let mut known = HashMap::new();
        let mut doomed = None;
        for (index, p) in after.iter().enumerate() {
            if lock(&self.state).queue.live_parent(owner, p) {
                continue;
            }
            let Some(t) = self.get(p, Some(owner)).await? else {
                return Err(SubmitError::UnknownAfter {
                    index,
                    id: p.clone(),
                });
            };
            if t.status.is_finished() {
                known.insert(p.clone(), t.status);
                if t.status != TaskStatus::Succeeded {
                    doomed.get_or_insert((
                        TaskCode::DependencyFailed,
                        format!("after[{index}] {} {}", t.id, t.status),
                    ));
                }
            }
        }
        Ok((known, doomed))
    }

    /// Commits the insert (with the others that arrive meanwhile: group commit).
    async fn insert(
        &self,
        task: &Task,
        request: bytes::Bytes,
        idem: Option<Idem>,
    ) -> Result<Inserted, SubmitError> {
        let stopped = || SubmitError::Store("the store's writer stopped".into());
        let (ack, done) = oneshot::channel();
        let msg = Msg::TaskInsert(Box::new(TaskInsert {
            task: task.clone(),
            request,
            idem,
            ack,
        }));
        self.store.sender().send(msg).map_err(|_| stopped())?;
        committed(done)
            .await
            .map_err(|_| stopped())?
            .map_err(SubmitError::Store)
    }

    /// A committed task joins the queue; the parents that finished while it was committed
    /// are read back to decide it.
    async fn queue(
        &self,
        task: Task,
        known: &HashMap<TaskId, TaskStatus>,
        prepared: Option<Arc<crate::request::Parsed>>,
    ) -> Result<(), SubmitError> {
        let id = task.id.clone();
        if task.status.is_finished() {
            self.announce(&task);
            return Ok(());
        }
        let (now, wall) = (Instant::now(), crate::clock::wall());
        let (unknown, carried) = self.decide(|q| {
            let (effects, unknown) = q.admit(task, known, prepared, now, wall);
            (unknown, effects)
        });
        self.settle(carried).await;
        for p in unknown {
            let ended = self.get(&p, None).await?.map(|t| t.status);
            let wall = crate::clock::wall();
            let (_, carried) = self.decide(|q| ((), q.parent_ended(&id, &p, ended, wall)));
            self.settle(carried).await;
        }
        self.wake.notify_one();
        Ok(())
    }
}
