//! Get, list and cancel on any router.

use labrouter::cluster::tasks::{Cancelled, Ended};
use labrouter::outcome::{TaskCode, TaskStatus};

use crate::pool::{task, two_routers, REQUEST};

#[tokio::test]
async fn a_task_submitted_on_a_is_read_listed_and_cancelled_on_b() {
    let (_redis, a, b) = two_routers().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut t = task(0, 1_000 + i);
        if i == 4 {
            t.owner = "key-b".into();
        }
        a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
        ids.push(t.id);
    }
    // Newest first, by owner, in pages.
    let page = b.list(None, 2, None, Some("key-a")).await.unwrap();
    let got: Vec<_> = page.tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(got, [ids[3].clone(), ids[2].clone()]);
    let next = page.next_before.unwrap();
    let page = b.list(Some(&next), 10, None, Some("key-a")).await.unwrap();
    let got: Vec<_> = page.tasks.iter().map(|t| t.id.clone()).collect();
    assert_eq!(got, [ids[1].clone(), ids[0].clone()]);
    assert_eq!(page.next_before, None);
    assert!(page.tasks.iter().all(|t| t.result.is_none()));

    // Another owner's task is not there for key-a.
    assert_eq!(
        b.cancel(&ids[4], Some("key-a")).await.unwrap(),
        Cancelled::Missing
    );
    // A running task is cancelled from any router; its holder learns it at its renew.
    let running = a.claim().await.unwrap().unwrap();
    assert_eq!(
        b.cancel(&running.task.id, Some("key-a")).await.unwrap(),
        Cancelled::From(TaskStatus::Running)
    );
    assert!(!a.renew(&running.task, &running.token).await.unwrap());
    let mut late = running.task.clone();
    late.status = TaskStatus::Succeeded;
    assert_eq!(
        a.finish(&late).await.unwrap(),
        Ended::Dropped(TaskStatus::Cancelled)
    );
    let shown = b.get(&running.task.id).await.unwrap().unwrap();
    assert_eq!(shown.task.status, TaskStatus::Cancelled);
    assert_eq!(shown.task.error.unwrap().code, TaskCode::Cancelled);
    assert_eq!(
        b.cancel(&running.task.id, None).await.unwrap(),
        Cancelled::AlreadyEnded(TaskStatus::Cancelled)
    );
    let cancelled = b
        .list(None, 10, Some(TaskStatus::Cancelled), None)
        .await
        .unwrap();
    assert_eq!(cancelled.tasks.len(), 1);
}
