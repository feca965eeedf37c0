//! A router with memory on 127.0.0.1 (the whole service, `labrouter::run`, so the counters
//! are sampled each minute) and three simulated machines.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::{RunOptions, Service};
use serde_json::Value;

pub struct Machines {
    pub gpu: Sim,
    pub cpu: Sim,
    pub local: Sim,
}

impl Machines {
    pub async fn start() -> Machines {
        Machines {
            gpu: Sim::start("gpu-box").await.unwrap(),
            cpu: Sim::start("ubuntu-box").await.unwrap(),
            local: Sim::start("local").await.unwrap(),
        }
    }

    pub fn yaml(&self, state_dir: &std::path::Path) -> String {
        crate::support::registry_yaml(&self.gpu, &self.cpu, &self.local, "").replace(
            "  max_body: 64KiB",
            &format!(
                "  max_body: 64KiB\n  state_dir: \"{}\"",
                state_dir.display()
            ),
        )
    }
}

pub struct Router {
    pub svc: Arc<Service>,
    pub base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Router {
    pub async fn start(yaml: &str) -> Router {
        let svc = Arc::new(
            Service::remembering(Registry::parse(yaml, "test.yaml").unwrap(), None).unwrap(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let served = tokio::spawn(labrouter::run(
            Arc::clone(&svc),
            listener,
            shutdown,
            RunOptions::default(),
        ));
        Router {
            svc,
            base,
            stop,
            served,
        }
    }

    pub async fn chat(&self, model: &str) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    }

    /// GETs `path`: its status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let resp = reqwest::get(format!("{}{path}", self.base)).await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap())
    }

    /// Waits until what is queued for the store is written.
    pub fn flush(&self) {
        assert!(self.svc.store().unwrap().flush(Duration::from_secs(5)));
    }

    /// Graceful stop: stop serving, write what is queued.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        self.served.await.unwrap().unwrap();
        assert!(self.svc.store().unwrap().flush(Duration::from_secs(5)));
    }
}
