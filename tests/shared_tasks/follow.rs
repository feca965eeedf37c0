//! Follow-ups in the pool's queue (SPEC §10, §15): a task with `after` is stored `blocked`
//! and no router can claim it until every parent succeeded; a parent that ends otherwise
//! cancels it, and its own follow-ups, in the same script, with the local queue's words; a
//! parent already ended at submit is handled there. Redis's side with two routers' handles;
//! end to end with two router processes in `follow_routers`.

use std::time::Duration;

use labrouter::cluster::tasks::Linked;
use labrouter::outcome::{TaskCode, TaskStatus};
use labrouter::task::{Task, TaskResult};

use crate::pool::{task, two_routers, REQUEST};

/// A follow-up of `parents`, created `created_ms`.
fn follow_up(created_ms: i64, parents: &[&Task]) -> Task {
    let mut t = task(0, created_ms);
    t.status = TaskStatus::Blocked;
    t.after = parents.iter().map(|p| p.id.clone()).collect();
    t
}

fn succeeded(t: &mut Task) {
    t.status = TaskStatus::Succeeded;
    t.result = Some(TaskResult::new(200, "m@a".into(), br#"{"answer":"x"}"#));
}

#[tokio::test]
async fn a_follow_up_is_claimed_by_no_router_until_every_parent_succeeded() {
    let (_redis, a, b) = two_routers().await;
    let (p1, p2) = (task(0, 1_000), task(0, 2_000));
    for p in [&p1, &p2] {
        a.submit(p, REQUEST, None, (0, None)).await.unwrap();
    }
    // An older follow-up with a higher priority would run first, were it ready.
    let mut child = follow_up(500, &[&p1, &p2]);
    child.priority = 50;
    let stored = b.submit_linked(&child, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::New(TaskStatus::Blocked));
    let mut first = b.claim().await.unwrap().unwrap();
    let mut second = a.claim().await.unwrap().unwrap();
    assert_eq!((&first.task.id, &second.task.id), (&p1.id, &p2.id));
    assert!(
        a.claim().await.unwrap().is_none(),
        "the follow-up is blocked"
    );
    succeeded(&mut first.task);
    b.finish(&first.task).await.unwrap();
    assert!(
        b.claim().await.unwrap().is_none(),
        "one parent is still running"
    );
    let shown = a.get(&child.id).await.unwrap().unwrap();
    assert_eq!(shown.task.status, TaskStatus::Blocked);
    succeeded(&mut second.task);
    a.finish(&second.task).await.unwrap();
    let claimed = b.claim().await.unwrap().unwrap();
    assert_eq!(claimed.task.id, child.id, "ready once both succeeded");
    assert_eq!(claimed.request.as_deref(), Some(REQUEST));
    // Parents that succeeded already: queued at once.
    let late = follow_up(3_000, &[&p1, &p2]);
    let stored = a.submit_linked(&late, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::New(TaskStatus::Queued));
    let mut late_run = b.claim().await.unwrap().unwrap();
    assert_eq!(late_run.task.id, late.id);
    // A parent is kept, however old, while a follow-up of it has not ended.
    let mut child_run = claimed;
    a.prune(Duration::ZERO).await.unwrap();
    for p in [&p1, &p2] {
        assert!(
            a.get(&p.id).await.unwrap().is_some(),
            "kept for its follow-ups"
        );
    }
    for run in [&mut child_run, &mut late_run] {
        succeeded(&mut run.task);
        a.finish(&run.task).await.unwrap();
    }
    assert_eq!(a.prune(Duration::ZERO).await.unwrap(), 4);
    assert!(a.get(&p1.id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_parent_that_fails_cancels_its_follow_ups_down_the_chain_and_a_late_one_at_submit() {
    let (_redis, a, b) = two_routers().await;
    let p = task(0, 1_000);
    a.submit(&p, REQUEST, None, (0, None)).await.unwrap();
    let child = follow_up(2_000, &[&p]);
    let grandchild = follow_up(3_000, &[&child]);
    for t in [&child, &grandchild] {
        let stored = b.submit_linked(t, REQUEST, None, (0, None)).await;
        assert_eq!(stored.unwrap(), Linked::New(TaskStatus::Blocked));
    }
    let mut running = a.claim().await.unwrap().unwrap();
    running.task.status = TaskStatus::Failed;
    a.finish(&running.task).await.unwrap();
    for (t, parent) in [(&child, &p), (&grandchild, &child)] {
        let got = b.get(&t.id).await.unwrap().unwrap().task;
        assert_eq!(got.status, TaskStatus::Cancelled, "{got:?}");
        let err = got.error.unwrap();
        assert_eq!(err.code, TaskCode::DependencyFailed);
        let ended = if parent.id == p.id {
            "failed"
        } else {
            "cancelled"
        };
        let said = format!("a task it follows, {}, ended {ended}", parent.id);
        assert_eq!(err.message, said, "the local queue's words");
    }
    assert!(
        b.claim().await.unwrap().is_none(),
        "nothing of the chain runs"
    );
    // Their callbacks are a router's to send.
    let ended = a.take_ended(10).await.unwrap();
    assert_eq!(ended, [child.id.clone(), grandchild.id.clone()]);
    assert_eq!(a.counts().await.unwrap().unfinished, 0);
    // A follow-up of a parent that already failed: refused as doomed, nothing stored.
    let late = follow_up(4_000, &[&child, &p]);
    let stored = a.submit_linked(&late, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::Doomed(0, TaskStatus::Cancelled));
    assert!(a.get(&late.id).await.unwrap().is_none());
    // A parent unknown, or another key's: after[i] named.
    let mut theirs = task(0, 5_000);
    theirs.owner = "key-b".into();
    a.submit(&theirs, REQUEST, None, (0, None)).await.unwrap();
    let live = task(0, 5_500);
    a.submit(&live, REQUEST, None, (0, None)).await.unwrap();
    let stranger = follow_up(6_000, &[&live, &theirs]);
    let stored = a.submit_linked(&stranger, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::UnknownAfter(1));
    let unknown = follow_up(7_000, &[&task(0, 1)]);
    let stored = a.submit_linked(&unknown, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::UnknownAfter(0));
}

#[tokio::test]
async fn a_cancelled_parent_cancels_its_blocked_follow_up_and_an_ended_one_is_stored_ended() {
    let (_redis, a, b) = two_routers().await;
    let p = task(0, 1_000);
    a.submit(&p, REQUEST, None, (0, None)).await.unwrap();
    let child = follow_up(2_000, &[&p]);
    b.submit_linked(&child, REQUEST, None, (0, None))
        .await
        .unwrap();
    b.cancel(&p.id, None).await.unwrap();
    let got = a.get(&child.id).await.unwrap().unwrap().task;
    assert_eq!(got.status, TaskStatus::Cancelled);
    assert_eq!(got.error.unwrap().code, TaskCode::DependencyFailed);
    // A follow-up sent already ended (doomed by its router) is stored so: not open.
    let mut doomed = follow_up(3_000, &[&p]);
    doomed.status = TaskStatus::Cancelled;
    let stored = a.submit_linked(&doomed, REQUEST, None, (0, None)).await;
    assert_eq!(stored.unwrap(), Linked::New(TaskStatus::Cancelled));
    let got = b.get(&doomed.id).await.unwrap().unwrap();
    assert_eq!(got.task.status, TaskStatus::Cancelled);
    assert!(got.request.is_none(), "an ended task keeps no request");
    assert_eq!(a.counts().await.unwrap().unfinished, 0);
}
