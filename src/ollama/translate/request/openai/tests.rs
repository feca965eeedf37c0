//! Unit tests of Ollama requests translated for OpenAI machines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

use crate::ollama::translate::request::tests::{read, GIF, JPEG, OTHER, PNG, WEBP};
use crate::ollama::Call;
use crate::outcome::Endpoint;

/// The OpenAI request for `body`, sent to backend "b".
fn openai(call: Call, body: Value) -> (Endpoint, Value) {
    let (endpoint, bytes) = read(call, body).unwrap().openai("b");
    (endpoint, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn chat_images_become_content_parts_with_their_mime() {
    let (endpoint, body) = openai(
        Call::Chat,
        json!({"model": "m", "stream": false, "messages": [
            {"role": "user", "content": "what?", "images": [PNG, JPEG, GIF, WEBP, OTHER]},
            {"role": "user", "images": [JPEG]},
        ]}),
    );
    assert_eq!(endpoint, Endpoint::Chat);
    let image = |mime: &str, b64: &str| json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{b64}")}});
    assert_eq!(
        body,
        json!({"model": "b", "stream": false, "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "what?"},
                image("image/png", PNG), image("image/jpeg", JPEG), image("image/gif", GIF),
                image("image/webp", WEBP), image("image/png", OTHER),
            ]},
            {"role": "user", "content": [image("image/jpeg", JPEG)]},
        ]})
    );
}

#[test]
fn tool_ids_are_made_up_consistently_across_turns() {
    let tools = json!([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]);
    let (_, body) = openai(
        Call::Chat,
        json!({"stream": false, "tools": tools, "messages": [
            {"role": "user", "content": "weather in Paris and time in Rome?"},
            {"role": "assistant", "content": "", "thinking": "two tools", "tool_calls": [
                {"function": {"name": "weather", "arguments": {"city": "Paris"}}},
                {"function": {"name": "time", "arguments": {"city": "Rome"}}},
            ]},
            {"role": "tool", "tool_name": "time", "content": "10:00"},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "Sunny; 10:00. More?"},
            {"role": "user", "content": "and Oslo?"},
            {"role": "assistant", "tool_calls": [
                {"function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
            ]},
            {"role": "tool", "tool_name": "weather", "content": "snow"},
            {"role": "tool", "tool_name": "weather", "content": "stray"},
        ]}),
    );
    let call = |id: &str, name: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}});
    assert_eq!(body["tools"], tools);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "weather in Paris and time in Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                call("call_1_0", "weather", "{\"city\":\"Paris\"}"),
                call("call_1_1", "time", "{\"city\":\"Rome\"}"),
            ]},
            {"role": "tool", "tool_call_id": "call_1_1", "content": "10:00"},
            {"role": "tool", "tool_call_id": "call_1_0", "content": "sunny"},
            {"role": "assistant", "content": "Sunny; 10:00. More?"},
            {"role": "user", "content": "and Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                call("call_6_0", "weather", "{\"city\":\"Oslo\"}"),
            ]},
            {"role": "tool", "tool_call_id": "call_6_0", "content": "snow"},
            {"role": "tool", "tool_call_id": "call_8", "content": "stray"},
        ])
    );
}

#[test]
fn a_tool_name_without_a_matching_call_answers_the_earliest_open_one() {
    let (_, body) = openai(
        Call::Chat,
        json!({"messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": "a"}}, {"function": {"name": "b"}}]},
            {"role": "tool", "tool_name": "zzz", "content": "1"},
            {"role": "tool", "tool_name": "a", "content": "2"},
        ]}),
    );
    assert_eq!(
        body["messages"][0]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
    assert_eq!(body["messages"][1]["tool_call_id"], "call_0_0");
    assert_eq!(body["messages"][2]["tool_call_id"], "call_0_1");
}

#[test]
fn a_call_answered_by_an_unnamed_tool_message_is_not_answered_twice() {
    let call = |name: &str| json!({"function": {"name": name}});
    let (_, body) = openai(
        Call::Chat,
        json!({"messages": [
            {"role": "assistant", "tool_calls": [call("a"), call("b"), call("a")]},
            {"role": "tool"},
            {"role": "tool", "tool_name": "a"},
            {"role": "tool", "tool_name": "a"},
            {"role": "tool", "tool_name": "b"},
        ]}),
    );
    let ids: Vec<&Value> = (1..5)
        .map(|i| &body["messages"][i]["tool_call_id"])
        .collect();
    assert_eq!(ids, ["call_0_0", "call_0_2", "call_0_1", "call_4"]);
}

