//! Running as a service: reloads that keep breaker state, a rejected registry that leaves
//! the old one serving, /status and the dashboard; and the whole service (`labrouter::run`)
//! in-process: a watched file, a reload trigger, health checks, counter samples without
//! Telegram, a drained shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::{RunOptions, Service};
use serde_json::Value;
use support::{header, registry_yaml};
use tokio::sync::{oneshot, Notify};

struct Lab {
    gpu: Sim,
    cpu: Sim,
    local: Sim,
    dir: tempfile::TempDir,
}

impl Lab {
    async fn start() -> Lab {
        Lab {
            gpu: Sim::start("gpu-box").await.unwrap(),
            cpu: Sim::start("ubuntu-box").await.unwrap(),
            local: Sim::start("local").await.unwrap(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self) -> std::path::PathBuf {
        self.dir.path().join("registry.yaml")
    }

    fn write(&self, yaml: &str) {
        // As editors do: a new file renamed over the old one.
        let tmp = self.dir.path().join(".registry.yaml.swp");
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.config()).unwrap();
    }

    fn yaml(&self) -> String {
        registry_yaml(&self.gpu, &self.cpu, &self.local, "")
    }

    fn service(&self) -> Arc<Service> {
        let reg = Registry::load(&self.config()).unwrap();
        Arc::new(Service::in_memory(reg, Some(self.config())).unwrap())
    }

    /// The router alone ([`labrouter::serve`]): no background tasks.
    async fn serve(&self) -> (Arc<Service>, String) {
        let svc = self.service();
        let (base, _) = support::serve(Arc::clone(&svc)).await;
        (svc, base)
    }
}

/// The whole service ([`labrouter::run`]) on a listener the test holds.
struct Running {
    base: String,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn start(svc: Arc<Service>, opts: RunOptions) -> Running {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let served = tokio::spawn(labrouter::run(svc, listener, shutdown, opts));
        // run starts its background tasks (the watcher among them) before it accepts: once
        // it answers, they are running.
        let up = reqwest::get(format!("{base}/healthz")).await.unwrap();
        assert_eq!(up.status(), 200);
        Running { base, stop, served }
    }

    /// Resolves run's shutdown future; returns what run returned.
    async fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        self.served.await.unwrap()
    }
}

async fn chat(base: &str, model: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
}

/// Waits (at most 2.5 s, real time) until `n` requests have reached `sim`; asserts they did.
async fn until_work_hits(sim: &Sim, n: u64) {
    for _ in 0..250 {
        if sim.work_hits() == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sim.work_hits(), n, "{n} request(s) reached the machine");
}

/// `run` (behind `stopped`) returned Ok after its drain, and nothing listens at `base`.
async fn drained_and_closed(stopped: tokio::task::JoinHandle<std::io::Result<()>>, base: &str) {
    stopped
        .await
        .unwrap()
        .expect("run returned Ok after draining");
    assert!(
        reqwest::get(format!("{base}/healthz")).await.is_err(),
        "no longer listening"
    );
}

fn phase(svc: &Service, machine: &str) -> String {
    let lab = svc.fleet();
    let i = lab.registry.machine_index(machine).unwrap();
    lab.machines.phase(i).as_str().to_string()
}

