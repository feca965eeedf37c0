//! Work through the Ollama front door: native to the Ollama machine, the same chain walk,
//! breakers and headers as the OpenAI side, Ollama-shaped errors.

use labrouter::sim::Fault;
use serde_json::{json, Value};

use super::{lines, text_of};
use crate::support::{header, TestLab};

#[tokio::test(start_paused = true)]
async fn a_chat_reaches_the_ollama_machine_natively_and_comes_back_as_it_answered() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "code", "stream": false, "keep_alive": "5m",
                   "options": {"num_ctx": 8192, "temperature": 0.2},
                   "messages": [{"role": "user", "content": "fix this bug"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-route"), "code");
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["message"]["content"], "ok from gpu-box", "{v}");
    assert_eq!(v["done"], true);
    assert_eq!(t.gpu.hits("/api/chat"), 1, "native, not /v1");
    assert_eq!(t.gpu.hits("/v1/chat/completions"), 0);
    // Only `model` changed: what only Ollama reads reaches Ollama.
    let sent: Value = serde_json::from_slice(&t.gpu.last_body().unwrap()).unwrap();
    assert_eq!(sent["model"], "qwen3-coder:30b");
    assert_eq!(sent["keep_alive"], "5m");
    assert_eq!(sent["options"]["num_ctx"], 8192);
    assert_eq!(t.work(), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_ollama_machine_refusing_falls_back_to_the_openai_box_in_ndjson_and_opens_after_three()
{
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let ask = || {
        t.post(
            "/api/chat",
            json!({"model": "code", "messages": [{"role": "user", "content": "refactor it"}]}),
        )
    };
    for i in 1..=3u64 {
        let resp = ask().await;
        assert_eq!(resp.status(), 200);
        assert_eq!(header(&resp, "content-type"), "application/x-ndjson");
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
        assert_eq!(
            header(&resp, "x-labrouter-skipped"),
            "coder-gpu@gpu-box=http_5xx"
        );
        let body = resp.text().await.unwrap();
        let got = lines(&body);
        assert_eq!(
            text_of(&got),
            "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ",
            "{body}"
        );
        let last = got.last().unwrap();
        assert_eq!(last["done"], true, "{body}");
        assert_eq!(last["done_reason"], "stop", "{body}");
        assert_eq!(
            last["model"], "code",
            "the name the client asked for: {body}"
        );
        assert!(
            got[..got.len() - 1].iter().all(|l| l["done"] == false),
            "{body}"
        );
        assert_eq!(t.work(), (i, i, 0));
    }
    assert_eq!(t.state("gpu-box"), "open");
    // Open: skipped in microseconds, nothing sent.
    let resp = ask().await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(resp.status(), 200);
    assert_eq!(t.work(), (3, 4, 0));
}

#[tokio::test(start_paused = true)]
async fn a_native_stream_cut_before_its_first_line_falls_back_and_after_it_ends_with_an_error() {
    let t = TestLab::start_ollama_gpu().await;
    t.gpu.set(Fault::CutAfter(0));
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "code", "prompt": "write a function"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=stream_cut"
    );
    let got = lines(&resp.text().await.unwrap());
    assert_eq!(text_of(&got), "ubuntu-box-0 ubuntu-box-1 ubuntu-box-2 ");
    assert_eq!(got.last().unwrap()["done"], true);
    assert_eq!(t.work(), (1, 1, 0));

    // After bytes reached the client there is nothing to fall back to: a last line with
    // `error`, never `done: true`, and the breaker hears of it.
    t.gpu.set(Fault::CutAfter(1));
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "code", "prompt": "write a function"}),
        )
        .await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let body = resp.text().await.unwrap();
    let got = lines(&body);
    assert_eq!(got.len(), 2, "{body}");
    assert_eq!(got[0]["done"], false);
    let err = got[1]["error"].as_str().unwrap();
    assert!(err.contains("coder-gpu@gpu-box failed mid-stream"), "{err}");
    assert!(!body.contains("\"done\":true"), "{body}");
    assert_eq!(t.work(), (2, 1, 0));
    assert_eq!(
        t.lab
            .machines
            .snapshot(t.lab.registry.machine_index("gpu-box").unwrap())
            .breaker
            .failures,
        2
    );
}

