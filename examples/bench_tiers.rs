//! What a tier of equal machines buys (docs/registry.md "routes:"; `scripts/bench.sh` runs
//! it, `BENCH_ONLY=tiers` alone):
//!
//! - two equal simulated machines that run one request at a time (`parallel: 1`), each in
//!   50 ms, 16 clients for a few seconds: requests per second through a tier `[[a, b]]` against a plain chain `[a, b]`
//!   in the same run (goal: at least 1.8x); `max_concurrency: 64`, so that the plain chain's
//!   bulkhead does not spill its first machine's queue onto the second;
//! - two Ollama twins of which the first must "load" the model for 5 s (its first answer
//!   waits that long) and the second lists it in `/api/ps`: mean time to first byte over
//!   sequential requests, picking warm first (a tier) against strictly in order (a plain
//!   chain, the cold twin first);
//! - the pick's cost per request (finding the tiers, reading the targets, ordering them).
//!
//! Router and machines run in this process on loopback (the machines are labrouter's own
//! sim); the figures are ratios between configurations measured here. Prints a markdown
//! table.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use labrouter::registry::Registry;
use labrouter::sim::{Fault, Sim};
use labrouter::Service;
use serde_json::json;
use tokio::time::Instant;

#[derive(Debug, Parser)]
#[command(about = "Requests/s through a tier against a plain chain; warm-first time to first byte")]
struct Args {
    /// Concurrent clients for the throughput measure.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seconds per throughput measure.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Sequential requests for the warm-first measure.
    #[arg(long, default_value_t = 20)]
    n: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let (tier_rps, plain_rps) = throughput(&args).await;
    let (warm_ms, order_ms) = warm_first(&args).await;
    let picks = [2, 4].map(|n| (n, pick_cost(n)));
    println!("| measure | tier | plain chain | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| two equal machines (50 ms, parallel 1), {} clients, {} s: requests/s | {tier_rps:.0} | {plain_rps:.0} | **{:.2}x** (goal ≥ 1.8x) |",
        args.clients,
        args.secs,
        tier_rps / plain_rps.max(1e-9)
    );
    println!(
        "| two Ollama twins, the first cold (5 s load), {} sequential requests: mean time to first byte | {warm_ms:.1} ms (warm first) | {order_ms:.1} ms (cold twin first) | {:.1}x |",
        args.n,
        order_ms / warm_ms.max(1e-9)
    );
    for (n, ns) in picks {
        println!(
            "| the pick's cost on a request's path, a tier of {n} behind 1,000 routes | {ns:.0} ns | — | goal ≤ 2 µs |"
        );
    }
}

/// Nanoseconds per pick (what `Walk::run` adds for a tier over a plain chain: finding the
/// route's tiers, reading each target's load and memory, ordering them), for a tier of `n`
/// behind 1,000 plain routes, over a million picks.
fn pick_cost(n: usize) -> f64 {
    use std::fmt::Write;
    let mut y = String::from("server: { listen: 127.0.0.1:0 }\nmachines:\n");
    for i in 0..n {
        let _ = writeln!(y, "  box{i}: {{ url: \"http://127.0.0.1:9/v1\" }}");
    }
    y.push_str("models:\n");
    for i in 0..n {
        let _ = writeln!(y, "  m{i}: {{ machine: box{i}, name: coder }}");
    }
    y.push_str("routes:\n");
    for r in 0..1000 {
        let _ = writeln!(y, "  - {{ name: r{r}, chain: [m0] }}");
    }
    let tier: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let _ = writeln!(y, "  - {{ name: code, chain: [[{}]] }}", tier.join(", "));
    let fleet = labrouter::Fleet::new(Registry::parse(&y, "pick.yaml").unwrap()).unwrap();
    let rounds = 1_000_000;
    let started = Instant::now();
    for _ in 0..rounds {
        let reg = &fleet.registry;
        let tier = &reg.tiers(std::hint::black_box("code"))[0];
        let mut seen: Vec<labrouter::pick::Seen> = tier
            .iter()
            .map(|&m| {
                let (in_flight, _) = fleet.machines.load(reg.models[m].machine);
                fleet.picks.seen(reg, m, in_flight)
            })
            .collect();
        std::hint::black_box(labrouter::pick::order(&mut seen).next());
    }
    started.elapsed().as_nanos() as f64 / f64::from(rounds)
}

