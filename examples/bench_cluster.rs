//! What sharing verdicts through Redis costs (README "Several routers", issue 14), for
//! `scripts/bench-cluster.sh`: the latency of a transition from one router to its peer, and
//! of the probe-lease round trip, against the bare Redis round trip in the same run.
//!
//! `cargo run --release --example bench_cluster -- --redis redis://127.0.0.1:PORT/0 --n 300
//!  [--idle-n 100 --gap-ms 20] [--lost 100]`
//!
//! Two routers, A and B, run in this process (`labrouter::run` on loopback listeners, the
//! whole service with its cluster worker), sharing one machine `m` (`shared: true`) through
//! the Redis given, under a prefix of their own. `m` points at a loopback port nothing
//! listens on and is never called: every transition is made by hand.
//!
//! - **Transitions**: `--n` times, A's breaker is forced open by hand and the clock runs
//!   until B's breaker shows `forced_open`; then A's is closed by hand ("manual ...", so B
//!   adopts the close of a forced open) until B's shows `closed`. What is timed is the whole
//!   way: A's step, its worker's publish script (`INCR`, `HSET`, `PUBLISH`), the message to
//!   B's subscription, B's adoption, and this task seeing it (woken by B's `changed`, with a
//!   short poll as the fallback).
//! - **Probe lease, won**: B's breaker is opened by three failures of its own (a made-up
//!   refusal: the threshold), its cooldown waited out; then `--n` times B admits the probe
//!   and `Machines::pooled` asks Redis for the pool's lease (`SET NX PX` in a script), timed;
//!   the lease is dropped (no verdict: the breaker stays half-open, the lease is released by
//!   compare-and-delete by B's worker, after the drop) and the next round waits until the
//!   key is gone, so each one times a won `SET NX`. It has to: a probe admitted before that
//!   release lands finds B's own lease in Redis, loses it to itself, and B answers
//!   `probe_in_flight` for the whole lease (15 s) with nobody probing. Whether a round was
//!   won, lost or unavailable (Redis slower than `cluster.timeout`) is read from the lease
//!   key afterwards and counted; the release (drop → key gone, polled) is timed too.
//! - **Probe lease, lost**: `--lost` times the lease is held by a made-up peer (`SET` by this
//!   program, 30 ms) while B asks: what each of the other routers pays after a cooldown.
//! - **Baselines**, interleaved with the won rounds so that they share the machine's noise:
//!   a bare `PING` and a bare `SET NX PX` on this program's own multiplexed connection.
//! - **Busy and idle.** Each measure runs `--n` rounds back to back (`mode=busy`: threads
//!   and caches hot, the best case), then the transitions, the won lease and its baselines
//!   `--idle-n` rounds more with `--gap-ms` of nothing before each operation (`mode=idle`:
//!   threads parked, as before a lab's rare transitions and probes). The lost rounds are
//!   busy: waiting for the made-up peer's lease to go is a poll.
//!
//! Prints `key=value` lines (latencies in µs, nearest-rank percentiles) for the script. Talks
//! only to loopback; every wait has a deadline.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use clap::Parser;
use labrouter::breaker::{Event, Failure, FailureKind, Phase, Skip};
use labrouter::clock::Instant;
use labrouter::cluster::State;
use labrouter::outcome::MachineId;
use labrouter::registry::Registry;
use labrouter::{RunOptions, Service};
use redis::aio::MultiplexedConnection;

/// The variable the routers' `cluster.redis_url_env` names.
const ENV: &str = "LABROUTER_BENCH_REDIS";
/// The one machine, `m`.
const M: MachineId = MachineId(0);
/// B's breaker cooldown, waited out once before the lease rounds.
const COOLDOWN: Duration = Duration::from_millis(200);
/// How long the made-up peer holds the lease in the lost rounds.
const PEER_HOLD_MS: u64 = 30;
/// Unrecorded rounds first: connections, scripts loaded (`EVALSHA` after one `EVAL`).
const WARMUP: usize = 10;
/// The fallback poll while waiting for a peer's verdict.
const POLL: Duration = Duration::from_millis(2);
/// The longest any one wait may take.
const PATIENCE: Duration = Duration::from_secs(5);