#[tokio::test(start_paused = true)]
async fn a_valid_reload_keeps_breaker_state_drops_removed_and_routes_new_machines() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (svc, base) = lab.serve().await;
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        chat(&base, "code").await;
    }
    assert_eq!(phase(&svc, "gpu-box"), "open");

    // Add a machine with a model and a route; nothing else changes.
    let mac = Sim::start("mac-studio").await.unwrap();
    let yaml = lab
        .yaml()
        .replace(
            "machines:\n",
            &format!(
                "machines:\n  mac-studio: {{ url: \"{}\" }}\n",
                mac.base_url()
            ),
        )
        .replace(
            "models:\n",
            "models:\n  mac-coder: { machine: mac-studio, name: \"qwen3-coder:30b-mlx\" }\n",
        );
    lab.write(&yaml);
    let resp = reqwest::Client::new()
        .post(format!("{base}/admin/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["reloaded"]["added"][0], "mac-studio");

    assert_eq!(
        phase(&svc, "gpu-box"),
        "open",
        "breaker state survives the reload"
    );
    let resp = chat(&base, "code").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(lab.gpu.work_hits(), 3);
    let resp = chat(&base, "mac-coder").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "mac-coder@mac-studio");
    assert_eq!(mac.work_hits(), 1);
    assert_eq!(phase(&svc, "mac-studio"), "closed");

    // Remove it again: it goes, requests naming it are told so.
    lab.write(&lab.yaml());
    svc.reload().unwrap();
    assert!(svc.fleet().registry.machine_index("mac-studio").is_none());
    assert_eq!(chat(&base, "mac-coder").await.status(), 400);
    assert_eq!(phase(&svc, "gpu-box"), "open");
}

#[tokio::test(start_paused = true)]
async fn an_invalid_reload_is_rejected_and_the_old_registry_keeps_serving() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (svc, base) = lab.serve().await;
    let version = svc.fleet().registry.version.clone();
    lab.write(&lab.yaml().replace("chain: [small]", "chain: [smal]"));
    let resp = reqwest::Client::new()
        .post(format!("{base}/admin/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let v: Value = resp.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("registry.yaml:") && msg.contains("unknown model 'smal'"),
        "{msg}"
    );
    assert_eq!(svc.fleet().registry.version, version);
    assert_eq!(
        chat(&base, "chat").await.status(),
        200,
        "the old registry serves on"
    );
}

#[tokio::test(start_paused = true)]
async fn a_401_pause_is_lifted_by_a_reload() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (svc, base) = lab.serve().await;
    lab.local.set(Fault::Status {
        code: 401,
        retry_after: None,
    });
    chat(&base, "chat").await;
    assert_eq!(phase(&svc, "local"), "auth_failed");
    lab.local.set(Fault::Ok);
    svc.reload().unwrap();
    assert_eq!(phase(&svc, "local"), "closed");
    assert_eq!(chat(&base, "chat").await.status(), 200);
}

