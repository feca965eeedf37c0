//! What the pool keeps is bounded: `tasks.max_queued` unfinished tasks for the whole pool,
//! `tasks.max_queued_per_key` for each key, and finished ones (with their idempotency keys)
//! for `tasks.keep`.

use std::time::Duration;

use labrouter::cluster::tasks::QueueError;
use labrouter::outcome::TaskStatus;
use labrouter::store::tasks::{Idem, Inserted};

use crate::pool::{task, two_routers, REQUEST};

fn idem(key: &str) -> Idem {
    Idem {
        key: key.into(),
        fingerprint: "f".into(),
    }
}

#[tokio::test]
async fn a_full_pool_refuses_a_submit_storing_nothing_but_still_answers_a_resend() {
    let (_redis, a, b) = two_routers().await;
    let first = task(0, 1_000);
    a.submit(&first, REQUEST, Some(&idem("k")), (3, None))
        .await
        .unwrap();
    for i in 0..2 {
        a.submit(&task(0, 2_000 + i), REQUEST, None, (3, None))
            .await
            .unwrap();
    }
    let over = task(0, 5_000);
    let r = b.submit(&over, REQUEST, None, (3, None)).await;
    assert!(matches!(r, Err(QueueError::Full(3))), "{r:?}");
    assert!(
        b.get(&over.id).await.unwrap().is_none(),
        "nothing was stored"
    );
    // A resend of a keyed submit is its task, however full the pool is.
    let resend = b
        .submit(&task(0, 6_000), REQUEST, Some(&idem("k")), (3, None))
        .await;
    assert_eq!(resend.unwrap(), Inserted::Existing(first.id.clone()));
    // A task that ends makes room.
    let mut c = b.claim().await.unwrap().unwrap();
    c.task.status = TaskStatus::Failed;
    b.finish(&c.task).await.unwrap();
    assert_eq!(
        b.submit(&over, REQUEST, None, (3, None)).await.unwrap(),
        Inserted::New
    );
}

#[tokio::test]
async fn one_key_fills_only_its_share_of_the_pool_and_each_end_gives_a_place_back() {
    let (_redis, a, b) = two_routers().await;
    let limits = (0, Some(2));
    let mine: Vec<_> = (0..2).map(|i| task(0, 1_000 + i)).collect();
    for t in &mine {
        assert_eq!(
            a.submit(t, REQUEST, None, limits).await.unwrap(),
            Inserted::New
        );
    }
    // Through either router: the count is the pool's.
    let over = task(0, 5_000);
    let r = b.submit(&over, REQUEST, None, limits).await;
    assert!(matches!(r, Err(QueueError::KeyFull(2))), "{r:?}");
    assert!(
        b.get(&over.id).await.unwrap().is_none(),
        "nothing was stored"
    );
    // Another key is not held up by this one.
    let mut theirs = task(0, 6_000);
    theirs.owner = "key-b".into();
    assert_eq!(
        b.submit(&theirs, REQUEST, None, limits).await.unwrap(),
        Inserted::New
    );
    // A cancel and a finish each give one place back, once.
    b.cancel(&mine[0].id, None).await.unwrap();
    b.cancel(&mine[0].id, None).await.unwrap();
    assert_eq!(
        b.submit(&over, REQUEST, None, limits).await.unwrap(),
        Inserted::New
    );
    let again = task(0, 7_000);
    let r = a.submit(&again, REQUEST, None, limits).await;
    assert!(
        matches!(r, Err(QueueError::KeyFull(2))),
        "a second cancel gave nothing back: {r:?}"
    );
    let mut c = a.claim().await.unwrap().unwrap();
    assert_eq!(c.task.id, mine[1].id);
    c.task.status = TaskStatus::Succeeded;
    a.finish(&c.task).await.unwrap();
    a.finish(&c.task).await.unwrap();
    assert_eq!(
        a.submit(&again, REQUEST, None, limits).await.unwrap(),
        Inserted::New
    );
    // No bound: the key may queue more.
    assert_eq!(
        a.submit(&task(0, 8_000), REQUEST, None, (0, None))
            .await
            .unwrap(),
        Inserted::New
    );
}

#[tokio::test]
async fn finished_tasks_go_after_keep_with_their_keys_and_unfinished_ones_stay() {
    let (_redis, a, b) = two_routers().await;
    let done = task(0, 1_000);
    a.submit(&done, REQUEST, Some(&idem("k")), (0, None))
        .await
        .unwrap();
    let cancelled = task(0, 2_000);
    a.submit(&cancelled, REQUEST, None, (0, None))
        .await
        .unwrap();
    let open = task(0, 3_000);
    a.submit(&open, REQUEST, None, (0, None)).await.unwrap();
    let mut c = a.claim().await.unwrap().unwrap();
    assert_eq!(c.task.id, done.id);
    c.task.status = TaskStatus::Succeeded;
    a.finish(&c.task).await.unwrap();
    b.cancel(&cancelled.id, None).await.unwrap();

    assert_eq!(
        b.prune(Duration::from_secs(3600)).await.unwrap(),
        0,
        "kept for keep"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.prune(Duration::from_millis(1)).await.unwrap(), 2);
    assert!(a.get(&done.id).await.unwrap().is_none());
    assert!(a.get(&cancelled.id).await.unwrap().is_none());
    assert!(
        a.get(&open.id).await.unwrap().is_some(),
        "unfinished tasks stay"
    );
    // Its key went with it: the same key makes a new task now.
    let again = task(0, 4_000);
    assert_eq!(
        a.submit(&again, REQUEST, Some(&idem("k")), (0, None))
            .await
            .unwrap(),
        Inserted::New
    );
    let ids: Vec<_> = a
        .list(None, 10, None, None)
        .await
        .unwrap()
        .tasks
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, [again.id, open.id]);
}
