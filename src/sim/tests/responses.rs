//! `POST /v1/responses` on both kinds of sim: the Response object, a tool call, the event
//! stream in OpenAI's order, and every fault on it.

use super::*;

/// A Responses tool (flat, as the Responses API takes them) needing `city`.
fn tools() -> Value {
    json!([{"type":"function","name":"weather","description":"d",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])
}

/// `POST /v1/responses` with `body`, on a fresh connection.
async fn respond(sim: &Sim, body: Value) -> reqwest::Result<reqwest::Response> {
    post(format!("{}/responses", sim.base_url()), body).await
}

/// The whole Response `body` is answered with.
async fn response(sim: &Sim, body: Value) -> Value {
    let resp = respond(sim, body).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// The `(event, data)` pairs of a Responses stream, each `event:` line checked against its
/// data's `type`.
fn response_events(text: &str) -> Vec<(String, Value)> {
    assert!(!text.contains("[DONE]"), "{text:?}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (event, data) = e.split_once('\n').unwrap();
            let event = event.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], event.as_str(), "{e}");
            (event, data)
        })
        .collect()
}

/// The text of a Response's first output message.
fn text_of(response: &Value) -> &Value {
    &response["output"][0]["content"][0]["text"]
}

/// Checks `v` is a completed Response from `model` saying `text`.
fn assert_completed(v: &Value, model: &str, text: &str) {
    assert!(v["id"].as_str().unwrap().starts_with("resp_"), "{v}");
    assert_eq!(
        (&v["object"], &v["status"]),
        (&json!("response"), &json!("completed"))
    );
    assert_eq!(v["model"], model);
    assert!(v["created_at"].is_u64(), "{v}");
    let item = &v["output"][0];
    assert_eq!(v["output"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        (&item["type"], &item["role"]),
        (&json!("message"), &json!("assistant"))
    );
    assert_eq!(item["status"], "completed");
    assert!(item["id"].as_str().unwrap().starts_with("msg_"), "{v}");
    let part = json!({"type":"output_text","text":text,"annotations":[]});
    assert_eq!(item["content"], json!([part]));
    let usage = &v["usage"];
    let (input, output) = (
        usage["input_tokens"].as_u64(),
        usage["output_tokens"].as_u64(),
    );
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(input.unwrap() + output.unwrap())
    );
}

#[tokio::test]
async fn a_response_is_the_object_openai_answers() {
    let sim = Sim::start("alpha").await.unwrap();
    let first = response(&sim, json!({"model":"m1","input":"hi"})).await;
    assert_completed(&first, "m1", "ok from alpha");
    assert_eq!(first["previous_response_id"], Value::Null);
    assert_eq!(first["error"], Value::Null);
    assert_eq!(first["tools"], json!([]));
    sim.set_text(Some("hello there"));
    let input = json!([{"role":"user","content":"hi"}]);
    let second = response(&sim, json!({"model":"m2","input":input})).await;
    assert_completed(&second, "m2", "hello there");
    assert_ne!(first["id"], second["id"]);
    assert_ne!(first["output"][0]["id"], second["output"][0]["id"]);
    assert_eq!(sim.hits("/v1/responses"), 2);
    assert_eq!(sim.work_hits(), 2);
    assert_eq!(sim.hit_times().len(), 2);
}

#[tokio::test]
async fn a_previous_response_id_is_echoed_and_never_remembered() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let body = json!({"model":"m1","input":"again","previous_response_id":"resp_unknown"});
    let v = response(&sim, body.clone()).await;
    assert_completed(&v, "m1", "ok from olla");
    assert_eq!(v["previous_response_id"], "resp_unknown");
    let sent: Value = serde_json::from_slice(&sim.last_body().unwrap()).unwrap();
    assert_eq!(sent, body);
    assert_eq!(sim.hits("/v1/responses"), 1);
}

