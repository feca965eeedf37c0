//! Several routers, one view of the lab (README "Several routers"): breaker verdicts shared through
//! Redis, one probe per cooldown for the whole pool.
//!
//! Only transitions and probes touch Redis, never an ordinary request: a transition is
//! queued to the worker ([`run`], which publishes it), a probe asks for the pool's lease,
//! bounded by `cluster.timeout`. Redis down, slow or wrong never opens or closes a machine:
//! each router then runs on its own breakers, says so, and re-syncs when Redis returns. One
//! machine's keys spoiled in Redis spoil only that machine's sharing.
//!
//! Files: `lease` (the probe lease and [`Probe`]), `pool` (what the link asks of this
//! router's breakers, [`Pool`]), `worker` (connect, publish, beat), `inbound` (the sync read
//! and the messages), `heard` (messages both ways), `seen` (what `/status` is told,
//! [`Shown`]), `scripts` (the Lua), `endpoint` (the Redis URL), and [`tasks`] (the task queue
//! shared by the pool, `cluster.tasks: shared`).
//!
//! - **Verdicts** are keyed by the machine's normalised URL, so two routers that name one
//!   box differently agree. Generations come from Redis (`INCR`) and an older one never
//!   overrides a newer; the time left of a cooldown travels as a duration (`PTTL`), so host
//!   clocks never matter.
//! - **The probe lease** is `SET NX PX` with a token `<node>:<generation>`, renewed by its
//!   holder while the probe is undecided, deleted by compare-and-delete (or with the
//!   verdict it produced), and expiring on its own if its router dies.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use redis::aio::MultiplexedConnection;
use tokio::sync::{mpsc, watch};

use crate::breaker::Transitioned;
use crate::registry::Cluster as Config;

mod endpoint;
mod heard;
mod inbound;
mod lease;
mod pool;
mod scripts;
mod seen;
pub mod tasks;
mod worker;

pub use endpoint::Endpoint;
pub use heard::{Heard, Told};
pub use lease::{Hold, Probe};
pub use pool::Pool;
use seen::Seen;
pub use seen::Shown;
pub use worker::run;

/// How long a verdict hash lives in Redis after its last transition.
const VERDICT_TTL: Duration = Duration::from_secs(7 * 86_400);
/// Transitions queued for the worker at most; beyond, everything is told again.
const QUEUE: usize = 1024;

/// The answer to a request for the pool's probe lease.
#[derive(Debug)]
pub enum Taken {
    /// This router probes; the lease is released when the [`Hold`] drops.
    Won(Hold),
    /// Another router probes, for at most this much longer.
    Lost(Duration),
    /// Redis did not answer in time: this router's own breaker decides.
    Unavailable,
}

/// Whether this router talks to Redis now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Connecting,
    Up,
    Down,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Up => "up",
            State::Down => "down",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the worker is asked to do, in order: a transition's verdict goes out before the
/// probe lease that produced it is released.
#[derive(Debug)]
enum Job {
    Publish {
        share: Arc<str>,
        told: Told,
    },
    Release {
        share: Arc<str>,
        token: String,
    },
    /// A request found Redis failing: check it now.
    Check,
}

