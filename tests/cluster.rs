//! README "Several routers", several routers with one view of the lab: three real `labrouter` processes on
//! one real `redis-server`, in front of the same simulated machines. What it proves:
//!
//! - an outage one router learns is adopted by the others within 1 s, and they never send
//!   the machine anything while it is open (`outage`);
//! - after the cooldown exactly one request in the whole pool probes the machine, and its
//!   verdict (closed, or open with the doubled cooldown) reaches every router; a lease holder
//!   killed mid-probe is replaced by exactly one other probe once its lease expires (`probe`);
//! - Redis killed mid-run slows and fails no request, every router says `down`, and when it
//!   comes back a verdict decided meanwhile converges; losing Redis and its return are said
//!   once each, in Telegram (a fake Bot API) and the ledger (`redis_down`);
//! - what arrives through Redis is judged: a stale generation is ignored, a cooldown is a
//!   duration (`l`), never a time read from another clock, and garbage is rejected or clamped,
//!   never adopted as is nor a reason to panic (`hostile`); a forged generation far ahead
//!   of Redis's counter is not believed (`hostile`);
//! - one bad value in Redis (a generation that is no integer, a key of the wrong type, a 30 MB
//!   field) spoils that machine's sharing, never the link nor the other machines', and costs
//!   no memory (`bad_shares`);
//! - routers whose wall clocks are 30 s ahead and 30 s behind (libfaketime) hold a peer's
//!   verdict for exactly its duration (`skew`);
//! - `labrouter check` refuses a Redis off loopback without a password and TLS (`check`).
//!
//! The wire is the witness: each simulated machine (`labrouter::sim::Sim`, in this process)
//! counts the work requests that reached it. Routers are child processes that bind port 0
//! and log the address (`--log-format json`); Redis is a child process on a free loopback
//! port (`LABROUTER_TEST_REDIS`, else `redis-server` on PATH: `scripts/test.sh` installs it).
//! Real time is unavoidable; every wait is a poll with a deadline, and the scenarios run one
//! at a time so none measures another. The binary takes about 30 s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "telegram/fake.rs"]
mod fake;
#[path = "cluster/lab.rs"]
mod lab;
#[path = "cluster/redis.rs"]
mod redis;
#[path = "cluster/router.rs"]
mod router;

#[path = "cluster/bad_shares.rs"]
mod bad_shares;
#[path = "cluster/check.rs"]
mod check;
#[path = "cluster/hostile.rs"]
mod hostile;
#[path = "cluster/outage.rs"]
mod outage;
#[path = "cluster/probe.rs"]
mod probe;
#[path = "cluster/redis_down.rs"]
mod redis_down;
#[path = "cluster/skew.rs"]
mod skew;
