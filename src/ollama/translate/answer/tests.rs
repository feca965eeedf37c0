//! Unit tests of OpenAI whole answers translated to Ollama's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{json, Value};

use super::*;

/// 2026-11-30T14:02:11.5Z
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_047_331_500)
}

/// 2 s in all, the first token after 0.5 s.
const TIMING: Timing = Timing {
    total: Duration::from_secs(2),
    first_token: Duration::from_millis(500),
};

fn translate(call: Call, openai: Value) -> Result<String, String> {
    let out = answer_at(
        call,
        openai.to_string().as_bytes(),
        "qwen3:latest",
        TIMING,
        now(),
    )?;
    Ok(String::from_utf8(out.to_vec()).unwrap())
}

const METRICS: &str = r#""total_duration":2000000000,"load_duration":0,"prompt_eval_count":12,"prompt_eval_duration":500000000,"eval_count":34,"eval_duration":1500000000"#;

#[test]
fn chat_answer_with_reasoning_and_usage() {
    let openai = json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Blue.", "reasoning_content": "Rayleigh."},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 34}});
    let want = format!(
        r#"{{"model":"qwen3:latest","created_at":"2026-11-30T14:02:11.5Z","message":{{"role":"assistant","content":"Blue.","thinking":"Rayleigh."}},"done":true,"done_reason":"stop",{METRICS}}}"#
    );
    assert_eq!(translate(Call::Chat, openai).unwrap(), want);
}

#[test]
fn chat_tool_calls_get_object_arguments() {
    let openai = json!({"choices": [{"message": {"role": "assistant", "content": null,
        "reasoning": "need weather", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "not json"}},
        ]}, "finish_reason": "tool_calls"}]});
    let out: Value = serde_json::from_str(&translate(Call::Chat, openai).unwrap()).unwrap();
    assert_eq!(
        out["message"],
        json!({"role": "assistant", "content": "", "thinking": "need weather", "tool_calls": [
            {"id": "c1", "function": {"index": 0, "name": "weather", "arguments": {"city": "Paris"}}},
            {"id": "c2", "function": {"index": 1, "name": "time", "arguments": {}}},
        ]})
    );
    assert_eq!(out["done_reason"], "stop");
    assert_eq!(
        out.get("prompt_eval_count"),
        None,
        "unknown counts are left out"
    );
    assert_eq!(out.get("eval_count"), None);
    assert_eq!(out["eval_duration"], 1_500_000_000u64);
}

#[test]
fn finish_reasons_map_to_done_reasons() {
    let reason = |finish: Value| {
        let openai = json!({"choices": [{"message": {"content": "x"}, "finish_reason": finish}]});
        let out: Value = serde_json::from_str(&translate(Call::Chat, openai).unwrap()).unwrap();
        out["done_reason"].clone()
    };
    assert_eq!(reason(json!("length")), "length");
    assert_eq!(reason(json!(null)), "stop");
    assert_eq!(reason(json!("content_filter")), "content_filter");
}

