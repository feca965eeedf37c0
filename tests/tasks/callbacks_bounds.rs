//! What may hold a task callback back, and what may not: a receiver that accepts and never
//! answers holds only its own deliveries, one owner (API key) cannot take every attempt on
//! the wire, and `tasks.callback_allow` is the registry's as it is now, at every attempt.
//! Receivers are real servers on 127.0.0.1, counted; time is tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use labrouter::registry::Registry;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::callbacks::{id_of, settled, until, Receiver};
use crate::lab::Lab;

/// Attempts on the wire at once to one receiver, and for one owner (the bounds under test).
const PER_RECEIVER: usize = 2;
const PER_OWNER: usize = 4;

/// When connections were accepted, across the receivers that share it.
#[derive(Clone, Default)]
struct Accepts {
    at: Arc<Mutex<Vec<Instant>>>,
}

impl Accepts {
    /// The most connections accepted within any `window`. An attempt to a receiver that
    /// never answers lasts the attempt timeout (10 s), so with a window a little shorter
    /// this is how many attempts were on the wire at once.
    fn most_within(&self, window: Duration) -> usize {
        let at = self.at.lock().unwrap().clone();
        (0..at.len())
            .map(|i| at[i..].iter().take_while(|t| **t - at[i] < window).count())
            .max()
            .unwrap_or(0)
    }
}

/// Shorter than an attempt's timeout, long enough to see every attempt that overlaps.
const WINDOW: Duration = Duration::from_secs(9);

/// A receiver that accepts every connection, reads what comes and never answers: each
/// attempt to it lasts the whole attempt timeout.
struct Silent {
    url: String,
    accepted: Arc<AtomicUsize>,
}

