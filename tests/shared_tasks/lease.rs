//! Leases: the next task by priority then age; a dead router's task run again by another
//! with an `interrupted` attempt; one end per task, the first written; waiting tasks woken by
//! a breaker change; a finished task's doc noted again (its callback's delivery).

use std::time::Duration;

use labrouter::cluster::tasks::Ended;
use labrouter::outcome::{AttemptOutcome, TaskCode, TaskStatus};
use labrouter::task::TaskResult;

use crate::pool::{durable_redis, lapse, router, task, two_routers, REQUEST};

const SHORT: Duration = Duration::from_millis(300);

#[tokio::test]
async fn claims_go_by_priority_then_age_and_each_task_to_one_router() {
    let (_redis, a, b) = two_routers().await;
    let old_low = task(-5, 1_000);
    let new_high = task(10, 3_000);
    let old_high = task(10, 2_000);
    for t in [&old_low, &new_high, &old_high] {
        a.submit(t, REQUEST, None, (0, None)).await.unwrap();
    }
    let first = b.claim().await.unwrap().unwrap();
    let second = a.claim().await.unwrap().unwrap();
    let third = b.claim().await.unwrap().unwrap();
    assert_eq!(first.task.id, old_high.id);
    assert_eq!(second.task.id, new_high.id);
    assert_eq!(third.task.id, old_low.id);
    assert_eq!(first.task.status, TaskStatus::Running);
    assert_eq!(first.request.as_deref(), Some(REQUEST));
    assert!(first.task.started_ms.is_some());
    assert!(a.claim().await.unwrap().is_none(), "nothing is due");
    // Renewed by its holder only.
    assert!(b.renew(&first.task, &first.token).await.unwrap());
    assert!(!a.renew(&first.task, &second.token).await.unwrap());
}

#[tokio::test]
async fn a_task_given_back_with_a_backoff_is_due_only_after_it() {
    let (_redis, a, b) = two_routers().await;
    let t = task(0, 1_000);
    a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
    let mut c = a.claim().await.unwrap().unwrap();
    c.task.status = TaskStatus::Queued;
    c.task.attempts_used = 1;
    assert!(a.release(&c.task, &c.token, SHORT).await.unwrap());
    assert!(b.claim().await.unwrap().is_none(), "not before its backoff");
    lapse(SHORT).await;
    let again = b.claim().await.unwrap().unwrap();
    assert_eq!(again.task.id, t.id);
    assert_eq!(again.task.attempts_used, 1, "its progress was kept");
    assert!(
        !a.release(&c.task, &c.token, SHORT).await.unwrap(),
        "no longer a's"
    );
}

#[tokio::test]
async fn a_lapsed_lease_is_run_again_elsewhere_with_one_interrupted_attempt_and_failed_at_the_second(
) {
    let redis = durable_redis().await;
    let a = router(&redis.url(), SHORT).await;
    let b = router(&redis.url(), SHORT).await;
    let t = task(0, 1_000);
    a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
    let held = a.claim().await.unwrap().unwrap();
    assert!(b.claim().await.unwrap().is_none(), "a holds it");

    // a dies: it renews no more.
    lapse(SHORT).await;
    let taken = b.claim().await.unwrap().unwrap();
    assert_eq!(taken.task.id, t.id);
    assert_eq!(taken.task.interrupted, 1);
    let outcomes: Vec<_> = taken.task.attempts.iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [AttemptOutcome::Interrupted]);
    assert!(
        !taken.task.attempts[0].charged,
        "an interruption costs no attempt"
    );
    assert_eq!(
        taken.request.as_deref(),
        Some(REQUEST),
        "its request is kept"
    );
    assert!(
        !a.renew(&held.task, &held.token).await.unwrap(),
        "a must stop"
    );

    // b dies too: the second interruption fails it rather than run it a third time.
    lapse(SHORT).await;
    assert!(a.claim().await.unwrap().is_none());
    let ended = a.get(&t.id).await.unwrap().unwrap();
    assert_eq!(ended.task.status, TaskStatus::Failed);
    assert_eq!(ended.task.interrupted, 2);
    assert_eq!(
        ended.task.error.as_ref().unwrap().code,
        TaskCode::Interrupted
    );
    assert!(ended.task.finished_ms.is_some());
    assert!(
        ended.request.is_none(),
        "a finished task's request is dropped"
    );
}