/// Found while writing the ollama target of tests/fuzz.rs: each tool message looked for its
/// call through every earlier call, so n calls and n tool messages took n² steps (a 16 MiB
/// chat: minutes of CPU on the server's thread).
#[test]
fn many_tool_messages_pair_with_their_calls_in_linear_time() {
    let n = 50_000;
    let calls = vec![json!({"function": {"name": "f"}}); n];
    let mut messages = vec![json!({"role": "assistant", "tool_calls": calls})];
    let name = |k: usize| if k.is_multiple_of(2) { "g" } else { "f" };
    messages.extend((0..=n).map(|k| json!({"role": "tool", "tool_name": name(k)})));
    let (_, body) = openai(Call::Chat, json!({ "messages": messages }));
    assert_eq!(body["messages"][1]["tool_call_id"], "call_0_0");
    assert_eq!(
        body["messages"][n]["tool_call_id"],
        format!("call_0_{}", n - 1)
    );
    assert_eq!(
        body["messages"][n + 1]["tool_call_id"],
        format!("call_{}", n + 1)
    );
    // The same pairing, its steps counted: each call is stepped over a bounded number of
    // times in all (the n² way stepped over every earlier call for each answer).
    let mut pairs = super::Calls::default();
    for k in 0..n {
        pairs.push(format!("call_0_{k}"), "f");
    }
    for k in 0..=n {
        pairs.answer(k + 1, Some(name(k)));
    }
    assert!(pairs.steps <= 3 * n, "{} steps for {n} calls", pairs.steps);
}

#[test]
fn generate_goes_to_chat_with_system_and_images() {
    let (endpoint, body) = openai(
        Call::Generate,
        json!({"model": "m", "system": "be brief", "prompt": "what is this?", "images": [GIF],
            "template": "{{ .Prompt }}", "context": [1, 2], "raw": false, "suffix": ""}),
    );
    assert_eq!(endpoint, Endpoint::Chat);
    assert_eq!(
        body,
        json!({"model": "b", "stream": true, "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{GIF}")}},
            ]},
        ]})
    );
    let (_, body) = openai(Call::Generate, json!({"prompt": "hi", "stream": false}));
    assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[test]
fn raw_or_suffix_generate_goes_to_completions() {
    let (endpoint, body) = openai(
        Call::Generate,
        json!({"prompt": "def f(x):", "suffix": "    return y", "stream": false, "think": true, "images": [PNG]}),
    );
    assert_eq!(endpoint, Endpoint::Completions);
    assert_eq!(
        body,
        json!({"model": "b", "prompt": "def f(x):", "suffix": "    return y", "stream": false})
    );
    let (endpoint, body) = openai(
        Call::Generate,
        json!({"prompt": "[INST] hi [/INST]", "raw": true}),
    );
    assert_eq!(endpoint, Endpoint::Completions);
    assert_eq!(
        body,
        json!({"model": "b", "prompt": "[INST] hi [/INST]", "stream": true,
            "stream_options": {"include_usage": true}})
    );
}

#[test]
fn embed_and_embeddings_go_to_embeddings() {
    let (endpoint, body) = openai(
        Call::Embed,
        json!({"input": ["a", "b"], "dimensions": 256, "truncate": true, "keep_alive": "1m",
            "options": {"temperature": 0}}),
    );
    assert_eq!(endpoint, Endpoint::Embeddings);
    assert_eq!(
        body,
        json!({"model": "b", "input": ["a", "b"], "dimensions": 256})
    );
    let (endpoint, body) = openai(Call::Embeddings, json!({"prompt": "p"}));
    assert_eq!(endpoint, Endpoint::Embeddings);
    assert_eq!(body, json!({"model": "b", "input": "p"}));
}

#[test]
fn options_carry_the_common_samplers_only() {
    let (_, body) = openai(
        Call::Chat,
        json!({"messages": [], "stream": false, "keep_alive": "10m", "options": {
            "temperature": 0.2, "top_p": 0.9, "seed": 42, "stop": "\n\n", "num_predict": 128,
            "frequency_penalty": 1.0, "presence_penalty": 1.5, "top_k": 20, "min_p": 0.05,
            "num_ctx": 8192, "num_gpu": 99, "repeat_penalty": 1.1, "mirostat": 1, "num_thread": 8,
        }}),
    );
    assert_eq!(
        body,
        json!({"model": "b", "messages": [], "stream": false, "temperature": 0.2, "top_p": 0.9,
            "seed": 42, "stop": ["\n\n"], "max_tokens": 128, "frequency_penalty": 1.0,
            "presence_penalty": 1.5, "top_k": 20, "min_p": 0.05})
    );
    let (_, body) = openai(
        Call::Generate,
        json!({"prompt": "x", "options": {"num_predict": -1, "stop": ["a", "b"]}}),
    );
    assert_eq!(body.get("max_tokens"), None, "-1 is Ollama's no limit");
    assert_eq!(body["stop"], json!(["a", "b"]));
}

