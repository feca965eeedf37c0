//! Unit tests of reading Ollama requests (translating them: `openai/tests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

use super::*;

/// A PNG's base64 start, a JPEG's, a GIF's, a WebP's and an unknown one.
pub(super) const PNG: &str = "iVBORw0KGgoAAAANSUhEUg==";
pub(super) const JPEG: &str = "/9j/4AAQSkZJRg==";
pub(super) const GIF: &str = "R0lGODlhAQABAIAAAP==";
pub(super) const WEBP: &str = "UklGRiQAAABXRUJQ";
pub(super) const OTHER: &str = "AAAAAAAA";

/// `body` read as a `call`.
pub(super) fn read(call: Call, body: Value) -> Result<Request, String> {
    Request::read(call, body.to_string().as_bytes())
}

/// The message `read` refuses `body` with.
fn error(call: Call, body: Value) -> String {
    read(call, body).unwrap_err()
}

#[test]
fn chat_reads_model_text_images_and_stream() {
    let r = read(
        Call::Chat,
        json!({"model": "qwen3:latest", "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second", "images": [PNG]},
            {"role": "assistant", "content": null},
        ]}),
    )
    .unwrap();
    assert_eq!(r.model.as_deref(), Some("qwen3:latest"));
    assert_eq!(r.text, "second");
    assert!(r.has_image);
    assert!(r.stream, "stream defaults to true");

    let r = read(
        Call::Chat,
        json!({"model": "", "messages": [], "stream": false}),
    )
    .unwrap();
    assert_eq!(
        (r.model, r.text.as_str(), r.has_image, r.stream),
        (None, "", false, false)
    );
    let r = read(
        Call::Chat,
        json!({"model": null, "messages": [{"role": "user", "images": []}]}),
    );
    assert!(!r.unwrap().has_image, "an empty images array is no image");
}

#[test]
fn generate_embed_and_embeddings_read_their_text() {
    let r = read(Call::Generate, json!({"prompt": "why", "images": [JPEG]})).unwrap();
    assert_eq!(
        (r.text.as_str(), r.has_image, r.stream),
        ("why", true, true)
    );
    let r = read(Call::Embed, json!({"input": ["a", "b"], "stream": true})).unwrap();
    assert_eq!((r.text.as_str(), r.stream), ("a\nb", false));
    assert_eq!(
        read(Call::Embed, json!({"input": "one"})).unwrap().text,
        "one"
    );
    assert_eq!(
        read(Call::Embeddings, json!({"prompt": "p"})).unwrap().text,
        "p"
    );
}

