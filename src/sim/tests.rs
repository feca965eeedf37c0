//! Unit tests of the simulated machine: answers, counts and each fault as a client sees it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::StreamExt;
use hyper::header::RETRY_AFTER;
use serde_json::{json, Value};

use super::*;

mod media;
mod models;
mod ollama;
mod openai;
mod responses;
mod rich;
mod streams;

/// No pooling: each request opens a fresh connection, so faults apply to it cleanly.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

async fn chat(sim: &Sim, stream: bool) -> reqwest::Result<reqwest::Response> {
    let body = json!({"model":"m1","stream":stream,"messages":[{"role":"user","content":"hi"}]});
    client()
        .post(format!("{}/chat/completions", sim.base_url()))
        .json(&body)
        .send()
        .await
}

/// POSTs `body` as JSON to `url` on a fresh connection.
async fn post(url: String, body: Value) -> reqwest::Result<reqwest::Response> {
    client().post(url).json(&body).send().await
}

/// GETs `url` on a fresh connection and reads its JSON.
async fn get_json(url: String) -> Value {
    client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The JSON events of an SSE body before `[DONE]` (which must end it).
fn events(text: &str) -> Vec<Value> {
    assert!(text.ends_with("data: [DONE]\n\n"), "{text:?}");
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// Waits (yielding, not sleeping) until `path` was hit `n` times.
async fn until_hits(sim: &Sim, path: &str, n: u64) {
    for _ in 0..10_000 {
        if sim.hits(path) >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{path} never reached {n} hits");
}

/// Reads a stream until it ends or fails; returns the text and whether it failed.
async fn drain(resp: reqwest::Response) -> (String, bool) {
    let (mut text, mut body) = (String::new(), resp.bytes_stream());
    while let Some(item) = body.next().await {
        match item {
            Ok(b) => text.push_str(&String::from_utf8_lossy(&b)),
            Err(_) => return (text, true),
        }
    }
    (text, false)
}

#[tokio::test]
async fn ok_answers_echo_and_count() {
    let sim = Sim::start("alpha").await.unwrap();
    let v: Value = chat(&sim, false).await.unwrap().json().await.unwrap();
    assert_eq!(v["model"], "m1");
    assert_eq!(v["choices"][0]["message"]["content"], "ok from alpha");
    let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
    assert!(!failed);
    assert_eq!(
        text.matches("data: ").count(),
        5,
        "three pieces, finish, [DONE]"
    );
    assert!(text.contains("alpha-2 ") && text.ends_with("data: [DONE]\n\n"));
    let sent: Value = serde_json::from_slice(&sim.last_body().unwrap()).unwrap();
    assert_eq!(sent["stream"], true);
    let url = format!("{}/models", sim.base_url());
    let models: Value = client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["owned_by"], "alpha");
    let bad = client()
        .post(format!("{}/embeddings", sim.base_url()))
        .body("{nope");
    assert_eq!(bad.send().await.unwrap().status(), 400);
    assert_eq!(
        client()
            .get(format!("{}/x", sim.base_url()))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(sim.hits("/v1/chat/completions"), 2);
    assert_eq!(sim.hits("/v1/models"), 1);
    assert_eq!(sim.work_hits(), 4);
    assert_eq!(sim.hit_times().len(), 4);
    assert!(sim.hit_times().windows(2).all(|w| w[0] <= w[1]));
    sim.reset_counts();
    assert_eq!((sim.work_hits(), sim.last_body()), (0, None));
    assert!(sim.hit_times().is_empty());
}

#[tokio::test]
async fn refuse_then_ok_on_the_same_port() {
    let sim = Sim::start("beta").await.unwrap();
    sim.set(Fault::Refuse);
    assert!(chat(&sim, false).await.unwrap_err().is_connect());
    assert_eq!(sim.work_hits(), 0);
    sim.set(Fault::Ok);
    assert_eq!(chat(&sim, false).await.unwrap().status(), 200);
    assert_eq!(sim.work_hits(), 1);
    sim.shutdown();
    assert!(chat(&sim, false).await.unwrap_err().is_connect());
}

#[tokio::test]
async fn status_with_retry_after_and_reset() {
    let sim = Sim::start("gamma").await.unwrap();
    sim.set(Fault::Status {
        code: 503,
        retry_after: Some("7".into()),
    });
    let resp = chat(&sim, false).await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()[RETRY_AFTER], "7");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "server_error");
    sim.set(Fault::Reset);
    let err = chat(&sim, false).await.unwrap_err();
    assert!(!err.is_connect() && !err.is_status());
    assert_eq!(sim.hits("/v1/chat/completions"), 2);
}

#[tokio::test]
async fn cut_after_yields_chunks_then_a_body_error() {
    let sim = Sim::start("delta").await.unwrap();
    sim.set(Fault::CutAfter(1));
    let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
    assert!(failed);
    assert_eq!(text.matches("data: ").count(), 1);
    assert!(text.contains("delta-0 ") && !text.contains("[DONE]"));
    sim.set(Fault::CutAfter(0));
    let resp = chat(&sim, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(drain(resp).await, (String::new(), true));
}

#[tokio::test(start_paused = true)]
async fn hang_counts_but_never_answers() {
    let sim = Sim::start("eps").await.unwrap();
    sim.set(Fault::Hang);
    let url = format!("{}/models", sim.base_url());
    let task = tokio::spawn(async move { client().get(url).send().await });
    until_hits(&sim, "/v1/models", 1).await;
    assert_eq!(sim.hits("/v1/models"), 1);
    assert!(tokio::time::timeout(Duration::from_secs(3600), task)
        .await
        .is_err());
}

#[tokio::test(start_paused = true)]
async fn drip_spaces_chunks_in_virtual_time() {
    let sim = Sim::start("zeta").await.unwrap();
    sim.set(Fault::Drip(Duration::from_secs(2)));
    let start = tokio::time::Instant::now();
    let (text, failed) = drain(chat(&sim, true).await.unwrap()).await;
    assert!(!failed && text.ends_with("data: [DONE]\n\n"));
    assert!(start.elapsed() >= Duration::from_secs(6));
}

/// Set precise, a drip waits on a kernel timer (real time, so a short drip): the same frames,
/// each at least the drip apart (a lower bound, never a speed).
#[tokio::test]
async fn a_precise_drip_sends_the_same_frames_no_sooner() {
    let sim = Sim::start("zeta").await.unwrap();
    sim.set(Fault::Drip(Duration::from_millis(5)));
    let (plain, failed) = drain(chat(&sim, true).await.unwrap()).await;
    assert!(!failed);
    sim.set_precise(true);
    let start = tokio::time::Instant::now();
    let (precise, failed) = drain(chat(&sim, true).await.unwrap()).await;
    assert!(!failed && precise.ends_with("data: [DONE]\n\n"));
    assert_eq!(events(&precise).len(), events(&plain).len());
    assert!(start.elapsed() >= Duration::from_millis(5 * events(&plain).len() as u64 - 5));
}
