//! One attempt at one machine: send, tell hung from slow (README "What trips a breaker"), classify
//! (docs/api.md "Breaker classification").
//!
//! An attempt ends in an [`Answer`] the client can be given, or an [`Attempted`] that
//! carries its decisions: what the breaker records, whose fault it was (so whether the
//! chain may move on), and what the client sees if nothing else serves. This file sends
//! and sorts the answer; `alive.rs` waits without taking slow for dead, `opening.rs` reads
//! a stream's first chunk, `answer.rs` reads and checks a whole answer or a refusal.

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use reqwest::header::{HeaderValue, CONTENT_TYPE};
use reqwest::StatusCode;
use tokio::time::Instant;

use crate::breaker::FailureKind;
use crate::machines::Lease;
use crate::outcome::{Attempted, Call, Fault, ModelId, Skip, Wire};
use crate::registry::{Api, Machine, Timeouts};

mod alive;
mod answer;
pub mod classify;
mod hot;
mod opening;
mod payload;
mod side;
mod stream;

pub use hot::{use_worker_pool, worker_pools};

pub use payload::Payload;
pub use stream::{error_event, relay, Convert, DoneLine, DoneTail, EventTail, Framing, Keep, Tail};

pub use crate::outcome::Endpoint;

/// A stream's body after its first chunk.
pub type Chunks = BoxStream<'static, Result<Bytes, hyper::Error>>;

/// A machine as the request path sees it: its pooled clients, URLs and timeouts.
pub struct Upstream {
    /// Work (every attempt): hyper's client, one layer under the request, its connections
    /// pooled per serving thread ([`worker_pools`]) and driven by it.
    hot: hot::Hot,
    /// Everything else (liveness and health checks, `/api/ps`, `/api/show`, model lists).
    client: reqwest::Client,
    pub name: String,
    url: String,
    /// The endpoint URIs (origin form), parsed once: parsing a URL per request was a sixth
    /// of the proxy's instructions (see the README's Performance section).
    endpoints: Vec<hyper::Uri>,
    /// Ollama's own endpoints (`/api/chat` …), at the URL without its `/v1`; sent to only
    /// when the machine speaks Ollama's API.
    native: [hyper::Uri; 4],
    /// The URL without its `/v1`: where Ollama's `/api/ps` and `/api/show` are.
    root: String,
    pub api: Api,
    liveness_url: reqwest::Url,
    /// `Bearer <key>` read from the machine's `api_key_env` at load; marked sensitive so
    /// it never shows in debug output.
    auth: Option<HeaderValue>,
    pub timeouts: Timeouts,
    /// `server.max_upstream_body`: a whole answer is read up to this, never further.
    max_body: usize,
    /// This machine's metric handles, resolved at first use (after the recorder is
    /// installed) instead of by label strings on every request.
    meters: std::sync::OnceLock<Meters>,
}

/// One machine's per-request metrics.
pub struct Meters {
    pub first_byte: metrics::Histogram,
    /// `labrouter_upstream_attempts_total{outcome="success"}`.
    pub served: metrics::Counter,
    /// `labrouter_local_rejections_total`, by [`Skip`] (`skipped[skip as usize]`): a
    /// skip is counted without building the metric's key each time.
    pub skipped: [metrics::Counter; Skip::ALL.len()],
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What a served attempt hands to the client.
pub enum Answer {
    /// A whole answer, already checked to be a valid completion.
    Full {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
    },
    /// A stream whose first chunk has arrived; the rest follows through [`relay`].
    Stream {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        first: Bytes,
        rest: Chunks,
    },
    /// The machine refused the request itself (400, 413, 422): its answer goes back as is
    /// and the chain stops (docs/api.md "Breaker classification").
    Refused {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
        attempted: Attempted,
    },
}

impl Upstream {
    /// Closes the idle connections this thread's requests left to the machine.
    pub fn let_idle_go(&self) {
        self.hot.let_idle_go();
    }

    /// Closes the connections to the machine idle longer than its pools keep them (90 s).
    pub fn close_expired(&self) {
        self.hot.close_expired();
    }

