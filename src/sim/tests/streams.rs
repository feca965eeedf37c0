//! OpenAI streams as OpenAI sends them: the assistant's role in the first chunk, a finish
//! chunk before `[DONE]` whether or not usage was asked, and the usage chunk after it.

use super::*;

/// The events of a stream POSTed to `path` under the OpenAI base URL.
async fn stream(sim: &Sim, path: &str, body: Value) -> Vec<Value> {
    let resp = post(format!("{}{path}", sim.base_url()), body)
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    events(&resp.text().await.unwrap())
}

/// A streamed chat request asking "hi", with `extra` fields merged in.
fn chat_body(extra: Value) -> Value {
    let mut body = json!({"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

#[tokio::test]
async fn a_chat_stream_opens_with_the_assistant_role_and_closes_with_a_finish_chunk() {
    let sim = Sim::start("alpha").await.unwrap();
    let got = stream(&sim, "/chat/completions", chat_body(json!({}))).await;
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(
        got[0]["choices"][0]["delta"],
        json!({"role":"assistant","content":"alpha-0 "})
    );
    for (i, chunk) in got[1..3].iter().enumerate() {
        let delta = &chunk["choices"][0]["delta"];
        assert_eq!(delta, &json!({"content":format!("alpha-{} ", i + 1)}));
    }
    assert!(got[..3]
        .iter()
        .all(|c| c["choices"][0]["finish_reason"].is_null()));
    let finish = json!({"index":0,"delta":{},"finish_reason":"stop"});
    assert_eq!(got[3]["choices"], json!([finish]));
    assert_eq!(got[3]["object"], "chat.completion.chunk");
    assert!(got.iter().all(|c| c.get("usage").is_none()));
    sim.set_chunks(0);
    let got = stream(&sim, "/chat/completions", chat_body(json!({}))).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(got[0]["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn the_role_rides_the_first_chunk_whatever_it_carries() {
    let sim = Sim::start("alpha").await.unwrap();
    let body = chat_body(json!({"reasoning_effort":"low"}));
    let got = stream(&sim, "/chat/completions", body).await;
    assert_eq!(
        got[0]["choices"][0]["delta"],
        json!({"role":"assistant","reasoning_content":"thinking from alpha"})
    );
    assert_eq!(got.len(), 5, "thinking, three pieces, finish: {got:?}");
    assert!(got[1..]
        .iter()
        .all(|c| c["choices"][0]["delta"].get("role").is_none()));
    let body = chat_body(json!({"response_format":{"type":"json_object"}}));
    let got = stream(&sim, "/chat/completions", body).await;
    let delta = &got[0]["choices"][0]["delta"];
    assert_eq!(delta["role"], "assistant");
    assert_eq!(delta["content"], r#"{"ok":true,"from":"alpha"}"#);
    assert_eq!(got.len(), 2, "the text, finish: {got:?}");
    assert_eq!(got[1]["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn a_completions_stream_closes_with_a_finish_chunk_without_usage_asked() {
    let sim = Sim::start("alpha").await.unwrap();
    let body = json!({"model":"m1","prompt":"x","stream":true});
    let got = stream(&sim, "/completions", body).await;
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[0]["choices"][0]["text"], "alpha-0 ");
    assert!(got[0]["choices"][0]["delta"].is_null(), "no role here");
    let last = &got[3];
    assert_eq!(last["object"], "text_completion");
    assert_eq!(
        (
            &last["choices"][0]["text"],
            &last["choices"][0]["finish_reason"]
        ),
        (&json!(""), &json!("stop"))
    );
}

#[tokio::test]
async fn usage_follows_the_finish_chunk_on_both_streams() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let options = json!({"stream_options":{"include_usage":true}});
    let got = stream(&sim, "/chat/completions", chat_body(options.clone())).await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(got[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(got[3]["choices"][0]["delta"], json!({}));
    assert_eq!(got[4]["choices"], json!([]));
    assert_eq!(got[4]["usage"]["total_tokens"], 4);
    let mut body = json!({"model":"m1","prompt":"x","stream":true});
    body["stream_options"] = options["stream_options"].clone();
    let got = stream(&sim, "/completions", body).await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(got[4]["usage"]["completion_tokens"], 3);
}
