//! The shared queue's shell (README "Several routers", the shared queue): with
//! `cluster.tasks: shared` the task API reads and writes the pool's queue in Redis
//! ([`crate::cluster::tasks`]) instead of this router's SQLite file, and a worker per router
//! (`worker`) claims due tasks and runs each through the same walk as local tasks.
//!
//! Redis down or slower than `cluster.task_timeout` is said, never hidden: submits are
//! refused (503 `queue_unavailable` with `Retry-After`), never acknowledged without Redis's
//! fsync; `/status` shows the queue's state; the log and the ledger (`(cluster)` rows) say
//! when it went down and came back. Interactive requests never touch the queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;

use super::deliver::{Book, Read, Standing};
use super::model::{Task, TaskId};
use super::queue::{Queue, SubmitError};
use super::scheduler::FleetNow;
use super::slots::Slots;
use super::submit::NewTask;
use crate::cluster::tasks::{
    Cancelled, Fetched, Linked, Page, PoolCounts, QueueError, SharedQueue,
};
use crate::outcome::{Delivery, TaskCode, TaskStatus};
use crate::store::tasks::Idem;
use crate::store::{Msg, Store};

mod worker;

/// How often a `?wait=` looks at a task again.
const WAIT_LOOK: Duration = Duration::from_millis(250);

/// What a submit did.
#[derive(Debug)]
pub enum Pooled {
    New(Box<Task>),
    /// The Idempotency-Key named this task already (same body).
    Replayed(Box<Fetched>),
}

/// Why a shared-queue operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("this Idempotency-Key was already used with a different body")]
    KeyReused,
    #[error("{0}")]
    Vanished(String),
    /// A follow-up's `after` names no task of its owner in the pool.
    #[error(transparent)]
    After(#[from] SubmitError),
}

/// What `/status` says of the shared queue.
#[derive(Clone, Debug, Default)]
pub struct QueueState {
    /// `up` or `down`.
    pub state: &'static str,
    /// Tasks this router is running now.
    pub running_here: u32,
    /// Why it is down, while it is.
    pub last_error: Option<String>,
    /// The pool's queue as last counted (every few seconds).
    pub pool: PoolCounts,
}

/// This router's end of the pool's queue.
pub struct PoolQueue {
    queue: SharedQueue,
    fleet: FleetNow,
    /// Task slots per machine, this router's own (walks share them).
    slots: Arc<Slots>,
    /// Walks running on this router (`tasks.max_running`).
    running: AtomicU32,
    /// Each running walk: its task as claimed, its lease token, and its handle, so a drain
    /// that runs out of time gives the task back (a clean stop is no interruption).
    walks: Mutex<HashMap<TaskId, (Task, String, AbortHandle)>>,
    /// Shutting down: nothing more is claimed.
    stopping: AtomicBool,
    /// The last walk found every machine it accepts busy: nothing more is claimed until a
    /// walk ends or the next poll.
    saturated: AtomicBool,
    /// The pool's queue as the worker last counted it.
    counted: Mutex<PoolCounts>,
    /// A walk ended or a task came: the worker looks again.
    wake: Notify,
    /// The last operation reached Redis.
    up: AtomicBool,
    last_error: Mutex<Option<String>>,
    /// For the ledger's `(cluster)` rows.
    store: Option<Arc<Store>>,
    /// Where callback deliveries this router holds in the pool (tasks it ended, and the
    /// pool's due retries) go to be attempted, once [`PoolQueue::run`]
    /// runs; a send never waits.
    callbacks: Mutex<Option<mpsc::UnboundedSender<TaskId>>>,
}

impl std::fmt::Debug for PoolQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl PoolQueue {
    pub fn new(queue: SharedQueue, fleet: FleetNow, store: Option<Arc<Store>>) -> PoolQueue {
        let up = queue.connected();
        PoolQueue {
            queue,
            fleet,
            slots: Arc::new(Slots::default()),
            running: AtomicU32::new(0),
            walks: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            saturated: AtomicBool::new(false),
            counted: Mutex::new(PoolCounts::default()),
            wake: Notify::new(),
            up: AtomicBool::new(up),
            last_error: Mutex::new((!up).then(|| "Redis did not answer at start".to_string())),
            store,
            callbacks: Mutex::new(None),
        }
    }

