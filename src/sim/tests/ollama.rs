//! An Ollama sim: its own routes shaped like Ollama's, NDJSON streams, and each fault on them.

use super::*;
use crate::registry::Api;

/// Lines of an NDJSON body, each parsed (every line must end in "\n").
fn lines(text: &str) -> Vec<Value> {
    assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `/api/chat` on `sim`, streamed unless `stream` is false (Ollama streams by default).
async fn chat(sim: &Sim, stream: Option<bool>) -> reqwest::Result<reqwest::Response> {
    let mut body = json!({"model":"m1","messages":[{"role":"user","content":"hi"}]});
    if let Some(s) = stream {
        body["stream"] = json!(s);
    }
    post(format!("{}/api/chat", sim.root_url()), body).await
}

#[tokio::test]
async fn metadata_routes_are_shaped_like_ollama() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let root = sim.root_url();
    assert_eq!(sim.base_url(), format!("{root}/v1"));
    assert_eq!(sim.api(), Api::Ollama);
    let banner = client().get(format!("{root}/")).send().await.unwrap();
    assert_eq!(banner.status(), 200);
    assert_eq!(banner.text().await.unwrap(), "Ollama is running");
    let head = client().head(format!("{root}/")).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        get_json(format!("{root}/api/version")).await,
        json!({"version":"0.13.5"})
    );
    let tags = get_json(format!("{root}/api/tags")).await;
    let model = &tags["models"][0];
    assert_eq!(
        (&model["name"], &model["model"]),
        (&json!("sim-model:latest"), &json!("sim-model:latest"))
    );
    assert_eq!(model["details"]["family"], "llama");
    assert_eq!(model["digest"].as_str().unwrap().len(), 64);
    assert!(model["modified_at"].as_str().unwrap().ends_with('Z'));
    let ps = get_json(format!("{root}/api/ps")).await;
    assert_eq!(ps["models"][0]["context_length"], 4096);
    assert_eq!(ps["models"][0]["size_vram"], 1000);
    assert!(ps["models"][0]["expires_at"].is_string());
    let show = post(format!("{root}/api/show"), json!({"model":"sim-model"}));
    let show: Value = show.await.unwrap().json().await.unwrap();
    assert_eq!(show["template"], "{{ .Prompt }}");
    assert_eq!(show["model_info"]["llama.context_length"], 4096);
    assert_eq!(show["capabilities"], json!(["completion", "tools"]));
    assert_eq!(sim.work_hits(), 0);
    assert_eq!(sim.hits("/"), 2);
}

#[tokio::test]
async fn set_models_tells_sims_apart_and_show_knows_only_them() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set_models(&["qwen3:8b", "llama3"]);
    let tags = get_json(format!("{}/api/tags", sim.root_url())).await;
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["qwen3:8b", "llama3"]);
    let show = |body: Value| post(format!("{}/api/show", sim.root_url()), body);
    assert_eq!(
        show(json!({"name":"llama3:latest"}))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        show(json!({"model":"qwen3:8b"})).await.unwrap().status(),
        200
    );
    let missing = show(json!({"model":"sim-model"})).await.unwrap();
    assert_eq!(missing.status(), 404);
    let v: Value = missing.json().await.unwrap();
    assert_eq!(v, json!({"error":"model 'sim-model' not found"}));
    assert_eq!(show(json!({})).await.unwrap().status(), 400);
    assert_eq!(sim.work_hits(), 0);
}

