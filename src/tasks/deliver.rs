//! Task callbacks delivered (docs/api.md "Tasks", "Callbacks"): when a task with a callback
//! finishes, in whatever status, its whole object is POSTed to the URL the Standard Webhooks way
//! until a receiver answers 2xx, with backoff for up to 24 h. Every attempt is recorded on the task
//! (`callback.state`, `attempts`, `last_error`, and when the next one is due), so a delivery
//! survives a restart.
//!
//! The scheduler hands finished task ids over a channel and never waits on a receiver. Each
//! delivery is its own tokio task (a delivery waiting for its next attempt costs a timer).
//! Attempts on the wire are bounded per receiver, per owner and in all (`slots`), so a
//! slow or dead receiver delays only deliveries to itself, and one API key's callbacks
//! cannot hold up another's. Before each attempt the URL is checked against
//! `tasks.callback_allow` as the registry serving now has it. [`crate::webhook`] signs and
//! sends one attempt; this module decides when, and what the task shows of it.
//!
//! - `due`: a finished task as its next attempt, and the delivery's progress.
//! - `slots`: room on the wire per receiver, per owner and in all.

use std::collections::{HashMap, HashSet};
use std::env::VarError;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::model::{Task, TaskId};
use super::Scheduler;
use crate::outcome::Delivery;
use crate::store::tasks::{self, CallbackWrite};
use crate::store::{from_ms, ms, Msg};
use crate::webhook::{self, Secret};

mod due;
mod slots;

use due::{due, Due, Progress};
pub use slots::{IN_FLIGHT, PER_OWNER, PER_RECEIVER};

/// How long a delivery waits for the task's finished state to reach the disk before it
/// reads it (the scheduler sends that state to the writer before it hands the id over).
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// When a delivery tries again after the store could not be read (no attempt counted).
const UNREADABLE_AGAIN: Duration = Duration::from_secs(60);

/// Delivers callbacks until aborted (it stops with [`crate::run()`]): first those the store
/// says are pending (finished before this start; each at its recorded next attempt), then
/// every task the scheduler hands over as it finishes. Its deliveries stop with it; the
/// store keeps where each stood.
pub async fn run(scheduler: Arc<Scheduler>) {
    // Handed over from now on; whatever finished before is in the store, read below.
    let (tx, handed) = mpsc::unbounded_channel();
    scheduler.deliver_callbacks_to(tx);
    let pending = pending(&scheduler).await;
    deliver_all(scheduler, handed, pending).await;
}

/// Where deliveries read a finished task and write how its callback stands: the local
/// queue's store, or the pool's queue in Redis (`crate::tasks::pooled`).
pub trait Book: Send + Sync + 'static {
    /// The fleet serving now: its `tasks.callback_allow` and `callback_secret_env`.
    fn fleet(&self) -> Arc<crate::fleet::Fleet>;
    /// Task `id` and its request as they are now (`None`: gone); an error when it cannot be
    /// read now (tried again later).
    fn read(&self, id: &TaskId) -> impl Future<Output = Result<Read, String>> + Send;
    /// Where `id`'s callback stands, and when its next attempt is due (unix ms); whether
    /// the next attempt is this delivery's (false: the book keeps it for whichever router
    /// takes it when due, as the pool's queue does).
    fn write(&self, id: &TaskId, at: Standing) -> impl Future<Output = bool> + Send;
    /// `id` has nothing (more) to deliver: the book lets go of it.
    fn forget(&self, _id: &TaskId) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// A task and its request, as a [`Book`] read them.
pub type Read = (Option<Task>, Option<bytes::Bytes>);

/// Where a callback stands after an attempt.
#[derive(Clone, Debug)]
pub struct Standing {
    pub state: Delivery,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub next_ms: Option<i64>,
}

/// Delivers the callbacks of `pending` (each at its recorded next attempt, unix ms), then of
/// every task handed over as it finishes, until aborted; its deliveries stop with it.
pub async fn deliver_all<B: Book>(
    book: Arc<B>,
    mut handed: mpsc::UnboundedReceiver<TaskId>,
    pending: Vec<(TaskId, Option<i64>)>,
) {
    let client = match webhook::client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "task callbacks are not delivered; they stay pending");
            return;
        }
    };
    let worker = Arc::new(Worker {
        book,
        client,
        slots: slots::Slots::new(slots::Limits::default()),
        unsigned_warned: AtomicBool::new(false),
    });
    let mut deliveries = Running::default();
    let now_ms = ms(crate::clock::wall());
    for (id, next_ms) in pending {
        let wait = next_ms.map_or(0, |n| n.saturating_sub(now_ms).max(0));
        deliveries.start(&worker, id, Duration::from_millis(wait as u64));
    }
    loop {
        tokio::select! {
            got = handed.recv() => match got {
                Some(id) => deliveries.start(&worker, id, Duration::ZERO),
                // Another run took over the hand-over: finish what is here.
                None => {
                    while deliveries.set.join_next().await.is_some() {}
                    return;
                }
            },
            Some(done) = deliveries.set.join_next_with_id() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                deliveries.ended(id);
            }
        }
    }
}