/// Polls (bounded: up to 10s in 20ms steps) until the service serves another registry.
async fn reloaded(svc: &Service, before: &str) -> bool {
    for _ in 0..500 {
        if svc.fleet().registry.version != before {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saving_the_registry_file_reloads_it() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let svc = lab.service();
    // run watches the file because the service knows it.
    let running = Running::start(Arc::clone(&svc), RunOptions::default()).await;
    let before = svc.fleet().registry.version.clone();
    lab.write(&lab.yaml().replace(
        "keywords: [image, photo]",
        "keywords: [image, photo, diagram]",
    ));
    assert!(
        reloaded(&svc, &before).await,
        "the watcher reloaded the saved file"
    );
    assert!(svc.fleet().registry.routes[labrouter::outcome::RouteId(1)]
        .keywords
        .contains(&"diagram".to_string()));
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_trigger_reloads_the_registry_file() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let svc = lab.service();
    let before = svc.fleet().registry.version.clone();
    // Saved before run starts watching: only the trigger can reload it.
    lab.write(&lab.yaml().replace(
        "keywords: [image, photo]",
        "keywords: [image, photo, diagram]",
    ));
    let trigger = Arc::new(Notify::new());
    let opts = RunOptions {
        reload: Some(Arc::clone(&trigger)),
        ..RunOptions::default()
    };
    let running = Running::start(Arc::clone(&svc), opts).await;
    trigger.notify_one();
    assert!(
        reloaded(&svc, &before).await,
        "the trigger reloaded the file"
    );
    assert!(svc.fleet().registry.routes[labrouter::outcome::RouteId(1)]
        .keywords
        .contains(&"diagram".to_string()));
    running.stop().await.unwrap();
}

/// The hot pool closes a connection idle past 90 s even when its machine is asked no more
/// (a sweep every 30 s in `run`); until then it is kept for the next request.
#[tokio::test(start_paused = true)]
async fn an_upstream_connection_idle_past_90_s_is_closed_though_nothing_asks_its_machine() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let running = Running::start(lab.service(), RunOptions::default()).await;
    let resp = chat(&running.base, "code").await;
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap();
    assert_eq!(lab.gpu.open_connections(), 1);
    tokio::time::sleep(Duration::from_secs(80)).await;
    assert_eq!(
        lab.gpu.open_connections(),
        1,
        "kept while idle less than 90 s"
    );
    tokio::time::sleep(Duration::from_secs(40)).await;
    for _ in 0..200 {
        if lab.gpu.open_connections() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        lab.gpu.open_connections(),
        0,
        "closed by the sweep after 90 s idle"
    );
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn status_and_dashboard_show_every_machine_and_state() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (_svc, base) = lab.serve().await;
    lab.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        chat(&base, "code").await;
    }
    tokio::time::sleep(Duration::from_secs(19)).await;
    let v: Value = reqwest::get(format!("{base}/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let gpu = &v["machines"]["gpu-box"];
    assert_eq!(gpu["state"], "open");
    assert_eq!(gpu["consecutive_failures"], 3);
    assert_eq!(gpu["last_reason"], "HTTP 500");
    let left = gpu["cooldown_left_ms"].as_u64().unwrap();
    assert!((40_000..=41_000).contains(&left), "{left}");
    assert!(gpu["opened_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(gpu["remote_attempts"], 3);
    assert_eq!(v["machines"]["ubuntu-box"]["state"], "closed");
    assert_eq!(v["machines"]["ubuntu-box"]["remote_attempts"], 3);
    assert!(v["host"]["mem_total_bytes"].as_u64().unwrap() > 0);
    assert!(v["host"]["uptime_s"].as_u64().is_some());

    // A browser asks for HTML (anything else gets Ollama's greeting, docs/api.md "The Ollama endpoints").
    let page = reqwest::Client::new()
        .get(format!("{base}/"))
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    let html = page.text().await.unwrap();
    assert!(html.contains("<html") && html.contains("status/events"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained: no CDN"
    );

    let text = labrouter::status::table(&serde_json::from_value(v.clone()).unwrap());
    assert!(
        text.contains("gpu-box") && text.contains("open") && text.contains("HTTP 500"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_a_request_in_flight_and_run_returns_ok() {
    let lab = Lab::start().await;
    let yaml = lab.yaml().replace(
        "  max_body: 64KiB",
        &format!(
            "  max_body: 64KiB\n  state_dir: \"{}\"",
            lab.dir.path().join("state").display()
        ),
    );
    lab.write(&yaml);
    // As `labrouter serve` starts it: the registry file, memory under its state_dir.
    let svc = Arc::new(Service::open(&lab.config()).unwrap());
    let running = Running::start(svc, RunOptions::default()).await;
    let base = running.base.clone();

    // The `labrouter status` binary against the running server.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(["status", "--url", &base])
        .output()
        .await
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && table.contains("gpu-box") && table.contains("closed"),
        "{table}"
    );

    // A slow generation is in flight when the shutdown future resolves.
    lab.local
        .set(Fault::SlowFirstByte(Duration::from_millis(800)));
    let request = tokio::spawn({
        let base = base.clone();
        async move { chat(&base, "chat").await }
    });
    until_work_hits(&lab.local, 1).await;
    let stopped = tokio::spawn(running.stop());
    let resp = request.await.unwrap();
    assert_eq!(
        resp.status(),
        200,
        "the request in flight was drained, not cut"
    );
    assert_eq!(support::content(resp).await, "ok from local");
    drained_and_closed(stopped, &base).await;
}

#[tokio::test(start_paused = true)]
async fn health_checks_open_an_idle_dead_machine_and_close_it_when_it_is_back() {
    let lab = Lab::start().await;
    let yaml = lab.yaml().replace(
        &format!("gpu-box: {{ url: \"{}\" }}", lab.gpu.base_url()),
        &format!(
            "gpu-box: {{ url: \"{}\", health: {{ path: /models, every: 10s }} }}",
            lab.gpu.base_url()
        ),
    );
    lab.write(&yaml);
    let svc = lab.service();
    // run starts the health checks.
    let running = Running::start(Arc::clone(&svc), RunOptions::default()).await;
    lab.gpu.set(Fault::Status {
        code: 503,
        retry_after: None,
    }); // /v1/models still answers 200
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!(
        phase(&svc, "gpu-box"),
        "closed",
        "a 200 on /models is healthy"
    );
    lab.gpu.set(Fault::Refuse);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(
        phase(&svc, "gpu-box"),
        "open",
        "three failed checks, no user request"
    );
    assert_eq!(lab.gpu.work_hits(), 0);
    lab.gpu.set(Fault::Ok);
    tokio::time::sleep(Duration::from_secs(75)).await;
    assert_eq!(
        phase(&svc, "gpu-box"),
        "closed",
        "a passing check after the cooldown acted as the probe"
    );
    assert_eq!(lab.gpu.work_hits(), 0, "still no user request spent on it");

    // The checks stop with run.
    running.stop().await.unwrap();
    let checks = lab.gpu.hits("/v1/models");
    assert!(checks > 0);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        lab.gpu.hits("/v1/models"),
        checks,
        "no check after run returned"
    );
}

#[tokio::test(start_paused = true)]
async fn counter_samples_are_written_every_minute_without_telegram() {
    let lab = Lab::start().await;
    let yaml = lab.yaml().replace(
        "  max_body: 64KiB",
        &format!(
            "  max_body: 64KiB\n  state_dir: \"{}\"",
            lab.dir.path().join("state").display()
        ),
    );
    lab.write(&yaml);
    let svc = Arc::new(Service::open(&lab.config()).unwrap());
    assert!(
        svc.fleet().registry.telegram.is_none(),
        "no telegram: block"
    );
    // run samples the counters: at start, then every minute.
    let running = Running::start(Arc::clone(&svc), RunOptions::default()).await;
    assert_eq!(chat(&running.base, "chat").await.status(), 200);
    assert_eq!(lab.local.work_hits(), 1);
    tokio::time::sleep(Duration::from_secs(61)).await;
    running.stop().await.unwrap();

    let store = svc.store().unwrap();
    let read = || labrouter::store::counter_samples(store.path(), 0).unwrap();
    let samples = read();
    for machine in ["gpu-box", "ubuntu-box", "local"] {
        assert!(
            samples.iter().filter(|s| s.machine == machine).count() >= 2,
            "{machine}: a sample at start and a minute later: {samples:?}"
        );
    }
    assert!(
        samples.iter().all(|s| s.boot_ms == svc.boot_ms()),
        "every sample names this process: {samples:?}"
    );
    let local: Vec<u64> = samples
        .iter()
        .filter(|s| s.machine == "local")
        .map(|s| s.remote_attempts)
        .collect();
    assert_eq!(local.first(), Some(&0), "before the request: {samples:?}");
    assert_eq!(local.last(), Some(&1), "after the request: {samples:?}");

    // The sampling stops with run.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(store.flush(Duration::from_secs(5)));
    assert_eq!(read().len(), samples.len(), "no sample after run returned");
}

// === `labrouter serve`'s serving threads (RunOptions::workers) ===

/// The whole service on two serving threads of its own, each its own runtime.
async fn on_two_threads(lab: &Lab, server: &str) -> Running {
    lab.write(
        &lab.yaml()
            .replace("  max_body: 64KiB", &format!("  max_body: 64KiB\n{server}")),
    );
    labrouter::upstream::worker_pools(2);
    let opts = RunOptions {
        workers: 2,
        ..RunOptions::default()
    };
    Running::start(lab.service(), opts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_threads_drain_every_request_in_flight_and_run_returns_ok() {
    let lab = Lab::start().await;
    let running = on_two_threads(&lab, "").await;
    let base = running.base.clone();
    lab.local
        .set(Fault::SlowFirstByte(Duration::from_millis(600)));
    // Six requests on six connections, accepted by whichever thread is free.
    let requests: Vec<_> = (0..6)
        .map(|_| tokio::spawn(chat_on_own_connection(base.clone())))
        .collect();
    until_work_hits(&lab.local, 6).await;
    let stopped = tokio::spawn(running.stop());
    // The machine answers 600 ms after each arrived: run is still draining.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopped.is_finished(),
        "run returned before its threads drained"
    );
    for request in requests {
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200, "drained, not cut: {body}");
        assert!(body.contains("ok from local"), "{body}");
    }
    drained_and_closed(stopped, &base).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_threads_share_one_max_connections_bound() {
    let lab = Lab::start().await;
    let running = on_two_threads(
        &lab,
        "  max_connections: 2\n  header_timeout: 10s\n  idle_timeout: 10s",
    )
    .await;
    let addr = running.base.trim_start_matches("http://").to_string();
    // Running::start's own check has closed by now or holds a permit until it does: wait
    // until two kept-alive connections are both answered.
    let mut first = healthz_connection(&addr).await;
    let second = healthz_connection(&addr).await;
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    write_healthz(&mut third).await;
    // Two open connections hold both permits, whichever threads accepted them: the third
    // waits in the accept queue (a bound per thread would let the other thread serve it).
    let mut buf = [0u8; 512];
    let early =
        tokio::time::timeout(Duration::from_millis(300), read_some(&mut third, &mut buf)).await;
    assert!(
        early.is_err(),
        "the third connection was served past max_connections 2"
    );
    // One closes: the third is accepted and answered.
    drop(second);
    let n = tokio::time::timeout(Duration::from_secs(10), read_some(&mut third, &mut buf))
        .await
        .expect("the third connection is served once a permit is free");
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    write_healthz(&mut first).await;
    assert!(read_some(&mut first, &mut buf).await > 0);
    drop((first, third));
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serving_thread_closes_the_idle_connections_a_load_left_once_it_falls_quiet() {
    let lab = Lab::start().await;
    let running = on_two_threads(&lab, "").await;
    // A load: 8 clients at once (the machine's max_concurrency), for at least 600 ms and 40
    // requests each: the machine sees up to 8 connections from the router's two pools.
    let client = reqwest::Client::new();
    let started = tokio::time::Instant::now();
    let loads: Vec<_> = (0..8)
        .map(|_| {
            let (client, base) = (client.clone(), running.base.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while n < 40 || started.elapsed() < Duration::from_millis(600) {
                    let resp = client
                        .post(format!("{base}/v1/chat/completions"))
                        .json(&serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await
                        .unwrap();
                    let status = resp.status();
                    assert_eq!(status, 200, "{}", resp.text().await.unwrap_or_default());
                    n += 1;
                }
            })
        })
        .collect();
    for load in loads {
        load.await.unwrap();
    }
    let left = lab.local.open_connections();
    assert!(
        left >= 4,
        "the load kept only {left} connections to the machine"
    );
    // The pool would keep them 90 s; quiet threads close theirs within a few ticks.
    let mut open = left;
    for _ in 0..200 {
        open = lab.local.open_connections();
        if open <= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        open <= 1,
        "{open} of {left} connections still open 10 s after the load"
    );
    // And the next request opens a fresh one.
    assert_eq!(chat(&running.base, "chat").await.status(), 200);
    running.stop().await.unwrap();
}

/// A chat request on a client of its own (so a connection of its own): status and body.
async fn chat_on_own_connection(base: String) -> (u16, String) {
    let resp = chat(&base, "chat").await;
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

/// A connection that has had one `/healthz` answered and stays open.
async fn healthz_connection(addr: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    write_healthz(&mut s).await;
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), read_some(&mut s, &mut buf))
        .await
        .expect("served");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    s
}

async fn write_healthz(s: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
}

async fn read_some(s: &mut tokio::net::TcpStream, buf: &mut [u8]) -> usize {
    use tokio::io::AsyncReadExt;
    s.read(buf).await.unwrap()
}