#[tokio::test]
async fn work_routes_answer_whole() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let root = sim.root_url();
    let v: Value = chat(&sim, Some(false)).await.unwrap().json().await.unwrap();
    assert_eq!(v["model"], "m1");
    assert!(v["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        v["message"],
        json!({"role":"assistant","content":"ok from olla"})
    );
    assert_eq!(
        (&v["done"], &v["done_reason"]),
        (&json!(true), &json!("stop"))
    );
    assert_eq!(
        (&v["prompt_eval_count"], &v["eval_count"]),
        (&json!(1), &json!(3))
    );
    assert!(v["total_duration"].as_u64().unwrap() > 0);
    let body = json!({"model":"m1","prompt":"x","suffix":"y","stream":false});
    let v: Value = post(format!("{root}/api/generate"), body)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["response"], "ok from olla");
    assert_eq!(v["done"], true);
    let embed = |input: Value| {
        post(
            format!("{root}/api/embed"),
            json!({"model":"e","input":input}),
        )
    };
    let v: Value = embed(json!("a")).await.unwrap().json().await.unwrap();
    assert_eq!(v["embeddings"], json!([[0.1, 0.2, 0.3]]));
    assert_eq!(v["prompt_eval_count"], 1);
    let v: Value = embed(json!(["a", "b"]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["embeddings"].as_array().unwrap().len(), 2);
    let bad = embed(json!(5)).await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.json::<Value>().await.unwrap()["error"].is_string());
    let url = format!("{root}/api/embeddings");
    let v: Value = post(url, json!({"model":"e","prompt":"a"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v, json!({"embedding":[0.1, 0.2, 0.3]}));
    let garbage = client().post(format!("{root}/api/chat")).body("{nope");
    let garbage = garbage.send().await.unwrap();
    assert_eq!(garbage.status(), 400);
    assert!(garbage.json::<Value>().await.unwrap()["error"].is_string());
    let openai = super::chat(&sim, false)
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(openai["choices"][0]["message"]["content"], "ok from olla");
    get_json(format!("{root}/api/tags")).await;
    assert_eq!(sim.work_hits(), 8);
    assert_eq!(sim.hit_times().len(), 8);
}

#[tokio::test]
async fn an_openai_sim_has_no_native_routes() {
    let sim = Sim::start("plain").await.unwrap();
    assert_eq!(sim.api(), Api::OpenAi);
    let tags = client().get(format!("{}/api/tags", sim.root_url())).send();
    assert_eq!(tags.await.unwrap().status(), 404);
    assert_eq!(chat(&sim, Some(false)).await.unwrap().status(), 404);
}

#[tokio::test]
async fn streams_are_ndjson_lines_then_a_done_line() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let resp = chat(&sim, None).await.unwrap();
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let (text, failed) = drain(resp).await;
    assert!(!failed);
    let got = lines(&text);
    assert_eq!(got.len(), 4);
    for (i, line) in got[..3].iter().enumerate() {
        assert_eq!(line["message"]["content"], format!("olla-{i} "));
        assert_eq!(
            (&line["done"], &line["model"]),
            (&json!(false), &json!("m1"))
        );
    }
    let done = &got[3];
    assert_eq!(done["message"], json!({"role":"assistant","content":""}));
    assert_eq!(
        (&done["done"], &done["done_reason"]),
        (&json!(true), &json!("stop"))
    );
    assert!(done["eval_duration"].is_u64());
    sim.set_chunks(1);
    let body = json!({"model":"m1","prompt":"x"});
    let resp = post(format!("{}/api/generate", sim.root_url()), body)
        .await
        .unwrap();
    let got = lines(&drain(resp).await.0);
    assert_eq!(got.len(), 2);
    assert_eq!(
        (&got[0]["response"], &got[1]["response"]),
        (&json!("olla-0 "), &json!(""))
    );
    assert_eq!(got[1]["done"], true);
}

#[tokio::test]
async fn status_malformed_and_reset_on_native_routes() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::Status {
        code: 429,
        retry_after: Some("3".into()),
    });
    let resp = chat(&sim, None).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()[RETRY_AFTER], "3");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v, json!({"error":"olla answers 429 (simulated)"}));
    let tags = client().get(format!("{}/api/tags", sim.root_url())).send();
    assert_eq!(tags.await.unwrap().status(), 200);
    sim.set(Fault::Malformed);
    let resp = chat(&sim, Some(false)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.json::<Value>().await.is_err());
    sim.set(Fault::Reset);
    assert!(chat(&sim, Some(false)).await.is_err());
    let version = client()
        .get(format!("{}/api/version", sim.root_url()))
        .send();
    assert!(version.await.is_err());
    assert_eq!(sim.hits("/api/chat"), 3);
}

#[tokio::test]
async fn cut_after_sends_lines_then_resets() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::CutAfter(2));
    let (text, failed) = drain(chat(&sim, None).await.unwrap()).await;
    assert!(failed);
    let got = lines(&text);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|l| l["done"] == false));
    sim.set(Fault::CutAfter(0));
    let resp = chat(&sim, Some(false)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(drain(resp).await, (String::new(), true));
}

#[tokio::test(start_paused = true)]
async fn stall_after_freezes_the_machine() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::StallAfter(1));
    let mut body = chat(&sim, None).await.unwrap().bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(lines(&String::from_utf8_lossy(&first)).len(), 1);
    let hour = Duration::from_secs(3600);
    assert!(tokio::time::timeout(hour, body.next()).await.is_err());
    let url = format!("{}/api/tags", sim.root_url());
    let task = tokio::spawn(async move { client().get(url).send().await });
    until_hits(&sim, "/api/tags", 1).await;
    assert!(tokio::time::timeout(hour, task).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn drip_delays_every_line_and_slow_first_byte_spares_metadata() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::Drip(Duration::from_secs(2)));
    let start = tokio::time::Instant::now();
    let (text, failed) = drain(chat(&sim, None).await.unwrap()).await;
    assert!(!failed);
    assert_eq!(lines(&text).len(), 4);
    assert!(start.elapsed() >= Duration::from_secs(8));
    sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let start = tokio::time::Instant::now();
    get_json(format!("{}/api/version", sim.root_url())).await;
    assert!(start.elapsed() < Duration::from_secs(30));
    let resp = chat(&sim, Some(false)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(start.elapsed() >= Duration::from_secs(30));
}

#[tokio::test]
async fn huge_is_a_valid_native_answer_of_that_size() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::Huge(300_000));
    let bytes = chat(&sim, None).await.unwrap().bytes().await.unwrap();
    assert_eq!(bytes.len(), 300_000);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        (&v["message"]["content"], &v["done"]),
        (&json!("big"), &json!(true))
    );
    let body = json!({"model":"e","input":"a"});
    let resp = post(format!("{}/api/embed", sim.root_url()), body)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(v["embeddings"], json!([[0.1, 0.2, 0.3]]));
}
