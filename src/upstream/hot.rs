//! The hot path's HTTP client: HTTP/1.1 connections to one machine (TLS for `https://`
//! machines), kept alive in a pool per serving thread of `labrouter serve`.
//!
//! A connection from a shared pool is driven wherever it was opened, so with one pool a
//! request and the upstream connection it rode were often on different threads, and each
//! request paid the wake-ups between them (issue 13's profile). With a pool per serving
//! thread, both stay on one.
//!
//! The pool is ours, not hyper-util's: a pool serves one machine on one thread, so it needs
//! no key to hash at every checkout and return, no task to wait for a connection to be free
//! again, and no connection details copied into every answer (docs/perf/README.md has the
//! instruction counts). A connection goes back to its pool when its answer's body has been
//! read to the end ([`Reply`]); an answer dropped before that closes it, as hyper does. A
//! request that a reused connection could not even send (the machine closed it meanwhile)
//! is sent again on another, as hyper-util does; idle connections are closed after 90 s
//! (at a checkout, or within 30 s: `run.rs`), or when their serving thread falls quiet
//! after a load (`server/quiet.rs`).

use std::cell::Cell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, HOST};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::clock::Instant;
use crate::registry::Machine;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
type Sender = SendRequest<super::Payload>;

/// How long a connection may wait in a pool for its next request.
const IDLE_FOR: Duration = Duration::from_secs(90);

/// How many pools each machine's client has: one per serving thread, and one for every
/// other thread (see [`worker_pools`]).
static POOLS: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The pool this thread's requests use: 0 everywhere but on serving threads.
    static POOL: Cell<usize> = const { Cell::new(0) };
}

/// Gives each of `workers` serving threads its own pool of connections to every machine,
/// for the machines built from now on (call it before the fleet is built).
pub fn worker_pools(workers: usize) {
    POOLS.store(workers.saturating_add(1), Ordering::Relaxed);
}

/// This thread is serving thread `i` (from 1) and takes its connections from pool `i`.
pub fn use_worker_pool(i: usize) {
    POOL.with(|p| p.set(i));
}

/// One machine's client: a pool per serving thread (never empty), and how to dial it.
pub(super) struct Hot {
    pools: Box<[Arc<Pool>]>,
    connector: Connector,
    /// The machine's scheme and authority: what the connector dials.
    base: hyper::Uri,
    /// The `Host` every request names (the port only when it is not the scheme's own).
    host: HeaderValue,
}

/// Why a request got no answer's head.
#[derive(Debug, thiserror::Error)]
pub(super) enum SendError {
    #[error("client error (Connect)")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("client error (SendRequest)")]
    Send(#[source] hyper::Error),
}

impl SendError {
    /// The connection was never made.
    pub(super) fn is_connect(&self) -> bool {
        matches!(self, SendError::Connect(_))
    }
}

impl Hot {
    pub(super) fn new(machine: &Machine) -> Result<Hot, String> {
        let url: hyper::Uri = machine
            .url
            .parse()
            .map_err(|e| format!("'{}' is not a URI: {e}", machine.url))?;
        let (Some(scheme), Some(authority)) = (url.scheme(), url.authority()) else {
            return Err(format!("'{}' names no scheme and host", machine.url));
        };
        let default_port = if *scheme == hyper::http::uri::Scheme::HTTPS {
            443
        } else {
            80
        };
        let host = match authority.port_u16() {
            Some(p) if p != default_port => format!("{}:{p}", authority.host()),
            _ => authority.host().to_string(),
        };
        let host = HeaderValue::from_str(&host).map_err(|e| format!("bad host '{host}': {e}"))?;
        let host = crate::heap::cloned_once(host);
        let base = hyper::Uri::builder()
            .scheme(scheme.clone())
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map(crate::heap::cloned_once)
            .map_err(|e| format!("'{}': {e}", machine.url))?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(machine.timeouts.connect));
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let pools = (0..POOLS.load(Ordering::Relaxed).max(1))
            .map(|_| Arc::new(Pool::default()))
            .collect();
        Ok(Hot {
            pools,
            connector,
            base,
            host,
        })
    }

    /// This thread's pool.
    fn pool(&self) -> &Arc<Pool> {
        let pool = POOL.with(Cell::get);
        self.pools.get(pool).unwrap_or(&self.pools[0])
    }

