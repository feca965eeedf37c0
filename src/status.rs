//! `/status` as a typed [`View`]: the router serves it, the dashboard and `labrouter status`
//! ([`print()`], [`table`]) read it. Its `tasks` block is [`TasksView`] (`tasks`).
//!
//! The JSON was once built with `json!` into sorted maps (serde_json without
//! `preserve_order`); the structs keep that shape byte for byte: fields are declared in key
//! order, and the machines are a [`BTreeMap`] by name.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::breaker::Phase;
use crate::clock::{rfc3339, Instant};
use crate::fleet::Fleet;
use crate::host;
use crate::machines::Snapshot;

mod cli;
mod tasks;
#[cfg(test)]
mod tests;

pub use cli::{print, table};
pub use tasks::{OldestWaiting, TaskFailure, TasksView, RECENT_FAILURES};

/// Breakers, counters and routes of one lab, read live; the host block when served.
///
/// Missing keys read as defaults, so `labrouter status` still reads an older router.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct View {
    /// The link to the other routers (README "Several routers"); absent without `cluster:`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterView>,
    /// Keyed requests running on after their clients left (`server.max_detached`); absent
    /// from older routers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detached: Option<DetachedView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<host::Stats>,
    pub machines: BTreeMap<String, MachineView>,
    pub registry_version: String,
    pub routes: Vec<RouteView>,
    /// The pool's task queue in Redis (`cluster.tasks: shared`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_queue: Option<SharedQueueView>,
    /// The task queue; absent when the router has none (no store), and from older routers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<TasksView>,
}

/// One machine's breaker and counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MachineView {
    pub consecutive_failures: u32,
    /// Left of an open breaker's cooldown; 0 in every other phase.
    pub cooldown_left_ms: u64,
    /// The cooldown the next trip would get.
    pub cooldown_ms: u64,
    /// The router whose verdict this is (README "Several routers"): a peer's name for an adopted
    /// one, this router's node for its own; `None` without `cluster:` or before any transition.
    pub decided_by: Option<String>,
    /// The names its last read of its model list found and labrouter serves (`discover:
    /// true`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discovered: Vec<String>,
    pub in_flight: u32,
    pub last_reason: Option<String>,
    pub local_rejections: u64,
    /// When the breaker last opened, RFC 3339 UTC.
    pub opened_at: Option<String>,
    /// Requests it runs at once (`parallel`): below it the machine is free for a tier's pick.
    pub parallel: u32,
    /// Left of a 429's Retry-After.
    pub rate_limited_ms: Option<u64>,
    pub remote_attempts: u64,
    pub rerouted: u64,
    /// Its verdict is shared with the other routers (README "Several routers").
    pub shared: bool,
    pub state: Phase,
    pub url: String,
    /// Its models (backend names) that are warm: listed as loaded by the machine, or
    /// answered within its `warm_for` (docs/registry.md "routes:").
    pub warm: Vec<String>,
}

/// `/status.cluster` (README "Several routers"): whether this router talks to Redis, as whom, and
/// who else it has seen there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterView {
    /// Shared machines whose keys in Redis cannot be used (a generation that is no number,
    /// a key of the wrong type, a field too large): skipped, while the others keep syncing.
    pub bad_share_errors: BTreeMap<String, String>,
    /// How many there are; `bad_share_errors` lists the first [`BAD_SHARES_SHOWN`].
    pub bad_shares: u64,
    /// Why Redis was last found down (no URL, no password).
    pub last_error: Option<String>,
    /// When every verdict was last read from Redis, RFC 3339 UTC.
    pub last_sync: Option<String>,
    pub node: String,
    /// The other routers that beat within the last few seconds.
    pub peers_seen: Vec<String>,
    pub prefix: String,
    /// Since when `state` holds, RFC 3339 UTC.
    pub since: Option<String>,
    /// `up`, `down` or `connecting`.
    pub state: String,
}

/// `/status.shared_queue` (README "Several routers", the shared queue): whether this router
/// reaches the pool's task queue in Redis now, and what it runs of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SharedQueueView {
    /// Why Redis was last found unavailable, while it is.
    pub last_error: Option<String>,
    /// The pool's queue as last counted (every few seconds).
    pub pool: PoolCountsView,
    /// Tasks of the pool this router is running.
    pub running_here: u32,
    /// `up` (submits are taken) or `down` (refused with 503 `queue_unavailable`).
    pub state: String,
}

/// `/status.shared_queue.pool`: the pool's unfinished tasks (any router's), those running
/// under a lease, those due now, and those due later (a backoff, or waiting for a breaker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PoolCountsView {
    pub due: u64,
    pub later: u64,
    pub running: u64,
    pub unfinished: u64,
}

/// At most this many bad shares are listed by name in `/status.cluster`.
pub const BAD_SHARES_SHOWN: usize = 16;

