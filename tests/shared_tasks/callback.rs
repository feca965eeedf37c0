//! A shared task's callback (README "Several routers", the shared queue): first sent by the
//! router that ended the task, once (one `webhook-id`, answered 2xx), and its delivery shown
//! on every router, as the task in Redis records it; a router killed while it retries leaves
//! the delivery to another, under the same `webhook-id`, its attempts counted on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::json;

use labrouter::sim::Fault;

use crate::anywhere::finished;
use crate::routers::Lab;

/// The `webhook-id`s a receiver was sent, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// A task asking `content` with a callback to `url`, submitted on router `router`: its id.
async fn with_callback(lab: &Lab, router: usize, content: &str, url: &str) -> String {
    let body = json!({
        "request": {"model": "auto", "messages": [{"role": "user", "content": content}]},
        "callback": {"url": url},
    });
    let (status, task) = crate::follow_routers::post(lab, router, body).await;
    assert_eq!(status, 202, "{task}");
    task["id"].as_str().unwrap().to_string()
}

async fn receiver() -> (String, Seen) {
    refusing(0).await
}

/// A receiver that answers its first `refuse` deliveries 503, then 2xx.
async fn refusing(refuse: usize) -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            post(
                move |State(seen): State<Seen>, headers: HeaderMap| async move {
                    let id = headers
                        .get("webhook-id")
                        .map_or("", |v| v.to_str().unwrap())
                        .to_string();
                    let mut seen = seen.lock().unwrap();
                    seen.push(id);
                    match seen.len() > refuse {
                        true => (StatusCode::OK, "ok"),
                        false => (StatusCode::SERVICE_UNAVAILABLE, "not now"),
                    }
                },
            ),
        )
        .with_state(Arc::clone(&seen));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_task_s_callback_is_sent_once_by_the_router_that_ended_it() {
    let mut lab = Lab::start("3s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    let (url, seen) = receiver().await;
    let id = with_callback(&lab, a, "call me back", &url).await;
    assert_eq!(finished(&lab, b, &id).await["status"], "succeeded");
    lab.until(
        "the callback is delivered, as b shows",
        Duration::from_secs(10),
        async || lab.get(b, &format!("/v1/tasks/{id}")).await.1["callback"]["state"] == "delivered",
    )
    .await;
    let (_, task) = lab.get(a, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["callback"]["attempts"], 1, "{task}");
    // Nothing more arrives: one router sent it, once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(*seen.lock().unwrap(), [format!("{id}:succeeded")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_interrupted_twice_is_failed_and_its_callback_sent_by_a_router_alive() {
    let mut lab = Lab::start("2s", 4).await;
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(60)));
    let (url, seen) = receiver().await;
    let a = lab.add_router("a").await;
    let id = with_callback(&lab, a, "crash me", &url).await;
    // Each router that runs it dies with it.
    for (n, node) in ["b", "c"].into_iter().enumerate() {
        let hits = n as u64 + 1;
        lab.until("it runs", Duration::from_secs(10), async || {
            lab.sim.work_hits() == hits
        })
        .await;
        let running = lab.routers.len() - 1;
        lab.routers[running].kill9();
        lab.add_router(node).await;
    }
    let c = lab.routers.len() - 1;
    let task = finished(&lab, c, &id).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["error"]["code"], "interrupted", "{task}");
    assert_eq!(lab.sim.work_hits(), 2, "not run a third time");
    lab.until(
        "its callback arrives",
        Duration::from_secs(10),
        async || !seen.lock().unwrap().is_empty(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(*seen.lock().unwrap(), [format!("{id}:failed")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_whose_router_dies_while_it_retries_is_delivered_by_another_under_one_id() {
    let mut lab = Lab::start("3s", 4).await;
    // Refused twice: the first attempt at the end, the retries 5 s and 10 s after.
    let (url, seen) = refusing(2).await;
    let a = lab.add_router("a").await;
    let id = with_callback(&lab, a, "call me back", &url).await;
    assert_eq!(finished(&lab, a, &id).await["status"], "succeeded");
    let b = lab.add_router("b").await;
    // a's first attempt is refused and noted in the pool, as b shows: then a dies.
    lab.until(
        "a's first attempt is noted",
        Duration::from_secs(10),
        async || {
            let t = lab.get(b, &format!("/v1/tasks/{id}")).await.1;
            t["callback"]["attempts"].as_u64().unwrap_or(0) >= 1
        },
    )
    .await;
    let (_, task) = lab.get(b, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["callback"]["state"], "pending", "{task}");
    assert!(task["callback"]["last_error"].is_string(), "{task}");
    lab.routers[a].kill9();
    assert!(seen.lock().unwrap().len() < 3, "a was still retrying");
    lab.until("b delivers it", Duration::from_secs(30), async || {
        lab.get(b, &format!("/v1/tasks/{id}")).await.1["callback"]["state"] == "delivered"
    })
    .await;
    let (_, task) = lab.get(b, &format!("/v1/tasks/{id}")).await;
    assert_eq!(
        task["callback"]["attempts"], 3,
        "counted on from a's: {task}"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "two refused, one delivered: {seen:?}");
    assert!(
        seen.iter().all(|w| *w == format!("{id}:succeeded")),
        "one webhook-id: {seen:?}"
    );
}