#[test]
fn read_says_what_was_wrong_and_where() {
    let cases = [
        (
            Call::Chat,
            json!({"messages": [{"role": "user"}, {"role": "user", "content": 1}]}),
            "messages[1].content: expected a string",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "user"}, {"role": "user", "images": [PNG, 7]}]}),
            "messages[1].images[1]: expected a base64 string",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "user", "images": ["data:image/png;base64,iVBOR"]}]}),
            "messages[0].images[0]: expected a base64 string",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "user", "images": PNG}]}),
            "messages[0].images: expected an array",
        ),
        (
            Call::Chat,
            json!({"messages": [{"content": "x"}]}),
            "messages[0].role: expected a string",
        ),
        (
            Call::Chat,
            json!({"messages": ["hi"]}),
            "messages[0]: expected an object",
        ),
        (
            Call::Chat,
            json!({"messages": {}}),
            "'messages' must be an array",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}]}),
            "messages[0].tool_calls[0].function.name: expected a string",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}]}),
            "messages[0].tool_calls[0].function.arguments: expected an object",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "tool", "tool_name": 1}]}),
            "messages[0].tool_name: expected a string",
        ),
        (Call::Chat, json!({"tools": {}}), "'tools' must be an array"),
        (Call::Chat, json!({"model": 7}), "'model' must be a string"),
        (
            Call::Chat,
            json!({"stream": "yes"}),
            "'stream' must be true or false",
        ),
        (
            Call::Chat,
            json!({"think": "max"}),
            "'think' must be true, false, \"low\", \"medium\" or \"high\"",
        ),
        (
            Call::Chat,
            json!({"format": "yaml"}),
            "'format' must be \"json\" or a JSON schema object",
        ),
        (
            Call::Chat,
            json!({"keep_alive": []}),
            "'keep_alive' must be a string or a number",
        ),
        (
            Call::Chat,
            json!({"options": []}),
            "'options' must be an object",
        ),
        (
            Call::Chat,
            json!({"options": {"temperature": "hot"}}),
            "options.temperature: expected a number",
        ),
        (
            Call::Chat,
            json!({"options": {"stop": [1]}}),
            "options.stop: expected a string or an array of strings",
        ),
        (
            Call::Generate,
            json!({"prompt": ["a"]}),
            "'prompt' must be a string",
        ),
        (
            Call::Generate,
            json!({"suffix": 1}),
            "'suffix' must be a string",
        ),
        (
            Call::Generate,
            json!({"system": false}),
            "'system' must be a string",
        ),
        (
            Call::Generate,
            json!({"raw": "true"}),
            "'raw' must be true or false",
        ),
        (
            Call::Generate,
            json!({"images": [PNG, "%%"]}),
            "images[1]: expected a base64 string",
        ),
        (
            Call::Embed,
            json!({"input": ["a", 2]}),
            "input[1]: expected a string",
        ),
        (
            Call::Embed,
            json!({"input": 2}),
            "'input' must be a string or an array of strings",
        ),
        (
            Call::Embed,
            json!({"dimensions": -1}),
            "'dimensions' must be a positive integer",
        ),
        (
            Call::Embeddings,
            json!({"prompt": {}}),
            "'prompt' must be a string",
        ),
        (
            Call::Chat,
            json!({"logprobs": 1}),
            "'logprobs' must be true or false",
        ),
        (
            Call::Generate,
            json!({"top_logprobs": 21}),
            "'top_logprobs' must be an integer from 0 to 20",
        ),
        (
            Call::Chat,
            json!({"top_logprobs": -1}),
            "'top_logprobs' must be an integer from 0 to 20",
        ),
        (
            Call::Chat,
            json!({"truncate": "yes"}),
            "'truncate' must be true or false",
        ),
        (
            Call::Generate,
            json!({"shift": 0}),
            "'shift' must be true or false",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "tool", "tool_call_id": 7}]}),
            "messages[0].tool_call_id: expected a string",
        ),
        (
            Call::Chat,
            json!({"messages": [{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]}),
            "messages[0].tool_calls[0].id: expected a string",
        ),
    ];
    for (call, body, want) in cases {
        assert_eq!(error(call, body.clone()), want, "{call:?} {body}");
    }
    assert!(
        Request::read(Call::Chat, b"[1]").unwrap_err()
            == "body is not a JSON object: it is an array"
    );
    let e = Request::read(Call::Chat, b"{\"model\":").unwrap_err();
    assert!(e.starts_with("body is not a JSON object: EOF"), "{e}");
}

#[test]
fn unknown_fields_and_nulls_are_allowed() {
    let body = json!({"model": "m", "messages": null, "stream": null, "format": "", "think": null,
        "whatever": {"x": 1}, "keep_alive": 0, "options": {"num_ctx": "big", "stop": null}});
    let r = read(Call::Chat, body).unwrap();
    assert!(r.stream);
}

#[test]
fn native_sets_model_and_keeps_everything_else() {
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_ctx": 8192}, "keep_alive": "5m", "extra": [1, 2]});
    let r = read(Call::Chat, body.clone()).unwrap();
    let native: Value = serde_json::from_slice(&r.native("qwen3:8b")).unwrap();
    let mut want = body;
    want["model"] = json!("qwen3:8b");
    assert_eq!(native, want);
    let r = read(Call::Embed, json!({"input": "x"})).unwrap();
    let native: Value = serde_json::from_slice(&r.native("e")).unwrap();
    assert_eq!(native, json!({"model": "e", "input": "x"}));
}

#[test]
fn what_an_ollama_0_13_client_sends_is_read() {
    let body = json!({"model": "m", "stream": false, "think": "high", "truncate": true,
    "shift": false, "logprobs": true, "top_logprobs": 20, "keep_alive": -1,
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"place": {"type": "object", "properties": {"city": {"type": "string"}}}}}}}],
    "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1",
            "function": {"index": 0, "name": "f", "arguments": {"place": {"city": "Oslo"}}}}]},
        {"role": "tool", "tool_call_id": "call_1", "tool_name": "f", "content": "snow"},
    ]});
    let r = read(Call::Chat, body.clone()).unwrap();
    assert_eq!(r.text, "weather?");
    // Sent to an Ollama machine as it came.
    let native: Value = serde_json::from_slice(&r.native("m")).unwrap();
    assert_eq!(native, body);
}
