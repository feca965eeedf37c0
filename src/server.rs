//! Serving connections (README "Safety", README "Run it as a service"): the accept loop with at
//! most `server.max_connections` open at once, per-connection bounds on how slowly a client may
//! send its request head and how long a kept-alive connection may sit idle, TCP_NODELAY, and a
//! bounded graceful drain (keyed requests whose clients left included).
//!
//! hyper's own `header_read_timeout` also runs while a kept-alive connection waits for its
//! next request, so it cannot give a short header bound and a long idle bound at once; a
//! small watchdog per connection does both from two counters the connection keeps anyway:
//! requests in flight (a guard that lives until the response body is done) and whether a
//! byte of the next request has arrived.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

use crate::body::Holding;
use crate::clock::{from_now, Instant};
use crate::service::Service;

mod accept;
mod balance;
mod quiet;
mod workers;

pub use accept::listen;
pub use workers::serve_on_workers;

/// How slowly a client may send, and how long it may idle (from `server:`).
#[derive(Clone, Copy, Debug)]
struct Limits {
    header_timeout: Duration,
    idle_timeout: Duration,
}

/// Serves on `listener` until `shutdown` resolves; then stops accepting and lets requests
/// in flight finish, keyed ones whose clients left included, for at most `grace` in all.
pub async fn serve(
    listener: TcpListener,
    svc: Arc<Service>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let max_connections = svc.fleet().registry.server.max_connections;
    // Past the limit, connections wait in the kernel's accept queue, not in our memory.
    let permits = Arc::new(Semaphore::new(max_connections));
    serve_with(listener, svc, shutdown, grace, permits, None, || {}).await
}

/// [`serve`] with the connection permits given: several accept loops share one bound, and
/// with a `seat` they share their connections evenly ([`balance`]). `ready` runs once what
/// the loop keeps for its life is made, before the first connection is taken.
async fn serve_with(
    listener: TcpListener,
    svc: Arc<Service>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    permits: Arc<Semaphore>,
    mut seat: Option<balance::Seat>,
    ready: impl FnOnce(),
) -> std::io::Result<()> {
    let app = crate::app(Arc::clone(&svc));
    let (stop, stopping) = watch::channel(false);
    ready();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let next = tokio::select! {
            () = &mut shutdown => break,
            handed = accept::handed_over(&mut seat) => accept::Next::Handed(handed),
            accepted = accept::accept(&listener, &permits) => match accepted {
                Some(accepted) => accepted,
                None => break,
            },
        };
        let Some((tcp, peer, permit, counted)) = accept::arrived(next, seat.as_ref()) else {
            continue;
        };
        let server = &svc.fleet().registry.server;
        let limits = Limits {
            header_timeout: server.header_timeout,
            idle_timeout: server.idle_timeout,
        };
        let stopping = stopping.clone();
        let app = Served {
            router: app.clone(),
            svc: Arc::clone(&svc),
        };
        tokio::spawn(async move {
            connection(tcp, peer, app, limits, stopping).await;
            drop((permit, counted));
        });
    }
    // Connections handed here from now on stay with the thread that accepted them.
    drop((listener, seat));
    let _ = stop.send(true);
    drop(stopping);
    let until = from_now(grace);
    // Every connection holds a receiver: all are gone when the last connection ends.
    tokio::select! {
        () = stop.closed() => {}
        () = tokio::time::sleep_until(until) => {
            tracing::warn!(grace_s = grace.as_secs(), "requests still in flight after the shutdown grace: cutting them");
        }
    }
    // Keyed requests whose clients left run on without a connection: they are requests in
    // flight too, and their answers are kept for the retry after the restart. Waited for
    // here, on the runtime they run on (a serving thread's is dropped when this returns).
    let aloft = crate::http::idempotency::of(&svc).land(until).await;
    if aloft > 0 {
        tracing::warn!(
            aloft,
            grace_s = grace.as_secs(),
            "keyed requests still running after the shutdown grace: cut, their answers not kept"
        );
    }
    Ok(())
}

