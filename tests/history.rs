//! SPEC §16's history: `GET /status/history` after trips scripted on the paused clock
//! against simulated machines (the wire counts what reached them), the same after a restart
//! on the same SQLite file, bad `days` refused, and days cut right in a zone that changes
//! its clocks (read from a seeded file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/support.rs"]
mod support;

#[path = "history/dst.rs"]
mod dst;
#[path = "history/router.rs"]
mod router;
#[path = "history/thinning.rs"]
mod thinning;
#[path = "history/trips.rs"]
mod trips;
