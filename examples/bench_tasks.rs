//! What tasks cost (docs/api.md "Tasks"), for `scripts/bench.sh`: durable submits per second, the
//! scheduler's added latency before the first upstream byte, memory and disk per queued
//! task, and the time to resume a queue at start.
//!
//! Every mode is bounded in count and time, talks only to loopback, and prints one line of
//! `key=value` pairs for the script to parse.
//!
//! - `submit --url http://127.0.0.1:P/v1/tasks --clients 64 --secs 5`: closed loop, each
//!   client submitting again as soon as its 202 came; submits/s and latency to the 202. The
//!   router's machines should be held down (forced open) so the tasks just queue.
//! - `store --dir DIR --clients 64 --secs 3`: the same through the library (the scheduler's
//!   `submit`, the store's writer, no HTTP), once with `synchronous=FULL` (what the router
//!   uses) and once with `NORMAL` (`Store::open_with`), in alternating rounds: what
//!   durability costs.
//! - `latency --dir DIR --n 100`: an idle in-process router with one simulated machine;
//!   time from the send to the request's arrival at the machine, for a direct
//!   `POST /v1/chat/completions` and for a task submit, taking turns.
//! - `queue --url URL --n 10000 --rss-pid PID --db FILE`: submits and cancels a warm-up
//!   batch, then submits N tasks (machines held down) and reads the router's RSS before and
//!   after (and before the warm-up), and the SQLite file and WAL sizes.
//! - `resume --config FILE --expect N`: `Service::remembering` on the state directory the
//!   registry names, timed until `tasks().counts()` shows the N unfinished tasks.

#![allow(clippy::print_stdout)]
// Submit latencies and arrival times are wall-clock measurements: std's clocks are the
// point here (the sim stamps arrivals with SystemTime).
#![allow(clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Parser, Subcommand};
use labrouter::registry::Registry;
use labrouter::sim::Sim;
use labrouter::store::{Durability, Store};
use labrouter::tasks::scheduler::{FleetNow, Submitted};
use labrouter::tasks::{submit, Scheduler};
use labrouter::{Fleet, RunOptions, Service};

/// A small chat task, routed by keyword to the route `code`.
const TASK: &str = r#"{"request":{"model":"auto","messages":[{"role":"user","content":"refactor this function"}]}}"#;
const CHAT: &str =
    r#"{"model":"auto","messages":[{"role":"user","content":"refactor this function"}]}"#;

#[derive(Debug, Parser)]
#[command(about = "Task benchmarks for scripts/bench.sh (loopback only)")]
struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Closed-loop submits to a running router; submits/s and latency to the 202.
    Submit {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 5)]
        secs: u64,
        /// Unrecorded submits first (connections open, the writer warms up).
        #[arg(long, default_value_t = 1)]
        warmup_secs: u64,
    },
    /// Submits through the library, synchronous=FULL against NORMAL.
    Store {
        /// Where the SQLite files go (a disk, not tmpfs, for the figure to mean anything).
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Seconds per durability per round.
        #[arg(long, default_value_t = 3)]
        secs: u64,
        #[arg(long, default_value_t = 2)]
        rounds: u32,
    },
    /// Submit to first upstream byte against a direct request, on an idle lab.
    Latency {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 100)]
        n: usize,
    },
    /// N tasks queued on a router whose machines are held down: RSS and disk per task.
    Queue {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 10_000)]
        n: u64,
        /// Tasks submitted and cancelled first, outside the measure.
        #[arg(long, default_value_t = 640)]
        warmup: u64,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long)]
        rss_pid: u32,
        /// The router's SQLite file (`state_dir/labrouter.db`).
        #[arg(long)]
        db: PathBuf,
    },
    /// Time to resume the unfinished tasks of a stopped router's state directory.
    Resume {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        expect: u64,
        #[arg(long, default_value_t = 3)]
        runs: u32,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Mode::Submit { url, .. } | Mode::Queue { url, .. } = &args.mode {
        if !loopback(url) {
            eprintln!("bench_tasks: {url} is not a loopback URL; refusing");
            return ExitCode::FAILURE;
        }
    }
    // Two workers: the in-process modes run the router's own work (the writer's acks, the
    // scheduler) beside the load, as a real router would on this 2-core machine.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_tasks: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match args.mode {
            Mode::Submit {
                url,
                clients,
                secs,
                warmup_secs,
            } => http_submits(url, clients, secs, warmup_secs).await,
            Mode::Store {
                dir,
                clients,
                secs,
                rounds,
            } => store_submits(&dir, clients, secs, rounds).await,
            Mode::Latency { dir, n } => latency(&dir, n).await,
            Mode::Queue {
                url,
                n,
                warmup,
                clients,
                rss_pid,
                db,
            } => queue(url, n, warmup, clients, rss_pid, &db).await,
            Mode::Resume {
                config,
                expect,
                runs,
            } => resume(&config, expect, runs).await,
        }
    });
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_tasks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(url: &str) -> bool {
    let rest = url.strip_prefix("http://").unwrap_or("");
    rest.starts_with("127.") || rest.starts_with("localhost:")
}

