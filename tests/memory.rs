//! Memory across restarts (README "What it remembers", §3.7): a real SQLite file, whole routers
//! (`labrouter::run`) in-process on 127.0.0.1, simulated machines counting what reaches them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::{RunOptions, Service};
use serde_json::Value;
use support::header;

struct Machines {
    gpu: Sim,
    cpu: Sim,
    local: Sim,
}

impl Machines {
    async fn start() -> Machines {
        Machines {
            gpu: Sim::start("gpu-box").await.unwrap(),
            cpu: Sim::start("ubuntu-box").await.unwrap(),
            local: Sim::start("local").await.unwrap(),
        }
    }

    fn yaml(&self, state_dir: &std::path::Path) -> String {
        support::registry_yaml(&self.gpu, &self.cpu, &self.local, "").replace(
            "  max_body: 64KiB",
            &format!(
                "  max_body: 64KiB\n  state_dir: \"{}\"",
                state_dir.display()
            ),
        )
    }
}

/// A router with memory: the whole service (`labrouter::run`) on a listener the test
/// holds, served until it is stopped (gracefully) or crashed.
struct Router {
    svc: Arc<Service>,
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Router {
    async fn start(yaml: &str) -> Router {
        let svc = Arc::new(
            Service::remembering(Registry::parse(yaml, "test.yaml").unwrap(), None).unwrap(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let served = tokio::spawn(labrouter::run(
            Arc::clone(&svc),
            listener,
            shutdown,
            RunOptions::default(),
        ));
        Router {
            svc,
            base,
            stop,
            served,
        }
    }

    async fn chat(&self, model: &str) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    }

    async fn events(&self, query: &str) -> Value {
        reqwest::get(format!("{}/status/events?{query}", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Graceful stop: stop serving, write what is queued.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.served.await.unwrap().unwrap();
        assert!(self.svc.store().unwrap().flush(Duration::from_secs(5)));
    }

    /// As kill -9 leaves it: the accept loop and every background task stop at once, with no
    /// drain and no flush. The service is handed back un-dropped (dropping its store would
    /// write what is queued): keep it until the test ends.
    async fn crash(self) -> Arc<Service> {
        let Router {
            svc, stop, served, ..
        } = self;
        served.abort();
        assert!(served.await.unwrap_err().is_cancelled());
        drop(stop); // after the abort: a dropped sender would start a graceful shutdown
        svc
    }

    fn state(&self, machine: &str) -> String {
        let lab = self.svc.fleet();
        let i = lab.registry.machine_index(machine).unwrap();
        lab.machines.phase(i).as_str().to_string()
    }
}

#[tokio::test(start_paused = true)]
async fn an_open_machine_stays_open_across_a_graceful_restart_and_is_probed_once_after_the_cooldown(
) {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = m.yaml(dir.path());
    let r = Router::start(&yaml).await;
    m.gpu.set(Fault::Refuse);
    for _ in 0..3 {
        assert_eq!(r.chat("code").await.status(), 200);
    }
    assert_eq!(r.state("gpu-box"), "open");
    r.stop().await;

    // The machine is back, but the fresh router does not know that yet: it trusts the verdict.
    m.gpu.set(Fault::Ok);
    m.gpu.reset_counts();
    let r = Router::start(&yaml).await;
    assert_eq!(r.state("gpu-box"), "open");
    let resp = r.chat("code").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(
        m.gpu.work_hits(),
        0,
        "zero requests to the machine that was open"
    );
    tokio::time::sleep(Duration::from_secs(61)).await;
    for _ in 0..3 {
        let resp = r.chat("code").await;
        assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    }
    assert_eq!(m.gpu.work_hits(), 3, "one probe, then closed and serving");
    assert_eq!(r.state("gpu-box"), "closed");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_ledger_records_open_half_open_closed_with_counts_that_match_the_wire() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let r = Router::start(&m.yaml(dir.path())).await;
    m.gpu.set(Fault::Status {
        code: 500,
        retry_after: None,
    });
    for _ in 0..5 {
        r.chat("code").await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    m.gpu.set(Fault::Ok);
    r.chat("code").await;
    assert!(r.svc.store().unwrap().flush(Duration::from_secs(5)));
    let v = r.events("machine=gpu-box").await;
    let events = v["events"].as_array().unwrap();
    let steps: Vec<(String, String)> = events
        .iter()
        .rev()
        .map(|e| {
            (
                e["from"].as_str().unwrap().to_string(),
                e["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("closed".into(), "open".into()),
            ("open".into(), "half_open".into()),
            ("half_open".into(), "closed".into())
        ]
    );
    let opened = &events[2];
    assert_eq!(opened["reason"], "HTTP 500");
    assert_eq!(opened["failures"], 3);
    assert_eq!(opened["remote_attempted"], true);
    assert_eq!(opened["remote_attempts"], 3);
    assert!(opened["cooldown_until"].as_str().unwrap().ends_with('Z'));
    assert_eq!(events[1]["remote_attempted"], false);
    let closed = &events[0];
    assert_eq!(closed["reason"], "probe succeeded");
    // What the wire saw: 3 failures, then 2 requests rejected locally, then the probe.
    assert_eq!(m.gpu.work_hits(), 4);
    assert_eq!(closed["remote_attempts"], 4);
    assert_eq!(closed["local_rejections"], 2);
    // Paging: one at a time, newest first.
    let page = r.events("machine=gpu-box&limit=1").await;
    let before = page["next_before"].as_i64().unwrap();
    let next = r
        .events(&format!("machine=gpu-box&limit=1&before={before}"))
        .await;
    assert_eq!(next["events"][0]["to"], "half_open");
    let bad = reqwest::get(format!("{}/status/events?since=yesterday", r.base))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    r.stop().await;
}

/// Writes one verdict row by hand into a fresh store.
fn seed(dir: &std::path::Path, machine: &str, state: &str, written_ago: Duration) {
    drop(labrouter::store::Store::open(dir).unwrap());
    let conn = rusqlite::Connection::open(dir.join(labrouter::store::FILE)).unwrap();
    let now = labrouter::store::ms(SystemTime::now());
    let written = now - written_ago.as_millis() as i64;
    conn.execute(
        "INSERT INTO verdicts (machine, state, failures, opened_at_ms, cooldown_ms, open_until_ms,
                               last_reason, last_retry_after_ms, registry_version, updated_at_ms)
         VALUES (?1, ?2, 3, ?3, 60000, ?4, 'connection refused', NULL, 'test', ?3)",
        rusqlite::params![machine, state, written, written + 3_600_000],
    )
    .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_verdict_older_than_max_cooldown_is_ignored() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path(), "gpu-box", "open", Duration::from_secs(16 * 60));
    let r = Router::start(&m.yaml(dir.path())).await;
    assert_eq!(r.state("gpu-box"), "closed");
    let resp = r.chat("code").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-gpu@gpu-box");
    r.stop().await;
    // A recent one is kept.
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path(), "gpu-box", "open", Duration::from_secs(60));
    let r = Router::start(&m.yaml(dir.path())).await;
    assert_eq!(r.state("gpu-box"), "open");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_row_fails_closed_and_is_ledgered() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path(), "gpu-box", "banana", Duration::from_secs(60));
    let r = Router::start(&m.yaml(dir.path())).await;
    assert_eq!(r.state("gpu-box"), "open");
    assert_eq!(r.state("ubuntu-box"), "closed");
    let resp = r.chat("code").await;
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(m.gpu.work_hits(), 0);
    assert!(r.svc.store().unwrap().flush(Duration::from_secs(5)));
    let v = r.events("machine=gpu-box").await;
    assert_eq!(v["events"][0]["reason"], "state_unreadable");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_file_opens_every_machine_and_a_missing_one_is_created() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(labrouter::store::FILE), b"this is not a database, not even close .................................................................................................").unwrap();
    let r = Router::start(&m.yaml(dir.path())).await;
    for machine in ["gpu-box", "ubuntu-box", "local"] {
        assert_eq!(r.state(machine), "open", "{machine} fails closed");
    }
    let resp = r.chat("code").await;
    assert_eq!(resp.status(), 503);
    assert_eq!(
        m.gpu.work_hits() + m.cpu.work_hits() + m.local.work_hits(),
        0
    );
    r.stop().await;
    let moved = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().contains("unreadable"));
    assert!(moved, "the unreadable file was kept aside");

    let fresh = tempfile::tempdir().unwrap();
    let state_dir = fresh.path().join("not-yet");
    let r = Router::start(&m.yaml(&state_dir)).await;
    assert!(state_dir.join(labrouter::store::FILE).exists());
    assert_eq!(r.state("gpu-box"), "closed");
    r.stop().await;
}

#[tokio::test]
async fn an_open_machine_stays_open_across_kill_9() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = m.yaml(&dir.path().join("state"));