    /// Runs this router's worker, and the callback deliveries it holds (`finished`),
    /// until the process ends (or the task is aborted).
    pub async fn run(self: Arc<Self>) {
        let up = self.up.load(Ordering::Acquire);
        metrics::gauge!("labrouter_shared_queue_up").set(if up { 1.0 } else { 0.0 });
        let (tx, handed) = mpsc::unbounded_channel();
        *lock(&self.callbacks) = Some(tx);
        let deliveries = super::deliver::deliver_all(Arc::clone(&self), handed, Vec::new());
        tokio::join!(worker::run(self), deliveries);
    }

    /// Shutting down: no task is claimed from now on.
    pub fn stop_starting(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Lets the walks under way finish until `until`; then stops the rest and gives their
    /// tasks back `queued`, due at once, with no interruption counted: another router runs
    /// them now, or this one after its restart.
    pub async fn drain(&self, until: tokio::time::Instant) {
        self.stop_starting();
        while self.running.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left: Vec<_> = lock(&self.walks).drain().map(|(_, w)| w).collect();
        for (task, token, walk) in left {
            walk.abort();
            let given = self.queue.release(&task, &token, Duration::ZERO).await;
            if !matches!(given, Ok(true)) {
                tracing::warn!(task = %task.id, "shared task queue: a running task could not be given back at shutdown; its lease will lapse");
            }
        }
    }

    /// The queue's state for `/status`.
    pub fn state(&self) -> QueueState {
        let up = self.up.load(Ordering::Acquire);
        QueueState {
            state: if up { "up" } else { "down" },
            running_here: self.running.load(Ordering::Acquire),
            pool: *lock(&self.counted),
            last_error: match up {
                true => None,
                false => lock(&self.last_error).clone(),
            },
        }
    }

    /// Whether the queue answered: a change of state is logged and ledgered once.
    fn saw<T>(&self, r: Result<T, QueueError>) -> Result<T, QueueError> {
        let now_up = !matches!(r, Err(QueueError::Unavailable(_)));
        if let Err(QueueError::Unavailable(why)) = &r {
            *lock(&self.last_error) = Some(why.clone());
        }
        if self.up.swap(now_up, Ordering::AcqRel) != now_up {
            metrics::gauge!("labrouter_shared_queue_up").set(if now_up { 1.0 } else { 0.0 });
            let (from, to) = if now_up {
                ("down", "up")
            } else {
                ("up", "down")
            };
            let why = match &r {
                Err(e) => e.to_string(),
                Ok(_) => "the shared task queue answers again".to_string(),
            };
            match now_up {
                true => tracing::info!("shared task queue: Redis answers again"),
                false => {
                    tracing::warn!(error = %why, "shared task queue: Redis is unavailable; submits are refused with 503 until it returns")
                }
            }
            if let Some(store) = &self.store {
                let _ = store.sender().send(Msg::Cluster {
                    at: SystemTime::now(),
                    from: format!("task queue {from}"),
                    to: format!("task queue {to}"),
                    reason: crate::text::bounded(&why),
                });
            }
        }
        r
    }

    /// This router wrote `task`'s end (or took it off the pool's `ended` list): its
    /// callback's first attempt is this router's, held in the pool so that a router alive
    /// resumes the delivery if this one dies ([`SharedQueue::hold_callback`]).
    async fn finished(&self, task: &Task) {
        if task.callback.is_none() {
            return;
        }
        match self.saw(self.queue.hold_callback(&task.id).await) {
            Ok(true) => self.hand_over(task.id.clone()),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(task = %task.id, error = %e, "shared task queue: a finished task's callback could not be held in the pool; it is not sent")
            }
        }
    }

    /// A callback delivery held for this router goes to its deliveries (a send never waits).
    fn hand_over(&self, id: TaskId) {
        if let Some(deliveries) = lock(&self.callbacks).as_ref() {
            let _ = deliveries.send(id);
        }
    }

