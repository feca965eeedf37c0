//! Ollama requests to machines that speak only OpenAI's API: translated on the way there,
//! and the answers (whole, or SSE chunk by chunk) translated back.

use std::time::Duration;

use futures_util::StreamExt;
use labrouter::sim::Fault;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::{lines, text_of};
use crate::support::{header, TestLab};

/// What the local machine (OpenAI only) was last sent.
fn sent(t: &TestLab) -> Value {
    serde_json::from_slice(&t.local.last_body().expect("a request reached local")).unwrap()
}

#[tokio::test(start_paused = true)]
async fn each_chunk_goes_out_as_it_arrives() {
    let t = TestLab::start_ollama_gpu().await;
    t.local.set(Fault::Drip(Duration::from_secs(10)));
    let start = Instant::now();
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "messages": [{"role": "user", "content": "hello"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "application/x-ndjson");
    let mut body = resp.bytes_stream();
    let mut seen = String::new();
    let mut at = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
        // Each content line is out the moment its SSE event is: 10 s apart, not all at
        // the end.
        for _ in at.len()..seen.matches('\n').count() {
            at.push(start.elapsed().as_secs());
        }
    }
    let got = lines(&seen);
    assert_eq!(text_of(&got), "local-0 local-1 local-2 ", "{seen}");
    assert_eq!(at[..3], [10, 20, 30], "{at:?}");
    let last = got.last().unwrap();
    assert_eq!(last["done"], true);
    // Durations in nanoseconds: the first token after 10 s; the sim drips its finish and
    // usage chunks too, so the stream ends at 50 s.
    assert_eq!(at.last(), Some(&50), "{at:?}");
    assert_eq!(last["prompt_eval_duration"], 10_000_000_000u64, "{last}");
    assert_eq!(last["eval_duration"], 40_000_000_000u64, "{last}");
    assert_eq!(last["total_duration"], 50_000_000_000u64, "{last}");
    // Usage asked for on the upstream stream, and carried back.
    let s = sent(&t);
    assert_eq!(s["stream"], true);
    assert_eq!(s["stream_options"]["include_usage"], true);
    assert!(last["eval_count"].is_u64(), "{last}");
    assert!(last["prompt_eval_count"].is_u64(), "{last}");
}

