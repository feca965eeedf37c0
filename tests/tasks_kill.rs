//! docs/api.md "Tasks", durable: the real binary killed with SIGKILL while tasks wait, run and queue,
//! then started again on the same state directory with its machines healthy. Every
//! acknowledged task ends `succeeded`, none is lost or stored twice, and each request
//! reached the machines at most twice — once before the kill if it was running, once after.
//! Submits in flight at the kill are acknowledged (and then survive) or not; one committed
//! without its 202 may exist, once, and runs like the others.
//!
//! The wire is the witness: each simulated machine (`labrouter::sim::Sim`, in this process)
//! sits behind a small TCP relay that counts the marker each task carries in its prompt, so
//! the counts are per task and per side of the kill. The router is a child process that
//! binds port 0 and logs the address it got (`--log-format json`): no port is guessed.
//! Real time is unavoidable with a real process; every wait is a poll with a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/process.rs"]
mod process;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use labrouter::sim::{Fault, Sim};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use process::{finished, get, until, Router};

/// Tasks that finish before the kill, on healthy machines.
const DONE_BEFORE: u32 = 8;
/// Tasks whose machine is down: they wait out the kill.
const DOWN: u32 = 20;
/// Tasks on the slow machine: `SLOW_SLOTS` of them are mid-request at the kill, the rest
/// queue for its slots.
const SLOW: u32 = 20;
const SLOW_SLOTS: u32 = 3;
/// Submits sent at the moment of the kill: each either acknowledged or not, never half.
const RACING: u32 = 10;

// === the wire: a counting relay in front of each machine ===

/// The marker in task n's prompt: fixed width, so a scan never counts one twice.
fn marker(n: u32) -> String {
    format!("[[kill-{n:03}]]")
}
const MARKER_LEN: usize = 12;

/// How many times each task's marker went through to a machine.
#[derive(Default)]
struct Wire {
    seen: Mutex<HashMap<u32, u32>>,
}

impl Wire {
    /// Counts the whole markers in `buf` and keeps only a tail that may start the next one.
    fn scan(&self, buf: &mut Vec<u8>) {
        let mut i = 0;
        while i + MARKER_LEN <= buf.len() {
            let w = &buf[i..i + MARKER_LEN];
            let digits = &w[7..10];
            if w.starts_with(b"[[kill-")
                && w.ends_with(b"]]")
                && digits.iter().all(u8::is_ascii_digit)
            {
                let n: u32 = std::str::from_utf8(digits).unwrap().parse().unwrap();
                *self.seen.lock().unwrap().entry(n).or_insert(0) += 1;
                i += MARKER_LEN;
            } else {
                i += 1;
            }
        }
        let keep = buf.len().saturating_sub(i).min(MARKER_LEN - 1);
        buf.drain(..buf.len() - keep);
    }

    fn snapshot(&self) -> HashMap<u32, u32> {
        self.seen.lock().unwrap().clone()
    }
}

/// A relay on 127.0.0.1:0 to `sim`. It connects to the machine before reading a byte: when
/// the machine refuses, the router's connection is closed unread (a reset to the router)
/// and nothing counts as having reached the machine. While `open` is false it refuses for
/// the machine, closing each connection as it comes: its port stays bound, where a sim told
/// to refuse closes its own, and a listener of another process (a second test run at the
/// same time) could take that port and get the router's requests.
async fn relay(sim: &Sim, wire: Arc<Wire>, open: Arc<AtomicBool>) -> SocketAddr {
    let to: SocketAddr = sim
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            if open.load(Ordering::SeqCst) {
                tokio::spawn(pipe(client, to, Arc::clone(&wire)));
            }
        }
    });
    addr
}

async fn pipe(client: TcpStream, to: SocketAddr, wire: Arc<Wire>) {
    let Ok(upstream) = TcpStream::connect(to).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut from_router, mut to_router) = client.into_split();
    let (mut from_machine, mut to_machine) = upstream.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut tail = Vec::new();
        loop {
            let n = match from_router.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if to_machine.write_all(&buf[..n]).await.is_err() {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            wire.scan(&mut tail);
        }
    };
    let down = tokio::io::copy(&mut from_machine, &mut to_router);
    // Either side closing ends the connection (HTTP needs no half-close here).
    tokio::select! {
        () = up => {}
        _ = down => {}
    }
}

// === the lab ===

