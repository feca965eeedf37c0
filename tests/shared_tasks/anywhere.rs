//! The pool's queue seen from any router (README "Several routers", the shared queue): one
//! `Idempotency-Key` sent to two routers at once makes one task; a task submitted on one
//! router is read, listed and cancelled on the other, and the router running it stops; a bad
//! submit is refused on either with the local queue's words (an `after` naming no task too).

use std::collections::BTreeSet;
use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::Value;

use crate::routers::Lab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_sent_to_both_routers_at_once_makes_one_task() {
    let mut lab = Lab::start("5s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    let sends = (0..8).map(|i| lab.submit(if i % 2 == 0 { a } else { b }, 7, Some("nightly-7")));
    let answers = futures_util::future::join_all(sends).await;
    let mut ids = BTreeSet::new();
    let mut created = 0;
    for resp in answers {
        let status = resp.status().as_u16();
        let replayed = resp.headers().get("idempotent-replayed").is_some();
        let task: Value = resp.json().await.unwrap();
        match status {
            202 => created += 1,
            200 => assert!(replayed, "a 200 is a replay: {task}"),
            other => panic!("submit answered {other}: {task}"),
        }
        ids.insert(task["id"].as_str().unwrap().to_string());
    }
    assert_eq!((created, ids.len()), (1, 1), "one task: {ids:?}");
    // The same key with another body is refused on either router.
    let resp = lab.submit(b, 8, Some("nightly-7")).await;
    assert_eq!(resp.status(), 422);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "idempotency_key_reused", "{err}");
    let (_, list) = lab.get(a, "/v1/tasks").await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    // The one task ran once.
    let id = ids.into_iter().next().unwrap();
    let done = finished(&lab, b, &id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(lab.sim.work_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_submitted_on_one_router_is_read_listed_and_cancelled_on_the_other() {
    let mut lab = Lab::start("3s", 4).await;
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    let id = lab.submitted(a, 1).await;
    // Read on b, whole: its request too.
    let (status, task) = lab.get(b, &format!("/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{task}");
    assert_eq!(task["metadata"]["n"], "1", "{task}");
    assert!(task["request"]["messages"].is_array(), "{task}");
    // Listed on b.
    let (_, list) = lab.get(b, "/v1/tasks?limit=10").await;
    let listed: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [id.as_str()], "{list}");
    // Running (on whichever router claimed it) and cancelled on b.
    lab.until("the task runs", Duration::from_secs(10), async || {
        lab.sim.work_hits() == 1
    })
    .await;
    // Either router's /status counts the pool's task.
    for router in [a, b] {
        lab.until("the pool's count", Duration::from_secs(5), async || {
            let pool = &lab.get(router, "/status").await.1["shared_queue"]["pool"];
            pool["running"] == 1 && pool["unfinished"] == 1
        })
        .await;
    }
    let resp = lab
        .client
        .post(format!("{}/v1/tasks/{id}/cancel", lab.base(b)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let task: Value = resp.json().await.unwrap();
    assert_eq!(task["status"], "cancelled", "{task}");
    assert_eq!(task["error"]["code"], "cancelled", "{task}");
    // Cancelling again is refused: it finished.
    let resp = lab
        .client
        .post(format!("{}/v1/tasks/{id}/cancel", lab.base(a)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    // The router running it stops at its next renew, and writes nothing over the cancel.
    lab.until("the walk stops", Duration::from_secs(10), async || {
        lab.logs().contains("is no longer this router's")
    })
    .await;
    let (_, task) = lab.get(a, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "cancelled", "{task}");
    assert_eq!(lab.sim.work_hits(), 1, "never sent again");
    // An id the pool does not hold is a 404.
    let (status, _) = lab.get(a, "/v1/tasks/tsk_0000000000aaaaaaaaaaaaaaaa").await;
    assert_eq!(status, 404);
}

/// Task `id` on `router` once it finished.
pub async fn finished(lab: &Lab, router: usize, id: &str) -> Value {
    let mut task = Value::Null;
    lab.until("the task ends", Duration::from_secs(20), async || {
        let (_, t) = lab.get(router, &format!("/v1/tasks/{id}?wait=1s")).await;
        task = t;
        ["succeeded", "failed", "cancelled", "expired"]
            .contains(&task["status"].as_str().unwrap_or(""))
    })
    .await;
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_submit_is_refused_on_any_router_as_the_local_queue_refuses_it_and_nothing_is_stored()
{
    let mut lab = Lab::start("5s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    let chat = serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": "x"}]});
    let streamed = serde_json::json!({"model": "auto", "stream": true, "messages": []});
    let cases = [
        (
            serde_json::json!({"request": chat, "priority": 500}),
            "priority",
        ),
        (serde_json::json!({"request": streamed}), "stream"),
        (
            serde_json::json!({"request": chat, "colour": "red"}),
            "colour",
        ),
        (
            serde_json::json!({"request": chat, "callback": {"url": "http://10.0.0.1:9/x"}}),
            "callback_allow",
        ),
        (
            serde_json::json!({"request": chat, "after": ["tsk_0000000000aaaaaaaaaaaaaaaa"]}),
            "after",
        ),
    ];
    for router in [a, b] {
        for (body, named) in &cases {
            let resp = lab
                .client
                .post(format!("{}/v1/tasks", lab.base(router)))
                .json(body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 400, "{body}");
            let err: Value = resp.json().await.unwrap();
            assert_eq!(err["error"]["code"], "invalid_task", "{err}");
            let said = err["error"]["message"].as_str().unwrap();
            assert!(said.contains(named), "{named}: {err}");
        }
    }
    let (_, list) = lab.get(b, "/v1/tasks").await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0, "{list}");
    assert_eq!(lab.sim.work_hits(), 0);
}
