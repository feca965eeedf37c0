//! The models a sim lists and answers as, on both APIs, with what each can do.

use super::*;

/// The ids `GET /v1/models` lists, after checking each entry's OpenAI shape.
async fn openai_models(sim: &Sim) -> Vec<String> {
    let v = get_json(format!("{}/models", sim.base_url())).await;
    assert_eq!(v["object"], "list", "{v}");
    let data = v["data"].as_array().unwrap();
    for m in data {
        assert_eq!(m["object"], "model", "{v}");
        assert_eq!(m["owned_by"], sim.name(), "{v}");
        assert!(m["created"].is_u64(), "{v}");
    }
    data.iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The model a chat or an embeddings answer on `path` says it is, for `body`.
async fn answered_as(sim: &Sim, path: &str, body: Value) -> Value {
    let resp = post(format!("{}{path}", sim.base_url()), body)
        .await
        .unwrap();
    resp.json::<Value>().await.unwrap()["model"].clone()
}

#[tokio::test]
async fn an_openai_sim_lists_and_answers_as_the_models_it_is_given() {
    let sim = Sim::start("alpha").await.unwrap();
    assert_eq!(openai_models(&sim).await, ["sim-model"]);
    let hi = json!([{"role":"user","content":"hi"}]);
    let unnamed = answered_as(&sim, "/chat/completions", json!({"messages":hi})).await;
    assert_eq!(unnamed, "sim-model");
    sim.set_models(&["a", "b", "c"]);
    assert_eq!(openai_models(&sim).await, ["a", "b", "c"]);
    let named = json!({"model":"b","messages":hi});
    assert_eq!(answered_as(&sim, "/chat/completions", named).await, "b");
    let unnamed = answered_as(&sim, "/chat/completions", json!({"messages":hi})).await;
    assert_eq!(
        unnamed, "a",
        "the first model answers a request naming none"
    );
    let embed = answered_as(&sim, "/embeddings", json!({"input":"x"})).await;
    assert_eq!(embed, "a");
    assert_eq!(sim.work_hits(), 4);
}

/// The capabilities `/api/tags` gives each model, by name.
async fn tagged(sim: &Sim) -> Vec<(String, Value)> {
    let tags = get_json(format!("{}/api/tags", sim.root_url())).await;
    tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let name = m["name"].as_str().unwrap().to_owned();
            (name, m["capabilities"].clone())
        })
        .collect()
}

#[tokio::test]
async fn an_ollama_sim_tells_what_each_of_its_models_can_do() {
    let sim = Sim::start_ollama("olla").await.unwrap();
    let plain = json!(["completion", "tools"]);
    assert_eq!(
        tagged(&sim).await,
        [("sim-model:latest".into(), plain.clone())]
    );
    assert_eq!(openai_models(&sim).await, ["sim-model:latest"]);
    sim.set_models(&[
        "qwen3:8b",
        "nomic-embed-text",
        "qwen2.5vl:7b",
        "Llama-Vision",
    ]);
    let expected = [
        ("qwen3:8b", plain.clone()),
        ("nomic-embed-text", json!(["embedding"])),
        ("qwen2.5vl:7b", json!(["completion", "tools", "vision"])),
        ("Llama-Vision", json!(["completion", "tools", "vision"])),
    ];
    let expected: Vec<(String, Value)> = expected
        .into_iter()
        .map(|(n, c)| (n.to_owned(), c))
        .collect();
    assert_eq!(tagged(&sim).await, expected);
    for (name, capabilities) in &expected {
        let show = post(
            format!("{}/api/show", sim.root_url()),
            json!({"model":name}),
        );
        let show: Value = show.await.unwrap().json().await.unwrap();
        assert_eq!(&show["capabilities"], capabilities, "{name}: {show}");
    }
    let ps = get_json(format!("{}/api/ps", sim.root_url())).await;
    assert_eq!(ps["models"].as_array().unwrap().len(), 4);
    assert_eq!(ps["models"][1]["name"], "nomic-embed-text");
    let names: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(openai_models(&sim).await, names);
    let version = get_json(format!("{}/api/version", sim.root_url())).await;
    let version = version["version"].as_str().unwrap();
    assert!(version.starts_with("0.13."), "{version}");
    assert_eq!(sim.work_hits(), 0);
}
