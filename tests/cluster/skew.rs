//! Clock skew between hosts never lengthens or shortens a shared cooldown: a verdict travels
//! as the time left (Redis's `PTTL`), and every router counts it on its own monotonic clock.
//! Here two routers run with their wall clocks 30 s ahead and 30 s behind (libfaketime).

use std::time::{Duration, SystemTime};

use labrouter::sim::Fault;

use super::lab::{Lab, A, ADOPT_WITHIN, B, RECONNECT_WITHIN, SHORT};

const ALL: [&str; 3] = ["r1", "r2", "r3"];

/// How far `node`'s wall clock is from ours, by the time it gives in `/status.cluster.since`
/// (whole seconds; `since` was stamped at most a few seconds before this reads it).
async fn clock_offset(lab: &Lab, node: &str) -> i64 {
    let since = lab.cluster(node).await["since"]
        .as_str()
        .expect("cluster.since")
        .to_string();
    let ts: jiff::Timestamp = since.parse().expect("RFC 3339");
    let now = jiff::Timestamp::try_from(SystemTime::now()).unwrap();
    ts.as_second() - now.as_second()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_30s_ahead_and_behind_hold_a_peers_verdict_for_its_duration() {
    let mut lab = Lab::start("skew", 1, SHORT).await;
    lab.add_skewed_router("r2", "+30s").await;
    lab.add_skewed_router("r3", "-30s").await;
    lab.until_cluster(&ALL, "up", RECONNECT_WITHIN).await;
    // The skew is real: each router's wall clock says so.
    let (ahead, behind) = (
        clock_offset(&lab, "r2").await,
        clock_offset(&lab, "r3").await,
    );
    assert!((25..=31).contains(&ahead), "r2 is 30 s ahead: {ahead} s");
    assert!(
        (-35..=-29).contains(&behind),
        "r3 is 30 s behind: {behind} s"
    );

    lab.trip_a("r1").await;
    lab.until_adopted(&["r2", "r3"], "r1").await;
    // What is left is r1's 1 s cooldown, not 31 s, and not already over.
    for node in ["r2", "r3"] {
        let m = lab.machine(node, "a-box").await;
        let left = m["cooldown_left_ms"].as_u64().unwrap();
        assert!(
            left > 0 && left <= 1000,
            "{node}: {left} ms left of a 1 s cooldown: {m}"
        );
    }
    let a0 = lab.a.work_hits();
    for node in ["r2", "r3"] {
        let reply = lab.ask(node, "shared").await;
        assert!(
            reply.served_by(B) && reply.skipped_for(A, "circuit_open"),
            "{node} holds the verdict: {reply:#?}"
        );
    }
    assert_eq!(
        lab.a.work_hits(),
        a0,
        "nothing reached a-box while it was open"
    );

    // And it ends on time everywhere: within the cooldown plus polling slack, not 30 s on.
    lab.a.set(Fault::Ok);
    lab.until_cooldown_over(&["r2", "r3"], Duration::from_secs(2))
        .await;
    let reply = lab.ask("r3", "shared").await;
    assert!(
        reply.served_by(A),
        "r3 probes once the second is over: {reply:#?}"
    );
    lab.until_machine(&ALL, "a-box", "closed", ADOPT_WITHIN, |m| {
        m["state"] == "closed"
    })
    .await;
}
