//! Breakers on the wire: when a machine stops receiving requests, and when it gets exactly
//! one again. Cooldowns run on tokio's paused clock.

use std::time::Duration;

use futures_util::future::join_all;
use labrouter::outcome::MachineId;
use labrouter::sim::Fault;
use serde_json::Value;

use crate::support::{content, header, TestLab};

fn http(code: u16) -> Fault {
    Fault::Status {
        code,
        retry_after: None,
    }
}

/// Opens the GPU box's breaker with three HTTP 500s (each served by the CPU box).
async fn trip_gpu(t: &TestLab) {
    t.gpu.set(http(500));
    for _ in 0..3 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(t.state("gpu-box"), "open");
}

#[tokio::test(start_paused = true)]
async fn opens_after_three_failures_and_the_fourth_call_reaches_no_machine_of_that_kind() {
    let t = TestLab::start().await;
    trip_gpu(&t).await;
    assert_eq!(t.work(), (3, 3, 0));
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        t.work(),
        (3, 4, 0),
        "the 4th call never reached the GPU box"
    );
    // Another model on the same machine shares its breaker.
    let resp = t.chat("vision", "hello").await;
    assert_eq!(resp.status(), 503);
    assert_eq!(t.gpu.work_hits(), 3);
    let snap = t.lab.machines.snapshot(MachineId(0));
    assert_eq!(snap.remote_attempts, 3);
    assert_eq!(snap.local_rejections, 2);
}

#[tokio::test(start_paused = true)]
async fn ten_bad_requests_reach_the_machine_ten_times_and_never_open_it() {
    let t = TestLab::start().await;
    t.gpu.set(http(400));
    for _ in 0..10 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(resp.status(), 400, "passed to the client as is");
        let v: Value = resp.json().await.unwrap();
        assert!(v["error"].is_object());
    }
    assert_eq!(
        t.work(),
        (10, 0, 0),
        "no fallback for the client's own error"
    );
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_success_resets_the_consecutive_count() {
    let t = TestLab::start().await;
    for _ in 0..5 {
        t.gpu.set(http(500));
        t.chat("code", "hello").await;
        t.chat("code", "hello").await;
        t.gpu.set(Fault::Ok);
        assert_eq!(
            content(t.chat("code", "hello").await).await,
            "ok from gpu-box"
        );
    }
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.gpu.work_hits(), 15);
}

#[tokio::test(start_paused = true)]
async fn five_concurrent_calls_at_half_open_send_exactly_one_probe() {
    let t = TestLab::start().await;
    trip_gpu(&t).await;
    // The machine recovers, slowly: the probe is still in flight while the others arrive.
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(2)));
    tokio::time::sleep(Duration::from_secs(61)).await;
    let before = t.work();
    let answers = join_all((0..5).map(|_| t.chat("code", "hello"))).await;
    let targets: Vec<String> = answers
        .iter()
        .map(|r| header(r, "x-labrouter-target"))
        .collect();
    assert_eq!(
        targets.iter().filter(|t| *t == "coder-gpu@gpu-box").count(),
        1,
        "{targets:?}"
    );
    assert_eq!(
        targets
            .iter()
            .filter(|t| *t == "coder-cpu@ubuntu-box")
            .count(),
        4,
        "{targets:?}"
    );
    let skipped: Vec<String> = answers
        .iter()
        .map(|r| header(r, "x-labrouter-skipped"))
        .collect();
    assert_eq!(
        skipped
            .iter()
            .filter(|s| *s == "coder-gpu@gpu-box=probe_in_flight")
            .count(),
        4,
        "{skipped:?}"
    );
    let after = t.work();
    assert_eq!(
        after.0 - before.0,
        1,
        "exactly one request reached the recovering machine"
    );
    assert_eq!(after.1 - before.1, 4);
    assert_eq!(t.state("gpu-box"), "closed", "the probe succeeded");
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_lengthens_the_cooldown() {
    let t = TestLab::start().await;
    trip_gpu(&t).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    t.chat("code", "hello").await; // the probe: fails (still HTTP 500)
    assert_eq!(t.gpu.work_hits(), 4);
    assert_eq!(t.state("gpu-box"), "open");
    assert_eq!(
        t.lab.machines.snapshot(MachineId(0)).breaker.cooldown,
        Duration::from_secs(120)
    );
    // 60s later the old cooldown would have passed; the new one has not.
    tokio::time::sleep(Duration::from_secs(61)).await;
    t.chat("code", "hello").await;
    assert_eq!(t.gpu.work_hits(), 4, "still open after the first cooldown");
    tokio::time::sleep(Duration::from_secs(60)).await;
    t.gpu.set(Fault::Ok);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(t.gpu.work_hits(), 5, "one probe after the doubled cooldown");
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn retry_after_429_skips_the_machine_for_that_long_without_opening() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 429,
        retry_after: Some("30".into()),
    });
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=rate_limited"
    );
    assert_eq!(t.work(), (1, 1, 0));
    for _ in 0..5 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    }
    assert_eq!(t.gpu.work_hits(), 1, "skipped while rate limited");
    assert_eq!(t.state("gpu-box"), "closed");
    tokio::time::sleep(Duration::from_secs(31)).await;
    t.chat("code", "hello").await;
    assert_eq!(t.gpu.work_hits(), 2, "back after Retry-After");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(t.lab.machines.snapshot(MachineId(0)).breaker.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_429_alone_on_the_chain_answers_429_with_retry_after() {
    let t = TestLab::start().await;
    t.local.set(Fault::Status {
        code: 429,
        retry_after: Some("7".into()),
    });
    let resp = t.chat("chat", "hello").await;
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "retry-after"), "7");
}