#[tokio::test(start_paused = true)]
async fn options_format_and_think_become_the_openai_fields() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "stream": false, "format": "json", "think": true,
                   "keep_alive": -1,
                   "options": {"num_predict": 64, "temperature": 0.1, "top_p": 0.9,
                               "seed": 7, "stop": ["\n\n"], "num_ctx": 8192},
                   "messages": [{"role": "system", "content": "be terse"},
                                {"role": "user", "content": "hello"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "application/json");
    let v: Value = resp.json().await.unwrap();
    let s = sent(&t);
    assert_eq!(s["model"], "qwen3:4b");
    assert_eq!(s["stream"], false);
    assert_eq!(s["max_tokens"], 64);
    assert_eq!(s["temperature"], 0.1);
    assert_eq!(s["top_p"], 0.9);
    assert_eq!(s["seed"], 7);
    assert_eq!(s["stop"], json!(["\n\n"]));
    assert_eq!(s["response_format"], json!({"type": "json_object"}));
    assert_eq!(s["chat_template_kwargs"]["enable_thinking"], true);
    assert_eq!(
        s["messages"][0],
        json!({"role": "system", "content": "be terse"})
    );
    assert!(
        s.get("keep_alive").is_none() && s.get("options").is_none(),
        "{s}"
    );
    // The answer: JSON text, the reasoning as `thinking`, counts from `usage`.
    let content = v["message"]["content"].as_str().unwrap();
    let parsed: Value = serde_json::from_str(content).expect("format json gives JSON");
    assert_eq!(parsed["from"], "local");
    assert_eq!(v["message"]["thinking"], "thinking from local", "{v}");
    assert_eq!(v["done"], true);
    assert_eq!(v["prompt_eval_count"], 1);
    assert_eq!(v["model"], "small");
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_round_trip() {
    let t = TestLab::start_ollama_gpu().await;
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "description": "the weather in a city",
        "parameters": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string"}}}}}]);
    // Streamed: OpenAI sends the arguments in fragments; Ollama gets one call, arguments
    // as an object.
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "tools": tools,
                   "messages": [{"role": "user", "content": "weather in Paris?"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    let got = lines(&body);
    let calls: Vec<&Value> = got
        .iter()
        .filter_map(|l| l["message"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(
        calls[0]["function"]["arguments"],
        json!({"city": "sim"}),
        "{body}"
    );
    assert_eq!(got.last().unwrap()["done"], true);

    // The client answers the call the Ollama way: no ids. labrouter makes them up, the
    // same for the call and its result.
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "stream": false, "tools": tools,
                   "messages": [
                       {"role": "user", "content": "weather in Paris?"},
                       {"role": "assistant", "content": "",
                        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                       {"role": "tool", "tool_name": "get_weather", "content": "22 C"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["message"]["content"], "tool said: 22 C", "{v}");
    let s = sent(&t);
    let call = &s["messages"][1]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"city": "Paris"}),
        "OpenAI takes arguments as a string"
    );
    let id = call["id"].as_str().unwrap();
    assert!(!id.is_empty());
    assert_eq!(s["messages"][2]["role"], "tool");
    assert_eq!(s["messages"][2]["tool_call_id"], id, "{s}");
    assert_eq!(s["tools"], tools);
}

#[tokio::test(start_paused = true)]
async fn generate_uses_the_chat_template_unless_raw_or_suffix() {
    let t = TestLab::start_ollama_gpu().await;
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "small", "stream": false, "system": "be terse", "prompt": "hello"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["response"], "ok from local", "{v}");
    assert_eq!(v["done"], true);
    assert_eq!(t.local.hits("/v1/chat/completions"), 1);
    assert_eq!(
        sent(&t)["messages"],
        json!([{"role": "system", "content": "be terse"}, {"role": "user", "content": "hello"}])
    );
    // Code completion (Continue): a suffix goes to /v1/completions with it.
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "small", "prompt": "fn main() {", "suffix": "}\n"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let got = lines(&resp.text().await.unwrap());
    assert_eq!(text_of(&got), "local-0 local-1 local-2 ");
    assert_eq!(got.last().unwrap()["done"], true);
    assert_eq!(t.local.hits("/v1/completions"), 1);
    let s = sent(&t);
    assert_eq!(s["prompt"], "fn main() {");
    assert_eq!(s["suffix"], "}\n");
    let resp = t
        .post(
            "/api/generate",
            json!({"model": "small", "stream": false, "raw": true, "prompt": "[INST] hi [/INST]"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(t.local.hits("/v1/completions"), 2);
    assert_eq!(sent(&t)["prompt"], "[INST] hi [/INST]");
}

#[tokio::test(start_paused = true)]
async fn images_route_to_the_vision_route_and_become_image_parts() {
    let t = TestLab::start_ollama_gpu().await;
    // A PNG, as base64 without a data: prefix, the way Ollama takes it.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==";
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "auto", "stream": false,
                   "messages": [{"role": "user", "content": "what is this?", "images": [png]}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "x-labrouter-route"), "vision");
    assert_eq!(header(&resp, "x-labrouter-target"), "vision-gpu@gpu-box");
    let s: Value = serde_json::from_slice(&t.gpu.last_body().unwrap()).unwrap();
    assert_eq!(s["messages"][0]["images"][0], png, "natively, as sent");
    // To an OpenAI machine: an image part with a data URL.
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "stream": false,
                   "messages": [{"role": "user", "content": "what is this?", "images": [png]}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let parts = &sent(&t)["messages"][0]["content"];
    assert_eq!(parts[0], json!({"type": "text", "text": "what is this?"}));
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
}

#[tokio::test(start_paused = true)]
async fn a_translated_stream_cut_mid_way_ends_with_an_error_line() {
    let t = TestLab::start_ollama_gpu().await;
    t.local.set(Fault::CutAfter(2));
    let resp = t
        .post(
            "/api/chat",
            json!({"model": "small", "messages": [{"role": "user", "content": "hello"}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    let got = lines(&body);
    assert_eq!(text_of(&got), "local-0 local-1 ", "{body}");
    let last = got.last().unwrap();
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("small@local failed mid-stream"),
        "{body}"
    );
    assert!(!body.contains("\"done\":true"), "{body}");
}
