//! Tasks in SQLite: a finished task's row is final, and finished tasks stay bounded.

use std::time::Duration;

use super::*;
use crate::outcome::Endpoint;
use crate::store::{Msg, Store};
use crate::task::TaskResult;

fn task(finished_ms: Option<i64>, after: Vec<TaskId>) -> Task {
    Task {
        seq: 0,
        id: TaskId::new(),
        owner: String::new(),
        status: if finished_ms.is_some() {
            TaskStatus::Succeeded
        } else {
            TaskStatus::Queued
        },
        endpoint: Endpoint::Chat,
        route: None,
        accept: Accept::Chain,
        priority: 0,
        after,
        metadata: BTreeMap::new(),
        created_ms: 1,
        started_ms: None,
        finished_ms,
        deadline_ms: i64::MAX,
        attempts_used: 0,
        max_attempts: 3,
        interrupted: 0,
        attempts: Vec::new(),
        waiting_for: None,
        result: finished_ms.map(|_| TaskResult::new(200, "m@box".into(), &[b'1'; 1000])),
        error: None,
        callback: None,
    }
}

fn insert(store: &Store, t: &Task, request: &'static [u8]) {
    let (ack, done) = oneshot::channel();
    let msg = Msg::TaskInsert(Box::new(TaskInsert {
        task: t.clone(),
        request: Bytes::from_static(request),
        idem: None,
        ack,
    }));
    store.sender().send(msg).unwrap();
    assert_eq!(done.blocking_recv().unwrap(), Ok(Inserted::New));
}

fn write(store: &Store, tasks: Vec<Task>) {
    let msg = Msg::TaskWrite(Box::new(TaskWrite { tasks, ack: None }));
    store.sender().send(msg).unwrap();
    assert!(store.flush(Duration::from_secs(5)));
}

fn totals(store: &Store) -> (i64, i64, i64, i64) {
    store
        .read(|c| {
            let kept: (i64, i64) = c.query_row(
                "SELECT finished, finished_bytes FROM task_totals",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let counted: (i64, i64) = c.query_row(
                "SELECT COUNT(*), IFNULL(SUM(octet_length(request) + IFNULL(octet_length(result), 0)
                    + octet_length(attempts) + IFNULL(octet_length(error), 0)
                    + octet_length(metadata) + octet_length(after)), 0)
                 FROM tasks WHERE finished_ms IS NOT NULL",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok((kept.0, kept.1, counted.0, counted.1))
        })
        .unwrap()
}

#[test]
fn a_finished_task_is_never_written_again_and_keeps_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    let mut t = task(None, Vec::new());
    insert(&store, &t, b"{\"messages\":[]}");
    t.status = TaskStatus::Cancelled;
    t.finished_ms = Some(5);
    let mut late = t.clone();
    late.status = TaskStatus::Running;
    late.finished_ms = None;
    // The cancel lands first; a running mark decided before it arrives after.
    write(&store, vec![t.clone()]);
    write(&store, vec![late]);
    let id = t.id.clone();
    let stored = store.read(move |c| task_and_request(c, &id)).unwrap();
    assert_eq!(stored.0.map(|t| t.status), Some(TaskStatus::Cancelled));
    assert_eq!(
        stored.1.as_deref(),
        Some(&b""[..]),
        "the request is dropped"
    );
    let (kept, kept_bytes, count, bytes) = totals(&store);
    assert_eq!((kept, kept_bytes), (count, bytes));
}

fn task_and_request(
    c: &Connection,
    id: &TaskId,
) -> rusqlite::Result<(Option<Task>, Option<Bytes>)> {
    Ok((super::task(c, id, None)?, super::request(c, id)?))
}

#[test]
fn finished_tasks_are_bounded_oldest_first_and_a_parent_still_needed_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    let finished: Vec<Task> = (1..=5).map(|n| task(Some(n * 1000), Vec::new())).collect();
    for t in &finished {
        insert(&store, t, b"{}");
    }
    // An unfinished follow-up still needs the oldest.
    let child = task(None, vec![finished[0].id.clone()]);
    insert(&store, &child, b"{}");
    let bound = FinishedBound {
        count: 2,
        bytes: u64::MAX,
    };
    store.sender().send(Msg::TaskBound(bound)).unwrap();
    assert!(store.flush(Duration::from_secs(5)));
    let left: Vec<TaskId> = store
        .read(|c| list(c, None, Some(TaskStatus::Succeeded), None, 100))
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(left, [finished[4].id.clone(), finished[0].id.clone()]);
    let (kept, kept_bytes, count, bytes) = totals(&store);
    assert_eq!(
        (kept, kept_bytes),
        (count, bytes),
        "the triggers keep exact totals"
    );
    // Bytes bound too: one task's worth left.
    let bound = FinishedBound {
        count: 100,
        bytes: (bytes / 2) as u64,
    };
    store.sender().send(Msg::TaskBound(bound)).unwrap();
    assert!(store.flush(Duration::from_secs(5)));
    let (kept, _, _, bytes_now) = totals(&store);
    assert_eq!(kept, 1, "only the parent a follow-up needs");
    assert!(bytes_now < bytes);
}

#[test]
fn a_finished_task_whose_callback_is_still_pending_is_not_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    let mut pending = task(Some(1000), Vec::new());
    pending.callback = Some(crate::task::Callback {
        url: "http://127.0.0.1:9/hook".into(),
        state: Delivery::Pending,
        attempts: 0,
        last_error: None,
    });
    let plain = task(Some(2000), Vec::new());
    insert(&store, &pending, b"{}");
    insert(&store, &plain, b"{}");
    store.prune_tasks(Duration::ZERO);
    let bound = FinishedBound {
        count: 1,
        bytes: u64::MAX,
    };
    store.sender().send(Msg::TaskBound(bound)).unwrap();
    assert!(store.flush(Duration::from_secs(5)));
    let left: Vec<TaskId> = store
        .read(|c| list(c, None, None, None, 100))
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(left, [pending.id.clone()], "its delivery still reads it");
}

#[test]
fn a_task_that_ends_at_its_submit_keeps_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(dir.path()).unwrap();
    let mut t = task(Some(5), Vec::new());
    t.status = TaskStatus::Cancelled;
    insert(&store, &t, b"{\"messages\":[]}");
    let id = t.id.clone();
    let (_, request) = store.read(move |c| task_and_request(c, &id)).unwrap();
    assert_eq!(request.as_deref(), Some(&b""[..]));
}
