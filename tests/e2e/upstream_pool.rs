//! The hot path's own connection pool (src/upstream/hot.rs): a machine asked again and
//! again is asked on one kept-alive connection, a stream's connection is asked again once
//! the stream ended, and a connection the machine closed while it sat idle costs no failure
//! and no fallback. The sim counts the connections open to it.

use labrouter::sim::Fault;

use crate::support::{header, TestLab};

#[tokio::test]
async fn requests_one_after_another_ride_one_kept_alive_connection() {
    let t = TestLab::start().await;
    for _ in 0..10 {
        let r = t.chat("code", "hi").await;
        assert_eq!(r.status(), 200);
        r.text().await.unwrap();
    }
    // A stream's connection comes back once the stream ended, and is asked again.
    let r = t.chat_stream("code", "hi").await;
    assert_eq!(r.status(), 200);
    let streamed = r.text().await.unwrap();
    assert!(streamed.contains("[DONE]"), "{streamed}");
    let r = t.chat("code", "hi").await;
    assert_eq!(r.status(), 200);
    r.text().await.unwrap();
    assert_eq!(t.work(), (12, 0, 0));
    assert_eq!(t.gpu.open_connections(), 1, "one connection, kept alive");
}

#[tokio::test]
async fn a_connection_the_machine_dropped_while_idle_is_no_failure() {
    let t = TestLab::start().await;
    let r = t.chat("code", "hi").await;
    assert_eq!(r.status(), 200);
    r.text().await.unwrap();
    assert_eq!(t.gpu.open_connections(), 1);
    // The machine restarts: its connections are reset, and it listens again.
    t.gpu.set(Fault::Refuse);
    t.gpu.set(Fault::Ok);
    for _ in 0..3 {
        let r = t.chat("code", "hi").await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-labrouter-target"), "coder-gpu@gpu-box");
        r.text().await.unwrap();
    }
    assert_eq!(t.work(), (4, 0, 0), "no attempt failed over");
    assert_eq!(t.state("gpu-box"), "closed");
    assert_eq!(
        t.gpu.open_connections(),
        1,
        "one new connection, kept alive"
    );
}