impl ClusterView {
    /// The link as it is now, as people read it.
    pub fn of(shown: crate::cluster::Shown) -> ClusterView {
        let bad_shares = u64::try_from(shown.bad_shares.len()).unwrap_or(u64::MAX);
        ClusterView {
            bad_share_errors: shown
                .bad_shares
                .into_iter()
                .take(BAD_SHARES_SHOWN)
                .collect(),
            bad_shares,
            last_error: shown.last_error,
            last_sync: shown.last_sync.map(rfc3339),
            node: shown.node,
            peers_seen: shown.peers_seen,
            prefix: shown.prefix,
            since: shown.since.map(rfc3339),
            state: shown.state.as_str().to_string(),
        }
    }
}

/// `/status.detached`: the keyed requests whose clients left that run on to their end,
/// and the request bytes they hold (bounded by `server.max_detached` and
/// `server.max_detached_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DetachedView {
    pub bytes: u64,
    pub flights: u64,
}

/// A route and its chain of targets, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouteView {
    pub chain: Vec<String>,
    pub name: String,
    /// Its tiers of equal targets, each as the chain names them; none for a plain chain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<Vec<String>>,
}

impl View {
    /// `fleet` now, without the host block.
    pub fn of(fleet: &Fleet) -> View {
        let reg = &fleet.registry;
        let now = Instant::now();
        let wall = crate::clock::wall();
        let cluster = fleet.machines.bus().cluster().map(|l| l.view());
        let machines = reg
            .machines
            .enumerate()
            .map(|(i, m)| {
                let s = fleet.machines.snapshot(i);
                let transitioned = s.breaker.generation > 0;
                let mut v = MachineView::of(s, m.url.clone(), now, wall);
                v.parallel = m.parallel;
                v.discovered = reg
                    .models
                    .enumerate()
                    .filter(|(id, model)| model.machine == i && reg.is_found(*id))
                    .map(|(_, model)| model.backend.clone())
                    .collect();
                v.warm = reg
                    .models
                    .enumerate()
                    .filter(|(id, model)| model.machine == i && fleet.picks.warm(*id, m.warm_for))
                    .map(|(_, model)| model.backend.clone())
                    .collect();
                v.warm.sort();
                v.warm.dedup();
                if let Some(cluster) = &cluster {
                    v.shared = m.shared;
                    // Not a peer's: this router's own, once it decided anything.
                    if transitioned && v.decided_by.is_none() {
                        v.decided_by = Some(cluster.node.clone());
                    }
                }
                (m.name.clone(), v)
            })
            .collect();
        let routes = reg
            .routes
            .iter()
            .map(|r| RouteView {
                chain: r.chain.iter().map(|&m| reg.target_name(m)).collect(),
                name: r.name.clone(),
                tiers: r
                    .tiers
                    .iter()
                    .map(|t| t.iter().map(|&m| reg.target_name(m)).collect())
                    .collect(),
            })
            .collect();
        View {
            cluster: cluster.map(ClusterView::of),
            detached: None,
            host: None,
            machines,
            registry_version: reg.version.clone(),
            routes,
            shared_queue: None,
            tasks: None,
        }
    }

    /// The same view with the host block.
    pub fn with_host(self, host: host::Stats) -> View {
        View {
            host: Some(host),
            ..self
        }
    }

    /// The same view with the detached flights: (flights, bytes).
    pub fn with_detached(self, (flights, bytes): (usize, usize)) -> View {
        View {
            detached: Some(DetachedView {
                bytes: bytes as u64,
                flights: flights as u64,
            }),
            ..self
        }
    }

    /// The same view with the shared queue's block (`None`: the queue is local).
    pub fn with_shared_queue(self, shared_queue: Option<SharedQueueView>) -> View {
        View {
            shared_queue,
            ..self
        }
    }

    /// The same view with the tasks block (`None`: the router has no task queue).
    pub fn with_tasks(self, tasks: Option<TasksView>) -> View {
        View { tasks, ..self }
    }
}

impl MachineView {
    /// `s` seen at `now`, which is `wall` on the wall clock.
    fn of(s: Snapshot, url: String, now: Instant, wall: SystemTime) -> MachineView {
        let b = s.breaker;
        let cooldown_left = match b.phase {
            Phase::Open => b.open_until.map(|u| u.saturating_duration_since(now)),
            _ => None,
        };
        MachineView {
            consecutive_failures: b.failures,
            cooldown_left_ms: cooldown_left.map_or(0, millis),
            cooldown_ms: millis(b.cooldown),
            decided_by: b.decided_by.as_deref().map(str::to_string),
            in_flight: s.inflight,
            last_reason: b.last_reason,
            local_rejections: s.local_rejections,
            opened_at: b
                .opened_at
                .map(|t| rfc3339(wall - now.saturating_duration_since(t))),
            rate_limited_ms: b
                .rate_limited_until
                .map(|u| millis(u.saturating_duration_since(now))),
            remote_attempts: s.remote_attempts,
            rerouted: s.rerouted,
            shared: false,
            state: b.phase,
            url,
            parallel: 1,
            warm: Vec::new(),
            discovered: Vec::new(),
        }
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}
