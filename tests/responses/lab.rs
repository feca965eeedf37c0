//! Three scripted machines serving the Responses API and a router with a store (kept
//! conversations live in its SQLite file), on 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::{RunOptions, Service};
use serde_json::Value;

use crate::fake::Fake;

pub struct Lab {
    pub gpu: Arc<Fake>,
    pub cpu: Arc<Fake>,
    pub local: Arc<Fake>,
    pub _svc: Arc<Service>,
    pub base: String,
    pub client: reqwest::Client,
    pub _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Lab {
    /// `server` is YAML lines under `server:`.
    pub async fn start(server: &str) -> Lab {
        let (gpu, cpu, local) = (
            Fake::start("gpu-box").await,
            Fake::start("ubuntu-box").await,
            Fake::start("local").await,
        );
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
{server}defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
  breaker: {{ failure_threshold: 3, cooldown: 60s, backoff: 2.0, max_cooldown: 15m, success_threshold: 1 }}
machines:
  gpu-box: {{ url: "{g}" }}
  ubuntu-box: {{ url: "{c}" }}
  local: {{ url: "{l}" }}
models:
  coder-gpu: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  coder-cpu: {{ machine: ubuntu-box, name: "qwen3-coder:30b-q4" }}
  vision-gpu: {{ machine: gpu-box, name: "qwen2.5vl:7b" }}
  small: {{ machine: local, name: "qwen3:4b" }}
routes:
  - name: code
    keywords: [code, refactor, function, bug]
    chain: [coder-gpu, coder-cpu, small]
  - name: vision
    keywords: [image, photo]
    images: true
    chain: [vision-gpu]
  - name: chat
    default: true
    chain: [small]
"#,
            state = dir.path().display(),
            g = gpu.base,
            c = cpu.base,
            l = local.base,
        );
        let registry = Registry::parse(&yaml, "responses.yaml").unwrap();
        let svc = Arc::new(Service::remembering(registry, None).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(labrouter::run(
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
            _svc: svc,
            base,
            client,
            _dir: dir,
            _stop: stop,
        }
    }

    pub async fn post(&self, body: &Value, key: Option<&str>) -> reqwest::Response {
        let mut req = self
            .client
            .post(format!("{}/v1/responses", self.base))
            .json(body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send().await.unwrap()
    }

    pub async fn get(&self, path: &str, key: Option<&str>) -> reqwest::Response {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send().await.unwrap()
    }

    pub fn hits(&self) -> (u64, u64, u64) {
        (self.gpu.hits(), self.cpu.hits(), self.local.hits())
    }

    /// The breaker of `machine`: its state and consecutive failures, from `/status`.
    pub async fn breaker(&self, machine: &str) -> (String, u64) {
        let v: Value = self.get("/status", None).await.json().await.unwrap();
        let m = &v["machines"][machine];
        (
            m["state"].as_str().unwrap().to_string(),
            m["consecutive_failures"].as_u64().unwrap(),
        )
    }
}

/// The output text of a Response object.
pub fn text(response: &Value) -> String {
    response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
