//! Unit tests of [`capabilities`] and the reports it reads.

use serde_json::json;

use super::*;

/// A lab with an Ollama server, an OpenAI-compatible one, an embedding model named as one
/// and a vision route.
fn lab() -> Registry {
    let yaml = r#"machines:
  gpu-box: { url: "http://127.0.0.1:9001/v1", api: ollama }
  ubuntu-box: { url: "http://127.0.0.1:9002/v1" }
models:
  coder-gpu: { machine: gpu-box, name: "qwen3-coder:30b" }
  coder-cpu: { machine: ubuntu-box, name: "qwen3-coder:30b-q4" }
  vision-cpu: { machine: ubuntu-box, name: "qwen2.5vl:7b" }
  embedder: { machine: ubuntu-box, name: "nomic-Embed-text:v1.5" }
  vectors: { machine: ubuntu-box, name: "bge-m3" }
routes:
  - name: code
    chain: [coder-gpu, coder-cpu]
  - name: vision
    images: true
    chain: [vision-cpu]
"#;
    Registry::parse(yaml, "test.yaml").unwrap()
}

const CODER_GPU: ModelId = ModelId(0);
const CODER_CPU: ModelId = ModelId(1);
const VISION_CPU: ModelId = ModelId(2);
const EMBEDDER: ModelId = ModelId(3);
const VECTORS: ModelId = ModelId(4);

#[test]
fn without_a_report_a_chat_model_completes_and_calls_tools_and_sees_in_an_image_route() {
    let reg = lab();
    assert_eq!(capabilities(CODER_CPU, &reg, None), ["completion", "tools"]);
    assert_eq!(
        capabilities(VISION_CPU, &reg, None),
        ["completion", "tools", "vision"]
    );
    // An Ollama server that did not answer: what labrouter knows, the same way.
    assert_eq!(capabilities(CODER_GPU, &reg, None), ["completion", "tools"]);
    // A list that does not name the model says nothing.
    let list = json!({"data": [{"id": "other"}]});
    assert_eq!(Report::of_list(&list, "qwen3-coder:30b-q4"), None);
}

#[test]
fn without_a_report_a_model_named_for_embedding_only_embeds() {
    let reg = lab();
    assert_eq!(capabilities(EMBEDDER, &reg, None), ["embedding"]);
    // `bge-m3` says nothing in its name: a chat model, until its machine says otherwise.
    assert_eq!(capabilities(VECTORS, &reg, None), ["completion", "tools"]);
}

#[test]
fn what_an_openai_machine_states_decides_over_the_name() {
    let reg = lab();
    let list = json!({"object": "list", "data": [
        {"id": "bge-m3", "object": "model", "capabilities": ["embed"]},
        {"id": "nomic-Embed-text:v1.5", "type": "llm"},
        {"id": "qwen3-coder:30b-q4", "type": "vlm", "max_model_len": 32768},
        {"id": "qwen2.5vl:7b", "meta": {"n_ctx_train": 4096}},
    ]});
    let report = |backend: &str| Report::of_list(&list, backend).unwrap();
    let vectors = report("bge-m3");
    assert_eq!(capabilities(VECTORS, &reg, Some(&vectors)), ["embedding"]);
    let embedder = report("nomic-Embed-text:v1.5");
    assert_eq!(
        capabilities(EMBEDDER, &reg, Some(&embedder)),
        ["completion", "tools"]
    );
    let coder = report("qwen3-coder:30b-q4");
    assert_eq!(coder.context, Some(32768));
    assert_eq!(
        capabilities(CODER_CPU, &reg, Some(&coder)),
        ["completion", "tools", "vision"]
    );
    // llama-server's entry states no kind: the name and the routes decide, as without one.
    let vision = report("qwen2.5vl:7b");
    assert_eq!(vision.context, Some(4096));
    assert_eq!(
        capabilities(VISION_CPU, &reg, Some(&vision)),
        ["completion", "tools", "vision"]
    );
}

#[test]
fn an_ollama_machines_card_is_taken_as_it_says() {
    let reg = lab();
    let card = json!({"capabilities": ["completion", "thinking", "image-out"],
        "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}});
    let report = Report::of_card(&card);
    assert_eq!(report.context, Some(40960));
    assert_eq!(
        capabilities(CODER_GPU, &reg, Some(&report)),
        ["completion", "thinking", "image-out"]
    );
    // An older Ollama's card without capabilities: what labrouter knows.
    let bare = Report::of_card(&json!({"model_info": {}}));
    assert_eq!(
        capabilities(CODER_GPU, &reg, Some(&bare)),
        ["completion", "tools"]
    );
}

#[test]
fn a_report_is_bounded_whatever_the_machine_sends() {
    let many: Vec<String> = (0..10_000).map(|i| format!("word{i}")).collect();
    let long = "x".repeat(100_000);
    let mut words = many;
    words.push(long);
    let card = json!({ "capabilities": words });
    let report = Report::of_card(&card);
    assert!(report.words.len() <= WORDS_MAX, "{}", report.words.len());
    let embeds = vec!["embed"; 10_000];
    let list = json!({"data": [{"id": "m", "capabilities": embeds}]});
    assert_eq!(Report::of_list(&list, "m").unwrap().words, ["embedding"]);
}

#[test]
fn auto_completes_and_sees_when_a_route_takes_images() {
    assert_eq!(auto_capabilities(&lab()), ["completion", "tools", "vision"]);
}
