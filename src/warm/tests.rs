//! What the machines' lists of loaded models are read as.

use super::{ollama_ps, router_models, same_model};

#[test]
fn ollama_ps_lists_each_loaded_models_names() {
    let body = br#"{"models":[{"name":"qwen3:8b","model":"qwen3:8b","size_vram":1},{"name":"llama3.2:latest","model":"llama3.2:latest"}]}"#;
    let names = ollama_ps(body).unwrap();
    assert!(names.iter().any(|n| n == "qwen3:8b"));
    assert!(names.iter().any(|n| n == "llama3.2:latest"));
    assert_eq!(ollama_ps(br#"{"models":[]}"#), Some(vec![]));
}

#[test]
fn an_answer_that_is_not_a_list_changes_nothing() {
    assert_eq!(ollama_ps(b"<html>"), None);
    assert_eq!(ollama_ps(br#"{"models": 3}"#), None);
    assert_eq!(router_models(br#"{"error": "x"}"#), None);
}

#[test]
fn llama_server_router_mode_says_loaded_as_a_word_or_a_value() {
    let body = br#"{"data":[
        {"id":"a","status":{"value":"loaded"}},
        {"id":"b","status":{"value":"unloaded"}},
        {"id":"c","status":"loaded"},
        {"id":"d","status":{"value":"loading"}}]}"#;
    assert_eq!(
        router_models(body),
        Some(vec!["a".to_string(), "c".to_string()])
    );
}

#[test]
fn a_server_that_gives_no_status_says_nothing_about_warmth() {
    let body = br#"{"data":[{"id":"a"},{"id":"b"}]}"#;
    assert_eq!(router_models(body), None);
}

#[test]
fn ollamas_latest_tag_is_implied() {
    assert!(same_model("llama3.2:latest", "llama3.2"));
    assert!(same_model("llama3.2", "llama3.2:latest"));
    assert!(same_model("qwen3:8b", "qwen3:8b"));
    assert!(!same_model("qwen3:8b", "qwen3:14b"));
    assert!(!same_model("qwen3", "qwen3:8b"));
}
