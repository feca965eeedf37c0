//! `labrouter serve --workers N`: N serving threads, as nginx runs a worker process per
//! core. Each has its own current-thread runtime, accepts on the same socket, and drives
//! its connections, their requests and the upstream connections they ride
//! ([`crate::upstream::use_worker_pool`]) itself. On the shared multi-thread runtime a
//! request and its upstream connection were often driven by different workers, and each
//! request paid the wake-ups between them (issue 13's profile; the README's Performance
//! section has the figures). Background work (health checks, the task scheduler, Redis,
//! Telegram) stays on the caller's runtime. A thread that accepts a connection while it
//! holds two more than another hands it over, so a client's burst of connections is shared
//! evenly (`balance.rs`). When a load ends, each thread closes the idle upstream connections
//! it opened and gives its allocator's free pages back (`quiet.rs`).
//!
//! One `server.max_connections` bound holds across the threads, and the shutdown drains
//! every thread's requests in flight within the one `shutdown_grace`.
//!
//! The default, one per core (`labrouter serve`; `--workers 0` serves on the caller's
//! runtime). A serving thread that waits for a lock waits with all its connections, so
//! nothing on the request path may hold one long: durable task submits take the task
//! queue's lock only for what may move and wait for the store's writer without holding it
//! (README "Performance": 17,237 submits/s here against 18,670 on the shared runtime).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use super::balance::{Balance, Seat};
use crate::service::Service;

/// Serves on `workers` threads (at least one) until `shutdown` resolves, then lets each
/// drain for at most `grace`, as [`super::serve`] does on the caller's runtime. A thread that
/// fails (it cannot build its runtime or register the socket) stops them all with its error.
pub async fn serve_on_workers(
    listener: TcpListener,
    svc: Arc<Service>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    workers: usize,
) -> std::io::Result<()> {
    let workers = workers.max(1);
    let socket = listener.into_std()?;
    let permits = Arc::new(Semaphore::new(svc.fleet().registry.server.max_connections));
    // Every thread stops when this says so, or when it is dropped (this future with it).
    let (stop, stopping) = watch::channel(false);
    let (finished, mut ended) = mpsc::unbounded_channel();
    let (balance, inboxes) = Balance::new(workers);
    let mut started = 0;
    let mut failed: Option<std::io::Error> = None;
    for (i, inbox) in (1..=workers).zip(inboxes) {
        let spawned = socket.try_clone().and_then(|socket| {
            let ctx = Worker {
                i,
                seat: Seat {
                    balance: Arc::clone(&balance),
                    me: i - 1,
                    inbox,
                },
                svc: Arc::clone(&svc),
                permits: Arc::clone(&permits),
                stopping: stopping.clone(),
                grace,
            };
            let done = Finished {
                tx: finished.clone(),
                result: None,
            };
            std::thread::Builder::new()
                .name(format!("labrouter-http-{i}"))
                .spawn(move || ctx.run(socket, done))
        });
        match spawned {
            Ok(_) => started += 1,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    drop((socket, finished, stopping));
    let mut shutdown = std::pin::pin!(shutdown);
    let mut left = started;
    if failed.is_none() {
        tokio::select! {
            () = &mut shutdown => {}
            early = ended.recv() => {
                left -= 1;
                failed = Some(match early {
                    Some(Err(e)) => e,
                    _ => std::io::Error::other("a serving thread stopped before the shutdown"),
                });
            }
        }
    }
    let _ = stop.send(true);
    while left > 0 {
        match ended.recv().await {
            Some(Err(e)) => {
                failed.get_or_insert(e);
            }
            Some(Ok(())) => {}
            None => break,
        }
        left -= 1;
    }
    failed.map_or(Ok(()), Err)
}

/// What one serving thread needs.
struct Worker {
    i: usize,
    seat: Seat,
    svc: Arc<Service>,
    permits: Arc<Semaphore>,
    stopping: watch::Receiver<bool>,
    grace: Duration,
}

impl Worker {
    fn run(self, socket: std::net::TcpListener, mut done: Finished) {
        crate::upstream::use_worker_pool(self.i);
        let Worker {
            seat,
            svc,
            permits,
            mut stopping,
            grace,
            ..
        } = self;
        let served = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                runtime.block_on(async move {
                    // The runtime's list of the wakers its tasks defer is made at the first
                    // yield: now, in the default heap, not in a burst (`crate::heap`).
                    tokio::task::yield_now().await;
                    tokio::spawn(super::quiet::give_back_when_quiet(Arc::clone(&svc)));
                    let listener = TcpListener::from_std(socket)?;
                    let shutdown = async move {
                        let _ = stopping.wait_for(|s| *s).await;
                    };
                    let ready = own_heap_from_here(Arc::clone(&svc));
                    super::serve_with(listener, svc, shutdown, grace, permits, Some(seat), ready)
                        .await
                })
                // The runtime drops here: whatever outlived the grace is cut.
            });
        done.result = Some(served);
    }
}

/// What the serving thread made to serve (its runtime, router, listener and tasks, and
/// what its first request would make for the thread's life: its epoch handle for the
/// metrics, its slot for reading the fleet, the fleet's metric handles) stays in the
/// default heap; its connections and requests allocate from a heap of their own
/// (`crate::heap`), whose pages a burst then fills with its own blocks alone.
fn own_heap_from_here(svc: Arc<Service>) -> impl FnOnce() {
    move || {
        drop(crossbeam_epoch::pin());
        svc.fleet().resolve_meters();
        crate::heap::own_heap();
    }
}

/// Says how a serving thread ended when it is dropped, a panic included.
struct Finished {
    tx: mpsc::UnboundedSender<std::io::Result<()>>,
    result: Option<std::io::Result<()>>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let result = self
            .result
            .take()
            .unwrap_or_else(|| Err(std::io::Error::other("a serving thread panicked")));
        let _ = self.tx.send(result);
    }
}
