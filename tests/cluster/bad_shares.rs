//! One bad value in Redis spoils one shared machine, never the link: a generation counter
//! that is no integer, a verdict key of the wrong type, a 30 MB `reason`, a probe key that is
//! no lease. Each is planted on a-box's keys while two routers are up; then both re-read every verdict (the test cuts
//! their subscriptions, so they reconnect and re-sync at once) and r1 publishes verdicts on
//! a-box and c-box.
//!
//! What must hold: both stay `up` (no "Redis is down" but the cuts the test made), c-box's
//! verdict still reaches r2, which then sends c-box nothing (the wire), a-box's keys are
//! named in `/status.cluster` and in the log once however often they are read, and reading
//! the 30 MB field costs a router no memory.

use labrouter::sim::Fault;

use super::lab::{verdict_is, Lab, ADOPT_WITHIN, B, C, LONG, RECONNECT_WITHIN};
use super::redis::Resp;

const BOTH: [&str; 2] = ["r1", "r2"];
/// The log line of a router that lost Redis.
const DOWN: &str = "cluster: Redis is down";
/// The log line of a router (re)connected and re-synced.
const SYNCED: &str = "verdicts re-synced";
/// The log line of a share whose keys cannot be used.
const UNUSABLE: &str = "keys in Redis are unusable";
/// What a router may grow by, at its peak, while it reads a share holding 30 MB: a bound
/// far below the value, far above a reconnect's own buffers.
const PEAK_GROWTH: u64 = 12 << 20;

/// A bad value planted on a-box's keys.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// `{prefix}:gen:{a-box}` holds text: `INCR` refuses it.
    Generation,
    /// `{prefix}:verdict:{a-box}` is a list: `HSET` and `HGETALL` refuse it.
    WrongType,
    /// The verdict hash of a-box holds a `reason` of 30 MB.
    HugeReason,
    /// `{prefix}:probe:{a-box}` is a list, no lease.
    ProbeKey,
}

impl Bad {
    async fn plant(self, redis: &mut Resp, lab: &Lab) {
        match self {
            Bad::Generation => {
                redis
                    .ok(&["SET", &lab.key("gen", &lab.a), "notanumber"])
                    .await;
            }
            Bad::WrongType => {
                redis
                    .ok(&["RPUSH", &lab.key("verdict", &lab.a), "open", "by", "nobody"])
                    .await;
            }
            Bad::ProbeKey => {
                redis
                    .ok(&["RPUSH", &lab.key("probe", &lab.a), "mine"])
                    .await;
            }
            Bad::HugeReason => {
                let g = redis.incr(&lab.key("gen", &lab.a)).await.to_string();
                let reason = "x".repeat(30 << 20);
                redis
                    .hset(
                        &lab.key("verdict", &lab.a),
                        &[
                            ("state", "open"),
                            ("gen", &g),
                            ("cooldown_ms", "5000"),
                            ("node", "mallory"),
                            ("reason", &reason),
                            ("failures", "3"),
                        ],
                    )
                    .await;
                redis
                    .ok(&["SET", &lab.key("cooldown", &lab.a), &g, "PX", "5000"])
                    .await;
            }
        }
    }

    /// What `/status` says is wrong with the share.
    fn says(self) -> &'static str {
        match self {
            Bad::Generation => "gen",
            Bad::WrongType => "list",
            Bad::HugeReason => "reason",
            Bad::ProbeKey => "probe",
        }
    }

    /// r1's own verdict overwrites every field of the hash: this value is gone with it.
    fn repaired_by_a_publish(self) -> bool {
        matches!(self, Bad::HugeReason)
    }
}

/// Cuts every subscription (`CLIENT KILL TYPE pubsub`): each router notices, reconnects
/// and re-reads every verdict. Waits until each has said it re-synced `times` times.
async fn resync(lab: &Lab, redis: &mut Resp, times: usize) {
    redis.ok(&["CLIENT", "KILL", "TYPE", "pubsub"]).await;
    let what = format!("{times} re-syncs on each router");
    lab.until(&what, RECONNECT_WITHIN, async || {
        BOTH.iter()
            .all(|n| lab.router(n).count_lines(&[SYNCED]) >= times)
    })
    .await;
    lab.until_cluster(&BOTH, "up", RECONNECT_WITHIN).await;
}

/// With c-box failing, asks `node` for route `other` until its breaker opens.
async fn trip_c(lab: &Lab, node: &str) {
    lab.c.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..10 {
        let reply = lab.ask(node, "other").await;
        assert!(reply.served_by(B), "{node} falls back to b-box: {reply:?}");
        if lab.machine(node, "c-box").await["state"] == "open" {
            return;
        }
    }
    panic!("{node} did not open c-box\n{}", lab.logs());
}

/// Each router says `up`, and lost Redis exactly `cuts` times (the test's own cuts).
async fn up_but_for_the_cuts(lab: &Lab, cuts: usize, bad: impl std::fmt::Debug) {
    for node in BOTH {
        let cluster = lab.cluster(node).await;
        assert_eq!(cluster["state"], "up", "{bad:?}: {node}: {cluster}");
        assert_eq!(
            lab.router(node).count_lines(&[DOWN]),
            cuts,
            "{bad:?}: {node} lost its link only when the test cut it\n{}",
            lab.logs()
        );
    }
}

