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
