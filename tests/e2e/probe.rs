//! Probes on the wire (README "What trips a breaker"): a half-open machine's verdict comes as soon as it shows
//! it works (2xx headers, a stream's first chunk, a passed liveness check), not when a long
//! generation ends; meanwhile, and after, other requests reach it again.

use std::time::Duration;

use futures_util::StreamExt;
use labrouter::outcome::MachineId;
use labrouter::sim::Fault;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::{content, header, TestLab};

/// Opens the GPU box's breaker with three HTTP 500s (served by the CPU box) and lets the
/// cooldown pass: the next call to it is the probe.
async fn gpu_due_for_probe(t: &TestLab) {
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        assert_eq!(t.chat("code", "hello").await.status(), 200);
    }
    assert_eq!(t.state("gpu-box"), "open");
    assert_eq!(t.work(), (3, 3, 0));
    tokio::time::sleep(Duration::from_secs(61)).await;
}

/// Sends a chat request from its own task, so the test can look around while it waits.
fn spawn_chat(t: &TestLab, model: &str, stream: bool) -> JoinHandle<reqwest::Response> {
    let client = t.client.clone();
    let url = format!("{}/v1/chat/completions", t.base);
    let body = json!({"model": model, "stream": stream,
        "messages": [{"role": "user", "content": "hello"}]});
    tokio::spawn(async move {
        client
            .post(url)
            .json(&body)
            .send()
            .await
            .expect("router answered")
    })
}

fn snapshot(t: &TestLab) -> labrouter::breaker::Breaker {
    t.lab.machines.snapshot(MachineId(0)).breaker
}

#[tokio::test(start_paused = true)]
async fn a_slow_generation_probe_closes_the_breaker_after_one_liveness_check() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    // The machine is back, but the probe is a long generation.
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(120)));
    let started = Instant::now();
    let probe = spawn_chat(&t, "code", false);

    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(t.state("gpu-box"), "half_open", "no sign of health yet");
    assert_eq!(t.gpu.work_hits(), 4);
    assert_eq!(t.gpu.hits("/v1/models"), 0);

    // At first_byte (5s) the liveness check passes: that is the probe's verdict.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        t.state("gpu-box"),
        "closed",
        "vouched by the liveness check"
    );
    assert_eq!(t.gpu.hits("/v1/models"), 1);
    assert!(!probe.is_finished(), "the generation goes on");

    // Another request meanwhile reaches the machine instead of skipping it.
    t.gpu.set(Fault::Ok);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "",
        "not probe_in_flight"
    );
    assert_eq!(content(resp).await, "ok from gpu-box");
    assert!(started.elapsed() < Duration::from_secs(7));
    assert_eq!(t.work(), (5, 3, 0));
    assert!(!probe.is_finished());

    // The probe's own answer comes when the generation ends, and changes nothing.
    let resp = probe.await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(120));
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(content(resp).await, "ok from gpu-box");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(snapshot(&t).failures, 0);
    assert_eq!(t.work(), (5, 3, 0), "one probe, one request after it");
}

#[tokio::test(start_paused = true)]
async fn a_stream_probe_closes_the_breaker_at_its_first_chunk() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    t.gpu.set_chunks(4);
    let started = Instant::now();
    let probe = spawn_chat(&t, "code", true);

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(t.state("gpu-box"), "half_open", "no chunk yet");

    // The first chunk came at 2s; the stream drips on until 8s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(t.state("gpu-box"), "closed", "vouched by the first chunk");
    assert_eq!(t.gpu.hits("/v1/models"), 0, "no liveness check needed");
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(header(&resp, "x-labrouter-skipped"), "");
    assert_eq!(t.work(), (5, 3, 0));

    let resp = probe.await.unwrap();
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(8), "{elapsed:?}");
    assert_eq!(text.matches("gpu-box-").count(), 4, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(snapshot(&t).failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_probe_whose_2xx_body_is_malformed_still_closed_the_breaker() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    t.gpu.set(Fault::Malformed);
    let resp = t.chat("code", "hello").await;
    // The client sees the failed attempt and the fallback, as before.
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=malformed"
    );
    assert_eq!(content(resp).await, "ok from ubuntu-box");
    assert_eq!(t.work(), (4, 4, 0));
    // The 2xx headers were the verdict: the body's failure came after it and is stale.
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(snapshot(&t).failures, 0);

    // The breaker is closed for real: the next call reaches the machine, and its failure
    // counts as any failure of a closed breaker does.
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=malformed"
    );
    assert_eq!(t.work(), (5, 5, 0));
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(snapshot(&t).failures, 1);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_fails_before_any_sign_of_health_reopens_with_backoff() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    // Frozen: the liveness check at first_byte fails too, so nothing vouches.
    t.gpu.set(Fault::Hang);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=hung"
    );
    assert_eq!(t.work(), (4, 4, 0));
    assert_eq!(t.state("gpu-box"), "open");
    assert_eq!(snapshot(&t).cooldown, Duration::from_secs(120));
}

#[tokio::test(start_paused = true)]
async fn a_vouched_probe_that_ends_without_a_verdict_leaves_the_next_probe_alone() {
    // Two probe successes needed: the first probe's vouch keeps the breaker half-open and
    // lets a second probe in.
    let t = TestLab::start_edited("", "", |yaml| {
        yaml.replace("success_threshold: 1", "success_threshold: 2")
    })
    .await;
    gpu_due_for_probe(&t).await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    t.gpu.set_chunks(4);

    let first = t.chat_stream("code", "hello").await; // its first chunk came at 2s
    assert_eq!(header(&first, "x-labrouter-target"), "coder-gpu@gpu-box");
    let b = snapshot(&t);
    assert_eq!((b.phase.as_str(), b.successes), ("half_open", 1));
    assert!(!b.probe_in_flight, "the vouched probe handed the lease on");

    let second = spawn_chat(&t, "code", true); // its first chunk comes at 4s
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        snapshot(&t).probe_in_flight,
        "the second probe holds the lease"
    );
    drop(first); // the first probe's client goes away
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = snapshot(&t);
    assert!(b.probe_in_flight, "still the second probe's");
    assert_eq!((b.phase.as_str(), b.successes), ("half_open", 1));
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=probe_in_flight"
    );
    assert_eq!(t.work(), (5, 4, 0));

    let resp = second.await.unwrap();
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(
        t.state("gpu-box"),
        "closed",
        "the second probe's first chunk"
    );
    let text = resp.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(t.state("gpu-box"), "closed");
    let v: Value = t.chat("code", "hello").await.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "ok from gpu-box");
}

#[tokio::test(start_paused = true)]
async fn a_probe_whose_client_goes_away_before_any_sign_of_health_leaves_it_half_open() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    let probe = spawn_chat(&t, "code", true);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(snapshot(&t).probe_in_flight);
    probe.abort(); // the client goes away before the first chunk
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = snapshot(&t);
    assert_eq!(b.phase.as_str(), "half_open", "a gone client is no success");
    assert!(!b.probe_in_flight, "the lease came back");
    // The next call is the probe.
    t.gpu.set(Fault::Ok);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.work(), (5, 3, 0));
}

#[tokio::test(start_paused = true)]
async fn a_probe_whose_client_goes_away_after_the_first_chunk_keeps_its_verdict() {
    let t = TestLab::start().await;
    gpu_due_for_probe(&t).await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    drop(resp);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        t.state("gpu-box"),
        "closed",
        "the first chunk was the verdict"
    );
    assert_eq!(snapshot(&t).failures, 0);
}
