//! The whole service on a listener the caller holds (README "Safety", README "Run it as a
//! service"), as mini-redis's `server::run(listener, shutdown)`: metrics, health checks, the daily
//! ledger prune, counter samples, Telegram, reload triggers and systemd readiness around
//! [`crate::serve`], then the store flushed. `labrouter serve` is this plus a socket and signals;
//! tests run it in-process.
//!
//! Everything started here stops when [`run`] returns, or when its future is dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::service::Service;

/// How long the last writes to the store may take after the drain.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// What [`run`] starts besides serving. The default suits tests (no process-wide signal
/// handlers, nothing told to systemd); [`RunOptions::service`] is `labrouter serve`.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Reload on SIGHUP (unix). A signal handler is process-wide: off where many servers
    /// share a process.
    pub sighup: bool,
    /// Tell systemd READY and STOPPING (when it set `$NOTIFY_SOCKET`).
    pub systemd: bool,
    /// Each notification reloads the registry file, as SIGHUP does (tests, embedders).
    pub reload: Option<Arc<Notify>>,
    /// Serve on this many threads of their own, a runtime each
    /// ([`crate::server::serve_on_workers`]); 0 serves on the caller's runtime. Each thread
    /// has its own upstream connections when the fleet was built after
    /// [`crate::upstream::worker_pools`] was told as many; else they share one pool.
    pub workers: usize,
}

impl RunOptions {
    /// `labrouter serve`: SIGHUP reloads, systemd hears READY and STOPPING, `workers`
    /// serving threads.
    pub fn service(workers: usize) -> RunOptions {
        RunOptions {
            sighup: true,
            systemd: true,
            reload: None,
            workers,
        }
    }
}

/// Serves `svc` on `listener` with everything a running router needs, until `shutdown`
/// resolves; then stops accepting, drains for at most `server.shutdown_grace`, stops the
/// background tasks and flushes the store.
pub async fn run(
    svc: Arc<Service>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opts: RunOptions,
) -> std::io::Result<()> {
    // The breakers already exist: their state gauges are set again once the recorder is in.
    crate::telemetry::install();
    svc.fleet().gauge_states();
    let grace = {
        let fleet = svc.fleet();
        tracing::info!(
            listen = %listener.local_addr()?,
            machines = fleet.registry.machines.len(),
            routes = fleet.registry.routes.len(),
            config = %svc.config().map_or("(none)".into(), |c| c.display().to_string()),
            workers = opts.workers,
            "labrouter serving"
        );
        fleet.registry.server.shutdown_grace
    };
    let background = start(&svc, &opts);
    if opts.systemd {
        crate::sdnotify::notify("READY=1");
    }
    let systemd = opts.systemd;
    // When the drain began: requests in flight and running tasks share one grace.
    let began = Arc::new(std::sync::OnceLock::new());
    let (tasks, began_at) = (svc.tasks().cloned(), Arc::clone(&began));
    let pooled = svc.pooled().cloned();
    let stopping = async move {
        shutdown.await;
        let _ = began_at.set(tokio::time::Instant::now());
        if let Some(tasks) = &tasks {
            tasks.stop_starting();
        }
        if let Some(pooled) = &pooled {
            pooled.stop_starting();
        }
        if systemd {
            crate::sdnotify::notify("STOPPING=1");
        }
        tracing::info!(
            "shutting down: no new connections; letting requests and tasks in flight finish"
        );
    };
    let served = match opts.workers {
        0 => crate::serve(listener, Arc::clone(&svc), stopping, grace).await,
        n => crate::server::serve_on_workers(listener, Arc::clone(&svc), stopping, grace, n).await,
    };
    if let Some(tasks) = svc.tasks() {
        let from = began
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        tasks.drain(crate::clock::after(from, grace)).await;
    }
    if let Some(pooled) = svc.pooled() {
        let from = began
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        pooled.drain(crate::clock::after(from, grace)).await;
    }
    drop(background);
    flush(&svc).await;
    tracing::info!("labrouter stopped");
    served
}

