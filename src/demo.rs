//! `labrouter demo`: three simulated machines and the router on 127.0.0.1, a steady stream of
//! mixed interactive requests, an evening pipeline of tasks, and a scripted outage narrated
//! as it happens (the README's first command).
//!
//! The story: the GPU box goes away for an update (connection refused); an agent asks for
//! the evening's pictures (image generation tasks, each posted by a follow-up once drawn)
//! and the CPU box draws them, slower; while the GPU box is away the CPU box fills its
//! disk (HTTP 500), so no machine that runs the coder model is up, and an
//! agent submits its evening pipeline (code reviews, each with a follow-up that uses its
//! answer). Interactive code requests degrade to the small local model; the tasks, which
//! accept only the coder model, wait instead of failing. The disk is cleaned up and the tasks
//! run; the GPU box comes back, later hard-freezes (hung) and comes back again. Every breaker
//! transition is narrated from the hub's broadcast, every new kind of reroute from the
//! response headers, the tasks from their queue, and the end is a summary: requests served,
//! rerouted and failed, tasks that waited, finished and failed, and the attempts that reached
//! dead machines against a retry-3-times client's.
//!
//! It waits only on tokio's clock, so a paused-clock test plays the whole story at once. The
//! tasks live in a SQLite file in a fresh temporary directory, removed at the end.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::outcome::words;
use crate::registry::{Registry, RegistryError};
use crate::service::{Service, ServiceError};
use crate::sim::Sim;

mod agent;
mod narrate;
mod pictures;
mod pipeline;
mod setup;
mod show;
mod summary;
mod traffic;

pub use summary::{MachineSummary, PictureSummary, Summary, TaskSummary};

use narrate::Narrator;
use pipeline::Pipeline;
use setup::scaled;
use show::Show;
use traffic::Traffic;

/// Agents sending interactive requests at once, and how often each sends one (story time).
const WORKERS: u32 = 4;
const EVERY_S: f64 = 0.25;

/// How the demo runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// 1.0 plays the story in real time (about 34 s); 2.0 twice as fast, timeouts and
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
    #[error("the demo's router keeps no tasks (a bug): it was started without a store")]
    NoTasks,
}

/// A fresh directory for the demo's task store under the system's temporary directory,
/// removed (with the store) when dropped.
struct StateDir(PathBuf);

impl StateDir {
    fn create() -> std::io::Result<StateDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "labrouter-demo-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir)?;
        Ok(StateDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Plays the demo, writing the narration and the summary to `out`.
pub async fn run(opts: &Options, out: &mut dyn Write) -> Result<Summary, DemoError> {
    if !(opts.speed.is_finite() && (0.25..=4.0).contains(&opts.speed)) {
        return Err(DemoError::Speed(opts.speed));
    }
    let gpu = Sim::start_ollama("gpu-box").await?;
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
    let state = StateDir::create()?;
    let played = with_store(opts, sims, state.path(), out).await;
    // The store is closed by now: the directory goes, whatever happened.
    drop(state);
    played
}

async fn with_store(
    opts: &Options,
    sims: &[Sim; 3],
    state_dir: &Path,
    out: &mut dyn Write,
) -> Result<Summary, DemoError> {
    let urls = sims.each_ref().map(|s| s.base_url());
    // Drawing takes time, more on the CPU box: the pictures show what an outage costs.
    sims[setup::GPU].set_image_time(scaled(pictures::DRAW_GPU_S, opts.speed));
    sims[setup::CPU].set_image_time(scaled(pictures::DRAW_CPU_S, opts.speed));
    let yaml = setup::registry_yaml(urls.each_ref().map(String::as_str), opts.speed, state_dir);
    let registry = Registry::parse(&yaml, "demo registry")?;
    let svc = Arc::new(Service::remembering(registry, None)?);
    let played = with_service(opts, sims, &svc, state_dir, out).await;
    // The last handle on the store joins its writer thread: off the runtime's threads.
    let _ = tokio::task::spawn_blocking(move || drop(svc)).await;
    played
}

async fn with_service(
    opts: &Options,
    sims: &[Sim; 3],
    svc: &Arc<Service>,
    state_dir: &Path,
    out: &mut dyn Write,
) -> Result<Summary, DemoError> {
    let fleet = svc.fleet();
    let mut transitions = svc.bus().subscribe();
    let scheduler = svc.tasks().cloned().ok_or(DemoError::NoTasks)?;
    let queue = tokio::spawn(Arc::clone(&scheduler).run());

    // `serve` sets TCP_NODELAY on every accepted connection.
    let listener = crate::server::listen((Ipv4Addr::LOCALHOST, 0).into())?;
    let router = format!("http://{}", listener.local_addr()?);
    let (stop_router, router_stopped) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = router_stopped.await;
    };
    let server = tokio::spawn(crate::serve(
        listener,
        Arc::clone(svc),
        stopped,
        Duration::from_secs(5),
    ));

    let traffic = Arc::new(Traffic::new(&fleet.registry, &router)?);
    let pipeline = Pipeline::new(scheduler, Arc::clone(&fleet));
    let mut narrator = Narrator::new(out, Instant::now(), opts.progress);
    header(&mut narrator, &fleet, &router, opts, &pipeline, state_dir)?;

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
        pipeline,
        narrator,
    );
    let played = show.play(&mut transitions, &mut done, &stop).await;
    let elapsed = start.elapsed();

