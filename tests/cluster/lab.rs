//! The lab every scenario runs on: one Redis, three simulated machines in this process, and
//! routers `r1`, `r2`, ... as child processes that share a cluster prefix, each with its own
//! state directory.
//!
//! Machines: `a-box` (shared: true), the one that goes down; `b-box` (shared: auto, so not
//! shared: it is on loopback), the healthy fallback; `c-box` (shared: true), a second shared
//! machine for messages that must not touch `a-box`. Routes: `shared` = [a-m, b-m] (the
//! default), `other` = [c-m, b-m].

use std::path::PathBuf;
use std::time::Duration;

use labrouter::sim::{Fault, Sim};
use serde_json::Value;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

use super::redis::RedisServer;
use super::router::{self, Reply, Router};

/// Peers adopt a published verdict within this (README "Several routers").
pub const ADOPT_WITHIN: Duration = Duration::from_secs(1);
/// `cluster.probe_lease` in every registry here.
pub const PROBE_LEASE: Duration = Duration::from_secs(2);
/// `cluster.timeout` in every registry here. the 50 ms default is too tight for this lab:
/// three debug-build routers, three sims, Redis and the test share two cores, and in a burst
/// of 30 a router's lease round trip took over 50 ms now and then (measured: replies of
/// 40-80 ms). That router then counted Redis as down and probed on its own, as it must, and
/// the pool saw two probes. The scenarios test the protocol with Redis answering; the ones
/// about Redis down kill it, which no timeout hides.
pub const REDIS_TIMEOUT: &str = "250ms";
/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(20);
/// A reconnect to a Redis that came back, and the heartbeats that name the peers, are not
/// bounded by the contract: this is the patience the tests allow them.
pub const RECONNECT_WITHIN: Duration = Duration::from_secs(5);

pub const A: &str = "a-m@a-box";
pub const B: &str = "b-m@b-box";
pub const C: &str = "c-m@c-box";

/// One scenario at a time: each runs three router processes on a 2-core machine and measures
/// real time, so two at once would measure each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The breaker every machine gets (threshold 3, backoff 2, success threshold 1).
#[derive(Clone, Copy)]
pub struct Breaker {
    pub cooldown: &'static str,
    pub max_cooldown: &'static str,
}

/// Cooldown 1 s, doubling up to 8 s: the probe scenarios, which wait out cooldowns.
pub const SHORT: Breaker = Breaker {
    cooldown: "1s",
    max_cooldown: "8s",
};

/// Cooldown 10 s: scenarios that must finish inside one open interval.
pub const LONG: Breaker = Breaker {
    cooldown: "10s",
    max_cooldown: "80s",
};

pub struct Lab {
    pub redis: RedisServer,
    pub a: Sim,
    pub b: Sim,
    pub c: Sim,
    /// Running routers, in start order (`r1` first); a killed one is removed.
    pub routers: Vec<Router>,
    pub prefix: String,
    pub client: reqwest::Client,
    breaker: Breaker,
    /// A fake Telegram API the routers alert (its URL), when the scenario listens.
    telegram: Option<String>,
    dir: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

impl Lab {
    /// Redis, the three machines (healthy) and `nodes` routers `r1..`, started together.
    pub async fn start(test: &str, nodes: usize, breaker: Breaker) -> Lab {
        Lab::start_alerting(test, nodes, breaker, None).await
    }

    /// The same, each router with a `telegram:` block pointed at `telegram` (a fake Bot API).
    pub async fn start_alerting(
        test: &str,
        nodes: usize,
        breaker: Breaker,
        telegram: Option<&str>,
    ) -> Lab {
        let serial = SERIAL.lock().await;
        let mut lab = Lab {
            redis: RedisServer::start().await,
            a: Sim::start("a-box").await.unwrap(),
            b: Sim::start("b-box").await.unwrap(),
            c: Sim::start("c-box").await.unwrap(),
            routers: Vec::new(),
            prefix: format!("ct-{test}-{}", std::process::id()),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
            breaker,
            telegram: telegram.map(str::to_string),
            dir: tempfile::tempdir().unwrap(),
            _serial: serial,
        };
        let names: Vec<String> = (1..=nodes).map(|i| format!("r{i}")).collect();
        let configs: Vec<PathBuf> = names.iter().map(|n| lab.config(n)).collect();
        let env = lab.env();
        let starts = names
            .iter()
            .zip(&configs)
            .map(|(n, c)| Router::start(n, c, &env));
        lab.routers = futures_util::future::join_all(starts).await;
        lab
    }

    /// Starts one more router, `r{n+1}` (or the name given), on the same Redis and prefix.
    pub async fn add_router(&mut self, node: &str) {
        let config = self.config(node);
        let router = Router::start(node, &config, &self.env()).await;
        self.routers.push(router);
    }

