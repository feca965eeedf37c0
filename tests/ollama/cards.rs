//! A model's card (`/api/show`) along its chain, and what each name can do on `/api/show`
//! and `/api/tags`. The lab: two Ollama servers, an OpenAI-only sim, and a stub
//! OpenAI-compatible server whose model list says what its models do (as Infinity and LM
//! Studio do); every request that reaches a machine is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::{json, Value};

use crate::support::serve;

/// An OpenAI-compatible machine that answers only `GET /v1/models`, and counts them.
struct Stub {
    url: String,
    lists: Arc<AtomicU64>,
}

impl Stub {
    async fn start() -> Stub {
        let lists = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&lists);
        let list = json!({"object": "list", "data": [
            {"id": "bge-m3", "object": "model", "owned_by": "infinity", "capabilities": ["embed"]},
            {"id": "nomic-embed-chat", "object": "model", "type": "vlm", "max_model_len": 8192},
        ]});
        let app = axum::Router::new().route(
            "/v1/models",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                let list = list.clone();
                async move { axum::Json(list) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Stub { url, lists }
    }

    fn lists(&self) -> u64 {
        self.lists.load(Ordering::SeqCst)
    }
}

struct Lab {
    gpu: Sim,
    gpu2: Sim,
    cpu: Sim,
    stub: Stub,
    base: String,
    client: reqwest::Client,
}

impl Lab {
    async fn start() -> Lab {
        let gpu = Sim::start_ollama("gpu-box").await.unwrap();
        let gpu2 = Sim::start_ollama("gpu-box-2").await.unwrap();
        let cpu = Sim::start("ubuntu-box").await.unwrap();
        let stub = Stub::start().await;
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
machines:
  gpu-box: {{ url: "{}", api: ollama }}
  gpu-box-2: {{ url: "{}", api: ollama }}
  ubuntu-box: {{ url: "{}" }}
  stub: {{ url: "{}" }}
models:
  coder-gpu: {{ machine: gpu-box, name: "qwen3-coder:30b" }}
  coder-gpu2: {{ machine: gpu-box-2, name: "qwen3-coder:30b-b" }}
  coder-cpu: {{ machine: ubuntu-box, name: "qwen3-coder:30b-q4" }}
  embedder: {{ machine: ubuntu-box, name: "nomic-embed-text" }}
  vectors: {{ machine: stub, name: "bge-m3" }}
  looker: {{ machine: stub, name: "nomic-embed-chat" }}
routes:
  - name: code
    chain: [coder-gpu, coder-gpu2, coder-cpu]
  - name: gpus
    chain: [coder-gpu, coder-gpu2]
  - name: chat
    default: true
    chain: [coder-cpu]
"#,
            gpu.base_url(),
            gpu2.base_url(),
            cpu.base_url(),
            stub.url
        );
        let registry = Registry::parse(&yaml, "test.yaml").unwrap();
        let svc = Arc::new(Service::in_memory(registry, None).unwrap());
        let (base, _) = serve(svc).await;
        Lab {
            gpu,
            gpu2,
            cpu,
            stub,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn show(&self, model: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}/api/show", self.base))
            .json(&json!({ "model": model }))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }

    /// `/api/show` asked of (gpu, gpu2), `/v1/models` asked of (cpu, stub).
    fn asked(&self) -> (u64, u64, u64, u64) {
        (
            self.gpu.hits("/api/show"),
            self.gpu2.hits("/api/show"),
            self.cpu.hits("/v1/models"),
            self.stub.lists(),
        )
    }

