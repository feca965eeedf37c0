//! What another hand left in Redis is outside input: refused, naming the task, never a
//! panic, never a wedged queue, never copied out when it is huge.

use labrouter::cluster::tasks::QueueError;
use labrouter::store::tasks::Inserted;
use labrouter::task::TaskId;

use crate::pool::{task, two_routers, MAX_VALUE, REQUEST};

fn key(id: &TaskId) -> String {
    format!("lab:tasks:t:{id}")
}

fn spoiled(r: Result<impl std::fmt::Debug, QueueError>, id: &TaskId, says: &str) {
    match r {
        Err(QueueError::Spoiled(s)) => {
            assert_eq!(s.id, id.as_str());
            assert!(s.why.contains(says), "expected {says:?} in: {}", s.why);
        }
        other => panic!("expected {id} to be spoiled ({says}), got {other:?}"),
    }
}

/// A field, the value written there (or, for `doc`, a text replaced in the doc as it was
/// written), and what the error must say.
type Case = (&'static str, String, Option<(String, String)>, &'static str);

#[tokio::test]
async fn spoiled_fields_are_refused_naming_the_task_and_the_field() {
    let (redis, a, _b) = two_routers().await;
    let mut c = redis.client().await;
    let huge = "x".repeat(MAX_VALUE + 1);
    let doc = |from: &str, to: &str| (from.to_string(), to.to_string());
    let cases: Vec<Case> = vec![
        ("doc", "{not json".into(), None, "doc:"),
        ("req", huge.clone(), None, "its field req is 1048577 bytes"),
        ("status", "exploded".into(), None, "status"),
        ("seq", "-5".into(), None, "seq"),
        ("lapses", "1,2,3".into(), None, "more than two"),
        ("lapses", "soon".into(), None, "lapses"),
        (
            "doc",
            String::new(),
            Some(doc("\"priority\":0", "\"priority\":1e30")),
            "doc:",
        ),
        (
            "doc",
            String::new(),
            Some(doc("\"priority\":0", "\"priority\":101")),
            "priority 101",
        ),
        (
            "doc",
            String::new(),
            Some(doc("\"created_ms\":1000", "\"created_ms\":-1")),
            "out of range",
        ),
        (
            "doc",
            String::new(),
            Some(doc("\"max_attempts\":3", "\"max_attempts\":3,\"x\":1")),
            "unknown field",
        ),
    ];
    for (field, value, edit, says) in cases {
        let t = task(0, 1_000);
        a.submit(&t, REQUEST, None, (0, None)).await.unwrap();
        let value = match edit {
            None => value,
            Some((from, to)) => {
                let doc = c.ok(&["HGET", &key(&t.id), "doc"]).await;
                let doc = doc.text().unwrap().to_string();
                assert!(doc.contains(&from), "{doc}");
                doc.replace(&from, &to)
            }
        };
        c.hset(&key(&t.id), &[(field, &value)]).await;
        spoiled(a.get(&t.id).await, &t.id, says);
        // Claiming it refuses it too (or passes over a status no task has), and takes it
        // out of the queue: it never wedges the head.
        match a.claim().await {
            Err(_) | Ok(None) => {}
            Ok(Some(c)) => panic!("{field}: a spoiled task was claimed: {:?}", c.task.id),
        }
        assert!(a.claim().await.unwrap().is_none(), "{field}: it comes back");
    }
}

#[tokio::test]
async fn a_key_of_another_type_is_named_and_the_queue_goes_on_past_it() {
    let (redis, a, b) = two_routers().await;
    let mut c = redis.client().await;
    let good = task(0, 2_000);
    a.submit(&good, REQUEST, None, (0, None)).await.unwrap();
    let stray = TaskId::new();
    c.ok(&["SET", &key(&stray), "not a task"]).await;
    c.ok(&["ZADD", "lab:tasks:ready", "0", stray.as_str()])
        .await;
    c.ok(&["ZADD", "lab:tasks:all", "0", stray.as_str()]).await;
    spoiled(b.get(&stray).await, &stray, "holds a string, not a task");
    spoiled(b.claim().await, &stray, "holds a string");
    assert_eq!(b.claim().await.unwrap().unwrap().task.id, good.id);
    // The list leaves it out and goes on.
    let page = b.list(None, 10, None, None).await.unwrap();
    let ids: Vec<_> = page.tasks.iter().map(|t| &t.id).collect();
    assert_eq!(ids, [&good.id]);
    // An idempotency key that holds no task is refused, not believed.
    c.ok(&["SET", "lab:tasks:idem:k", "garbage"]).await;
    let idem = labrouter::store::tasks::Idem {
        key: "k".into(),
        fingerprint: "f".into(),
    };
    let t = task(0, 3_000);
    let r = a.submit(&t, REQUEST, Some(&idem), (0, None)).await;
    assert!(
        matches!(&r, Err(QueueError::Spoiled(s)) if s.why.contains("idempotency key holds no task")),
        "{r:?}"
    );
    assert!(a.get(&t.id).await.unwrap().is_none(), "nothing was stored");
    // A counter another hand spoiled refuses the submit, storing nothing.
    c.ok(&["SET", "lab:tasks:seq", "many"]).await;
    assert!(a.submit(&t, REQUEST, None, (0, None)).await.is_err());
    assert!(a.get(&t.id).await.unwrap().is_none(), "nothing was stored");
    // So do per-key counts of another type; a count that is no number counts as none.
    c.ok(&["DEL", "lab:tasks:seq"]).await;
    c.ok(&["SET", "lab:tasks:open_by", "garbage"]).await;
    let r = a.submit(&t, REQUEST, None, (0, Some(1))).await;
    assert!(
        matches!(&r, Err(QueueError::Spoiled(s)) if s.why.contains("owner counts hold a string")),
        "{r:?}"
    );
    assert!(a.get(&t.id).await.unwrap().is_none(), "nothing was stored");
    c.ok(&["DEL", "lab:tasks:open_by"]).await;
    c.ok(&["HSET", "lab:tasks:open_by", "key-a", "lots"]).await;
    assert_eq!(
        a.submit(&t, REQUEST, None, (0, Some(1))).await.unwrap(),
        Inserted::New
    );
}
