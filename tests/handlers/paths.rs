//! Paths and methods: an unknown path, a known path with a method it does not take, and
//! `/healthz`, which answers everyone.

use axum::body::Body;

use crate::lab::{chat, get, post, request, Lab};

#[tokio::test]
async fn unknown_paths_are_not_found() {
    let t = Lab::in_memory("").await;
    for req in [
        get("/v1/nope"),
        get("/v2/chat/completions"),
        post("/v1/chat/completions/extra", chat("small", "hi")),
        post("/admin/breakers/gpu-box", ""),
        get("/status/events/1"),
    ] {
        t.send(req)
            .await
            .error(404, "not_found", &["no such endpoint"]);
    }
    t.untouched();
}

#[tokio::test]
async fn healthz_answers_everyone() {
    let t = Lab::in_memory("").await;
    for req in [
        get("/healthz"),
        request(
            "GET",
            "/healthz",
            &[("host", "rebind.attacker.example")],
            Body::empty(),
        ),
    ] {
        let a = t.send(req).await;
        assert_eq!(a.status, 200);
        assert_eq!(&a.body[..], b"ok\n");
    }
    t.untouched();
}

#[tokio::test]

async fn a_wrong_method_is_answered_in_the_envelope() {
    let t = Lab::in_memory("").await;
    for (req, allow) in [
        (get("/v1/chat/completions"), "POST"),
        (post("/v1/models", ""), "GET,HEAD"),
        (get("/admin/breakers/gpu-box/open"), "POST"),
    ] {
        let a = t.send(req).await;
        assert_eq!(a.status, 405);
        assert_eq!(a.header("allow"), allow);
        let e = &a.json()["error"];
        assert_eq!(e["type"], "invalid_request_error", "{e}");
    }
    t.untouched();
}

#[tokio::test]
async fn the_root_is_the_dashboard_for_a_browser_and_ollama_s_greeting_for_anything_else() {
    let t = Lab::in_memory("").await;
    let browser = [("accept", "text/html,application/xhtml+xml,*/*;q=0.8")];
    let page = t.send(request("GET", "/", &browser, Body::empty())).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(page.header("cache-control"), "no-cache");
    assert!(std::str::from_utf8(&page.body).unwrap().contains("<html"));
    let head = t.send(request("HEAD", "/", &browser, Body::empty())).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), "text/html; charset=utf-8");
    assert!(head.body.is_empty(), "HEAD has no body");

    for req in [
        get("/"),
        request("GET", "/", &[("accept", "*/*")], Body::empty()),
    ] {
        let a = t.send(req).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.header("content-type"), "text/plain; charset=utf-8");
        assert_eq!(&a.body[..], b"Ollama is running");
    }
    let head = t.send(request("HEAD", "/", &[], Body::empty())).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), "text/plain; charset=utf-8");
    assert!(head.body.is_empty(), "HEAD has no body");
    t.untouched();
}
