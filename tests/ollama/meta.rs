//! What Ollama clients poll and ask besides work: the model list, the loaded models, a
//! model's card, the version, the greeting; pull answered, model management refused.

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::support::{header, TestLab};

async fn get(t: &TestLab, path: &str) -> reqwest::Response {
    t.client
        .get(format!("{}{path}", t.base))
        .send()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn tags_list_every_name_a_client_may_pick_in_ollamas_shape() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = get(&t, "/api/tags").await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "auto:latest",
            "code:latest",
            "vision:latest",
            "chat:latest",
            "coder-gpu:latest",
            "coder-cpu:latest",
            "vision-gpu:latest",
            "small:latest",
            "qwen3-coder:30b",
            "qwen3-coder:30b-q4",
            "qwen2.5vl:7b",
            "qwen3:4b",
        ]
    );
    for m in v["models"].as_array().unwrap() {
        assert_eq!(m["model"], m["name"]);
        assert!(m["digest"].as_str().unwrap().len() == 64, "{m}");
        assert!(m["modified_at"].as_str().unwrap().ends_with('Z'), "{m}");
        assert!(m["details"].is_object(), "{m}");
    }
    // Polling the list sends no work to any machine: what they report of their models is
    // asked (a card, a model list), and no breaker hears of it.
    assert_eq!(t.work(), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn ps_merges_the_ollama_machines_that_are_up_and_never_waits_on_a_dead_one() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set_models(&["qwen3-coder:30b", "qwen2.5vl:7b"]);
    let v: Value = get(&t, "/api/ps").await.json().await.unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["qwen3-coder:30b", "qwen2.5vl:7b"], "{v}");
    assert_eq!(t.gpu.hits("/api/ps"), 1);
    // OpenAI machines have no /api/ps: never asked.
    assert_eq!(t.cpu.hits("/api/ps") + t.local.hits("/api/ps"), 0);

    // Open: left out, not asked.
    let resp = t
        .post("/admin/breakers/gpu-box/open", json!({"by": "test"}))
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = get(&t, "/api/ps").await.json().await.unwrap();
    assert_eq!(v, json!({"models": []}));
    assert_eq!(t.gpu.hits("/api/ps"), 1);

    // Hung but not yet known to be: bounded by its first_byte (5 s), then left out.
    let resp = t
        .post("/admin/breakers/gpu-box/close", json!({"by": "test"}))
        .await;
    assert_eq!(resp.status(), 200);
    t.gpu.set(Fault::Hang);
    let start = tokio::time::Instant::now();
    let v: Value = get(&t, "/api/ps").await.json().await.unwrap();
    assert_eq!(v, json!({"models": []}));
    assert!(start.elapsed() <= std::time::Duration::from_secs(5));
    // Polling is not work: the breaker heard nothing.
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn show_asks_the_ollama_machine_else_answers_what_labrouter_knows() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set_models(&["qwen3-coder:30b"]);
    let resp = t.post("/api/show", json!({"model": "coder-gpu"})).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    // The machine's own card: it knows only `qwen3-coder:30b` (any other name is its 404),
    // so labrouter asked by the backend name.
    assert!(
        v["model_info"]["llama.context_length"].is_u64(),
        "the machine's card: {v}"
    );
    assert_eq!(t.gpu.hits("/api/show"), 1);

    // An OpenAI machine: labrouter's own card (the `name` key of older clients works too).
    let resp = t.post("/api/show", json!({"name": "small:latest"})).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["details"]["family"], "");
    assert!(v["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("completion")));
    assert!(v["template"].is_string());
    assert_eq!(t.local.hits("/api/show"), 0);

    // Unknown names, and no name at all: 400 in Ollama's shape.
    let resp = t.post("/api/show", json!({"model": "nope"})).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("nope"), "{v}");
    let resp = t.post("/api/show", json!({})).await;
    assert_eq!(resp.status(), 400);
    assert!(resp.json::<Value>().await.unwrap()["error"].is_string());
}

#[tokio::test(start_paused = true)]
async fn version_greeting_pull_and_model_management() {
    let t = TestLab::start_ollama_gpu().await;
    let v: Value = get(&t, "/api/version").await.json().await.unwrap();
    assert!(v["version"].is_string(), "{v}");

    let resp = get(&t, "/").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "Ollama is running");
    let resp = t.client.head(format!("{}/", t.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let resp = t
        .client
        .get(format!("{}/", t.base))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert!(header(&resp, "content-type").starts_with("text/html"));
    assert!(resp.text().await.unwrap().contains("<html"));

    // Home Assistant pulls a name it does not see listed: success at once, nothing sent.
    let resp = t.post("/api/pull", json!({"model": "code:latest"})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "{\"status\":\"success\"}\n");
    let resp = t
        .post("/api/pull", json!({"model": "small", "stream": false}))
        .await;
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"status": "success"})
    );
    let resp = t.post("/api/pull", json!({"model": "llama9:70b"})).await;
    assert_eq!(resp.status(), 400);
    assert!(resp.json::<Value>().await.unwrap()["error"].is_string());

    for (method, path) in [
        ("POST", "/api/push"),
        ("POST", "/api/create"),
        ("POST", "/api/copy"),
        ("DELETE", "/api/delete"),
    ] {
        let resp = t
            .client
            .request(method.parse().unwrap(), format!("{}{path}", t.base))
            .json(&json!({"model": "code"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 501, "{path}");
        let v: Value = resp.json().await.unwrap();
        assert!(
            v["error"].as_str().unwrap().contains("manages no models"),
            "{v}"
        );
    }
    let resp = get(&t, "/api/nothing-here").await;
    assert_eq!(resp.status(), 404);
    assert!(resp.json::<Value>().await.unwrap()["error"].is_string());
    assert_eq!(t.work(), (0, 0, 0));
}