/// What a connection's requests are served by: the router, and the service for the hot POSTs
/// answered without its walk ([`crate::http::hot`]).
#[derive(Clone)]
struct Served {
    router: Router,
    svc: Arc<Service>,
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    app: Served,
    limits: Limits,
    mut stopping: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::default());
    let io = TokioIo::new(Watched {
        inner: tcp,
        activity: Arc::clone(&activity),
    });
    let tracked = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let guard = InFlight::start(&tracked);
        let hot = crate::http::hot_endpoint(req.method(), req.uri().path());
        let app = app.clone();
        async move {
            let resp = match hot {
                // The three hot POSTs skip the router's walk (its path match, method router
                // and boxed layers): the same guard and handler, called directly.
                Some(endpoint) => crate::http::hot(app.svc, endpoint, req.map(Body::new)).await,
                None => app.router.oneshot(req).await?,
            };
            // The request counts as in flight until its response body is done.
            Ok::<_, std::convert::Infallible>(resp.map(|body| Holding::new(body, guard)))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The watchdog bounds the request head and idle time; hyper's header timer would also
    // cut idle keep-alive connections at the header bound.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        why = activity.watchdog(limits) => {
            tracing::debug!(%peer, why, "closing connection");
        }
        () = async { let _ = stopping.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// What one connection is doing, kept up to date by its IO, its requests and their bodies,
/// with no wake-up: the watchdog reads it when its one timer fires, and sets that timer to
/// the deadline it reads (so a connection serving requests back to back costs a timer every
/// few seconds, not one per request).
#[derive(Debug)]
struct Activity {
    /// Requests whose response body is not done yet.
    inflight: AtomicUsize,
    /// Requests started on this connection, ever.
    requests: AtomicU64,
    /// When the connection last went quiet (its last response done, or its start) or a
    /// request head began, in nanoseconds since `base`, shifted left once; the low bit is
    /// set while it waits for the first byte of a next request (quiet), clear once a head
    /// has begun.
    since: AtomicU64,
    base: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            inflight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            since: AtomicU64::new(QUIET),
            base: Instant::now(),
        }
    }
}

/// The low bit of [`Activity::since`]: waiting for the first byte of a next request.
const QUIET: u64 = 1;

impl Activity {
    fn stamp(&self, quiet: bool) -> u64 {
        let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX >> 1);
        (nanos.min(u64::MAX >> 1) << 1) | u64::from(quiet)
    }

    /// A byte arrived: if the connection was quiet, a request head has begun now.
    fn heard(&self) {
        let was = self.since.load(Ordering::Acquire);
        if was & QUIET != 0 {
            let _ = self.since.compare_exchange(
                was,
                self.stamp(false),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }

    /// When the connection should be closed, as its state reads now, and why; `None`
    /// while a request is in flight (no bound applies then).
    fn due(&self, limits: Limits) -> Option<(Instant, &'static str)> {
        if self.inflight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.since.load(Ordering::Acquire);
        let at = crate::clock::after(self.base, Duration::from_nanos(since >> 1));
        if since & QUIET == 0 {
            let head = crate::clock::after(at, limits.header_timeout);
            return Some((head, "request head too slow (server.header_timeout)"));
        }
        // A new connection owes its first request at once; a kept-alive one may idle.
        let idle = if self.requests.load(Ordering::Acquire) == 0 {
            limits.header_timeout
        } else {
            limits.idle_timeout
        };
        Some((crate::clock::after(at, idle), "idle"))
    }

    /// Resolves when the connection should be closed: nothing in flight and either no byte
    /// of a next request within the idle bound (the header bound for a new connection), or
    /// a request head begun but not finished within the header bound.
    async fn watchdog(&self, limits: Limits) -> &'static str {
        // While requests are in flight, it looks again this often: a deadline that began
        // meanwhile is never passed by more than this before it is seen, and it is never
        // longer than either bound.
        let every = limits.header_timeout.min(limits.idle_timeout);
        loop {
            let wake = match self.due(limits) {
                Some((at, why)) if Instant::now() >= at => return why,
                Some((at, _)) => at,
                None => from_now(every),
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// One request in flight on a connection; dropped with its response body.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(a: &Arc<Activity>) -> InFlight {
        a.inflight.fetch_add(1, Ordering::AcqRel);
        a.requests.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(a))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The last one out starts the idle clock.
        let a = &self.0;
        a.since.store(a.stamp(true), Ordering::Release);
        a.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connection's socket, telling the watchdog when the first byte of a request arrives.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.heard();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
