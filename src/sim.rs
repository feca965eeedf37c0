//! A simulated LLM server on loopback, OpenAI-compatible or Ollama, scriptable into faults at
//! runtime.
//!
//! Owns the fault vocabulary ([`Fault`]) and the [`Sim`] handle that tests, the demo, the soak,
//! the benchmarks and `labrouter sim` use to make a "machine" misbehave on cue and to count what
//! reached it. It runs entirely in the caller's tokio runtime and waits only with `tokio::time`,
//! so paused-clock tests drive it deterministically.
//!
//! It answers as real servers do, so real clients (the openai SDK, LiteLLM, LangChain, the
//! Agents SDK, the ollama client) read it: `/v1/chat/completions` (streams open with the
//! assistant's role and end with a finish chunk, then usage when asked), `/v1/completions`
//! (with usage), `/v1/embeddings` (one vector per input; base64 when asked),
//! `/v1/responses` (the Responses API, stateless as Ollama's: a Response, a function call
//! when tools are offered, or OpenAI's event stream), the media endpoints (images
//! generated, edited or varied from an upload: a small valid PNG, as base64 or a `data:`
//! URL; transcriptions and translations of an upload: a fixed transcript as JSON, text,
//! verbose JSON, SRT, VTT or events; speech: a short WAV streamed in chunks; rerank on
//! `/v1/rerank`, `/v1/reranking` and `/rerank`: a score per document) and `/v1/models`; an
//! Ollama sim adds Ollama's own routes, with each model's capabilities. It lists the models
//! [`Sim::set_models`] names (`labrouter sim --models`) and echoes the one a request names.
//!
//! `fault` is the vocabulary, `serve` the port and its connections, `respond` how one request
//! is answered under the current fault, `reply` the bodies and errors every answer builds
//! on, `ask` what a work request asks of its answer (tools, thinking, JSON, usage),
//! `answers` the OpenAI-shaped chat and completions answers, `embed` the embeddings,
//! `responses` the Responses API, `media` images, audio and rerank, `ollama` Ollama's own
//! routes and answers, `feed` the bodies that take time or space, and `counts` what reached
//! the machine.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::watch;

mod answers;
mod ask;
mod counts;
mod embed;
mod fault;
mod feed;
mod media;
mod ollama;
mod precise;
mod reply;
mod respond;
mod responses;
mod routes;
mod serve;
#[cfg(test)]
mod tests;

pub use counts::HIT_LOG_MAX;
pub use fault::Fault;

use crate::registry::Api;
use counts::Counts;

/// The model an OpenAI sim lists until [`Sim::set_models`] says otherwise.
const DEFAULT_MODEL: &str = "sim-model";

/// The model an Ollama sim lists until [`Sim::set_models`] says otherwise: Ollama names
/// its models with their tag.
const DEFAULT_OLLAMA_MODEL: &str = "sim-model:latest";

/// Handle to one simulated machine; clones share it. Dropping handles does not stop serving
/// (the accept loop is a detached task): call [`Sim::shutdown`].
#[derive(Clone)]
pub struct Sim {
    inner: Arc<Inner>,
}

/// State shared by the handle, the accept loop and every connection task.
struct Inner {
    name: String,
    addr: SocketAddr,
    /// Which API it speaks; an Ollama sim answers the OpenAI routes too, as Ollama does.
    api: Api,
    /// Runtime the sim was started in, so a synchronous `set` can rebind a tokio listener.
    rt: tokio::runtime::Handle,
    fault: watch::Sender<Fault>,
    stopped: watch::Sender<bool>,
    /// Bumped to drop every live connection at once (Refuse, shutdown).
    epoch: watch::Sender<u64>,
    /// The listener lives here (not in the accept task) so `set(Refuse)` closes it synchronously.
    listener: Mutex<Option<TcpListener>>,
    chunks: AtomicUsize,
    /// The assistant text of a whole answer; `None`: "ok from NAME".
    text: Mutex<Option<String>>,
    /// The models it lists (/v1/models; on Ollama /api/tags, /api/ps) and knows
    /// (/api/show); the first answers a request that names none.
    models: Mutex<Vec<String>>,
    /// How long drawing takes: an image answer (generation, edit, variation) starts this
    /// long after its request was read; zero by default.
    image_time: Mutex<Duration>,
    counts: Counts,
    /// Connections open now (accepted and not yet closed, by either side).
    open: AtomicUsize,
    /// Whether a slow answer (SlowFirstByte) takes `one`, so such answers come one at a time.
    serial: AtomicBool,
    /// Whether a drip waits on a kernel timer rather than tokio's (see [`Sim::set_precise`]).
    precise: AtomicBool,
    one: tokio::sync::Mutex<()>,
}