fn registry(fast: SocketAddr, slow: SocketAddr, down: SocketAddr, state: &Path) -> String {
    format!(
        r#"server:
  listen: 127.0.0.1:0
  state_dir: "{state}"
defaults:
  timeouts: {{ connect: 2s, first_byte: 5s, idle: 30s, total: 2m }}
  breaker: {{ failure_threshold: 3, cooldown: 1s, backoff: 1.0, max_cooldown: 1s, success_threshold: 1 }}
tasks:
  max_running: 8
machines:
  fast-box: {{ url: "http://{fast}/v1" }}
  slow-box: {{ url: "http://{slow}/v1", task_slots: {SLOW_SLOTS}, timeouts: {{ first_byte: 60s }} }}
  down-box: {{ url: "http://{down}/v1" }}
models:
  fast-m: {{ machine: fast-box, name: fast-model }}
  slow-m: {{ machine: slow-box, name: slow-model }}
  down-m: {{ machine: down-box, name: down-model }}
routes:
  - {{ name: fast, default: true, chain: [fast-m] }}
  - {{ name: slow, chain: [slow-m] }}
  - {{ name: down, chain: [down-m] }}
"#,
        state = state.display()
    )
}

fn submit_body(n: u32, route: &str) -> Value {
    json!({
        "route": route,
        "request": {"model": "auto", "messages": [
            {"role": "user", "content": format!("{} summarise this", marker(n))}
        ]},
        "metadata": {"n": n.to_string()},
    })
}

/// Submits task `n`; its id when acknowledged (202), `None` when the router did not answer.
async fn submit(client: &reqwest::Client, base: &str, n: u32, route: &str) -> Option<String> {
    let resp = client
        .post(format!("{base}/v1/tasks"))
        .json(&submit_body(n, route))
        .send()
        .await
        .ok()?;
    if resp.status() != 202 {
        return None;
    }
    let task: Value = resp.json().await.ok()?;
    Some(task["id"].as_str()?.to_string())
}

