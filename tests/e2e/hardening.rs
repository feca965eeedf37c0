//! README "Safety" on the wire: no answer a machine gives and no header a client sends can crash a
//! request; misbehaving machines are failures of that machine, never a dropped connection.

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::support::{header, TestLab};

fn status_with_retry_after(code: u16, value: &str) -> Fault {
    Fault::Status {
        code,
        retry_after: Some(value.to_string()),
    }
}

/// A 429 or 503 with an absurd `Retry-After` used to panic the handler (empty reply, the
/// next target never tried). Now the machine's answer is classified and the chain moves on.
#[tokio::test(start_paused = true)]
async fn absurd_retry_after_values_fall_back_instead_of_dropping_the_connection() {
    let absurd = [
        "18446744073709551615",
        "1e30",
        "1e309",
        "-5",
        "NaN",
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Mon, 01 Jan 1900 00:00:00 GMT",
        "soon",
    ];
    for code in [429, 503] {
        for value in absurd {
            let t = TestLab::start().await;
            t.gpu.set(status_with_retry_after(code, value));
            let resp = t.chat("code", "hello").await;
            assert_eq!(resp.status(), 200, "{code} Retry-After: {value}");
            assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
            assert_eq!(t.work(), (1, 1, 0), "{code} Retry-After: {value}");
        }
    }
}

/// A huge Retry-After is clamped to a day: alone on its chain, the 429 says so.
#[tokio::test(start_paused = true)]
async fn a_huge_retry_after_is_clamped_to_a_day() {
    let t = TestLab::start().await;
    t.local
        .set(status_with_retry_after(429, "18446744073709551615"));
    let resp = t.chat("chat", "hello").await;
    assert_eq!(resp.status(), 429);
    let retry: u64 = header(&resp, "retry-after").parse().unwrap();
    assert_eq!(retry, 86_400);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn an_absurd_wait_header_is_a_400_that_reaches_no_machine() {
    let t = TestLab::start().await;
    for bad in [
        "18446744073709551615s",
        "99999999999999999999h",
        "2d",
        "forever",
        "",
    ] {
        let resp = t
            .client
            .post(format!("{}/v1/chat/completions", t.base))
            .header("x-labrouter-wait", bad)
            .json(&json!({"model": "code", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "x-labrouter-wait: {bad}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "invalid_header");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-labrouter-wait"));
    }
    assert_eq!(t.work(), (0, 0, 0));
}

/// A 400 MiB answer used to be held whole (160 MB → 975 MB). Over `max_upstream_body` it is
/// `malformed` for its machine, and the next target serves.
#[tokio::test]
async fn an_answer_over_max_upstream_body_is_malformed_and_falls_back() {
    let t = TestLab::start_custom("  max_upstream_body: 1MiB\n", "").await;
    t.gpu.set(Fault::Huge(8 << 20));
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=malformed"
    );
    assert_eq!(t.work(), (1, 1, 0));
    // Under the cap it is a normal answer.
    t.gpu.set(Fault::Huge(512 << 10));
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    assert_eq!(resp.bytes().await.unwrap().len(), 512 << 10);
}

/// docs/api.md: `auto` would embed by keyword (a document mentioning Python would go to the
/// coder model); it is refused.
#[tokio::test(start_paused = true)]
async fn embeddings_need_a_model() {
    let t = TestLab::start().await;
    for body in [
        json!({"model": "auto", "input": "def python_function(): pass"}),
        json!({"input": "hello"}),
    ] {
        let resp = t.post("/v1/embeddings", body).await;
        assert_eq!(resp.status(), 400);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "model_required");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("coder-gpu"));
    }
    assert_eq!(t.work(), (0, 0, 0));
}

/// Embeddings fall back only to targets with the same backend name: the code route's
/// other targets run other models, so a failed GPU box is a 502, not foreign vectors.
#[tokio::test(start_paused = true)]
async fn embeddings_never_fall_back_to_another_model() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    let resp = t
        .post("/v1/embeddings", json!({"model": "code", "input": "x"}))
        .await;
    assert_eq!(resp.status(), 502);
    assert_eq!(t.work(), (1, 0, 0), "neither coder-cpu nor small was asked");
    // Chat on the same route still falls back.
    let resp = t.chat("code", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(t.work(), (2, 1, 0));
}

/// An `api_keys_env` naming an unset variable used to switch auth off silently.
#[tokio::test]
async fn an_unset_keys_variable_refuses_to_start() {
    let t = TestLab::start().await;
    let yaml = crate::support::registry_yaml_with(
        &t.gpu,
        &t.cpu,
        &t.local,
        "  api_keys_env: LR_TEST_SURELY_UNSET_KEYS\n",
        "",
    );
    let reg = labrouter::registry::Registry::parse(&yaml, "test.yaml").unwrap();
    let e = labrouter::Fleet::new(reg).expect_err("refused");
    assert!(e.to_string().contains("LR_TEST_SURELY_UNSET_KEYS"), "{e}");
    // IPv4-mapped loopback is loopback: no keys needed.
    let yaml = crate::support::registry_yaml_with(&t.gpu, &t.cpu, &t.local, "", "")
        .replace("listen: 127.0.0.1:0", "listen: \"[::ffff:127.0.0.1]:0\"");
    let reg = labrouter::registry::Registry::parse(&yaml, "test.yaml").unwrap();
    assert!(labrouter::Fleet::new(reg).is_ok());
}
