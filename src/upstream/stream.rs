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
use crate::breaker::{Failure, FailureKind};
use crate::machines::Lease;
use crate::outcome::words;

struct Relay {
    first: Option<Bytes>,
    rest: BoxStream<'static, reqwest::Result<Bytes>>,
    lease: Option<Lease>,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    /// The last bytes seen, to tell a finished stream (`data: [DONE]`) from a cut one.
    tail: DoneTail,
}

/// How many of a stream's last bytes [`DoneTail`] keeps.
const TAIL: usize = 32;

/// The end of a stream as it went by, to tell a finished one (`data: [DONE]`) from a cut
/// one. Chunk boundaries don't matter: after any split of the same bytes, [`finished`]
/// gives the same answer as for the whole stream seen at once.
///
/// [`finished`]: DoneTail::finished
#[derive(Clone, Debug, Default)]
pub struct DoneTail {
    /// The stream's last `len` bytes (at most [`TAIL`]), oldest first.
    buf: [u8; TAIL],
    len: usize,
}

impl DoneTail {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in the next chunk of the stream; an empty chunk changes nothing.
    pub fn observe(&mut self, chunk: &[u8]) {
        let keep = &chunk[chunk.len().saturating_sub(TAIL)..];
        // Old bytes that still fit before `keep`, moved to the front, then `keep`.
        let old = self.len.min(TAIL - keep.len());
        self.buf.copy_within(self.len - old..self.len, 0);
        self.buf[old..old + keep.len()].copy_from_slice(keep);
        self.len = old + keep.len();
    }

    /// Whether `[DONE]` is among the stream's last bytes.
    pub fn finished(&self) -> bool {
        self.buf[..self.len].windows(6).any(|w| w == b"[DONE]")
    }
}

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
        tail: DoneTail::new(),
    };
    stream::unfold(relay, |mut r| async move {
        if let Some(b) = r.first.take() {
            r.tail.observe(&b);
            return Some((Ok(b), r));
        }
        let lease = r.lease.take()?;
        let failure = match r.upstream.next_chunk(&mut r.rest, r.deadline, &lease).await {
            Chunk::Data(b) => {
                r.tail.observe(&b);
                r.lease = Some(lease);
                return Some((Ok(b), r));
            }
            Chunk::End if r.tail.finished() => {
                lease.succeed();
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
        lease.fail(failure);
        Some((Ok(event), r))
    })
}

/// The SSE event that ends a broken stream: OpenAI's error envelope, never `[DONE]`.
fn error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({"error": {
        "type": crate::outcome::Unserved::BadGateway.kind(),
        "code": failure.kind.as_str(),
        "message": format!("{target} failed mid-stream: {failure}"),
        "target": target,
    }});
    Bytes::from(format!("data: {body}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(chunks: &[&[u8]]) -> bool {
        let mut t = DoneTail::new();
        for c in chunks {
            t.observe(c);
        }
        t.finished()
    }

    #[test]
    fn done_split_across_chunks_still_counts() {
        assert!(finished(&[b"data: {}\n\ndata: [DO", b"", b"NE]\n\n"]));
        assert!(finished(&[b"data: [", b"D", b"O", b"N", b"E", b"]"]));
        assert!(!finished(&[b"data: [DONE]", &[b'x'; TAIL]]));
        assert!(!finished(&[b"data: {\"cut\": tr", b"ue}"]));
        assert!(!finished(&[]));
    }
}
