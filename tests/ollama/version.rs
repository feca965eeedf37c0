//! The Ollama version labrouter reports, and what a client of that version sends: taken,
//! passed on to an Ollama machine as sent, and translated for one that speaks OpenAI's API.

use serde_json::{json, Value};

use crate::support::TestLab;

#[tokio::test(start_paused = true)]
async fn the_version_is_at_least_what_codex_oss_requires() {
    let t = TestLab::start_ollama_gpu().await;
    let v: Value = t
        .client
        .get(format!("{}/api/version", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let version = v["version"].as_str().unwrap();
    let parts: Vec<u64> = version.split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 3, "{version}");
    // Codex's `--oss` mode refuses an Ollama older than 0.13.4.
    assert!(parts >= vec![0, 13, 4], "{version}");
    assert_eq!(t.work(), (0, 0, 0));
}

/// A chat as an Ollama 0.13 client sends it: `logprobs`, `top_logprobs`, `truncate`,
/// `shift`, tool calls with ids answered by `tool_call_id`, a nested tool schema.
fn chat_0_13(model: &str) -> Value {
    json!({"model": model, "stream": false, "logprobs": true, "top_logprobs": 5,
    "truncate": true, "shift": false, "think": "low",
    "tools": [{"type": "function", "function": {"name": "weather",
        "parameters": {"type": "object", "properties": {"place": {"type": "object",
            "properties": {"city": {"type": "string"}}}}}}}],
    "messages": [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_w",
            "function": {"index": 0, "name": "weather", "arguments": {"place": {"city": "Paris"}}}}]},
        {"role": "tool", "tool_call_id": "call_w", "tool_name": "weather", "content": "22 C"},
    ]})
}

#[tokio::test(start_paused = true)]
async fn an_ollama_0_13_chat_is_passed_on_as_sent_or_translated_never_refused() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set_models(&["qwen3-coder:30b"]);

    // To the Ollama machine: the body as sent, but for the backend name.
    let resp = t.post("/api/chat", chat_0_13("coder-gpu")).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let sent: Value = serde_json::from_slice(&t.gpu.last_body().unwrap()).unwrap();
    assert_eq!(sent, chat_0_13("qwen3-coder:30b"));
    assert_eq!(t.work(), (1, 0, 0));

    // To an OpenAI machine: log probabilities asked for as OpenAI asks, the ids kept.
    let resp = t.post("/api/chat", chat_0_13("small")).await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let sent: Value = serde_json::from_slice(&t.local.last_body().unwrap()).unwrap();
    assert_eq!(sent["logprobs"], true, "{sent}");
    assert_eq!(sent["top_logprobs"], 5, "{sent}");
    assert_eq!(
        sent["messages"][1]["tool_calls"][0]["id"], "call_w",
        "{sent}"
    );
    assert_eq!(sent["messages"][2]["tool_call_id"], "call_w", "{sent}");
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["properties"]["place"]["properties"]["city"],
        json!({"type": "string"})
    );
    assert_eq!(t.work(), (1, 0, 1));

    // Out of range: refused here, saying where, and sent nowhere.
    let mut bad = chat_0_13("small");
    bad["top_logprobs"] = json!(21);
    let resp = t.post("/api/chat", bad).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"], "'top_logprobs' must be an integer from 0 to 20");
    assert_eq!(t.work(), (1, 0, 1));
}