/// Background work that lives exactly as long as the [`run`] that started it.
struct Background {
    tasks: Vec<JoinHandle<()>>,
    /// Dropping it stops Telegram's tasks.
    _telegram: Option<crate::telegram::Running>,
    /// Dropping it stops watching (and ends its reload task).
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Drop for Background {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Every 30 s, closes the upstream connections idle longer than their pools keep them,
/// those of machines asked no more included.
async fn close_expired_connections(svc: Arc<Service>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        for upstream in svc.fleet().upstreams.iter() {
            upstream.close_expired();
        }
    }
}

fn start(svc: &Arc<Service>, opts: &RunOptions) -> Background {
    let mut tasks = Vec::new();
    // The other routers (README "Several routers"), before Telegram so its alerts hear the link.
    let fleet = svc.fleet();
    if let (Some(config), Some(redis)) = (&fleet.registry.cluster, &fleet.redis) {
        let (link, jobs) = crate::cluster::Link::new(config.clone());
        svc.bus().set_cluster(Arc::clone(&link));
        tracing::info!(node = %config.node, prefix = %config.prefix, redis = %redis.host(), "cluster: sharing verdicts through Redis");
        let current = Arc::clone(svc);
        tasks.push(tokio::spawn(crate::cluster::run(
            link,
            redis.clone(),
            jobs,
            move |f| f(&current.fleet().machines),
        )));
    }
    tasks.extend([
        tokio::spawn(crate::health::run(Arc::clone(svc))),
        tokio::spawn(crate::warm::run(Arc::clone(svc))),
        tokio::spawn(crate::discover::run(Arc::clone(svc))),
        tokio::spawn(crate::service::prune_daily(Arc::clone(svc))),
        tokio::spawn(close_expired_connections(Arc::clone(svc))),
    ]);
    // The task queue (docs/api.md "Tasks"): resumed when the service opened its store.
    if let Some(scheduler) = svc.tasks() {
        tasks.push(tokio::spawn(Arc::clone(scheduler).run()));
        // Callbacks of finished tasks, beside the queue and never on its path.
        tasks.push(tokio::spawn(crate::tasks::deliver::run(Arc::clone(
            scheduler,
        ))));
    }
    // The pool's queue (`cluster.tasks: shared`): this router's worker on it.
    if let Some(pooled) = svc.pooled() {
        tasks.push(tokio::spawn(Arc::clone(pooled).run()));
    }
    // The digest's per-day counts, whether or not Telegram is on to send it.
    if svc.store().is_some() {
        tasks.push(tokio::spawn(crate::sample::sample_counters_every(
            Arc::clone(svc),
            crate::sample::EVERY,
        )));
    }
    #[cfg(unix)]
    if opts.sighup {
        tasks.push(tokio::spawn(reload_on_sighup(Arc::clone(svc))));
    }
    if let Some(trigger) = &opts.reload {
        tasks.push(tokio::spawn(reload_on_notify(
            Arc::clone(svc),
            Arc::clone(trigger),
        )));
    }
    // A failure to watch is not fatal: the other reload triggers still work.
    let watcher = svc.config().and_then(|config| {
        crate::watch::spawn(Arc::clone(svc), config)
            .map_err(
                |e| tracing::warn!(error = %e, "not watching the registry file; reload with SIGHUP"),
            )
            .ok()
    });
    Background {
        tasks,
        // Alerts and the daily digest, when the registry has a telegram: block.
        _telegram: crate::telegram::spawn(svc),
        _watcher: watcher,
    }
}

/// Reloads off the runtime's threads; errors are logged and ledgered by reload itself.
async fn reload(svc: &Arc<Service>) {
    let svc = Arc::clone(svc);
    let _ = tokio::task::spawn_blocking(move || svc.reload()).await;
}

#[cfg(unix)]
async fn reload_on_sighup(svc: Arc<Service>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reloading the registry");
        reload(&svc).await;
    }
}

async fn reload_on_notify(svc: Arc<Service>, trigger: Arc<Notify>) {
    loop {
        trigger.notified().await;
        tracing::info!("reload requested: reloading the registry");
        reload(&svc).await;
    }
}

/// Writes what the breakers queued (off the runtime's threads: it blocks).
async fn flush(svc: &Arc<Service>) {
    let svc = Arc::clone(svc);
    let flushed = tokio::task::spawn_blocking(move || {
        svc.store().is_none_or(|store| store.flush(FLUSH_LIMIT))
    })
    .await;
    if !matches!(flushed, Ok(true)) {
        tracing::warn!(
            limit_s = FLUSH_LIMIT.as_secs(),
            "the store did not finish writing in time"
        );
    }
}
