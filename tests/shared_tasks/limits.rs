//! The pool's limits (SPEC §10 "Fair to interactive work", §15): `tasks.max_running` and a
//! machine's `task_slots` counted across routers in Redis, and given back when a dead
//! router's leases lapse. Redis's side with routers' handles; end to end with router
//! processes in front of one slow machine, which counts the requests it answers at once.

use std::time::Duration;

use labrouter::outcome::TaskStatus;
use labrouter::sim::Fault;

use crate::anywhere::finished;
use crate::pool::{lapse, router, task, two_routers, REQUEST};
use crate::redis::RedisServer;
use crate::routers::Lab;

#[tokio::test]
async fn the_pool_runs_at_most_max_running_whichever_router_claims_and_a_cancel_holds_until_let_go()
{
    let (_redis, a, b) = two_routers().await;
    let tasks: Vec<_> = (0..4).map(|i| task(0, 1_000 + i)).collect();
    for t in &tasks {
        a.submit(t, REQUEST, None, (0, None)).await.unwrap();
    }
    let mut first = a.claim_within(2).await.unwrap().unwrap();
    let second = b.claim_within(2).await.unwrap().unwrap();
    assert!(a.claim_within(2).await.unwrap().is_none(), "two run");
    assert!(
        b.claim_within(2).await.unwrap().is_none(),
        "on either router"
    );
    first.task.status = TaskStatus::Failed;
    a.finish(&first.task).await.unwrap();
    let third = b.claim_within(2).await.unwrap().unwrap();
    // Cancelled under its holder, a task runs until the holder hears it: still counted.
    b.cancel(&second.task.id, None).await.unwrap();
    assert!(
        a.claim_within(2).await.unwrap().is_none(),
        "the walk may still send"
    );
    assert!(
        !a.let_go(&third.task, &second.token).await.unwrap(),
        "not its token's"
    );
    assert!(!b.renew(&second.task, &second.token).await.unwrap());
    assert!(b.let_go(&second.task, &second.token).await.unwrap());
    assert_eq!(
        a.claim_within(2).await.unwrap().unwrap().task.id,
        tasks[3].id
    );
}

#[tokio::test]
async fn a_machine_s_slots_are_counted_across_routers_and_a_dead_router_s_come_back_at_its_lapse() {
    let redis = crate::pool::durable_redis().await;
    let short = Duration::from_millis(300);
    let dying = router(&redis.url(), short).await;
    let b = router(&redis.url(), Duration::from_secs(30)).await;
    let (t1, t2, t3) = (task(0, 1_000), task(0, 2_000), task(0, 3_000));
    for t in [&t1, &t2, &t3] {
        b.submit(t, REQUEST, None, (0, None)).await.unwrap();
    }
    let c1 = dying.claim().await.unwrap().unwrap();
    let c2 = b.claim().await.unwrap().unwrap();
    let (id1, id2) = (&c1.task.id, &c2.task.id);
    assert!(dying.take_slot(id1, &c1.token, "gpu-box", 1).await.unwrap());
    assert!(
        dying.take_slot(id1, &c1.token, "gpu-box", 1).await.unwrap(),
        "held"
    );
    assert!(
        !b.take_slot(id2, &c2.token, "gpu-box", 1).await.unwrap(),
        "taken"
    );
    assert!(
        b.take_slot(id2, &c2.token, "gpu-box", 2).await.unwrap(),
        "two slots"
    );
    // A task holds one machine's slot at a time: taking another's gives the first back.
    assert!(b.take_slot(id2, &c2.token, "cpu-box", 1).await.unwrap());
    assert!(
        !b.take_slot(id2, &c1.token, "gpu-box", 2).await.unwrap(),
        "not its lease"
    );
    assert_eq!(slots_of(&redis, "gpu-box").await, 1);
    // The router holding gpu-box dies: its slot comes back when its lease lapses.
    lapse(short).await;
    let again = b.claim().await.unwrap().unwrap();
    assert_eq!(&again.task.id, id1, "the lapsed task, queued again first");
    assert_eq!(slots_of(&redis, "gpu-box").await, 0);
    assert!(b.take_slot(id2, &c2.token, "gpu-box", 1).await.unwrap());
    // An end gives the slot back.
    let mut done = c2.task.clone();
    done.status = TaskStatus::Failed;
    b.finish(&done).await.unwrap();
    assert_eq!(slots_of(&redis, "gpu-box").await, 0);
    assert!(b.take_slot(id1, &again.token, "gpu-box", 1).await.unwrap());
}

/// How many tasks hold one of `machine`'s slots in the pool.
async fn slots_of(redis: &RedisServer, machine: &str) -> i64 {
    let key = format!("lab:tasks:mslots:{machine}");
    redis.client().await.cmd(&["ZCARD", &key]).await.int()
}

/// Submits `n` tasks to the lab's two routers in turn; waits until every one succeeded.
async fn run_all(lab: &Lab, n: u32) {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(lab.submitted((i % 2) as usize, i).await);
    }
    for id in &ids {
        let task = finished(lab, 0, id).await;
        assert_eq!(task["status"], "succeeded", "{task}");
    }
}

/// Two routers, `max_running` and `task_slots` as given, 6 tasks on a slow machine: it
/// never sees two at once.
async fn one_at_a_time(max_running: u32, task_slots: u32) {
    let mut lab = Lab::start("5s", max_running).await;
    lab.task_slots = Some(task_slots);
    lab.add_router("a").await;
    lab.add_router("b").await;
    lab.sim
        .set(Fault::SlowFirstByte(Duration::from_millis(400)));
    run_all(&lab, 6).await;
    assert_eq!(lab.sim.work_hits(), 6);
    assert_eq!(lab.sim.most_at_once(), 1, "{}", lab.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_one_across_two_routers_never_sends_the_machine_two_tasks_at_once() {
    one_at_a_time(1, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_task_slot_across_two_routers_never_sends_the_machine_two_tasks_at_once() {
    one_at_a_time(4, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_killed_holding_the_pools_one_slot_gives_it_back_when_its_lease_lapses() {
    let mut lab = Lab::start("3s", 1).await;
    let a = lab.add_router("a").await;
    lab.sim.set(Fault::SlowFirstByte(Duration::from_secs(60)));
    let first = lab.submitted(a, 1).await;
    lab.until("a runs its task", Duration::from_secs(10), async || {
        lab.sim.work_hits() == 1
    })
    .await;
    let b = lab.add_router("b").await;
    let second = lab.submitted(b, 2).await;
    // b runs nothing while a holds the pool's one slot.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(lab.sim.work_hits(), 1, "{}", lab.logs());
    lab.routers[a].kill9();
    lab.sim.set(Fault::Ok);
    for id in [&first, &second] {
        let task = finished(&lab, b, id).await;
        assert_eq!(task["status"], "succeeded", "{task}");
    }
    let (_, again) = lab.get(b, &format!("/v1/tasks/{first}")).await;
    let outcomes: Vec<&str> = again["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["outcome"].as_str())
        .collect();
    assert!(outcomes.contains(&"interrupted"), "{again}");
    assert_eq!(lab.sim.work_hits(), 3, "the first twice, the second once");
    lab.until(
        "the pool runs nothing",
        Duration::from_secs(5),
        async || lab.get(b, "/status").await.1["shared_queue"]["pool"]["running"] == 0,
    )
    .await;
}