    // Whatever happened, stop the traffic, the router and the queue before returning.
    let _ = stop.send(true);
    for w in workers {
        let _ = w.await;
    }
    let summary = show.summary(elapsed).await;
    let _ = stop_router.send(());
    let _ = server.await;
    queue.abort();
    let _ = queue.await;
    played?;

    show.narrator().plain("")?;
    show.narrator().plain(&summary.to_string())?;
    Ok(summary)
}

/// The demo's machines, with what each speaks and serves, the router and the routes.
fn lab_lines(n: &mut Narrator<'_>, fleet: &Fleet, router: &str) -> std::io::Result<()> {
    let reg = &fleet.registry;
    n.plain("labrouter demo: three simulated machines and the router, all on 127.0.0.1")?;
    for (i, m) in reg.machines.enumerate() {
        let models: Vec<&str> = reg
            .models
            .iter()
            .filter(|md| md.machine == i)
            .map(|md| md.name.as_str())
            .collect();
        let speaks = match m.api {
            crate::registry::Api::Ollama => "Ollama",
            crate::registry::Api::OpenAi => "OpenAI",
        };
        n.plain(&format!(
            "  {:<11} {:<32} {:<7} {}",
            m.name,
            m.url,
            speaks,
            models.join(", ")
        ))?;
    }
    n.plain(&format!(
        "  {:<11} {router}/v1 (OpenAI) and {router}/api (Ollama)",
        "router"
    ))?;
    for r in &reg.routes {
        let chain: Vec<String> = r.chain.iter().map(|&m| reg.target_name(m)).collect();
        n.plain(&format!("  route {:<10} {}", r.name, chain.join(" -> ")))?;
    }
    Ok(())
}

/// What the demo is about to do, before the clock starts.
fn header(
    n: &mut Narrator<'_>,
    fleet: &Fleet,
    router: &str,
    opts: &Options,
    pipeline: &Pipeline,
    state_dir: &Path,
) -> std::io::Result<()> {
    let reg = &fleet.registry;
    lab_lines(n, fleet, router)?;
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
        "  traffic: {WORKERS} agents, each sending an interactive request every {} (code, vision, summarize, chat; the chat and half the streamed code through Ollama's API)",
        words(scaled(EVERY_S, opts.speed))
    ))?;
    let limits = &reg.tasks;
    n.plain(&format!(
        "  tasks: stored in {} (removed at the end); at most {} running, {} per machine",
        state_dir.display(),
        limits.max_running,
        reg.machines.iter().map(|m| m.task_slots).max().unwrap_or(1)
    ))?;
    if let Some(at) = setup::story()
        .iter()
        .find(|s| matches!(s.act, setup::Act::Pipeline))
        .map(|s| s.at)
    {
        n.plain(&format!(
            "  pipeline: at {} an agent submits {} code reviews to route '{}' (accept: same_model, so {} only), each with a follow-up (after: [review], {{{{after.0}}}} in its content)",
            words(scaled(at, opts.speed)),
            agent::REVIEWS,
            agent::ROUTE,
            pipeline.targets()
        ))?;
    }
    if let Some(at) = setup::story()
        .iter()
        .find(|s| matches!(s.act, setup::Act::Pictures))
        .map(|s| s.at)
    {
        n.plain(&format!(
            "  pictures: at {} an agent asks for {} image generations on route '{}' (a picture takes {} on gpu-box, {} on ubuntu-box), each posted by a follow-up after it (after: [image], no {{{{after.0}}}}: a picture has no text)",
            words(scaled(at, opts.speed)),
            pictures::IMAGES,
            pictures::ROUTE,
            words(scaled(pictures::DRAW_GPU_S, opts.speed)),
            words(scaled(pictures::DRAW_CPU_S, opts.speed)),
        ))?;
    }
    n.plain("")
}
