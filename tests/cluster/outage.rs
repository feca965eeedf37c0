//! An outage is learned once: r1 opens a-box after its own 3 failures, r2 and r3 adopt the
//! verdict within 1 s and skip a-box without sending it a byte.

use std::collections::BTreeSet;

use serde_json::Value;

use super::lab::{verdict_is, Lab, A, B, LONG, RECONNECT_WITHIN};
use super::router::sample;

const ALL: [&str; 3] = ["r1", "r2", "r3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_one_router_learns_is_adopted_by_all_and_costs_the_others_no_request() {
    // A 10 s cooldown: everything below happens inside the first open interval.
    let lab = Lab::start("outage", 3, LONG).await;
    lab.until_cluster(&ALL, "up", RECONNECT_WITHIN).await;

    // a-box fails (500s, each one counted on the wire); only r1 is asked.
    lab.trip_a("r1").await;
    let r1_view = lab.machine("r1", "a-box").await;
    assert!(verdict_is(&r1_view, "open", "r1"), "r1 decided: {r1_view}");

    // Within 1 s r2 and r3 hold r1's verdict.
    let views = lab.until_adopted(&["r2", "r3"], "r1").await;
    for view in views.iter().chain([&r1_view]) {
        assert_eq!(view["shared"], true, "a-box says shared: true: {view}");
        let left = view["cooldown_left_ms"].as_u64().unwrap();
        assert!(
            left > 0 && left <= 10_000,
            "inside the 10 s cooldown: {view}"
        );
        assert_eq!(view["cooldown_ms"], 10_000, "{view}");
    }
    // b-box is `shared: auto` on loopback: not shared, and nobody's verdict.
    for node in ALL {
        let b = lab.machine(node, "b-box").await;
        assert_eq!(
            b["shared"], false,
            "{node}: auto on loopback is not shared: {b}"
        );
        assert!(b["decided_by"].is_null(), "{node}: {b}");
        assert_eq!(b["state"], "closed", "{node}: {b}");
    }

    // r2 and r3 serve through the fallback and send a-box nothing.
    let (a0, b0) = (lab.a.work_hits(), lab.b.work_hits());
    for node in ["r2", "r3"] {
        for _ in 0..10 {
            let reply = lab.ask(node, "shared").await;
            assert!(reply.served_by(B), "{node} serves from b-box: {reply:?}");
            assert!(
                reply.skipped_for(A, "circuit_open"),
                "{node} skips a-box as circuit_open: {reply:?}"
            );
        }
    }
    assert_eq!(
        lab.a.work_hits() - a0,
        0,
        "a-box received nothing from the routers that adopted the verdict"
    );
    assert_eq!(lab.b.work_hits() - b0, 20, "b-box served all 20");
    for node in ["r2", "r3"] {
        let view = lab.machine(node, "a-box").await;
        assert!(verdict_is(&view, "open", "r1"), "{node} still open: {view}");
        assert_eq!(
            view["remote_attempts"], 0,
            "{node} never tried a-box: {view}"
        );
        assert!(
            view["local_rejections"].as_u64().unwrap() >= 10,
            "{node} counted its skips: {view}"
        );
    }

    // Metrics: one adoption on each peer, none on the router that decided.
    for (node, adopted) in [("r1", 0.0), ("r2", 1.0), ("r3", 1.0)] {
        let text = lab.metrics(node).await;
        let n = sample(
            &text,
            "labrouter_cluster_adoptions_total",
            &[("machine", "a-box")],
        );
        assert_eq!(n, adopted, "{node}: labrouter_cluster_adoptions_total");
        assert_eq!(sample(&text, "labrouter_cluster_up", &[]), 1.0, "{node}");
    }

    // The cluster block: who this is, what it shares, whom it has seen.
    for node in ALL {
        let cluster = lab.cluster(node).await;
        assert_eq!(cluster["state"], "up", "{node}: {cluster}");
        assert_eq!(cluster["node"], node, "{node}: {cluster}");
        assert_eq!(cluster["prefix"], lab.prefix.as_str(), "{node}: {cluster}");
        assert!(cluster["last_sync"].is_string(), "{node}: {cluster}");
    }
    let others = |me: &str| -> BTreeSet<String> {
        ALL.iter()
            .filter(|n| **n != me)
            .map(|n| n.to_string())
            .collect()
    };
    lab.until(
        "each router's peers_seen names the other two",
        RECONNECT_WITHIN,
        async || {
            for node in ALL {
                let seen: BTreeSet<String> = lab.cluster(node).await["peers_seen"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string))
                    .into_iter()
                    .flatten()
                    .collect();
                if seen != others(node) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}
