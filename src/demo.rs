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

use std::collections::HashSet;
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::breaker::failure::words;
use crate::breaker::Phase;
use crate::lab::Lab;
use crate::machines::Transitioned;
use crate::registry::{Registry, RegistryError};
use crate::service::{Service, ServiceError};
use crate::sim::{Fault, Sim};

mod narrate;
mod setup;
mod traffic;

use narrate::Narrator;
use setup::{scaled, Act, Step};
use traffic::{Done, Traffic};

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

async fn with_sims(opts: &Options, sims: &[Sim; 3], out: &mut dyn Write) -> Result<Summary, DemoError> {
    let urls = sims.each_ref().map(|s| s.base_url());
    let yaml = setup::registry_yaml(urls.each_ref().map(String::as_str), opts.speed);
    let registry = Registry::parse(&yaml, "demo registry")?;
    let svc = Arc::new(Service::in_memory(registry, None)?);
    let lab = svc.lab();
    let mut transitions = svc.hub().subscribe();

    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let router = format!("http://{}", listener.local_addr()?);
    let (stop_router, router_stopped) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = router_stopped.await;
    };
    let server = tokio::spawn(crate::serve(listener, Arc::clone(&svc), stopped, Duration::from_secs(5)));

    let traffic = Arc::new(Traffic::new(&lab.registry, &router)?);
    let mut narrator = Narrator::new(out, Instant::now(), opts.progress);
    header(&mut narrator, &lab, &router, opts)?;

    let start = Instant::now();
    narrator.restart(start);
    let (stop, stop_rx) = watch::channel(false);
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let every = scaled(EVERY_S, opts.speed);
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let first = start + every * w / WORKERS;
            let work = traffic::worker(Arc::clone(&traffic), first, every, stop_rx.clone(), done_tx.clone());
            tokio::spawn(work)
        })
        .collect();
    drop(done_tx);

    let mut show = Show {
        speed: opts.speed,
        start,
        lab: Arc::clone(&lab),
        sims,
        traffic: Arc::clone(&traffic),
        narrator,
        served: 0,
        rerouted: 0,
        failed: 0,
        tallies: lab.registry.machines.iter().map(|_| Tally::default()).collect(),
        seen: HashSet::new(),
    };
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
    show.narrator.plain("")?;
    show.narrator.plain(&summary.to_string())?;
    Ok(summary)
}

/// What the demo is about to do, before the clock starts.
fn header(n: &mut Narrator<'_>, lab: &Lab, router: &str, opts: &Options) -> std::io::Result<()> {
    let reg = &lab.registry;
    n.plain("labrouter demo: three simulated machines and the router, all on 127.0.0.1")?;
    for (i, m) in reg.machines.iter().enumerate() {
        let models: Vec<&str> = reg
            .models
            .iter()
            .filter(|md| md.machine == i)
            .map(|md| md.name.as_str())
            .collect();
        n.plain(&format!("  {:<11} {:<32} {}", m.name, m.url, models.join(", ")))?;
    }
    n.plain(&format!("  {:<11} {router}/v1", "router"))?;
    for r in &reg.routes {
        let chain: Vec<String> = r.chain.iter().map(|&m| reg.target_name(m)).collect();
        n.plain(&format!("  route {:<10} {}", r.name, chain.join(" -> ")))?;
    }
    if let Some(m) = reg.machines.first() {
        let (b, t) = (&m.breaker, &m.timeouts);
        n.plain(&format!(
            "  breakers: open after {} failures in a row; one probe after {} (x{} per failed probe, up to {}); \
             hung = no answer in {} and a failed liveness check",
            b.failure_threshold,
            words(b.cooldown),
            b.backoff,
            words(b.max_cooldown),
            words(t.first_byte)
        ))?;
    }
    n.plain(&format!(
        "  traffic: {WORKERS} agents, each sending a task every {} (code, vision, summarize, chat)",
        words(scaled(EVERY_S, opts.speed))
    ))?;
    n.plain("")
}

/// One machine's counts as the story goes.
#[derive(Debug, Default)]
struct Tally {
    trips: u32,
    failed_probes: u32,
    recoveries: u32,
    /// When it tripped (for "back in service after").
    opened_at: Option<Instant>,
    /// `remote_attempts` and sim work hits when the current outage began.
    base: Option<(u64, u64)>,
    attempts_while_down: u64,
    reached_while_down: u64,
}

/// The demo while it plays.
struct Show<'a> {
    speed: f64,
    start: Instant,
    lab: Arc<Lab>,
    sims: &'a [Sim; 3],
    traffic: Arc<Traffic>,
    narrator: Narrator<'a>,
    served: u64,
    rerouted: u64,
    failed: u64,
    tallies: Vec<Tally>,
    /// Kinds of reroute already told since the last transition (route, skipped).
    seen: HashSet<(&'static str, String)>,
}

