//! What arrives through Redis is outside input. The test speaks as a peer would (INCR the
//! generation, HSET the verdict, SET the cooldown with PX, PUBLISH the message) and then as
//! no honest peer would: stale generations, garbage messages, garbage hashes.
//!
//! A negative ("this message was ignored") needs no fixed sleep: pub/sub keeps the order of
//! one connection's messages, so the test publishes a newer verdict for c-box after the
//! messages under test and waits until the router holds it; by then it has judged the rest.

use std::time::Duration;

use labrouter::sim::Sim;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::lab::{verdict_is, Lab, A, ADOPT_WITHIN, B, C, LONG, POLL, RECONNECT_WITHIN, SHORT};
use super::redis::Resp;
use super::router::sample;

/// `max_cooldown` of [`SHORT`], the most any clamped cooldown may be.
const MAX_COOLDOWN_MS: u64 = 8000;

/// A verdict as a peer `node` publishes it: `state` with `cooldown_ms` (`c`) and `left_ms`
/// (`l`), generation `g`.
async fn publish_as_peer(
    redis: &mut Resp,
    lab: &Lab,
    machine: &Sim,
    g: i64,
    state: &str,
    (cooldown_ms, left_ms): (u64, u64),
    node: &str,
) {
    let (g_text, c_text) = (g.to_string(), cooldown_ms.to_string());
    let reason = format!("decided by the test as {node}");
    redis
        .hset(
            &lab.key("verdict", machine),
            &[
                ("state", state),
                ("gen", &g_text),
                ("cooldown_ms", &c_text),
                ("node", node),
                ("reason", &reason),
                ("failures", "3"),
            ],
        )
        .await;
    if state == "open" {
        let px = left_ms.to_string();
        redis
            .ok(&["SET", &lab.key("cooldown", machine), &g_text, "PX", &px])
            .await;
    }
    publish_message(redis, lab, machine, g, state, (cooldown_ms, left_ms), node).await;
}

/// Only the pub/sub message of such a verdict: what a late delivery or a replay looks like
/// (the verdict hash keeps what it holds).
async fn publish_message(
    redis: &mut Resp,
    lab: &Lab,
    machine: &Sim,
    g: i64,
    state: &str,
    (cooldown_ms, left_ms): (u64, u64),
    node: &str,
) {
    let message = json!({
        "m": machine.base_url(), "g": g, "s": state, "c": cooldown_ms, "l": left_ms,
        "n": node, "i": format!("test-peer-{node}"), "r": format!("decided by the test as {node}"),
        "f": 3,
    });
    redis.publish(&lab.channel(), &message.to_string()).await;
}

/// Publishes a newer `open` verdict for c-box from peer `name` and waits until every
/// router in `nodes` holds it: the messages published before it have been judged.
async fn barrier(redis: &mut Resp, lab: &Lab, nodes: &[&str], name: &str) {
    let g = redis.incr(&lab.key("gen", &lab.c)).await;
    publish_as_peer(redis, lab, &lab.c, g, "open", (5000, 5000), name).await;
    lab.until_machine(nodes, "c-box", "the barrier's verdict", ADOPT_WITHIN, |m| {
        verdict_is(m, "open", name)
    })
    .await;
}

