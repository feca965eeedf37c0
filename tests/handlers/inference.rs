//! The OpenAI endpoints: bad bodies, bad headers, unknown models, bodies too large, broken
//! or silent, each answered by the router before any machine (`/v1/models`: `models.rs`).

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use futures_util::{stream, StreamExt};
use serde_json::json;

use crate::lab::{chat, post, request, Lab};

/// The lab's `server.max_body` (64KiB, from `tests/e2e/support.rs`).
const MAX_BODY: usize = 64 * 1024;

/// A chat body of exactly `len` bytes naming a model that does not exist.
fn chat_of_len(len: usize) -> String {
    let empty = chat("nope", "");
    let body = chat("nope", &"x".repeat(len - empty.len()));
    assert_eq!(body.len(), len);
    body
}

#[tokio::test]
async fn a_good_request_reaches_its_machine() {
    // The control for every `untouched` below: this path does count the wire.
    let t = Lab::in_memory("").await;
    let a = t
        .send(post("/v1/chat/completions", chat("small", "hello")))
        .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.header("x-labrouter-target"), "small@local");
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test]
async fn bodies_that_are_not_json_objects_are_invalid_json() {
    let t = Lab::in_memory("").await;
    let not_an_object = "request body is not a valid JSON object";
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "/v1/chat/completions",
            "{not json",
            &[not_an_object, "line 1 column 2"],
        ),
        (
            "/v1/chat/completions",
            "[1, 2]",
            &[not_an_object, "expected '{' first"],
        ),
        (
            "/v1/chat/completions",
            "",
            &[not_an_object, "expected '{' first"],
        ),
        (
            "/v1/chat/completions",
            r#"{"model": "code"}"#,
            &["'messages' is required for /v1/chat/completions"],
        ),
        (
            "/v1/chat/completions",
            r#"{"model": 7, "messages": []}"#,
            &["'model' must be a string, got 7"],
        ),
        ("/v1/completions", r#"{"prompt": "#, &[not_an_object, "EOF"]),
        (
            "/v1/embeddings",
            "null",
            &[not_an_object, "expected '{' first"],
        ),
    ];
    for &(path, body, says) in cases {
        t.send(post(path, body))
            .await
            .error(400, "invalid_json", says);
    }
    t.untouched();
}

#[tokio::test]
async fn a_bad_wait_header_is_invalid_header() {
    let t = Lab::in_memory("").await;
    for (value, says) in [
        ("soon", "expected a duration like"),
        ("-5s", "expected a duration like"),
        ("", "expected a duration like"),
        ("2d", "at most"),
        ("99999999999999999999s", "at most"),
    ] {
        let req = request(
            "POST",
            "/v1/chat/completions",
            &[("x-labrouter-wait", value)],
            chat("small", "hello"),
        );
        let msg = t
            .send(req)
            .await
            .error(400, "invalid_header", &["x-labrouter-wait", says]);
        assert!(msg.contains(&format!("'{value}'")), "{msg}");
    }
    t.untouched();
    // The same request with a wait it may have is served.
    let req = request(
        "POST",
        "/v1/chat/completions",
        &[("x-labrouter-wait", "5s")],
        chat("small", "hello"),
    );
    assert_eq!(t.send(req).await.status, 200);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test]
async fn unknown_models_and_routes_are_model_not_found() {
    let t = Lab::in_memory("").await;
    let cases: &[(&str, String)] = &[
        ("/v1/chat/completions", chat("gpt-4o", "hello")),
        (
            "/v1/completions",
            json!({"model": "gpt-4o", "prompt": "hi"}).to_string(),
        ),
        (
            "/v1/embeddings",
            json!({"model": "gpt-4o", "input": "hi"}).to_string(),
        ),
    ];
    for (path, body) in cases {
        t.send(post(path, body.clone())).await.error(
            400,
            "model_not_found",
            &[
                "'gpt-4o' does not exist",
                "code",
                "chat",
                "coder-gpu",
                "small",
            ],
        );
    }
    let req = request(
        "POST",
        "/v1/chat/completions",
        &[("x-labrouter-route", "nope")],
        chat("auto", "hello"),
    );
    t.send(req).await.error(
        400,
        "model_not_found",
        &["route 'nope' does not exist", "code, vision, chat"],
    );
    t.untouched();
}

