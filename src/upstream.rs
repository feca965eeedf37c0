//! One attempt at one machine: send, tell hung from slow (SPEC §3.3), classify (SPEC §3.2).
//!
//! An attempt ends in an [`Answer`] the client can be given, or an [`Attempted`] that
//! carries its decisions: what the breaker records, whose fault it was (so whether the
//! chain may move on), and what the client sees if nothing else serves.

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use tokio::time::Instant;

use crate::body::Unread;
use crate::breaker::FailureKind;
use crate::machines::Lease;
use crate::outcome::{words, Attempted, Call, Fault, ModelId, Wire};
use crate::registry::{Api, Machine, Timeouts};

pub mod classify;
mod hot;
mod side;
mod stream;

pub use hot::{use_worker_pool, worker_pools};

pub use stream::{error_event, relay, Convert, DoneLine, DoneTail, Framing, Tail};

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
    /// The endpoint URIs, parsed once: parsing a URL per request was a sixth of the
    /// proxy's instructions (see the README's Performance section).
    endpoints: [hyper::Uri; 3],
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
    /// and the chain stops (SPEC §3.2).
    Refused {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
        attempted: Attempted,
    },
}

impl Upstream {
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
                v
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
            endpoints: [
                uri(&machine.url, Endpoint::Chat.path())?,
                uri(&machine.url, Endpoint::Completions.path())?,
                uri(&machine.url, Endpoint::Embeddings.path())?,
            ],
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
    /// `lease` is vouched for at the first sign the machine works (SPEC §3.4): 2xx headers,
    /// a stream's first chunk, or a passed liveness check while the answer is pending.
    pub async fn attempt(
        &self,
        target: ModelId,
        wire: Wire,
        body: Bytes,
        deadline: Instant,
        lease: &Lease,
    ) -> Result<Answer, Attempted> {
        let started = Instant::now();
        let machine_deadline = crate::clock::after(started, self.timeouts.total);
        let deadline = deadline.min(machine_deadline);
        let counted = |kind, fault, detail: String| Attempted::counted(target, kind, fault, detail);
        let past_deadline = || {
            classify::past_deadline(
                target,
                started,
                deadline == machine_deadline,
                self.timeouts.total,
            )
        };
        let mut req = hyper::Request::new(Full::new(body));
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = self.url(wire).clone();
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(auth) = &self.auth {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        let send = self.hot.request(req);
        let resp = match self
            .wait_alive(send, self.timeouts.first_byte, deadline, lease)
            .await
        {
            Waited::Done(Ok(resp)) => resp,
            Waited::Done(Err(e)) => {
                let f = classify::send_error(&e, e.is_connect(), false, self.timeouts.connect);
                return Err(counted(f.kind, Fault::Unreachable, f.detail));
            }
            Waited::Hung => {
                let detail = format!(
                    "timeout after {} (liveness check failed)",
                    words(self.timeouts.first_byte)
                );
                return Err(counted(FailureKind::Hung, Fault::Unreachable, detail));
            }
            Waited::Deadline => return Err(past_deadline()),
        };
        self.meters()
            .first_byte
            .record(started.elapsed().as_secs_f64());
        let status = resp.status();
        let content_type = resp.headers().get(CONTENT_TYPE).cloned();
        if !status.is_success() {
            return self.refusal(target, resp, deadline).await;
        }
        let streams = content_type
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.starts_with("text/event-stream") || v.starts_with("application/x-ndjson")
            });
        if streams {
            let mut rest: Chunks = resp.into_body().into_data_stream().boxed();
            let cut = |detail: String| counted(FailureKind::StreamCut, Fault::BadAnswer, detail);
            return match self.next_chunk(&mut rest, deadline, lease).await {
                // Ollama says a failure before its first token as an `{"error": ...}` line.
                Chunk::Data(first) if matches!(wire, Wire::Ollama(_)) && error_line(&first) => {
                    Err(cut(format!(
                        "stream's first line is an error: {}",
                        crate::text::bounded(&String::from_utf8_lossy(&first))
                    )))
                }
                Chunk::Data(first) => {
                    lease.vouch();
                    Ok(Answer::Stream {
                        status,
                        content_type,
                        first,
                        rest,
                    })
                }
                Chunk::End => Err(cut("stream ended before its first chunk".into())),
                Chunk::Cut(detail) => {
                    Err(cut(format!("stream cut before its first chunk: {detail}")))
                }
                Chunk::Hung => Err(counted(
                    FailureKind::StreamHung,
                    Fault::BadAnswer,
                    format!(
                        "stream silent for {} (liveness check failed)",
                        words(self.timeouts.idle)
                    ),
                )),
                Chunk::Deadline => Err(past_deadline()),
            };
        }
        // 2xx headers: the machine works, whatever the body turns out to be.
        lease.vouch();
        let body = match tokio::time::timeout_at(deadline, self.read_whole(resp)).await {
            Ok(Ok(body)) => body,
            Ok(Err(Unread::TooLarge)) => {
                let detail = format!(
                    "malformed answer: larger than server.max_upstream_body ({} bytes)",
                    self.max_body
                );
                return Err(counted(FailureKind::Malformed, Fault::BadAnswer, detail));
            }
            Ok(Err(Unread::Broken(e))) => {
                let detail = format!("answer cut while reading: {}", classify::root(&e));
                return Err(counted(FailureKind::Reset, Fault::BadAnswer, detail));
            }
            // No idle bound is asked of the reader: only the deadline stops a silent answer.
            Ok(Err(Unread::Stalled)) | Err(_) => return Err(past_deadline()),
        };
        if let Err(why) = classify::valid_answer(wire, &body) {
            let detail = format!("malformed answer: {why}");
            return Err(counted(FailureKind::Malformed, Fault::BadAnswer, detail));
        }
        Ok(Answer::Full {
            status,
            content_type,
            body,
        })
    }

    /// This machine's metric handles.
    pub fn meters(&self) -> &Meters {
        self.meters.get_or_init(|| Meters {
            first_byte: metrics::histogram!("labrouter_upstream_first_byte_seconds", "machine" => self.name.clone()),
            served: metrics::counter!("labrouter_upstream_attempts_total", "machine" => self.name.clone(), "outcome" => "success"),
        })
    }

    /// Where `wire` is sent on this machine.
    fn url(&self, wire: Wire) -> &hyper::Uri {
        match wire {
            Wire::OpenAi(e) => &self.endpoints[e as usize],
            Wire::Ollama(c) => &self.native[c as usize],
        }
    }

    /// A non-2xx answer, classified by SPEC §3.2; a client error's answer is read to be
    /// passed back.
    async fn refusal(
        &self,
        target: ModelId,
        resp: hyper::Response<Incoming>,
        deadline: Instant,
    ) -> Result<Answer, Attempted> {
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(classify::retry_after);
        let attempted = classify::refusal(target, status.as_u16(), retry_after, deadline);
        if attempted.reason == crate::outcome::Reason::NotFound {
            tracing::warn!(machine = %self.name, "HTTP 404: the model is not on this machine; check registry.yaml");
        }
        if attempted.fault != Fault::Client {
            return Err(attempted);
        }
        let content_type = resp.headers().get(CONTENT_TYPE).cloned();
        let body = tokio::time::timeout_at(deadline, self.read_whole(resp))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Ok(Answer::Refused {
            status,
            content_type,
            body,
            attempted,
        })
    }

    /// A whole answer, read up to `server.max_upstream_body` and never further; the caller's
    /// deadline bounds the time.
    async fn read_whole(
        &self,
        resp: hyper::Response<Incoming>,
    ) -> Result<Bytes, Unread<hyper::Error>> {
        let declared = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let frames = resp.into_body().into_data_stream();
        crate::body::collect(frames, declared, self.max_body, None).await
    }

    /// Waits for `fut`; each `every` of silence, asks the machine whether it is alive. A
    /// machine that answers is slow, not dead: that vouches for `lease` (SPEC §3.4).
    async fn wait_alive<F: std::future::Future>(
        &self,
        fut: F,
        every: Duration,
        deadline: Instant,
        lease: &Lease,
    ) -> Waited<F::Output> {
        tokio::pin!(fut);
        loop {
            let check_at = crate::clock::from_now(every).min(deadline);
            tokio::select! {
                out = &mut fut => return Waited::Done(out),
                () = tokio::time::sleep_until(check_at) => {}
            }
            if Instant::now() >= deadline {
                return Waited::Deadline;
            }
            // The answer may still arrive while we ask: whichever comes first decides.
            tokio::select! {
                out = &mut fut => return Waited::Done(out),
                alive = self.alive() => if !alive { return Waited::Hung },
            }
            lease.vouch();
        }
    }

    async fn next_chunk(&self, rest: &mut Chunks, deadline: Instant, lease: &Lease) -> Chunk {
        let next = async {
            loop {
                match rest.next().await {
                    Some(Ok(b)) if b.is_empty() => continue,
                    other => return other,
                }
            }
        };
        match self
            .wait_alive(next, self.timeouts.idle, deadline, lease)
            .await
        {
            Waited::Done(Some(Ok(b))) => Chunk::Data(b),
            Waited::Done(Some(Err(e))) => Chunk::Cut(classify::root(&e)),
            Waited::Done(None) => Chunk::End,
            Waited::Hung => Chunk::Hung,
            Waited::Deadline => Chunk::Deadline,
        }
    }
}