/// Not a verdict anyone may hold: open with a cooldown beyond `max_cooldown`.
fn sane(view: &Value) -> bool {
    match view["state"].as_str() {
        Some("closed") => true,
        Some("open") => {
            view["cooldown_ms"].as_u64().unwrap() <= MAX_COOLDOWN_MS
                && view["cooldown_left_ms"].as_u64().unwrap() <= MAX_COOLDOWN_MS
        }
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_verdict_is_held_for_its_duration_and_a_stale_one_is_ignored() {
    let lab = Lab::start("skew", 1, SHORT).await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    let mut redis = lab.redis.client().await;

    // Peer "rx" opened a-box with 1.5 s left. No wall time travels: whatever rx's clock
    // says, r1 must admit a probe about 1.5 s from now, not sooner nor 30 s later.
    let g1 = redis.incr(&lab.key("gen", &lab.a)).await;
    publish_as_peer(&mut redis, &lab, &lab.a, g1, "open", (1500, 1500), "rx").await;
    let published = Instant::now();
    let view = lab
        .until_machine(&["r1"], "a-box", "open, decided by rx", ADOPT_WITHIN, |m| {
            verdict_is(m, "open", "rx")
        })
        .await
        .remove(0);
    assert_eq!(view["cooldown_ms"], 1500, "{view}");
    let left = view["cooldown_left_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 1500, "{view}");

    let a0 = lab.a.work_hits();
    let probe = loop {
        let reply = lab.ask("r1", "shared").await;
        if lab.a.work_hits() > a0 {
            break reply;
        }
        assert!(
            reply.served_by(B) && reply.skipped_for(A, "circuit_open"),
            "inside rx's cooldown r1 skips a-box: {reply:?}"
        );
        assert!(
            published.elapsed() < Duration::from_millis(2500),
            "r1 admitted no probe within 1.5 s + 1 s\n{}",
            lab.logs()
        );
        tokio::time::sleep(POLL).await;
    };
    let probed_after = published.elapsed();
    assert!(
        probed_after >= Duration::from_millis(1400),
        "r1 probed after {probed_after:?}, before the 1.5 s it was told"
    );
    assert!(probe.served_by(A), "a-box is healthy: {probe:?}");
    assert_eq!(lab.a.work_hits() - a0, 1);
    lab.until_machine(
        &["r1"],
        "a-box",
        "closed by r1's probe",
        ADOPT_WITHIN,
        |m| verdict_is(m, "closed", "r1"),
    )
    .await;

    // Late deliveries of older generations, and of the newest one, change nothing.
    let newest: i64 = redis
        .get(&lab.key("gen", &lab.a))
        .await
        .expect("the generation counter")
        .parse()
        .unwrap();
    assert!(newest >= g1, "generations only grow");
    for g in [g1, newest, 0] {
        publish_message(&mut redis, &lab, &lab.a, g, "open", (5000, 5000), "stale").await;
    }
    barrier(&mut redis, &lab, &["r1"], "after-stale").await;
    let view = lab.machine("r1", "a-box").await;
    assert!(
        verdict_is(&view, "closed", "r1"),
        "stale verdicts ignored: {view}"
    );
    let a1 = lab.a.work_hits();
    assert!(lab.ask("r1", "shared").await.served_by(A));
    assert_eq!(lab.a.work_hits() - a1, 1, "a-box is closed for real");
    let adopted = sample(
        &lab.metrics("r1").await,
        "labrouter_cluster_adoptions_total",
        &[("machine", "a-box")],
    );
    assert_eq!(adopted, 1.0, "only rx's verdict was adopted for a-box");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_redis_is_rejected_or_clamped_and_never_panics_a_router() {
    let mut lab = Lab::start("garbage", 1, SHORT).await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    let mut redis = lab.redis.client().await;
    let (url_a, channel) = (lab.a.base_url(), lab.channel());

    // Messages that are no verdict at all, or a state that does not exist.
    let g = redis.incr(&lab.key("gen", &lab.a)).await;
    let not_verdicts = [
        "not json".to_string(),
        "{}".to_string(),
        "[1, 2, 3]".to_string(),
        json!({"m": url_a, "g": "x", "s": "open", "c": 1000, "l": 1000, "n": "m1", "i": "t", "r": "", "f": 3}).to_string(),
        json!({"m": url_a, "g": g, "s": "banana", "c": 1000, "l": 1000, "n": "m2", "i": "t", "r": "", "f": 3}).to_string(),
        json!({"m": url_a, "g": g, "s": "open", "c": -5, "l": -5, "n": "m3", "i": "t", "r": "", "f": -1}).to_string(),
        json!({"m": "http://127.0.0.1:1/v1", "g": g, "s": "open", "c": 1000, "l": 1000, "n": "m4", "i": "t", "r": "", "f": 3}).to_string(),
    ];
    for message in &not_verdicts {
        redis.publish(&channel, message).await;
    }
    barrier(&mut redis, &lab, &["r1"], "after-junk").await;
    let view = lab.machine("r1", "a-box").await;
    assert!(
        view["state"] == "closed" && view["decided_by"].is_null(),
        "no junk adopted: {view}"
    );

    // Absurd numbers on an otherwise valid `open`: rejected, or clamped to max_cooldown.
    for (c, l) in [
        (json!(1e30), json!(1e30)),
        (json!(u64::MAX), json!(u64::MAX)),
    ] {
        let g = redis.incr(&lab.key("gen", &lab.a)).await;
        let message = json!({"m": url_a, "g": g, "s": "open", "c": c, "l": l, "n": "huge", "i": "t", "r": "", "f": 3});
        redis.publish(&channel, &message.to_string()).await;
    }
    barrier(&mut redis, &lab, &["r1"], "after-huge").await;
    let view = lab.machine("r1", "a-box").await;
    assert!(sane(&view), "rejected or clamped: {view}");

    // Garbage verdict hashes, read by a router that starts now (and syncs all verdicts).
    redis
        .hset(
            &lab.key("verdict", &lab.c),
            &[
                ("state", "banana"),
                ("gen", "notanumber"),
                ("cooldown_ms", "1e30"),
                ("node", ""),
                ("reason", ""),
                ("failures", "x"),
            ],
        )
        .await;
    redis
        .hset(
            &lab.key("verdict", &lab.a),
            &[
                ("state", "open"),
                ("gen", "99999999999999999999999999"),
                ("cooldown_ms", "1e30"),
                ("node", "mallory"),
                ("reason", "\u{1b}[2J"),
                ("failures", "-7"),
            ],
        )
        .await;
    lab.add_router("r2").await;
    lab.until_cluster(&["r2"], "up", RECONNECT_WITHIN).await;
    let c = lab.machine("r2", "c-box").await;
    assert!(
        c["state"] == "closed" && c["decided_by"].is_null(),
        "a banana verdict is no verdict: {c}"
    );
    let a = lab.machine("r2", "a-box").await;
    assert!(sane(&a), "rejected or clamped: {a}");

    // Both still route (r1 holds the last barrier's verdict on c-box, r2 none), and
    // neither died.
    let reply = lab.ask("r1", "other").await;
    assert!(
        reply.served_by(B) && reply.skipped_for(C, "circuit_open"),
        "{reply:?}"
    );
    let reply = lab.ask("r2", "other").await;
    assert!(reply.served_by(C), "{reply:?}");
    for router in &mut lab.routers {
        assert!(router.alive(), "{} is alive", router.node);
        assert!(
            !router.logs().contains("panicked"),
            "{} panicked:\n{}",
            router.node,
            router.logs()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_generation_far_ahead_of_redis_does_not_silence_the_real_verdicts() {
    let lab = Lab::start("forged", 1, LONG).await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    let mut redis = lab.redis.client().await;
    let gen_a = lab.key("gen", &lab.a);

    // A real verdict: r1 knows a-box's generation.
    let g1 = redis.incr(&gen_a).await;
    publish_as_peer(&mut redis, &lab, &lab.a, g1, "open", (5000, 5000), "honest").await;
    lab.until_machine(&["r1"], "a-box", "open by honest", ADOPT_WITHIN, |m| {
        verdict_is(m, "open", "honest")
    })
    .await;

    // Only PUBLISH, a trillion generations on, with no INCR behind it: what a client that
    // can publish but is no router sends. Then the next real verdict, one generation on.
    let forged = g1 + 1_000_000_000_000;
    publish_message(
        &mut redis,
        &lab,
        &lab.a,
        forged,
        "forced_open",
        (0, 0),
        "mallory",
    )
    .await;
    let g2 = redis.incr(&gen_a).await;
    publish_as_peer(&mut redis, &lab, &lab.a, g2, "closed", (5000, 0), "honest").await;
    lab.until_machine(&["r1"], "a-box", "closed by honest", ADOPT_WITHIN, |m| {
        verdict_is(m, "closed", "honest")
    })
    .await;
    let a0 = lab.a.work_hits();
    assert!(lab.ask("r1", "shared").await.served_by(A));
    assert_eq!(lab.a.work_hits() - a0, 1, "a-box is closed for real");

    // A jump Redis confirms is believed: the counter really went that far (its verdict
    // hash expired meanwhile, say).
    let g3: i64 = redis.ok(&["INCRBY", &gen_a, "1000000000000"]).await.int();
    publish_message(&mut redis, &lab, &lab.a, g3, "open", (5000, 5000), "far").await;
    lab.until_machine(&["r1"], "a-box", "open by far", ADOPT_WITHIN, |m| {
        verdict_is(m, "open", "far")
    })
    .await;
    let adopted = sample(
        &lab.metrics("r1").await,
        "labrouter_cluster_adoptions_total",
        &[("machine", "a-box")],
    );
    assert_eq!(adopted, 3.0, "honest twice and far once; never mallory");
}
