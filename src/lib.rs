//! labrouter: routes AI work across the machines of a home lab.
//!
//! Module map, in request order:
//! - [`registry`]: registry.yaml parsed and validated into a [`registry::Registry`].
//! - [`route`]: pure keyword routing from a request to a route and its chain.
//! - [`request`]: reading a request body once; rewriting its `model` for a target.
//! - [`body`]: whole bodies read within bounds (size, silence), both sides of the proxy;
//!   response bodies that hold a guard until they are done.
//! - [`outcome`]: the words for what happened: reasons, phases, attempts, typed ids, and
//!   OpenAI's error envelope.
//! - [`breaker`]: the pure per-machine breaker, `step(state, event, now)`.
//! - [`clock`]: tokio's clock and checked arithmetic on it; wall times as RFC 3339.
//! - [`machines`]: the live breakers, leases and counters around it.
//! - [`multipart`]: uploads (multipart/form-data): their delimiters found as the body arrives,
//!   then read whole, their `model` rewritten.
//! - [`cluster`]: several routers, one view of the lab: breaker verdicts and one probe per
//!   cooldown shared through Redis.
//! - [`upstream`]: one attempt at one machine: timeouts, liveness check, classification.
//! - [`pick`]: the pick among a tier of equal targets, and what the router remembers of each
//!   target for it; [`warm`]: which models the machines hold loaded, read off the request path.
//! - [`proxy`]: the chain walk and the error when nothing served.
//! - [`task`]: a task as data: its id, what it asks, where it stands, as stored and shown.
//! - [`tasks`]: durable tasks: submit, the queue and its slots, the walk, follow-ups,
//!   callbacks.
//! - [`ollama`]: Ollama's API in front, translated for machines that speak only OpenAI's.
//! - [`health`]: active health checks for machines that set `health`.
//! - [`discover`]: the model lists of `discover: true` machines, served as names clients may
//!   send.
//! - [`host`]: the orchestrator's own health (sysinfo).
//! - [`history`]: the month at a glance: per machine and per day, trips, time open and
//!   counts, for `/status/history`, the dashboard and the digest's picture.
//! - [`picture`]: a history drawn as the digest's PNG (pure Rust, font embedded).
//! - [`fleet`]: everything one loaded registry needs at run time: registry, matcher,
//!   breakers, clients.
//! - [`service`]: the current fleet behind an atomic swap; reloads.
//! - [`http`]: handlers, the guard, one error type; [`app`] builds the router.
//! - [`server`]: the accept loop, connection bounds and the graceful drain, connections
//!   shared evenly between serving threads, and what a load leaves given back when its
//!   serving thread falls quiet; [`serve`].
//! - [`heap`]: the binary's allocator: mimalloc, with a heap of their own for the serving
//!   threads' connections and requests, so a burst's pages go back when it is over, and
//!   what a request keeps made outside it.
//! - [`huge_page`]: memory moved onto a transparent huge page in place; the binary moves its
//!   serving path's machine code and its first read-only data so when it starts to serve
//!   (Linux).
//! - [`mod@run`]: the whole service on a listener the caller holds: metrics, health checks,
//!   ledger prune, counter samples, Telegram, reload triggers, systemd, [`serve`], the store
//!   flushed; [`run()`].
//! - [`sample`]: every machine's live counters written to the store each minute, for the
//!   digest's counts.
//! - [`cli`]: the command line: clap definitions and each subcommand's body.
//! - [`replay`]: the pure breaker run on a recorded event trace (`labrouter replay`).
//! - [`store`]: SQLite memory: breaker verdicts, the transition ledger, counter samples,
//!   tasks and kept answers, written by one thread.
//! - [`telegram`]: breaker alerts and the daily digest over Telegram, queued off the request path.
//! - [`webhook`]: one task callback: Standard Webhooks signature, bounded body, backoff.
//! - [`watch`]: reload when registry.yaml changes; [`sdnotify`]: systemd readiness.
//! - [`status`]: the typed `/status` view; `labrouter status` renders it as a table.
//! - [`telemetry`]: Prometheus metrics; [`run()`] installs the recorder.
//! - [`text`]: outside text bounded and escaped for logs, the ledger and messages.
//! - [`sim`]: a simulated OpenAI-compatible or Ollama machine with scriptable faults.
//! - [`demo`]: `labrouter demo`, a simulated lab with a scripted outage, narrated.

mod body;
pub mod breaker;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod demo;
pub mod discover;
mod fleet;
mod health;
pub mod heap;
pub mod history;
mod host;
mod http;
#[cfg(target_os = "linux")]
pub mod huge_page;
pub mod machines;
pub mod multipart;
pub mod ollama;
pub mod outcome;
pub mod pick;
pub mod picture;
mod proxy;
pub mod registry;
pub mod replay;
pub mod request;
pub mod route;
pub mod run;
mod sample;
mod sdnotify;
mod server;
mod service;
pub mod sim;
pub mod status;
pub mod store;
pub mod task;
pub mod tasks;
pub mod telegram;
pub mod telemetry;
mod text;
pub mod upstream;
pub mod warm;
mod watch;
pub mod webhook;

pub use fleet::Fleet;
pub use http::app;
pub use run::{run, RunOptions};
pub use server::serve;
pub use service::Service;
