//! Discovery (docs/registry.md "machines:"): a `discover: true` machine's model list is
//! served — a name on several machines as a tier of them — read at start, on its schedule and
//! on a miss (at most once per 10 s per machine); the file's names win; a name that vanished
//! is no longer served after the next read.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::Service;
use serde_json::{json, Value};

use crate::support::{header, serve};

struct Lab {
    a: Sim,
    b: Sim,
    base: String,
    client: reqwest::Client,
}

impl Lab {
    async fn start() -> Lab {
        let a = Sim::start_ollama("gpu-a").await.expect("sim");
        let b = Sim::start_ollama("gpu-b").await.expect("sim");
        a.set_models(&["llama3.2:3b", "qwen3:8b", "qwen3:4b"]);
        b.set_models(&["llama3.2:3b", "qwen3:4b"]);
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
machines:
  gpu-a: {{ url: "{}", api: ollama, discover: true }}
  gpu-b: {{ url: "{}", api: ollama, discover: true, discover_every: 1m }}
models:
  small: {{ machine: gpu-b, name: "qwen3:4b" }}
routes:
  - name: chat
    default: true
    chain: [small]
"#,
            a.base_url(),
            b.base_url()
        );
        let registry = Registry::parse(&yaml, "discover.yaml").expect("valid registry");
        let svc = Arc::new(Service::in_memory(registry, None).expect("service"));
        let (base, _) = serve(Arc::clone(&svc)).await;
        tokio::spawn(labrouter::discover::run(svc));
        tokio::time::sleep(Duration::from_millis(500)).await;
        Lab {
            a,
            b,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn chat(&self, model: &str) -> reqwest::Response {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        let url = format!("{}/v1/chat/completions", self.base);
        self.client.post(url).json(&body).send().await.unwrap()
    }

    async fn get_json(&self, path: &str) -> Value {
        let resp = self.client.get(format!("{}{path}", self.base)).send();
        resp.await.unwrap().json().await.unwrap()
    }

    fn tags(&self) -> (u64, u64) {
        (self.a.hits("/api/tags"), self.b.hits("/api/tags"))
    }
}

#[tokio::test(start_paused = true)]
async fn names_found_on_the_machines_are_served_a_shared_one_as_a_tier() {
    let lab = Lab::start().await;
    assert_eq!(lab.tags(), (1, 1), "each list read once, at start");

    let resp = lab.chat("llama3.2:3b").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-route"), "llama3.2:3b");
    assert_eq!(header(&resp, "x-labrouter-pick"), "free");
    assert_eq!(header(&resp, "x-labrouter-target"), "llama3.2:3b@gpu-a");
    let resp = lab.chat("qwen3:8b").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "qwen3:8b@gpu-a");
    assert_eq!(
        header(&resp, "x-labrouter-pick"),
        "",
        "one machine: no tier"
    );
    // The file's own name wins: qwen3:4b is `small`, on gpu-b only.
    let resp = lab.chat("qwen3:4b").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "small@gpu-b");
    assert_eq!((lab.a.work_hits(), lab.b.work_hits()), (2, 1));

    let list = lab.get_json("/v1/models").await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["auto", "chat", "llama3.2:3b", "qwen3:8b", "small"],
        "each name once"
    );
    let llama = &list["data"][2];
    assert_eq!(llama["owned_by"], "gpu-a,gpu-b");
    assert_eq!(
        llama["chain"],
        json!(["llama3.2:3b@gpu-a", "llama3.2:3b@gpu-b"])
    );
    let tags = lab.get_json("/api/tags").await;
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"llama3.2:3b") && names.contains(&"qwen3:8b"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains('@')), "{names:?}");
    assert_eq!(
        lab.tags(),
        (1, 1),
        "no list read on a request's path that found its model"
    );
    let status = lab.get_json("/status").await;
    let discovered = |m: &str| status["machines"][m]["discovered"].clone();
    assert_eq!(discovered("gpu-a"), json!(["llama3.2:3b", "qwen3:8b"]));
    assert_eq!(discovered("gpu-b"), json!(["llama3.2:3b"]));
}

#[tokio::test(start_paused = true)]
async fn a_name_added_later_is_served_on_its_first_request_by_one_more_read() {
    let lab = Lab::start().await;
    lab.a.set_models(&["llama3.2:3b", "qwen3:8b", "mistral:7b"]);
    let resp = lab.chat("mistral:7b").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "mistral:7b@gpu-a");
    assert_eq!(
        lab.tags(),
        (2, 2),
        "one extra read of each list, on the miss"
    );

    // A second miss within 10 s reads nothing more, and is a 400 naming the model.
    let resp = lab.chat("nobody-has-this").await;
    assert_eq!(resp.status(), 400);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "model_not_found");
    assert_eq!(lab.tags(), (2, 2));
    tokio::time::sleep(Duration::from_secs(11)).await;
    let resp = lab.chat("nobody-has-this").await;
    assert_eq!(resp.status(), 400);
    assert_eq!(lab.tags(), (3, 3), "after 10 s a miss reads again");
}

#[tokio::test(start_paused = true)]
async fn a_vanished_name_is_not_served_after_the_next_read() {
    let lab = Lab::start().await;
    assert_eq!(lab.chat("qwen3:8b").await.status(), 200);
    lab.a.set_models(&["llama3.2:3b"]);
    // gpu-a is read every 5 minutes (the default).
    tokio::time::sleep(Duration::from_secs(301)).await;
    let before = lab.a.work_hits();
    let resp = lab.chat("qwen3:8b").await;
    assert_eq!(resp.status(), 400);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "model_not_found");
    assert_eq!(lab.a.work_hits(), before, "nothing reached a machine");
    // A name still listed is still served.
    let resp = lab.chat("llama3.2:3b").await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test(start_paused = true)]
async fn the_ollama_door_finds_a_name_added_later_too() {
    let lab = Lab::start().await;
    lab.b.set_models(&["llama3.2:3b", "qwen3:4b", "phi4"]);
    let body =
        json!({"model": "phi4", "stream": false, "messages": [{"role": "user", "content": "hi"}]});
    let resp = lab
        .client
        .post(format!("{}/api/chat", lab.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "phi4@gpu-b");
    assert_eq!(
        lab.tags(),
        (2, 2),
        "one extra read of each list, on the miss"
    );
    assert_eq!(lab.b.work_hits(), 1);
}