#[tokio::test]
async fn a_response_calls_the_offered_tool_until_its_output_comes_back() {
    let sim = Sim::start("alpha").await.unwrap();
    let v = response(
        &sim,
        json!({"model":"m1","input":"weather?","tools":tools()}),
    )
    .await;
    assert_eq!(v["status"], "completed");
    let call = &v["output"][0];
    assert_eq!(
        (&call["type"], &call["name"]),
        (&json!("function_call"), &json!("weather"))
    );
    assert_eq!(call["arguments"], r#"{"city":"sim"}"#);
    assert_eq!(call["status"], "completed");
    assert!(
        call["call_id"].as_str().unwrap().starts_with("call_"),
        "{v}"
    );
    assert!(call["id"].as_str().unwrap().starts_with("fc_"), "{v}");
    let input = json!([{"role":"user","content":"weather?"}, call,
        {"type":"function_call_output","call_id":call["call_id"],"output":"22 C"}]);
    let v = response(&sim, json!({"model":"m1","input":input,"tools":tools()})).await;
    assert_completed(&v, "m1", "tool said: 22 C");
    let nested = json!([{"type":"function","function":{"name":"lookup","parameters":{}}}]);
    let v = response(&sim, json!({"model":"m1","input":"x","tools":nested})).await;
    assert_eq!(v["output"][0]["name"], "lookup");
    assert_eq!(v["output"][0]["arguments"], "{}");
}

/// The event types of a plain streamed Response with `deltas` text deltas.
fn plain_order(deltas: usize) -> Vec<String> {
    let head = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    let tail = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ];
    let delta = std::iter::repeat_n("response.output_text.delta", deltas);
    head.into_iter()
        .chain(delta)
        .chain(tail)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_streamed_response_sends_openais_events_in_order() {
    let sim = Sim::start("alpha").await.unwrap();
    let resp = respond(&sim, json!({"model":"m1","input":"hi","stream":true})).await;
    let resp = resp.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let got = response_events(&resp.text().await.unwrap());
    let types: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, plain_order(3));
    for (i, (_, data)) in got.iter().enumerate() {
        assert_eq!(data["sequence_number"], i, "{data}");
    }
    let (created, progress) = (&got[0].1["response"], &got[1].1["response"]);
    assert_eq!(
        (&created["status"], &created["output"]),
        (&json!("in_progress"), &json!([]))
    );
    assert_eq!(progress["id"], created["id"]);
    let item_id = got[2].1["item"]["id"].clone();
    let deltas: String = got[4..7]
        .iter()
        .map(|(_, d)| {
            assert_eq!(d["item_id"], item_id);
            assert_eq!(
                (&d["output_index"], &d["content_index"]),
                (&json!(0), &json!(0))
            );
            d["delta"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(deltas, "alpha-0 alpha-1 alpha-2 ");
    assert_eq!(got[7].1["text"], deltas.as_str());
    assert_eq!(got[8].1["part"]["text"], deltas.as_str());
    assert_eq!(
        text_of(&json!({"output":[got[9].1["item"]]})),
        deltas.as_str()
    );
    let done = &got[10].1["response"];
    assert_completed(done, "m1", &deltas);
    assert_eq!(
        (&done["id"], &done["output"][0]["id"]),
        (&created["id"], &item_id)
    );
    sim.set_chunks(5);
    let resp = respond(&sim, json!({"model":"m1","input":"hi","stream":true})).await;
    let got = response_events(&resp.unwrap().text().await.unwrap());
    let types: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, plain_order(5));
}

#[tokio::test]
async fn a_streamed_tool_call_sends_its_arguments_in_deltas() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let body = json!({"model":"m1","input":"weather?","tools":tools(),"stream":true});
    let got = response_events(&respond(&sim, body).await.unwrap().text().await.unwrap());
    let types: Vec<&str> = got.iter().map(|(t, _)| t.as_str()).collect();
    let n = types.len();
    assert_eq!(
        types[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    assert!(types[3..n - 3]
        .iter()
        .all(|t| *t == "response.function_call_arguments.delta"));
    assert!(n - 6 >= 1, "{types:?}");
    let tail = [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ];
    assert_eq!(types[n - 3..], tail);
    let arguments: String = got[3..n - 3]
        .iter()
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(arguments, r#"{"city":"sim"}"#);
    assert_eq!(got[n - 3].1["arguments"], arguments.as_str());
    assert_eq!(got[n - 3].1["name"], "weather");
    let call = &got[n - 1].1["response"]["output"][0];
    assert_eq!(
        (&call["type"], &call["arguments"]),
        (&json!("function_call"), &json!(arguments))
    );
}

#[tokio::test]
async fn status_malformed_reset_refuse_and_huge_reach_the_responses_route() {
    let sim = Sim::start("alpha").await.unwrap();
    let hi = json!({"model":"m1","input":"hi"});
    sim.set(Fault::Status {
        code: 503,
        retry_after: Some("4".into()),
    });
    let resp = respond(&sim, hi.clone()).await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()[RETRY_AFTER], "4");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "server_error");
    sim.set(Fault::Malformed);
    let resp = respond(&sim, hi.clone()).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.json::<Value>().await.is_err());
    sim.set(Fault::Reset);
    assert!(respond(&sim, hi.clone()).await.is_err());
    sim.set(Fault::Huge(300_000));
    let bytes = respond(&sim, hi.clone())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(bytes.len(), 300_000);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        (&v["object"], &v["status"]),
        (&json!("response"), &json!("completed"))
    );
    assert_eq!(text_of(&v), "big");
    sim.set(Fault::Refuse);
    assert!(respond(&sim, hi.clone()).await.unwrap_err().is_connect());
    assert_eq!(
        sim.hits("/v1/responses"),
        4,
        "refused connections never count"
    );
}

