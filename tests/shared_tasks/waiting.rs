//! Tasks of both routers waiting out an outage of their one machine (README "Several routers",
//! the shared queue): held back by the breaker they cost no attempt and send nothing; the
//! machine sees the pool's one probe per cooldown, not one per router or per task; after it
//! recovers every task succeeds. Tasks behind a busy machine are not claimed over and over
//! (Redis's script count is the witness). A spoiled task at the head of the queue is set
//! aside, and the tasks behind it run.

use std::time::Duration;

use labrouter::sim::Fault;
use tokio::time::Instant;

use crate::anywhere::finished;
use crate::routers::{scripts_run, Lab};

/// How long the machine stays down, and its cooldown.
const DOWN: Duration = Duration::from_secs(4);
const COOLDOWN_S: u64 = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_tasks_of_two_routers_cost_the_down_machine_one_probe_per_cooldown() {
    let mut lab = Lab::start("5s", 4).await;
    lab.breaker = Some(
        "{ failure_threshold: 1, cooldown: 1s, backoff: 1.0, max_cooldown: 1s, success_threshold: 1 }",
    );
    lab.shared = true;
    let (a, b) = (lab.add_router("a").await, lab.add_router("b").await);
    lab.sim.set(Fault::Reset);
    let started = Instant::now();
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(lab.submitted(if n % 2 == 0 { a } else { b }, n).await);
    }
    tokio::time::sleep(DOWN.saturating_sub(started.elapsed())).await;
    let down_hits = lab.sim.work_hits();
    lab.sim.set(Fault::Ok);
    // Before the verdict reached the other router each may have tried once; then one probe
    // per cooldown for the pool, and two more for the window's edges and timer jitter on a
    // busy machine. A probe per router would be twice as many.
    let bound = 2 + DOWN.as_secs() / COOLDOWN_S + 2;
    assert!(
        down_hits <= bound,
        "{down_hits} requests reached the down machine in {DOWN:?}, more than {bound}\n{}",
        lab.logs()
    );
    for id in &ids {
        let task = finished(&lab, b, id).await;
        assert_eq!(task["status"], "succeeded", "{task}");
        assert_eq!(task["attempts_used"], 0, "waiting costs no attempt: {task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoiled_task_at_the_head_of_the_queue_is_set_aside_and_the_rest_run() {
    let mut lab = Lab::start("5s", 4).await;
    let a = lab.add_router("a").await;
    // Another hand's garbage at the head of the pool's queue.
    let bad = "tsk_0000000000aaaaaaaaaaaaaaaa";
    let mut c = lab.redis.client().await;
    c.hset(
        &format!("pool:tasks:t:{bad}"),
        &[("status", "queued"), ("doc", "{not json"), ("score", "0")],
    )
    .await;
    c.cmd(&["ZADD", "pool:tasks:ready", "0", bad]).await;
    c.cmd(&["ZADD", "pool:tasks:open", "0", bad]).await;
    let id = lab.submitted(a, 1).await;
    assert_eq!(finished(&lab, a, &id).await["status"], "succeeded");
    // Read back, it is refused as the router's trouble, logged; the router lives on.
    let (status, err) = lab.get(a, &format!("/v1/tasks/{bad}")).await;
    assert_eq!(status, 500, "{err}");
    assert_eq!(err["error"]["code"], "task_store_failed", "{err}");
    assert!(lab.logs().contains("cannot be read back"), "{}", lab.logs());
    assert!(lab.routers[a].child.try_wait().unwrap().is_none(), "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_queued_behind_a_busy_machine_are_not_claimed_over_and_over() {
    let mut lab = Lab::start("5s", 4).await;
    lab.task_slots = Some(1);
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(1)));
    let a = lab.add_router("a").await;
    let mut ids = Vec::new();
    for n in 0..30 {
        ids.push(lab.submitted(a, n).await);
    }
    lab.until("one runs", Duration::from_secs(5), async || {
        lab.sim.work_hits() == 1
    })
    .await;
    // One slot, four claims allowed: the other tasks are found busy, given back, and not
    // claimed again before a walk ends or the next poll.
    let before = scripts_run(&lab.redis).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let ran = scripts_run(&lab.redis).await - before;
    // Claimed and given back at each poll, the 29 waiting tasks cost about sixty; held back
    // until a slot frees, a handful.
    assert!(ran < 30, "{ran} scripts in 0.8 s behind one busy slot");
    lab.sim.set(Fault::Ok);
    for id in &ids {
        assert_eq!(finished(&lab, a, id).await["status"], "succeeded");
    }
    assert_eq!(lab.sim.work_hits(), 30, "each once");
}