#[test]
fn generate_answer_from_chat_and_from_completions() {
    let openai = json!({"choices": [{"message": {"content": "Hi.", "reasoning_content": "hm"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 34}});
    let want = format!(
        r#"{{"model":"qwen3:latest","created_at":"2026-11-30T14:02:11.5Z","response":"Hi.","thinking":"hm","done":true,"done_reason":"stop",{METRICS}}}"#
    );
    assert_eq!(translate(Call::Generate, openai).unwrap(), want);

    let openai = json!({"object": "text_completion", "choices": [{"index": 0, "text": "    return a",
        "finish_reason": "length"}], "usage": {"prompt_tokens": 12, "completion_tokens": 34}});
    let want = format!(
        r#"{{"model":"qwen3:latest","created_at":"2026-11-30T14:02:11.5Z","response":"    return a","done":true,"done_reason":"length",{METRICS}}}"#
    );
    assert_eq!(translate(Call::Generate, openai).unwrap(), want);
}

#[test]
fn embed_answer_orders_vectors_by_index() {
    let openai = json!({"object": "list", "data": [
        {"object": "embedding", "index": 1, "embedding": [0.3, 0.4]},
        {"object": "embedding", "index": 0, "embedding": [0.1, 0.2]},
    ], "usage": {"prompt_tokens": 12, "total_tokens": 12}});
    assert_eq!(
        translate(Call::Embed, openai.clone()).unwrap(),
        r#"{"model":"qwen3:latest","embeddings":[[0.1,0.2],[0.3,0.4]],"total_duration":2000000000,"load_duration":0,"prompt_eval_count":12}"#
    );
    assert_eq!(
        translate(Call::Embeddings, openai).unwrap(),
        r#"{"embedding":[0.1,0.2]}"#
    );
    let empty = json!({"data": []});
    assert_eq!(
        translate(Call::Embeddings, empty.clone()).unwrap(),
        r#"{"embedding":[]}"#
    );
    assert_eq!(
        translate(Call::Embed, empty).unwrap(),
        r#"{"model":"qwen3:latest","embeddings":[],"total_duration":2000000000,"load_duration":0}"#
    );
}

#[test]
fn answers_lacking_what_is_needed_are_errors() {
    let cases = [
        (
            Call::Chat,
            json!({"choices": []}),
            "the answer has no choices[0]",
        ),
        (
            Call::Chat,
            json!({"error": "x"}),
            "the answer has no choices[0]",
        ),
        (
            Call::Chat,
            json!({"choices": [{"message": "hi"}]}),
            "the answer's choices[0].message is not an object",
        ),
        (
            Call::Generate,
            json!({"choices": [{"finish_reason": "stop"}]}),
            "the answer's choices[0] has neither a message nor a text",
        ),
        (
            Call::Embed,
            json!({"choices": []}),
            "the answer has no data",
        ),
        (
            Call::Embeddings,
            json!({"data": [{"embedding": "AAAA"}]}),
            "the answer's data[0] has no embedding array",
        ),
    ];
    for (call, openai, want) in cases {
        assert_eq!(translate(call, openai).unwrap_err(), want);
    }
    let e = answer(Call::Chat, b"<html>", "m", TIMING).unwrap_err();
    assert!(e.starts_with("the answer is not JSON: "), "{e}");
}

#[test]
fn answer_stamps_the_wall_clock() {
    let openai = json!({"choices": [{"message": {"content": "x"}}]}).to_string();
    let out = answer(Call::Chat, openai.as_bytes(), "m", TIMING).unwrap();
    let out: Value = serde_json::from_slice(&out).unwrap();
    let stamp = out["created_at"].as_str().unwrap();
    assert!(
        stamp.ends_with('Z') && stamp.parse::<jiff::Timestamp>().is_ok(),
        "{stamp}"
    );
}

#[test]
fn logprobs_of_a_chat_or_a_text_completion_come_back_in_ollamas_shape() {
    let openai = json!({"choices": [{"message": {"role": "assistant", "content": "Hi"},
        "logprobs": {"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
            "top_logprobs": [{"token": "Hi", "logprob": -0.5}, {"token": "Yo", "logprob": -2.0}]}]},
        "finish_reason": "stop"}]});
    let out: Value = serde_json::from_str(&translate(Call::Chat, openai).unwrap()).unwrap();
    assert_eq!(
        out["logprobs"],
        json!([{"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
            "top_logprobs": [{"token": "Hi", "logprob": -0.5}, {"token": "Yo", "logprob": -2.0}]}])
    );
    // A text completion (raw generate): parallel arrays, zipped.
    let openai = json!({"choices": [{"text": "a b", "finish_reason": "stop", "logprobs": {
        "tokens": ["a", " b"], "token_logprobs": [-0.1, null],
        "top_logprobs": [{"a": -0.1, "c": -3.0}, null], "text_offset": [0, 1]}}]});
    let out: Value = serde_json::from_str(&translate(Call::Generate, openai).unwrap()).unwrap();
    assert_eq!(
        out["logprobs"],
        json!([{"token": "a", "logprob": -0.1,
                "top_logprobs": [{"token": "a", "logprob": -0.1}, {"token": "c", "logprob": -3.0}]},
               {"token": " b", "logprob": 0}])
    );
    // None asked, none given: no field.
    let openai = json!({"choices": [{"message": {"content": "x"}, "logprobs": null}]});
    let out: Value = serde_json::from_str(&translate(Call::Chat, openai).unwrap()).unwrap();
    assert!(out.get("logprobs").is_none(), "{out}");
}