    let r = Router::start(&yaml).await;
    m.gpu.set(Fault::Refuse);
    for _ in 0..3 {
        assert_eq!(r.chat("code").await.status(), 200);
    }
    // The transition is on disk once the ledger shows it (bounded poll).
    let mut written = false;
    for _ in 0..250 {
        if r.events("machine=gpu-box").await["events"][0]["to"] == "open" {
            written = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(written);
    let _crashed = r.crash().await; // kill -9

    m.gpu.set(Fault::Ok);
    m.gpu.reset_counts();
    let r = Router::start(&yaml).await;
    let resp = r.chat("code").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-labrouter-skipped"),
        "coder-gpu@gpu-box=circuit_open"
    );
    assert_eq!(
        m.gpu.work_hits(),
        0,
        "the fresh router sent nothing to the machine that was open"
    );
    let status: Value = reqwest::get(format!("{}/status", r.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["machines"]["gpu-box"]["state"], "open");
    assert_eq!(
        status["machines"]["gpu-box"]["last_reason"],
        "connection refused"
    );
    r.stop().await;
}

#[tokio::test]
async fn an_older_schema_is_migrated_in_place_keeping_its_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path(), "gpu-box", "open", Duration::from_secs(60));
    {
        // Back to schema 1, as an older labrouter left it.
        let conn = rusqlite::Connection::open(dir.path().join(labrouter::store::FILE)).unwrap();
        conn.execute_batch(
            "DROP TABLE counters; DROP TABLE tasks; DROP TABLE idempotent_answers;
             DROP TABLE task_totals; DROP TABLE responses; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let (store, restored) = labrouter::store::Store::open(dir.path()).unwrap();
    drop(store);
    assert!(matches!(&restored, labrouter::store::Recalled::Verdicts(v)
            if matches!(&v[..], [(m, labrouter::store::Restored::Found { .. })] if m == "gpu-box")));
    let conn = rusqlite::Connection::open(dir.path().join(labrouter::store::FILE)).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 6, "every later migration ran");
    let counters: i64 = conn
        .query_row("SELECT COUNT(*) FROM counters", [], |r| r.get(0))
        .unwrap();
    assert_eq!(counters, 0, "the new table exists");
}

// === README "Safety": the database does not grow without bound ===

async fn admin(r: &Router, action: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/admin/breakers/gpu-box/{action}", r.base))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The reproduction: 20 × 2 MB admin POSTs made a 45 MB database and a 40 MB events page;
/// a `why` with a newline forged a log line. Bodies over `server.max_body` get 413; fields
/// are cut to 200 characters and escaped; actions that change nothing are not ledgered.
#[tokio::test(start_paused = true)]
async fn admin_notes_are_bounded_and_no_op_actions_are_not_ledgered() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let r = Router::start(&m.yaml(dir.path())).await;
    // A body over server.max_body (64 KiB here) is refused whole, changing nothing.
    let too_big = format!("line one\nFAKE LOG LINE{}", "x".repeat(1_900_000));
    let resp = admin(
        &r,
        "open",
        serde_json::json!({"by": "alice", "why": too_big}),
    )
    .await;
    assert_eq!(resp.status(), 413);
    // Under it, a note is still far longer than the ledger keeps.
    let huge = format!("line one\nFAKE LOG LINE{}", "x".repeat(60_000));
    for _ in 0..3 {
        let resp = admin(&r, "close", serde_json::json!({"by": "alice", "why": huge})).await;
        assert_eq!(resp.status(), 200);
    }
    let resp = admin(
        &r,
        "open",
        serde_json::json!({"by": "y".repeat(3000), "why": huge}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let resp = admin(&r, "open", serde_json::json!({"by": "bob"})).await;
    assert_eq!(resp.status(), 200);
    assert!(r.svc.store().unwrap().flush(Duration::from_secs(5)));
    let v = r.events("machine=gpu-box").await;
    let events = v["events"].as_array().unwrap();
    assert_eq!(
        events.len(),
        1,
        "closing a closed breaker and re-opening a forced one change nothing: {v}"
    );
    let reason = events[0]["reason"].as_str().unwrap();
    assert!(
        reason.chars().count() <= 450,
        "{} chars",
        reason.chars().count()
    );
    assert!(
        !reason.contains('\n') && reason.contains("line one\\nFAKE"),
        "{reason}"
    );
    let db = std::fs::metadata(dir.path().join(labrouter::store::FILE))
        .unwrap()
        .len();
    assert!(db < 1 << 20, "database is {db} bytes");
    r.stop().await;
}

/// Ledger rows older than `server.keep_ledger` are pruned.
#[tokio::test(start_paused = true)]
async fn old_ledger_rows_are_pruned() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = m
        .yaml(dir.path())
        .replace("  max_body: 64KiB", "  max_body: 64KiB\n  keep_ledger: 7d");
    drop(labrouter::store::Store::open(dir.path()).unwrap());
    {
        let conn = rusqlite::Connection::open(dir.path().join(labrouter::store::FILE)).unwrap();
        let now = labrouter::store::ms(SystemTime::now());
        for days in [30, 8, 6, 1] {
            conn.execute(
                "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                                     remote_attempted, registry_version, remote_attempts, local_rejections)
                 VALUES (?1, 'gpu-box', 'closed', 'open', ?2, 3, NULL, 1, 'test', 3, 0)",
                rusqlite::params![now - days * 86_400_000, format!("{days} days ago")],
            )
            .unwrap();
        }
    }
    let r = Router::start(&yaml).await;
    let store = r.svc.store().unwrap();
    store.prune(r.svc.fleet().registry.server.keep_ledger);
    assert!(store.flush(Duration::from_secs(5)));
    let v = r.events("machine=gpu-box").await;
    let reasons: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["1 days ago", "6 days ago"]);
    r.stop().await;
}

/// The digest reads one day of rows and counts 30 days in SQL, whatever the ledger holds.
#[tokio::test(start_paused = true)]
async fn the_digest_reads_a_bounded_day_and_counts_the_month_in_sql() {
    let dir = tempfile::tempdir().unwrap();
    drop(labrouter::store::Store::open(dir.path()).unwrap());
    let path = dir.path().join(labrouter::store::FILE);
    let now = labrouter::store::ms(SystemTime::now());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let row = |ago_ms: i64, machine: &str, from: &str, to: &str| {
            conn.execute(
                "INSERT INTO ledger (at_ms, machine, from_state, to_state, reason, failures, cooldown_until_ms,
                                     remote_attempted, registry_version, remote_attempts, local_rejections)
                 VALUES (?1, ?2, ?3, ?4, 'HTTP 500', 3, NULL, 1, 'test', 3, 0)",
                rusqlite::params![now - ago_ms, machine, from, to],
            )
            .unwrap();
        };
        let day = 86_400_000;
        // Ten days ago: 2,000 trips of the CPU box; 40 days ago: older than the month.
        for i in 0..2000 {
            row(10 * day + 2 * i, "ubuntu-box", "closed", "open");
            row(10 * day + 2 * i + 1, "ubuntu-box", "open", "closed");
        }
        row(40 * day, "gpu-box", "closed", "open");
        // The GPU box went down 2 days ago and came back 2 hours ago.
        row(2 * day, "gpu-box", "closed", "open");
        row(2 * 3_600_000, "gpu-box", "open", "closed");
    }
    let stored =
        labrouter::telegram::read_store(&path, jiff::Timestamp::from_millisecond(now).unwrap())
            .unwrap();
    let mut month = stored.month_trips.clone();
    month.sort();
    assert_eq!(
        month,
        [("gpu-box".to_string(), 1), ("ubuntu-box".to_string(), 2000)]
    );
    // One row each before the day (the state it began with) and the day's own rows.
    assert_eq!(stored.rows.len(), 3, "{:?}", stored.rows);
    assert_eq!(stored.rows.last().unwrap().to.as_str(), "closed");
}

/// A breaker forced open by hand stays open across restarts whatever its age.
#[tokio::test(start_paused = true)]
async fn a_forced_open_breaker_is_kept_across_restarts_whatever_its_age() {
    let m = Machines::start().await;
    let dir = tempfile::tempdir().unwrap();
    seed(
        dir.path(),
        "gpu-box",
        "forced_open",
        Duration::from_secs(30 * 86_400),
    );
    let r = Router::start(&m.yaml(dir.path())).await;
    assert_eq!(r.state("gpu-box"), "forced_open");
    let resp = r.chat("code").await;
    assert_eq!(header(&resp, "x-labrouter-target"), "coder-cpu@ubuntu-box");
    assert_eq!(m.gpu.work_hits(), 0);
    r.stop().await;
}