fn client(pool: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(pool)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("cannot build the client: {e}"))
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn micros(d: Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

/// What a closed loop measured: submits acknowledged, failures, latencies (µs, sorted).
struct Loop {
    acked: u64,
    errors: u64,
    lat: Vec<u64>,
    secs: f64,
}

impl Loop {
    fn line(&self, prefix: &str) -> String {
        format!(
            "{prefix} acked={} errors={} secs={:.2} rps={:.0} p50_us={} p99_us={} max_us={}",
            self.acked,
            self.errors,
            self.secs,
            self.acked as f64 / self.secs.max(1e-9),
            pct(&self.lat, 0.50),
            pct(&self.lat, 0.99),
            self.lat.last().copied().unwrap_or(0),
        )
    }
}

/// Runs `clients` loops of `one` for `secs`; `one` answers whether its submit was acked.
async fn closed_loop<F, Fut>(clients: usize, secs: f64, one: F) -> Loop
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut loops = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (one, errors) = (one.clone(), Arc::clone(&errors));
        loops.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < until {
                let t0 = Instant::now();
                if one().await {
                    lat.push(micros(t0.elapsed()));
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for l in loops {
        lat.extend(l.await.unwrap_or_default());
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort_unstable();
    Loop {
        acked: lat.len() as u64,
        errors: errors.load(Ordering::Relaxed),
        lat,
        secs,
    }
}

async fn post_task(client: &reqwest::Client, url: &str) -> bool {
    match client
        .post(url)
        .header("content-type", "application/json")
        .body(TASK)
        .send()
        .await
    {
        Ok(resp) => resp.status() == 202 && resp.bytes().await.is_ok(),
        Err(_) => false,
    }
}

// === (a) durable submits per second ===

async fn http_submits(
    url: String,
    clients: usize,
    secs: u64,
    warmup: u64,
) -> Result<String, String> {
    let client = client(clients)?;
    let one = {
        let (client, url) = (client.clone(), url.clone());
        move || {
            let (client, url) = (client.clone(), url.clone());
            async move { post_task(&client, &url).await }
        }
    };
    if !one().await {
        return Err(format!("{url} did not answer a submit with 202"));
    }
    closed_loop(clients, warmup as f64, one.clone()).await;
    let l = closed_loop(clients, secs as f64, one).await;
    Ok(l.line(&format!("SUBMIT url={url} clients={clients}")))
}

/// A registry whose only machine nobody listens on; the library modes never start its
/// scheduler, so it is never called.
fn registry(state_dir: &Path, machine: &str, listen: &str) -> Result<Registry, String> {
    let yaml = format!(
        "server: {{ listen: \"{listen}\", state_dir: \"{}\" }}\n\
         tasks: {{ max_queued: 10000000 }}\n\
         machines: {{ box: {{ url: \"{machine}\" }} }}\n\
         models: {{ m: {{ machine: box, name: sim-model }} }}\n\
         routes: [{{ name: code, keywords: [refactor], chain: [m] }}, {{ name: chat, default: true, chain: [m] }}]\n",
        state_dir.display()
    );
    Registry::parse(&yaml, "bench_tasks.yaml").map_err(|e| e.to_string())
}

/// One closed loop of library submits on a fresh store opened with `durability`.
async fn library_round(
    dir: &Path,
    durability: Durability,
    clients: usize,
    secs: u64,
) -> Result<Loop, String> {
    let _ = std::fs::remove_dir_all(dir);
    let reg = Arc::new(registry(dir, "http://127.0.0.1:9/v1", "127.0.0.1:0")?);
    let (store, _) = Store::open_with(dir, durability).map_err(|e| e.to_string())?;
    let fleet = Arc::new(Fleet::new((*reg).clone()).map_err(|e| e.to_string())?);
    let now: FleetNow = Arc::new(move || Arc::clone(&fleet));
    let scheduler = Arc::new(Scheduler::resume(now, Arc::new(store))?);
    let one = {
        let (scheduler, reg) = (Arc::clone(&scheduler), Arc::clone(&reg));
        move || {
            let (scheduler, reg) = (Arc::clone(&scheduler), Arc::clone(&reg));
            async move {
                let Ok(new) = submit::read(TASK.as_bytes(), &reg, SystemTime::now()) else {
                    return false;
                };
                matches!(scheduler.submit("", new, None).await, Ok(Submitted::New(_)))
            }
        }
    };
    let l = closed_loop(clients, secs as f64, one).await;
    drop(scheduler);
    let _ = std::fs::remove_dir_all(dir);
    Ok(l)
}

async fn store_submits(
    dir: &Path,
    clients: usize,
    secs: u64,
    rounds: u32,
) -> Result<String, String> {
    let mut lines = Vec::new();
    let mut total = [(0u64, 0f64, Vec::new()), (0, 0.0, Vec::new())];
    for round in 0..rounds.max(1) {
        for (k, (d, name)) in [(Durability::Full, "full"), (Durability::Normal, "normal")]
            .into_iter()
            .enumerate()
        {
            let l = library_round(&dir.join(format!("{name}-{round}")), d, clients, secs).await?;
            if l.errors > 0 {
                return Err(format!("{} library submits failed ({name})", l.errors));
            }
            total[k].0 += l.acked;
            total[k].1 += l.secs;
            total[k].2.extend_from_slice(&l.lat);
        }
    }
    for (k, name) in ["full", "normal"].iter().enumerate() {
        let (acked, secs, lat) = &mut total[k];
        lat.sort_unstable();
        let l = Loop {
            acked: *acked,
            errors: 0,
            lat: std::mem::take(lat),
            secs: *secs,
        };
        lines.push(l.line(&format!("STORE synchronous={name} clients={clients}")));
    }
    Ok(lines.join("\n"))
}

// === (b) the scheduler's added latency ===

/// Time from `sent` to the last arrival the sim logged, once it logged more than `had`.
async fn arrival(sim: &Sim, had: usize, sent: SystemTime) -> Result<u64, String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let hits = sim.hit_times();
        if hits.len() > had {
            let at = hits[hits.len() - 1];
            return Ok(micros(at.duration_since(sent).unwrap_or_default()));
        }
        if Instant::now() > until {
            return Err("the machine never saw the request".into());
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Waits until task `id` succeeded (an idle lab for the next turn). Short `?wait=`s in a
/// loop: a wait can miss the finish when it lands before the task's commit.
async fn finished(client: &reqwest::Client, base: &str, id: &str) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let t: serde_json::Value = client
            .get(format!("{base}/v1/tasks/{id}?wait=100ms"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        match t["status"].as_str() {
            Some("succeeded") => return Ok(()),
            Some("queued" | "running" | "waiting") if Instant::now() < until => {}
            other => return Err(format!("task {id} is {other:?}")),
        }
    }
}

async fn latency(dir: &Path, n: usize) -> Result<String, String> {
    let sim = Sim::start("box").await.map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir);
    let reg = registry(dir, &sim.base_url(), "127.0.0.1:0")?;
    let svc = Arc::new(Service::remembering(reg, None).map_err(|e| e.to_string())?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(labrouter::run(
        Arc::clone(&svc),
        listener,
        async {
            let _ = stopped.await;
        },
        RunOptions::default(),
    ));
    let client = client(4)?;
    let (mut direct, mut task, mut ack) = (Vec::new(), Vec::new(), Vec::new());
    // Ten of each unrecorded: connections open, the task route's group is known to serve.
    for i in 0..n + 10 {
        let had = sim.hit_times().len();
        let sent = SystemTime::now();
        let resp = client
            .post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(CHAT)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if resp.status() != 200 {
            return Err(format!("a direct request answered {}", resp.status()));
        }
        let _ = resp.bytes().await;
        let d = arrival(&sim, had, sent).await?;

        let had = sim.hit_times().len();
        let sent = SystemTime::now();
        let resp = client
            .post(format!("{base}/v1/tasks"))
            .header("content-type", "application/json")
            .body(TASK)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let acked = micros(SystemTime::now().duration_since(sent).unwrap_or_default());
        if resp.status() != 202 {
            return Err(format!("a submit answered {}", resp.status()));
        }
        let t: serde_json::Value = resp.json().await.map_err(|e| e.to_string())?;
        let id = t["id"].as_str().unwrap_or_default().to_string();
        let a = arrival(&sim, had, sent).await?;
        finished(&client, &base, &id).await?;
        if i >= 10 {
            direct.push(d);
            task.push(a);
            ack.push(acked);
        }
    }
    let _ = stop.send(());
    let _ = served.await;
    drop(svc);
    let _ = std::fs::remove_dir_all(dir);
    let added: Vec<i64> = {
        let mut v: Vec<i64> = task
            .iter()
            .zip(&direct)
            .map(|(t, d)| *t as i64 - *d as i64)
            .collect();
        v.sort_unstable();
        v
    };
    let ipct = |q: f64| -> i64 {
        let rank = ((q * added.len() as f64).ceil() as usize).clamp(1, added.len().max(1));
        added.get(rank - 1).copied().unwrap_or(0)
    };
    for v in [&mut direct, &mut task, &mut ack] {
        v.sort_unstable();
    }
    Ok(format!(
        "LATENCY n={n} direct_p50_us={} direct_p99_us={} task_p50_us={} task_p99_us={} added_p50_us={} added_p99_us={} ack_p50_us={} ack_p99_us={}",
        pct(&direct, 0.5),
        pct(&direct, 0.99),
        pct(&task, 0.5),
        pct(&task, 0.99),
        ipct(0.5),
        ipct(0.99),
        pct(&ack, 0.5),
        pct(&ack, 0.99),
    ))
}

// === (c) memory and disk per queued task ===

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Submits `n` tasks over `clients` connections; with `cancel`, cancels each once it is
/// acknowledged (it leaves the queue). The seconds it took.
async fn fill(
    client: &reqwest::Client,
    url: &str,
    n: u64,
    clients: usize,
    cancel: bool,
) -> Result<f64, String> {
    let left = Arc::new(AtomicU64::new(n));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut loops = Vec::new();
    for _ in 0..clients {
        let (client, url, left, errors) = (
            client.clone(),
            url.to_string(),
            Arc::clone(&left),
            Arc::clone(&errors),
        );
        loops.push(tokio::spawn(async move {
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                .is_ok()
            {
                let ok = match post_task_id(&client, &url).await {
                    Some(id) if cancel => client
                        .post(format!("{url}/{id}/cancel"))
                        .send()
                        .await
                        .is_ok_and(|r| r.status() == 200),
                    Some(_) => true,
                    None => false,
                };
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for l in loops {
        let _ = l.await;
    }
    match errors.load(Ordering::Relaxed) {
        0 => Ok(started.elapsed().as_secs_f64()),
        e => Err(format!("{e} of {n} submits failed")),
    }
}

async fn post_task_id(client: &reqwest::Client, url: &str) -> Option<String> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(TASK)
        .send()
        .await
        .ok()?;
    if resp.status() != 202 {
        return None;
    }
    let t: serde_json::Value = resp.json().await.ok()?;
    t["id"].as_str().map(str::to_string)
}

async fn queue(
    url: String,
    n: u64,
    warmup: u64,
    clients: usize,
    pid: u32,
    db: &Path,
) -> Result<String, String> {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let client = client(clients)?;
    let rss_cold = rss_kb(pid);
    // Warm-up tasks, cancelled at once: the connections, the store's writer and readers
    // and the allocator's arenas warm up, and the queue is empty again.
    fill(&client, &url, warmup, clients, true).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rss_before, db_before, wal_before) = (rss_kb(pid), size(db), size(&wal));
    let secs = fill(&client, &url, n, clients, false).await?;
    drop(client);
    // The scheduler routes each new task once; let it finish and the allocator settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss_kb(pid);
    let (db_after, wal_after) = (size(db), size(&wal));
    let per = |kb: u64| (kb * 1024) as f64 / n as f64;
    Ok(format!(
        "QUEUE n={n} warmup={warmup} secs={secs:.2} rps={:.0} rss_cold_kb={rss_cold} rss_before_kb={rss_before} rss_after_kb={rss_after} mem_per_task_b={:.0} cold_mem_per_task_b={:.0} db_b={db_after} wal_b={wal_after} disk_per_task_b={:.0}",
        n as f64 / secs,
        per(rss_after.saturating_sub(rss_before)),
        per(rss_after.saturating_sub(rss_cold)),
        ((db_after + wal_after).saturating_sub(db_before + wal_before)) as f64 / n as f64,
    ))
}

// === (d) time to resume ===

async fn resume(config: &Path, expect: u64, runs: u32) -> Result<String, String> {
    let mut times = Vec::new();
    let mut found = 0;
    for _ in 0..runs.max(1) {
        let reg = Registry::load(config).map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let svc = Service::remembering(reg, None).map_err(|e| e.to_string())?;
        let c = svc
            .tasks()
            .map(|s| s.counts())
            .ok_or("the service opened no task queue")?;
        found = c.blocked + c.queued + c.waiting + c.running;
        times.push(micros(t0.elapsed()));
        // Dropping flushes the store, outside the measured time.
        drop(svc);
        if found != expect {
            return Err(format!("resumed {found} tasks, expected {expect}"));
        }
    }
    let first = times.first().copied().unwrap_or(0);
    times.sort_unstable();
    Ok(format!(
        "RESUME tasks={found} runs={} first_ms={:.1} best_ms={:.1} median_ms={:.1}",
        times.len(),
        first as f64 / 1000.0,
        times.first().copied().unwrap_or(0) as f64 / 1000.0,
        pct(&times, 0.5) as f64 / 1000.0,
    ))
}
