//! Handler-level: the whole router, `labrouter::app(svc)`, driven with `oneshot` (axum's
//! `examples/testing`): no socket, no port. Every error the handlers and the guard answer
//! is checked for its status, its `code`, its `type` and words that say what was wrong and
//! where; the simulated machines behind the service count that a refused request reached
//! none of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "handlers/lab.rs"]
mod lab;

#[path = "handlers/admin.rs"]
mod admin;
#[path = "handlers/guard.rs"]
mod guard;
#[path = "handlers/inference.rs"]
mod inference;
#[path = "handlers/models.rs"]
mod models;
#[path = "handlers/paths.rs"]
mod paths;
