//! A durable `redis-server` and routers' handles on it, and tasks to put there.

use std::collections::BTreeMap;
use std::time::Duration;

use labrouter::cluster::tasks::SharedQueue;
use labrouter::cluster::Endpoint;
use labrouter::outcome::{Endpoint as Api, TaskStatus};
use labrouter::registry::{Cluster, QueueMode};
use labrouter::task::{Accept, Task, TaskId};

use crate::redis::RedisServer;

/// Any one field read back at most, in these tests.
pub const MAX_VALUE: usize = 1 << 20;

/// A redis-server that writes every change to its append-only file before answering.
pub async fn durable_redis() -> RedisServer {
    let redis = RedisServer::start().await;
    let mut c = redis.client().await;
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]).await;
    c.ok(&["CONFIG", "SET", "appendfsync", "always"]).await;
    redis
}

pub fn config(lease: Duration) -> Cluster {
    Cluster {
        redis_url_env: "LABROUTER_REDIS_URL".into(),
        prefix: "lab".into(),
        node: "router".into(),
        timeout: Duration::from_millis(50),
        probe_lease: Duration::from_secs(15),
        tasks: QueueMode::Shared,
        assume_durable: false,
        task_lease: lease,
        task_timeout: Duration::from_secs(1),
    }
}

/// One router's handle on the queue at `url`.
pub async fn router(url: &str, lease: Duration) -> SharedQueue {
    let endpoint = Endpoint::parse(url, "LABROUTER_REDIS_URL").unwrap();
    SharedQueue::connect(&endpoint, &config(lease), MAX_VALUE)
        .await
        .unwrap()
}

/// Two routers on one durable Redis, 30 s leases.
pub async fn two_routers() -> (RedisServer, SharedQueue, SharedQueue) {
    let redis = durable_redis().await;
    let a = router(&redis.url(), Duration::from_secs(30)).await;
    let b = router(&redis.url(), Duration::from_secs(30)).await;
    (redis, a, b)
}

/// A queued chat task of `owner` with `priority`, created `created_ms`.
pub fn task(priority: i32, created_ms: i64) -> Task {
    Task {
        seq: 0,
        id: TaskId::new(),
        owner: "key-a".into(),
        status: TaskStatus::Queued,
        endpoint: Api::Chat,
        route: Some("code".into()),
        accept: Accept::Chain,
        priority,
        after: Vec::new(),
        metadata: BTreeMap::from([("job".into(), "nightly".into())]),
        created_ms,
        started_ms: None,
        finished_ms: None,
        deadline_ms: created_ms + 86_400_000,
        attempts_used: 0,
        max_attempts: 3,
        interrupted: 0,
        attempts: Vec::new(),
        waiting_for: None,
        result: None,
        error: None,
        callback: None,
    }
}

pub const REQUEST: &[u8] = br#"{"model":"auto","messages":[{"role":"user","content":"hi"}]}"#;

/// Waits (real time: leases run on Redis's clock) until `lease` has surely lapsed.
pub async fn lapse(lease: Duration) {
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
}
