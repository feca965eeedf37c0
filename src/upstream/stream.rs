//! Relaying a stream after its first chunk: chunk by chunk as it arrives, never buffered.
//!
//! Once bytes reached the client there is nothing left to fail over (SPEC §3.2): a cut or a
//! hang mid-stream is recorded as a failure and the client gets an SSE error event instead
//! of a clean `[DONE]`. A client that goes away drops the relay, and with it the lease,
//! which counts as neither success nor failure.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, BoxStream, Stream};
use tokio::time::Instant;

use super::{Chunk, Upstream};
use crate::breaker::failure::words;
use crate::breaker::{Failure, FailureKind};
use crate::machines::{Lease, Outcome};

struct Relay {
    first: Option<Bytes>,
    rest: BoxStream<'static, reqwest::Result<Bytes>>,
    lease: Option<Lease>,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    /// The last bytes seen, to tell a finished stream (`data: [DONE]`) from a cut one.
    tail: Vec<u8>,
}

const TAIL: usize = 32;

/// The client's body for a stream whose first chunk is `first`.
pub fn relay(
    first: Bytes,
    rest: BoxStream<'static, reqwest::Result<Bytes>>,
    lease: Lease,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let deadline = deadline.min(crate::clock::from_now(upstream.timeouts.total));
    let relay = Relay {
        first: Some(first),
        rest,
        lease: Some(lease),
        upstream,
        deadline,
        target,
        tail: Vec::with_capacity(TAIL * 2),
    };
    stream::unfold(relay, |mut r| async move {
        if let Some(b) = r.first.take() {
            r.observe(&b);
            return Some((Ok(b), r));
        }
        let lease = r.lease.take()?;
        let failure = match r.upstream.next_chunk(&mut r.rest, r.deadline).await {
            Chunk::Data(b) => {
                r.observe(&b);
                r.lease = Some(lease);
                return Some((Ok(b), r));
            }
            Chunk::End if r.finished() => {
                lease.finish(Outcome::Success);
                return None;
            }
            Chunk::End => Failure::new(FailureKind::StreamCut, "stream ended without [DONE]"),
            Chunk::Cut(detail) => {
                Failure::new(FailureKind::StreamCut, format!("stream cut: {detail}"))
            }
            Chunk::Hung => Failure::new(
                FailureKind::StreamHung,
                format!(
                    "stream silent for {} (liveness check failed)",
                    words(r.upstream.timeouts.idle)
                ),
            ),
            Chunk::Deadline => Failure::new(
                FailureKind::Timeout,
                "stream did not finish before its deadline",
            ),
        };
        tracing::warn!(target_model = %r.target, reason = %failure, "stream broke after reaching the client");
        let event = error_event(&r.target, &failure);
        lease.finish(Outcome::Failure(failure));
        Some((Ok(event), r))
    })
}

impl Relay {
    fn observe(&mut self, b: &Bytes) {
        let keep = &b[b.len().saturating_sub(TAIL)..];
        self.tail.extend_from_slice(keep);
        if self.tail.len() > TAIL {
            self.tail.drain(..self.tail.len() - TAIL);
        }
    }

    fn finished(&self) -> bool {
        self.tail.windows(6).any(|w| w == b"[DONE]")
    }
}

/// The SSE event that ends a broken stream: OpenAI's error envelope, never `[DONE]`.
fn error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({"error": {
        "type": "upstream_error",
        "code": failure.kind.as_str(),
        "message": format!("{target} failed mid-stream: {failure}"),
        "target": target,
    }});
    Bytes::from(format!("data: {body}\n\n"))
}
