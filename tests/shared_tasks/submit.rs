//! Submits: stored before acknowledged, one task per pool-wide Idempotency-Key.

use labrouter::store::tasks::{Idem, Inserted};

use crate::pool::{task, two_routers, REQUEST};

fn idem(key: &str, fingerprint: &str) -> Idem {
    Idem {
        key: key.into(),
        fingerprint: fingerprint.into(),
    }
}

#[tokio::test]
async fn two_routers_submitting_one_key_at_once_make_one_task() {
    let (_redis, a, b) = two_routers().await;
    for round in 0..20 {
        let key = idem(&format!("k{round}"), "f1");
        let (ta, tb) = (task(0, 1_000), task(0, 1_000));
        let (ra, rb) = tokio::join!(
            a.submit(&ta, REQUEST, Some(&key), (0, None)),
            b.submit(&tb, REQUEST, Some(&key), (0, None))
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let won = match (&ra, &rb) {
            (Inserted::New, Inserted::Existing(id)) => {
                assert_eq!(id, &ta.id);
                &ta
            }
            (Inserted::Existing(id), Inserted::New) => {
                assert_eq!(id, &tb.id);
                &tb
            }
            other => panic!("round {round}: expected one new task, got {other:?}"),
        };
        let lost = if won.id == ta.id { &tb } else { &ta };
        assert!(a.get(&lost.id).await.unwrap().is_none(), "no second task");
        assert!(b.get(&won.id).await.unwrap().is_some());
        // The same key with another body is refused, on either router.
        let (other, other_key) = (task(0, 1_000), idem(&format!("k{round}"), "f2"));
        let again = a.submit(&other, REQUEST, Some(&other_key), (0, None)).await;
        assert_eq!(again.unwrap(), Inserted::KeyReused);
    }
    let page = a.list(None, 100, None, None).await.unwrap();
    assert_eq!(page.tasks.len(), 20, "one task per key");
}

#[tokio::test]
async fn a_task_reads_back_as_it_was_submitted() {
    let (_redis, a, b) = two_routers().await;
    let t = task(5, 1_700_000_000_000);
    assert_eq!(
        a.submit(&t, REQUEST, None, (0, None)).await.unwrap(),
        Inserted::New
    );
    let got = b.get(&t.id).await.unwrap().unwrap();
    let mut want = t.clone();
    want.seq = got.task.seq;
    assert_eq!(got.task, want);
    assert_eq!(got.request.as_deref(), Some(REQUEST));
}
