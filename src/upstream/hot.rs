//! The hot path's HTTP client: hyper's pooled client (TLS for `https://` machines), with a
//! pool of connections per serving thread of `labrouter serve --workers`.
//!
//! A connection from a shared pool is driven wherever it was opened, so with one pool a
//! request and the upstream connection it rode were often on different threads, and each
//! request paid the wake-ups between them (issue 13's profile). With a pool per serving
//! thread, both stay on one.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Builder, Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::registry::Machine;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
type Pool = Client<Connector, super::Payload>;

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

/// One machine's client: a pool per serving thread (never empty), and what builds one.
pub(super) struct Hot {
    /// Read (uncontended: each serving thread has its own) for every request; written only
    /// by [`Hot::let_idle_go`].
    pools: Box<[RwLock<Pool>]>,
    builder: Builder,
    connector: Connector,
}

impl Hot {
    pub(super) fn new(machine: &Machine) -> Result<Hot, String> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(machine.timeouts.connect));
        http.enforce_http(false);
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new());
        let pools = (0..POOLS.load(Ordering::Relaxed).max(1))
            .map(|_| RwLock::new(builder.build(tls.clone())))
            .collect();
        Ok(Hot {
            pools,
            builder,
            connector: tls,
        })
    }

    /// This thread's pool.
    fn pool(&self) -> &RwLock<Pool> {
        let pool = POOL.with(Cell::get);
        self.pools.get(pool).unwrap_or(&self.pools[0])
    }

    /// Sends `req` on this thread's pool.
    pub(super) fn request(&self, req: hyper::Request<super::Payload>) -> ResponseFuture {
        let pool = self.pool().read().unwrap_or_else(PoisonError::into_inner);
        pool.request(req)
    }

    /// Closes the idle connections of this thread's pool (a fresh pool replaces it; those
    /// in use finish their request and close). For a serving thread whose load has ended:
    /// hundreds of connections a 256-connection burst opened would otherwise each hold
    /// their buffers for the pool's 90 s (see `server/quiet.rs`).
    pub(super) fn let_idle_go(&self) {
        let fresh = self.builder.build(self.connector.clone());
        let old = std::mem::replace(
            &mut *self.pool().write().unwrap_or_else(PoisonError::into_inner),
            fresh,
        );
        drop(old);
    }
}
