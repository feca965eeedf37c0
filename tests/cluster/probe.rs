//! One probe for the whole pool: after the cooldown a router must win the probe lease before
//! it sends the probe; the others answer `probe_in_flight` (the fallback serves) until the
//! verdict is published, and then every router holds it.

use std::time::Duration;

use labrouter::sim::Fault;
use serde_json::Value;
use tokio::time::Instant;

use super::lab::{Lab, A, ADOPT_WITHIN, B, POLL, PROBE_LEASE, RECONNECT_WITHIN, SHORT};
use super::router::{sample, Reply};

const ALL: [&str; 3] = ["r1", "r2", "r3"];

/// Three routers that all hold a-box open, as decided by r1 (cooldown 1 s), with a-box
/// still failing.
async fn a_open_everywhere(test: &str) -> Lab {
    let lab = Lab::start(test, 3, SHORT).await;
    lab.until_cluster(&ALL, "up", RECONNECT_WITHIN).await;
    lab.trip_a("r1").await;
    lab.until_adopted(&["r2", "r3"], "r1").await;
    lab
}

/// The router whose `labrouter_cluster_leases_total{machine="a-box",result="won"}` counts
/// one; asserts the leases won across `nodes` add up to one.
async fn only_lease_winner(lab: &Lab, nodes: &[&str]) -> String {
    let mut winners = Vec::new();
    for node in nodes {
        let won = sample(
            &lab.metrics(node).await,
            "labrouter_cluster_leases_total",
            &[("machine", "a-box"), ("result", "won")],
        );
        if won > 0.0 {
            winners.push((node.to_string(), won));
        }
    }
    assert!(
        winners.len() == 1 && winners[0].1 == 1.0,
        "exactly one lease won in the pool: {winners:?}"
    );
    winners.remove(0).0
}

/// Once a-box's cooldown is over everywhere, 10 requests to each router at once; asserts
/// exactly one of the 30 reached a-box (the pool's probe). The replies.
async fn burst_of_30_one_probe(lab: &Lab) -> Vec<Reply> {
    lab.until_cooldown_over(&ALL, Duration::from_secs(2)).await;
    let a0 = lab.a.work_hits();
    let replies = lab.burst(&ALL, 10, "shared").await;
    assert_eq!(
        lab.a.work_hits() - a0,
        1,
        "30 requests over three routers, one probe on the wire: {replies:#?}\n{}",
        lab.diagnose().await
    );
    replies
}