/// A router on loopback over `yaml`; its base URL.
async fn router(yaml: &str) -> (String, Arc<Service>) {
    let registry = Registry::parse(yaml, "bench-tiers.yaml").expect("valid registry");
    let svc = Arc::new(Service::in_memory(registry, None).expect("service"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(labrouter::serve(
        listener,
        Arc::clone(&svc),
        std::future::pending(),
        Duration::from_secs(1),
    ));
    (base, svc)
}

fn registry(a: &Sim, b: &Sim, api: &str) -> String {
    format!(
        r#"server: {{ listen: 127.0.0.1:0 }}
defaults: {{ timeouts: {{ first_byte: 30s }}, max_concurrency: 64 }}
machines:
  a: {{ url: "{}"{api} }}
  b: {{ url: "{}"{api} }}
models:
  ma: {{ machine: a, name: "qwen3-coder:30b" }}
  mb: {{ machine: b, name: "qwen3-coder:30b" }}
routes:
  - {{ name: tier, default: true, chain: [[ma, mb]] }}
  - {{ name: plain, chain: [ma, mb] }}
"#,
        a.base_url(),
        b.base_url()
    )
}

async fn chat(client: &reqwest::Client, base: &str, route: &str) -> bool {
    let body = json!({"model": route, "messages": [{"role": "user", "content": "hi"}]});
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await;
    match resp {
        Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
        _ => false,
    }
}

/// Requests/s through the tier, then through the plain chain.
async fn throughput(args: &Args) -> (f64, f64) {
    let a = Sim::start("a").await.unwrap();
    let b = Sim::start("b").await.unwrap();
    for sim in [&a, &b] {
        sim.set(Fault::SlowFirstByte(Duration::from_millis(50)));
        sim.set_serial(true);
    }
    let (base, _svc) = router(&registry(&a, &b, "")).await;
    let mut rps = [0.0; 2];
    for (i, route) in ["tier", "plain"].into_iter().enumerate() {
        let done = Arc::new(AtomicU64::new(0));
        let until = Instant::now() + Duration::from_secs(args.secs);
        let clients = (0..args.clients).map(|_| {
            let (done, base, client) = (Arc::clone(&done), base.clone(), reqwest::Client::new());
            tokio::spawn(async move {
                while Instant::now() < until {
                    if chat(&client, &base, route).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        });
        let started = Instant::now();
        for c in clients.collect::<Vec<_>>() {
            c.await.unwrap();
        }
        rps[i] = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    }
    (rps[0], rps[1])
}

/// Mean time to first byte (ms) over `n` sequential requests, warm first then in order, each
/// on fresh twins: the first cold for 5 s, the second listing the model as loaded.
async fn warm_first(args: &Args) -> (f64, f64) {
    let mut means = [0.0; 2];
    for (i, route) in ["tier", "plain"].into_iter().enumerate() {
        let a = Sim::start_ollama("a").await.unwrap();
        let b = Sim::start_ollama("b").await.unwrap();
        a.set_models(&["llama3.2:3b"]);
        b.set_models(&["qwen3-coder:30b"]);
        a.set(Fault::SlowFirstByte(Duration::from_secs(5)));
        let (base, svc) = router(&registry(&a, &b, ", api: ollama")).await;
        tokio::spawn(labrouter::warm::run(svc));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let client = reqwest::Client::new();
        let mut total = Duration::ZERO;
        for _ in 0..args.n {
            let started = Instant::now();
            let resp = client
                .post(format!("{base}/v1/chat/completions"))
                .json(&json!({"model": route, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            total += started.elapsed();
            let _ = resp.bytes().await;
            // Loaded now: the cold twin answers at once from here on.
            if a.work_hits() > 0 {
                a.set(Fault::Ok);
            }
        }
        means[i] = total.as_secs_f64() * 1000.0 / args.n as f64;
    }
    (means[0], means[1])
}