#[tokio::test(start_paused = true)]
async fn a_native_stream_whose_first_line_is_an_error_falls_back() {
    let t = TestLab::start_ollama_gpu().await;
    // A 200 whose body is not an answer (Malformed) fails over like on the OpenAI side.
    t.gpu.set(Fault::Malformed);
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "code", "stream": false, "messages": [{"role": "user", "content": "bug"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=malformed"
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["message"]["content"], "ok from ubuntu-box", "{v}");
    assert_eq!(v["done"], true);
    assert_eq!(t.work(), (1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn bad_bodies_get_400_with_an_ollama_error_and_change_nothing() {
    let t = TestLab::start_ollama_gpu().await;
    let cases: &[(&str, &str, &str)] = &[
        ("/api/chat", "not json", "JSON"),
        ("/api/chat", "[1, 2]", "JSON object"),
        (
            "/api/chat",
            r#"{"model": "code", "messages": "hi"}"#,
            "messages",
        ),
        ("/api/chat", r#"{"model": 7, "messages": []}"#, "model"),
        (
            "/api/generate",
            r#"{"model": "code", "prompt": 5}"#,
            "prompt",
        ),
        ("/api/chat", r#"{"model": "nope", "messages": []}"#, "nope"),
        (
            "/api/embed",
            r#"{"input": "vectors please"}"#,
            "embeddings need a model",
        ),
        (
            "/api/embed",
            r#"{"model": "auto:latest", "input": "x"}"#,
            "embeddings need a model",
        ),
    ];
    for (path, body, says) in cases {
        let resp = t
            .client
            .post(format!("{}{path}", t.base))
            .header("content-type", "application/json")
            .body(*body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{path} {body}");
        let v: Value = resp.json().await.unwrap();
        let message = v["error"].as_str().unwrap_or_else(|| panic!("{v}"));
        assert!(message.contains(says), "{path} {body}: {message}");
        assert_eq!(v.as_object().unwrap().len(), 1, "only `error`: {v}");
    }
    assert_eq!(t.work(), (0, 0, 0));
    for m in ["gpu-box", "ubuntu-box", "local"] {
        assert_eq!(t.state(m), "closed");
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_served_is_an_ollama_error_with_the_openai_status_and_headers() {
    let t = TestLab::start_ollama_gpu().await;
    for m in ["gpu-box", "ubuntu-box", "local"] {
        let resp = t
            .post(&format!("/admin/breakers/{m}/open"), json!({"by": "test"}))
            .await;
        assert_eq!(resp.status(), 200);
    }
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "code", "messages": [{"role": "user", "content": "bug"}]}),
        )
        .await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=forced_open,coder-cpu@ubuntu-box=forced_open,small@local=forced_open"
    );
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("gpu-box"), "{v}");
    assert_eq!(t.work(), (0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn latest_tags_are_ignored_when_matching_names() {
    let t = TestLab::start_ollama_gpu().await;
    for (name, target) in [
        ("code:latest", "coder-gpu@gpu-box"),
        ("small:latest", "small@local"),
        ("qwen3-coder:30b", "coder-gpu@gpu-box"),
        ("auto:latest", "small@local"),
    ] {
        let resp = t
            .post(
                "/api/chat",
                json!({"model": name, "stream": false, "messages": [{"role": "user", "content": "hello"}]}),
            )
            .await;
        assert_eq!(resp.status(), 200, "{name}");
        assert_eq!(header(&resp, "x-labrouter-target"), target, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn embeddings_stay_on_their_model_and_reach_ollama_natively() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = t
        .post(
            "/api/embed",
            json!({"model": "coder-gpu", "input": ["one", "two"]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["embeddings"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(t.gpu.hits("/api/embed"), 1);
    // Translated for an OpenAI machine, and back.
    let resp = t
        .post("/api/embed", json!({"model": "small", "input": "one"}))
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["embeddings"], json!([[0.1, 0.2, 0.3]]), "{v}");
    assert_eq!(v["model"], "small");
    assert_eq!(t.local.hits("/v1/embeddings"), 1);
    let resp = t
        .post(
            "/api/embeddings",
            json!({"model": "small", "prompt": "one"}),
        )
        .await;
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["embedding"], json!([0.1, 0.2, 0.3]), "{v}");
    // The GPU box down: its embeddings never move to another model (docs/api.md).
    t.gpu.set(Fault::Refuse);
    let resp = t
        .post("/api/embed", json!({"model": "coder-gpu", "input": "one"}))
        .await;
    assert_eq!(resp.status(), 503);
    assert!(resp.json::<Value>().await.unwrap()["error"].is_string());
    assert_eq!(t.cpu.work_hits(), 0);
}
