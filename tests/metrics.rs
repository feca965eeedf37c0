//! `/metrics` after a scripted trip (its own test binary: one metrics recorder per process).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use labrouter::sim::Fault;
use support::TestLab;

#[tokio::test(start_paused = true)]
async fn metrics_after_a_trip() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..4 {
        assert_eq!(t.chat("code", "hello").await.status(), 200);
    }
    let text = t
        .client
        .get(format!("{}/metrics", t.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let has = |needle: &str| text.lines().any(|l| l.starts_with(needle));
    assert!(
        has(r#"labrouter_breaker_state{machine="gpu-box"} 2"#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_breaker_state{machine="ubuntu-box"} 0"#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_breaker_transitions_total{machine="gpu-box",from="closed",to="open"} 1"#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_upstream_attempts_total{machine="gpu-box",outcome="http_5xx"} 3"#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_upstream_attempts_total{machine="ubuntu-box",outcome="success"} 4"#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_local_rejections_total{machine="gpu-box",reason="circuit_open"} 1"#),
        "{text}"
    );
    assert!(
        has(
            r#"labrouter_fallbacks_total{route="code",from="coder-gpu@gpu-box",to="coder-cpu@ubuntu-box"} 4"#
        ),
        "{text}"
    );
    assert!(
        has(r#"labrouter_request_duration_seconds_bucket{route="code""#),
        "{text}"
    );
    assert!(
        has(r#"labrouter_upstream_first_byte_seconds_count{machine="gpu-box"} 3"#),
        "{text}"
    );
    // labrouter's own time: every routed request is counted; the machine's time is not
    // labrouter's (on the paused clock only the sim's 300 ms pass at all).
    assert!(has("labrouter_overhead_seconds_count 4"), "{text}");
    t.cpu
        .set(Fault::SlowFirstByte(std::time::Duration::from_millis(300)));
    assert_eq!(t.chat("code", "hello").await.status(), 200);
    let text = t
        .client
        .get(format!("{}/metrics", t.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(name)).expect(name);
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("labrouter_overhead_seconds_count "), 5.0, "{text}");
    assert!(
        value(r#"labrouter_request_duration_seconds_sum{route="code"}"#) >= 0.3,
        "{text}"
    );
    assert!(value("labrouter_overhead_seconds_sum ") < 0.01, "{text}");
}
