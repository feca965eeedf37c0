//! Redis killed mid-run: routing neither slows nor fails, each router runs on its own
//! breakers and says `down`; when Redis comes back (empty, on the same port) the routers
//! re-sync and a verdict decided meanwhile reaches the others.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::lab::{verdict_is, Lab, A, ADOPT_WITHIN, B, LONG, POLL, RECONNECT_WITHIN, SHORT};
use super::router::{self, sample, Reply};
use serde_json::Value;

const ALL: [&str; 3] = ["r1", "r2", "r3"];

/// Requests sent back to back to each router until stopped, every reply kept.
struct Load {
    stop: Arc<AtomicBool>,
    replies: Vec<(String, Arc<Mutex<Vec<Reply>>>)>,
    tasks: tokio::task::JoinSet<()>,
}

impl Load {
    fn start(lab: &Lab, nodes: &[&str]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut load = Load {
            stop: Arc::clone(&stop),
            replies: Vec::new(),
            tasks: tokio::task::JoinSet::new(),
        };
        for node in nodes {
            let kept = Arc::new(Mutex::new(Vec::new()));
            load.replies.push((node.to_string(), Arc::clone(&kept)));
            let (client, base) = (lab.client.clone(), lab.router(node).base.clone());
            let stop = Arc::clone(&stop);
            load.tasks.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let reply = router::ask(&client, &base, "shared").await;
                    kept.lock().unwrap().push(reply);
                    tokio::time::sleep(POLL).await;
                }
            });
        }
        load
    }

    /// Replies so far, per router.
    fn counts(&self) -> Vec<usize> {
        self.replies
            .iter()
            .map(|(_, r)| r.lock().unwrap().len())
            .collect()
    }

    /// Stops it; every reply, with the router it came from.
    async fn finish(mut self) -> Vec<(String, Reply)> {
        self.stop.store(true, Ordering::Relaxed);
        while let Some(done) = self.tasks.join_next().await {
            done.unwrap();
        }
        self.replies
            .iter()
            .flat_map(|(node, r)| {
                let replies = r.lock().unwrap().clone();
                replies.into_iter().map(move |reply| (node.clone(), reply))
            })
            .collect()
    }
}