/// Whether a stream's first bytes are Ollama's `{"error": ...}` line.
fn error_line(first: &[u8]) -> bool {
    let start = first
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(first.len());
    let line = &first[start..];
    line.starts_with(b"{\"error\"")
}

/// `base` + `path` as a URI for the hot path's client.
fn uri(base: &str, path: &str) -> Result<hyper::Uri, String> {
    let joined = format!("{base}{path}");
    joined
        .parse()
        .map_err(|e| format!("'{joined}' is not a URI: {e}"))
}

/// `base` + `path` as a URL.
fn join(base: &str, path: &str) -> Result<reqwest::Url, String> {
    let joined = format!("{base}{path}");
    reqwest::Url::parse(&joined).map_err(|e| format!("'{joined}' is not a URL: {e}"))
}

enum Waited<T> {
    Done(T),
    Hung,
    Deadline,
}

enum Chunk {
    Data(Bytes),
    End,
    Cut(String),
    Hung,
    Deadline,
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn an_ollama_stream_that_opens_with_an_error_is_told() {
        assert!(error_line(b"{\"error\":\"model failed to load\"}\n"));
        assert!(error_line(b"\n  {\"error\": \"x\"}"));
        assert!(!error_line(
            b"{\"model\":\"m\",\"message\":{\"content\":\"{\\\"error\\\"\"}}"
        ));
        assert!(!error_line(b""));
    }
}