#[derive(Debug, Parser)]
#[command(
    about = "Transition and probe-lease latency through a loopback Redis (README: Several routers)"
)]
struct Args {
    /// The Redis both routers share: redis://127.0.0.1:PORT/0 (loopback only).
    #[arg(long)]
    redis: String,
    /// Recorded rounds of each measure.
    #[arg(long, default_value_t = 300)]
    n: usize,
    /// Recorded rounds of each measure again, each operation after `--gap-ms` of nothing
    /// (0: none).
    #[arg(long, default_value_t = 100)]
    idle_n: usize,
    /// The idle gap before each operation of the idle rounds.
    #[arg(long, default_value_t = 20)]
    gap_ms: u64,
    /// Recorded rounds of the lost lease (each waits out a 30 ms lease; 0: none).
    #[arg(long, default_value_t = 100)]
    lost: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !loopback(&args.redis) {
        eprintln!(
            "bench_cluster: {} is not a loopback Redis URL; refusing",
            args.redis
        );
        return ExitCode::from(2);
    }
    if args.n == 0 {
        eprintln!("bench_cluster: --n must be at least 1");
        return ExitCode::from(2);
    }
    // The routers read the Redis URL from the environment (cluster.redis_url_env), and the
    // environment may only be written while no other thread can read it: here, before the
    // runtime below starts its threads. (Edition 2021: `set_var` is a safe fn; in edition
    // 2024 it is `unsafe` for exactly this reason.)
    std::env::set_var(ENV, &args.redis);
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    // Two workers, as on the 2-core machine the figures are read for.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench_cluster: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(args)) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_cluster: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(url: &str) -> bool {
    let rest = url.strip_prefix("redis://").unwrap_or("");
    rest.starts_with("127.") || rest.starts_with("localhost:") || rest.starts_with("[::1]:")
}

async fn bench(args: Args) -> Result<Vec<String>> {
    let prefix = format!("bench-cluster-{}", std::process::id());
    let dead = dead_port()?;
    let a = Router::start("a", &prefix, dead).await?;
    let b = Router::start("b", &prefix, dead).await?;
    a.wait_up().await?;
    b.wait_up().await?;
    let share = b
        .svc
        .fleet()
        .machines
        .share(M)
        .ok_or_else(|| anyhow!("machine m is not shared"))?;
    let key = format!("{prefix}:probe:{share}");
    let mut conn = redis::Client::open(args.redis.as_str())
        .context("the Redis URL")?
        .get_multiplexed_async_connection()
        .await
        .context("connecting to Redis")?;

    let mut lines = vec![format!(
        "setup prefix={prefix} n={} idle_n={} gap_ms={} lost_n={} timeout_ms=50 cooldown_ms={}",
        args.n,
        args.idle_n,
        args.gap_ms,
        args.lost,
        COOLDOWN.as_millis()
    )];
    let gap = Duration::from_millis(args.gap_ms);
    for (mode, n, gap) in [("busy", args.n, Duration::ZERO), ("idle", args.idle_n, gap)] {
        if n == 0 {
            continue;
        }
        let (opened, closed) = transitions(&a, &b, n, gap).await?;
        let mut both = [opened.clone(), closed.clone()].concat();
        both.sort_unstable();
        lines.push(summary(
            &format!("transition to=forced_open mode={mode}"),
            opened,
        ));
        lines.push(summary(
            &format!("transition to=closed mode={mode}"),
            closed,
        ));
        lines.push(summary(&format!("transition to=both mode={mode}"), both));
    }
    for (mode, n, gap) in [("busy", args.n, Duration::ZERO), ("idle", args.idle_n, gap)] {
        if n == 0 {
            continue;
        }
        let won = won_leases(&b, &mut conn, &key, &prefix, n, gap).await?;
        let (l50, l99) = (pct(&won.lease, 0.50), pct(&won.lease, 0.99));
        let (p50, p99) = (pct(&won.ping, 0.50), pct(&won.ping, 0.99));
        lines.push(format!(
            "{} won={} lost={} unavailable={}",
            summary(&format!("lease result=won mode={mode}"), won.lease),
            won.counts.won,
            won.counts.lost,
            won.counts.unavailable
        ));
        if gap.is_zero() {
            lines.push(summary("release mode=busy", won.release));
        }
        lines.push(summary(&format!("baseline op=ping mode={mode}"), won.ping));
        lines.push(summary(
            &format!("baseline op=set_nx mode={mode}"),
            won.set_nx,
        ));
        lines.push(format!(
            "ratio mode={mode} lease_over_ping_p50={:.2} lease_over_ping_p99={:.2}",
            l50 as f64 / p50.max(1) as f64,
            l99 as f64 / p99.max(1) as f64
        ));
    }
    if args.lost > 0 {
        let lost = lost_leases(&b, &mut conn, &key, args.lost).await?;
        lines.push(format!(
            "{} won={} lost={} unavailable={}",
            summary("lease result=lost mode=busy", lost.lease),
            lost.counts.won,
            lost.counts.lost,
            lost.counts.unavailable
        ));
    }
    // The routers say how their links fared meanwhile.
    for (name, r) in [("a", &a), ("b", &b)] {
        let view = r
            .svc
            .bus()
            .cluster()
            .map(|l| l.view())
            .ok_or_else(|| anyhow!("router {name} has no cluster link"))?;
        lines.push(format!(
            "link node={name} state={} peers_seen={}",
            view.state,
            view.peers_seen.join(",")
        ));
    }
    let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
    a.stop().await;
    b.stop().await;
    Ok(lines)
}