#[tokio::test]
async fn a_finish_after_another_router_finished_is_dropped_and_the_first_result_stays() {
    let redis = durable_redis().await;
    let a = router(&redis.url(), SHORT).await;
    let b = router(&redis.url(), SHORT).await;
    let t = task(0, 1_000);
    a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
    let mut slow = a.claim().await.unwrap().unwrap();
    lapse(SHORT).await;
    let mut fast = b.claim().await.unwrap().unwrap();

    fast.task.status = TaskStatus::Succeeded;
    fast.task.finished_ms = Some(5_000);
    fast.task.result = Some(TaskResult::new(200, "m@b".into(), br#"{"answer":"b"}"#));
    assert_eq!(b.finish(&fast.task).await.unwrap(), Ended::Written);

    slow.task.status = TaskStatus::Succeeded;
    slow.task.finished_ms = Some(6_000);
    slow.task.result = Some(TaskResult::new(200, "m@a".into(), br#"{"answer":"a"}"#));
    assert_eq!(
        a.finish(&slow.task).await.unwrap(),
        Ended::Dropped(TaskStatus::Succeeded)
    );
    slow.task.status = TaskStatus::Failed;
    assert_eq!(
        a.finish(&slow.task).await.unwrap(),
        Ended::Dropped(TaskStatus::Succeeded)
    );
    let got = a.get(&t.id).await.unwrap().unwrap().task;
    assert_eq!(got.status, TaskStatus::Succeeded);
    assert_eq!(got.result.unwrap().body.get(), r#"{"answer":"b"}"#);
    assert_eq!(got.finished_ms, Some(5_000));
    assert!(
        a.claim().await.unwrap().is_none(),
        "an ended task is never claimed"
    );
}

#[tokio::test]
async fn a_result_written_after_its_lease_lapsed_wins_when_nobody_else_ended_it() {
    let redis = durable_redis().await;
    let a = router(&redis.url(), SHORT).await;
    let t = task(0, 1_000);
    a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
    let mut c = a.claim().await.unwrap().unwrap();
    // Redis was away longer than the lease; the attempt finished meanwhile.
    lapse(SHORT).await;
    c.task.status = TaskStatus::Succeeded;
    c.task.result = Some(TaskResult::new(200, "m@a".into(), br#"{"ok":1}"#));
    assert_eq!(a.finish(&c.task).await.unwrap(), Ended::Written);
    assert!(a.claim().await.unwrap().is_none(), "not run again");
    let got = a.get(&t.id).await.unwrap().unwrap().task;
    assert_eq!(got.status, TaskStatus::Succeeded);
}

#[tokio::test]
async fn routers_claiming_at_once_never_take_one_task_twice() {
    let (_redis, a, b) = two_routers().await;
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..50 {
        let t = task(i % 3, 1_000 + i64::from(i));
        a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
        ids.insert(t.id);
    }
    let (ga, gb) = tokio::join!(drain(&a), drain(&b));
    assert!(!ga.is_empty() && !gb.is_empty(), "both routers ran some");
    let all: Vec<_> = ga.iter().chain(&gb).cloned().collect();
    let unique: std::collections::BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 50, "each task claimed once");
    assert_eq!(unique, ids);
}

/// Claims until nothing is due; the ids claimed.
async fn drain(q: &labrouter::cluster::tasks::SharedQueue) -> Vec<labrouter::task::TaskId> {
    let mut got = Vec::new();
    while let Some(c) = q.claim().await.unwrap() {
        got.push(c.task.id);
    }
    got
}

#[tokio::test]
async fn a_breaker_change_wakes_waiting_tasks_at_once_and_leaves_backoffs_alone() {
    let (_redis, a, b) = two_routers().await;
    let (waits, backs_off) = (task(0, 1_000), task(0, 2_000));
    for t in [&waits, &backs_off] {
        a.submit(t, REQUEST, None, (0, None)).await.unwrap();
    }
    let mut w = a.claim().await.unwrap().unwrap();
    let mut q = a.claim().await.unwrap().unwrap();
    w.task.status = TaskStatus::Waiting;
    q.task.status = TaskStatus::Queued;
    let long = Duration::from_secs(60);
    assert!(a.release(&w.task, &w.token, long).await.unwrap());
    assert!(a.release(&q.task, &q.token, long).await.unwrap());
    assert!(b.claim().await.unwrap().is_none(), "both later");
    assert_eq!(b.wake_waiting(8).await.unwrap(), 1);
    let woken = b.claim().await.unwrap().unwrap();
    assert_eq!(woken.task.id, waits.id);
    assert!(b.claim().await.unwrap().is_none(), "the backoff holds");
}

#[tokio::test]
async fn a_finished_task_s_doc_may_be_noted_again_and_an_unfinished_one_may_not() {
    let (_redis, a, b) = two_routers().await;
    let t = task(0, 1_000);
    a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
    let mut c = a.claim().await.unwrap().unwrap();
    c.task.metadata.insert("noted".into(), "no".into());
    assert!(!b.note(&c.task).await.unwrap(), "running: not noted");
    c.task.status = TaskStatus::Succeeded;
    c.task.result = Some(TaskResult::new(200, "m@box".into(), b"{}"));
    assert_eq!(a.finish(&c.task).await.unwrap(), Ended::Written);
    c.task.metadata.insert("noted".into(), "yes".into());
    assert!(b.note(&c.task).await.unwrap());
    let got = a.get(&t.id).await.unwrap().unwrap();
    assert_eq!(got.task.metadata["noted"], "yes");
    assert_eq!(got.task.status, TaskStatus::Succeeded);
}
