//! The lab the real clients talk to: the test lab's three simulated machines (GPU box, CPU
//! box, local; `code` walks them in that order) and a router with a state directory, so
//! that it keeps Responses and can continue a conversation on any machine.

use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::{RunOptions, Service};
use serde_json::Value;

use crate::support::registry_yaml_with;

pub struct Lab {
    pub gpu: Sim,
    pub cpu: Sim,
    pub local: Sim,
    pub svc: Arc<Service>,
    /// The router's OpenAI base URL, `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Lab {
    pub async fn start() -> Lab {
        let gpu = Sim::start("gpu-box").await.expect("sim");
        let cpu = Sim::start("ubuntu-box").await.expect("sim");
        let local = Sim::start("local").await.expect("sim");
        let dir = tempfile::tempdir().expect("temporary directory");
        let server = format!("  state_dir: \"{}\"\n", dir.path().display());
        let yaml = registry_yaml_with(&gpu, &cpu, &local, &server, "");
        let registry = Registry::parse(&yaml, "openai_client.yaml").expect("valid registry");
        let svc = Arc::new(Service::remembering(registry, None).expect("service"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(labrouter::run(
            Arc::clone(&svc),
            listener,
            async {
                let _ = stopped.await;
            },
            RunOptions::default(),
        ));
        Lab {
            gpu,
            cpu,
            local,
            svc,
            base_url,
            _dir: dir,
            _stop: stop,
        }
    }

    /// Requests on `/v1/responses` that reached each machine: (gpu, cpu, local).
    pub fn responses(&self) -> (u64, u64, u64) {
        let hits = |s: &Sim| s.hits("/v1/responses");
        (hits(&self.gpu), hits(&self.cpu), hits(&self.local))
    }

    /// Work of any kind that reached each machine: (gpu, cpu, local).
    pub fn work(&self) -> (u64, u64, u64) {
        (
            self.gpu.work_hits(),
            self.cpu.work_hits(),
            self.local.work_hits(),
        )
    }

    /// The breaker state of `machine` ("closed", "open", ...).
    pub fn state(&self, machine: &str) -> String {
        let fleet = self.svc.fleet();
        let i = fleet.registry.machine_index(machine).expect("machine");
        fleet.machines.phase(i).as_str().to_string()
    }
}

/// The last work body `sim` received, as JSON.
pub fn last_body(sim: &Sim) -> Value {
    serde_json::from_slice(&sim.last_body().expect("a request reached it")).expect("JSON body")
}

/// The texts of a Responses request's input items, in order: a message's text (a string
/// content or its first part's), a function call's name, a tool output's output.
pub fn texts(body: &Value) -> Vec<String> {
    let items = body["input"].as_array().expect("input is a list of items");
    items.iter().map(item_text).collect()
}

fn item_text(item: &Value) -> String {
    let text = match item["type"].as_str() {
        Some("function_call") => item["name"].as_str(),
        Some("function_call_output") => item["output"].as_str(),
        _ => item["content"]
            .as_str()
            .or_else(|| item["content"][0]["text"].as_str()),
    };
    text.unwrap_or_default().to_string()
}