/// What a task was doing when the router was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Finished before the kill (half on the fast machine, half on the slow one, which
    /// then answered at once: its slots are known to serve).
    Done,
    /// Waiting for the down machine's breaker.
    Down,
    /// On the slow machine: mid-request, or queued for one of its slots.
    Slow,
    /// Submitted as the kill came.
    Racing,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_router_loses_no_acknowledged_task_and_runs_each_at_most_twice() {
    let started = Instant::now();
    let (fast, slow, down) = (
        Sim::start("fast-box").await.unwrap(),
        Sim::start("slow-box").await.unwrap(),
        Sim::start("down-box").await.unwrap(),
    );
    let wire = Arc::new(Wire::default());
    let open = || Arc::new(AtomicBool::new(true));
    let down_open = Arc::new(AtomicBool::new(false));
    let (fast_at, slow_at, down_at) = (
        relay(&fast, Arc::clone(&wire), open()).await,
        relay(&slow, Arc::clone(&wire), open()).await,
        relay(&down, Arc::clone(&wire), Arc::clone(&down_open)).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("registry.yaml");
    let yaml = registry(fast_at, slow_at, down_at, &dir.path().join("state"));
    std::fs::write(&config, yaml).unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(25))
        .build()
        .unwrap();

    let mut router = Router::start(&config).await;
    let base = router.base.clone();
    // n -> (id, kind) for every acknowledged task.
    let mut acked: BTreeMap<u32, (String, Kind)> = BTreeMap::new();
    let mut n = 0;
    for i in 0..DONE_BEFORE {
        let route = if i % 2 == 0 { "fast" } else { "slow" };
        let id = submit(&client, &base, n, route).await.expect("202");
        acked.insert(n, (id, Kind::Done));
        n += 1;
    }
    for (id, _) in acked.values() {
        let t = finished(&client, &base, id).await;
        assert_eq!(t["status"], "succeeded", "before the kill: {t}");
    }
    // From now on the slow machine takes 30 s to answer: the kill finds its slots busy.
    slow.set(Fault::SlowFirstByte(Duration::from_secs(30)));
    let slow_before = slow.work_hits();
    for i in 0..(DOWN + SLOW) {
        let (route, kind) = if i % 2 == 0 {
            ("down", Kind::Down)
        } else {
            ("slow", Kind::Slow)
        };
        let id = submit(&client, &base, n, route).await.expect("202");
        acked.insert(n, (id, kind));
        n += 1;
    }
    until(
        &router,
        "slow-box busy with its slots",
        Duration::from_secs(10),
        || {
            let hits = slow.work_hits() - slow_before;
            async move { hits >= u64::from(SLOW_SLOTS) }
        },
    )
    .await;
    until(
        &router,
        "down-box's tasks waiting",
        Duration::from_secs(10),
        || {
            let (client, base) = (client.clone(), base.clone());
            async move {
                let w = get(
                    &client,
                    format!("{base}/v1/tasks?status=waiting&limit=1000"),
                )
                .await;
                !w["data"].as_array().unwrap().is_empty()
            }
        },
    )
    .await;
    let running: BTreeSet<u32> = get(
        &client,
        format!("{base}/v1/tasks?status=running&limit=1000"),
    )
    .await["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metadata"]["n"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        slow.work_hits() - slow_before,
        u64::from(SLOW_SLOTS),
        "task_slots bound the slow machine"
    );
    assert_eq!(down.work_hits(), 0, "a refusing machine receives nothing");

    // Submits racing the kill: each is either acknowledged (and must survive) or not. The
    // kill comes as the first of them is acknowledged, while the others are in flight.
    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel();
    for m in n..n + RACING {
        let (client, base, answered) = (client.clone(), base.clone(), answered.clone());
        tokio::spawn(async move {
            let _ = answered.send((m, submit(&client, &base, m, "fast").await));
        });
    }
    drop(answered);
    let racing_ns: BTreeSet<u32> = (n..n + RACING).collect();
    let first = tokio::time::timeout(Duration::from_secs(10), answers.recv())
        .await
        .expect("a racing submit answered")
        .expect("racers");
    router.kill9();
    let before_kill = wire.snapshot();
    let mut answered = vec![first];
    while let Some(a) = answers.recv().await {
        answered.push(a);
    }
    for (m, id) in answered {
        if let Some(id) = id {
            acked.insert(m, (id, Kind::Racing));
        }
    }

    // Back up, on the same state directory, with every machine healthy.
    slow.set(Fault::Ok);
    down_open.store(true, Ordering::SeqCst);
    let router = Router::start(&config).await;
    let base = router.base.clone();
    for (n, (id, kind)) in &acked {
        let t = finished(&client, &base, id).await;
        assert_eq!(
            t["status"],
            "succeeded",
            "task {n} ({kind:?}) after the restart: {t}\n{}",
            router.logs()
        );
    }
    let listed = get(&client, format!("{base}/v1/tasks?limit=1000")).await;
    let listed = listed["data"].as_array().unwrap();
    let ids: BTreeSet<&str> = listed.iter().map(|t| t["id"].as_str().unwrap()).collect();
    let ns: BTreeSet<u32> = listed
        .iter()
        .map(|t| t["metadata"]["n"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.len(), listed.len(), "no task listed twice");
    assert_eq!(ns.len(), listed.len(), "no submit stored twice");
    for (id, _) in acked.values() {
        assert!(ids.contains(id.as_str()), "acknowledged {id} was lost");
    }
    // A racing submit committed but not acknowledged may exist too; nothing else may.
    let stored_racers = ns
        .iter()
        .filter(|m| racing_ns.contains(m) && !acked.contains_key(m))
        .count();
    assert!(
        ns.iter().all(|m| m < &(n + RACING)),
        "unknown tasks: {ns:?}"
    );
    assert_eq!(
        listed.len(),
        acked.len() + stored_racers,
        "the list holds the acknowledged tasks (and committed racers), each once"
    );
    for t in listed {
        assert_eq!(t["status"], "succeeded", "every stored task ran: {t}");
    }
    let racers_acked = racing_ns.iter().filter(|m| acked.contains_key(m)).count();
    eprintln!(
        "racing the kill: {racers_acked} of {RACING} submits acknowledged, {stored_racers} more stored unacknowledged"
    );

    // The wire: per task, at most once before the kill and at most once after.
    let total = wire.snapshot();
    let before = |m: u32| before_kill.get(&m).copied().unwrap_or(0);
    let after = |m: u32| total.get(&m).copied().unwrap_or(0) - before(m);
    for m in 0..n + RACING {
        let (b, a) = (before(m), after(m));
        let kind = acked.get(&m).map_or(Kind::Racing, |(_, k)| *k);
        let what = format!("task {m} ({kind:?}): {b} request(s) before the kill, {a} after");
        assert!(b <= 1 && a <= 1, "{what}");
        if !ns.contains(&m) {
            assert_eq!(b + a, 0, "a submit never stored never ran: {what}");
            continue;
        }
        assert!(b + a >= 1, "it succeeded, so it reached a machine: {what}");
        match kind {
            Kind::Racing => {}
            Kind::Done => assert_eq!((b, a), (1, 0), "finished before the kill: {what}"),
            Kind::Down => assert_eq!((b, a), (0, 1), "waited out the kill: {what}"),
            Kind::Slow => {
                assert_eq!(a, 1, "{what}");
                assert!(
                    b == 0 || running.contains(&m),
                    "ran before but was not running: {what}"
                );
            }
        }
    }
    let interrupted = (0..n).filter(|&m| before(m) == 1 && after(m) == 1).count();
    assert_eq!(
        interrupted, SLOW_SLOTS as usize,
        "the tasks mid-request at the kill ran once more, and only they"
    );
    // The relay and the machines agree on what arrived.
    let counted: u32 = total.values().sum();
    assert_eq!(
        u64::from(counted),
        fast.work_hits() + slow.work_hits() + down.work_hits(),
        "every work request carried one task's marker"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}
