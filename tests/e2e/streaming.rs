//! Streams: held until the first chunk (so a machine that dies before it can be replaced),
//! relayed chunk by chunk after it, and ended with an SSE error event when cut mid-way.

use std::time::Duration;

use futures_util::StreamExt;
use labrouter::outcome::MachineId;
use labrouter::sim::Fault;
use tokio::time::Instant;

use crate::support::{header, TestLab};

async fn body_text(resp: reqwest::Response) -> String {
    String::from_utf8(resp.bytes().await.unwrap().to_vec()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn healthy_stream_passes_through_with_done() {
    let t = TestLab::start().await;
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/event-stream");
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let text = body_text(resp).await;
    // Three pieces, then the machine's finish chunk, relayed as they came.
    assert_eq!(text.matches("data: {").count(), 4, "{text}");
    assert_eq!(text.matches("gpu-box-").count(), 3, "{text}");
    assert!(text.contains("\"finish_reason\":\"stop\""), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(text.contains("\"model\":\"qwen3-coder:30b\""));
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_before_the_first_byte_falls_back() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::CutAfter(0));
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=stream_cut"
    );
    let text = body_text(resp).await;
    assert!(
        text.contains("ubuntu-box-0") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    assert_eq!(t.work(), (1, 1, 0));
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_after_bytes_reached_the_client_ends_with_an_error_event() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::CutAfter(1));
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let text = body_text(resp).await;
    assert!(text.contains("gpu-box-0"), "{text}");
    assert!(!text.contains("[DONE]"), "never a clean end: {text}");
    let last = text.trim_end().lines().last().unwrap();
    assert!(last.starts_with("data: {\"error\""), "{text}");
    assert!(last.contains("stream_cut"), "{last}");
    assert_eq!(t.work(), (1, 0, 0), "no failover after the first byte");
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_hung_mid_way_ends_with_an_error_event_after_idle_and_liveness() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::StallAfter(1));
    let started = Instant::now();
    let resp = t.chat_stream("code", "hello").await;
    let text = body_text(resp).await;
    assert!(
        text.contains("gpu-box-0") && text.contains("stream_hung"),
        "{text}"
    );
    assert!(!text.contains("[DONE]"));
    // idle (30s) plus a liveness check bounded by first_byte (5s).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(35) && waited < Duration::from_secs(36),
        "{waited:?}"
    );
    assert_eq!(t.work(), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_slow_dripping_stream_reaches_the_client_chunk_by_chunk() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    t.gpu.set_chunks(4);
    let started = Instant::now();
    let resp = t.chat_stream("code", "hello").await;
    // Headers come with the first chunk, 2s in.
    let first = started.elapsed();
    assert!(
        first >= Duration::from_secs(2) && first < Duration::from_secs(3),
        "{first:?}"
    );
    let mut body = resp.bytes_stream();
    let mut arrivals = Vec::new();
    let mut all = String::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        let text = String::from_utf8(chunk.to_vec()).unwrap();
        for _ in 0..text.matches("gpu-box-").count() {
            arrivals.push(started.elapsed().as_secs());
        }
        all.push_str(&text);
    }
    // Each content chunk arrives on its own, 2s apart: nothing buffered.
    assert_eq!(arrivals, [2, 4, 6, 8], "{all}");
    assert!(all.ends_with("data: [DONE]\n\n"));
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn a_stream_slower_than_idle_on_a_live_machine_is_not_a_hang() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Drip(Duration::from_secs(45)));
    t.gpu.set_chunks(2);
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let text = body_text(resp).await;
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(
        t.gpu.hits("/v1/models") >= 2,
        "liveness checked during the silences"
    );
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 0);
}

/// README "What trips a breaker" (changed): a stream's first chunk is the probe's verdict, so a client that
/// leaves after it cannot undo it. (A client that leaves before any sign of health is no
/// success: `e2e::probe`.)
#[tokio::test(start_paused = true)]
async fn a_client_that_goes_away_mid_stream_leaves_the_first_chunks_verdict() {
    let t = TestLab::start().await;
    // Open the breaker, let the cooldown pass: the next stream is the probe.
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        t.chat("code", "hello").await;
    }
    tokio::time::sleep(Duration::from_secs(61)).await;
    t.gpu.set(Fault::Drip(Duration::from_secs(2)));
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    drop(resp); // the client goes away after the first chunk: the verdict came with it
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        t.state("gpu-box"),
        "closed",
        "the first chunk was the verdict"
    );
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn a_stream_hung_before_its_first_chunk_falls_back() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::StallAfter(0));
    let resp = t.chat_stream("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=stream_hung"
    );
    assert!(body_text(resp).await.ends_with("data: [DONE]\n\n"));
    assert_eq!(t.work(), (1, 1, 0));
}
