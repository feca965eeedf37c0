//! An import into the shared queue keeps what a submit keeps (README "Moving a queue"):
//! a follow-up moved from a local queue with its parent still queued runs after the parent,
//! with the parent's text; a follow-up of a parent that failed is cancelled
//! `dependency_failed`, down the chain; a task whose deadline passed while it was blocked
//! expires in the deadline sweep. A router's simulated machine is the witness.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use labrouter::sim::Fault;
use serde_json::{json, Value};

use crate::anywhere::finished;
use crate::moving::task;
use crate::moving_file::{file_of, id, line};
use crate::redis::Reply;
use crate::routers::Lab;

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// Task `n` (an even `n`: no owner, as a router without keys has it) on the lab's route,
/// saying `text`, after `after`, due within a day.
fn lab_task(n: u32, status: &str, text: &str, after: &[u32]) -> Value {
    let mut t = line(n, status);
    t["route"] = json!("slow");
    t["priority"] = json!(0);
    t["deadline_ms"] = json!(now_ms() + 86_400_000);
    t["after"] = json!(after.iter().map(|&p| id(p)).collect::<Vec<_>>());
    if !t["request"].is_null() {
        t["request"]["messages"][0]["content"] = json!(text);
    }
    t
}

/// Writes `tasks` as a file and imports it into the lab's shared queue.
fn import_shared(lab: &Lab, dir: &Path, tasks: &[Value]) {
    let file = dir.join("moved.jsonl");
    std::fs::write(&file, file_of(tasks)).unwrap();
    let shared = dir.join("shared.yaml");
    std::fs::write(&shared, lab.registry("mover", &dir.join("mover-state"))).unwrap();
    let ran = task("import", &file, &shared, &lab.redis.url());
    assert!(ran.ok, "{}", ran.said);
}

/// What task `n`'s hash in the lab's Redis holds in `field`.
async fn field(lab: &Lab, n: u32, field: &str) -> String {
    let mut c = lab.redis.client().await;
    match c
        .cmd(&["HGET", &format!("pool:tasks:t:{}", id(n)), field])
        .await
    {
        Reply::Str(s) => s,
        other => format!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_moved_from_a_local_queue_runs_after_its_parent_with_the_parents_text() {
    let mut lab = Lab::start("5s", 4).await;
    let dir = tempfile::tempdir().unwrap();
    // Into a local queue (no router on it), and out again: the export is what moves.
    let local = dir.path().join("local.yaml");
    let text = lab.registry("old", &dir.path().join("old-state"));
    std::fs::write(&local, text.replace("tasks: shared", "tasks: local")).unwrap();
    let seed = dir.path().join("seed.jsonl");
    let tasks = [
        lab_task(2, "queued", "summarise", &[]),
        lab_task(4, "blocked", "review: {{after.0}}", &[2]),
    ];
    std::fs::write(&seed, file_of(&tasks)).unwrap();
    let ran = task("import", &seed, &local, &lab.redis.url());
    assert!(ran.ok, "{}", ran.said);
    let out = dir.path().join("out.jsonl");
    let ran = task("export", &out, &local, &lab.redis.url());
    assert!(ran.ok, "{}", ran.said);
    let moved = crate::moving_file::values(&crate::moving_file::tasks_in(&out).1);
    assert_eq!(
        (moved[0]["status"].as_str(), moved[1]["status"].as_str()),
        (Some("queued"), Some("blocked"))
    );
    import_shared(&lab, dir.path(), &moved);
    assert_eq!(field(&lab, 4, "status").await, "blocked");
    assert_eq!(field(&lab, 4, "pending").await, "1");

    lab.sim.set_text(Some("the parent's summary"));
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(1)));
    let a = lab.add_router("a").await;
    lab.until(
        "the parent reaches the machine",
        Duration::from_secs(10),
        async || lab.sim.work_hits() == 1,
    )
    .await;
    let (_, shown) = lab.get(a, &format!("/v1/tasks/{}", id(4))).await;
    assert_eq!(shown["status"], "blocked", "still: {shown}");
    crate::follow_routers::ran_after_parent(&lab, (a, &id(4)), (a, &id(2))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_of_a_failed_parent_are_imported_cancelled_down_the_chain_and_never_run() {
    let mut lab = Lab::start("5s", 4).await;
    let dir = tempfile::tempdir().unwrap();
    let mut parent = lab_task(2, "failed", "", &[]);
    parent["error"] = json!({"type": "task_error", "code": "attempts_exhausted", "message": "no machine served it"});
    let tasks = [
        parent,
        lab_task(4, "blocked", "review: {{after.0}}", &[2]),
        lab_task(6, "blocked", "and: {{after.0}}", &[4]),
    ];
    import_shared(&lab, dir.path(), &tasks);
    let a = lab.add_router("a").await;
    for (n, by) in [(4, 2), (6, 4)] {
        let t = finished(&lab, a, &id(n)).await;
        assert_eq!(t["status"], "cancelled", "{t}");
        assert_eq!(t["error"]["code"], "dependency_failed", "{t}");
        assert!(
            t["error"]["message"].as_str().unwrap().contains(&id(by)),
            "{t}"
        );
    }
    let (_, listed) = lab.get(a, "/v1/tasks?status=blocked").await;
    assert_eq!(listed["data"], json!([]), "{listed}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(lab.sim.work_hits(), 0, "no follow-up reached the machine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_task_past_its_deadline_expires_in_the_sweep_and_never_runs() {
    let mut lab = Lab::start("5s", 4).await;
    let dir = tempfile::tempdir().unwrap();
    // Blocked on a parent that is slow to answer: no claim looks at it, only the sweep.
    let mut late = lab_task(4, "blocked", "late: {{after.0}}", &[2]);
    late["deadline_ms"] = json!(now_ms() - 1000);
    let tasks = [lab_task(2, "queued", "summarise", &[]), late];
    import_shared(&lab, dir.path(), &tasks);
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let a = lab.add_router("a").await;
    let t = finished(&lab, a, &id(4)).await;
    assert_eq!(t["status"], "expired", "{t}");
    assert_eq!(t["error"]["code"], "deadline_exceeded", "{t}");
    assert_eq!(field(&lab, 4, "ended_by").await, "deadline", "the sweep");
    assert_eq!(lab.sim.work_hits(), 1, "the parent's request only");
    let sent: Value = serde_json::from_slice(&lab.sim.last_body().unwrap()).unwrap();
    assert_eq!(sent["messages"][0]["content"], "summarise");
}
