//! The test that matters most (docs/api.md "Tasks", waiting, not failing): a whole route down for 15
//! minutes with 200 tasks queued. None fails, the dead machines see only the tries that
//! opened their breakers and then one probe per cooldown, and the tasks run as soon as a
//! probe finds a machine back.

use std::time::Duration;

use labrouter::outcome::TaskStatus;
use labrouter::sim::Fault;
use serde_json::json;
use tokio::time::Instant;

use crate::lab::Lab;

#[tokio::test(start_paused = true)]
async fn two_hundred_tasks_wait_out_a_fifteen_minute_outage_and_only_probes_reach_the_dead() {
    let lab = Lab::start("").await;
    // A hard freeze: requests are read (and counted), nothing answers, liveness fails.
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Hang);
    }
    let mut ids = Vec::new();
    for i in 0..200 {
        let t = lab.submit(&format!("fix this bug #{i}"), json!({})).await;
        assert_eq!(t["route"], serde_json::Value::Null, "routed by content");
        ids.push(t["id"].as_str().unwrap().to_string());
    }
    tokio::time::sleep(Duration::from_secs(15 * 60)).await;

    let during = lab.work();
    let c = lab.svc.tasks().unwrap().counts();
    assert_eq!(
        c.queued + c.waiting + c.running,
        200,
        "every task is still there, none failed: {c:?}"
    );
    assert!(
        c.waiting >= 195,
        "they wait for the breakers, not for a slot: {c:?}"
    );
    let waiting = lab
        .get("/v1/tasks?status=waiting&limit=1000")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let waiting = waiting["data"].as_array().unwrap();
    assert!(
        waiting.iter().any(|t| t["waiting_for"]
            .as_str()
            .unwrap_or("")
            .contains("held back")),
        "waiting tasks say what holds them back"
    );
    assert!(
        waiting.iter().all(|t| t["attempts_used"] == 0),
        "waiting out an outage costs no attempt"
    );
    // Per machine: the failure_threshold (3) tries that opened its breaker, then one probe
    // per cooldown (60 s, 120 s, 240 s, 480 s: at most 4 fit in 15 minutes) — whatever
    // the number of tasks waiting.
    for (name, hits) in [("gpu", during.0), ("cpu", during.1), ("local", during.2)] {
        assert!(
            (4..=7).contains(&hits),
            "{name} got {hits} requests in 15 minutes of outage with 200 tasks waiting"
        );
    }

    // The lab comes back; the next probe (at a cooldown's end) finds it.
    for s in [&lab.gpu, &lab.cpu, &lab.local] {
        s.set(Fault::Ok);
    }
    let back = Instant::now();
    let mut closed = None;
    for _ in 0..(20 * 60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if ["gpu-box", "ubuntu-box", "local"]
            .iter()
            .any(|m| lab.phase(m) == "closed")
        {
            closed = Some(Instant::now());
            break;
        }
    }
    let closed = closed.expect("a probe closed a breaker");
    assert!(closed - back <= Duration::from_secs(15 * 60 + 5));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c = lab.svc.tasks().unwrap().counts();
    assert!(
        c.queued + c.waiting + c.running <= 198,
        "tasks start as soon as the probe succeeds: {c:?}"
    );
    lab.settle(Duration::from_secs(1), Duration::from_secs(600))
        .await;
    assert_eq!(
        lab.statuses(&ids).await,
        vec![(TaskStatus::Succeeded, 200)],
        "every task finished, none failed"
    );
    let after = lab.work();
    assert_eq!(
        (after.0 - during.0) + (after.1 - during.1) + (after.2 - during.2),
        200,
        "after the outage each task took exactly one request"
    );
    lab.stop().await;
}

/// A tick looks through the ready tasks a chunk (256) at a time, the queue's lock released
/// in between: a task that can run behind 300 held back by a machine that is down still
/// starts at once.
#[tokio::test(start_paused = true)]
async fn a_task_that_can_run_starts_behind_three_hundred_held_back() {
    let lab = Lab::start("").await;
    let held = lab
        .post(
            "/admin/breakers/gpu-box/open",
            json!({"by": "test", "why": "held down"}),
        )
        .await;
    assert_eq!(held.status(), 200);
    let mut held_back = Vec::new();
    for i in 0..300 {
        let t = lab
            .submit(&format!("look at this photo #{i}"), json!({}))
            .await;
        held_back.push(t["id"].as_str().unwrap().to_string());
    }
    // Routed (256 a tick) and walked: every one finds vision-gpu held back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        lab.statuses(&held_back).await,
        vec![(TaskStatus::Waiting, 300)],
        "all wait for gpu-box"
    );

    let chat = lab.submit("hello there", json!({})).await;
    let id = chat["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let t = lab.task(&id).await;
    assert_eq!(t["status"], "succeeded", "{t}");
    assert_eq!(
        lab.work(),
        (0, 0, 1),
        "gpu-box held: only the chat reached a machine"
    );
    assert_eq!(
        lab.statuses(&held_back).await,
        vec![(TaskStatus::Waiting, 300)]
    );
    lab.stop().await;
}
