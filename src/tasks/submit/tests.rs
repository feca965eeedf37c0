//! A submit body's checks: each field's error in its own words, and the first thing wrong
//! (in the order a reader meets the fields) is the one said.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::{read, Invalid, MAX_AFTER, MAX_METADATA};
use crate::registry::Registry;
use crate::tasks::TaskId;
use crate::upstream::Endpoint;

fn registry() -> Registry {
    let yaml = "\
machines:
  local: { url: \"http://127.0.0.1:11434/v1\" }
models:
  small: { machine: local, name: \"qwen3:4b\" }
routes:
  - name: code
    keywords: [code]
    chain: [small]
  - name: chat
    default: true
    chain: [small]
tasks:
  max_request_body: 1KiB
";
    Registry::parse(yaml, "registry.yaml").unwrap()
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// A good submit with `with`'s fields set on top.
fn body(with: Value) -> Vec<u8> {
    let mut b =
        json!({"request": {"model": "small", "messages": [{"role": "user", "content": "hi"}]}});
    for (k, v) in with.as_object().unwrap() {
        b[k] = v.clone();
    }
    serde_json::to_vec(&b).unwrap()
}

fn refusal(with: Value) -> Invalid {
    read(&body(with), &registry(), now()).unwrap_err()
}

fn says(with: Value) -> String {
    match refusal(with) {
        Invalid::Bad(m) | Invalid::TooLarge(m) => m,
    }
}

#[test]
fn each_bad_field_is_refused_in_words_that_name_it() {
    let ids = |n: usize| -> Vec<String> { (0..n).map(|_| TaskId::new().to_string()).collect() };
    let one = TaskId::new().to_string();
    let metadata: serde_json::Map<String, Value> = (0..=MAX_METADATA)
        .map(|i| (format!("k{i}"), json!("v")))
        .collect();
    let cases = [
        (
            json!({"endpoint": "chat"}),
            "endpoint: 'chat' is not one of chat/completions, completions, embeddings, responses, images/generations, rerank (uploads and speech are answered only while their client waits)".to_string(),
        ),
        (
            json!({"request": [1]}),
            "request: expected a JSON object (the body you would POST to the endpoint)".into(),
        ),
        (
            json!({"endpoint": "embeddings", "request": {"model": "auto", "input": "x"}}),
            "request: embeddings need a model: keyword routing could embed with a different model each time".into(),
        ),
        (
            json!({"route": "nope"}),
            "route: no route 'nope'; expected one of: code, chat".into(),
        ),
        (
            json!({"after": ids(MAX_AFTER + 1)}),
            format!("after: {} tasks; at most {MAX_AFTER}", MAX_AFTER + 1),
        ),
        (
            json!({"after": [one, one]}),
            format!("after[1]: {one} is named twice"),
        ),
        (
            json!({"priority": 101}),
            "priority: 101 is outside -100..100".into(),
        ),
        (
            json!({"max_attempts": 0}),
            "max_attempts: 0 is outside 1..100".into(),
        ),
        (
            json!({"metadata": metadata}),
            format!("metadata: {} pairs; at most {MAX_METADATA}", MAX_METADATA + 1),
        ),
        (
            json!({"metadata": {"": "v"}}),
            "metadata: key '' must be 1 to 64 bytes".into(),
        ),
        (
            json!({"metadata": {"k": "x".repeat(513)}}),
            "metadata['k']: 513 bytes; at most 512".into(),
        ),
    ];
    for (with, expected) in cases {
        assert_eq!(says(with.clone()), expected, "{with}");
    }
}

#[test]
fn a_request_over_the_limit_is_too_large_not_bad() {
    let request = json!({"model": "small", "prompt": "x".repeat(2048)});
    let len = serde_json::to_string(&request).unwrap().len();
    assert_eq!(
        refusal(json!({ "request": request })),
        Invalid::TooLarge(format!(
            "request: {len} bytes is larger than tasks.max_request_body (1024 bytes)"
        ))
    );
}

#[test]
fn the_first_bad_field_in_reading_order_is_the_one_said() {
    let order = [
        (json!({"endpoint": "x", "route": "nope"}), "endpoint:"),
        (json!({"route": "nope", "after": ["x"]}), "route:"),
        (json!({"after": ["x"], "priority": 101}), "after[0]:"),
        (json!({"priority": 101, "max_attempts": 0}), "priority:"),
        (
            json!({"max_attempts": 0, "metadata": {"": ""}}),
            "max_attempts:",
        ),
    ];
    for (with, first) in order {
        let said = says(with.clone());
        assert!(said.starts_with(first), "{with}: {said}");
    }
}

#[test]
fn a_good_submit_keeps_every_field() {
    let after = [TaskId::new(), TaskId::new()];
    let b = body(json!({
        "endpoint": "completions",
        "request": {"model": "small", "prompt": "{{after.1}}"},
        "route": "code",
        "after": [after[0].to_string(), after[1].to_string()],
        "priority": -100,
        "max_attempts": 100,
        "metadata": {"job": "nightly"},
    }));
    let t = read(&b, &registry(), now()).unwrap();
    assert_eq!(t.endpoint, Endpoint::Completions);
    assert_eq!(t.route.as_deref(), Some("code"));
    assert_eq!(t.after, after);
    assert_eq!((t.priority, t.max_attempts), (-100, 100));
    assert_eq!(t.metadata["job"], "nightly");
    assert_eq!(t.deadline, now() + registry().tasks.default_deadline);
    assert_eq!(t.callback, None);
}
