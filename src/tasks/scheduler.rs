//! The task queue's shell: the pure [`Queue`] behind a lock, and everything it cannot do
//! itself — reading the clocks, the store and the fleet, spawning walks, telling waiters.
//! Each decision is made under the lock and its [`Effect`]s carried out there in order
//! (writes go to the store's writer in the order they were decided, so a task's writes
//! never overtake each other); commits are then awaited, and waiters told, after the lock
//! is let go.
//!
//! The store holds the durable record; the queue holds the live state of every unfinished
//! task, so waiting and queued flips cost no disk write. A task's record is written when it
//! is submitted, when it starts sending, when a walk failed, and when it finishes — the
//! last before anyone is told.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::model::{Task, TaskId};
use super::queue::{Effect, Queue};
use super::slots::Slots;
use crate::fleet::Fleet;
use crate::outcome::TaskStatus;
use crate::store::tasks::{FinishedBound, TaskWrite};
use crate::store::{Msg, Store};

mod run;
mod submit;

pub use super::queue::{Counts, SubmitError};
pub use submit::Submitted;

/// Where the scheduler reads the fleet serving now (it changes on reload).
pub type FleetNow = Arc<dyn Fn() -> Arc<Fleet> + Send + Sync>;

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

/// The queue and the walks it started.
#[derive(Default)]
struct State {
    queue: Queue,
    /// Each running walk's handle, to abort it when its task ends another way.
    walks: HashMap<TaskId, AbortHandle>,
}

/// Effects carried out under the lock whose ends are awaited after it.
#[derive(Default)]
#[must_use = "settle it: commits to wait for and waiters to tell"]
struct Carried {
    acks: Vec<oneshot::Receiver<()>>,
    announce: Vec<TaskId>,
}

/// The task queue and its scheduler.
pub struct Scheduler {
    fleet: FleetNow,
    store: Arc<Store>,
    state: Mutex<State>,
    /// The runner's next tick.
    wake: Notify,
    /// A walk ended (a drain waits for the last).
    walk_ended: Notify,
    slots: Arc<Slots>,
    finished: broadcast::Sender<TaskId>,
    /// Where finished tasks with a callback go to be delivered, once
    /// [`crate::tasks::deliver`] runs; a send never waits.
    callbacks: Mutex<Option<mpsc::UnboundedSender<TaskId>>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// The queue of `store`, resumed (see [`Queue::resume`]); what resuming changed is on
    /// disk before it returns.
    pub fn resume(fleet: FleetNow, store: Arc<Store>) -> Result<Scheduler, String> {
        let (unfinished, parents) = store
            .read(|c| {
                let unfinished = crate::store::tasks::unfinished(c)?;
                let parents = crate::store::tasks::finished_parents(c)?;
                Ok((unfinished, parents))
            })
            .map_err(|e| e.to_string())?;
        let (finished, _) = broadcast::channel(1024);
        let s = Scheduler {
            fleet,
            store,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            walk_ended: Notify::new(),
            slots: Arc::new(Slots::default()),
            finished,
            callbacks: Mutex::new(None),
        };
        let ((), carried) = s.decide(|q| {
            let effects = q.resume(unfinished, &parents, Instant::now(), crate::clock::wall());
            ((), effects)
        });
        // Nobody waits yet: the finished are the callbacks' to find in the store.
        s.store.flush(Duration::from_secs(10));
        for id in carried.announce {
            lock(&s.state).queue.announced(&id);
        }
        Ok(s)
    }

    /// From now on, hands every task that finishes with a callback to `deliveries` (tasks
    /// that finished before are the deliveries' to find in the store).
    pub fn deliver_callbacks_to(&self, deliveries: mpsc::UnboundedSender<TaskId>) {
        *lock(&self.callbacks) = Some(deliveries);
    }

    /// The store the queue keeps its tasks in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The fleet serving now.
    pub fn fleet(&self) -> Arc<Fleet> {
        (self.fleet)()
    }

    /// Makes a decision under the lock and carries out its effects there, in order.
    fn decide<T>(&self, f: impl FnOnce(&mut Queue) -> (T, Vec<Effect>)) -> (T, Carried)
    where
        T: Sized,
    {
        let mut st = lock(&self.state);
        let (out, effects) = f(&mut st.queue);
        let carried = self.carry(&mut st, effects);
        (out, carried)
    }

