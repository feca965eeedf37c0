//! What a request asks beyond text, on both kinds: tool calls, tool results, reasoning, JSON,
//! usage; and plain requests answered exactly as OpenAI shapes them.

use super::*;

/// One tool needing `city`.
fn tools() -> Value {
    json!([{"type":"function","function":{"name":"weather","description":"d",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])
}

/// A chat request asking "hi", with `extra` fields merged in.
fn ask(extra: Value) -> Value {
    let mut body = json!({"model":"m1","messages":[{"role":"user","content":"hi"}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

/// POSTs `body` to the OpenAI chat route and reads the whole answer as text.
async fn openai(sim: &Sim, body: Value) -> String {
    let resp = post(format!("{}/chat/completions", sim.base_url()), body);
    resp.await.unwrap().text().await.unwrap()
}

/// POSTs `body` to an Ollama route and reads the whole answer as text.
async fn native(sim: &Sim, path: &str, body: Value) -> String {
    let resp = post(format!("{}{path}", sim.root_url()), body);
    resp.await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn plain_answers_are_exactly_as_openai_shapes_them() {
    let sim = Sim::start("alpha").await.unwrap();
    let whole: Value = serde_json::from_str(&openai(&sim, ask(json!({}))).await).unwrap();
    let expected = json!({"id":"chatcmpl-sim","object":"chat.completion","created":0,"model":"m1",
        "choices":[{"index":0,"message":{"role":"assistant","content":"ok from alpha"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}});
    assert_eq!(whole, expected);
    let text = openai(&sim, ask(json!({"stream":true}))).await;
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id":"chatcmpl-sim","object":"chat.completion.chunk","created":0,
            "model":"m1","choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
        format!("data: {chunk}\n\n")
    };
    let piece = |i: usize| {
        let mut delta = json!({"content":format!("alpha-{i} ")});
        if i == 0 {
            delta["role"] = json!("assistant");
        }
        chunk(delta, Value::Null)
    };
    let expected: String = (0..3).map(piece).collect::<String>()
        + &chunk(json!({}), json!("stop"))
        + "data: [DONE]\n\n";
    assert_eq!(text, expected);
}

#[tokio::test]
async fn openai_tool_calls_whole_and_in_fragments() {
    let sim = Sim::start("alpha").await.unwrap();
    let v: Value =
        serde_json::from_str(&openai(&sim, ask(json!({"tools":tools()}))).await).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(
        (&call["id"], &call["type"]),
        (&json!("call_sim_0"), &json!("function"))
    );
    assert_eq!(call["function"]["name"], "weather");
    assert_eq!(call["function"]["arguments"], r#"{"city":"sim"}"#);
    let text = openai(&sim, ask(json!({"tools":tools(),"stream":true}))).await;
    let got = events(&text);
    let deltas: Vec<&Value> = got
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert!(deltas.len() >= 2);
    assert_eq!(deltas[0]["function"]["name"], "weather");
    assert_eq!(deltas[0]["id"], "call_sim_0");
    let arguments: String = deltas
        .iter()
        .map(|d| d["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(arguments, r#"{"city":"sim"}"#);
    assert_eq!(
        got.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[tokio::test]
async fn a_tool_result_is_echoed_on_both_kinds() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let messages = json!([{"role":"user","content":"hi"},{"role":"tool","content":"sunny"}]);
    let body = json!({"model":"m1","messages":messages,"tools":tools()});
    let v: Value = serde_json::from_str(&openai(&sim, body.clone()).await).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "tool said: sunny");
    let mut whole = body.clone();
    whole["stream"] = json!(false);
    let v: Value = serde_json::from_str(&native(&sim, "/api/chat", whole).await).unwrap();
    assert_eq!(v["message"]["content"], "tool said: sunny");
    let text = native(&sim, "/api/chat", body).await;
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["message"]["content"], "tool said: sunny");
}

#[tokio::test]
async fn ollama_tool_calls_carry_an_object() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let body = ask(json!({"tools":tools(),"stream":false}));
    let v: Value = serde_json::from_str(&native(&sim, "/api/chat", body).await).unwrap();
    let message = &v["message"];
    assert_eq!(message["content"], "");
    let call = &message["tool_calls"][0]["function"];
    assert_eq!(
        (&call["name"], &call["arguments"]),
        (&json!("weather"), &json!({"city":"sim"}))
    );
    assert_eq!(v["done_reason"], "stop");
    let text = native(&sim, "/api/chat", ask(json!({"tools":tools()}))).await;
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0]["message"]["tool_calls"][0]["function"]["arguments"]["city"],
        "sim"
    );
    assert_eq!(
        (&lines[0]["done"], &lines[1]["done"]),
        (&json!(false), &json!(true))
    );
}

#[tokio::test]
async fn reasoning_on_both_kinds() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let kwargs = json!({"chat_template_kwargs":{"enable_thinking":true}});
    let v: Value = serde_json::from_str(&openai(&sim, ask(kwargs)).await).unwrap();
    let message = &v["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], "thinking from olla");
    assert_eq!(message["content"], "ok from olla");
    let text = openai(&sim, ask(json!({"reasoning_effort":"low","stream":true}))).await;
    let got = events(&text);
    assert_eq!(
        got[0]["choices"][0]["delta"],
        json!({"role":"assistant","reasoning_content":"thinking from olla"})
    );
    assert_eq!(got.len(), 5, "thinking, three pieces, finish");
    let v: Value = serde_json::from_str(&openai(&sim, ask(json!({}))).await).unwrap();
    assert!(v["choices"][0]["message"]
        .get("reasoning_content")
        .is_none());
    let body = ask(json!({"think":true,"stream":false}));
    let v: Value = serde_json::from_str(&native(&sim, "/api/chat", body).await).unwrap();
    assert_eq!(v["message"]["thinking"], "thinking from olla");
    let body = json!({"model":"m1","prompt":"x","think":"high"});
    let text = native(&sim, "/api/generate", body).await;
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["thinking"], &first["response"]),
        (&json!("thinking from olla"), &json!(""))
    );
    assert_eq!(text.lines().count(), 5);
    let body = json!({"model":"m1","prompt":"x","think":false,"stream":false});
    let v: Value = serde_json::from_str(&native(&sim, "/api/generate", body).await).unwrap();
    assert!(v.get("thinking").is_none());
}

#[tokio::test]
async fn json_answers_on_both_kinds() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let expected = r#"{"ok":true,"from":"olla"}"#;
    let body = ask(json!({"response_format":{"type":"json_object"}}));
    let v: Value = serde_json::from_str(&openai(&sim, body).await).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], expected);
    let body = json!({"model":"m1","prompt":"x","response_format":{"type":"json_object"}});
    let url = format!("{}/completions", sim.base_url());
    let v: Value = post(url, body).await.unwrap().json().await.unwrap();
    assert_eq!(v["choices"][0]["text"], expected);
    let body = json!({"model":"m1","prompt":"x","format":"json","stream":false});
    let v: Value = serde_json::from_str(&native(&sim, "/api/generate", body).await).unwrap();
    assert_eq!(v["response"], expected);
    let body = ask(json!({"format":{"type":"object"},"stream":false}));
    let v: Value = serde_json::from_str(&native(&sim, "/api/chat", body).await).unwrap();
    assert_eq!(v["message"]["content"], expected);
}

#[tokio::test]
async fn usage_closes_an_openai_stream_when_asked() {
    let sim = Sim::start("alpha").await.unwrap();
    let body = ask(json!({"stream":true,"stream_options":{"include_usage":true}}));
    let got = events(&openai(&sim, body).await);
    assert_eq!(got.len(), 5);
    assert_eq!(got[3]["choices"][0]["finish_reason"], "stop");
    assert_eq!(got[4]["choices"], json!([]));
    let usage = json!({"prompt_tokens":1,"completion_tokens":3,"total_tokens":4});
    assert_eq!(got[4]["usage"], usage);
    let body = json!({"model":"m1","prompt":"x","suffix":"y","stream":true,
        "stream_options":{"include_usage":true}});
    let resp = post(format!("{}/completions", sim.base_url()), body)
        .await
        .unwrap();
    let got = events(&resp.text().await.unwrap());
    assert_eq!(got[0]["choices"][0]["text"], "alpha-0 ");
    assert_eq!(got.last().unwrap()["usage"]["completion_tokens"], 3);
}