#[test]
fn format_becomes_response_format() {
    let (_, body) = openai(Call::Chat, json!({"format": "json"}));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}}});
    let (_, body) = openai(Call::Generate, json!({"prompt": "x", "format": schema}));
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}})
    );
    let (_, body) = openai(Call::Chat, json!({"format": ""}));
    assert_eq!(body.get("response_format"), None);
}

#[test]
fn think_becomes_the_template_switch_and_a_level_the_effort() {
    let (_, body) = openai(Call::Chat, json!({"think": false}));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    assert_eq!(body.get("reasoning_effort"), None);
    let (_, body) = openai(Call::Generate, json!({"think": true}));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": true})
    );
    let (_, body) = openai(Call::Chat, json!({"think": "high"}));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": true})
    );
    assert_eq!(body["reasoning_effort"], "high");
}

#[test]
fn stream_flags_follow_the_client() {
    let (_, body) = openai(Call::Chat, json!({}));
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    let (_, body) = openai(Call::Chat, json!({"stream": false}));
    assert_eq!(body["stream"], false);
    assert_eq!(body.get("stream_options"), None);
    let (_, body) = openai(Call::Embed, json!({"input": "x", "stream": true}));
    assert_eq!(body.get("stream"), None);
}

#[test]
fn an_empty_tools_array_is_left_out() {
    let (_, body) = openai(Call::Chat, json!({"tools": [], "stream": false}));
    assert_eq!(body, json!({"model": "b", "messages": [], "stream": false}));
}

#[test]
fn ids_a_client_sends_are_kept_and_pair_the_tool_message_with_its_call() {
    let (_, body) = openai(
        Call::Chat,
        json!({"stream": false, "messages": [
            {"role": "assistant", "tool_calls": [
                {"id": "call_w", "function": {"index": 0, "name": "weather", "arguments": {"city": "Paris"}}},
                {"id": "call_t", "function": {"index": 1, "name": "weather", "arguments": {"city": "Rome"}}},
            ]},
            // Answered out of order, by id: the Rome call first.
            {"role": "tool", "tool_call_id": "call_t", "tool_name": "weather", "content": "rain"},
            // No id: the earliest open call of that name is the Paris one, not Rome's.
            {"role": "tool", "tool_name": "weather", "content": "sun"},
        ]}),
    );
    let ids: Vec<&Value> = body["messages"][0]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!("call_w"), &json!("call_t")]);
    assert_eq!(body["messages"][1]["tool_call_id"], "call_t");
    assert_eq!(body["messages"][2]["tool_call_id"], "call_w");
}

#[test]
fn logprobs_are_asked_for_as_the_endpoint_takes_them() {
    let chat = json!({"stream": false, "logprobs": true, "top_logprobs": 3,
        "truncate": false, "shift": true, "messages": [{"role": "user", "content": "hi"}]});
    let (endpoint, body) = openai(Call::Chat, chat);
    assert_eq!(endpoint, Endpoint::Chat);
    assert_eq!(
        (&body["logprobs"], &body["top_logprobs"]),
        (&json!(true), &json!(3))
    );
    assert!(
        body.get("truncate").is_none() && body.get("shift").is_none(),
        "{body}"
    );
    let (_, body) = openai(Call::Chat, json!({"logprobs": true, "messages": []}));
    assert_eq!(body["logprobs"], true);
    assert!(body.get("top_logprobs").is_none(), "{body}");
    let (_, body) = openai(Call::Chat, json!({"logprobs": false, "top_logprobs": 2}));
    assert!(body.get("logprobs").is_none(), "{body}");
    let raw = json!({"raw": true, "prompt": "x", "logprobs": true, "top_logprobs": 2});
    let (endpoint, body) = openai(Call::Generate, raw);
    assert_eq!(endpoint, Endpoint::Completions);
    assert_eq!(body["logprobs"], 2);
}

#[test]
fn ids_stay_unique_in_a_chat_whatever_ids_a_client_sends() {
    let call = |id: &str| json!({"id": id, "function": {"name": "f", "arguments": {}}});
    let (_, body) = openai(
        Call::Chat,
        json!({"stream": false, "messages": [
            {"role": "assistant", "tool_calls": [call("call_1_0"), call("call_1_0")]},
            // Without an id, the id made up for it (call_1_0) is taken already.
            {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}, call("x")]},
            {"role": "tool", "tool_call_id": "call_1_0", "content": "first"},
        ]}),
    );
    let ids: Vec<&str> = (0..2)
        .flat_map(|i| body["messages"][i]["tool_calls"].as_array().unwrap())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), 4, "{ids:?}");
    // The first call keeps the client's id, and its answer pairs with it.
    assert_eq!(ids[0], "call_1_0");
    assert_eq!(ids[3], "x");
    assert_eq!(body["messages"][2]["tool_call_id"], "call_1_0");
}
