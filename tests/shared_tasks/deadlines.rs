//! Deadlines while a task waits (SPEC §10 "Deadline", §15): a task that no router runs —
//! blocked on its parents, queued — expires at its deadline, not when next claimed, and its
//! follow-ups are cancelled with it; a running task is left to its walk.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use labrouter::outcome::{TaskCode, TaskStatus};
use labrouter::sim::Fault;
use serde_json::json;

use crate::anywhere::finished;
use crate::pool::{task, two_routers, REQUEST};
use crate::routers::Lab;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn tasks_past_their_deadline_that_no_router_runs_expire_with_their_follow_ups() {
    let (_redis, a, b) = two_routers().await;
    // The helper's tasks were created in 1970: deadlines are set here.
    let (past, far) = (now_ms() - 1, now_ms() + 3_600_000);
    let mut parent = task(0, 1_000);
    parent.deadline_ms = past;
    let mut child = task(0, 2_000);
    (child.status, child.after, child.deadline_ms) =
        (TaskStatus::Blocked, vec![parent.id.clone()], past);
    let mut grandchild = task(0, 3_000);
    (grandchild.status, grandchild.after, grandchild.deadline_ms) =
        (TaskStatus::Blocked, vec![child.id.clone()], far);
    let mut queued = task(0, 4_000);
    queued.deadline_ms = past;
    let mut later = task(0, 5_000);
    later.deadline_ms = far;
    a.submit(&parent, REQUEST, None, (0, None)).await.unwrap();
    let running = b.claim().await.unwrap().unwrap();
    assert_eq!(running.task.id, parent.id);
    for t in [&child, &grandchild, &queued, &later] {
        a.submit_linked(t, REQUEST, None, (0, None)).await.unwrap();
    }
    assert_eq!(
        b.expire_due(100).await.unwrap(),
        2,
        "the child and the queued task"
    );
    for t in [&child, &queued] {
        let got = a.get(&t.id).await.unwrap().unwrap().task;
        assert_eq!(got.status, TaskStatus::Expired, "{got:?}");
        assert_eq!(got.error.unwrap().code, TaskCode::DeadlineExceeded);
    }
    let got = a.get(&grandchild.id).await.unwrap().unwrap().task;
    assert_eq!(got.status, TaskStatus::Cancelled);
    let said = format!("a task it follows, {}, ended expired", child.id);
    assert_eq!(got.error.unwrap().message, said);
    let got = a.get(&parent.id).await.unwrap().unwrap().task;
    assert_eq!(got.status, TaskStatus::Running, "left to its walk");
    let mut ended = a.take_ended(10).await.unwrap();
    ended.sort();
    let mut want = vec![child.id.clone(), grandchild.id.clone(), queued.id.clone()];
    want.sort();
    assert_eq!(ended, want, "their callbacks are a router's to send");
    assert_eq!(a.counts().await.unwrap().unfinished, 2);
    assert_eq!(a.claim().await.unwrap().unwrap().task.id, later.id);
    assert_eq!(a.expire_due(100).await.unwrap(), 0, "each expires once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_follow_up_expires_at_its_deadline_while_its_parent_still_runs() {
    let mut lab = Lab::start("5s", 4).await;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(60)));
    let parent = lab.submitted(a, 1).await;
    let body = json!({
        "request": {"model": "auto", "messages": [{"role": "user", "content": "{{after.0}}"}]},
        "after": [parent],
        "deadline": "1s",
    });
    let resp = lab
        .client
        .post(format!("{}/v1/tasks", lab.base(b)))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let child: serde_json::Value = resp.json().await.unwrap();
    let done = finished(&lab, a, child["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "expired", "{done}");
    assert_eq!(done["error"]["code"], "deadline_exceeded", "{done}");
    let (_, p) = lab.get(b, &format!("/v1/tasks/{parent}")).await;
    assert_eq!(p["status"], "running", "{p}");
    assert_eq!(lab.sim.work_hits(), 1, "only the parent's request");
}