    /// The machine's client and URLs; fails only on a client or URL the registry let through.
    pub fn new(machine: &Machine, max_body: usize) -> Result<Upstream, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(machine.timeouts.connect)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("cannot build its HTTP client: {e}"))?;
        let auth = machine
            .api_key_env
            .as_deref()
            .and_then(|var| std::env::var(var).ok())
            .and_then(|key| HeaderValue::from_str(&format!("Bearer {key}")).ok())
            .map(|mut v| {
                v.set_sensitive(true);
                crate::heap::cloned_once(v)
            });
        let health = machine
            .health
            .as_ref()
            .map_or("/models", |h| h.path.as_str());
        let root = machine
            .url
            .strip_suffix("/v1")
            .unwrap_or(&machine.url)
            .to_string();
        let hot = hot::Hot::new(machine)?;
        Ok(Upstream {
            hot,
            native: [
                uri(&root, Call::Chat.path())?,
                uri(&root, Call::Generate.path())?,
                uri(&root, Call::Embed.path())?,
                uri(&root, Call::Embeddings.path())?,
            ],
            root,
            api: machine.api,
            client,
            name: machine.name.clone(),
            endpoints: Endpoint::ALL
                .iter()
                .map(|e| uri(&machine.url, e.path()))
                .collect::<Result<_, _>>()?,
            liveness_url: join(&machine.url, health)?,
            url: machine.url.clone(),
            auth,
            timeouts: machine.timeouts.clone(),
            max_body,
            meters: std::sync::OnceLock::new(),
        })
    }

    /// Sends `body` to `wire`'s endpoint as `target` and waits for an answer worth giving the
    /// client, at most until `deadline` (the request's; this machine's `total` also applies).
    /// `lease` is vouched for at the first sign the machine works (README "What trips a breaker"):
    /// 2xx headers, a stream's first chunk, or a passed liveness check while the answer is pending.
    pub async fn attempt(
        &self,
        target: ModelId,
        wire: Wire,
        body: Payload,
        deadline: Instant,
        lease: &Lease,
    ) -> Result<Answer, Attempted> {
        let at = self.bounds(target, deadline);
        let resp = self.headers(&at, wire, body, lease).await?;
        self.meters()
            .first_byte
            .record(at.started.elapsed().as_secs_f64());
        let status = resp.status();
        let content_type = resp.headers().get(CONTENT_TYPE).cloned();
        if !status.is_success() {
            return self.refusal(target, resp, at.deadline).await;
        }
        if streams(wire, content_type.as_ref()) {
            let (first, rest) = self.first_chunk(&at, wire, resp, lease).await?;
            return Ok(Answer::Stream {
                status,
                content_type,
                first,
                rest,
            });
        }
        // 2xx headers: the machine works, whatever the body turns out to be.
        lease.vouch();
        let body = self.whole(&at, wire, resp).await?;
        Ok(Answer::Full {
            status,
            content_type,
            body,
        })
    }

    /// The bounds of an attempt that starts now: the request's `deadline`, or this
    /// machine's `total` when that comes first.
    fn bounds(&self, target: ModelId, deadline: Instant) -> Attempt {
        let started = Instant::now();
        let machine_deadline = crate::clock::after(started, self.timeouts.total);
        Attempt {
            target,
            started,
            deadline: deadline.min(machine_deadline),
            machine_total: deadline >= machine_deadline,
            total: self.timeouts.total,
        }
    }

    /// This machine's metric handles.
    pub fn meters(&self) -> &Meters {
        self.meters.get_or_init(|| Meters {
            first_byte: metrics::histogram!("labrouter_upstream_first_byte_seconds", "machine" => self.name.clone()),
            served: metrics::counter!("labrouter_upstream_attempts_total", "machine" => self.name.clone(), "outcome" => "success"),
            skipped: Skip::ALL.map(|s| metrics::counter!("labrouter_local_rejections_total", "machine" => self.name.clone(), "reason" => s.as_str())),
        })
    }

    /// Where `wire` is sent on this machine.
    fn url(&self, wire: Wire) -> &hyper::Uri {
        match wire {
            Wire::OpenAi(e) => &self.endpoints[e as usize],
            Wire::Ollama(c) => &self.native[c as usize],
        }
    }
}

/// `base` + `path` as the hot path's client sends it: in origin form (`/v1/chat/completions`),
/// made once here rather than per request; the client dials the machine's own scheme and
/// host and names it in `Host`.
fn uri(base: &str, path: &str) -> Result<hyper::Uri, String> {
    let joined = format!("{base}{path}");
    let full: hyper::Uri = joined
        .parse()
        .map_err(|e| format!("'{joined}' is not a URI: {e}"))?;
    Ok(full
        .path_and_query()
        .cloned()
        .map_or_else(|| hyper::Uri::from_static("/"), hyper::Uri::from))
}

/// `base` + `path` as a URL.
fn join(base: &str, path: &str) -> Result<reqwest::Url, String> {
    let joined = format!("{base}{path}");
    reqwest::Url::parse(&joined).map_err(|e| format!("'{joined}' is not a URL: {e}"))
}

/// One attempt's bounds, and what its failures are recorded against.
struct Attempt {
    target: ModelId,
    started: Instant,
    /// The request's deadline or the machine's `total`, whichever comes first.
    deadline: Instant,
    /// The machine's `total` is what `deadline` is: running out of it is the machine's
    /// failure, not the request's.
    machine_total: bool,
    total: Duration,
}

impl Attempt {
    /// A failure the machine's breaker counts.
    fn counted(&self, kind: FailureKind, fault: Fault, detail: String) -> Attempted {
        Attempted::counted(self.target, kind, fault, detail)
    }

    /// `deadline` ran out: whose failure that is depends on whose deadline it was.
    fn past_deadline(&self) -> Attempted {
        classify::past_deadline(self.target, self.started, self.machine_total, self.total)
    }
}

/// Whether a 2xx answer is a stream (SSE, Ollama's NDJSON, or speech's audio bytes, which
/// pass as they come) rather than a whole body.
fn streams(wire: Wire, content_type: Option<&HeaderValue>) -> bool {
    let json = content_type.is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if wire == Wire::OpenAi(Endpoint::AudioSpeech) && !json {
        return true;
    }
    content_type.and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.starts_with("text/event-stream") || v.starts_with("application/x-ndjson")
    })
}