    fn work(&self) -> u64 {
        self.gpu.work_hits() + self.gpu2.work_hits() + self.cpu.work_hits()
    }
}

#[tokio::test(start_paused = true)]
async fn show_tries_the_rest_of_the_chain_when_a_machine_lacks_the_model_or_is_down() {
    let t = Lab::start().await;
    t.gpu.set_models(&["llama3.2:3b"]);
    t.gpu2.set_models(&["qwen3-coder:30b-b"]);

    // The first machine does not have it: the second's own card.
    let (status, card) = t.show("code").await;
    assert_eq!(status, 200, "{card}");
    assert!(
        card["modelfile"]
            .as_str()
            .unwrap()
            .contains("FROM qwen3-coder:30b-b"),
        "gpu-box-2's card: {card}"
    );
    assert_eq!(t.asked(), (1, 1, 0, 0));

    // The second does not answer: the third, an OpenAI machine, gets labrouter's card.
    t.gpu2.set(Fault::Refuse);
    let (status, card) = t.show("code:latest").await;
    assert_eq!(status, 200, "{card}");
    assert!(
        card["modelfile"]
            .as_str()
            .unwrap()
            .contains("coder-cpu@ubuntu-box"),
        "{card}"
    );
    assert_eq!(card["model_info"]["general.basename"], "qwen3-coder:30b-q4");
    assert_eq!(t.asked(), (2, 1, 1, 0));

    // A machine its breaker holds back is skipped, not asked.
    let resp = t
        .client
        .post(format!("{}/admin/breakers/gpu-box/open", t.base))
        .json(&json!({"by": "test"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    t.gpu2.set(Fault::Ok);
    let (status, card) = t.show("code").await;
    assert_eq!(status, 200, "{card}");
    assert!(card["modelfile"].as_str().unwrap().contains("30b-b"));
    assert_eq!(t.asked(), (2, 2, 1, 0));

    // Only when every machine of the chain answered that it does not have it: 404.
    let resp = t
        .client
        .post(format!("{}/admin/breakers/gpu-box/close", t.base))
        .json(&json!({"by": "test"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    t.gpu2.set_models(&["llama3.2:3b"]);
    let (status, v) = t.show("gpus").await;
    assert_eq!(status, 404, "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("'gpus' not found"), "{error}");
    assert!(
        error.contains("coder-gpu@gpu-box does not have 'qwen3-coder:30b'"),
        "{error}"
    );
    assert!(error.contains("coder-gpu2@gpu-box-2"), "{error}");
    assert_eq!(t.asked(), (3, 3, 1, 0));

    // When none has it but one did not answer, it may: labrouter's card, not a 404.
    t.gpu2.set(Fault::Refuse);
    let (status, card) = t.show("gpus").await;
    assert_eq!(status, 200, "{card}");
    assert!(card["modelfile"]
        .as_str()
        .unwrap()
        .contains("coder-gpu2@gpu-box-2"));
    // A card is not work: no breaker heard of any of it.
    assert_eq!(t.work(), 0);
}

/// `capabilities` of each name on `/api/tags`.
async fn tagged(t: &Lab) -> Value {
    let v: Value = t
        .client
        .get(format!("{}/api/tags", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut out = serde_json::Map::new();
    for m in v["models"].as_array().unwrap() {
        out.insert(
            m["name"].as_str().unwrap().to_string(),
            m["capabilities"].clone(),
        );
    }
    Value::Object(out)
}

#[tokio::test(start_paused = true)]
async fn capabilities_say_what_each_model_does_on_show_and_tags() {
    let t = Lab::start().await;
    t.gpu.set_models(&["qwen3-coder:30b"]);
    let caps = |card: &Value| card["capabilities"].clone();

    // Named for embedding, on a machine that says nothing: embedding only.
    let (_, card) = t.show("embedder").await;
    assert_eq!(caps(&card), json!(["embedding"]), "{card}");
    // Its machine says it embeds (Infinity's `capabilities`), whatever its name.
    let (_, card) = t.show("vectors").await;
    assert_eq!(caps(&card), json!(["embedding"]), "{card}");
    // Its machine says it is a vision chat model, though `embed` is in its name.
    let (_, card) = t.show("looker").await;
    assert_eq!(
        caps(&card),
        json!(["completion", "tools", "vision"]),
        "{card}"
    );
    assert_eq!(card["model_info"]["general.context_length"], 8192);
    // A chat model: what it always was.
    let (_, card) = t.show("chat").await;
    assert_eq!(caps(&card), json!(["completion", "tools"]), "{card}");
    // On an Ollama server: the server's own card and words (the sim's card names its
    // family, which labrouter's own card leaves empty).
    let (_, card) = t.show("coder-gpu").await;
    assert_eq!(caps(&card), json!(["completion", "tools"]), "{card}");
    assert_eq!(card["details"]["family"], "llama", "{card}");
    assert_eq!(t.asked(), (1, 0, 2, 2));

    // The list says the same, asking each machine once: one card per model on an Ollama
    // server that is up, one model list per OpenAI machine.
    let tags = tagged(&t).await;
    for name in [
        "embedder:latest",
        "nomic-embed-text:latest",
        "vectors:latest",
        "bge-m3:latest",
    ] {
        assert_eq!(tags[name], json!(["embedding"]), "{name}: {tags}");
    }
    assert_eq!(
        tags["looker:latest"],
        json!(["completion", "tools", "vision"])
    );
    for name in ["chat:latest", "coder-cpu:latest", "auto:latest"] {
        assert_eq!(tags[name], json!(["completion", "tools"]), "{name}: {tags}");
    }
    // A route is what its first target does.
    assert_eq!(
        tags["code:latest"],
        json!(["completion", "tools"]),
        "{tags}"
    );
    assert_eq!(
        tags["coder-gpu:latest"],
        json!(["completion", "tools"]),
        "{tags}"
    );
    // gpu-box-2 does not have its model: what labrouter knows.
    assert_eq!(tags["coder-gpu2:latest"], json!(["completion", "tools"]));
    assert_eq!(t.asked(), (2, 1, 3, 3));
    assert_eq!(t.work(), 0);
}