async fn one_bad_share_spoils_nothing_else(test: &str, bad: Bad) {
    let mut lab = Lab::start(test, 2, LONG).await;
    lab.until_cluster(&BOTH, "up", RECONNECT_WITHIN).await;
    let mut redis = lab.redis.client().await;
    let peak0: Vec<u64> = BOTH.iter().map(|n| lab.router(n).peak_rss()).collect();
    bad.plant(&mut redis, &lab).await;

    // Both read every verdict again, a-box's keys with the rest: still up, at no cost.
    resync(&lab, &mut redis, 2).await;
    for (node, p0) in BOTH.iter().zip(&peak0) {
        let grew = lab.router(node).peak_rss().saturating_sub(*p0);
        eprintln!("{bad:?}: {node}'s peak memory grew by {grew} bytes across the re-sync");
        assert!(
            grew < PEAK_GROWTH,
            "{bad:?}: {node}'s peak memory grew by {grew} bytes reading one share"
        );
    }

    // r1 publishes a-box (its keys are bad) and c-box (fine): c-box reaches r2.
    lab.trip_a("r1").await;
    trip_c(&lab, "r1").await;
    lab.until_machine(&["r2"], "c-box", "open, decided by r1", ADOPT_WITHIN, |m| {
        verdict_is(m, "open", "r1")
    })
    .await;
    let c0 = lab.c.work_hits();
    for _ in 0..5 {
        let reply = lab.ask("r2", "other").await;
        assert!(
            reply.served_by(B) && reply.skipped_for(C, "circuit_open"),
            "{bad:?}: r2 holds r1's verdict on c-box: {reply:?}"
        );
    }
    assert_eq!(lab.c.work_hits(), c0, "{bad:?}: r2 sent c-box nothing");
    up_but_for_the_cuts(&lab, 1, bad).await;

    // The bad share is named, with what is wrong with it.
    let share = lab.a.base_url();
    for node in BOTH {
        let cluster = lab.cluster(node).await;
        let repaired = node == "r1" && bad.repaired_by_a_publish();
        let want = u64::from(!repaired);
        assert_eq!(cluster["bad_shares"], want, "{bad:?}: {node}: {cluster}");
        let why = &cluster["bad_share_errors"][&share];
        if repaired {
            assert!(why.is_null(), "{bad:?}: {node}: {cluster}");
        } else {
            let why = why.as_str().unwrap_or_default();
            assert!(why.contains(bad.says()), "{bad:?}: {node}: {cluster}");
        }
    }
    let a = lab.machine("r2", "a-box").await;
    if bad.repaired_by_a_publish() {
        assert!(verdict_is(&a, "open", "r1"), "{bad:?}: {a}");
    } else {
        assert!(
            a["state"] == "closed" && a["decided_by"].is_null(),
            "{bad:?}: nothing travels through unusable keys: {a}"
        );
    }

    // Read again: said once in each log, not once per read.
    resync(&lab, &mut redis, 3).await;
    for node in BOTH {
        let said = lab.router(node).count_lines(&[UNUSABLE, &share]);
        assert_eq!(said, 1, "{bad:?}: {node}\n{}", lab.logs());
    }
    up_but_for_the_cuts(&lab, 2, bad).await;
    for router in &mut lab.routers {
        assert!(router.alive(), "{bad:?}: {} is alive", router.node);
        assert!(!router.logs().contains("panicked"), "{}", router.logs());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_that_is_no_integer_spoils_one_share_not_the_link() {
    one_bad_share_spoils_nothing_else("bad-gen", Bad::Generation).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_key_of_the_wrong_type_spoils_one_share_not_the_link() {
    one_bad_share_spoils_nothing_else("bad-type", Bad::WrongType).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_mb_reason_costs_neither_memory_nor_the_link() {
    one_bad_share_spoils_nothing_else("bad-reason", Bad::HugeReason).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_key_that_is_no_lease_spoils_one_share_not_the_link() {
    one_bad_share_spoils_nothing_else("bad-probe", Bad::ProbeKey).await;
}

/// The routers' own heartbeat key, of the wrong type: replaced at the next beat, never a
/// reason to call Redis down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_key_of_the_wrong_type_does_not_stop_the_heartbeat() {
    let lab = Lab::start("bad-nodes", 2, LONG).await;
    lab.until_cluster(&BOTH, "up", RECONNECT_WITHIN).await;
    let mut redis = lab.redis.client().await;
    let nodes = format!("{}:nodes", lab.prefix);
    redis.ok(&["DEL", &nodes]).await;
    redis.ok(&["SET", &nodes, "not a sorted set"]).await;
    lab.until(
        "the routers beat into their key again",
        RECONNECT_WITHIN,
        async || {
            let mut redis = lab.redis.client().await;
            redis.ok(&["TYPE", &nodes]).await.text() == Some("zset")
        },
    )
    .await;
    lab.until("each router sees the other", RECONNECT_WITHIN, async || {
        for (me, other) in [("r1", "r2"), ("r2", "r1")] {
            if lab.cluster(me).await["peers_seen"] != serde_json::json!([other]) {
                return false;
            }
        }
        true
    })
    .await;
    up_but_for_the_cuts(&lab, 0, "nodes").await;
}
