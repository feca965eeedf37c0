//! Task callbacks (docs/api.md "Tasks", "Callbacks"), received by real servers on 127.0.0.1: what
//! arrives and when, that the signature verifies with the secret alone (HMAC-SHA256
//! recomputed here), retries until a receiver comes back (across a restart too), and that a
//! slow or dead receiver delays no one else.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use labrouter::sim::Fault;
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::lab::Lab;

/// A receiver's answer that never comes.
const HANG: u16 = 0;

/// One callback as a receiver saw it.
#[derive(Clone)]
pub(crate) struct Seen {
    pub(crate) at: Instant,
    headers: HeaderMap,
    body: Bytes,
    answered: u16,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A callback receiver whose answer can change; it keeps what it saw.
#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) url: String,
    answer: Arc<AtomicU16>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    pub(crate) async fn start(answer: u16) -> Receiver {
        Receiver::on(TcpListener::bind("127.0.0.1:0").await.unwrap(), answer)
    }

    /// A receiver on a port nothing listened on before (no pooled connection to it).
    async fn on_port(port: u16, answer: u16) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        Receiver::on(listener, answer)
    }

    fn on(listener: TcpListener, answer: u16) -> Receiver {
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let r = Receiver {
            url,
            answer: Arc::new(AtomicU16::new(answer)),
            seen: Arc::default(),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        r
    }

    fn set(&self, answer: u16) {
        self.answer.store(answer, Ordering::SeqCst);
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn delivered(&self) -> usize {
        self.seen()
            .iter()
            .filter(|s| (200..300).contains(&s.answered))
            .count()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let answered = r.answer.load(Ordering::SeqCst);
    r.seen.lock().unwrap().push(Seen {
        at: Instant::now(),
        headers,
        body,
        answered,
    });
    if answered == HANG {
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(answered).unwrap()
}

/// A loopback port nothing listens on (connections to it are refused).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Lets paused time pass in small steps until `done` (at most `limit`).
pub(crate) async fn until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let step = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    while !done() {
        assert!(waited < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(step).await;
        waited += step;
    }
}

/// The task once its callback is no longer pending (at most `limit` of paused time).
pub(crate) async fn settled(lab: &Lab, id: &str, limit: Duration) -> Value {
    let step = Duration::from_millis(100);
    let mut waited = Duration::ZERO;
    loop {
        let t = lab.task(id).await;
        if t["callback"]["state"] != "pending" {
            return t;
        }
        assert!(
            waited < limit,
            "callback still pending after {limit:?}: {t}"
        );
        tokio::time::sleep(step).await;
        waited += step;
    }
}

pub(crate) fn id_of(task: &Value) -> String {
    task["id"].as_str().unwrap().to_string()
}

/// What a receiver does with the secret: HMAC-SHA256 over "{id}.{timestamp}.{body}".
fn signature(key: &[u8], seen: &Seen) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(seen.header("webhook-id").as_bytes());
    mac.update(b".");
    mac.update(seen.header("webhook-timestamp").as_bytes());
    mac.update(b".");
    mac.update(&seen.body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[tokio::test(start_paused = true)]
async fn a_finished_task_calls_back_once_signed_with_the_whole_task() {
    let key = b"a 32-byte key for callback tests";
    let whsec = format!("whsec_{}", STANDARD.encode(key));
    std::env::set_var("LABROUTER_TEST_WEBHOOK_SECRET_1", &whsec);
    let rx = Receiver::start(200).await;
    let lab = Lab::start("  callback_secret_env: LABROUTER_TEST_WEBHOOK_SECRET_1\n").await;
    let t = lab
        .submit(
            "fix this bug",
            json!({"callback": {"url": rx.url}, "metadata": {"job": "nightly"}}),
        )
        .await;
    let id = id_of(&t);
    assert_eq!(
        t["callback"],
        json!({"url": rx.url, "state": "pending", "attempts": 0, "last_error": null})
    );
    until("the callback arrives", Duration::from_secs(30), || {
        rx.count() >= 1
    })
    .await;

    let seen = rx.seen().remove(0);
    assert_eq!(seen.header("webhook-id"), format!("{id}:succeeded"));
    let ts: i64 = seen.header("webhook-timestamp").parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - ts).abs() < 300, "a Unix timestamp of now: {ts}");
    assert_eq!(seen.header("content-type"), "application/json");
    assert_eq!(
        seen.header("webhook-signature"),
        signature(key, &seen),
        "the signature verifies with the secret"
    );
    let body = seen.json();
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["object"], "task");
    assert_eq!(body["status"], "succeeded");
    assert_eq!(body["metadata"]["job"], "nightly");
    // A finished task keeps its result, not its request (dropped when it ended).
    assert_eq!(body["request"], Value::Null);
    assert!(body.as_object().unwrap().contains_key("request"));
    assert_eq!(body["result"]["status"], 200);
    assert_eq!(
        body["result"]["body"]["choices"][0]["message"]["content"],
        "ok from gpu-box"
    );
    assert!(body.get("truncated").is_none());

    let done = settled(&lab, &id, Duration::from_secs(30)).await;
    assert_eq!(
        done["callback"],
        json!({"url": rx.url, "state": "delivered", "attempts": 1, "last_error": null})
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(rx.count(), 1, "a delivered callback is sent once");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_receiver_gets_it_later_and_delays_no_one_else() {
    let secret = "a plain secret, used as its bytes";
    std::env::set_var("LABROUTER_TEST_WEBHOOK_SECRET_2", secret);
    let failing = Receiver::start(500).await;
    let hung = Receiver::start(HANG).await;
    let healthy = Receiver::start(200).await;
    let lab = Lab::start("  callback_secret_env: LABROUTER_TEST_WEBHOOK_SECRET_2\n").await;
    let a = id_of(
        &lab.submit("fix this bug", json!({"callback": {"url": failing.url}}))
            .await,
    );
    let c = id_of(
        &lab.submit("fix that bug", json!({"callback": {"url": hung.url}}))
            .await,
    );
    until("both first attempts", Duration::from_secs(30), || {
        failing.count() >= 1 && hung.count() >= 1
    })
    .await;

    // One receiver answers 500, another holds its attempt open: a third task's callback
    // still goes out at once.
    let submitted = Instant::now();
    let b = id_of(
        &lab.submit(
            "fix one more bug",
            json!({"callback": {"url": healthy.url}}),
        )
        .await,
    );
    until(
        "the healthy receiver's callback",
        Duration::from_secs(30),
        || healthy.count() >= 1,
    )
    .await;
    let took = healthy.seen()[0].at - submitted;
    assert!(
        took < Duration::from_secs(2),
        "the healthy receiver waited {took:?}"
    );
    assert_eq!(
        healthy.seen()[0].header("webhook-id"),
        format!("{b}:succeeded")
    );
    let b_task = settled(&lab, &b, Duration::from_secs(10)).await;
    assert_eq!(b_task["callback"]["state"], "delivered");

    // The failing receiver is retried (first retry within 5 s, doubling) and comes back.
    until(
        "a second attempt within 5 s",
        Duration::from_secs(6),
        || failing.count() >= 2,
    )
    .await;
    let waiting = lab.task(&a).await;
    assert_eq!(waiting["callback"]["state"], "pending", "{waiting}");
    assert!(waiting["callback"]["attempts"].as_u64().unwrap() >= 1);
    assert_eq!(waiting["callback"]["last_error"], "HTTP 500");
    tokio::time::sleep(Duration::from_secs(30)).await;
    failing.set(200);
    until(
        "the delivery once it is back",
        Duration::from_secs(300),
        || failing.delivered() >= 1,
    )
    .await;
    let done = settled(&lab, &a, Duration::from_secs(10)).await;
    assert_eq!(done["callback"]["state"], "delivered", "{done}");
    let attempts = done["callback"]["attempts"].as_u64().unwrap();
    assert!(attempts > 2, "{done}");
    assert_eq!(attempts as usize, failing.count(), "each attempt counted");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(failing.delivered(), 1, "exactly one 2xx delivery");
    let seen = failing.seen();
    assert!(seen
        .iter()
        .all(|s| s.header("webhook-id") == format!("{a}:succeeded")));
    // Each attempt is signed for its own timestamp (wall-clock seconds: on the paused
    // clock they seldom differ, so the signatures are checked, not compared).
    assert!(seen
        .iter()
        .all(|s| s.header("webhook-signature") == signature(secret.as_bytes(), s)));

    // The hung receiver's attempts time out (10 s) and are retried; it held no one up.
    assert!(hung.count() >= 2, "retried after its attempts timed out");
    let c_task = lab.task(&c).await;
    assert_eq!(c_task["callback"]["state"], "pending");
    assert_eq!(c_task["callback"]["last_error"], "timed out after 10s");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pending_delivery_survives_a_restart() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let lab = Lab::start("").await;
    let id = id_of(
        &lab.submit("fix this bug", json!({"callback": {"url": url}}))
            .await,
    );
    let mut refused = Value::Null;
    for _ in 0..300 {
        refused = lab.task(&id).await;
        if refused["callback"]["attempts"].as_u64() >= Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(refused["status"], "succeeded", "{refused}");
    assert_eq!(refused["callback"]["state"], "pending", "{refused}");
    assert_eq!(refused["callback"]["last_error"], "connection refused");

    let (gpu, cpu, local, dir) = lab.crash().await;
    let lab = Lab::on(gpu, cpu, local, dir, "").await;
    let again = lab.task(&id).await;
    assert_eq!(again["callback"]["state"], "pending", "{again}");
    let rx = Receiver::on_port(port, 200).await;
    until(
        "the delivery after the restart",
        Duration::from_secs(120),
        || rx.count() >= 1,
    )
    .await;
    assert_eq!(rx.seen()[0].header("webhook-id"), format!("{id}:succeeded"));
    assert!(
        rx.seen()[0].headers.get("webhook-signature").is_none(),
        "no secret: unsigned"
    );
    let done = settled(&lab, &id, Duration::from_secs(10)).await;
    assert_eq!(done["callback"]["state"], "delivered", "{done}");
    assert!(
        done["callback"]["attempts"].as_u64().unwrap() >= 2,
        "{done}"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(rx.count(), 1);
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_task_failed_at_start_for_a_second_interruption_calls_back() {
    let rx = Receiver::start(200).await;
    let mut lab = Lab::start("").await;
    lab.gpu.set(Fault::SlowFirstByte(Duration::from_secs(3600)));
    let id = id_of(
        &lab.submit("fix this bug", json!({"callback": {"url": rx.url}}))
            .await,
    );
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(lab.task(&id).await["status"], "running");
        let (gpu, cpu, local, dir) = lab.crash().await;
        lab = Lab::on(gpu, cpu, local, dir, "").await;
    }
    until(
        "the callback of the failed task",
        Duration::from_secs(30),
        || rx.count() >= 1,
    )
    .await;
    let seen = rx.seen().remove(0);
    assert_eq!(seen.header("webhook-id"), format!("{id}:failed"));
    assert_eq!(seen.json()["error"]["code"], "interrupted");
    let done = settled(&lab, &id, Duration::from_secs(10)).await;
    assert_eq!(done["callback"]["state"], "delivered", "{done}");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_callback_url_outside_callback_allow_is_refused_at_submit() {
    let lab = Lab::start("").await;
    for url in [
        "http://192.0.2.1:9000/hook",
        "https://127.0.0.1:9000/hook",
        "http://user:pw@127.0.0.1:9000/hook",
    ] {
        let resp = lab
            .post(
                "/v1/tasks",
                json!({"request": {"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
                       "callback": {"url": url}}),
            )
            .await;
        assert_eq!(resp.status(), 400, "{url}");
    }
    let list: Value = lab.get("/v1/tasks").await.json().await.unwrap();
    assert_eq!(list["data"], json!([]), "no task created");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn failed_cancelled_and_expired_tasks_call_back_too() {
    let rx = Receiver::start(200).await;
    let lab = Lab::start("").await;
    let cb = json!({"url": rx.url});
    // Failed: every machine refuses the request itself; its follow-up is cancelled down
    // the chain, and one submitted after it is cancelled at submit.
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Status {
            code: 400,
            retry_after: None,
        });
    }
    let failed = id_of(&lab.submit("fix this bug", json!({"callback": cb})).await);
    let child = id_of(
        &lab.submit("then this", json!({"callback": cb, "after": [failed]}))
            .await,
    );
    until("two callbacks", Duration::from_secs(60), || rx.count() >= 2).await;
    let late = id_of(
        &lab.submit("and this", json!({"callback": cb, "after": [failed]}))
            .await,
    );
    until("three callbacks", Duration::from_secs(60), || {
        rx.count() >= 3
    })
    .await;

    // Cancelled while it runs; expired while it waits.
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Hang);
    }
    let cancelled = id_of(&lab.submit("fix another bug", json!({"callback": cb})).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resp = lab
        .post(&format!("/v1/tasks/{cancelled}/cancel"), json!({}))
        .await;
    assert_eq!(resp.status(), 200);
    let expired = id_of(
        &lab.submit("fix a last bug", json!({"callback": cb, "deadline": "5m"}))
            .await,
    );
    until("five callbacks", Duration::from_secs(600), || {
        rx.count() >= 5
    })
    .await;

    let by_id: std::collections::BTreeMap<String, Value> = rx
        .seen()
        .iter()
        .map(|s| (s.header("webhook-id").to_string(), s.json()))
        .collect();
    for (id, status, code) in [
        (&failed, "failed", "request_rejected"),
        (&child, "cancelled", "dependency_failed"),
        (&late, "cancelled", "dependency_failed"),
        (&cancelled, "cancelled", "cancelled"),
        (&expired, "expired", "deadline_exceeded"),
    ] {
        let body = by_id
            .get(&format!("{id}:{status}"))
            .unwrap_or_else(|| panic!("no callback {id}:{status}: {:?}", by_id.keys()));
        assert_eq!(body["status"], status);
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(body["result"], Value::Null);
        let t = settled(&lab, id, Duration::from_secs(10)).await;
        assert_eq!(t["callback"]["state"], "delivered", "{t}");
        assert_eq!(t["callback"]["attempts"], 1, "{t}");
    }
    assert_eq!(rx.count(), 5, "one callback each");
    lab.stop().await;
}
