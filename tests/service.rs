//! Running as a service: reloads that keep breaker state, a rejected registry that leaves
//! the old one serving, a watched file, /status and the dashboard, SIGTERM draining.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::Value;
use support::{header, registry_yaml};

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

    async fn serve(&self) -> (Arc<Service>, String) {
        let reg = Registry::load(&self.config()).unwrap();
        let svc = Arc::new(Service::in_memory(reg, Some(self.config())).unwrap());
        let (base, _) = support::serve(Arc::clone(&svc)).await;
        (svc, base)
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

fn phase(svc: &Service, machine: &str) -> String {
    let lab = svc.lab();
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
    assert!(svc.lab().registry.machine_index("mac-studio").is_none());
    assert_eq!(chat(&base, "mac-coder").await.status(), 400);
    assert_eq!(phase(&svc, "gpu-box"), "open");
}

#[tokio::test(start_paused = true)]
async fn an_invalid_reload_is_rejected_and_the_old_registry_keeps_serving() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (svc, base) = lab.serve().await;
    let version = svc.lab().registry.version.clone();
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
    assert_eq!(svc.lab().registry.version, version);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saving_the_registry_file_reloads_it() {
    let lab = Lab::start().await;
    lab.write(&lab.yaml());
    let (svc, _base) = lab.serve().await;
    let _watcher = labrouter::watch::spawn(Arc::clone(&svc), &lab.config()).unwrap();
    let before = svc.lab().registry.version.clone();
    lab.write(&lab.yaml().replace(
        "keywords: [image, photo]",
        "keywords: [image, photo, diagram]",
    ));
    // Bounded wait for the debounced reload: up to 10s in 20ms steps.
    let mut reloaded = false;
    for _ in 0..500 {
        if svc.lab().registry.version != before {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reloaded, "the watcher reloaded the saved file");
    assert!(svc.lab().registry.routes[1]
        .keywords
        .contains(&"diagram".to_string()));
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

    let page = reqwest::get(format!("{base}/")).await.unwrap();
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

/// The real binary on a registry file; SIGKILLed if still running when dropped.
struct Process(std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_request_in_flight_and_exits_0() {
    let lab = Lab::start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = lab
        .yaml()
        .replace("listen: 127.0.0.1:0", &format!("listen: 127.0.0.1:{port}"))
        .replace(
            "  max_body: 64KiB",
            &format!(
                "  max_body: 64KiB\n  state_dir: \"{}\"",
                lab.dir.path().join("state").display()
            ),
        );
    lab.write(&yaml);
    #[allow(clippy::zombie_processes)] // Drop kills and waits
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(["serve", "--config"])
        .arg(lab.config())
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut p = Process(child);
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..500 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "labrouter started");

    // `labrouter status` against the running process.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_labrouter"))
        .args(["status", "--url", &base])
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && table.contains("gpu-box") && table.contains("closed"),
        "{table}"
    );

    // A slow generation is in flight when SIGTERM arrives.
    lab.local
        .set(Fault::SlowFirstByte(Duration::from_millis(800)));
    let request = tokio::spawn({
        let base = base.clone();
        async move { chat(&base, "chat").await }
    });
    for _ in 0..250 {
        if lab.local.work_hits() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lab.local.work_hits(), 1, "the request reached the machine");
    let pid = p.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let resp = request.await.unwrap();
    assert_eq!(
        resp.status(),
        200,
        "the request in flight was drained, not cut"
    );
    assert_eq!(support::content(resp).await, "ok from local");
    let mut exited = None;
    for _ in 0..500 {
        if let Some(status) = p.0.try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = exited.expect("labrouter exited after draining");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        reqwest::get(format!("{base}/healthz")).await.is_err(),
        "no longer listening"
    );
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
    let (svc, _base) = lab.serve().await;
    tokio::spawn(labrouter::health::run(Arc::clone(&svc)));
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
}
