//! End-to-end: the real router against simulated machines on 127.0.0.1. The wire is the
//! witness: every test counts the requests that reached each machine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "e2e/access.rs"]
mod access;
#[path = "e2e/breaker.rs"]
mod breaker;
#[path = "e2e/browser.rs"]
mod browser;
#[path = "e2e/connections.rs"]
mod connections;
#[path = "e2e/deadline.rs"]
mod deadline;
#[path = "e2e/detached.rs"]
mod detached;
#[path = "e2e/discovery.rs"]
mod discovery;
#[path = "e2e/fallback.rs"]
mod fallback;
#[path = "e2e/hardening.rs"]
mod hardening;
#[path = "e2e/idempotency.rs"]
mod idempotency;
#[path = "e2e/input.rs"]
mod input;
#[path = "e2e/probe.rs"]
mod probe;
#[path = "e2e/reload.rs"]
mod reload;
#[path = "e2e/streaming.rs"]
mod streaming;
#[path = "e2e/tiers.rs"]
mod tiers;
#[path = "e2e/upstream_pool.rs"]
mod upstream_pool;
