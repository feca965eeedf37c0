//! The task queue shared by the routers of a pool, in Redis (README "Several routers", the
//! shared queue): any router takes a submit, any runs it under a lease, and a router that
//! dies takes no task with it. This is the Redis side only: the operations, each one Lua
//! script (atomic, one round trip) bounded by `cluster.task_timeout`; what to run and when
//! stays the pure queue's decision ([`crate::tasks::queue`]).
//!
//! Files: `scripts` (the Lua and the keys it keeps), `record` (a task written to Redis and
//! read back as outside input), `answers` (what the scripts answer, as types), `durable`
//! (the start check: on disk, or refused), `follow` (follow-ups: a task blocked until its
//! parents succeeded, readied or cancelled by their ends), `limits` (`tasks.max_running` and
//! `task_slots` counted for the pool), `deadlines` (tasks that expire while they wait),
//! `callbacks` (a finished task's callback delivered by whichever router is alive, one at
//! a time),
//! `conn` (the connection, made again after it
//! dropped, and each operation's bound), `upkeep` (a finished task's callback noted, waiting
//! tasks woken, the prune), `moving` (`labrouter task export|import`).
//!
//! - **Submit** makes one task per pool-wide `Idempotency-Key`, even from two routers at once.
//! - **Claim** takes the next due task (priority, then age) under a lease; leases that lapsed
//!   first go back to the queue with an `interrupted` attempt (the second fails the task).
//! - **Renew**, **release** and **finish** are compare-and-set: renew and release on the lease,
//!   finish on the status, so a task ends once and the first result written wins.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use redis::aio::MultiplexedConnection;

use super::Endpoint;
use crate::outcome::TaskStatus;
use crate::registry::Cluster;
use crate::store::tasks::{Idem, Inserted};
use crate::task::{Task, TaskId};

mod answers;
mod callbacks;
mod conn;
mod deadlines;
mod durable;
mod follow;
mod limits;
pub mod moving;
mod record;
mod scripts;
mod upkeep;

use answers::{ended, split, spoiled};
pub use answers::{Cancelled, Ended, Page};
use conn::{open, Refused};
pub use follow::Linked;
pub use record::{max_value, Fetched, Spoiled};
pub use upkeep::PoolCounts;

/// Connecting to Redis at start, at most.
const CONNECT_MAX: Duration = Duration::from_secs(5);
/// Ids a list looks at per page, at most, whatever it filters out.
const SCAN_MAX: usize = 1000;

/// Why a queue operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// Redis is down, slow or refused the write: nothing is acknowledged.
    #[error("the shared task queue is unavailable: {0}")]
    Unavailable(String),
    /// A value read back cannot be a task.
    #[error(transparent)]
    Spoiled(#[from] Spoiled),
    /// The pool holds this many unfinished tasks, `tasks.max_queued` or more.
    #[error(
        "the shared task queue holds {0} unfinished tasks, as many as tasks.max_queued allows"
    )]
    Full(u64),
    /// The submitter's key has `tasks.max_queued_per_key` unfinished tasks in the pool.
    #[error(
        "your key has {0} unfinished tasks in the shared task queue, as many as tasks.max_queued_per_key allows"
    )]
    KeyFull(u32),
}

/// A task this router now runs, under `token`'s lease.
#[derive(Debug)]
pub struct Claimed {
    pub task: Task,
    pub request: Option<Bytes>,
    pub token: String,
}

/// One router's handle on the pool's queue.
pub struct SharedQueue {
    /// The connection; `None` once it dropped (Redis restarted, the network cut it): the
    /// next operation connects again, and checks again that Redis is durable.
    conn: Mutex<Option<MultiplexedConnection>>,
    endpoint: Endpoint,
    assume_durable: bool,
    /// `{prefix}:tasks:`.
    base: String,
    /// This router, in its lease tokens.
    node: String,
    lease: Duration,
    timeout: Duration,
    /// Any one field read back at most (a request or a result): larger is spoiled.
    max_value: usize,
    scripts: scripts::Scripts,
    tokens: AtomicU64,
}