/// Waits until each router answered `more` further requests of the load.
async fn load_goes_on(lab: &Lab, load: &Load, more: usize) {
    let from = load.counts();
    lab.until(
        "each router answered more requests",
        RECONNECT_WITHIN,
        async || load.counts().iter().zip(&from).all(|(n, f)| *n >= f + more),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_slows_and_fails_nothing_and_a_verdict_decided_meanwhile_converges() {
    // A 10 s cooldown: r1's verdict is still open when Redis is back.
    let mut lab = Lab::start("redis-down", 3, LONG).await;
    lab.until_cluster(&ALL, "up", RECONNECT_WITHIN).await;

    let load = Load::start(&lab, &ALL);
    load_goes_on(&lab, &load, 3).await;
    lab.redis.kill9();
    lab.until_cluster(&ALL, "down", RECONNECT_WITHIN).await;
    for node in ALL {
        let text = lab.metrics(node).await;
        assert_eq!(sample(&text, "labrouter_cluster_up", &[]), 0.0, "{node}");
        assert!(
            sample(&text, "labrouter_cluster_redis_errors_total", &[]) > 0.0,
            "{node} counted its failed Redis operations"
        );
    }
    load_goes_on(&lab, &load, 5).await;
    let replies = load.finish().await;
    let slowest = replies.iter().map(|(_, r)| r.took).max().unwrap();
    for (node, reply) in &replies {
        assert!(
            reply.status == 200 && reply.target == A,
            "{node} served from a-box, Redis or not: {reply:?}"
        );
        assert!(
            reply.took < Duration::from_secs(1),
            "{node} took {:?}: {reply:?}",
            reply.took
        );
    }
    eprintln!(
        "{} requests across the Redis kill, slowest {slowest:?}",
        replies.len()
    );
    // A Redis outage opens no breaker.
    for node in ALL {
        for machine in ["a-box", "b-box", "c-box"] {
            let view = lab.machine(node, machine).await;
            assert_eq!(view["state"], "closed", "{node} {machine}: {view}");
        }
    }

    // Without Redis, r1 opens a-box on its own; the others cannot know.
    lab.trip_a("r1").await;
    let r1_view = lab.machine("r1", "a-box").await;
    assert!(verdict_is(&r1_view, "open", "r1"), "{r1_view}");
    for node in ["r2", "r3"] {
        let view = lab.machine(node, "a-box").await;
        assert_eq!(view["state"], "closed", "{node} has no way to know: {view}");
    }

    // Redis is back on the same port, empty: the routers re-sync and r1's verdict spreads.
    lab.redis.restart().await;
    lab.until_cluster(&ALL, "up", RECONNECT_WITHIN).await;
    for node in ALL {
        let text = lab.metrics(node).await;
        assert_eq!(sample(&text, "labrouter_cluster_up", &[]), 1.0, "{node}");
    }
    lab.until_machine(
        &["r2", "r3"],
        "a-box",
        "open, decided by r1, after the re-sync",
        2 * ADOPT_WITHIN,
        |m| verdict_is(m, "open", "r1"),
    )
    .await;
    let a0 = lab.a.work_hits();
    for node in ["r2", "r3"] {
        for _ in 0..5 {
            let reply = lab.ask(node, "shared").await;
            assert!(
                reply.served_by(B) && reply.skipped_for(A, "circuit_open"),
                "{node}: {reply:?}"
            );
        }
    }
    assert_eq!(
        lab.a.work_hits() - a0,
        0,
        "a-box received nothing from r2, r3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_redis_is_said_once_in_telegram_and_the_ledger_and_so_is_its_return() {
    let telegram = super::fake::FakeTelegram::start().await;
    let mut lab = Lab::start_alerting("alerts", 1, SHORT, Some(&telegram.url)).await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    lab.redis.kill9();
    lab.until_cluster(&["r1"], "down", RECONNECT_WITHIN).await;
    // Several reconnects fail meanwhile (250 ms, doubling): still one alert.
    lab.until("three failed reconnects", RECONNECT_WITHIN, async || {
        let text = lab.metrics("r1").await;
        sample(&text, "labrouter_cluster_redis_errors_total", &[]) >= 3.0
    })
    .await;
    let got = telegram.wait_delivered(1, RECONNECT_WITHIN).await;
    assert_eq!(got.len(), 1, "one alert for the outage: {got:#?}");
    assert!(
        got[0].text.contains("<b>r1</b>: Redis is unreachable"),
        "{}",
        got[0].text
    );
    assert!(
        !got[0].text.contains(&lab.redis.url()),
        "the Redis URL is never sent: {}",
        got[0].text
    );

    lab.redis.restart().await;
    lab.until_cluster(&["r1"], "up", RECONNECT_WITHIN).await;
    let got = telegram.wait_delivered(2, RECONNECT_WITHIN).await;
    assert_eq!(got.len(), 2, "one more when it is back: {got:#?}");
    assert!(
        got[1].text.contains("<b>r1</b>: Redis is back"),
        "{}",
        got[1].text
    );

    // The ledger's `(cluster)` rows, oldest first: connecting -> up -> down -> up. The ledger
    // is written through the store's writer, beside the alert: the return's row may land
    // a moment after the alert is delivered, so it is waited for, then checked whole.
    let url = format!("{}/status/events?machine=(cluster)", lab.router("r1").base);
    let read = async || -> Value {
        lab.client
            .get(&url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    lab.until(
        "the ledger's row of the return",
        RECONNECT_WITHIN,
        async || {
            read().await["events"]
                .as_array()
                .is_some_and(|e| e.len() >= 3)
        },
    )
    .await;
    let events = read().await;
    let mut rows: Vec<(String, String)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    rows.reverse();
    let want = [("connecting", "up"), ("up", "down"), ("down", "up")];
    assert_eq!(
        rows,
        want.map(|(f, t)| (f.to_string(), t.to_string())),
        "{events}"
    );
}
