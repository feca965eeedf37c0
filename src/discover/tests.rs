//! What a machine's model list is read as.

use super::listed;

#[test]
fn ollama_tags_and_openai_models_are_both_read() {
    let ollama =
        br#"{"models":[{"name":"llama3.2:3b","model":"llama3.2:3b"},{"name":"qwen3:8b"}]}"#;
    assert_eq!(listed(ollama).unwrap(), ["llama3.2:3b", "qwen3:8b"]);
    let openai = br#"{"object":"list","data":[{"id":"gpt-oss-20b"},{"id":"bge-m3"}]}"#;
    assert_eq!(listed(openai).unwrap(), ["gpt-oss-20b", "bge-m3"]);
    assert_eq!(listed(br#"{"data":[]}"#).unwrap(), Vec::<String>::new());
}

#[test]
fn unusable_names_are_left_out_and_each_name_is_kept_once() {
    let long = "x".repeat(201);
    let body = serde_json::json!({"data": [
        {"id": "ok"}, {"id": ""}, {"id": "two words"}, {"id": "a@b"}, {"id": long},
        {"id": "bell\u{7}"}, {"id": 3}, {"id": "ok"}, {"name": "not-an-id"}
    ]});
    assert_eq!(listed(body.to_string().as_bytes()).unwrap(), ["ok"]);
}

#[test]
fn an_answer_that_is_no_list_changes_nothing() {
    assert_eq!(listed(b"<html>"), None);
    assert_eq!(listed(br#"{"models": {}}"#), None);
    assert_eq!(listed(br#"{"error": "no"}"#), None);
}

#[test]
fn a_list_is_bounded() {
    let data: Vec<_> = (0..5000)
        .map(|i| serde_json::json!({"id": format!("m{i}")}))
        .collect();
    let body = serde_json::json!({ "data": data });
    assert_eq!(listed(body.to_string().as_bytes()).unwrap().len(), 1024);
}
