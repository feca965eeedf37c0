//! A router killed with SIGKILL while it runs most of the pool's tasks: the other router takes
//! them once their leases lapse, and every task succeeds, once (README "Several routers", the
//! shared queue). The machine's request count is the witness: at most one request per task
//! plus one per interrupted attempt. A router stopped with SIGTERM gives its running task
//! back when its grace ends: no interruption, no wait for the lease.

use std::collections::BTreeSet;
use std::time::Duration;

use labrouter::sim::Fault;

use crate::routers::Lab;

const TASKS: u32 = 20;
/// Router a runs this many at once (its `tasks.max_running`, counted for the pool).
const SLOTS: u32 = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_router_s_tasks_all_succeed_on_the_other_once_their_leases_lapse() {
    let mut lab = Lab::start("2s", SLOTS).await;
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(2)));
    let a = lab.add_router("a").await;
    let mut ids = Vec::new();
    for n in 0..TASKS {
        ids.push(lab.submitted(a, n).await);
    }
    // Router a takes as many as it may run; b comes and takes the rest.
    lab.until(
        "router a runs its share",
        Duration::from_secs(10),
        async || lab.sim.work_hits() >= u64::from(SLOTS),
    )
    .await;
    // max_running is the pool's: b, started with room for every task, runs the rest
    // beside a's share.
    lab.slots = TASKS;
    let b = lab.add_router("b").await;
    lab.until(
        "router b runs the rest",
        Duration::from_secs(10),
        async || lab.sim.work_hits() >= u64::from(TASKS),
    )
    .await;
    lab.routers[a].kill9();

    // Every task succeeds, read on b; the interrupted ones say so.
    let mut interrupted = 0;
    let mut seen = BTreeSet::new();
    for id in &ids {
        let mut task = serde_json::Value::Null;
        lab.until(
            "every task ends on b",
            Duration::from_secs(30),
            async || {
                let (status, t) = lab.get(b, &format!("/v1/tasks/{id}?wait=1s")).await;
                task = t;
                status == 200
                    && task["status"] != "queued"
                    && task["status"] != "running"
                    && task["status"] != "waiting"
            },
        )
        .await;
        assert_eq!(task["status"], "succeeded", "{task}\n{}", lab.logs());
        assert!(task["result"]["body"]["choices"].is_array(), "{task}");
        let lapsed = task["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["outcome"] == "interrupted")
            .count();
        assert!(
            lapsed <= 1,
            "one lapse at most, or it would have failed: {task}"
        );
        interrupted += lapsed;
        seen.insert(task["id"].as_str().unwrap().to_string());
    }
    assert_eq!(seen.len(), TASKS as usize, "every id once");
    assert_eq!(
        interrupted, SLOTS as usize,
        "router a's running tasks, and only they, were interrupted"
    );
    // The wire: one request per task, plus one per interrupted attempt.
    let hits = lab.sim.work_hits();
    assert!(
        hits <= u64::from(TASKS) + interrupted as u64,
        "{hits} requests for {TASKS} tasks and {interrupted} interruptions"
    );
    // Each ended once: the list on b shows each id once, every one succeeded.
    let (_, list) = lab.get(b, "/v1/tasks?limit=100").await;
    let listed: Vec<_> = list["data"].as_array().unwrap().iter().collect();
    assert_eq!(listed.len(), TASKS as usize, "{list}");
    assert!(listed.iter().all(|t| t["status"] == "succeeded"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_stopped_with_sigterm_gives_its_running_task_back_uninterrupted() {
    let mut lab = Lab::start("30s", 4).await;
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let a = lab.add_router("a").await;
    let id = lab.submitted(a, 1).await;
    lab.until("router a runs it", Duration::from_secs(10), async || {
        lab.sim.work_hits() == 1
    })
    .await;
    let b = lab.add_router("b").await;
    lab.sim.set(Fault::Ok);
    // The walk outlives shutdown_grace (1 s): the task is given back, not left to its
    // 30 s lease.
    let status = lab.routers[a].terminate(Duration::from_secs(10)).await;
    assert!(status.success(), "{status}");
    let mut task = serde_json::Value::Null;
    lab.until(
        "b runs it to its end",
        Duration::from_secs(10),
        async || {
            task = lab.get(b, &format!("/v1/tasks/{id}?wait=1s")).await.1;
            task["status"] == "succeeded"
        },
    )
    .await;
    let outcomes: Vec<&str> = task["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert!(!outcomes.contains(&"interrupted"), "a clean stop: {task}");
    assert_eq!(lab.sim.work_hits(), 2, "once on a, once on b");
}