    /// Sends `req` (its URI in origin form) on a connection of this thread's pool, or a new
    /// one.
    pub(super) async fn request(
        &self,
        mut req: hyper::Request<super::Payload>,
    ) -> Result<hyper::Response<Reply>, SendError> {
        req.headers_mut().insert(HOST, self.host.clone());
        let pool = self.pool();
        loop {
            let (mut tx, reused) = match pool.take() {
                Some(tx) => (tx, true),
                // Boxed: the dial's future (TLS included) is large, and every request's
                // future would carry it, copied each time it moves.
                None => (Box::pin(self.connect()).await?, false),
            };
            // A pooled connection is free once its last answer's end reached its
            // dispatcher (at once, or within a turn of this thread); closed, it is dropped.
            if reused && tx.ready().await.is_err() {
                continue;
            }
            match tx.try_send_request(req).await {
                Ok(resp) => {
                    let back = Some((tx, Arc::clone(pool)));
                    return Ok(resp.map(|inner| Reply { inner, back }));
                }
                Err(mut e) => match e.take_message() {
                    // Never sent: the machine closed the connection while it was idle.
                    Some(again) if reused => req = again,
                    _ => return Err(SendError::Send(e.into_error())),
                },
            }
        }
    }

    /// A new connection, its dispatcher spawned on this thread.
    async fn connect(&self) -> Result<Sender, SendError> {
        let io = tower::ServiceExt::oneshot(self.connector.clone(), self.base.clone())
            .await
            .map_err(SendError::Connect)?;
        let (mut tx, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(SendError::Send)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "upstream connection ended with an error");
            }
        });
        tx.ready().await.map_err(SendError::Send)?;
        Ok(tx)
    }

    /// Closes the connections idle longer than [`IDLE_FOR`] in every thread's pool (a
    /// checkout closes them too, but a machine asked no more would keep them).
    pub(super) fn close_expired(&self) {
        for pool in &self.pools {
            drop(pool.expired());
        }
    }

    /// Closes the idle connections of this thread's pool; those in use finish their
    /// request and come back. For a serving thread whose load has ended: hundreds of
    /// connections a 256-connection burst opened would each hold their buffers for 90 s.
    /// The list they sat in goes too: grown by the burst, it would keep its page resident.
    pub(super) fn let_idle_go(&self) {
        *self.pool().idle() = VecDeque::new();
    }
}

/// The idle connections of one machine on one thread, oldest first.
#[derive(Default)]
struct Pool {
    idle: Mutex<VecDeque<(Sender, Instant)>>,
}

impl Pool {
    fn idle(&self) -> MutexGuard<'_, VecDeque<(Sender, Instant)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the connections idle too long (the oldest first) and those the machine
    /// closed; returns the rest.
    fn expired(&self) -> MutexGuard<'_, VecDeque<(Sender, Instant)>> {
        let mut idle = self.idle();
        let now = Instant::now();
        while idle
            .front()
            .is_some_and(|(tx, since)| tx.is_closed() || now.duration_since(*since) >= IDLE_FOR)
        {
            idle.pop_front();
        }
        idle
    }

    /// The connection idle the shortest time, after closing those idle too long.
    fn take(&self) -> Option<Sender> {
        let mut idle = self.expired();
        while let Some((tx, _)) = idle.pop_back() {
            if !tx.is_closed() {
                return Some(tx);
            }
        }
        None
    }

    fn put(&self, tx: Sender) {
        if !tx.is_closed() {
            self.idle().push_back((tx, Instant::now()));
        }
    }
}

/// An answer's body; read to its end, it puts its connection back in the pool.
pub(super) struct Reply {
    inner: Incoming,
    back: Option<(Sender, Arc<Pool>)>,
}

impl Reply {
    fn give_back(&mut self) {
        if let Some((tx, pool)) = self.back.take() {
            pool.put(tx);
        }
    }
}

impl hyper::body::Body for Reply {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.give_back(),
            Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.give_back(),
            // Cut: the connection goes with it.
            Poll::Ready(Some(Err(_))) => this.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Reply {
    /// An answer with nothing left to read (an empty one too) frees its connection even
    /// when nobody polled its end; one dropped partway closes it.
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            self.give_back();
        }
    }
}
