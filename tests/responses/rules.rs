//! One request at a time: routing, classification, streams.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::fake::Mode;
use crate::lab::{text, Lab};

#[tokio::test(start_paused = true)]
async fn a_response_goes_along_the_chain_with_its_model_rewritten_and_is_kept_for_its_key() {
    let lab = Lab::start("").await;
    let resp = lab
        .post(
            &json!({"model": "auto", "input": "refactor this function"}),
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-labrouter-route"], "code");
    assert_eq!(resp.headers()["x-labrouter-target"], "coder-gpu@gpu-box");
    let r: Value = resp.json().await.unwrap();
    assert_eq!(r["object"], "response");
    assert_eq!(text(&r), "ok from gpu-box");
    assert_eq!(lab.gpu.last_body()["model"], "qwen3-coder:30b");
    assert_eq!(
        lab.gpu.last_body()["input"],
        "refactor this function",
        "the rest as sent"
    );
    let id = r["id"].as_str().unwrap();
    let kept = lab.get(&format!("/v1/responses/{id}"), None).await;
    assert_eq!(kept.status(), 200);
    let kept: Value = kept.json().await.unwrap();
    assert_eq!(kept["id"], id);
    assert_eq!(text(&kept), "ok from gpu-box");
    let gone = lab
        .client
        .delete(format!("{}/v1/responses/{id}", lab.base))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 200);
    let gone: Value = gone.json().await.unwrap();
    assert_eq!(gone["deleted"], true);
    let after = lab.get(&format!("/v1/responses/{id}"), None).await;
    assert_eq!(after.status(), 404);
    let e: Value = after.json().await.unwrap();
    assert_eq!(e["error"]["code"], "response_not_found");
    assert_eq!(lab.hits(), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_machine_that_does_not_serve_the_endpoint_is_passed_over_and_its_breaker_stays_closed() {
    let lab = Lab::start("").await;
    for code in [501, 405] {
        lab.gpu.set(Mode::Status(code)).await;
        for _ in 0..4 {
            let resp = lab
                .post(&json!({"model": "code", "input": "fix this bug"}), None)
                .await;
            assert_eq!(resp.status(), 200, "HTTP {code}");
            assert_eq!(resp.headers()["x-labrouter-target"], "coder-cpu@ubuntu-box");
            let skipped = resp.headers()["x-labrouter-skipped"]
                .to_str()
                .unwrap()
                .to_string();
            assert_eq!(skipped, "coder-gpu@gpu-box=unsupported");
        }
        assert_eq!(
            lab.breaker("gpu-box").await,
            ("closed".to_string(), 0),
            "HTTP {code}"
        );
    }
    assert_eq!(
        lab.hits(),
        (8, 8, 0),
        "each request tried the GPU box, then the CPU box"
    );
}

#[tokio::test(start_paused = true)]
async fn a_200_that_is_no_response_is_malformed_and_the_next_machine_serves() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::NotAResponse).await;
    let resp = lab
        .post(&json!({"model": "code", "input": "fix this bug"}), None)
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["x-labrouter-skipped"],
        "coder-gpu@gpu-box=malformed"
    );
    assert_eq!(lab.hits(), (1, 1, 0));
    assert_eq!(lab.breaker("gpu-box").await, ("closed".to_string(), 1));
}

async fn stream(lab: &Lab) -> reqwest::Response {
    let resp = lab
        .post(
            &json!({"model": "code", "input": "fix this bug", "stream": true}),
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    resp
}

#[tokio::test(start_paused = true)]
async fn a_stream_passes_event_by_event_before_the_machine_has_finished() {
    let lab = Lab::start("").await;
    lab.gpu
        .set(Mode::SlowAfterFirst(Duration::from_secs(20)))
        .await;
    let resp = stream(&lab).await;
    let mut body = resp.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first).to_string();
    assert!(first.starts_with("event: response.created"), "{first}");
    assert!(
        !lab.gpu.finished.load(std::sync::atomic::Ordering::SeqCst),
        "the first event reached the client while the machine was still generating"
    );
    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("event: response.completed"), "{rest}");
    assert!(!rest.contains("[DONE]"));
    assert_eq!(lab.breaker("gpu-box").await, ("closed".to_string(), 0));
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_its_first_event_is_served_by_the_next_machine() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::CutAfter(0)).await;
    let resp = stream(&lab).await;
    assert_eq!(resp.headers()["x-labrouter-target"], "coder-cpu@ubuntu-box");
    let body = resp.text().await.unwrap();
    assert!(body.contains("event: response.completed"), "{body}");
    assert!(body.contains("ok from ubuntu-box"));
    assert_eq!(lab.hits(), (1, 1, 0));
    assert_eq!(lab.breaker("gpu-box").await, ("closed".to_string(), 1));
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_events_ends_with_a_stream_cut_error_and_counts_against_the_machine() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::CutAfter(2)).await;
    let resp = stream(&lab).await;
    assert_eq!(resp.headers()["x-labrouter-target"], "coder-gpu@gpu-box");
    let body = resp.text().await.unwrap();
    assert!(body.starts_with("event: response.created"), "{body}");
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: error\ndata: "), "{body}");
    let data: Value =
        serde_json::from_str(last.trim_start_matches("event: error\ndata: ")).unwrap();
    assert_eq!(data["type"], "error");
    assert_eq!(data["code"], "stream_cut");
    assert!(!body.contains("response.completed"));
    assert_eq!(
        lab.hits(),
        (1, 0, 0),
        "after events reached the client, nothing fails over"
    );
    assert_eq!(lab.breaker("gpu-box").await, ("closed".to_string(), 1));
}

#[tokio::test(start_paused = true)]
async fn keyword_routing_reads_the_last_user_input_never_the_instructions() {
    let lab = Lab::start("").await;
    let resp = lab
        .post(
            &json!({"model": "auto", "instructions": "refactor the code, fix every bug in each function",
                    "input": [{"role": "user", "content": "write me a refactor"}, {"role": "assistant", "content": "ok"},
                              {"role": "user", "content": [{"type": "input_text", "text": "hello there"}]}]}),
            None,
        )
        .await;
    assert_eq!(resp.headers()["x-labrouter-route"], "chat");
    let resp = lab
        .post(
            &json!({"model": "auto", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "what is in it"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]}),
            None,
        )
        .await;
    assert_eq!(resp.headers()["x-labrouter-route"], "vision");
    assert_eq!(lab.gpu.last_body()["model"], "qwen2.5vl:7b");
    assert_eq!(lab.hits(), (1, 0, 1));
}