/// This router's end of the pool: shared by the breakers (which tell it transitions and ask
/// it for probe leases), the worker and `/status`.
pub struct Link {
    config: Config,
    node: Arc<str>,
    /// This process, so its own messages are known when they come back.
    instance: String,
    scripts: scripts::Scripts,
    /// The command connection while Redis is up; `None` when down (no request waits).
    conn: Mutex<Option<MultiplexedConnection>>,
    jobs: mpsc::Sender<Job>,
    /// A message could not be queued: the worker tells every verdict again.
    overflowed: AtomicBool,
    /// The newest generation known per share key.
    known: Mutex<HashMap<Arc<str>, u64>>,
    /// Our probe leases (token per share key) not yet released.
    held: Mutex<HashMap<Arc<str>, String>>,
    /// Our probe leases on their way out: released by the worker, not yet gone.
    releasing: Mutex<HashMap<Arc<str>, String>>,
    seen: Mutex<Seen>,
    /// Shares whose keys in Redis cannot be used, and why: skipped (never the link's
    /// trouble) until a read or a publish finds them usable. Only this registry's shares
    /// are ever kept, so it is as bounded as the registry.
    bad: Mutex<BTreeMap<Arc<str>, String>>,
    state: watch::Sender<State>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("node", &self.node)
            .field("prefix", &self.config.prefix)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl Link {
    /// The link and the receiving end of its jobs, for [`run`].
    pub fn new(config: Config) -> (Arc<Link>, Jobs) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (state, _) = watch::channel(State::Connecting);
        let link = Arc::new(Link {
            node: Arc::from(config.node.as_str()),
            instance: instance_id(),
            scripts: scripts::Scripts::new(),
            conn: Mutex::new(None),
            jobs: tx,
            overflowed: AtomicBool::new(false),
            known: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            releasing: Mutex::new(HashMap::new()),
            seen: Mutex::new(Seen {
                since: Some(SystemTime::now()),
                ..Seen::default()
            }),
            bad: Mutex::new(BTreeMap::new()),
            state,
            config,
        });
        (link, Jobs(rx))
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn state(&self) -> State {
        *self.state.borrow()
    }

    /// Every change of [`State`] from now on (alerts).
    pub fn watch_state(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// A breaker of a machine shared under `share` made a transition: tells the
    /// other routers if it is worth telling. Never waits.
    pub fn transition(&self, t: &Transitioned, share: Arc<str>) {
        if let Some(told) = Told::of_transition(t) {
            self.send(Job::Publish { share, told });
        }
    }

    fn send(&self, job: Job) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.jobs.try_send(job) {
            if !self.overflowed.swap(true, Ordering::AcqRel) {
                tracing::warn!(
                    "cluster: more transitions than the worker could take; every verdict will be told again"
                );
            }
        }
    }

    /// One Redis operation on a request's behalf, bounded by `timeout`; a failure is said to
    /// the worker, which checks the connection, and the request goes on without Redis.
    async fn asked<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        bounded(self, call)
            .await
            .map_err(|why| self.trouble(&why))
            .ok()
    }

    /// A request saw Redis fail (counted by [`bounded`]): the worker checks the connection now.
    fn trouble(&self, why: &str) {
        // Rare by construction: without a connection no request asks Redis anything.
        tracing::warn!(
            error = %crate::text::bounded(why),
            "cluster: a Redis operation failed; this request goes on with this router's own breakers"
        );
        self.send(Job::Check);
    }

    fn connection(&self) -> Option<MultiplexedConnection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, String>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_releasing(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, String>> {
        self.releasing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The worker is done with releasing `token` (released, or dropped while Redis is down).
    fn released(&self, share: &str, token: &str) {
        let mut releasing = self.lock_releasing();
        if releasing.get(share).is_some_and(|t| t == token) {
            releasing.remove(share);
        }
    }

    fn known(&self, share: &str) -> u64 {
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(share)
            .copied()
            .unwrap_or(0)
    }

    /// `{prefix}:{kind}:{share}`.
    fn key(&self, kind: &str, share: &str) -> String {
        format!("{}:{kind}:{share}", self.config.prefix)
    }

    fn channel(&self) -> String {
        format!("{}:verdicts", self.config.prefix)
    }
}

/// The worker's end of the jobs.
#[derive(Debug)]
pub struct Jobs(mpsc::Receiver<Job>);

/// One Redis operation, at most `cluster.timeout`; a failure is counted.
async fn bounded<T>(
    link: &Link,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, String> {
    let failed = match tokio::time::timeout(link.config.timeout, call).await {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!(
            "no answer within cluster.timeout ({} ms)",
            heard::millis(link.config.timeout)
        ),
    };
    metrics::counter!("labrouter_cluster_redis_errors_total").increment(1);
    Err(failed)
}

/// Tells this process apart from another with the same node name.
fn instance_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{:016x}", h.finish())
}