impl Show<'_> {
    async fn play(
        &mut self,
        transitions: &mut broadcast::Receiver<Transitioned>,
        done: &mut mpsc::UnboundedReceiver<Done>,
        stop: &watch::Sender<bool>,
    ) -> Result<(), DemoError> {
        let mut steps = setup::story().into_iter();
        let mut next = steps.next();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut hub_open = true;
        loop {
            let at = next.as_ref().map(|s| self.start + scaled(s.at, self.speed));
            tokio::select! {
                // Transitions first: a task's Done is sent after the transition it caused.
                biased;
                t = transitions.recv(), if hub_open => match t {
                    Ok(t) => self.on_transition(&t)?,
                    Err(RecvError::Lagged(n)) => self.narrator.say(&format!("({n} transitions not narrated)"))?,
                    Err(RecvError::Closed) => hub_open = false,
                },
                d = done.recv() => match d {
                    Some(d) => self.on_done(d)?,
                    // Every worker has stopped: the story is over.
                    None => break,
                },
                () = tokio::time::sleep_until(at.unwrap_or_else(Instant::now)), if at.is_some() => {
                    if let Some(step) = next.take() {
                        self.on_step(step, stop)?;
                    }
                    next = steps.next();
                }
                _ = tick.tick() => self.draw()?,
            }
        }
        while let Ok(t) = transitions.try_recv() {
            self.on_transition(&t)?;
        }
        self.narrator.done()?;
        Ok(())
    }

    fn machine(&self, name: &str) -> Option<usize> {
        self.lab.registry.machine_index(name)
    }

    fn on_step(&mut self, step: Step, stop: &watch::Sender<bool>) -> Result<(), DemoError> {
        self.narrator.say(&format!("story: {}", step.line))?;
        match step.act {
            Act::Break(s, fault) => {
                let sim = &self.sims[s];
                if let Some(i) = self.machine(sim.name()) {
                    let attempts = self.lab.machines.snapshot(i).remote_attempts;
                    self.tallies[i].base = Some((attempts, sim.work_hits()));
                    self.traffic.down[i].store(true, Ordering::Relaxed);
                }
                sim.set(fault);
            }
            Act::Fix(s) => {
                let sim = &self.sims[s];
                sim.set(Fault::Ok);
                if let Some(i) = self.machine(sim.name()) {
                    self.traffic.down[i].store(false, Ordering::Relaxed);
                    let attempts = self.lab.machines.snapshot(i).remote_attempts;
                    let tally = &mut self.tallies[i];
                    if let Some((a, h)) = tally.base.take() {
                        tally.attempts_while_down += attempts.saturating_sub(a);
                        tally.reached_while_down += sim.work_hits().saturating_sub(h);
                    }
                }
            }
            Act::End => {
                let _ = stop.send(true);
            }
        }
        Ok(())
    }

    fn on_transition(&mut self, t: &Transitioned) -> Result<(), DemoError> {
        let mut down_for = None;
        if let Some(i) = self.machine(&t.machine) {
            let tally = &mut self.tallies[i];
            match (t.transition.from, t.transition.to) {
                (Phase::Closed, Phase::Open) => {
                    tally.trips += 1;
                    tally.opened_at = Some(Instant::now());
                }
                (Phase::HalfOpen, Phase::Open) => tally.failed_probes += 1,
                (_, Phase::Closed) => {
                    tally.recoveries += 1;
                    down_for = tally.opened_at.take().map(|at| at.elapsed());
                }
                _ => {}
            }
        }
        self.seen.clear();
        let line = narrate::transition(t, &self.lab, down_for);
        self.narrator.say(&line)?;
        Ok(())
    }

    fn on_done(&mut self, d: Done) -> Result<(), DemoError> {
        match &d.outcome {
            Ok(s) => {
                self.served += 1;
                if s.rerouted {
                    self.rerouted += 1;
                    if self.seen.insert((d.kind.route(), s.skipped.clone())) {
                        self.narrator.say(&narrate::reroute(&d, s))?;
                    }
                }
            }
            Err(why) => {
                self.failed += 1;
                self.narrator
                    .say(&format!("task #{} ({}) FAILED: {why}", d.n, d.kind.route()))?;
            }
        }
        Ok(())
    }

    fn draw(&mut self) -> Result<(), DemoError> {
        let states: Vec<String> = (0..self.lab.machines.len())
            .map(|i| {
                let s = self.lab.machines.snapshot(i);
                format!("{} {}", s.name, s.breaker.phase)
            })
            .collect();
        let line = format!(
            "  [{:>5.1}s] sent {} | served {} | rerouted {} | failed {} | {}",
            self.start.elapsed().as_secs_f64(),
            self.traffic.sent(),
            self.served,
            self.rerouted,
            self.failed,
            states.join(", ")
        );
        self.narrator.progress(&line)?;
        Ok(())
    }

    fn summary(&self, elapsed: Duration) -> Summary {
        let machines = self
            .lab
            .registry
            .machines
            .iter()
            .zip(&self.tallies)
            .enumerate()
            .map(|(i, (m, t))| MachineSummary {
                name: m.name.clone(),
                trips: t.trips,
                failed_probes: t.failed_probes,
                recoveries: t.recoveries,
                tasks_while_down: self.traffic.tasks_while_down[i].load(Ordering::Relaxed),
                attempts_while_down: t.attempts_while_down,
                reached_while_down: t.reached_while_down,
            })
            .collect();
        Summary {
            elapsed,
            sent: self.traffic.sent(),
            served: self.served,
            rerouted: self.rerouted,
            failed: self.failed,
            machines,
        }
    }
}
