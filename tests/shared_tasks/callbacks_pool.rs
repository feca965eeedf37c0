//! The pool's callback deliveries, Redis side (`callbacks`): a task that ends with a
//! callback joins them in the script that ended it, held by the router that ended it; an
//! attempt noted makes it due for any router at its next attempt; a holder whose delivery
//! was taken notes nothing; a delivery noted done leaves the set, its attempts shown.

use std::time::Duration;

use labrouter::cluster::tasks::SharedQueue;
use labrouter::cluster::Endpoint;
use labrouter::outcome::{Delivery, TaskStatus};
use labrouter::task::{Callback, TaskResult};

use crate::pool::{config, durable_redis, router, task, MAX_VALUE, REQUEST};
use crate::redis::{RedisServer, Reply};

/// A router named `node` on the queue at `url` (its deliveries' holder differs from
/// [`router`]'s).
async fn named(url: &str, node: &str) -> SharedQueue {
    let endpoint = Endpoint::parse(url, "LABROUTER_REDIS_URL").unwrap();
    let mut c = config(Duration::from_secs(30));
    c.node = node.into();
    SharedQueue::connect(&endpoint, &c, MAX_VALUE)
        .await
        .unwrap()
}

/// The ids in the pool's `callbacks`.
async fn enlisted(redis: &RedisServer) -> Vec<String> {
    let mut c = redis.client().await;
    match c.cmd(&["ZRANGE", "lab:tasks:callbacks", "0", "-1"]).await {
        Reply::Arr(ids) => ids.iter().map(|i| i.text().unwrap().to_string()).collect(),
        other => panic!("ZRANGE: {other:?}"),
    }
}

#[tokio::test]
async fn a_callback_is_held_by_the_router_that_ended_it_then_due_for_any_router_until_delivered() {
    let redis = durable_redis().await;
    let a = router(&redis.url(), Duration::from_secs(30)).await;
    let b = named(&redis.url(), "other").await;
    let mut t = task(0, 1_000);
    t.callback = Some(Callback {
        url: "http://127.0.0.1:9/done".into(),
        state: Delivery::Pending,
        attempts: 0,
        last_error: None,
    });
    let plain = task(0, 2_000);
    for one in [&t, &plain] {
        a.submit(one, REQUEST, None, (0, None)).await.unwrap();
    }
    for _ in 0..2 {
        let mut c = a.claim().await.unwrap().unwrap();
        c.task.status = TaskStatus::Succeeded;
        c.task.finished_ms = Some(5_000);
        c.task.result = Some(TaskResult::new(200, "m@a".into(), br#"{"answer":"a"}"#));
        a.finish(&c.task).await.unwrap();
    }
    assert_eq!(
        enlisted(&redis).await,
        [t.id.to_string()],
        "only the one with a callback"
    );
    assert!(!b.hold_callback(&t.id).await.unwrap(), "a holds it");
    assert!(b.due_callbacks(10).await.unwrap().is_empty());
    assert!(a.hold_callback(&t.id).await.unwrap(), "its own");

    // a's attempt failed: noted, due again at once, for whichever router takes it.
    let mut shown = a.get(&t.id).await.unwrap().unwrap().task;
    let cb = shown.callback.as_mut().unwrap();
    (cb.attempts, cb.last_error) = (1, Some("503 from the receiver".into()));
    assert!(a
        .note_callback(&t.id, Some(&shown), Some(Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(b.due_callbacks(10).await.unwrap(), [t.id.clone()]);
    assert!(
        a.due_callbacks(10).await.unwrap().is_empty(),
        "b holds it now"
    );
    assert!(!a.hold_callback(&t.id).await.unwrap());
    assert!(
        !a.note_callback(&t.id, Some(&shown), None).await.unwrap(),
        "a holds it no more: it notes nothing"
    );

    // b delivers it: out of the set, its two attempts shown on a.
    let cb = shown.callback.as_mut().unwrap();
    (cb.state, cb.attempts, cb.last_error) = (Delivery::Delivered, 2, None);
    assert!(b.note_callback(&t.id, Some(&shown), None).await.unwrap());
    assert!(enlisted(&redis).await.is_empty());
    let got = a.get(&t.id).await.unwrap().unwrap().task.callback.unwrap();
    assert_eq!((got.state, got.attempts), (Delivery::Delivered, 2));
}
