//! Keyed requests whose clients left (detached flights): bounded by `server.max_detached`
//! and `server.max_detached_bytes`, never kept waiting for a breaker by `x-labrouter-wait`,
//! and drained on shutdown with their answers kept for the retry after the restart.

use std::sync::Arc;
use std::time::Duration;

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::{RunOptions, Service};
use serde_json::{json, Value};

use crate::support::{header, registry_yaml_with, serve, TestLab};

fn chat(text: &str) -> Value {
    json!({"model": "small", "messages": [{"role": "user", "content": text}]})
}

/// A keyed chat completion, sent from a task of its own so the test can walk away from it.
fn send(
    base: &str,
    key: &str,
    body: &Value,
    wait: Option<&str>,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let client = reqwest::Client::new();
    let mut req = client
        .post(format!("{base}/v1/chat/completions"))
        .header("idempotency-key", key)
        .json(body);
    if let Some(w) = wait {
        req = req.header("x-labrouter-wait", w);
    }
    tokio::spawn(async move { req.send().await.expect("router answered") })
}

fn replayed(resp: &reqwest::Response) -> bool {
    header(resp, "idempotent-replayed") == "true"
}

/// Waits (on the paused clock, 10 ms at a time) until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// Lets the router see what the clients did (a paused second, 10 ms at a time).
async fn settle() {
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `/status`'s detached flights: (flights, bytes).
async fn detached(t: &TestLab) -> (u64, u64) {
    let v: Value = t
        .client
        .get(format!("{}/status", t.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let d = &v["detached"];
    match (d["flights"].as_u64(), d["bytes"].as_u64()) {
        (Some(f), Some(b)) => (f, b),
        _ => panic!("/status has no detached flights: {v}"),
    }
}

/// Sends `bodies` under keys `k-0`, `k-1`, ..., lets each reach the machine, then walks away
/// from all of them.
async fn send_and_leave(t: &TestLab, bodies: &[Value]) {
    let sent: Vec<_> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| send(&t.base, &format!("k-{i}"), b, None))
        .collect();
    let n = bodies.len() as u64;
    until("all reached the machine", || t.local.work_hits() == n).await;
    for s in &sent {
        s.abort();
    }
    for s in sent {
        assert!(s.await.unwrap_err().is_cancelled());
    }
    settle().await;
}

/// Sends every body again under its key; how many were replayed.
async fn replays(t: &TestLab, bodies: &[Value]) -> usize {
    let mut replays = 0;
    for (i, b) in bodies.iter().enumerate() {
        let resp = send(&t.base, &format!("k-{i}"), b, None).await.unwrap();
        assert_eq!(resp.status(), 200);
        replays += usize::from(replayed(&resp));
    }
    replays
}

#[tokio::test(start_paused = true)]
async fn past_max_detached_a_keyed_request_ends_with_its_client() {
    let t = TestLab::start_custom("  max_detached: 4\n", "  max_concurrency: 64\n").await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let bodies: Vec<Value> = (0..12).map(|_| chat("hello")).collect();
    send_and_leave(&t, &bodies).await;
    let (flights, bytes) = detached(&t).await;
    assert!(flights <= 4, "{flights} detached flights, over the bound");
    assert_eq!(flights, 4, "the bound is used");
    assert!(bytes > 0);
    let metrics = t
        .client
        .get(format!("{}/metrics", t.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("labrouter_detached_flights"), "{metrics}");
    assert!(metrics.contains("labrouter_detached_bytes"), "{metrics}");
    // The detached ones finish and are kept; the others were cut with their clients.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        detached(&t).await,
        (0, 0),
        "finished flights are not counted"
    );
    t.local.set(Fault::Ok);
    assert_eq!(replays(&t, &bodies).await, 4);
    assert_eq!(t.work(), (0, 0, 12 + 8), "the 8 cut ones generated again");
}

#[tokio::test(start_paused = true)]
async fn past_max_detached_bytes_a_keyed_request_ends_with_its_client() {
    let t = TestLab::start_custom("  max_detached_bytes: 2KiB\n", "  max_concurrency: 64\n").await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    // Each body is over 600 bytes: at most three fit in 2 KiB.
    let bodies: Vec<Value> = (0..8)
        .map(|i| chat(&format!("{i} {}", "x".repeat(600))))
        .collect();
    send_and_leave(&t, &bodies).await;
    let (flights, bytes) = detached(&t).await;
    assert!(bytes <= 2048, "{bytes} bytes held by detached flights");
    assert!((1..=3).contains(&flights), "{flights} detached flights");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(detached(&t).await, (0, 0));
    t.local.set(Fault::Ok);
    let kept = replays(&t, &bodies).await;
    assert_eq!(kept as u64, flights, "what was detached was kept");
    assert_eq!(t.work(), (0, 0, 8 + (8 - flights)));
}

#[tokio::test(start_paused = true)]
async fn max_detached_0_detaches_nothing() {
    let t = TestLab::start_custom("  max_detached: 0\n", "").await;
    t.local.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let bodies = vec![chat("hello")];
    send_and_leave(&t, &bodies).await;
    assert_eq!(detached(&t).await, (0, 0));
    tokio::time::sleep(Duration::from_secs(60)).await;
    t.local.set(Fault::Ok);
    assert_eq!(
        replays(&t, &bodies).await,
        0,
        "cut with its client, not kept"
    );
    assert_eq!(t.work(), (0, 0, 2));
}

#[tokio::test(start_paused = true)]
async fn a_keyed_request_whose_client_left_does_not_wait_out_a_cooldown() {
    let t = TestLab::start().await;
    // Three refusals open local's breaker for its 60 s cooldown.
    t.local.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..3 {
        assert_eq!(t.chat("small", "hello").await.status(), 502);
    }
    assert_eq!(t.state("local"), "open");
    t.local.set(Fault::Ok);
    let before = t.work();
    let waiting = send(&t.base, "k-wait", &chat("hello"), Some("120s"));
    settle().await;
    assert!(!waiting.is_finished(), "it waits for the breaker");
    waiting.abort();
    settle().await;
    // The cooldown passes: nothing is left waiting to probe the machine.
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert_eq!(t.work(), before, "the request that left reached no machine");
    assert_eq!(
        detached(&t).await,
        (0, 0),
        "a waiting flight is not detached"
    );
    // The control: a client that stays is served once the breaker admits a probe.
    let resp = send(&t.base, "k-wait", &chat("hello"), Some("120s"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(!replayed(&resp));
    assert_eq!(t.work(), (before.0, before.1, before.2 + 1));
}

/// A registry for the lab's machines keeping its state under `dir`.
fn remembering(sims: (&Sim, &Sim, &Sim), dir: &std::path::Path) -> Arc<Service> {
    let server = format!("  state_dir: {}\n  shutdown_grace: 60s\n", dir.display());
    let yaml = registry_yaml_with(sims.0, sims.1, sims.2, &server, "");
    let registry = Registry::parse(&yaml, "test.yaml").unwrap();
    Arc::new(Service::remembering(registry, None).unwrap())
}

#[tokio::test(start_paused = true)]
async fn keyed_requests_in_flight_at_shutdown_finish_and_are_replayed_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (gpu, cpu, local) = (
        Sim::start("gpu-box").await.unwrap(),
        Sim::start("ubuntu-box").await.unwrap(),
        Sim::start("local").await.unwrap(),
    );
    let svc = remembering((&gpu, &cpu, &local), dir.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let running = tokio::spawn(labrouter::run(
        svc,
        listener,
        shutdown,
        RunOptions::default(),
    ));
    // One whose client leaves (a long generation) and one whose client stays.
    let body = chat("hello");
    local.set(Fault::SlowFirstByte(Duration::from_secs(40)));
    let left = send(&base, "k-left", &body, None);
    until("the first reached the machine", || local.work_hits() == 1).await;
    left.abort();
    local.set(Fault::SlowFirstByte(Duration::from_secs(5)));
    let stays = send(&base, "k-stays", &body, None);
    until("the second reached the machine", || local.work_hits() == 2).await;
    let _ = stop.send(());
    let resp = stays.await.unwrap();
    assert_eq!(resp.status(), 200, "drained, not cut");
    running.await.unwrap().expect("run returned Ok");
    // The restart: another service on the same state_dir.
    local.set(Fault::Ok);
    let again = remembering((&gpu, &cpu, &local), dir.path());
    let (base, _) = serve(again).await;
    for key in ["k-left", "k-stays"] {
        let resp = send(&base, key, &body, None).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(replayed(&resp), "{key} replayed from the store");
    }
    assert_eq!(local.work_hits(), 2, "one generation per key");
}

/// With `--workers`, a flight runs on the serving thread's own runtime, which is dropped
/// when that thread stops serving: the thread lands its flights first. Real time (the
/// serving threads' runtimes have their own clocks): a 400 ms generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_threads_land_a_keyed_request_whose_client_left_before_they_stop() {
    let dir = tempfile::tempdir().unwrap();
    let (gpu, cpu, local) = (
        Sim::start("gpu-box").await.unwrap(),
        Sim::start("ubuntu-box").await.unwrap(),
        Sim::start("local").await.unwrap(),
    );
    let svc = remembering((&gpu, &cpu, &local), dir.path());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let opts = RunOptions {
        workers: 2,
        ..RunOptions::default()
    };
    let running = tokio::spawn(labrouter::run(svc, listener, shutdown, opts));
    let body = chat("hello");
    local.set(Fault::SlowFirstByte(Duration::from_millis(400)));
    let left = send(&base, "k-threads", &body, None);
    until("it reached the machine", || local.work_hits() == 1).await;
    left.abort();
    let _ = stop.send(());
    running.await.unwrap().expect("run returned Ok");
    local.set(Fault::Ok);
    let (base, _) = serve(remembering((&gpu, &cpu, &local), dir.path())).await;
    let resp = send(&base, "k-threads", &body, None).await.unwrap();
    assert!(replayed(&resp), "replayed from the store");
    assert_eq!(local.work_hits(), 1, "one generation");
}
