//! Tiers of equal machines (docs/registry.md "routes:"): a list inside a chain spreads work
//! over its machines, warm and free first; breakers hold inside a tier as anywhere; a chain
//! without lists is tried strictly in order.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::{json, Value};

use crate::support::{header, serve};

/// Two twins serving the same model and a slower CPU box behind them.
struct Tiered {
    a: Sim,
    b: Sim,
    cpu: Sim,
    svc: Arc<Service>,
    base: String,
    client: reqwest::Client,
}

impl Tiered {
    /// `a` (first in the tier) and `b` speak Ollama's API when `ollama`.
    async fn start(ollama: bool) -> Tiered {
        let start = |name: &'static str| async move {
            if ollama {
                Sim::start_ollama(name).await.expect("sim")
            } else {
                Sim::start(name).await.expect("sim")
            }
        };
        let (a, b) = (start("gpu-a").await, start("gpu-b").await);
        let cpu = Sim::start("cpu-box").await.expect("sim");
        let api = if ollama { ", api: ollama" } else { "" };
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
defaults:
  timeouts: {{ connect: 5s, first_byte: 5s, idle: 30s, total: 10m }}
  breaker: {{ failure_threshold: 3, cooldown: 60s }}
machines:
  gpu-a: {{ url: "{}"{api} }}
  gpu-b: {{ url: "{}"{api} }}
  cpu-box: {{ url: "{}" }}
models:
  coder-a: {{ machine: gpu-a, name: "qwen3-coder:30b" }}
  coder-b: {{ machine: gpu-b, name: "qwen3-coder:30b" }}
  coder-cpu: {{ machine: cpu-box, name: "qwen3-coder:30b-q4" }}
routes:
  - name: code
    default: true
    chain: [[coder-a, coder-b], coder-cpu]
  - name: plain
    chain: [coder-a, coder-b, coder-cpu]
"#,
            a.base_url(),
            b.base_url(),
            cpu.base_url()
        );
        let registry = Registry::parse(&yaml, "tiers.yaml").expect("valid registry");
        labrouter::telemetry::install();
        let svc = Arc::new(Service::in_memory(registry, None).expect("service"));
        let (base, _) = serve(Arc::clone(&svc)).await;
        Tiered {
            a,
            b,
            cpu,
            svc,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn chat(&self, model: &str) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .expect("router answered")
    }

    /// `n` requests for `model` at once: each answer's target and pick.
    async fn burst(&self, model: &str, n: usize) -> Vec<(String, String)> {
        let all = (0..n).map(|_| async {
            let resp = self.chat(model).await;
            assert_eq!(resp.status(), 200);
            (
                header(&resp, "x-labrouter-target"),
                header(&resp, "x-labrouter-pick"),
            )
        });
        futures_util::future::join_all(all).await
    }

    async fn status(&self) -> Value {
        let resp = self.client.get(format!("{}/status", self.base)).send();
        resp.await.unwrap().json().await.unwrap()
    }
}

/// How many of `answers` were served by `target`.
fn by_target(answers: &[(String, String)], target: &str) -> usize {
    answers.iter().filter(|a| a.0 == target).count()
}

/// How many of `answers` carried `x-labrouter-pick: why` (`""`: none).
fn by_pick(answers: &[(String, String)], why: &str) -> usize {
    answers.iter().filter(|a| a.1 == why).count()
}