/// Finished tasks whose callback is pending in the store, with when each is due next.
async fn pending(scheduler: &Arc<Scheduler>) -> Vec<(TaskId, Option<i64>)> {
    let svc = Arc::clone(scheduler);
    let read = tokio::task::spawn_blocking(move || {
        let store = svc.store();
        // A task the resume failed (interrupted twice) is on its way to the disk.
        store.flush(FLUSH_LIMIT);
        store.read(tasks::pending_callbacks)
    })
    .await;
    match read {
        Ok(Ok(pending)) => {
            if !pending.is_empty() {
                tracing::info!(callbacks = pending.len(), "task callbacks still to deliver");
            }
            pending
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot read the pending task callbacks; they stay pending");
            Vec::new()
        }
        Err(_) => Vec::new(),
    }
}

/// The local queue's store as a [`Book`].
impl Book for Scheduler {
    fn fleet(&self) -> Arc<crate::fleet::Fleet> {
        Scheduler::fleet(self)
    }

    async fn read(&self, id: &TaskId) -> Result<Read, String> {
        let store = Arc::clone(self.store());
        let id = id.clone();
        tokio::task::spawn_blocking(move || {
            // The finished state (and this delivery's last record) went to the writer
            // before: on disk once this returns.
            store.flush(FLUSH_LIMIT);
            store.read(|c| Ok((tasks::task(c, &id, None)?, tasks::request(c, &id)?)))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
    }

    /// No wait: a lost write means one more attempt after a restart, and delivery is
    /// at-least-once anyway.
    async fn write(&self, id: &TaskId, at: Standing) -> bool {
        let _ = self
            .store()
            .sender()
            .send(Msg::TaskCallback(Box::new(CallbackWrite {
                id: id.clone(),
                state: at.state,
                attempts: at.attempts,
                last_error: at.last_error,
                next_ms: at.next_ms,
            })));
        true
    }
}

/// The deliveries under way: one per task (a task handed over twice is delivered once).
/// Dropping it aborts them all.
#[derive(Default)]
struct Running {
    set: JoinSet<()>,
    by_tokio_id: HashMap<tokio::task::Id, TaskId>,
    tasks: HashSet<TaskId>,
}

impl Running {
    fn start<B: Book>(&mut self, worker: &Arc<Worker<B>>, id: TaskId, wait: Duration) {
        if !self.tasks.insert(id.clone()) {
            return;
        }
        let handle = self.set.spawn(Arc::clone(worker).deliver(id.clone(), wait));
        self.by_tokio_id.insert(handle.id(), id);
    }

    fn ended(&mut self, id: tokio::task::Id) {
        if let Some(task) = self.by_tokio_id.remove(&id) {
            self.tasks.remove(&task);
        }
    }
}

struct Worker<B> {
    /// Where the tasks are (and their request bodies), and the registry serving now
    /// (which environment variable holds the secret).
    book: Arc<B>,
    /// [`webhook::client`]: no redirects, no proxy, 10 s per attempt.
    client: reqwest::Client,
    /// Room on the wire per receiver, per owner and in all; a slot is held only while an
    /// attempt is on the wire.
    slots: Arc<slots::Slots>,
    /// Said once per run: `callback_secret_env` names a variable that is not set.
    unsigned_warned: AtomicBool,
}

impl<B: Book> Worker<B> {
    /// Delivers one task's callback: after `wait`, then after each failed attempt as
    /// [`webhook::next_retry`] says, until a 2xx or 24 h. Each attempt reads the task anew
    /// (nothing is held in memory between attempts; the store says where it stands).
    async fn deliver(self: Arc<Self>, id: TaskId, mut wait: Duration) {
        loop {
            tokio::time::sleep(wait).await;
            let mut due = match self.load(&id).await {
                Loaded::Due(due) => due,
                Loaded::Gone => return self.book.forget(&id).await,
                Loaded::Unreadable => {
                    wait = UNREADABLE_AGAIN;
                    continue;
                }
            };
            let next = match &due.url {
                Ok(url) => {
                    let key = slots::Key::new(url, &due.owner);
                    let Some(_slot) = self.slots.take(key).await else {
                        return;
                    };
                    match self.allowed(url) {
                        Ok(()) => {
                            let outcome = self.attempt(url, &due).await;
                            // The first attempt is made as the task finishes.
                            let since_first = crate::clock::wall()
                                .duration_since(from_ms(due.finished_ms))
                                .unwrap_or_default();
                            due.progress.attempted(outcome, since_first)
                        }
                        Err(why) => due.progress.refused(why),
                    }
                }
                Err(why) => due.progress.refused(why.clone()),
            };
            let goes_on = self.record(&id, &due.progress, next).await;
            match next {
                Some(next) if goes_on => wait = next,
                _ => return,
            }
        }
    }

    /// Whether `url` may still receive callbacks: the registry serving now decides (a reload
    /// that drops its `tasks.callback_allow` rule stops the delivery). The words never hold
    /// the URL (it may carry a token).
    fn allowed(&self, url: &reqwest::Url) -> Result<(), String> {
        let fleet = self.book.fleet();
        if fleet
            .registry
            .tasks
            .callback_allow
            .iter()
            .any(|r| r.allows(url))
        {
            Ok(())
        } else {
            Err(
                "the callback URL is no longer allowed by tasks.callback_allow (the registry \
                 changed since the task was submitted); not retried"
                    .to_owned(),
            )
        }
    }

    /// One attempt, signed (when the secret is set) with its own timestamp.
    async fn attempt(&self, url: &reqwest::Url, due: &Due) -> Result<(), String> {
        let secret = self.secret()?;
        let now_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        webhook::deliver(
            &self.client,
            url,
            &due.webhook_id,
            &due.body,
            secret.as_ref(),
            now_unix,
        )
        .await
    }

    /// The signing secret, read from `callback_secret_env` for each attempt. An unset
    /// variable sends unsigned (said once); a value that cannot sign fails the attempt. The
    /// words never hold the value.
    fn secret(&self) -> Result<Option<Secret>, String> {
        let Some(name) = self.book.fleet().registry.tasks.callback_secret_env.clone() else {
            return Ok(None);
        };
        match std::env::var(&name) {
            Ok(value) => Secret::from_env_value(&value)
                .map(Some)
                .map_err(|e| format!("{name}: {e}")),
            Err(VarError::NotPresent) => {
                if !self.unsigned_warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        env = %name,
                        "tasks.callback_secret_env names a variable that is not set: callbacks go unsigned"
                    );
                }
                Ok(None)
            }
            Err(VarError::NotUnicode(_)) => {
                Err(format!("{name}: the callback secret is not UTF-8"))
            }
        }
    }

