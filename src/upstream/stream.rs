//! Relaying a stream after its first chunk: chunk by chunk as it arrives, never buffered.
//!
//! Once bytes reached the client there is nothing left to fail over (docs/api.md "Breaker
//! classification"): a cut or a hang mid-stream is recorded as a failure and the client gets an SSE
//! error event instead of a clean `[DONE]`. A client that goes away drops the relay, and with it
//! the lease, which counts as neither success nor failure.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, Stream};
use tokio::time::Instant;

use super::alive::Chunk;
use super::Upstream;
use crate::breaker::{Failure, FailureKind};
use crate::machines::Lease;
use crate::outcome::words;

struct Relay {
    first: Option<Bytes>,
    rest: super::Chunks,
    lease: Option<Lease>,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    framing: Framing,
}

/// How a stream's bytes reach the client: how its end is told, whether they are
/// translated on the way, and the event that ends it when it breaks.
pub struct Framing {
    /// What the machine's stream ends with when it finished.
    pub tail: Tail,
    /// The machine's bytes turned into the client's; `None`: passed on as they are.
    pub convert: Option<Box<dyn Convert>>,
    /// The last event of a stream that broke after reaching the client; `None` when the
    /// framing has no error event (audio bytes): the client's connection is cut instead.
    pub error: Option<fn(target: &str, failure: &Failure) -> Bytes>,
    /// What sees the stream's bytes go by and is told when it finished whole (a Response
    /// kept for its conversation); `None`: nothing is kept.
    pub keep: Option<Box<dyn Keep>>,
}

impl Framing {
    /// An OpenAI stream to an OpenAI client: SSE as it comes, ended by `[DONE]`.
    pub fn sse() -> Framing {
        Framing {
            tail: Tail::Sse(DoneTail::new()),
            convert: None,
            error: Some(error_event),
            keep: None,
        }
    }

    /// A Responses stream: typed SSE events as they come, ended by the event that finishes
    /// the Response (no `[DONE]`); a break after events reached the client is told with an
    /// `error` event, code `stream_cut`.
    pub fn responses(keep: Option<Box<dyn Keep>>) -> Framing {
        Framing {
            tail: Tail::Events(EventTail::new()),
            convert: None,
            error: Some(response_error_event),
            keep,
        }
    }
}

impl Framing {
    /// Bytes as they come (audio, a transcription's events): finished when the machine
    /// ends its body; a break after bytes reached the client cuts the client's connection
    /// (such a body has no error event, and a cut is what tells the client).
    pub fn bytes() -> Framing {
        Framing {
            tail: Tail::Bytes,
            convert: None,
            error: None,
            keep: None,
        }
    }
}

/// Sees a stream's bytes as they pass to the client, unchanged.
pub trait Keep: Send {
    fn observe(&mut self, chunk: &[u8]);
    /// The stream finished whole.
    fn finished(self: Box<Self>);
}

/// A stream translated on its way to the client, chunk by chunk.
pub trait Convert: Send {
    /// Appends to `out` the client's bytes for the machine's next bytes (split anywhere);
    /// nothing when they complete nothing yet. Err: the stream cannot be translated (said
    /// in plain words); `out` then holds what the bytes before the failure completed, which
    /// the client gets before the error event, however the stream was chunked.
    fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), String>;
}

/// The client's body for a stream whose first chunk is `first`.
pub fn relay(
    first: Bytes,
    rest: super::Chunks,
    lease: Lease,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    framing: Framing,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let deadline = deadline.min(crate::clock::from_now(upstream.timeouts.total));
    let relay = Relay {
        first: Some(first),
        rest,
        lease: Some(lease),
        upstream,
        deadline,
        target,
        framing,
    };
    stream::unfold(relay, |mut r| async move {
        let lease = r.lease.take()?;
        // What a chunk that broke the conversion completed before it broke.
        let mut before = Vec::new();
        let failure = loop {
            let chunk = match r.first.take() {
                Some(b) => Chunk::Data(b),
                None => r.upstream.next_chunk(&mut r.rest, r.deadline, &lease).await,
            };
            let b = match chunk {
                Chunk::Data(b) => b,
                Chunk::End if r.framing.tail.finished() => {
                    lease.succeed();
                    if let Some(keep) = r.framing.keep.take() {
                        keep.finished();
                    }
                    return None;
                }
                other => break ended(other, &r.upstream, &r.framing.tail),
            };
            r.framing.tail.observe(&b);
            if let Some(keep) = r.framing.keep.as_mut() {
                keep.observe(&b);
            }
            let out = match r.framing.convert.as_mut() {
                None => Ok(b),
                Some(c) => c
                    .push(&b, &mut before)
                    .map(|()| Bytes::from(std::mem::take(&mut before))),
            };
            match out {
                // Nothing for the client yet: read on.
                Ok(out) if out.is_empty() => continue,
                Ok(out) => {
                    r.lease = Some(lease);
                    return Some((Ok(out), r));
                }
                Err(why) => {
                    break Failure::new(FailureKind::Malformed, format!("stream unusable: {why}"))
                }
            }
        };
        tracing::warn!(target_model = %r.target, reason = %failure, "stream broke after reaching the client");
        let Some(error) = r.framing.error else {
            // No error event: the client learns of the break by the cut.
            let cut = std::io::Error::other(failure.to_string());
            lease.fail(failure);
            return Some((Err(cut), r));
        };
        before.extend_from_slice(&error(&r.target, &failure));
        lease.fail(failure);
        Some((Ok(Bytes::from(before)), r))
    })
}

/// Why a stream that reached the client did not finish: its next read was not data.
fn ended(chunk: Chunk, upstream: &Upstream, tail: &Tail) -> Failure {
    match chunk {
        Chunk::Data(_) | Chunk::End => Failure::new(FailureKind::StreamCut, tail.missing()),
        Chunk::Cut(detail) => Failure::new(FailureKind::StreamCut, format!("stream cut: {detail}")),
        Chunk::Hung => Failure::new(
            FailureKind::StreamHung,
            format!(
                "stream silent for {} (liveness check failed)",
                words(upstream.timeouts.idle)
            ),
        ),
        Chunk::Deadline => Failure::new(
            FailureKind::Timeout,
            "stream did not finish before its deadline",
        ),
    }
}

/// The SSE event that ends a broken stream: OpenAI's error envelope, never `[DONE]`.
pub fn error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({"error": {
        "type": crate::outcome::Unserved::BadGateway.kind(),
        "code": failure.kind.as_str(),
        "message": format!("{target} failed mid-stream: {failure}"),
        "target": target,
    }});
    Bytes::from(format!("data: {body}\n\n"))
}

/// The event that ends a broken Responses stream: `event: error` with code `stream_cut`
/// (a hang or a deadline is a cut too, to the client: the stream stopped short).
pub fn response_error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({
        "type": "error",
        "code": "stream_cut",
        "message": format!("{target} failed mid-stream: {failure}"),
        "param": null,
    });
    Bytes::from(format!("event: error\ndata: {body}\n\n"))
}

mod tail;
#[cfg(test)]
mod tests;

pub use tail::{DoneLine, DoneTail, EventTail, Tail};