#[tokio::test(start_paused = true)]
async fn a_tier_keeps_both_twins_busy_and_a_plain_chain_its_first() {
    let t = Tiered::start(false).await;
    t.a.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    t.b.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    let answers = t.burst("code", 8).await;
    let (on_a, on_b) = (t.a.work_hits(), t.b.work_hits());
    assert_eq!((on_a + on_b, t.cpu.work_hits()), (8, 0), "{answers:?}");
    assert!(
        on_a >= 3 && on_b >= 3,
        "each twin serves at least 3: {on_a} and {on_b}"
    );
    assert_eq!(by_target(&answers, "coder-a@gpu-a") as u64, on_a);
    // Two were free (parallel 1: one each); the other six went to the least busy.
    assert_eq!(by_pick(&answers, "free"), 2, "{answers:?}");
    assert_eq!(by_pick(&answers, "least_busy"), 6, "{answers:?}");
    let metrics = t.client.get(format!("{}/metrics", t.base)).send();
    let metrics = metrics.await.unwrap().text().await.unwrap();
    let picks = |why: &str| {
        metrics.lines().any(|l| {
            l.starts_with("labrouter_picks_total{")
                && l.contains(r#"route="code""#)
                && l.contains(&format!(r#"why="{why}""#))
        })
    };
    assert!(picks("free") && picks("least_busy"), "{metrics}");

    t.a.reset_counts();
    t.b.reset_counts();
    let answers = t.burst("plain", 8).await;
    assert_eq!(
        (t.a.work_hits(), t.b.work_hits()),
        (8, 0),
        "strictly in order"
    );
    assert_eq!(by_pick(&answers, ""), 8, "no pick outside a tier");
}

#[tokio::test(start_paused = true)]
async fn a_free_twin_is_never_left_idle_while_the_other_is_busy() {
    let t = Tiered::start(false).await;
    t.a.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    t.b.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    // One request at a time while another is in flight: each lands on the twin that is free.
    let long = tokio::spawn({
        let (client, base) = (t.client.clone(), t.base.clone());
        async move {
            client
                .post(format!("{base}/v1/chat/completions"))
                .json(&json!({"model": "code", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resp = t.chat("code").await;
    assert_eq!(header(&resp, "x-labrouter-pick"), "free");
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-b@gpu-b");
    let first = long.await.unwrap();
    assert_eq!(header(&first, "x-labrouter-target"), "coder-a@gpu-a");
    assert_eq!((t.a.work_hits(), t.b.work_hits()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn warm_first_from_api_ps_read_off_the_request_path() {
    let t = Tiered::start(true).await;
    // The first twin holds another model; the second holds ours.
    t.a.set_models(&["llama3.2:3b"]);
    t.b.set_models(&["qwen3-coder:30b"]);
    tokio::spawn(labrouter::warm::run(Arc::clone(&t.svc)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ps = (t.a.hits("/api/ps"), t.b.hits("/api/ps"));
    assert_eq!(ps, (1, 1), "each twin's list read once, at start");

    let resp = t.chat("code").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-b@gpu-b");
    assert_eq!(header(&resp, "x-labrouter-pick"), "warm");

    // While the warm twin is busy, the cold one is free and takes the next request.
    t.b.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    let busy = tokio::spawn({
        let (client, base) = (t.client.clone(), t.base.clone());
        async move {
            let body = json!({"model": "code", "messages": [{"role": "user", "content": "hi"}]});
            let url = format!("{base}/v1/chat/completions");
            client.post(url).json(&body).send().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resp = t.chat("code").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-a@gpu-a");
    assert_eq!(header(&resp, "x-labrouter-pick"), "free");
    let first = busy.await.unwrap();
    assert_eq!(header(&first, "x-labrouter-pick"), "warm");
    assert_eq!((t.a.work_hits(), t.b.work_hits()), (1, 2));
    // Three requests, and no list read on their path.
    assert_eq!((t.a.hits("/api/ps"), t.b.hits("/api/ps")), ps);

    // Having answered, the first twin is warm too; /status says so.
    let status = t.status().await;
    assert_eq!(
        status["machines"]["gpu-a"]["warm"],
        json!(["qwen3-coder:30b"])
    );
    assert_eq!(
        status["machines"]["gpu-b"]["warm"],
        json!(["qwen3-coder:30b"])
    );
    assert_eq!(status["machines"]["gpu-a"]["parallel"], 1);
    assert_eq!(
        status["routes"][0]["tiers"],
        json!([["coder-a@gpu-a", "coder-b@gpu-b"]])
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_twin_opens_and_the_other_serves_the_next_tier_only_when_both_are_open() {
    let t = Tiered::start(false).await;
    t.a.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    t.b.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    // Two at a time: one of each pair is picked for the failing twin (the other twin is
    // busy), fails, and is served by the rest of the tier.
    for _ in 0..3 {
        let answers = t.burst("code", 2).await;
        assert_eq!(by_target(&answers, "coder-b@gpu-b"), 2, "{answers:?}");
    }
    assert_eq!((t.a.work_hits(), t.b.work_hits()), (3, 6));
    for _ in 0..4 {
        let answers = t.burst("code", 2).await;
        assert_eq!(by_target(&answers, "coder-b@gpu-b"), 2, "{answers:?}");
    }
    // Three failures opened the first twin; then it was skipped without a request.
    assert_eq!(
        (t.a.work_hits(), t.b.work_hits(), t.cpu.work_hits()),
        (3, 14, 0)
    );
    let status = t.status().await;
    assert_eq!(status["machines"]["gpu-a"]["state"], "open");
    assert_eq!(status["machines"]["gpu-b"]["state"], "closed");

    t.b.set(Fault::Refuse);
    for _ in 0..5 {
        let resp = t.chat("code").await;
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@cpu-box");
    }
    assert_eq!(t.a.work_hits(), 3, "the open twin got nothing more");
    assert_eq!(t.cpu.work_hits(), 5);
    let status = t.status().await;
    assert_eq!(status["machines"]["gpu-b"]["state"], "open");
}