impl Silent {
    async fn start(accepts: &Accepts) -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let (count, accepts) = (Arc::clone(&accepted), accepts.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                accepts.at.lock().unwrap().push(Instant::now());
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
                });
            }
        });
        Silent { url, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Submits a task with a callback to `url`, as `key` when given; its id.
async fn submit_as(lab: &Lab, key: Option<&str>, text: &str, url: &str) -> String {
    let body = json!({"request": {"model": "auto", "messages": [{"role": "user", "content": text}]},
                      "callback": {"url": url}});
    let mut req = lab
        .client
        .post(format!("{}/v1/tasks", lab.base))
        .json(&body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 202, "submit");
    id_of(&resp.json::<Value>().await.unwrap())
}

/// Submits `n` tasks calling back to each of `urls` in turn, then waits until they have
/// all finished and `wire` attempts are on the wire.
async fn flood(lab: &Lab, key: Option<&str>, urls: &[&str], n: usize, wire: impl Fn() -> bool) {
    for i in 0..n {
        let url = urls[i % urls.len()];
        submit_as(lab, key, &format!("fix bug number {i}"), url).await;
    }
    until(
        "the flood's tasks finished",
        Duration::from_secs(60),
        || lab.unfinished() == 0,
    )
    .await;
    until(
        "the flood's callbacks on the wire",
        Duration::from_secs(5),
        wire,
    )
    .await;
}

/// How long after `submitted` the healthy receiver saw its first callback (paused time).
async fn first_callback_after(healthy: &Receiver, submitted: Instant) -> Duration {
    until(
        "the healthy receiver's callback",
        Duration::from_secs(120),
        || healthy.count() >= 1,
    )
    .await;
    healthy.seen()[0].at - submitted
}

#[tokio::test(start_paused = true)]
async fn a_dead_receiver_of_one_key_does_not_delay_another_keys_callback() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_CALLBACK_KEYS", "key-a,key-b") };
    let lab = Lab::start_full("", "", "  api_keys_env: LABROUTER_TEST_CALLBACK_KEYS\n").await;
    let accepts = Accepts::default();
    let dead = Silent::start(&accepts).await;
    let healthy = Receiver::start(200).await;
    flood(&lab, Some("key-a"), &[&dead.url], 24, || {
        dead.accepted() >= 2
    })
    .await;

    let submitted = Instant::now();
    let b = submit_as(&lab, Some("key-b"), "fix that bug", &healthy.url).await;
    let took = first_callback_after(&healthy, submitted).await;
    assert!(
        took < Duration::from_secs(5),
        "key B's callback waited {took:?} behind key A's dead receiver"
    );
    assert_eq!(
        healthy.seen()[0].header("webhook-id"),
        format!("{b}:succeeded")
    );
    // Key A's 24 deliveries keep trying, a few at a time.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        dead.accepted() > PER_RECEIVER,
        "the dead receiver is retried"
    );
    let most = accepts.most_within(WINDOW);
    assert!(
        most <= PER_RECEIVER,
        "{most} attempts at once to one receiver"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_receiver_does_not_delay_the_same_owners_healthy_receiver() {
    let lab = Lab::start("").await;
    let accepts = Accepts::default();
    let dead = Silent::start(&accepts).await;
    let healthy = Receiver::start(200).await;
    flood(&lab, None, &[&dead.url], 24, || dead.accepted() >= 2).await;

    let submitted = Instant::now();
    submit_as(&lab, None, "fix that bug", &healthy.url).await;
    let took = first_callback_after(&healthy, submitted).await;
    assert!(
        took < Duration::from_secs(5),
        "the healthy receiver waited {took:?} behind a dead one"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    let most = accepts.most_within(WINDOW);
    assert!(
        most <= PER_RECEIVER,
        "{most} attempts at once to one receiver"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn one_key_holds_at_most_four_attempts_on_the_wire_however_many_receivers() {
    // SAFETY: a variable only this test reads, set before the router starts.
    unsafe { std::env::set_var("LABROUTER_TEST_CALLBACK_KEYS_2", "key-a,key-b") };
    let lab = Lab::start_full("", "", "  api_keys_env: LABROUTER_TEST_CALLBACK_KEYS_2\n").await;
    let accepts = Accepts::default();
    let dead = [
        Silent::start(&accepts).await,
        Silent::start(&accepts).await,
        Silent::start(&accepts).await,
    ];
    let urls: Vec<&str> = dead.iter().map(|d| d.url.as_str()).collect();
    let healthy = Receiver::start(200).await;
    flood(&lab, Some("key-a"), &urls, 24, || {
        dead.iter().map(Silent::accepted).sum::<usize>() >= PER_OWNER
    })
    .await;

    let submitted = Instant::now();
    submit_as(&lab, Some("key-b"), "fix that bug", &healthy.url).await;
    let took = first_callback_after(&healthy, submitted).await;
    assert!(took < Duration::from_secs(5), "key B waited {took:?}");
    tokio::time::sleep(Duration::from_secs(120)).await;
    let most = accepts.most_within(WINDOW);
    assert!(
        most <= PER_OWNER,
        "key A had {most} attempts on the wire at once"
    );
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_reload_that_drops_the_callback_rule_stops_a_pending_delivery() {
    let failing = Receiver::start(500).await;
    let lab = Lab::start("  callback_allow: [\"http://127.0.0.1:\"]\n").await;
    let id = submit_as(&lab, None, "fix this bug", &failing.url).await;
    until("two attempts", Duration::from_secs(30), || {
        failing.count() >= 2
    })
    .await;

    // The same lab, now allowing callbacks to localhost only.
    let server = format!("  state_dir: \"{}\"\n", lab.dir.path().display());
    let mut yaml = crate::support::registry_yaml_with(&lab.gpu, &lab.cpu, &lab.local, &server, "");
    yaml.push_str("tasks:\n  callback_allow: [\"http://localhost:\"]\n");
    lab.svc.swap(Registry::parse(&yaml, "reload.yaml")).unwrap();
    let tried = failing.count();

    let done = settled(&lab, &id, Duration::from_secs(60)).await;
    assert_eq!(done["callback"]["state"], "failed", "{done}");
    let why = done["callback"]["last_error"].as_str().unwrap_or("");
    assert!(why.contains("tasks.callback_allow"), "{done}");
    assert!(!why.contains(&failing.url), "no URL in the words: {why}");
    assert_eq!(
        done["callback"]["attempts"].as_u64(),
        Some(tried as u64),
        "only attempts that went out are counted: {done}"
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(failing.count(), tried, "no attempt after the reload");
    lab.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_callback_to_localhost_goes_to_loopback_through_the_checked_lookup() {
    let rx = Receiver::start(200).await;
    let url = rx.url.replace("127.0.0.1", "localhost");
    let lab = Lab::start("").await;
    let id = submit_as(&lab, None, "fix this bug", &url).await;
    let done = settled(&lab, &id, Duration::from_secs(30)).await;
    assert_eq!(done["callback"]["state"], "delivered", "{done}");
    assert_eq!(rx.count(), 1);
}
