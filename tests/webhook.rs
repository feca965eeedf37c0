//! Task callbacks (docs/api.md "Tasks") against real receivers on 127.0.0.1: what arrives on the wire,
//! that its signature verifies with the secret alone, and the plain words for each way an
//! attempt fails. Signatures are checked by an HMAC written out here from SHA-256, not by the
//! code under test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use labrouter::webhook::{self, body_for, deliver, sign, Secret, MAX_BODY};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// A 32-byte key, as a Standard Webhooks `whsec_` value.
const SECRET: &str = "whsec_c2Vjb25kLXNlY3JldC1mb3ItbGFicm91dGVyLXRlc3Q=";
const ID: &str = "tsk_01J9Z:succeeded";
const NOW: i64 = 1_790_000_000;

#[path = "webhook/addresses.rs"]
mod addresses;

/// How a receiver answers.
#[derive(Clone)]
enum Answer {
    Status(u16),
    RedirectTo(String),
    Never,
    /// This status, then a body that never ends.
    Endless(u16),
}

/// One request as the receiver saw it.
struct Seen {
    method: Method,
    headers: HeaderMap,
    body: Bytes,
}

struct Receiver {
    url: reqwest::Url,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    async fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            // Any method: a redirect followed as a GET must be seen too.
            .route("/done", any(receive))
            .with_state((answer, seen.clone()));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let url = format!("http://{addr}/done").parse().unwrap();
        Receiver { url, seen }
    }

    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

async fn receive(
    State((answer, seen)): State<(Answer, Arc<Mutex<Vec<Seen>>>)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    seen.lock().unwrap().push(Seen {
        method,
        headers,
        body,
    });
    match answer {
        Answer::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Answer::RedirectTo(to) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
        Answer::Never => std::future::pending().await,
        Answer::Endless(code) => {
            let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
            let endless =
                futures_util::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
            (
                StatusCode::from_u16(code).unwrap(),
                Body::from_stream(endless),
            )
                .into_response()
        }
    }
}

fn secret() -> Secret {
    Secret::from_env_value(SECRET).unwrap()
}

fn client() -> reqwest::Client {
    webhook::client().unwrap()
}

/// HMAC-SHA256 (RFC 2104) from SHA-256 alone.
fn hmac_sha256_by_hand(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// What a receiver does with a `whsec_` secret: decode, recompute, compare.
fn verifies(whsec: &str, id: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
    let key = STANDARD
        .decode(whsec.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let Some(given) = signature.strip_prefix("v1,") else {
        return false;
    };
    STANDARD.decode(given).ok().as_deref() == Some(&hmac_sha256_by_hand(&key, &signed)[..])
}

fn task() -> Value {
    json!({"id": "tsk_01J9Z", "object": "task", "status": "succeeded",
           "result": {"status": 200, "target": "coder@gpu-box", "body": {"choices": []}},
           "callback": {"url": "http://127.0.0.1/done", "state": "pending", "attempts": 0,
                        "last_error": null}})
}

#[test]
fn the_standard_webhooks_reference_vector_signs_and_verifies_independently() {
    // standard-webhooks, libraries/python/tests/test_webhooks.py, test_sign_function.
    let whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let (id, ts, body) = (
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        r#"{"test": 2432232314}"#,
    );
    let expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    let got = sign(
        &Secret::from_env_value(whsec).unwrap(),
        id,
        ts,
        body.as_bytes(),
    );
    assert_eq!(got, expected);
    assert!(verifies(whsec, id, &ts.to_string(), body.as_bytes(), &got));

    // And by the hmac crate's own verification, for a second opinion.
    use hmac::Mac;
    let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.{body}").as_bytes());
    let raw = STANDARD.decode(&expected[3..]).unwrap();
    mac.verify_slice(&raw).unwrap();
}

#[tokio::test]
async fn a_receiver_gets_the_headers_a_json_body_and_a_signature_that_verifies() {
    let r = Receiver::start(Answer::Status(204)).await;
    let body = body_for(&task());
    let s = secret();
    deliver(&client(), &r.url, ID, &body, Some(&s), NOW)
        .await
        .unwrap();
    // A retry: same id, its own timestamp, its own signature.
    deliver(&client(), &r.url, ID, &body, Some(&s), NOW + 5)
        .await
        .unwrap();

    let seen = r.take();
    assert_eq!(seen.len(), 2, "one request per attempt");
    let mut signatures = Vec::new();
    for (got, ts) in seen.iter().zip([NOW, NOW + 5]) {
        assert_eq!(got.method, Method::POST);
        let h = |name: &str| got.headers.get(name).unwrap().to_str().unwrap().to_owned();
        assert_eq!(h("content-type"), "application/json");
        assert_eq!(h("webhook-id"), ID);
        assert_eq!(h("webhook-timestamp"), ts.to_string());
        let signature = h("webhook-signature");
        assert!(
            verifies(SECRET, ID, &ts.to_string(), &got.body, &signature),
            "{signature}"
        );
        assert!(!verifies(
            SECRET,
            ID,
            &(ts + 1).to_string(),
            &got.body,
            &signature
        ));
        let parsed: Value = serde_json::from_slice(&got.body).unwrap();
        assert_eq!(parsed, task());
        signatures.push(signature);
    }
    assert_ne!(
        signatures[0], signatures[1],
        "a fresh signature per attempt"
    );
}

#[tokio::test]
async fn without_a_secret_there_is_no_signature() {
    let r = Receiver::start(Answer::Status(200)).await;
    deliver(&client(), &r.url, ID, b"{}", None, NOW)
        .await
        .unwrap();
    let seen = r.take();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].headers.get("webhook-signature").is_none());
    assert_eq!(seen[0].headers.get("webhook-id").unwrap(), ID);
    assert_eq!(
        seen[0].headers.get("webhook-timestamp").unwrap(),
        &NOW.to_string()
    );
}

