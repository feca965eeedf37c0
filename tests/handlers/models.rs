//! What a client learns of the names it may pick: `/v1/models`, one entry of it by id
//! (`/v1/models/{id}`, the `openai` libraries' `models.retrieve`), and the digests of
//! `/api/tags`, which change when a reload changes what a name maps to.

use serde_json::{json, Value};

use crate::lab::{from_loopback, get, post, request, Answer, Lab};

#[tokio::test]
async fn models_lists_auto_routes_and_models_in_openais_shape() {
    let t = Lab::in_memory("").await;
    let a = t.send(get("/v1/models")).await;
    assert_eq!(a.status, 200);
    let v = a.json();
    assert_eq!(v["object"], "list");
    let data = v["data"].as_array().expect("data");
    let ids: Vec<&str> = data.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "auto",
            "code",
            "vision",
            "chat",
            "coder-gpu",
            "coder-cpu",
            "vision-gpu",
            "small"
        ]
    );
    assert!(data.iter().all(|m| m["object"] == "model"), "{v}");
    // OpenAI's `created`, Unix seconds: the service's start.
    let created = t.svc.boot_ms() / 1000;
    assert_eq!(
        data[0],
        json!({"id": "auto", "entry": "route", "kind": "chat", "object": "model", "owned_by": "labrouter",
               "created": created})
    );
    assert_eq!(
        data[1],
        json!({"id": "code", "entry": "route", "kind": "chat", "object": "model", "owned_by": "labrouter",
               "created": created,
               "chain": ["coder-gpu@gpu-box", "coder-cpu@ubuntu-box", "small@local"]})
    );
    assert_eq!(
        data[4],
        json!({"id": "coder-gpu", "entry": "model", "kind": "chat", "object": "model", "owned_by": "gpu-box",
               "created": created,
               "backend": "qwen3-coder:30b", "target": "coder-gpu@gpu-box"})
    );
    assert_eq!(data[7]["owned_by"], "local");
    assert_eq!(data[7]["target"], "small@local");
    // The list is the registry's, not the machines': none was asked.
    t.untouched();
}

#[tokio::test]
async fn one_model_is_retrieved_by_any_name_a_request_may_use() {
    let t = Lab::in_memory("").await;
    let list = t.send(get("/v1/models")).await.json();
    let entry = |id: &str| {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap()
            .clone()
    };
    for (asked, id) in [
        ("auto", "auto"),
        ("code", "code"),
        ("small", "small"),
        // A backend name that names one model: that model's entry.
        ("qwen3:4b", "small"),
        // Ollama's `:latest` tag, as the Ollama side reads it.
        ("coder-gpu:latest", "coder-gpu"),
        ("auto:latest", "auto"),
    ] {
        let a = t.send(get(&format!("/v1/models/{asked}"))).await;
        assert_eq!(a.status, 200, "{asked}: {:?}", a.body);
        let v = a.json();
        assert_eq!(v, entry(id), "{asked}");
        // OpenAI's shape.
        assert_eq!(v["object"], "model");
        assert!(v["created"].is_u64() && v["owned_by"].is_string(), "{v}");
    }
    // A name with a slash (a Hugging Face id), sent whole or escaped: looked up, not lost.
    for path in [
        "/v1/models/meta-llama/Llama-3",
        "/v1/models/meta-llama%2FLlama-3",
    ] {
        t.send(get(path))
            .await
            .error(404, "model_not_found", &["'meta-llama/Llama-3'"]);
    }
    // Unknown: 404 in OpenAI's envelope, saying which names would do.
    let msg = t.send(get("/v1/models/nope")).await.error(
        404,
        "model_not_found",
        &["'nope' does not exist", "code", "small"],
    );
    assert!(!msg.contains("qwen"), "{msg}");
    // Answered from the registry: no machine was asked.
    t.untouched();
}

#[tokio::test]
async fn trusted_networks_may_retrieve_a_model_without_a_key() {
    // SAFETY of set_var: this variable is read by this test alone.
    std::env::set_var("LABROUTER_HANDLERS_KEYS_RETRIEVE", "k-one");
    let t = Lab::in_memory(
        "  api_keys_env: LABROUTER_HANDLERS_KEYS_RETRIEVE\n  trusted_networks: [\"127.0.0.0/8\"]\n",
    )
    .await;
    let a = t.send(from_loopback(get("/v1/models/code"))).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.json()["id"], "code");
    // Elsewhere, a key as for /v1/models.
    t.send(get("/v1/models/code"))
        .await
        .error(401, "invalid_api_key", &["Authorization: Bearer"]);
    let a = t
        .send(request(
            "GET",
            "/v1/models/code",
            &[("authorization", "Bearer k-one")],
            "",
        ))
        .await;
    assert_eq!(a.status, 200);
    t.untouched();
}

/// Each name's digest on `/api/tags`.
fn digests(a: Answer) -> Value {
    let mut out = serde_json::Map::new();
    for m in a.json()["models"].as_array().unwrap() {
        out.insert(m["name"].as_str().unwrap().to_string(), m["digest"].clone());
    }
    Value::Object(out)
}