impl std::fmt::Debug for SharedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedQueue")
            .field("base", &self.base)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl SharedQueue {
    /// Connects and checks that Redis is durable; the error says why not, naming the setting.
    /// A Redis that does not answer is no error: the queue starts unavailable (submits are
    /// refused) and its first operation once Redis answers connects, and checks, again.
    pub async fn connect(
        endpoint: &Endpoint,
        config: &Cluster,
        max_value: usize,
    ) -> Result<SharedQueue, String> {
        let bound = config.task_timeout.max(Duration::from_millis(1));
        let conn = match open(endpoint, bound, config.assume_durable).await {
            Ok(conn) => Some(conn),
            Err(Refused::NotDurable(why)) => return Err(why),
            Err(Refused::Unreachable(why)) => {
                tracing::warn!(error = %why, "shared task queue: Redis does not answer at start; task submits are refused with 503 until it does (and is found durable)");
                None
            }
        };
        Ok(SharedQueue {
            conn: Mutex::new(conn),
            endpoint: endpoint.clone(),
            assume_durable: config.assume_durable,
            base: format!("{}:tasks:", config.prefix),
            node: format!("{}:{}", config.node, super::instance_id()),
            lease: config.task_lease,
            timeout: bound,
            max_value,
            scripts: scripts::Scripts::new(),
            tokens: AtomicU64::new(0),
        })
    }

    /// Whether it holds a connection now (none after start without Redis, or after it
    /// dropped, until the next operation).
    pub fn connected(&self) -> bool {
        self.conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// A running task's lease, `cluster.task_lease`.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Stores `task` (queued, waiting or blocked) with its request, unless its key names
    /// one already, the pool holds `max_open` unfinished tasks (0: no bound) or its owner
    /// `max_owner` (`None`: no bound): [`Inserted::New`] only once Redis acknowledged the
    /// write. A follow-up (`after`) goes through [`SharedQueue::submit_linked`].
    pub async fn submit(
        &self,
        task: &Task,
        request: &[u8],
        idem: Option<&Idem>,
        max: (u32, Option<u32>),
    ) -> Result<Inserted, QueueError> {
        match self.submit_linked(task, request, idem, max).await? {
            Linked::New(_) => Ok(Inserted::New),
            Linked::KeyReused => Ok(Inserted::KeyReused),
            Linked::Existing(id) => Ok(Inserted::Existing(id)),
            Linked::UnknownAfter(i) | Linked::Doomed(i, _) => Err(spoiled(
                task.id.as_str(),
                format!("after[{i}]: a follow-up is submitted with submit_linked"),
            )),
        }
    }

    /// The next due task, now this router's under a fresh lease; `None` when nothing is due.
    pub async fn claim(&self) -> Result<Option<Claimed>, QueueError> {
        self.claim_within(0).await
    }

    /// As [`SharedQueue::claim`], but `None` too while the pool runs `max_running` tasks
    /// (0: no bound), whichever routers run them.
    pub async fn claim_within(&self, max_running: u32) -> Result<Option<Claimed>, QueueError> {
        let token = format!(
            "{}:{}",
            self.node,
            self.tokens.fetch_add(1, Ordering::Relaxed)
        );
        let mut call = self.scripts.claim.prepare_invoke();
        call.key(self.key("open"))
            .key(self.key("ready"))
            .key(self.key("later"))
            .key(self.key("leases"))
            .key(self.key("ended"))
            .arg(self.key("t:"))
            .arg(&token)
            .arg(millis(self.lease))
            .arg(self.max_value)
            .arg(max_running);
        let got: Vec<String> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        if got.is_empty() {
            return Ok(None);
        }
        let f = match record::fetched(&got) {
            Ok(f) => f,
            Err(e) => return Err(self.set_aside(e, &token).await),
        };
        Ok(Some(Claimed {
            task: f.task,
            request: f.request,
            token,
        }))
    }

    /// A claimed task that cannot be read back is failed where it lies, so the queue goes
    /// on past it; the error says why, and is logged.
    async fn set_aside(&self, e: Spoiled, token: &str) -> QueueError {
        tracing::warn!(error = %e, "shared task queue: a claimed task cannot be read back; it is set aside as failed");
        if let Ok(id) = e.id.parse::<TaskId>() {
            let mut call = self.scripts.set_aside.prepare_invoke();
            self.task_keys(&mut call, &id).arg(token);
            if let Ok(mut conn) = self.conn().await {
                let _ = self.bounded(call.invoke_async::<i64>(&mut conn)).await;
            }
        }
        QueueError::Spoiled(e)
    }

    /// Keeps `token`'s lease on `task` for another `cluster.task_lease`, saving its progress;
    /// false when it is no longer this router's to run (lapsed and taken, cancelled, ended).
    pub async fn renew(&self, task: &Task, token: &str) -> Result<bool, QueueError> {
        let mut call = self.scripts.renew.prepare_invoke();
        self.task_keys(&mut call, &task.id)
            .arg(token)
            .arg(millis(self.lease))
            .arg(record::doc(task));
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }

    /// Gives `task` back unfinished (`queued` or `waiting`), due after `delay`; false when
    /// it was no longer this router's.
    pub async fn release(
        &self,
        task: &Task,
        token: &str,
        delay: Duration,
    ) -> Result<bool, QueueError> {
        let status = match task.status {
            TaskStatus::Waiting => "waiting",
            _ => "queued",
        };
        let mut call = self.scripts.release.prepare_invoke();
        self.task_keys(&mut call, &task.id)
            .arg(token)
            .arg(status)
            .arg(record::doc(task))
            .arg(millis(delay));
        let n: i64 = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        Ok(n == 1)
    }

    /// Writes `task`'s end (its status must be final) unless the task already ended: the
    /// first end written wins.
    pub async fn finish(&self, task: &Task) -> Result<Ended, QueueError> {
        let mut call = self.scripts.finish.prepare_invoke();
        self.task_keys(&mut call, &task.id)
            .arg(task.status.as_str())
            .arg(record::doc(task))
            .arg(record::result(task))
            .arg(&self.node)
            .arg(millis(callbacks::LEASE));
        let (n, s): (i64, String) = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        ended(n, &s, &task.id)
    }

    /// Cancels task `id` of `owner` (`None`: whoever's) unless it ended.
    pub async fn cancel(&self, id: &TaskId, owner: Option<&str>) -> Result<Cancelled, QueueError> {
        let mut call = self.scripts.cancel.prepare_invoke();
        self.task_keys(&mut call, id)
            .arg(owner.unwrap_or("*"))
            .arg(&self.node)
            .arg(millis(callbacks::LEASE));
        let (n, s): (i64, String) = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        if s.is_empty() {
            return Ok(Cancelled::Missing);
        }
        let status = s
            .parse::<TaskStatus>()
            .map_err(|e| spoiled(id.as_str(), e.to_string()))?;
        Ok(match n {
            1 => Cancelled::From(status),
            _ => Cancelled::AlreadyEnded(status),
        })
    }

    /// Task `id` whole (its request while unfinished, its result), if it exists.
    pub async fn get(&self, id: &TaskId) -> Result<Option<Fetched>, QueueError> {
        let mut call = self.scripts.get.prepare_invoke();
        call.key(self.task_key(id))
            .arg(id.as_str())
            .arg(self.max_value);
        let got: Vec<String> = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        if got.is_empty() {
            return Ok(None);
        }
        Ok(Some(record::fetched(&got)?))
    }

    /// Up to `limit` tasks before `before`, newest first, of `owner` (`None`: anyone's) and
    /// `status` (`None`: any), without request or result. A task that cannot be read back
    /// is logged and left out.
    pub async fn list(
        &self,
        before: Option<&str>,
        limit: usize,
        status: Option<TaskStatus>,
        owner: Option<&str>,
    ) -> Result<Page, QueueError> {
        let mut call = self.scripts.list.prepare_invoke();
        call.key(self.key("all"))
            .arg(self.key("t:"))
            .arg(before.unwrap_or(""))
            .arg(limit.clamp(1, SCAN_MAX))
            .arg(status.map_or("", TaskStatus::as_str))
            .arg(owner.unwrap_or("*"))
            .arg(SCAN_MAX)
            .arg(self.max_value);
        let (flat, last): (Vec<String>, String) = self
            .bounded(call.invoke_async(&mut self.conn().await?))
            .await?;
        let mut page = Page {
            tasks: Vec::new(),
            next_before: (!last.is_empty()).then_some(last),
        };
        for one in split(&flat) {
            match record::fetched(one) {
                Ok(f) => page.tasks.push(f.task),
                Err(e) => {
                    tracing::warn!(error = %e, "shared task queue: a task left out of a list")
                }
            }
        }
        Ok(page)
    }

    fn key(&self, what: &str) -> String {
        format!("{}{what}", self.base)
    }

    fn task_key(&self, id: &TaskId) -> String {
        self.key(&format!("t:{id}"))
    }

    /// KEYS task, ready, later, leases, open and ARGV id: how every per-task script starts.
    fn task_keys<'c, 's>(
        &self,
        call: &'c mut redis::ScriptInvocation<'s>,
        id: &TaskId,
    ) -> &'c mut redis::ScriptInvocation<'s> {
        call.key(self.task_key(id))
            .key(self.key("ready"))
            .key(self.key("later"))
            .key(self.key("leases"))
            .key(self.key("open"))
            .arg(id.as_str())
    }
}

/// The `ready` score: higher priority first, then older first (`created_ms` below 2^42,
/// the year 2109), exact in a double.
fn score(task: &Task) -> f64 {
    let rank = f64::from(100 - task.priority.clamp(-100, 100));
    rank * 4_398_046_511_104.0 + task.created_ms.clamp(0, 4_398_046_511_103) as f64
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