    /// Starts router `node` with its wall clock `offset` off (libfaketime: `+30s`, `-30s`);
    /// its monotonic clock, which cooldowns run on, stays true.
    pub async fn add_skewed_router(&mut self, node: &str, offset: &str) {
        let config = self.config(node);
        let mut env = self.env();
        env.push(("LD_PRELOAD", faketime_library()));
        env.push(("FAKETIME", offset.to_string()));
        env.push(("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()));
        let router = Router::start(node, &config, &env).await;
        self.routers.push(router);
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LABROUTER_REDIS_URL", self.redis.url()),
            ("LABROUTER_TEST_BOT_TOKEN", "123:cluster-test".to_string()),
        ]
    }

    /// Writes router `node`'s registry (its own state dir) and returns its path.
    fn config(&self, node: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{node}.yaml"));
        let state = self.dir.path().join(format!("{node}-state"));
        std::fs::write(&path, self.registry(node, &state)).unwrap();
        path
    }

    fn registry(&self, node: &str, state: &std::path::Path) -> String {
        let Breaker {
            cooldown,
            max_cooldown,
        } = self.breaker;
        format!(
            r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
cluster:
  redis_url_env: LABROUTER_REDIS_URL
  prefix: {prefix}
  node: {node}
  timeout: {REDIS_TIMEOUT}
  probe_lease: 2s
defaults:
  timeouts: {{ connect: 1s, first_byte: 1s, idle: 5s, total: 10s }}
  breaker: {{ failure_threshold: 3, cooldown: {cooldown}, backoff: 2.0, max_cooldown: {max_cooldown}, success_threshold: 1 }}
  max_concurrency: 64   # bursts of 10 per router never meet the bulkhead
machines:
  a-box: {{ url: "{a}", shared: true }}
  b-box: {{ url: "{b}", shared: auto }}
  c-box: {{ url: "{c}", shared: true }}
models:
  a-m: {{ machine: a-box, name: a-model }}
  b-m: {{ machine: b-box, name: b-model }}
  c-m: {{ machine: c-box, name: c-model }}
routes:
  - {{ name: shared, default: true, chain: [a-m, b-m] }}
  - {{ name: other, chain: [c-m, b-m] }}
"#,
            state = state.display(),
            prefix = self.prefix,
            a = self.a.base_url(),
            b = self.b.base_url(),
            c = self.c.base_url(),
        ) + &self
            .telegram
            .as_ref()
            .map(|url| {
                format!(
                    "telegram:\n  token_env: LABROUTER_TEST_BOT_TOKEN\n  chat_id: 42\n  api_url: \"{url}\"\n"
                )
            })
            .unwrap_or_default()
    }

    // === the routers ===

    pub fn router(&self, node: &str) -> &Router {
        self.routers
            .iter()
            .find(|r| r.node == node)
            .unwrap_or_else(|| panic!("no running router {node}"))
    }

    /// The nodes of the running routers.
    pub fn nodes(&self) -> Vec<String> {
        self.routers.iter().map(|r| r.node.clone()).collect()
    }

    /// SIGKILLs router `node` and forgets it.
    pub fn kill9(&mut self, node: &str) {
        let i = self
            .routers
            .iter()
            .position(|r| r.node == node)
            .unwrap_or_else(|| panic!("no running router {node}"));
        self.routers.remove(i).kill9();
    }

    /// The tail of every router's log, for a failure message.
    pub fn logs(&self) -> String {
        let tails: Vec<String> = self.routers.iter().map(|r| r.tail(40)).collect();
        tails.join("\n")
    }

    /// Each router's view of the pool for a failure message: its Redis errors, the leases
    /// it won and lost, and its log tail.
    pub async fn diagnose(&self) -> String {
        let mut out = String::new();
        for r in &self.routers {
            let text = self.metrics(&r.node).await;
            let lease = |result| {
                router::sample(
                    &text,
                    "labrouter_cluster_leases_total",
                    &[("machine", "a-box"), ("result", result)],
                )
            };
            out += &format!(
                "{}: redis errors {}, leases won {}, lost {}\n",
                r.node,
                router::sample(&text, "labrouter_cluster_redis_errors_total", &[]),
                lease("won"),
                lease("lost"),
            );
        }
        out + &self.logs()
    }

    pub async fn ask(&self, node: &str, route: &str) -> Reply {
        router::ask(&self.client, &self.router(node).base, route).await
    }

    /// `per_node` requests for `route` to each of `nodes`, all in flight at once; their
    /// replies in the order they came.
    pub async fn burst(&self, nodes: &[&str], per_node: usize, route: &str) -> Vec<Reply> {
        self.spawn_burst(nodes, per_node, route).join_all().await
    }

    /// [`Lab::burst`] without waiting for the replies.
    pub fn spawn_burst(
        &self,
        nodes: &[&str],
        per_node: usize,
        route: &str,
    ) -> tokio::task::JoinSet<Reply> {
        let mut set = tokio::task::JoinSet::new();
        for node in nodes {
            for _ in 0..per_node {
                let (client, base) = (self.client.clone(), self.router(node).base.clone());
                let route = route.to_string();
                set.spawn(async move { router::ask(&client, &base, &route).await });
            }
        }
        set
    }

    pub async fn status(&self, node: &str) -> Value {
        router::status(&self.client, &self.router(node).base).await
    }

    /// `/status`'s `machines.{machine}` on router `node`.
    pub async fn machine(&self, node: &str, machine: &str) -> Value {
        let status = self.status(node).await;
        let view = status["machines"][machine].clone();
        assert!(view.is_object(), "{node}: no machine {machine} in {status}");
        view
    }

    /// `/status`'s `cluster` on router `node`.
    pub async fn cluster(&self, node: &str) -> Value {
        self.status(node).await["cluster"].clone()
    }

    pub async fn metrics(&self, node: &str) -> String {
        router::metrics(&self.client, &self.router(node).base).await
    }

    // === Redis, as the routers use it ===

    /// `{prefix}:{kind}:{url}`: `verdict`, `cooldown`, `gen` or `probe` of a machine.
    pub fn key(&self, kind: &str, machine: &Sim) -> String {
        format!("{}:{kind}:{}", self.prefix, machine.base_url())
    }

    /// The pub/sub channel of verdicts.
    pub fn channel(&self) -> String {
        format!("{}:verdicts", self.prefix)
    }

    // === waiting ===

    /// Polls `done` every [`POLL`] until it holds; after `limit`, panics with `what` and the
    /// routers' logs.
    pub async fn until(&self, what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !done().await {
            assert!(
                Instant::now() < deadline,
                "timed out after {limit:?} waiting: {what}\n{}",
                self.logs()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls `/status` on each of `nodes` until `machine`'s view satisfies `holds` on all of
    /// them; returns those views. After `limit`, panics with `what` and the last views.
    pub async fn until_machine(
        &self,
        nodes: &[&str],
        machine: &str,
        what: &str,
        limit: Duration,
        holds: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let mut views = Vec::new();
            for node in nodes {
                views.push(self.machine(node, machine).await);
            }
            if views.iter().all(&holds) {
                return views;
            }
            if Instant::now() >= deadline {
                let seen: Vec<String> = nodes
                    .iter()
                    .zip(&views)
                    .map(|(n, v)| format!("{n}: {v}"))
                    .collect();
                panic!(
                    "timed out after {limit:?} waiting: {machine} {what}\n{}\n{}",
                    seen.join("\n"),
                    self.logs()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls until `/status.cluster.state` is `state` on each of `nodes`.
    pub async fn until_cluster(&self, nodes: &[&str], state: &str, limit: Duration) {
        let what = format!("cluster.state {state:?} on {nodes:?}");
        self.until(&what, limit, async || {
            for node in nodes {
                if self.cluster(node).await["state"] != state {
                    return false;
                }
            }
            true
        })
        .await;
    }

    // === steps the scenarios share ===

    /// With `a-box` failing, sends requests through `node` alone until its breaker opens:
    /// each is served by the fallback, and exactly `failure_threshold` (3) reached `a-box`.
    pub async fn trip_a(&self, node: &str) {
        self.a.set(Fault::Status {
            code: 500,
            retry_after: None,
        });
        let before = self.a.work_hits();
        for _ in 0..10 {
            let reply = self.ask(node, "shared").await;
            assert!(reply.served_by(B), "{node} falls back to b-box: {reply:?}");
            if self.machine(node, "a-box").await["state"] == "open" {
                assert_eq!(
                    self.a.work_hits() - before,
                    3,
                    "{node} opened a-box after 3 failures, each one request on the wire"
                );
                return;
            }
        }
        panic!(
            "{node} did not open a-box after 10 failing requests\n{}",
            self.logs()
        );
    }

    /// Waits until `nodes` hold `a-box` open as `decider` decided it (within
    /// [`ADOPT_WITHIN`]); their views.
    pub async fn until_adopted(&self, nodes: &[&str], decider: &str) -> Vec<Value> {
        let what = format!("open, decided by {decider}");
        self.until_machine(nodes, "a-box", &what, ADOPT_WITHIN, |m| {
            verdict_is(m, "open", decider)
        })
        .await
    }

    /// Waits until `a-box`'s cooldown has run out on each of `nodes` (open or half-open,
    /// nothing left): the next request there may probe.
    pub async fn until_cooldown_over(&self, nodes: &[&str], limit: Duration) {
        self.until_machine(nodes, "a-box", "cooldown over", limit, |m| {
            (m["state"] == "open" || m["state"] == "half_open") && m["cooldown_left_ms"] == 0
        })
        .await;
    }
}

/// `state` is `want` and `decided_by` is `node`.
pub fn verdict_is(view: &Value, want: &str, node: &str) -> bool {
    view["state"] == want && view["decided_by"] == node
}

/// libfaketime: `LABROUTER_TEST_FAKETIME`, else Debian's path. Missing is a failure with
/// what to do, never a skip.
fn faketime_library() -> String {
    let path = std::env::var("LABROUTER_TEST_FAKETIME")
        .unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1".into());
    assert!(
        std::path::Path::new(&path).is_file(),
        "libfaketime is missing at {path}: run scripts/test.sh, which installs it (Debian: faketime), or set LABROUTER_TEST_FAKETIME"
    );
    path
}