#[tokio::test]
async fn a_digest_changes_when_a_reload_changes_what_its_name_maps_to_and_only_then() {
    let t = Lab::from_file("").await;
    let path = t.registry_path();
    let good = t.yaml("");
    let reload = |yaml: String| {
        std::fs::write(&path, yaml).unwrap();
        t.send(post("/admin/reload", ""))
    };
    let before = digests(t.send(get("/api/tags")).await);
    // Asking again, nothing changed: the same digests.
    assert_eq!(digests(t.send(get("/api/tags")).await), before);

    // coder-gpu moves to another machine: its names and the route holding it change.
    const HOME: &str = "coder-gpu: { machine: gpu-box,";
    assert!(good.contains(HOME));
    let moved = good.replace(HOME, "coder-gpu: { machine: ubuntu-box,");
    assert_eq!(reload(moved).await.status, 200);
    let after = digests(t.send(get("/api/tags")).await);
    for name in [
        "coder-gpu:latest",
        "qwen3-coder:30b",
        "code:latest",
        "auto:latest",
    ] {
        assert_ne!(after[name], before[name], "{name}");
    }
    for name in [
        "small:latest",
        "chat:latest",
        "coder-cpu:latest",
        "vision:latest",
    ] {
        assert_eq!(after[name], before[name], "{name}");
    }

    // Back home: the digest it had (a hash of what it maps to, not of when).
    assert_eq!(reload(good.clone()).await.status, 200);
    assert_eq!(digests(t.send(get("/api/tags")).await), before);

    // Another backend name on the same machine: changed again.
    let renamed = good.replace("name: \"qwen3-coder:30b\" }", "name: \"qwen3-coder:32b\" }");
    assert_ne!(renamed, good);
    assert_eq!(reload(renamed).await.status, 200);
    let after = digests(t.send(get("/api/tags")).await);
    assert_ne!(after["coder-gpu:latest"], before["coder-gpu:latest"]);
    assert_ne!(after["code:latest"], before["code:latest"]);
    assert_eq!(after["small:latest"], before["small:latest"]);

    // A reload that changes nothing about coder-gpu (a new route elsewhere, a new timeout):
    // its digest stays, though the registry's version moved.
    let other = good
        .replace(
            "routes:\n",
            "routes:\n  - name: docs\n    keywords: [docs]\n    chain: [small]\n",
        )
        .replace("total: 10m", "total: 11m");
    let a = reload(other).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let r = &a.json()["reloaded"];
    assert_ne!(r["from_version"], r["to_version"]);
    let after = digests(t.send(get("/api/tags")).await);
    for name in [
        "coder-gpu:latest",
        "qwen3-coder:30b",
        "code:latest",
        "small:latest",
    ] {
        assert_eq!(after[name], before[name], "{name}");
    }
    assert!(after["docs:latest"].is_string());
    // auto reads every route's keywords: a new route is a change for it.
    assert_ne!(after["auto:latest"], before["auto:latest"]);
}

#[tokio::test]
async fn both_model_lists_say_each_names_kind_and_capabilities_follow_it() {
    let t = Lab::from_file("").await;
    let kinds = t.yaml("").replace(
        "routes:\n",
        "  bge: { machine: gpu-box, name: bge-m3, kind: embed }\n  \
             sdxl: { machine: gpu-box, name: sdxl-turbo, kind: image }\n\
             routes:\n  - name: draw\n    chain: [sdxl]\n",
    );
    std::fs::write(t.registry_path(), kinds).unwrap();
    let a = t.send(post("/admin/reload", "")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    let list = t.send(get("/v1/models")).await.json();
    let of = |id: &str| {
        let e = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {list}"));
        (e["entry"].clone(), e["kind"].clone())
    };
    assert_eq!(of("auto"), (json!("route"), json!("chat")));
    assert_eq!(of("code"), (json!("route"), json!("chat")));
    assert_eq!(of("draw"), (json!("route"), json!("image")));
    assert_eq!(of("sdxl"), (json!("model"), json!("image")));
    assert_eq!(of("bge"), (json!("model"), json!("embed")));
    // A model written without a kind is listed as chat.
    assert_eq!(of("small"), (json!("model"), json!("chat")));
    assert_eq!(
        t.send(get("/v1/models/bge-m3")).await.json()["kind"],
        "embed"
    );

    let tags = t.send(get("/api/tags")).await.json();
    let tag = |name: &str| {
        tags["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {tags}"))
            .clone()
    };
    assert_eq!(tag("bge:latest")["kind"], "embed");
    assert_eq!(tag("bge:latest")["capabilities"], json!(["embedding"]));
    assert_eq!(tag("draw:latest")["kind"], "image");
    assert_eq!(tag("sdxl:latest")["capabilities"], json!([]));
    assert_eq!(tag("code:latest")["kind"], "chat");
    let code = tag("code:latest")["capabilities"].clone();
    assert!(
        code.as_array().unwrap().contains(&json!("completion")),
        "{code}"
    );
}