#[tokio::test]
async fn a_500_is_an_error_in_plain_words_without_the_secret() {
    let r = Receiver::start(Answer::Status(500)).await;
    let err = deliver(&client(), &r.url, ID, b"{}", Some(&secret()), NOW)
        .await
        .unwrap_err();
    assert_eq!(err, "HTTP 500");
    assert_eq!(r.count(), 1);
    let r = Receiver::start(Answer::Status(404)).await;
    let err = deliver(&client(), &r.url, ID, b"{}", None, NOW)
        .await
        .unwrap_err();
    assert_eq!(err, "HTTP 404");
}

#[tokio::test]
async fn a_redirect_is_refused_and_its_target_gets_nothing() {
    let elsewhere = Receiver::start(Answer::Status(200)).await;
    let r = Receiver::start(Answer::RedirectTo(elsewhere.url.to_string())).await;
    let err = deliver(&client(), &r.url, ID, b"{}", Some(&secret()), NOW)
        .await
        .unwrap_err();
    assert_eq!(err, "redirect refused (HTTP 302)");
    assert_eq!(r.count(), 1);
    assert_eq!(elsewhere.count(), 0, "the signed body went nowhere else");
}

#[tokio::test(start_paused = true)]
async fn a_receiver_that_never_answers_times_out_after_10s() {
    let r = Receiver::start(Answer::Never).await;
    let started = Instant::now();
    let err = deliver(&client(), &r.url, ID, b"{}", Some(&secret()), NOW)
        .await
        .unwrap_err();
    assert_eq!(err, "timed out after 10s");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(11),
        "{waited:?}"
    );
    assert_eq!(r.count(), 1, "it was sent, and never answered");
}

#[tokio::test]
async fn a_refused_port_is_connection_refused() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url: reqwest::Url = format!("http://{}/done", closed.local_addr().unwrap())
        .parse()
        .unwrap();
    drop(closed);
    let err = deliver(&client(), &url, ID, b"{}", Some(&secret()), NOW)
        .await
        .unwrap_err();
    assert_eq!(err, "connection refused");
}

#[tokio::test]
async fn an_endless_answer_is_not_read_to_its_end() {
    for (code, expected) in [(500, Err("HTTP 500".to_owned())), (200, Ok(()))] {
        let r = Receiver::start(Answer::Endless(code)).await;
        let started = Instant::now();
        let got = tokio::time::timeout(
            Duration::from_secs(5),
            deliver(&client(), &r.url, ID, b"{}", None, NOW),
        )
        .await
        .expect("the status decides; the rest of the answer is not waited for");
        assert_eq!(got, expected);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn a_huge_task_arrives_cut_to_max_body_and_marked_truncated() {
    let r = Receiver::start(Answer::Status(200)).await;
    let mut huge = task();
    huge["result"]["body"] = json!("x".repeat(2 * MAX_BODY));
    let body = body_for(&huge);
    assert!(body.len() <= MAX_BODY);
    deliver(&client(), &r.url, ID, &body, Some(&secret()), NOW)
        .await
        .unwrap();
    let seen = r.take();
    assert!(seen[0].body.len() <= MAX_BODY);
    let got: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(got["truncated"], json!(true));
    assert_eq!(got["result"], Value::Null);
    assert_eq!(got["id"], json!("tsk_01J9Z"));
    let signature = seen[0]
        .headers
        .get("webhook-signature")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(verifies(
        SECRET,
        ID,
        &NOW.to_string(),
        &seen[0].body,
        signature
    ));
}

#[tokio::test]
async fn an_id_that_could_be_read_two_ways_is_refused_before_sending() {
    let r = Receiver::start(Answer::Status(200)).await;
    for bad in ["tsk.1:succeeded", "", "tsk_1\n:x"] {
        assert!(deliver(&client(), &r.url, bad, b"{}", None, NOW)
            .await
            .is_err());
    }
    assert_eq!(r.count(), 0);
}
