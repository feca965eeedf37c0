//! The official `ollama` Python client (from PyPI) against labrouter, an Ollama server on
//! the GPU box and OpenAI-only servers behind it (docs/api.md "The Ollama endpoints"). `scripts/test.sh` installs the
//! client into a venv and names its Python in `LABROUTER_TEST_PYTHON`; without it this
//! test fails, saying how to get it: a test that skipped could not fail.
//!
//! Real time (not the paused clock): the client is another process. Nothing here waits on
//! a timer; every answer comes at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use labrouter::sim::Fault;
use serde_json::{json, Value};

use support::TestLab;

/// The Python with the `ollama` package: `LABROUTER_TEST_PYTHON`, else the venv
/// `scripts/test.sh` makes.
fn python() -> String {
    if let Ok(p) = std::env::var("LABROUTER_TEST_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/test-venv/bin/python");
    assert!(
        std::path::Path::new(venv).exists(),
        "the ollama Python client is missing: run scripts/test.sh (it makes {venv}), or set LABROUTER_TEST_PYTHON"
    );
    venv.to_string()
}

/// Runs one scenario of tests/ollama_client/check.py against `base`; what the client saw.
async fn client(base: &str, scenario: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ollama_client/check.py");
    let out = tokio::process::Command::new(python())
        .args([script, base, scenario])
        .kill_on_drop(true)
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{scenario}: the ollama client failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_gets_the_whole_lab() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set_models(&["qwen3-coder:30b"]);
    let seen = client(&t.base, "basics").await;

    let tags: Vec<&str> = seen["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in ["auto:latest", "code:latest", "small:latest", "qwen3:4b"] {
        assert!(tags.contains(&name), "{name} in {tags:?}");
    }
    // Natively to the Ollama machine, whole and streamed (a `:latest` name too).
    assert_eq!(seen["chat"], "ok from gpu-box");
    assert_eq!(seen["chat_done"], true);
    assert_eq!(seen["stream"], "gpu-box-0 gpu-box-1 gpu-box-2 ");
    assert_eq!(seen["stream_last_done"], true);
    assert_eq!(seen["stream_done_reason"], "stop");
    assert_eq!(t.gpu.hits("/api/chat"), 2);
    // Translated for the OpenAI-only machine: code completion with a suffix, a stream.
    assert_eq!(seen["generate_suffix"], "ok from local");
    assert_eq!(t.local.hits("/v1/completions"), 1);
    assert_eq!(seen["generate_stream"], "local-0 local-1 local-2 ");
    assert!(seen["generate_eval_count"].is_u64(), "{seen}");
    // Embeddings, natively and translated.
    assert_eq!(seen["embed_gpu"], 2);
    assert_eq!(t.gpu.hits("/api/embed"), 1);
    assert_eq!(seen["embed_small"], json!([[0.1, 0.2, 0.3]]));
    // What is loaded, and model cards.
    assert_eq!(seen["ps"], json!(["qwen3-coder:30b"]));
    assert!(seen["show_gpu_context"].is_u64(), "{seen}");
    assert!(seen["show_small_capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("completion")));
    // A tool call round trip through translation.
    assert_eq!(seen["tool_name"], "get_weather");
    assert_eq!(seen["tool_args"], json!({"city": "sim"}));
    assert_eq!(seen["tool_answer"], "tool said: 22 C");
    // `format: json`, `think`.
    assert_eq!(seen["json"]["from"], "local");
    assert_eq!(seen["thinking"], "thinking from local");
    // Errors the client can read; pull answered for a known name.
    assert_eq!(seen["unknown"]["status"], 400, "{seen}");
    assert!(seen["unknown"]["error"].as_str().unwrap().contains("nope"));
    assert_eq!(seen["pull"], "success");
    assert_eq!(t.cpu.work_hits(), 0, "nothing failed over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gpu_boxs_ollama_refusing_moves_the_client_to_the_openai_box() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let seen = client(&t.base, "fallback").await;
    for s in seen["seen"].as_array().unwrap() {
        assert_eq!(
            s["text"], "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ",
            "{seen}"
        );
        assert_eq!(s["done"], true);
    }
    // Three failures reached the GPU box; then its breaker was open and the fourth
    // request never left labrouter for it.
    assert_eq!(t.gpu.work_hits(), 3);
    assert_eq!(t.cpu.work_hits(), 4);
    assert_eq!(t.state("gpu-box"), "open");
}