#[tokio::test]
async fn cut_after_sends_that_many_events_then_resets() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    sim.set(Fault::CutAfter(5));
    let resp = respond(&sim, json!({"model":"m1","input":"hi","stream":true})).await;
    let (text, failed) = drain(resp.unwrap()).await;
    assert!(failed);
    let got = response_events(&text);
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].0, "response.output_text.delta");
    sim.set(Fault::CutAfter(0));
    let resp = respond(&sim, json!({"model":"m1","input":"hi"}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(drain(resp).await, (String::new(), true));
}

#[tokio::test(start_paused = true)]
async fn drip_stall_hang_and_slow_first_byte_on_the_responses_route() {
    let sim = Sim::start("alpha").await.unwrap();
    let streamed = json!({"model":"m1","input":"hi","stream":true});
    sim.set(Fault::Drip(Duration::from_secs(2)));
    let start = tokio::time::Instant::now();
    let (text, failed) = drain(respond(&sim, streamed.clone()).await.unwrap()).await;
    assert!(!failed);
    assert_eq!(response_events(&text).len(), 11);
    assert!(
        start.elapsed() >= Duration::from_secs(22),
        "{:?}",
        start.elapsed()
    );
    let hour = Duration::from_secs(3600);
    sim.set(Fault::StallAfter(1));
    let mut body = respond(&sim, streamed.clone())
        .await
        .unwrap()
        .bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("event: response.created\n"));
    assert!(tokio::time::timeout(hour, body.next()).await.is_err());
    sim.set(Fault::Hang);
    let hung = respond(&sim, json!({"model":"m1","input":"hi"}));
    assert!(tokio::time::timeout(hour, hung).await.is_err());
    sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let start = tokio::time::Instant::now();
    let v = response(&sim, json!({"model":"m1","input":"hi"})).await;
    assert!(start.elapsed() >= Duration::from_secs(30));
    assert_completed(&v, "m1", "ok from alpha");
    assert_eq!(sim.hits("/v1/responses"), 4);
}