/// Locks a std mutex, shrugging off poisoning: no guarded value (a counter, the hit log, the
/// last body, the listener slot) can be left half-updated by a panic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sim {
    /// An OpenAI-compatible server: binds 127.0.0.1:0 and serves in a spawned task. `name`
    /// appears in answers.
    pub async fn start(name: &str) -> io::Result<Sim> {
        Sim::start_on(name, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Same, on a given loopback address (the benchmarks use fixed ports).
    pub async fn start_on(name: &str, addr: SocketAddr) -> io::Result<Sim> {
        Sim::start_with(name, addr, Api::OpenAi).await
    }

    /// An Ollama server on 127.0.0.1:0: Ollama's own routes (/api/...) and the OpenAI ones.
    pub async fn start_ollama(name: &str) -> io::Result<Sim> {
        Sim::start_with(
            name,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            Api::Ollama,
        )
        .await
    }

    /// Binds a loopback address (port 0 for any) and serves `api` in a spawned task; an
    /// address that is not loopback is refused.
    pub async fn start_with(name: &str, addr: SocketAddr, api: Api) -> io::Result<Sim> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "sim binds loopback only",
            ));
        }
        let listener = crate::server::listen(addr)?;
        let inner = Arc::new(Inner {
            name: name.to_owned(),
            addr: listener.local_addr()?,
            api,
            rt: tokio::runtime::Handle::current(),
            fault: watch::Sender::new(Fault::Ok),
            stopped: watch::Sender::new(false),
            epoch: watch::Sender::new(0),
            listener: Mutex::new(Some(listener)),
            chunks: AtomicUsize::new(3),
            text: Mutex::new(None),
            models: Mutex::new(vec![match api {
                Api::OpenAi => DEFAULT_MODEL.to_owned(),
                Api::Ollama => DEFAULT_OLLAMA_MODEL.to_owned(),
            }]),
            image_time: Mutex::new(Duration::ZERO),
            counts: Counts::default(),
            open: AtomicUsize::new(0),
            serial: AtomicBool::new(false),
            precise: AtomicBool::new(false),
            one: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(serve::accept_loop(inner.clone()));
        Ok(Sim { inner })
    }

    /// The name it was started with, which its answers carry.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Which API it speaks.
    pub fn api(&self) -> Api {
        self.inner.api
    }

    /// "http://127.0.0.1:PORT/v1" — the OpenAI base URL a registry names (for an Ollama sim
    /// too: labrouter strips `/v1` for Ollama's own routes).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// "http://127.0.0.1:PORT" — where Ollama's own routes (/api/...) and `/` live.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// Switches the fault; Refuse closes the port now, anything else reopens it now (unless
    /// the sim was shut down).
    pub fn set(&self, fault: Fault) {
        let refuse = fault == Fault::Refuse;
        self.inner.fault.send_replace(fault);
        if refuse {
            self.inner.close();
        } else {
            self.inner.ensure_listener();
        }
    }

    /// Number of pieces (`NAME-i `) a plain stream sends (default 3): SSE chunks before
    /// the finish chunk, Responses text deltas, NDJSON lines before Ollama's done line.
    pub fn set_chunks(&self, n: usize) {
        self.inner.chunks.store(n, Ordering::Relaxed);
    }

    /// With `true`, slow answers (`Fault::SlowFirstByte`) come one at a time, the others
    /// waiting their turn: a machine that runs one request at once (`parallel: 1`).
    pub fn set_serial(&self, serial: bool) {
        self.inner.serial.store(serial, Ordering::Relaxed);
    }

    /// With `true`, a drip's waits (`Fault::Drip`) are timed by a kernel timer to the
    /// microsecond instead of tokio's millisecond wheel, so a direct and a proxied stream wait
    /// alike (Linux; elsewhere, and on any timer error, tokio's). For benchmarks: it ignores
    /// tokio's paused clock, which the tests use.
    pub fn set_precise(&self, precise: bool) {
        self.inner.precise.store(precise, Ordering::Relaxed);
    }

    /// The text of whole (not streamed) answers from now on, Responses too; `None` for
    /// "ok from NAME".
    pub fn set_text(&self, text: Option<&str>) {
        *lock(&self.inner.text) = text.map(str::to_string);
    }

    /// The models it lists and knows from now on, on both APIs (default `sim-model`;
    /// `sim-model:latest` on an Ollama sim), so a test can tell two sims apart by their model
    /// lists and a client sees the names it expects. Answers echo the model a request names;
    /// one naming none is answered as the first of these.
    pub fn set_models(&self, models: &[&str]) {
        *lock(&self.inner.models) = models.iter().map(|m| (*m).to_owned()).collect();
    }

    /// How long drawing takes from now on: image answers start this long after their
    /// request was read (a GPU draws in seconds, a CPU in minutes); the faults that answer
    /// without drawing (Status, Malformed, Huge, Reset) do not wait.
    pub fn set_image_time(&self, d: Duration) {
        *lock(&self.inner.image_time) = d;
    }

    /// Requests received on this exact path, counted when the request head arrived, whatever
    /// the fault (Hang and Reset requests count; refused connections do not).
    pub fn hits(&self, path: &str) -> u64 {
        self.inner.counts.hits(path)
    }

    /// Requests on every path except the metadata ones (the work that reached the machine,
    /// `/v1/responses` included): the metadata ones are /v1/models, and Ollama's /api/tags,
    /// /api/ps, /api/version, /api/show and `/` (whatever API the sim speaks).
    pub fn work_hits(&self) -> u64 {
        self.inner.counts.work_hits()
    }

    /// When each work request arrived (wall clock, so it compares with the router's ledger),
    /// oldest first: the same requests [`Sim::work_hits`] counts, the first
    /// [`HIT_LOG_MAX`] of them.
    pub fn hit_times(&self) -> Vec<SystemTime> {
        self.inner.counts.hit_times()
    }

    /// The most work requests it was answering at once (from arrival until its answer's
    /// head is ready, a slow first byte included), since start or the last reset.
    pub fn most_at_once(&self) -> u64 {
        self.inner.counts.most_at_once()
    }

    /// The body of the last work request received (tests check the router rewrote only `model`).
    pub fn last_body(&self) -> Option<Bytes> {
        self.inner.counts.last_body()
    }

    /// Connections open to it now: a client's idle pooled connections count until closed.
    pub fn open_connections(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// Forgets hits, their arrival times and the last body, so a test phase starts from zero.
    pub fn reset_counts(&self) {
        self.inner.counts.reset();
    }

    /// Stops serving: closes the listener and drops every connection.
    pub fn shutdown(&self) {
        self.inner.stopped.send_replace(true);
        self.inner.close();
    }
}

impl Inner {
    fn current(&self) -> Fault {
        self.fault.borrow().clone()
    }

    /// A kernel timer for a feed dripping every `delay`, if the sim is set precise; `None`
    /// (tokio's timer) otherwise, for a feed that does not drip, or when none can be had.
    fn drip_timer(&self, delay: Option<Duration>) -> Option<precise::Precise> {
        let precise = self.precise.load(Ordering::Relaxed) && delay.is_some();
        precise.then(precise::Precise::new)?.ok()
    }

    /// True when nothing may listen or be served (Refuse or shut down).
    fn closed(&self) -> bool {
        *self.stopped.borrow() || *self.fault.borrow() == Fault::Refuse
    }
}
