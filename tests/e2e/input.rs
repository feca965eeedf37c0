//! Bad input gets a clear 4xx in the OpenAI envelope and changes no state: no machine is
//! reached, no breaker moves, no counter counts.

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::support::{header, TestLab};

fn untouched(t: &TestLab) {
    assert_eq!(t.work(), (0, 0, 0));
    assert_eq!(
        t.gpu.hits("/v1/models") + t.cpu.hits("/v1/models") + t.local.hits("/v1/models"),
        0
    );
    assert_eq!(t.lab.machines.snapshots().count(), 3);
    for s in t.lab.machines.snapshots() {
        assert_eq!(s.breaker.phase.as_str(), "closed");
        assert_eq!(
            (s.remote_attempts, s.local_rejections, s.breaker.failures),
            (0, 0, 0)
        );
    }
}

async fn error_of(resp: reqwest::Response) -> Value {
    let v: Value = resp.json().await.unwrap();
    v["error"].clone()
}

#[tokio::test]
async fn bad_input_changes_no_state() {
    let t = TestLab::start().await;
    let url = format!("{}/v1/chat/completions", t.base);

    let resp = t.client.post(&url).body("{not json").send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let e = error_of(resp).await;
    assert_eq!(e["type"], "invalid_request_error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("not a valid JSON object"),
        "{e}"
    );

    let resp = t.client.post(&url).body("[1,2]").send().await.unwrap();
    assert_eq!(resp.status(), 400);

    let resp = t
        .post("/v1/chat/completions", json!({"model": "code"}))
        .await;
    assert_eq!(resp.status(), 400);
    assert!(error_of(resp).await["message"]
        .as_str()
        .unwrap()
        .contains("messages"));

    let resp = t.chat("gpt-4o", "hello").await;
    assert_eq!(resp.status(), 400);
    let e = error_of(resp).await;
    assert_eq!(e["code"], "model_not_found");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("gpt-4o") && msg.contains("code") && msg.contains("coder-gpu"),
        "{msg}"
    );

    let resp = t
        .post("/v1/chat/completions", json!({"model": 7, "messages": []}))
        .await;
    assert_eq!(resp.status(), 400);

    let huge = "x".repeat(70 * 1024);
    let resp = t.chat("code", &huge).await;
    assert_eq!(resp.status(), 413);
    assert_eq!(error_of(resp).await["code"], "request_too_large");

    let resp = t
        .client
        .post(&url)
        .header("x-labrouter-route", "nope")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    let resp = t
        .client
        .post(&url)
        .header("x-labrouter-wait", "soon")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(error_of(resp).await["message"]
        .as_str()
        .unwrap()
        .contains("x-labrouter-wait"));

    untouched(&t);
}

#[tokio::test]
async fn routing_by_keyword_header_and_image() {
    let t = TestLab::start().await;
    let resp = t.chat("auto", "Please REFACTOR this function").await;
    assert_eq!(header(&resp, "x-labrouter-route"), "code");
    let resp = t.chat("auto", "tell me a story").await;
    assert_eq!(header(&resp, "x-labrouter-route"), "chat");
    assert_eq!(header(&resp, "x-labrouter-target"), "small@local");
    let resp = t
        .post(
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}),
        )
        .await;
    assert_eq!(header(&resp, "x-labrouter-route"), "vision");
    assert_eq!(header(&resp, "x-labrouter-target"), "vision-gpu@gpu-box");
    let resp = t
        .client
        .post(format!("{}/v1/chat/completions", t.base))
        .header("x-labrouter-route", "chat")
        .json(&json!({"messages": [{"role": "user", "content": "refactor rust code"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&resp, "x-labrouter-target"), "small@local");
    let resp = t.chat("qwen3:4b", "hi").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "small@local");
    assert_eq!(t.work(), (2, 0, 3));
}

#[tokio::test]
async fn completions_embeddings_models_and_healthz() {
    let t = TestLab::start().await;
    let resp = t
        .post(
            "/v1/completions",
            json!({"model": "code", "prompt": "def f():"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(t.gpu.hits("/v1/completions"), 1);
    let resp = t
        .post(
            "/v1/embeddings",
            json!({"model": "small", "input": ["a", "b"]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert!(v["data"].is_array());
    assert_eq!(t.local.hits("/v1/embeddings"), 1);
    t.local.set(Fault::Malformed);
    let resp = t
        .post("/v1/embeddings", json!({"model": "small", "input": "a"}))
        .await;
    assert_eq!(resp.status(), 502);

    let v: Value = t
        .client
        .get(format!("{}/v1/models", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"auto") && ids.contains(&"code") && ids.contains(&"coder-gpu"),
        "{ids:?}"
    );
    let resp = t
        .client
        .get(format!("{}/healthz", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = t
        .client
        .get(format!("{}/status", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["machines"]["gpu-box"]["state"], "closed");
    assert_eq!(v["routes"][0]["chain"][1], "coder-cpu@ubuntu-box");
}

#[tokio::test]
async fn open_listen_without_keys_is_refused_and_keys_are_enforced() {
    let gpu = labrouter::sim::Sim::start("gpu-box").await.unwrap();
    let yaml = crate::support::registry_yaml(&gpu, &gpu, &gpu, "").replace(
        "listen: 127.0.0.1:0",
        "listen: 0.0.0.0:8080\n  api_keys_env: LABROUTER_TEST_KEYS_UNSET",
    );
    let reg = labrouter::registry::Registry::parse(&yaml, "test.yaml").unwrap();
    let err = labrouter::Service::in_memory(reg, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not loopback") && err.contains("api_keys_env"),
        "{err}"
    );

    // SAFETY of set_var: this variable is read by this test alone.
    std::env::set_var("LABROUTER_TEST_KEYS_SET", "k1, k2");
    let yaml = crate::support::registry_yaml(&gpu, &gpu, &gpu, "").replace(
        "listen: 127.0.0.1:0",
        "listen: 127.0.0.1:0\n  api_keys_env: LABROUTER_TEST_KEYS_SET",
    );
    let reg = labrouter::registry::Registry::parse(&yaml, "test.yaml").unwrap();
    let svc = std::sync::Arc::new(labrouter::Service::in_memory(reg, None).unwrap());
    let (base, _) = crate::support::serve(svc).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{base}/v1/chat/completions");
    let resp = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let resp = client
        .post(&url)
        .bearer_auth("wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(gpu.work_hits(), 0, "unauthorized requests reach no machine");
    let resp = client
        .post(&url)
        .bearer_auth("k2")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "healthz needs no key");
    assert_eq!(gpu.work_hits(), 1);
}
