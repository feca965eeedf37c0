//! labrouter: routes AI work across the machines of a home lab.
//!
//! Module map, in request order:
//! - [`registry`]: registry.yaml parsed and validated into a [`registry::Registry`].
//! - [`route`]: pure keyword routing from a request to a route and its chain.
//! - [`request`]: reading a request body once; rewriting its `model` for a target.
//! - [`breaker`]: the pure per-machine breaker, `step(state, event, now)`.
//! - [`machines`]: the live breakers, leases and counters around it.
//! - [`upstream`]: one attempt at one machine: timeouts, liveness check, classification.
//! - [`proxy`]: the chain walk and the error when nothing served.
//! - [`http`]: handlers, auth, body limits; [`app`] builds the router.
//! - [`lab`]: everything one loaded registry needs at run time.
//! - [`replay`]: the pure breaker run on a recorded event trace (`labrouter replay`).
//! - [`store`]: SQLite memory: breaker verdicts and the transition ledger.
//! - [`sim`]: a simulated OpenAI-compatible machine with scriptable faults.

pub mod breaker;
pub mod http;
pub mod lab;
pub mod machines;
pub mod proxy;
pub mod registry;
pub mod replay;
pub mod request;
pub mod route;
pub mod sim;
pub mod store;
pub mod upstream;

use std::future::Future;
use std::sync::Arc;

pub use http::app;
pub use lab::Lab;

/// Serves `lab` on `listener` until `shutdown` resolves, then lets in-flight requests end.
pub async fn serve(
    listener: tokio::net::TcpListener,
    lab: Arc<Lab>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(lab))
        .with_graceful_shutdown(shutdown)
        .await
}
