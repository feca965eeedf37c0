//! Two deadlines: a machine's own `timeouts.total` is its failure and the chain moves on;
//! the request's deadline (the longest `total` in its chain) ends the walk with 504.

use std::time::Duration;

use labrouter::outcome::MachineId;
use labrouter::sim::Fault;
use serde_json::Value;

use crate::support::{content, header, TestLab};

/// The GPU box gives up after its own `total` of 20 s; the rest keep the default 10 m.
fn gpu_total_20s(yaml: String) -> String {
    let out = yaml.replacen(
        "gpu-box: { url: ",
        "gpu-box: { timeouts: { total: 20s }, url: ",
        1,
    );
    assert_ne!(out, yaml, "the registry names gpu-box as expected");
    out
}

#[tokio::test(start_paused = true)]
async fn a_machine_out_of_its_own_total_is_a_failure_and_the_chain_moves_on() {
    let t = TestLab::start_edited("", "", gpu_total_20s).await;
    // Alive (its /models answers), but no answer within its 20 s.
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(60)));
    let started = tokio::time::Instant::now();
    let resp = t.chat("code", "fix this bug").await;
    assert_eq!(
        resp.status(),
        200,
        "the request's deadline (10 m) still had time"
    );
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=timeout"
    );
    assert_eq!(content(resp).await, "ok from ubuntu-box");
    assert_eq!(t.work(), (1, 1, 0), "one try each, the chain is the retry");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(20) && waited < Duration::from_secs(60),
        "the GPU box's own total, not its answer, ended its try: {waited:?}"
    );
    let gpu = t.lab.machines.snapshot(MachineId(0));
    assert_eq!(
        gpu.breaker.failures, 1,
        "its own total is a qualifying failure"
    );
    assert_eq!(
        gpu.breaker.last_reason.as_deref(),
        Some("no complete answer within 20s (timeouts.total)")
    );
}

#[tokio::test(start_paused = true)]
async fn the_requests_deadline_ends_the_walk_with_504() {
    let t = TestLab::start().await;
    // Every machine keeps 10 m, so the GPU box's total is the request's deadline.
    t.gpu
        .set(Fault::SlowFirstByte(Duration::from_secs(11 * 60)));
    let resp = t.chat("code", "fix this bug").await;
    assert_eq!(resp.status(), 504);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=timeout"
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "timeout");
    assert_eq!(v["error"]["code"], "deadline_exceeded");
    assert_eq!(v["error"]["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(
        t.work(),
        (1, 0, 0),
        "nothing is sent once the deadline has passed"
    );
}
