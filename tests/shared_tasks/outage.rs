//! Redis wedged (SIGSTOP: its sockets open, nothing answered) under a pool with the shared
//! queue: a submit is refused with 503 `queue_unavailable` and `Retry-After` within
//! `cluster.task_timeout` (never a 202), chat is served as ever, `/status` says the queue is
//! down; after SIGCONT submits are taken again and run, and the ledger has both changes.
//! Redis restarted (SIGKILL, back empty): the router connects again, but takes submits only
//! once Redis is durable again. A router refuses to start on a Redis that answers but is not
//! durable, naming the setting; one started while Redis is down starts (chat served, submits
//! 503) and takes tasks once Redis is back.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::anywhere::finished;
use crate::routers::Lab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_redis_refuses_submits_quickly_while_chat_is_served_and_its_return_takes_them_again(
) {
    let mut lab = Lab::start("2s", 4).await;
    let a = lab.add_router("a").await;
    let before = lab.submitted(a, 0).await;
    assert_eq!(finished(&lab, a, &before).await["status"], "succeeded");

    lab.redis.signal("STOP");
    let started = Instant::now();
    let resp = lab.submit(a, 1, None).await;
    let took = started.elapsed();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "2");
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "queue_unavailable", "{err}");
    // task_timeout is 400 ms; the rest is a slow machine's slack.
    assert!(took < Duration::from_secs(2), "refused after {took:?}");

    // Interactive traffic does not touch the queue.
    assert_eq!(lab.chat(a).await, 200);
    let (_, status) = lab.get(a, "/status").await;
    assert_eq!(status["shared_queue"]["state"], "down", "{status}");
    let metrics = lab
        .client
        .get(format!("{}/metrics", lab.base(a)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.lines().any(|l| l == "labrouter_shared_queue_up 0"),
        "{metrics}"
    );

    lab.redis.signal("CONT");
    lab.until(
        "the queue is up again",
        Duration::from_secs(10),
        async || lab.get(a, "/status").await.1["shared_queue"]["state"] == "up",
    )
    .await;
    let after = lab.submitted(a, 2).await;
    assert_eq!(finished(&lab, a, &after).await["status"], "succeeded");
    // The ledger says when the queue went down and came back, as `(cluster)` rows.
    let mut rows = Vec::new();
    lab.until("the ledger's rows", Duration::from_secs(5), async || {
        let (_, events) = lab.get(a, "/status/events?machine=(cluster)").await;
        rows = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} -> {}",
                    e["from"].as_str().unwrap(),
                    e["to"].as_str().unwrap()
                )
            })
            .filter(|r| r.contains("task queue"))
            .collect();
        rows.len() == 2
    })
    .await;
    rows.reverse();
    assert_eq!(
        rows,
        [
            "task queue up -> task queue down",
            "task queue down -> task queue up"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_restarts_the_router_connects_again_but_only_to_a_durable_redis() {
    let mut lab = Lab::start("2s", 4).await;
    let a = lab.add_router("a").await;
    lab.redis.kill9();
    let resp = lab.submit(a, 1, None).await;
    assert_eq!(resp.status(), 503);
    // Back empty and without its append-only file: still refused, naming the setting.
    lab.redis.restart().await;
    let resp = lab.submit(a, 2, None).await;
    assert_eq!(resp.status(), 503);
    let err: Value = resp.json().await.unwrap();
    let said = err["error"]["message"].as_str().unwrap();
    assert!(said.contains("appendonly"), "{err}");
    assert!(!said.contains("redis://"), "the URL is never said: {err}");
    // Made durable: taken again, on a connection made anew.
    let mut c = lab.redis.client().await;
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]).await;
    c.ok(&["CONFIG", "SET", "appendfsync", "always"]).await;
    let id = lab.submitted(a, 3).await;
    assert_eq!(finished(&lab, a, &id).await["status"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_refuses_to_start_on_a_redis_that_is_not_durable_naming_the_setting() {
    let mut lab = Lab::start("2s", 4).await;
    let mut c = lab.redis.client().await;
    c.ok(&["CONFIG", "SET", "appendfsync", "everysec"]).await;
    let said = lab.refused("a").await;
    assert!(
        said.contains("appendfsync is 'everysec', not 'always'"),
        "{said}"
    );
    assert!(!said.contains("redis://"), "the URL is never said: {said}");
    assert!(lab.routers.is_empty());
    // Made durable, it starts.
    c.ok(&["CONFIG", "SET", "appendfsync", "always"]).await;
    let a = lab.add_router("a").await;
    let id = lab.submitted(a, 1).await;
    assert_eq!(finished(&lab, a, &id).await["status"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_started_while_redis_is_down_serves_chat_and_takes_tasks_once_redis_is_back() {
    let mut lab = Lab::start("2s", 4).await;
    lab.redis.kill9();
    let a = lab.add_router("a").await;
    assert_eq!(lab.chat(a).await, 200);
    assert_eq!(lab.submit(a, 1, None).await.status(), 503);
    let (_, status) = lab.get(a, "/status").await;
    assert_eq!(status["shared_queue"]["state"], "down", "{status}");
    lab.redis.restart().await;
    let mut c = lab.redis.client().await;
    c.ok(&["CONFIG", "SET", "appendonly", "yes"]).await;
    c.ok(&["CONFIG", "SET", "appendfsync", "always"]).await;
    let id = lab.submitted(a, 2).await;
    assert_eq!(finished(&lab, a, &id).await["status"], "succeeded");
}
