//! A lab with a store: three simulated machines, the router serving on a held listener,
//! its tasks in a SQLite file in a temporary directory.

use std::sync::Arc;
use std::time::Duration;

use labrouter::outcome::TaskStatus;
use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::{RunOptions, Service};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::support::registry_yaml_with;

pub struct Lab {
    pub gpu: Sim,
    pub cpu: Sim,
    pub local: Sim,
    pub dir: tempfile::TempDir,
    pub svc: Arc<Service>,
    pub base: String,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Lab {
    /// `tasks` is YAML under `tasks:` (two-space indented lines), or "".
    pub async fn start(tasks: &str) -> Lab {
        let gpu = Sim::start("gpu-box").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let local = Sim::start("local").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        Lab::on(gpu, cpu, local, dir, tasks).await
    }

    /// [`Lab::start`] with `defaults` YAML added under `defaults:`.
    pub async fn start_with(tasks: &str, defaults: &str) -> Lab {
        Lab::start_full(tasks, defaults, "").await
    }

    /// [`Lab::start_with`] with `server` YAML added under `server:`.
    pub async fn start_full(tasks: &str, defaults: &str, server: &str) -> Lab {
        let gpu = Sim::start("gpu-box").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let local = Sim::start("local").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        Lab::on_full(gpu, cpu, local, dir, tasks, defaults, server).await
    }

    /// [`Lab::start`] with image models too: route `draw` is `sdxl-gpu` (gpu-box), then
    /// `sdxl-cpu` (ubuntu-box).
    pub async fn start_images(tasks: &str) -> Lab {
        let gpu = Sim::start("gpu-box").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let local = Sim::start("local").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let server = format!("  state_dir: \"{}\"\n", dir.path().display());
        let yaml = with_images(registry_yaml_with(&gpu, &cpu, &local, &server, ""));
        Lab::serve(gpu, cpu, local, dir, tasks, yaml).await
    }

    /// [`Lab::start`] whose route `code` begins with a tier of the GPU and CPU boxes:
    /// `[[coder-gpu, coder-cpu], small]`.
    pub async fn start_tiered(tasks: &str) -> Lab {
        let gpu = Sim::start("gpu-box").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let local = Sim::start("local").await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let server = format!("  state_dir: \"{}\"\n", dir.path().display());
        let yaml = registry_yaml_with(&gpu, &cpu, &local, &server, "");
        let plain = "chain: [coder-gpu, coder-cpu, small]";
        assert!(yaml.contains(plain));
        let yaml = yaml.replace(plain, "chain: [[coder-gpu, coder-cpu], small]");
        Lab::serve(gpu, cpu, local, dir, tasks, yaml).await
    }

    /// A router on these machines and this state directory (a restart reuses both).
    pub async fn on(gpu: Sim, cpu: Sim, local: Sim, dir: tempfile::TempDir, tasks: &str) -> Lab {
        Lab::on_with(gpu, cpu, local, dir, tasks, "").await
    }

    async fn on_with(
        gpu: Sim,
        cpu: Sim,
        local: Sim,
        dir: tempfile::TempDir,
        tasks: &str,
        defaults: &str,
    ) -> Lab {
        Lab::on_full(gpu, cpu, local, dir, tasks, defaults, "").await
    }

    async fn on_full(
        gpu: Sim,
        cpu: Sim,
        local: Sim,
        dir: tempfile::TempDir,
        tasks: &str,
        defaults: &str,
        server_extra: &str,
    ) -> Lab {
        let server = format!("  state_dir: \"{}\"\n{server_extra}", dir.path().display());
        let yaml = registry_yaml_with(&gpu, &cpu, &local, &server, defaults);
        Lab::serve(gpu, cpu, local, dir, tasks, yaml).await
    }

    /// A router on `yaml` (with `tasks` added under `tasks:`), these machines and this
    /// state directory.
    async fn serve(
        gpu: Sim,
        cpu: Sim,
        local: Sim,
        dir: tempfile::TempDir,
        tasks: &str,
        mut yaml: String,
    ) -> Lab {
        if !tasks.is_empty() {
            yaml.push_str("tasks:\n");
            yaml.push_str(tasks);
        }
        let registry = Registry::parse(&yaml, "tasks.yaml").unwrap();
        let svc = Arc::new(Service::remembering(registry, None).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(labrouter::run(
            Arc::clone(&svc),
            listener,
            async {
                let _ = stopped.await;
            },
            RunOptions::default(),
        ));
        let client = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Lab {
            gpu,
            cpu,
            local,
            dir,
            svc,
            base,
            client,
            stop: Some(stop),
            served: Some(served),
        }
    }

    /// Stops the router as a kill would: no drain, no flush; returns the machines and the
    /// state directory for a restart.
    pub async fn crash(mut self) -> (Sim, Sim, Sim, tempfile::TempDir) {
        if let Some(s) = self.served.take() {
            s.abort();
            let _ = s.await;
        }
        // What was sent to the writer before the kill lands (as if the crash came a moment
        // later); then the service and its store are leaked, as a killed process leaves
        // them: nothing is drained or flushed.
        if let Some(store) = self.svc.store() {
            store.flush(Duration::from_secs(5));
        }
        std::mem::forget(Arc::clone(&self.svc));
        (self.gpu, self.cpu, self.local, self.dir)
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(s) = self.served.take() {
            let _ = s.await;
        }
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// Submits a chat task routed by `text`; `extra` adds submit fields. The task object.
    pub async fn submit(&self, text: &str, extra: Value) -> Value {
        let mut body =
            json!({"request": {"model": "auto", "messages": [{"role": "user", "content": text}]}});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        let resp = self.post("/v1/tasks", body).await;
        assert_eq!(resp.status(), 202, "submit");
        resp.json().await.unwrap()
    }

    pub async fn task(&self, id: &str) -> Value {
        let resp = self.get(&format!("/v1/tasks/{id}")).await;
        assert_eq!(resp.status(), 200, "show {id}");
        resp.json().await.unwrap()
    }

    /// Work requests that reached each machine: (gpu, cpu, local).
    pub fn work(&self) -> (u64, u64, u64) {
        (
            self.gpu.work_hits(),
            self.cpu.work_hits(),
            self.local.work_hits(),
        )
    }

    /// Unfinished tasks in the queue.
    pub fn unfinished(&self) -> u64 {
        let c = self.svc.tasks().unwrap().counts();
        c.blocked + c.queued + c.waiting + c.running
    }

    /// Lets paused time pass in `step`s until no task is unfinished (at most `limit`).
    pub async fn settle(&self, step: Duration, limit: Duration) {
        let mut waited = Duration::ZERO;
        while self.unfinished() > 0 && waited < limit {
            tokio::time::sleep(step).await;
            waited += step;
        }
        assert_eq!(
            self.unfinished(),
            0,
            "tasks still unfinished after {limit:?}"
        );
    }

    /// How many of `ids` ended in each status.
    pub async fn statuses(&self, ids: &[String]) -> Vec<(TaskStatus, usize)> {
        let mut counts: std::collections::BTreeMap<TaskStatus, usize> = Default::default();
        for id in ids {
            let t = self.task(id).await;
            let s: TaskStatus = t["status"].as_str().unwrap().parse().unwrap();
            *counts.entry(s).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// Waits (paused time) until the store records task `id` as running after
    /// `interrupted` interruptions: a crash then interrupts it.
    pub async fn running_on_disk(&self, id: &str, interrupted: u32) {
        let id: labrouter::tasks::TaskId = id.parse().unwrap();
        for _ in 0..1000 {
            let id2 = id.clone();
            let store = self.svc.store().unwrap();
            let t = store
                .read(move |c| labrouter::store::tasks::task(c, &id2, None))
                .unwrap();
            if t.is_some_and(|t| t.status == TaskStatus::Running && t.interrupted == interrupted) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{id} never ran");
    }

    /// Waits (paused time) until `n` work requests in all have reached the machines (a
    /// task is recorded running just before its request is sent).
    pub async fn sent(&self, n: u64) {
        for _ in 0..1000 {
            let (a, b, c) = self.work();
            if a + b + c >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{n} requests never reached the machines");
    }

    pub fn phase(&self, machine: &str) -> String {
        let f = self.svc.fleet();
        let i = f.registry.machine_index(machine).unwrap();
        f.machines.phase(i).as_str().to_string()
    }
}

/// The test registry with an image route, `draw`: the GPU box's model, then the CPU box's.
fn with_images(yaml: String) -> String {
    let models = "  sdxl-gpu: { machine: gpu-box, name: sdxl-turbo, kind: image }\n  \
                  sdxl-cpu: { machine: ubuntu-box, name: sd-cpu, kind: image }\n";
    let routes = "  - name: draw\n    chain: [sdxl-gpu, sdxl-cpu]\n";
    yaml.replacen("models:\n", &format!("models:\n{models}"), 1)
        .replacen("routes:\n", &format!("routes:\n{routes}"), 1)
}
