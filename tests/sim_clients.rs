//! The official `openai` Python SDK (from PyPI) reading a simulated machine directly: chat
//! (whole, streamed, streamed with usage), completions, embeddings as the SDK asks for them
//! (base64), the Responses API (whole, streamed, a tool call) and the model list. The sim is
//! what tests, the demo and newcomers use as a machine, so it must answer as real servers do.
//!
//! `scripts/test.sh` installs the SDK into the venv it makes and names its Python in
//! `LABROUTER_TEST_PYTHON`; without it this test fails, saying how to get it: a test that
//! skipped could not fail. Real time (not the paused clock): the client is another process,
//! and every answer comes at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use labrouter::registry::Api;
use labrouter::sim::Sim;
use serde_json::{json, Value};

/// The Python with the `openai` package: `LABROUTER_TEST_PYTHON`, else the venv
/// `scripts/test.sh` makes.
fn python() -> String {
    if let Ok(p) = std::env::var("LABROUTER_TEST_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-venv/bin/python");
    assert!(
        std::path::Path::new(venv).exists(),
        "the openai Python SDK is missing: run scripts/test.sh (it makes {venv}), or set LABROUTER_TEST_PYTHON"
    );
    venv.to_string()
}

/// Runs tests/sim_clients/check.py against `base_url`; what the SDK read.
async fn sdk(base_url: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sim_clients/check.py");
    let out = tokio::process::Command::new(python())
        .args([script, base_url])
        .kill_on_drop(true)
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openai SDK failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The event types of a plain streamed Response with three text deltas.
fn response_events() -> Vec<&'static str> {
    let mut types = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    types.extend(["response.output_text.delta"; 3]);
    types.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    types
}

/// What the SDK read from a sim called `name`, checked; the same for both kinds of sim.
fn assert_read(seen: &Value, name: &str) {
    let pieces = format!("{name}-0 {name}-1 {name}-2 ");
    assert_eq!(seen["chat"], format!("ok from {name}"), "{seen}");
    assert_eq!(seen["chat_total_tokens"], 4);
    assert_eq!(seen["stream"], pieces.as_str());
    assert_eq!(seen["stream_role"], "assistant");
    assert_eq!(seen["stream_finish"], "stop");
    assert_eq!(seen["usage_stream"], pieces.as_str());
    assert_eq!(seen["usage_stream_finish"], "stop");
    assert_eq!(seen["usage_stream_tokens"], 3);
    assert_eq!(seen["completion"], format!("ok from {name}"));
    assert_eq!(seen["completion_object"], "text_completion");
    assert_eq!(seen["completion_usage"], json!([1, 3, 4]));
    let vector = json!([0.1, 0.2, 0.3]);
    assert_eq!(
        seen["embeddings"],
        json!([vector, vector, vector]),
        "{seen}"
    );
    assert_eq!(seen["embedding_indexes"], json!([0, 1, 2]));
    assert!(seen["embedding_tokens"].as_u64().unwrap() >= 3, "{seen}");
    assert_eq!(seen["response"], format!("ok from {name}"));
    assert_eq!(seen["response_status"], "completed");
    assert!(seen["response_id"].as_str().unwrap().starts_with("resp_"));
    assert!(seen["response_total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(seen["response_events"], json!(response_events()));
    assert_eq!(seen["response_deltas"], pieces.as_str());
    assert_eq!(seen["response_streamed"], pieces.as_str());
    assert_eq!(seen["response_accumulated"], pieces.as_str());
    let call = json!(["function_call", "get_weather", {"city": "sim"}]);
    assert_eq!(seen["response_call"], call);
    assert_eq!(seen["response_after_call"], "tool said: 22 C");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_every_answer_of_an_openai_sim() {
    let sim = Sim::start("alpha").await.unwrap();
    sim.set_models(&["m1", "e1"]);
    let seen = sdk(&sim.base_url()).await;
    assert_read(&seen, "alpha");
    assert_eq!(seen["models"], json!(["m1", "e1"]));
    // chat x3, completions, embeddings, responses x5.
    assert_eq!(sim.hits("/v1/chat/completions"), 3);
    assert_eq!(sim.hits("/v1/responses"), 5);
    assert_eq!(sim.work_hits(), 10);
    let sent: Value = serde_json::from_slice(&sim.last_body().unwrap()).unwrap();
    assert_eq!(sent["input"][1]["type"], "function_call_output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_reads_every_answer_of_an_ollama_sim() {
    let sim = Sim::start_with("olla", "127.0.0.1:0".parse().unwrap(), Api::Ollama)
        .await
        .unwrap();
    let seen = sdk(&sim.base_url()).await;
    assert_read(&seen, "olla");
    assert_eq!(seen["models"], json!(["sim-model:latest"]));
    assert_eq!(sim.hits("/v1/responses"), 5);
    assert_eq!(sim.work_hits(), 10);
}