    /// Carries out `effects` in order, under the lock: writes are sent to the store's writer
    /// (a channel send, never a wait), walks aborted.
    fn carry(&self, st: &mut State, effects: Vec<Effect>) -> Carried {
        let mut c = Carried::default();
        for effect in effects {
            match effect {
                Effect::Write { tasks, ack } => {
                    let (tx, rx) = oneshot::channel();
                    let write = TaskWrite {
                        tasks,
                        ack: ack.then_some(tx),
                    };
                    let _ = self.store.sender().send(Msg::TaskWrite(Box::new(write)));
                    if ack {
                        c.acks.push(rx);
                    }
                }
                Effect::Announce(id) => c.announce.push(id),
                Effect::Abort(id) => {
                    if let Some(walk) = st.walks.remove(&id) {
                        walk.abort();
                    }
                }
            }
        }
        if !c.announce.is_empty() {
            // Finished tasks stay bounded on disk, the oldest pruned first. Asked here, under
            // the lock that made them finished and right behind their writes: whoever sees a
            // task finished and then flushes the store finds the bound applied.
            let limits = &self.fleet().registry.tasks;
            let bound = FinishedBound {
                count: limits.max_finished,
                bytes: limits.max_finished_bytes,
            };
            let _ = self.store.sender().send(Msg::TaskBound(bound));
        }
        c
    }

    /// Waits for the commits, then tells the waiters of the tasks that finished: a waiter
    /// that reads a finished task back finds it finished in the store.
    async fn settle(&self, c: Carried) {
        for ack in c.acks {
            let _ = committed(ack).await;
        }
        if c.announce.is_empty() {
            return;
        }
        for id in c.announce {
            let ended = lock(&self.state).queue.announced(&id);
            match ended {
                Some(task) => self.announce(&task),
                None => {
                    let _ = self.finished.send(id);
                }
            }
        }
        self.wake.notify_one();
    }

    /// Tells those waiting on a task that it finished, and hands its callback on.
    fn announce(&self, task: &Task) {
        let _ = self.finished.send(task.id.clone());
        if task.callback.is_some() {
            if let Some(deliveries) = lock(&self.callbacks).as_ref() {
                let _ = deliveries.send(task.id.clone());
            }
        }
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

// === impl Scheduler: what the API reads ===

impl Scheduler {
    /// A task of `owner` (any owner when `None`): live state for an unfinished one, the
    /// store's record for a finished one.
    pub async fn get(&self, id: &TaskId, owner: Option<&str>) -> Result<Option<Task>, SubmitError> {
        if let Some(live) = lock(&self.state).queue.get(id, owner) {
            return Ok(live);
        }
        let (id, owner) = (id.clone(), owner.map(str::to_string));
        self.read(move |c| crate::store::tasks::task(c, &id, owner.as_deref()))
            .await
    }

    /// A task's request body, as submitted (empty once the task finished).
    pub async fn request(&self, id: &TaskId) -> Result<Option<bytes::Bytes>, SubmitError> {
        let id = id.clone();
        self.read(move |c| crate::store::tasks::request(c, &id))
            .await
    }

    /// Tasks newest first, live state laid over the store's records.
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
            return Ok(lock(&self.state).queue.list(s, owner, before, limit));
        }
        let o = owner.map(str::to_string);
        let mut rows = self
            .read(move |c| crate::store::tasks::list(c, o.as_deref(), status, before, limit))
            .await?;
        lock(&self.state).queue.overlay(&mut rows);
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
        let (_, carried) = self.decide(|q| {
            let effects = q
                .cancel(id, owner, crate::clock::wall())
                .unwrap_or_default();
            ((), effects)
        });
        self.settle(carried).await;
        self.get(id, owner).await
    }

    /// Live counts for `/status` and metrics.
    pub fn counts(&self) -> Counts {
        lock(&self.state).queue.counts(crate::clock::wall())
    }

    /// The task of `owner` (any when `None`) waiting longest, with what it waits for.
    pub fn oldest_waiting(&self, owner: Option<&str>) -> Option<Task> {
        lock(&self.state).queue.oldest_waiting(owner)
    }
}
