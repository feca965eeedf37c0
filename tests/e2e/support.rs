//! The test lab: three simulated machines (GPU box, CPU box, local) and a real router on
//! 127.0.0.1, talking HTTP. Tests count what reached each machine.

#![allow(dead_code)] // each test binary uses a different part of the lab

use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::{Fleet, Service};
use serde_json::{json, Value};

pub struct TestLab {
    pub gpu: Sim,
    pub cpu: Sim,
    pub local: Sim,
    pub svc: Arc<Service>,
    /// The lab the service started with (tests that reload read `svc.fleet()`).
    pub lab: Arc<Fleet>,
    pub base: String,
    pub client: reqwest::Client,
}

/// The registry of the test lab; `extra` is YAML appended under `defaults:` keys, e.g.
/// `"  max_concurrency: 1\n"`.
pub fn registry_yaml(gpu: &Sim, cpu: &Sim, local: &Sim, defaults_extra: &str) -> String {
    registry_yaml_with(gpu, cpu, local, "", defaults_extra)
}

/// [`registry_yaml`] with `server_extra` appended under `server:`.
pub fn registry_yaml_with(
    gpu: &Sim,
    cpu: &Sim,
    local: &Sim,
    server_extra: &str,
    defaults_extra: &str,
) -> String {
    format!(
        r#"server:
  listen: 127.0.0.1:0
  max_body: 64KiB
{server_extra}defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
  breaker: {{ failure_threshold: 3, cooldown: 60s, backoff: 2.0, max_cooldown: 15m, success_threshold: 1 }}
{defaults_extra}machines:
  gpu-box: {{ url: "{}" }}
  ubuntu-box: {{ url: "{}" }}
  local: {{ url: "{}" }}
models:
  coder-gpu: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  coder-cpu: {{ machine: ubuntu-box, name: "qwen3-coder:30b-q4" }}
  vision-gpu: {{ machine: gpu-box, name: "qwen2.5vl:7b" }}
  small: {{ machine: local, name: "qwen3:4b" }}
routes:
  - name: code
    keywords: [code, refactor, function, bug, rust, "unit test"]
    chain: [coder-gpu, coder-cpu, small]
  - name: vision
    keywords: [image, photo]
    images: true
    chain: [vision-gpu]
  - name: chat
    default: true
    chain: [small]
"#,
        gpu.base_url(),
        cpu.base_url(),
        local.base_url()
    )
}

impl TestLab {
    pub async fn start() -> TestLab {
        TestLab::start_with("").await
    }

    pub async fn start_with(defaults_extra: &str) -> TestLab {
        TestLab::start_custom("", defaults_extra).await
    }

    /// A lab whose registry has `server_extra` under `server:` and `defaults_extra` under
    /// `defaults:`.
    pub async fn start_custom(server_extra: &str, defaults_extra: &str) -> TestLab {
        TestLab::start_edited(server_extra, defaults_extra, |yaml| yaml).await
    }

    /// A lab whose registry text is passed through `edit` first (per-machine settings).
    pub async fn start_edited(
        server_extra: &str,
        defaults_extra: &str,
        edit: impl FnOnce(String) -> String,
    ) -> TestLab {
        let gpu = Sim::start("gpu-box").await.expect("sim");
        TestLab::start_on(gpu, server_extra, defaults_extra, edit).await
    }

    /// The lab with an Ollama server on the GPU box (`api: ollama`, docs/api.md "The Ollama endpoints"): the CPU box
    /// and local speak only OpenAI's API.
    pub async fn start_ollama_gpu() -> TestLab {
        let gpu = Sim::start_ollama("gpu-box").await.expect("sim");
        let url = gpu.base_url();
        TestLab::start_on(gpu, "", "", |yaml| {
            let plain = format!("gpu-box: {{ url: \"{url}\" }}");
            let ollama = format!("gpu-box: {{ url: \"{url}\", api: ollama }}");
            assert!(yaml.contains(&plain));
            yaml.replace(&plain, &ollama)
        })
        .await
    }

    async fn start_on(
        gpu: Sim,
        server_extra: &str,
        defaults_extra: &str,
        edit: impl FnOnce(String) -> String,
    ) -> TestLab {
        let cpu = Sim::start("ubuntu-box").await.expect("sim");
        let local = Sim::start("local").await.expect("sim");
        let yaml = edit(registry_yaml_with(
            &gpu,
            &cpu,
            &local,
            server_extra,
            defaults_extra,
        ));
        let registry = Registry::parse(&yaml, "test.yaml").expect("valid registry");
        // As `labrouter::run` does, and before the breakers exist: a gauge set with no
        // recorder installed is lost (tests/metrics.rs reads them).
        labrouter::telemetry::install();
        let svc = Arc::new(Service::in_memory(registry, None).expect("service"));
        let (base, lab) = serve(Arc::clone(&svc)).await;
        // Like any well-behaved client, drop pooled connections before the server's idle
        // timeout (60 s) would: tests sleep whole cooldowns between requests.
        let client = reqwest::Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client");
        TestLab {
            gpu,
            cpu,
            local,
            svc,
            lab,
            base,
            client,
        }
    }

    /// POSTs a chat completion with `model` and a last user message `text`.
    pub async fn chat(&self, model: &str, text: &str) -> reqwest::Response {
        self.post(
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": text}]}),
        )
        .await
    }

    pub async fn chat_stream(&self, model: &str, text: &str) -> reqwest::Response {
        self.post(
            "/v1/chat/completions",
            json!({"model": model, "stream": true, "messages": [{"role": "user", "content": text}]}),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("router answered")
    }

    /// Work requests (not liveness checks) that reached each machine: (gpu, cpu, local).
    pub fn work(&self) -> (u64, u64, u64) {
        (
            self.gpu.work_hits(),
            self.cpu.work_hits(),
            self.local.work_hits(),
        )
    }

    pub fn state(&self, machine: &str) -> String {
        let i = self.lab.registry.machine_index(machine).expect("machine");
        self.lab.machines.phase(i).as_str().to_string()
    }
}

pub fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// The assistant text of a non-streaming chat answer.
pub async fn content(resp: reqwest::Response) -> String {
    let v: Value = resp.json().await.expect("json answer");
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Serves `svc` on a loopback port for the rest of the test; returns its base URL.
pub async fn serve(svc: Arc<Service>) -> (String, Arc<Fleet>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let lab = svc.fleet();
    tokio::spawn(labrouter::serve(
        listener,
        svc,
        std::future::pending(),
        std::time::Duration::from_secs(30),
    ));
    (base, lab)
}

/// A tracing writer into a shared buffer, for tests that read the log lines.
#[derive(Clone, Default)]
pub struct LogBuf(pub Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuf {
    type Writer = LogBuf;
    fn make_writer(&'a self) -> LogBuf {
        self.clone()
    }
}
