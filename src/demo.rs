//! `labrouter demo`: three simulated machines and the router on 127.0.0.1, a steady stream of
//! mixed tasks, and a scripted outage narrated as it happens (the README's first command).
//!
//! The story: the GPU box goes away for an update (connection refused) and comes back, then
//! hard-freezes (hung) and comes back; the CPU box fills its disk (HTTP 500) and is cleaned
//! up. Every breaker transition is narrated from the hub's broadcast, every new kind of
//! reroute from the response headers, and the end is a summary: tasks served, rerouted and
//! failed, and the attempts that reached dead machines against a retry-3-times client's.
//!
//! It waits only on tokio's clock, so a paused-clock test plays the whole story at once.

use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::outcome::words;
use crate::registry::{Registry, RegistryError};
use crate::service::{Service, ServiceError};
use crate::sim::Sim;

mod narrate;
mod setup;
mod show;
mod traffic;

use narrate::Narrator;
use setup::scaled;
use show::Show;
use traffic::Traffic;

/// Agents sending tasks at once, and how often each sends one (story time).
const WORKERS: u32 = 4;
const EVERY_S: f64 = 0.25;

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// 1.0 plays the story in real time (about 37 s); 2.0 twice as fast, timeouts and
    /// cooldowns included. Between 0.25 and 4.
    pub speed: f64,
    /// Keep a `\r`-rewritten progress line under the narration (for a terminal).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            speed: 1.0,
            progress: false,
        }
    }
}

/// What the demo did.
#[derive(Clone, Debug)]
pub struct Summary {
    pub elapsed: Duration,
    pub sent: u64,
    /// Tasks answered 200 with a complete answer.
    pub served: u64,
    /// Served tasks answered by a target other than their route's first.
    pub rerouted: u64,
    /// Tasks whose final answer was not a complete 200.
    pub failed: u64,
    /// In registry order: gpu-box, ubuntu-box, local.
    pub machines: Vec<MachineSummary>,
}

/// One machine's part in the story.
#[derive(Clone, Debug, Default)]
pub struct MachineSummary {
    pub name: String,
    /// closed -> open.
    pub trips: u32,
    /// half-open -> open: a probe found it still down.
    pub failed_probes: u32,
    /// -> closed.
    pub recoveries: u32,
    /// Tasks whose route tries this machine first, sent while the story had it down.
    pub tasks_while_down: u64,
    /// Requests the router sent to it while it was down (its `remote_attempts` over the
    /// outage windows, probes included).
    pub attempts_while_down: u64,
    /// Of those, the ones that reached the machine (a refused connection reaches nothing).
    pub reached_while_down: u64,
}

impl MachineSummary {
    /// What a client retrying each of those tasks 3 times on this machine would have sent.
    pub fn retry3_attempts(&self) -> u64 {
        3 * self.tasks_while_down
    }
}

impl Summary {
    /// Attempts at dead machines labrouter did not make, against a retry-3-times client.
    pub fn saved(&self) -> u64 {
        self.machines
            .iter()
            .map(|m| m.retry3_attempts().saturating_sub(m.attempts_while_down))
            .sum()
    }