/// A loopback port nothing listens on (bound, read, let go).
fn dead_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(l.local_addr()?.port())
}

/// One in-process router: the whole service (`labrouter::run`) on a loopback listener.
struct Router {
    svc: Arc<Service>,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Router {
    async fn start(node: &str, prefix: &str, dead: u16) -> Result<Router> {
        let yaml = format!(
            r#"server:
  listen: 127.0.0.1:0
cluster:
  redis_url_env: {ENV}
  prefix: {prefix}
  node: {node}
  timeout: 50ms
defaults:
  breaker: {{ failure_threshold: 3, cooldown: {cooldown}ms, backoff: 2.0, max_cooldown: 10s, success_threshold: 1 }}
machines:
  m: {{ url: "http://127.0.0.1:{dead}/v1", shared: true }}
models:
  m-m: {{ machine: m, name: bench-model }}
routes:
  - {{ name: chat, default: true, chain: [m-m] }}
"#,
            cooldown = COOLDOWN.as_millis()
        );
        let registry = Registry::parse(&yaml, "bench").context("the bench registry")?;
        let svc = Arc::new(Service::in_memory(registry, None).context("the bench service")?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the router's listener")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(labrouter::run(
            Arc::clone(&svc),
            listener,
            async {
                let _ = stopped.await;
            },
            RunOptions::default(),
        ));
        Ok(Router { svc, stop, served })
    }