#[tokio::test(start_paused = true)]
async fn unauthorized_pauses_the_machine_until_reset() {
    let t = TestLab::start().await;
    t.gpu.set(http(401));
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(t.state("gpu-box"), "auth_failed");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    for _ in 0..3 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(
            header(&resp, "x-labrouter-skipped"),
            "coder-gpu@gpu-box=auth_failed"
        );
    }
    assert_eq!(t.gpu.work_hits(), 1, "paused: no more requests");
    t.gpu.set(Fault::Ok);
    let reset = t
        .client
        .post(format!("{}/admin/breakers/gpu-box/reset", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), 200);
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(t.gpu.work_hits(), 2);
}

#[tokio::test(start_paused = true)]
async fn every_target_open_gives_circuit_open_with_retry_after() {
    let t = TestLab::start().await;
    t.local.set(http(503));
    for _ in 0..3 {
        assert_eq!(t.chat("chat", "hello").await.status(), 502);
    }
    tokio::time::sleep(Duration::from_secs(18)).await;
    let resp = t.chat("chat", "hello").await;
    assert_eq!(resp.status(), 503);
    assert_eq!(header(&resp, "retry-after"), "42");
    let v: Value = resp.json().await.unwrap();
    let e = &v["error"];
    assert_eq!(e["type"], "circuit_open");
    assert_eq!(e["code"], "no_target_available");
    let ms = e["retry_after_ms"].as_u64().unwrap();
    assert!((41_000..=42_000).contains(&ms), "{ms}");
    assert_eq!(e["attempts"][0]["outcome"], "skipped");
    assert_eq!(e["attempts"][0]["reason"], "circuit_open");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("route 'chat': small@local open (3 consecutive failures, last: HTTP 503"),
        "{msg}"
    );
    assert_eq!(t.local.work_hits(), 3);
}

#[tokio::test(start_paused = true)]
async fn wait_header_waits_for_the_probe_instead_of_failing() {
    let t = TestLab::start().await;
    t.local.set(http(500));
    for _ in 0..3 {
        t.chat("chat", "hello").await;
    }
    t.local.set(Fault::Ok);
    let resp = t
        .client
        .post(format!("{}/v1/chat/completions", t.base))
        .header("x-labrouter-wait", "90s")
        .json(
            &serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(t.local.work_hits(), 4, "one probe after the cooldown");
    assert_eq!(t.state("local"), "closed");
}

#[tokio::test(start_paused = true)]
async fn a_full_machine_is_skipped_as_busy_not_failed() {
    let t = TestLab::start_with("  max_concurrency: 1\n").await;
    t.gpu.set(Fault::SlowFirstByte(Duration::from_secs(2)));
    let answers = join_all((0..2).map(|_| t.chat("code", "hello"))).await;
    let mut targets: Vec<String> = answers
        .iter()
        .map(|r| header(r, "x-labrouter-target"))
        .collect();
    targets.sort();
    assert_eq!(targets, ["coder-cpu@ubuntu-box", "coder-gpu@gpu-box"]);
    assert!(answers
        .iter()
        .any(|r| header(r, "x-labrouter-skipped") == "coder-gpu@gpu-box=busy"));
    assert_eq!(t.work(), (1, 1, 0));
    assert_eq!(t.state("gpu-box"), "closed");
}

#[tokio::test(start_paused = true)]
async fn manual_open_and_close() {
    let t = TestLab::start().await;
    let url = |a: &str| format!("{}/admin/breakers/gpu-box/{a}", t.base);
    let r = t
        .client
        .post(url("open"))
        .json(&serde_json::json!({"by": "ops", "why": "maintenance"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(t.state("gpu-box"), "forced_open");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let resp = t.chat("code", "hello").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=forced_open"
    );
    assert_eq!(t.gpu.work_hits(), 0);
    t.client.post(url("close")).send().await.unwrap();
    let resp = t.chat("code", "hello").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    let r = t.client.post(url("explode")).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test(start_paused = true)]
async fn a_429_without_retry_after_is_a_failure_and_opens_with_the_longer_cooldown() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 429,
        retry_after: None,
    });
    for _ in 0..2 {
        let resp = t.chat("code", "hello").await;
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    }
    // Beyond the request's deadline (10m): counted, and it lengthens the cooldown.
    t.gpu.set(Fault::Status {
        code: 429,
        retry_after: Some("3600".into()),
    });
    t.chat("code", "hello").await;
    assert_eq!(t.state("gpu-box"), "open");
    assert_eq!(
        t.lab.machines.snapshot(MachineId(0)).breaker.cooldown,
        Duration::from_secs(15 * 60),
        "capped at max_cooldown"
    );
    assert_eq!(t.gpu.work_hits(), 3);
}
