//! Asking simulated machines on 127.0.0.1: what each is and lists, counted on the wire, and
//! the bounds (time on tokio's paused clock, size, count) that make an answer a refusal.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::sim::{Fault, Sim};

fn asker() -> Asker {
    Asker::new(None).unwrap()
}

#[tokio::test]
async fn an_ollama_server_says_its_version_and_lists_its_tags() {
    let sim = Sim::start_ollama("box2").await.unwrap();
    sim.set_models(&["qwen3-coder:30b", "nomic-embed-text:latest"]);
    let found = asker().identify(&sim.root_url(), None).await.unwrap();
    assert_eq!(found.api, Api::Ollama);
    assert_eq!(found.version.as_deref(), Some("0.13.5"));
    let names: Vec<(&str, bool)> = found
        .models
        .iter()
        .map(|m| (m.name.as_str(), m.embed_only))
        .collect();
    assert_eq!(
        names,
        [
            ("qwen3-coder:30b", false),
            ("nomic-embed-text:latest", true)
        ]
    );
    assert_eq!(
        (
            sim.hits("/api/version"),
            sim.hits("/api/tags"),
            sim.hits("/v1/models")
        ),
        (1, 1, 0)
    );
    assert_eq!(sim.work_hits(), 0);
}

#[tokio::test]
async fn an_openai_server_is_asked_for_its_models_after_api_version_fails() {
    let sim = Sim::start("cpu").await.unwrap();
    sim.set_models(&["qwen3:4b"]);
    let found = asker().identify(&sim.root_url(), None).await.unwrap();
    assert_eq!((found.api, found.version), (Api::OpenAi, None));
    assert_eq!(found.models[0].name, "qwen3:4b");
    assert_eq!((sim.hits("/api/version"), sim.hits("/v1/models")), (1, 1));
    // Told it speaks OpenAI's API, it is not asked for a version.
    asker()
        .identify(&sim.root_url(), Some(Api::OpenAi))
        .await
        .unwrap();
    assert_eq!((sim.hits("/api/version"), sim.hits("/v1/models")), (1, 2));
}

#[tokio::test]
async fn a_machine_that_refuses_connections_does_not_answer() {
    let sim = Sim::start_ollama("off").await.unwrap();
    sim.set(Fault::Refuse);
    let err = asker().identify(&sim.root_url(), None).await.unwrap_err();
    assert!(err.starts_with("cannot connect: "), "{err}");
    assert!(!err.contains("127.0.0.1"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_machine_that_hangs_is_given_up_on_after_five_seconds() {
    let sim = Sim::start_ollama("frozen").await.unwrap();
    sim.set(Fault::Hang);
    let started = tokio::time::Instant::now();
    let err = asker().identify(&sim.root_url(), None).await.unwrap_err();
    assert_eq!(err, "no answer within 5s");
    assert_eq!(started.elapsed(), ASK_WITHIN);
    assert_eq!(sim.hits("/api/version"), 1);
}

#[tokio::test]
async fn more_models_than_the_bound_are_refused() {
    let sim = Sim::start("many").await.unwrap();
    let names: Vec<String> = (0..=MAX_MODELS).map(|i| format!("m{i}")).collect();
    sim.set_models(&names.iter().map(String::as_str).collect::<Vec<_>>());
    let err = asker().identify(&sim.root_url(), None).await.unwrap_err();
    assert_eq!(
        err,
        "GET /v1/models: lists 501 models, more than the 500 this reads"
    );
}

/// The head of the first request a test server read.
type FirstHead = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// A server on 127.0.0.1 that answers every request with `status` and `body` (with or
/// without a content-length), one per connection, for the rest of the test; it keeps the
/// head of the first request it read.
async fn answering(status: u16, body: Vec<u8>, declare_length: bool) -> (String, FirstHead) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let first = FirstHead::default();
    let kept = first.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = vec![0u8; 4096];
            let n = conn.read(&mut head).await.unwrap_or(0);
            let seen = String::from_utf8_lossy(&head[..n]).into_owned();
            kept.lock().unwrap().get_or_insert(seen);
            let length = match declare_length {
                true => format!("content-length: {}\r\n", body.len()),
                false => String::new(),
            };
            let head = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n");
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(&body).await;
        }
    });
    (root, first)
}

#[tokio::test]
async fn the_key_goes_as_a_bearer_token_and_never_into_an_error() {
    let (root, head) = answering(500, b"{}".to_vec(), true).await;
    let asker = Asker::with_key(Some("k-secret-123".to_owned())).unwrap();
    let err = asker.identify(&root, Some(Api::OpenAi)).await.unwrap_err();
    assert_eq!(err, "GET /v1/models answered HTTP 500");
    let head = head
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        head.contains("authorization: bearer k-secret-123\r\n"),
        "{head}"
    );
}

#[tokio::test]
async fn an_answer_larger_than_4_mib_is_refused_unread() {
    let mut big = br#"{"data":[{"id":"a"}],"pad":""#.to_vec();
    big.resize(MAX_ANSWER + 10, b' ');
    for declared in [true, false] {
        let (root, _served) = answering(200, big.clone(), declared).await;
        let err = asker()
            .identify(&root, Some(Api::OpenAi))
            .await
            .unwrap_err();
        assert_eq!(
            err, "GET /v1/models: answer larger than 4 MiB",
            "declared: {declared}"
        );
    }
}

#[tokio::test]
async fn a_list_that_is_not_a_list_is_refused_with_what_was_expected() {
    let (root, _served) = answering(200, br#"{"models": "none"}"#.to_vec(), true).await;
    let err = asker()
        .identify(&root, Some(Api::Ollama))
        .await
        .unwrap_err();
    assert_eq!(err, r#"GET /api/tags: expected JSON with a "models" list"#);
    let (root, _served) = answering(401, b"{}".to_vec(), true).await;
    let err = asker()
        .identify(&root, Some(Api::OpenAi))
        .await
        .unwrap_err();
    assert!(
        err.starts_with("GET /v1/models answered HTTP 401 (it wants a key"),
        "{err}"
    );
}

#[test]
fn list_names_are_checked_and_duplicates_dropped() {
    let v = serde_json::json!({"data": [{"id": "a"}, {"id": "a"}, {"id": "b"}]});
    let names: Vec<String> = parse_list(&v, Api::OpenAi)
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    for bad in [
        serde_json::json!({"data": [{"id": ""}]}),
        serde_json::json!({"data": [{"id": "a\nb"}]}),
        serde_json::json!({"data": [{"id": "x".repeat(MAX_NAME + 1)}]}),
        serde_json::json!({"data": [{"name": 3}]}),
    ] {
        assert!(parse_list(&bad, Api::OpenAi).is_err(), "{bad}");
    }
}