#[tokio::test]
async fn embeddings_without_a_named_model_are_model_required() {
    let t = Lab::in_memory("").await;
    for body in [
        json!({"model": "auto", "input": "hi"}),
        json!({"input": "hi"}),
        json!({"model": null, "input": "hi"}),
    ] {
        t.send(post("/v1/embeddings", body.to_string()))
            .await
            .error(
                400,
                "model_required",
                &[
                    "embeddings need a model",
                    "'auto'",
                    "coder-gpu, coder-cpu, vision-gpu, small",
                ],
            );
    }
    t.untouched();
    let named = json!({"model": "small", "input": "hi"}).to_string();
    assert_eq!(t.send(post("/v1/embeddings", named)).await.status, 200);
    assert_eq!(t.work(), (0, 0, 1));
}

#[tokio::test]

async fn embeddings_with_an_empty_model_are_model_required() {
    let t = Lab::in_memory("").await;
    let body = json!({"model": "", "input": "hi"}).to_string();
    t.send(post("/v1/embeddings", body)).await.error(
        400,
        "model_required",
        &["embeddings need a model"],
    );
    t.untouched();
}

#[tokio::test]
async fn a_body_over_max_body_is_request_too_large() {
    let t = Lab::in_memory("").await;
    let big = chat("small", &"x".repeat(MAX_BODY));
    let len = big.len().to_string();
    let frames = |body: String| {
        let chunks: Vec<Result<Bytes, io::Error>> = body
            .into_bytes()
            .chunks(1024)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        Body::from_stream(stream::iter(chunks))
    };
    let chat_path = "/v1/chat/completions";
    let cases = [
        // Declared: refused on the Content-Length alone.
        (
            chat_path,
            vec![("content-length", len.as_str())],
            Body::from(big.clone()),
        ),
        (
            chat_path,
            vec![("content-length", "10737418240")],
            Body::from("{}"),
        ),
        // Undeclared: refused as the bytes pass the limit, in one frame or many.
        (chat_path, vec![], Body::from(big.clone())),
        (chat_path, vec![], frames(big.clone())),
        ("/v1/embeddings", vec![], frames(big.clone())),
        ("/v1/completions", vec![], Body::from(big.clone())),
        // Declared short, sent long: the bytes count, not the header.
        (
            chat_path,
            vec![("content-length", "10")],
            frames(big.clone()),
        ),
    ];
    for (path, headers, body) in cases {
        t.send(request("POST", path, &headers, body)).await.error(
            413,
            "request_too_large",
            &["larger than server.max_body", "65536 bytes"],
        );
    }
    t.untouched();
}

#[tokio::test]
async fn a_body_of_exactly_max_body_is_read() {
    let t = Lab::in_memory("").await;
    // Read whole and parsed: its model is then what is wrong with it.
    t.send(post("/v1/chat/completions", chat_of_len(MAX_BODY)))
        .await
        .error(400, "model_not_found", &["'nope'"]);
    let over = chat_of_len(MAX_BODY + 1);
    let n = over.len().to_string();
    let req = request(
        "POST",
        "/v1/chat/completions",
        &[("content-length", n.as_str())],
        over,
    );
    t.send(req)
        .await
        .error(413, "request_too_large", &["server.max_body"]);
    t.untouched();
}

#[tokio::test]
async fn a_body_that_breaks_is_unreadable_body() {
    // Without a socket, a body stream that fails stands for a client's connection dying
    // in the middle of its body.
    let t = Lab::in_memory("").await;
    let frames: Vec<Result<Bytes, io::Error>> = vec![
        Ok(Bytes::from_static(b"{\"model\": \"small\", ")),
        Err(io::Error::other("connection reset by peer")),
    ];
    let req = request(
        "POST",
        "/v1/chat/completions",
        &[],
        Body::from_stream(stream::iter(frames)),
    );
    t.send(req).await.error(
        400,
        "unreadable_body",
        &[
            "could not read the request body",
            "connection reset by peer",
        ],
    );
    t.untouched();
}

#[tokio::test]
async fn a_body_that_stalls_is_request_timeout() {
    let t = Lab::in_memory("  idle_timeout: 200ms\n").await;
    let first = stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"{\"model\": "))]);
    let silent = first.chain(stream::pending());
    let req = request(
        "POST",
        "/v1/chat/completions",
        &[],
        Body::from_stream(silent),
    );
    let a = tokio::time::timeout(Duration::from_secs(10), t.send(req))
        .await
        .expect("answered within the idle timeout, not left hanging");
    a.error(
        408,
        "request_timeout",
        &["request body stalled for", "server.idle_timeout"],
    );
    t.untouched();
}
