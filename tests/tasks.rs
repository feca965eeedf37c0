//! Tasks (docs/api.md "Tasks") against a real router (`labrouter::run` on a held listener), a real
//! SQLite file and simulated machines on 127.0.0.1. The wire is the witness: the tests
//! count what reached each machine; waits run on tokio's paused clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "tasks/lab.rs"]
mod lab;

#[path = "tasks/callbacks.rs"]
mod callbacks;
#[path = "tasks/callbacks_bounds.rs"]
mod callbacks_bounds;
#[path = "tasks/hardening.rs"]
mod hardening;
#[path = "tasks/images.rs"]
mod images;
#[path = "tasks/outage.rs"]
mod outage;
#[path = "tasks/responses.rs"]
mod responses;
#[path = "tasks/rules.rs"]
mod rules;
#[path = "tasks/tiers.rs"]
mod tiers;
#[path = "tasks/views.rs"]
mod views;
