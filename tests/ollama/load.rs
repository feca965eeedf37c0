//! Ollama's load and unload calls: `/api/generate` without a prompt and `/api/chat` without
//! messages are what Home Assistant and Open WebUI send to load a model (or, with
//! `keep_alive: 0`, to unload it). They are answered at once, as Ollama answers them, and
//! never become a generation on a machine that speaks only OpenAI's API.

use serde_json::{json, Value};

use super::lines;
use crate::support::TestLab;

/// Every body that asks to load (`"load"`) or unload (`"unload"`) `model`, on both calls,
/// streamed and not.
fn calls(model: &str) -> Vec<(&'static str, Value, &'static str)> {
    let mut out = Vec::new();
    let keep_alives: [(Option<Value>, &str); 7] = [
        (None, "load"),
        (Some(json!("5m")), "load"),
        (Some(json!(-1)), "load"),
        (Some(json!(0)), "unload"),
        (Some(json!("0")), "unload"),
        (Some(json!("0s")), "unload"),
        (Some(json!(0.0)), "unload"),
    ];
    for stream in [None, Some(true), Some(false)] {
        for (keep_alive, reason) in &keep_alives {
            let empty: [(&str, Option<Value>); 4] = [
                ("/api/generate", None),
                ("/api/generate", Some(json!(""))),
                ("/api/chat", None),
                ("/api/chat", Some(json!([]))),
            ];
            for (path, field) in empty {
                let mut body = json!({ "model": model });
                let name = if path == "/api/chat" {
                    "messages"
                } else {
                    "prompt"
                };
                if let Some(v) = field {
                    body[name] = v;
                }
                if let Some(k) = keep_alive {
                    body["keep_alive"] = k.clone();
                }
                if let Some(s) = stream {
                    body["stream"] = json!(s);
                }
                out.push((path, body, *reason));
            }
        }
    }
    out
}

/// The one answer object of a load call, streamed (one NDJSON line) or not.
async fn answer_of(resp: reqwest::Response, streamed: bool) -> Value {
    let body = resp.text().await.unwrap();
    if streamed {
        let got = lines(&body);
        assert_eq!(got.len(), 1, "one line: {body}");
        got[0].clone()
    } else {
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }
}

#[tokio::test(start_paused = true)]
async fn load_and_unload_calls_are_answered_at_once_and_reach_no_openai_machine() {
    let t = TestLab::start_ollama_gpu().await;
    for model in ["small", "chat", "qwen3:4b:latest"] {
        for (path, body, reason) in calls(model) {
            let resp = t.post(path, body.clone()).await;
            assert_eq!(resp.status(), 200, "{path} {body}");
            let streamed = body["stream"].as_bool().unwrap_or(true);
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            let want = if streamed {
                "application/x-ndjson"
            } else {
                "application/json"
            };
            assert!(ct.starts_with(want), "{path} {body}: {ct}");
            let v = answer_of(resp, streamed).await;
            assert_eq!(v["model"], model, "{path} {body}: {v}");
            assert_eq!(v["done"], true, "{path} {body}: {v}");
            assert_eq!(v["done_reason"], reason, "{path} {body}: {v}");
            assert!(
                v["created_at"].as_str().is_some_and(|s| s.ends_with('Z')),
                "{v}"
            );
            if path == "/api/chat" {
                assert_eq!(
                    v["message"],
                    json!({"role": "assistant", "content": ""}),
                    "{v}"
                );
                assert!(v.get("response").is_none(), "{v}");
            } else {
                assert_eq!(v["response"], "", "{v}");
                assert!(v.get("message").is_none(), "{v}");
            }
        }
    }
    assert_eq!(t.work(), (0, 0, 0), "nothing reached a machine");
    // The control: a prompt is work.
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "small", "prompt": "hi", "stream": false}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_load_call_for_an_unknown_model_is_refused_as_any_request_is() {
    let t = TestLab::start_ollama_gpu().await;
    for (path, body, _) in calls("nope") {
        let resp = t.post(path, body.clone()).await;
        assert_eq!(resp.status(), 400, "{path} {body}");
        let v: Value = resp.json().await.unwrap();
        assert!(v["error"].as_str().unwrap().contains("nope"), "{v}");
    }
    assert_eq!(t.work(), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_load_call_for_a_model_on_an_ollama_machine_reaches_it_natively() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "code", "keep_alive": -1, "stream": false}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let _ = resp.text().await.unwrap();
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "code", "keep_alive": 0, "messages": []}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let _ = resp.text().await.unwrap();
    assert_eq!(t.gpu.hits("/api/generate"), 1, "native, as Ollama loads");
    assert_eq!(t.gpu.hits("/api/chat"), 1);
    let sent: Value = serde_json::from_slice(&t.gpu.last_body().unwrap()).unwrap();
    assert_eq!(sent["model"], "qwen3-coder:30b");
    assert_eq!(sent["keep_alive"], 0);
    assert_eq!(t.work(), (2, 0, 0), "and to no OpenAI machine");
    // The Ollama machine held back: the next target speaks only OpenAI's API, so the call
    // is answered here and reaches nobody.
    let resp = t.post("/admin/breakers/gpu-box/open", json!({})).await;
    assert_eq!(resp.status(), 200);
    let resp = t
        .post("/api/generate", json!({"model": "code", "stream": false}))
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["done_reason"], "load", "{v}");
    assert_eq!(t.work(), (2, 0, 0));
}
