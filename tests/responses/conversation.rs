//! Conversations that survive an outage: a kept `previous_response_id` is expanded so the
//! next machine of the chain can continue it.

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::fake::Mode;
use crate::lab::{text, Lab};

/// The texts of a request's input items, in order (strings or their first text part).
fn texts(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i["content"]
                .as_str()
                .or_else(|| i["content"][0]["text"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

async fn turn(lab: &Lab, input: &str, previous: Option<&str>) -> Value {
    let mut body = json!({"model": "code", "input": input});
    if let Some(p) = previous {
        body["previous_response_id"] = json!(p);
    }
    let resp = lab.post(&body, None).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_conversation_continues_on_the_next_machine_when_the_first_goes_away() {
    let lab = Lab::start("").await;
    lab.gpu.set_text("answer one");
    let one = turn(&lab, "question one", None).await;
    lab.gpu.set_text("answer two");
    let two = turn(&lab, "question two", one["id"].as_str()).await;
    let sent = lab.gpu.last_body();
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    assert_eq!(texts(&sent), ["question one", "answer one", "question two"]);
    assert_eq!(
        two["previous_response_id"], one["id"],
        "echoed as the client sent it"
    );

    // The GPU box goes away between turns two and three.
    lab.gpu.set(Mode::Down).await;
    lab.cpu.set_text("answer three");
    let three = turn(&lab, "question three", two["id"].as_str()).await;
    assert_eq!(text(&three), "answer three");
    assert_eq!(three["previous_response_id"], two["id"]);
    let sent = lab.cpu.last_body();
    assert_eq!(
        texts(&sent),
        [
            "question one",
            "answer one",
            "question two",
            "answer two",
            "question three"
        ],
        "every earlier turn once, oldest first"
    );
    assert_eq!(sent["model"], "qwen3-coder:30b-q4");
    assert_eq!(lab.hits(), (2, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_streamed_turn_is_kept_from_its_events_and_continued() {
    let lab = Lab::start("").await;
    lab.gpu.set_text("streamed answer");
    let resp = lab
        .post(
            &json!({"model": "code", "input": "first", "stream": true}),
            None,
        )
        .await;
    let mut body = resp.bytes_stream();
    let mut all = String::new();
    while let Some(c) = body.next().await {
        all.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    let done = all
        .split("\n\n")
        .find(|e| e.starts_with("event: response.completed"))
        .unwrap();
    let done: Value = serde_json::from_str(done.split("data: ").nth(1).unwrap()).unwrap();
    let id = done["response"]["id"].as_str().unwrap().to_string();
    turn(&lab, "second", Some(&id)).await;
    assert_eq!(
        texts(&lab.gpu.last_body()),
        ["first", "streamed answer", "second"]
    );
}

#[tokio::test(start_paused = true)]
async fn store_false_is_not_kept_and_another_keys_id_is_passed_through() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_RESPONSES_KEYS", "key-one,key-two") };
    let lab = Lab::start("  api_keys_env: LABROUTER_TEST_RESPONSES_KEYS\n").await;
    let post = |body: Value, key: &'static str| {
        let lab = &lab;
        async move {
            let r = lab.post(&body, Some(key)).await;
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let unkept = post(
        json!({"model": "code", "input": "secret", "store": false}),
        "key-one",
    )
    .await;
    let id = unkept["id"].as_str().unwrap();
    let resp = lab
        .get(&format!("/v1/responses/{id}"), Some("key-one"))
        .await;
    assert_eq!(resp.status(), 404, "store: false is not kept");
    let mine = post(json!({"model": "code", "input": "mine"}), "key-one").await;
    let id = mine["id"].as_str().unwrap();
    assert_eq!(
        lab.get(&format!("/v1/responses/{id}"), Some("key-one"))
            .await
            .status(),
        200
    );
    assert_eq!(
        lab.get(&format!("/v1/responses/{id}"), Some("key-two"))
            .await
            .status(),
        404
    );
    post(
        json!({"model": "code", "input": "theirs", "previous_response_id": id}),
        "key-two",
    )
    .await;
    let sent = lab.gpu.last_body();
    assert_eq!(
        sent["previous_response_id"], id,
        "an id kept for another key passes through"
    );
    assert_eq!(sent["input"], "theirs");
}

#[tokio::test(start_paused = true)]
async fn a_llama_server_stream_passes_whole_and_its_response_is_kept() {
    let lab = Lab::start("").await;
    lab.gpu.set(Mode::LlamaServer).await;
    lab.gpu.set_text("four words of answer");
    let resp = lab
        .post(
            &json!({"model": "code", "input": "first", "stream": true}),
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-labrouter-target"], "coder-gpu@gpu-box");
    let body = resp.text().await.unwrap();
    let deltas = body.matches("event: response.output_text.delta").count();
    assert_eq!(deltas, 4, "every event passed: {body}");
    assert!(body.trim_end().ends_with('}') && body.contains("event: response.completed"));
    assert!(!body.contains("event: error"));
    assert_eq!(lab.breaker("gpu-box").await, ("closed".to_string(), 0));
    let done = body
        .split("\n\n")
        .find(|e| e.starts_with("event: response.completed"))
        .unwrap();
    let done: Value = serde_json::from_str(done.split("data: ").nth(1).unwrap()).unwrap();
    let id = done["response"]["id"].as_str().unwrap().to_string();
    lab.gpu.set(Mode::Ok).await;
    turn(&lab, "second", Some(&id)).await;
    assert_eq!(
        texts(&lab.gpu.last_body()),
        ["first", "four words of answer", "second"]
    );
}