    /// Every task sent was served.
    pub fn all_served(&self) -> bool {
        self.failed == 0 && self.served == self.sent
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("--speed must be a number between 0.25 and 4, got {0}")]
    Speed(f64),
    #[error("demo output: {0}")]
    Io(#[from] std::io::Error),
    #[error("the demo's registry is invalid (a bug): {0}")]
    Registry(#[from] RegistryError),
    #[error("cannot start the demo's router: {0}")]
    Service(#[from] ServiceError),
    #[error("cannot build the demo's HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Plays the demo, writing the narration and the summary to `out`.
pub async fn run(opts: &Options, out: &mut dyn Write) -> Result<Summary, DemoError> {
    if !(opts.speed.is_finite() && (0.25..=4.0).contains(&opts.speed)) {
        return Err(DemoError::Speed(opts.speed));
    }
    let gpu = Sim::start("gpu-box").await?;
    let cpu = Sim::start("ubuntu-box").await?;
    let local = Sim::start("local").await?;
    let sims = [gpu, cpu, local];
    let played = with_sims(opts, &sims, out).await;
    for sim in &sims {
        sim.shutdown();
    }
    played
}

async fn with_sims(
    opts: &Options,
    sims: &[Sim; 3],
    out: &mut dyn Write,
) -> Result<Summary, DemoError> {
    let urls = sims.each_ref().map(|s| s.base_url());
    let yaml = setup::registry_yaml(urls.each_ref().map(String::as_str), opts.speed);
    let registry = Registry::parse(&yaml, "demo registry")?;
    let svc = Arc::new(Service::in_memory(registry, None)?);
    let fleet = svc.fleet();
    let mut transitions = svc.bus().subscribe();

    // `serve` sets TCP_NODELAY on every accepted connection.
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let router = format!("http://{}", listener.local_addr()?);
    let (stop_router, router_stopped) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = router_stopped.await;
    };
    let server = tokio::spawn(crate::serve(
        listener,
        Arc::clone(&svc),
        stopped,
        Duration::from_secs(5),
    ));

    let traffic = Arc::new(Traffic::new(&fleet.registry, &router)?);
    let mut narrator = Narrator::new(out, Instant::now(), opts.progress);
    header(&mut narrator, &fleet, &router, opts)?;

    let start = Instant::now();
    narrator.restart(start);
    let (stop, stop_rx) = watch::channel(false);
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let every = scaled(EVERY_S, opts.speed);
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let first = start + every * w / WORKERS;
            let work = traffic::worker(
                Arc::clone(&traffic),
                first,
                every,
                stop_rx.clone(),
                done_tx.clone(),
            );
            tokio::spawn(work)
        })
        .collect();
    drop(done_tx);

    let mut show = Show::new(
        opts.speed,
        start,
        Arc::clone(&fleet),
        sims,
        Arc::clone(&traffic),
        narrator,
    );
    let played = show.play(&mut transitions, &mut done, &stop).await;

    // Whatever happened, stop the traffic and the router before returning.
    let _ = stop.send(true);
    for w in workers {
        let _ = w.await;
    }
    let _ = stop_router.send(());
    let _ = server.await;
    played?;

    let summary = show.summary(start.elapsed());
    show.narrator().plain("")?;
    show.narrator().plain(&summary.to_string())?;
    Ok(summary)
}

/// What the demo is about to do, before the clock starts.
fn header(
    n: &mut Narrator<'_>,
    fleet: &Fleet,
    router: &str,
    opts: &Options,
) -> std::io::Result<()> {
    let reg = &fleet.registry;
    n.plain("labrouter demo: three simulated machines and the router, all on 127.0.0.1")?;
    for (i, m) in reg.machines.enumerate() {
        let models: Vec<&str> = reg
            .models
            .iter()
            .filter(|md| md.machine == i)
            .map(|md| md.name.as_str())
            .collect();
        n.plain(&format!(
            "  {:<11} {:<32} {}",
            m.name,
            m.url,
            models.join(", ")
        ))?;
    }
    n.plain(&format!("  {:<11} {router}/v1", "router"))?;
    for r in &reg.routes {
        let chain: Vec<String> = r.chain.iter().map(|&m| reg.target_name(m)).collect();
        n.plain(&format!("  route {:<10} {}", r.name, chain.join(" -> ")))?;
    }
    if let Some(m) = reg.machines.iter().next() {
        let (b, t) = (&m.breaker, &m.timeouts);
        n.plain(&format!(
            "  breakers: open after {} failures in a row; one probe after {} (x{} per failed probe, up to {})",
            b.failure_threshold,
            words(b.cooldown),
            b.backoff,
            words(b.max_cooldown),
        ))?;
        n.plain(&format!(
            "  hung: no answer in {} and a failed liveness check (GET /v1/models)",
            words(t.first_byte)
        ))?;
    }
    n.plain(&format!(
        "  traffic: {WORKERS} agents, each sending a task every {} (code, vision, summarize, chat)",
        words(scaled(EVERY_S, opts.speed))
    ))?;
    n.plain("")
}
