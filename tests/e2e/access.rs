//! The access log (README "Watching it"): one line per request at `info`, naming where it
//! went and why others were passed over, never a key; `server.access_log: false` is silent.

use labrouter::sim::Fault;

use crate::support::{LogBuf as Buf, TestLab};

/// The access lines written while `run` ran, as JSON.
async fn access_lines<F: std::future::Future<Output = ()>>(run: F) -> Vec<serde_json::Value> {
    // See tests/telegram/outage.rs: a second dispatcher makes tracing ask this capture too.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let buf = Buf::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(buf.clone())
        .with_max_level(tracing::Level::INFO)
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    run.await;
    drop(guard);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "labrouter::access")
        .collect()
}

#[tokio::test(start_paused = true)]
async fn each_request_is_one_line_saying_where_it_went() {
    let t = TestLab::start().await;
    t.gpu.set(Fault::Refuse);
    let lines = access_lines(async {
        let resp = t
            .client
            .post(format!("{}/v1/chat/completions?secret=sk-query", t.base))
            .header("authorization", "Bearer sk-not-in-the-log")
            .json(&serde_json::json!({"model": "code", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let resp = t.client.get(format!("{}/v1/nowhere", t.base)).send().await.unwrap();
        assert_eq!(resp.status(), 404);
    })
    .await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let f = &lines[0]["fields"];
    assert_eq!(f["method"], "POST");
    assert_eq!(f["path"], "/v1/chat/completions");
    assert_eq!(f["client"], "127.0.0.1");
    assert_eq!(f["status"], 200);
    assert_eq!(f["route"], "code");
    assert_eq!(f["target"], "coder-cpu@ubuntu-box");
    assert_eq!(f["skipped"], "coder-gpu@gpu-box=refused");
    assert!(f["ms"].as_f64().is_some());
    assert_ne!(f["request_bytes"], "-");
    assert_eq!(lines[1]["fields"]["status"], 404);
    assert_eq!(lines[1]["fields"]["route"], "-");
    let all = serde_json::to_string(&lines).unwrap();
    assert!(
        !all.contains("sk-not-in-the-log") && !all.contains("sk-query"),
        "{all}"
    );
    assert_eq!(t.work(), (0, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn access_log_false_writes_no_line() {
    let t = TestLab::start_custom("  access_log: false\n", "").await;
    let lines = access_lines(async {
        assert_eq!(t.chat("code", "hi").await.status(), 200);
    })
    .await;
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(t.work(), (1, 0, 0));
}