fn count(replies: &[Reply], what: impl Fn(&Reply) -> bool) -> usize {
    replies.iter().filter(|r| what(r)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_cooldown_one_probe_for_the_whole_pool_closes_it_everywhere() {
    let lab = a_open_everywhere("probe-ok").await;
    // a-box is healthy again but slow to answer: the probe is still in flight while the
    // other 29 requests arrive.
    lab.a.set(Fault::SlowFirstByte(Duration::from_millis(600)));
    let replies = burst_of_30_one_probe(&lab).await;
    assert_eq!(count(&replies, |r| r.status == 200), 30, "{replies:#?}");
    assert_eq!(count(&replies, |r| r.served_by(A)), 1, "{replies:#?}");
    assert_eq!(
        count(&replies, |r| r.served_by(B)
            && r.skipped_for(A, "probe_in_flight")),
        29,
        "every other request fell back as probe_in_flight: {replies:#?}"
    );

    let views = lab
        .until_machine(&ALL, "a-box", "closed", ADOPT_WITHIN, |m| {
            m["state"] == "closed"
        })
        .await;
    let winner = only_lease_winner(&lab, &ALL).await;
    for (node, view) in ALL.iter().zip(&views) {
        assert_eq!(view["decided_by"], winner.as_str(), "{node}: {view}");
    }

    // Closed for real: each router now sends a-box its request.
    let a1 = lab.a.work_hits();
    let replies = lab.burst(&ALL, 1, "shared").await;
    assert_eq!(count(&replies, |r| r.served_by(A)), 3, "{replies:#?}");
    assert_eq!(lab.a.work_hits() - a1, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_probe_reopens_everywhere_with_the_doubled_cooldown() {
    let lab = a_open_everywhere("probe-fail").await;
    // Still dead, and slow to say so: the probe hangs until first_byte (1 s) and the
    // liveness check after it fail, so it is in flight while the other 29 arrive.
    lab.a.set(Fault::Hang);
    let replies = burst_of_30_one_probe(&lab).await;
    let probed = lab.a.work_hits();
    assert_eq!(
        count(&replies, |r| r.served_by(B)),
        30,
        "the fallback served all, the failed probe's request too: {replies:#?}"
    );
    assert_eq!(
        count(&replies, |r| r.skipped_for(A, "probe_in_flight")),
        29,
        "{replies:#?}"
    );

    let views = lab
        .until_machine(
            &ALL,
            "a-box",
            "open again with the cooldown doubled to 2 s",
            ADOPT_WITHIN,
            |m| m["state"] == "open" && m["cooldown_ms"] == 2000,
        )
        .await;
    let winner = only_lease_winner(&lab, &ALL).await;
    for (node, view) in ALL.iter().zip(&views) {
        assert_eq!(view["decided_by"], winner.as_str(), "{node}: {view}");
        let left = view["cooldown_left_ms"].as_u64().unwrap();
        assert!(left > 0 && left <= 2000, "{node}: {view}");
    }

    // Open everywhere: nobody tries a-box again inside the new cooldown.
    let replies = lab.burst(&ALL, 2, "shared").await;
    assert_eq!(
        count(&replies, |r| r.served_by(B)
            && r.skipped_for(A, "circuit_open")),
        6,
        "{replies:#?}"
    );
    assert_eq!(lab.a.work_hits(), probed, "still the one probe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_holder_killed_mid_probe_is_replaced_by_exactly_one_other_probe() {
    let mut lab = a_open_everywhere("lease").await;
    lab.a.set(Fault::Hang);
    lab.until_cooldown_over(&ALL, Duration::from_secs(2)).await;

    // One request to each router: one wins the lease and its probe hangs on a-box.
    let a0 = lab.a.work_hits();
    let first = lab.spawn_burst(&ALL, 1, "shared");
    let key = lab.key("probe", &lab.a);
    let mut redis = lab.redis.client().await;
    let mut lease = None;
    lab.until(
        "a probe lease taken and its probe on the wire",
        Duration::from_secs(1),
        async || {
            lease = redis.get(&key).await;
            lease.is_some() && lab.a.work_hits() > a0
        },
    )
    .await;
    let leased_at = Instant::now();
    let lease = lease.unwrap();
    let (holder, generation) = lease
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("the lease is <node>:<generation>: {lease:?}"));
    assert!(ALL.contains(&holder), "the lease names a router: {lease:?}");
    assert!(generation.parse::<u64>().is_ok(), "{lease:?}");
    assert_eq!(lab.a.work_hits() - a0, 1, "one probe");

    // The holder dies mid-probe; a-box answers again (slowly, so the next probe is seen in
    // flight by the requests beside it).
    let holder = holder.to_string();
    lab.kill9(&holder);
    lab.a.set(Fault::SlowFirstByte(Duration::from_millis(600)));
    let first = first.join_all().await;
    assert_eq!(
        count(&first, |r| r.served_by(B)),
        2,
        "the two other routers fell back at once: {first:#?}"
    );

    // The survivors keep asking; once the dead holder's lease expires (2 s), exactly one of
    // them probes.
    let survivors = lab.nodes();
    let survivors: Vec<&str> = survivors.iter().map(String::as_str).collect();
    let deadline = leased_at + PROBE_LEASE + Duration::from_millis(1500);
    let last = loop {
        let replies = lab.burst(&survivors, 3, "shared").await;
        assert_eq!(count(&replies, |r| r.status == 200), 6, "{replies:#?}");
        if lab.a.work_hits() - a0 >= 2 {
            break replies;
        }
        assert!(
            Instant::now() < deadline,
            "no survivor probed within the lease ({PROBE_LEASE:?}) and 1.5 s\n{}",
            lab.logs()
        );
        tokio::time::sleep(POLL).await;
    };
    let took_over = leased_at.elapsed();
    assert_eq!(
        lab.a.work_hits() - a0,
        2,
        "exactly one other probe after the holder died: {last:#?}"
    );
    assert_eq!(count(&last, |r| r.served_by(A)), 1, "{last:#?}");
    assert_eq!(
        count(&last, |r| r.served_by(B)
            && r.skipped_for(A, "probe_in_flight")),
        5,
        "{last:#?}"
    );

    // Nobody is left half-open: the survivors close, and the dead holder's lease is gone.
    let views = lab
        .until_machine(&survivors, "a-box", "closed", ADOPT_WITHIN, |m| {
            m["state"] == "closed"
        })
        .await;
    let deciders: Vec<&Value> = views.iter().map(|v| &v["decided_by"]).collect();
    assert!(
        deciders.iter().all(|d| *d == deciders[0])
            && deciders[0].as_str().is_some_and(|n| survivors.contains(&n)),
        "one survivor decided the close, and both hold its verdict: {deciders:?}"
    );
    assert_eq!(
        lab.a.work_hits() - a0,
        2,
        "no third probe (took over after {took_over:?})"
    );
    assert_ne!(
        redis.get(&key).await.as_deref(),
        Some(lease.as_str()),
        "the dead holder's lease expired"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_never_waits_out_its_own_old_lease() {
    // The lease r1 held in an earlier life (restarted mid-probe), or the one its last
    // probe is just releasing, carries r1's own token: r1 takes it over and probes now,
    // where another router's token would hold it back for the lease's whole life.
    let lab = Lab::start("own-lease", 1, SHORT).await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    lab.trip_a("r1").await;
    let mut redis = lab.redis.client().await;
    let generation = redis
        .get(&lab.key("gen", &lab.a))
        .await
        .expect("r1's verdict has a generation");
    let lease = lab.key("probe", &lab.a);
    let token = format!("r1:{generation}");
    redis.ok(&["SET", &lease, &token, "PX", "30000"]).await;
    lab.a.set(Fault::Ok);
    lab.until_cooldown_over(&["r1"], Duration::from_secs(2))
        .await;

    let a0 = lab.a.work_hits();
    let reply = lab.ask("r1", "shared").await;
    assert!(reply.served_by(A), "r1 probed at once: {reply:#?}");
    assert_eq!(lab.a.work_hits() - a0, 1);
    lab.until_machine(&["r1"], "a-box", "closed", ADOPT_WITHIN, |m| {
        m["state"] == "closed"
    })
    .await;
    // The lease goes with the verdict it produced, which the worker publishes just after.
    let until = Instant::now() + ADOPT_WITHIN;
    while redis.get(&lease).await.is_some() {
        assert!(
            Instant::now() < until,
            "the lease went with the verdict it produced"
        );
        tokio::time::sleep(POLL).await;
    }
}