    /// Stores a new task in the pool's queue: [`Pooled::New`] only once Redis acknowledged
    /// the write. A follow-up whose parent is not its owner's in the pool is refused; one
    /// whose parent already ended without success is stored cancelled, as the local queue
    /// does.
    pub async fn submit(
        &self,
        owner: &str,
        new: NewTask,
        idem: Option<Idem>,
    ) -> Result<Pooled, PoolError> {
        let request = new.request.clone();
        let wall = crate::clock::wall();
        let mut task = Queue::new_task(owner, new, None, wall);
        let limits = &(self.fleet)().registry.tasks;
        let max = (limits.max_queued, limits.max_queued_per_key);
        // A doomed follow-up is stored once more, ended: a parent's end is final.
        for _ in 0..2 {
            let done = self.saw(
                self.queue
                    .submit_linked(&task, &request, idem.as_ref(), max)
                    .await,
            )?;
            let doomed = match done {
                Linked::New(status) => {
                    task.status = status;
                    match status.is_finished() {
                        true => self.finished(&task).await,
                        false => self.wake.notify_one(),
                    }
                    return Ok(Pooled::New(Box::new(task)));
                }
                Linked::KeyReused => return Err(PoolError::KeyReused),
                Linked::Existing(id) => {
                    return match self.get(&id, Some(owner)).await? {
                        Some(f) => Ok(Pooled::Replayed(Box::new(f))),
                        None => Err(PoolError::Vanished(format!("{id} vanished"))),
                    }
                }
                Linked::UnknownAfter(index) => {
                    let id = task.after[index].clone();
                    return Err(SubmitError::UnknownAfter { index, id }.into());
                }
                Linked::Doomed(index, status) => (index, status),
            };
            let why = format!("after[{}] {} {}", doomed.0, task.after[doomed.0], doomed.1);
            Queue::doom(&mut task, TaskCode::DependencyFailed, &why, wall);
        }
        Err(PoolError::Vanished(format!(
            "{} was refused twice for its parents",
            task.id
        )))
    }

    /// Task `id` of `owner` (anyone's when `None`), whole.
    pub async fn get(
        &self,
        id: &TaskId,
        owner: Option<&str>,
    ) -> Result<Option<Fetched>, PoolError> {
        let got = self.saw(self.queue.get(id).await)?;
        Ok(got.filter(|f| owner.is_none_or(|o| f.task.owner == o)))
    }

    /// Task `id` once it finished, or as it is when `wait` passed.
    pub async fn wait(
        &self,
        id: &TaskId,
        owner: Option<&str>,
        wait: Duration,
    ) -> Result<Option<Fetched>, PoolError> {
        let until = crate::clock::from_now(wait);
        loop {
            let got = self.get(id, owner).await?;
            let done = got.as_ref().is_none_or(|f| f.task.status.is_finished());
            if done || tokio::time::Instant::now() + WAIT_LOOK > until {
                return Ok(got);
            }
            tokio::time::sleep(WAIT_LOOK).await;
        }
    }

    /// A page of `owner`'s tasks, newest first.
    pub async fn list(
        &self,
        owner: &str,
        status: Option<TaskStatus>,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Page, PoolError> {
        Ok(self.saw(self.queue.list(before, limit, status, Some(owner)).await)?)
    }

    /// Cancels task `id` of `owner` unless it ended (a running one stops at its router's
    /// next renew).
    pub async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, PoolError> {
        let done = self.saw(self.queue.cancel(id, Some(owner)).await)?;
        if let Cancelled::From(_) = done {
            // This router ended it: its callback's first attempt is made from here.
            if let Ok(Some(f)) = self.get(id, None).await {
                self.finished(&f.task).await;
            }
        }
        Ok(done)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pool's queue as the callbacks' [`Book`]: a finished task read from Redis, its
/// delivery written back into its `doc`.
impl Book for PoolQueue {
    fn fleet(&self) -> Arc<crate::fleet::Fleet> {
        (self.fleet)()
    }

    async fn read(&self, id: &TaskId) -> Result<Read, String> {
        match self.saw(self.queue.get(id).await) {
            Ok(Some(f)) => Ok((Some(f.task), f.request)),
            Ok(None) => Ok((None, None)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The delivery's progress goes into the task's `doc` (shown on every router) and its
    /// next attempt into the pool's `callbacks`, for whichever router takes it when due: never
    /// this delivery's. A lost write (Redis away) leaves the delivery held until its lease
    /// lapses; a router then attempts it again.
    async fn write(&self, id: &TaskId, at: Standing) -> bool {
        let Ok(Some(mut f)) = self.saw(self.queue.get(id).await) else {
            return false;
        };
        if let Some(c) = f.task.callback.as_mut() {
            c.state = at.state;
            c.attempts = at.attempts;
            c.last_error = at.last_error;
        }
        let now = crate::store::ms(crate::clock::wall());
        let next = match at.state {
            Delivery::Pending => at
                .next_ms
                .map(|n| Duration::from_millis(u64::try_from(n - now).unwrap_or(0))),
            Delivery::Delivered | Delivery::Failed => None,
        };
        if let Err(e) = self.saw(self.queue.note_callback(id, Some(&f.task), next).await) {
            tracing::debug!(task = %id, error = %e, "shared task queue: a callback's progress was not written");
        }
        false
    }

    /// Nothing to deliver (delivered, failed, gone): its entry in the pool goes.
    async fn forget(&self, id: &TaskId) {
        let _ = self.saw(self.queue.note_callback(id, None, None).await);
    }
}