    /// The finished task as its callback body, if its callback is still pending.
    async fn load(&self, id: &TaskId) -> Loaded {
        let (task, request) = match self.book.read(id).await {
            Ok(read) => read,
            Err(e) => {
                tracing::error!(task = %id, error = %e, "cannot read a finished task; its callback is tried again later");
                return Loaded::Unreadable;
            }
        };
        match due(task, request) {
            Some(due) => Loaded::Due(due),
            None => Loaded::Gone,
        }
    }

    /// Writes where the callback stands, through the book: whether the next attempt is
    /// this delivery's.
    async fn record(&self, id: &TaskId, p: &Progress, next: Option<Duration>) -> bool {
        match p.state {
            Delivery::Delivered => {
                tracing::info!(task = %id, attempts = p.attempts, "task callback delivered");
            }
            Delivery::Failed => tracing::warn!(
                task = %id,
                attempts = p.attempts,
                last_error = p.last_error.as_deref().unwrap_or(""),
                "task callback failed: no 2xx within 24 h, or its URL is refused"
            ),
            Delivery::Pending => tracing::debug!(
                task = %id,
                attempts = p.attempts,
                last_error = p.last_error.as_deref().unwrap_or(""),
                retry_in_s = next.map_or(0, |w| w.as_secs()),
                "task callback attempt failed"
            ),
        }
        let next_ms = next.map(|w| {
            ms(crate::clock::wall())
                .saturating_add(i64::try_from(w.as_millis()).unwrap_or(i64::MAX))
        });
        let at = Standing {
            state: p.state,
            attempts: p.attempts,
            last_error: p.last_error.clone(),
            next_ms,
        };
        self.book.write(id, at).await
    }
}

/// What [`Worker::load`] found.
enum Loaded {
    Due(Due),
    /// Delivered, failed, pruned, or no callback: nothing to do.
    Gone,
    /// The store could not be read: try again later.
    Unreadable,
}
