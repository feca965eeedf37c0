//! The chain walk: refused, hung, reset, HTTP 500 and malformed primaries fall back down
//! GPU box -> CPU box -> local; what the client sees when nothing serves.

use std::time::Duration;

use labrouter::outcome::MachineId;
use labrouter::sim::Fault;
use serde_json::Value;
use tokio::time::Instant;

use crate::support::{content, header, TestLab};

#[tokio::test(start_paused = true)]
async fn healthy_chain_serves_from_the_first_target_and_rewrites_only_model() {
    let t = TestLab::start().await;
    let body = r#"{"model":"auto","temperature":0.25,"messages":[{"role":"user","content":"fix this rust bug"}],"x_custom":[1,2]}"#;
    let resp = t
        .client
        .post(format!("{}/v1/chat/completions", t.base))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-route"), "code");
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(header(&resp, "x-labrouter-skipped"), "");
    assert_eq!(content(resp).await, "ok from gpu-box");
    assert_eq!(t.work(), (1, 0, 0));
    let sent = t.gpu.last_body().unwrap();
    assert_eq!(
        std::str::from_utf8(&sent).unwrap(),
        body.replace(r#""model":"auto""#, r#""model":"qwen3-coder:30b""#)
    );
}

#[tokio::test(start_paused = true)]
async fn refused_primary_falls_back_to_cpu_then_local() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Refuse);
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=refused"
    );
    assert_eq!(content(resp).await, "ok from ubuntu-box");
    t.cpu.set(Fault::Refuse);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "small@local");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=refused,coder-cpu@ubuntu-box=refused"
    );
    assert_eq!(content(resp).await, "ok from local");
    // Refused connections never reach a machine's HTTP layer.
    assert_eq!(t.work(), (0, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn hung_primary_costs_first_byte_twice_then_falls_back() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Hang);
    let started = Instant::now();
    let resp = t.chat("code", "hello").await;
    let waited = started.elapsed();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=hung"
    );
    // first_byte (5s) then a liveness check bounded by first_byte (5s): tokio's clock.
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
        "{waited:?}"
    );
    assert_eq!(t.gpu.hits("/v1/chat/completions"), 1);
    assert_eq!(t.gpu.hits("/v1/models"), 1, "one liveness check");
    assert_eq!(t.work(), (1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn http_500_reset_and_malformed_primaries_fall_back() {
    for (fault, reason) in [
        (
            Fault::Status {
                code: 500,
                retry_after: None,
            },
            "http_5xx",
        ),
        (Fault::Reset, "reset"),
        (Fault::Malformed, "malformed"),
    ] {
        let t = TestLab::start().await;
        t.gpu.set(fault.clone());
        let resp = t.chat("code", "hello").await;
        assert_eq!(resp.status(), 200, "{fault:?}");
        assert_eq!(
            header(&resp, "x-labrouter-skipped"),
            format!("coder-gpu@gpu-box={reason}")
        );
        assert_eq!(content(resp).await, "ok from ubuntu-box");
        assert_eq!(t.work(), (1, 1, 0), "{fault:?}");
        let gpu = t.lab.machines.snapshot(MachineId(0));
        assert_eq!(gpu.breaker.failures, 1, "{fault:?} is a qualifying failure");
    }
}

#[tokio::test(start_paused = true)]
async fn slow_generation_on_a_live_machine_succeeds() {
    let t = TestLab::start().await;
    // 40s before the first byte: far beyond first_byte (5s), but /models answers.
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(40)));
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(content(resp).await, "ok from gpu-box");
    assert_eq!(t.work(), (1, 0, 0));
    assert!(t.gpu.hits("/v1/models") >= 1, "liveness was checked");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn nothing_serves_gives_502_with_every_attempt_in_order() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    t.cpu.set(Fault::Refuse);
    t.local.set(Fault::Malformed);
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 502);
    let v: Value = resp.json().await.unwrap();
    let e = &v["error"];
    assert_eq!(e["type"], "upstream_error");
    assert_eq!(e["route"], "code");
    let targets: Vec<&str> = e["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        ["coder-gpu@gpu-box", "coder-cpu@ubuntu-box", "small@local"]
    );
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("HTTP 500") && msg.contains("connection refused"),
        "{msg}"
    );
    assert_eq!(t.work(), (1, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn unreachable_everywhere_gives_503() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Refuse);
    t.cpu.set(Fault::Refuse);
    t.local.set(Fault::Refuse);
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 503);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "upstream_error");
}

#[tokio::test(start_paused = true)]
async fn model_404_is_not_counted_and_falls_back() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 404,
        retry_after: None,
    });
    for _ in 0..5 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    }
    assert_eq!(t.work(), (5, 5, 0));
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn rerouted_counts_requests_another_machine_served() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Refuse);
    for _ in 0..5 {
        t.chat("code", "hello").await;
    }
    t.cpu.set(Fault::Refuse);
    t.local.set(Fault::Refuse);
    t.chat("code", "hello").await; // nothing serves: no machine was rerouted around
    let snap = |i| t.lab.machines.snapshot(i).rerouted;
    assert_eq!(
        (snap(MachineId(0)), snap(MachineId(1)), snap(MachineId(2))),
        (5, 0, 0)
    );
}

/// Every digit run after `"retry_after_ms":` as `N`: the figure is checked as a bound in
/// tests/e2e/breaker.rs; here the bytes around it are.
fn without_retry_figures(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("\"retry_after_ms\":") {
        let (head, tail) = rest.split_at(at + "\"retry_after_ms\":".len());
        out.push_str(head);
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(if digits > 0 { "N" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(start_paused = true)]
async fn the_body_when_nothing_served_keeps_openai_s_envelope_byte_for_byte() {
    let t = TestLab::start().await;
    t.local.set(Fault::Status {
        code: 503,
        retry_after: None,
    });
    let resp = t.chat("chat", "hello").await;
    assert_eq!(resp.status(), 502);
    assert_eq!(header(&resp, "content-type"), "application/json");
    assert_eq!(
        resp.text().await.unwrap(),
        concat!(
            r#"{"error":{"type":"upstream_error","code":"no_target_available","#,
            r#""message":"route 'chat': small@local failed (HTTP 503)","route":"chat","#,
            r#""retry_after_ms":null,"attempts":[{"target":"small@local","outcome":"failed","#,
            r#""reason":"http_5xx","detail":"HTTP 503","retry_after_ms":null}]}}"#
        )
    );
    for _ in 0..2 {
        assert_eq!(t.chat("chat", "hello").await.status(), 502);
    }
    let resp = t.chat("chat", "hello").await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        without_retry_figures(&resp.text().await.unwrap()),
        concat!(
            r#"{"error":{"type":"circuit_open","code":"no_target_available","#,
            r#""message":"route 'chat': small@local open (3 consecutive failures, last: HTTP 503, 1m left)","#,
            r#""route":"chat","retry_after_ms":N,"attempts":[{"target":"small@local","#,
            r#""outcome":"skipped","reason":"circuit_open","retry_after_ms":N}]}}"#
        )
    );
    assert_eq!(t.local.work_hits(), 3, "the skip reached no machine");
}