    /// Until this router's link to Redis is up (connected, subscribed, synced).
    async fn wait_up(&self) -> Result<()> {
        let until = Instant::now() + PATIENCE;
        loop {
            if self.svc.bus().cluster().map(|l| l.state()) == Some(State::Up) {
                return Ok(());
            }
            if self.served.is_finished() {
                bail!("a router stopped before its link was up");
            }
            if Instant::now() > until {
                bail!("a router's link to Redis was not up within {PATIENCE:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(PATIENCE, self.served).await;
    }
}

/// `n` rounds (after the warm-up) of: A forced open until B shows it, A closed by hand
/// until B shows it, each after `gap` of nothing. The two lists of latencies (µs), sorted.
async fn transitions(
    a: &Router,
    b: &Router,
    n: usize,
    gap: Duration,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let (mut opened, mut closed) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n + WARMUP {
        idle(gap).await;
        let open = Event::ForceOpen("manual open by bench_cluster".into());
        let o = transition(a, b, open, Phase::ForcedOpen).await?;
        idle(gap).await;
        let close = Event::ForceClose("manual close by bench_cluster".into());
        let c = transition(a, b, close, Phase::Closed).await?;
        if i >= WARMUP {
            opened.push(micros(o));
            closed.push(micros(c));
        }
    }
    opened.sort_unstable();
    closed.sort_unstable();
    Ok((opened, closed))
}

/// Steps A's breaker and times until B's shows `want`.
async fn transition(a: &Router, b: &Router, event: Event, want: Phase) -> Result<Duration> {
    let (fa, fb) = (a.svc.fleet(), b.svc.fleet());
    // Registered before the step, and the phase read after each registration: no wake-up
    // is missed, and the poll is only the fallback.
    let changed = fb.machines.changed();
    tokio::pin!(changed);
    changed.as_mut().enable();
    let started = Instant::now();
    fa.machines.step(M, event);
    loop {
        if fb.machines.phase(M) == want {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PATIENCE {
            bail!(
                "B's breaker did not show {want} within {PATIENCE:?} of A's (it shows {})",
                fb.machines.phase(M)
            );
        }
        tokio::select! {
            () = &mut changed => {}
            () = tokio::time::sleep(POLL) => {}
        }
        changed.set(fb.machines.changed());
        changed.as_mut().enable();
    }
}

#[derive(Debug, Default)]
struct Counts {
    won: usize,
    lost: usize,
    unavailable: usize,
}

#[derive(Debug, Default)]
struct Leases {
    /// `pooled` round trips (µs), sorted.
    lease: Vec<u64>,
    /// From the lease's drop to its key gone from Redis (µs, polled), sorted.
    release: Vec<u64>,
    ping: Vec<u64>,
    set_nx: Vec<u64>,
    counts: Counts,
}

/// Opens B's breaker by its own failures (the threshold) and waits out the cooldown: the
/// next admission is the probe.
async fn due_for_probe(b: &Router) -> Result<()> {
    let fleet = b.svc.fleet();
    for _ in 0..3 {
        if fleet.machines.phase(M) == Phase::Open {
            break;
        }
        let lease = fleet
            .machines
            .admit(M)
            .map_err(|r| anyhow!("B did not admit a call to fail: {:?}", r.skip))?;
        lease.fail(Failure::new(
            FailureKind::Refused,
            "bench_cluster: a made-up refusal",
        ));
    }
    ensure!(
        fleet.machines.phase(M) == Phase::Open,
        "three failures did not open B's breaker (it shows {})",
        fleet.machines.phase(M)
    );
    tokio::time::sleep(COOLDOWN + Duration::from_millis(20)).await;
    Ok(())
}

/// B's next admission, which must be the probe; waits while a peer's probe is in flight.
async fn admit_probe(b: &Router) -> Result<labrouter::machines::Lease> {
    let fleet = b.svc.fleet();
    let until = Instant::now() + PATIENCE;
    loop {
        match fleet.machines.admit(M) {
            Ok(lease) if lease.is_probe() => return Ok(lease),
            Ok(_) => bail!(
                "B admitted a call that is no probe (its breaker shows {})",
                fleet.machines.phase(M)
            ),
            Err(r) if Instant::now() < until => {
                let wait = r
                    .retry_after
                    .unwrap_or(POLL)
                    .min(Duration::from_millis(100));
                tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
            }
            Err(r) => bail!("B admitted no probe within {PATIENCE:?}: {:?}", r.skip),
        }
    }
}

/// Waits until `key` is gone from Redis; how long that took.
async fn gone(conn: &mut MultiplexedConnection, key: &str) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let n: i64 = redis::cmd("EXISTS").arg(key).query_async(conn).await?;
        if n == 0 {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PATIENCE {
            bail!("the probe lease {key} was still in Redis after {PATIENCE:?}");
        }
    }
}

/// Times B asking the pool for the lease of `lease`, B's probe; the lease is dropped
/// before this returns (when it was dropped, if it was won).
async fn ask(
    b: &Router,
    lease: labrouter::machines::Lease,
    conn: &mut MultiplexedConnection,
    key: &str,
    counts: &mut Counts,
) -> Result<(Duration, Option<Instant>)> {
    let started = Instant::now();
    let pooled = b.svc.fleet().machines.pooled(lease).await;
    let took = started.elapsed();
    match pooled {
        Ok(lease) => {
            // Won, or Redis was unavailable and B's own breaker let the probe go: the key
            // says which.
            let holder: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
            if holder.is_some_and(|h| h.starts_with("b:")) {
                counts.won += 1;
            } else {
                counts.unavailable += 1;
            }
            drop(lease);
            Ok((took, Some(Instant::now())))
        }
        Err(r) if r.skip == Skip::ProbeInFlight => {
            counts.lost += 1;
            Ok((took, None))
        }
        Err(r) => bail!("B's probe was refused for {:?}", r.skip),
    }
}

/// `n` rounds of B winning the lease, each with a bare `PING` and `SET NX PX` beside it;
/// each of the three after `gap` of nothing. The release is timed only without a gap.
async fn won_leases(
    b: &Router,
    conn: &mut MultiplexedConnection,
    key: &str,
    prefix: &str,
    n: usize,
    gap: Duration,
) -> Result<Leases> {
    if b.svc.fleet().machines.phase(M) != Phase::HalfOpen {
        due_for_probe(b).await?;
    }
    let raw = format!("{prefix}:bench:raw");
    let mut out = Leases::default();
    let mut dropped: Option<Instant> = None;
    for i in 0..n + WARMUP {
        gone(conn, key).await?;
        let release = dropped.filter(|_| gap.is_zero()).map(|d| d.elapsed());

        idle(gap).await;
        let started = Instant::now();
        let _: String = redis::cmd("PING").query_async(conn).await?;
        let ping = started.elapsed();

        idle(gap).await;
        let started = Instant::now();
        let set: Option<String> = redis::cmd("SET")
            .arg(&raw)
            .arg("bench")
            .arg("NX")
            .arg("PX")
            .arg(15_000)
            .query_async(conn)
            .await?;
        let set_nx = started.elapsed();
        ensure!(set.is_some(), "the bare SET NX found its key taken");
        let _: i64 = redis::cmd("DEL").arg(&raw).query_async(conn).await?;

        let lease = admit_probe(b).await?;
        idle(gap).await;
        let mut counts = Counts::default();
        let (took, at) = ask(b, lease, conn, key, &mut counts).await?;
        dropped = at;
        if i >= WARMUP {
            out.lease.push(micros(took));
            out.ping.push(micros(ping));
            out.set_nx.push(micros(set_nx));
            out.release.extend(release.map(micros));
            out.counts.won += counts.won;
            out.counts.lost += counts.lost;
            out.counts.unavailable += counts.unavailable;
        }
    }
    gone(conn, key).await?;
    for v in [
        &mut out.lease,
        &mut out.release,
        &mut out.ping,
        &mut out.set_nx,
    ] {
        v.sort_unstable();
    }
    Ok(out)
}

/// `n` rounds of B asking while a made-up peer holds the lease for 30 ms.
async fn lost_leases(
    b: &Router,
    conn: &mut MultiplexedConnection,
    key: &str,
    n: usize,
) -> Result<Leases> {
    let mut out = Leases::default();
    for i in 0..n + WARMUP.min(n) {
        gone(conn, key).await?;
        // Admitted first (it may wait out the last round's `probe_in_flight`), so that the
        // round trip is timed right after the SET, as busy as the won rounds.
        let lease = admit_probe(b).await?;
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("peer:0")
            .arg("PX")
            .arg(PEER_HOLD_MS)
            .query_async(conn)
            .await?;
        let mut counts = Counts::default();
        let (took, _) = ask(b, lease, conn, key, &mut counts).await?;
        if i >= WARMUP.min(n) {
            out.lease.push(micros(took));
            out.counts.won += counts.won;
            out.counts.lost += counts.lost;
            out.counts.unavailable += counts.unavailable;
        }
    }
    gone(conn, key).await?;
    out.lease.sort_unstable();
    Ok(out)
}

/// Nothing for `gap`: the threads park, the caches cool, as between a lab's rare
/// transitions (zero: back to back).
async fn idle(gap: Duration) {
    if !gap.is_zero() {
        tokio::time::sleep(gap).await;
    }
}

/// `what n=.. p50_us=.. p99_us=.. max_us=.. mean_us=..` of sorted µs.
fn summary(what: &str, sorted: Vec<u64>) -> String {
    let mean = if sorted.is_empty() {
        0
    } else {
        sorted.iter().sum::<u64>() / sorted.len() as u64
    };
    format!(
        "{what} n={} p50_us={} p99_us={} max_us={} mean_us={mean}",
        sorted.len(),
        pct(&sorted, 0.50),
        pct(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0)
    )
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
