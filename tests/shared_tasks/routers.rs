//! Real routers on one shared queue: the `labrouter` binary as child processes
//! (`tests/support/process.rs`) with `cluster.tasks: shared` on a durable `redis-server`,
//! in front of one simulated machine in this process, whose request count is the witness.

use std::path::PathBuf;
use std::time::Duration;

use labrouter::sim::Sim;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::pool::durable_redis;
use crate::process::Router;
use crate::redis::RedisServer;

/// A lab: Redis, one machine, and the routers started so far.
pub struct Lab {
    pub redis: RedisServer,
    pub sim: Sim,
    pub routers: Vec<Router>,
    pub client: reqwest::Client,
    dir: tempfile::TempDir,
    /// `cluster.task_lease`.
    lease: &'static str,
    /// `tasks.max_running` (the pool's, as each router started from now on counts it), and
    /// the machine's `task_slots`.
    pub slots: u32,
    /// `defaults.breaker`, when set; and whether the machine's verdict is shared (its URL is
    /// loopback: not by default).
    pub breaker: Option<&'static str>,
    pub shared: bool,
    /// The machine's `task_slots` when not `slots`.
    pub task_slots: Option<u32>,
    /// Whether the machine also draws: an image model and a route `draw` for it.
    pub images: bool,
}

impl Lab {
    pub async fn start(lease: &'static str, slots: u32) -> Lab {
        Lab {
            redis: durable_redis().await,
            sim: Sim::start("slow-box").await.unwrap(),
            routers: Vec::new(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
            dir: tempfile::tempdir().unwrap(),
            lease,
            slots,
            breaker: None,
            shared: false,
            task_slots: None,
            images: false,
        }
    }

    /// Starts router `node`; its index in [`Lab::routers`].
    pub async fn add_router(&mut self, node: &str) -> usize {
        let path = self.dir.path().join(format!("{node}.yaml"));
        let state: PathBuf = self.dir.path().join(format!("{node}-state"));
        std::fs::write(&path, self.registry(node, &state)).unwrap();
        let env = [("LABROUTER_REDIS_URL", self.redis.url())];
        self.routers.push(Router::start_with(&path, &env).await);
        self.routers.len() - 1
    }

    /// Starts router `node` expecting it to refuse to start: what it said (its log and
    /// error), once it exited with a failure (within 10 s).
    pub async fn refused(&self, node: &str) -> String {
        let path = self.dir.path().join(format!("{node}.yaml"));
        let state: PathBuf = self.dir.path().join(format!("{node}-state"));
        std::fs::write(&path, self.registry(node, &state)).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("LABROUTER_REDIS_URL", self.redis.url())
            .env_remove("LABROUTER_CONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("router {node} did not refuse to start");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(!status.success(), "refused, so it fails: {status}");
        let mut said = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
        said
    }

    /// Router `node`'s registry, its state under `state`.
    pub fn registry(&self, node: &str, state: &std::path::Path) -> String {
        format!(
            r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
  shutdown_grace: 1s
cluster:
  redis_url_env: LABROUTER_REDIS_URL
  prefix: pool
  node: {node}
  tasks: shared
  task_lease: {lease}
  task_timeout: 400ms
defaults:
  timeouts: {{ connect: 1s, first_byte: 20s, idle: 20s, total: 1m }}
{breaker}tasks:
  max_running: {slots}
machines:
  slow-box: {{ url: "{url}", max_concurrency: 64, task_slots: {task_slots}, shared: {shared} }}
models:
  slow-m: {{ machine: slow-box, name: slow-model }}
{draw_model}routes:
  - {{ name: slow, default: true, chain: [slow-m] }}
{draw_route}"#,
            state = state.display(),
            lease = self.lease,
            slots = self.slots,
            url = self.sim.base_url(),
            breaker = self
                .breaker
                .map_or(String::new(), |b| format!("  breaker: {b}\n")),
            shared = self.shared,
            task_slots = self.task_slots.unwrap_or(self.slots),
            draw_model = match self.images {
                true => "  draw-m: { machine: slow-box, name: sdxl, kind: image }\n",
                false => "",
            },
            draw_route = match self.images {
                true => "  - { name: draw, chain: [draw-m] }\n",
                false => "",
            },
        )
    }

    pub fn base(&self, router: usize) -> &str {
        &self.routers[router].base
    }

    /// POSTs a submit of task `n` to `router`, with `key` as its `Idempotency-Key`.
    pub async fn submit(&self, router: usize, n: u32, key: Option<&str>) -> reqwest::Response {
        let body = json!({
            "request": {"model": "auto", "messages": [
                {"role": "user", "content": format!("task {n}: summarise this")}
            ]},
            "metadata": {"n": n.to_string()},
        });
        let mut req = self
            .client
            .post(format!("{}/v1/tasks", self.base(router)))
            .json(&body);
        if let Some(key) = key {
            req = req.header("idempotency-key", key);
        }
        req.send().await.expect("the router answers a submit")
    }

    /// Submits task `n` to `router`; its id (the submit must be acknowledged, 202).
    pub async fn submitted(&self, router: usize, n: u32) -> String {
        let resp = self.submit(router, n, None).await;
        assert_eq!(resp.status(), 202, "submit {n}");
        let task: Value = resp.json().await.unwrap();
        task["id"].as_str().unwrap().to_string()
    }

    /// GET `path` on `router` as JSON, with its status.
    /// A chat completion through `router`: its status (chat never touches the queue).
    pub async fn chat(&self, router: usize) -> u16 {
        self.client
            .post(format!("{}/v1/chat/completions", self.base(router)))
            .json(&serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    pub async fn get(&self, router: usize, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.base(router)))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Polls `done` every 50 ms until it holds; after `limit`, panics with `what` and the
    /// routers' logs.
    pub async fn until(&self, what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !done().await {
            assert!(
                Instant::now() < deadline,
                "timed out: {what}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn logs(&self) -> String {
        self.routers
            .iter()
            .enumerate()
            .map(|(i, r)| format!("--- router {i} ---\n{}", r.logs()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How many scripts (`EVALSHA`, `EVAL`) Redis has run so far.
pub async fn scripts_run(redis: &RedisServer) -> u64 {
    let mut c = redis.client().await;
    let info = match c.cmd(&["INFO", "commandstats"]).await {
        crate::redis::Reply::Str(s) => s,
        other => panic!("INFO commandstats: {other:?}"),
    };
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
