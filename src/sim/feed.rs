//! Bodies that take time or space: scripted streams (SSE or NDJSON; dripped, cut, stalled) and
//! the huge JSON answer, each produced frame by frame.

use std::convert::Infallible;
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use tokio::sync::Notify;

use super::precise::Precise;

/// How a [`Feed`] ends after its frames.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum End {
    Done,
    Cut,
    Stall,
}

/// Makes the `i`th piece frame of a stream (`NAME-i ` framed as SSE or NDJSON).
pub(super) type Piece = Box<dyn Fn(usize) -> Bytes + Send + Sync>;

/// What a stream says, whatever its faults: `head` frames, `pieces` frames made one at a time
/// by `piece`, `tail` frames, then `last` (SSE's `[DONE]`).
pub(super) struct Script {
    /// Frames before the pieces: a thinking delta, a tool call, a whole fixed text.
    pub(super) head: Vec<Bytes>,
    pub(super) pieces: usize,
    pub(super) piece: Piece,
    /// Frames after the pieces: finish and usage chunks, Ollama's done line.
    pub(super) tail: Vec<Bytes>,
    /// Sent only when the feed ends normally, without a delay, and not counted as a frame.
    pub(super) last: Option<Bytes>,
}

impl Script {
    /// A script with no frames at all (a non-stream answer cut before its body).
    pub(super) fn empty() -> Script {
        Script {
            head: Vec::new(),
            pieces: 0,
            piece: Box::new(|_| Bytes::new()),
            tail: Vec::new(),
            last: None,
        }
    }

    /// The `i`th frame of head, pieces and tail, if there is one.
    fn frame(&self, i: usize) -> Option<Bytes> {
        let pieces_end = self.head.len() + self.pieces;
        if i < self.head.len() {
            self.head.get(i).cloned()
        } else if i < pieces_end {
            Some((self.piece)(i - self.head.len()))
        } else {
            self.tail.get(i - pieces_end).cloned()
        }
    }
}

/// A scripted body: at most `limit` frames of the script (each its own frame, each after
/// `delay`), then the script's `last` frame, a reset, or silence.
pub(super) struct Feed {
    pub(super) script: Script,
    /// The most frames sent before the end (CutAfter/StallAfter's n; unbounded otherwise).
    pub(super) limit: usize,
    pub(super) delay: Option<Duration>,
    /// Times `delay` when the sim is precise (`Sim::set_precise`); tokio's timer otherwise.
    pub(super) timer: Option<Precise>,
    pub(super) end: End,
    /// Notified to reset the connection (End::Cut).
    pub(super) kill: Arc<Notify>,
}

impl Feed {
    /// The body, made frame by frame as the client reads it.
    pub(super) fn into_body(self) -> Body {
        let feed = Arc::new(self);
        Body::from_stream(futures_util::stream::unfold(Some(0), move |step| {
            let feed = feed.clone();
            async move { feed.next(step).await }
        }))
    }

    /// The frame at `step` (the index of the next script frame; `None` once the last frame
    /// went) and the step after it; `None` once the body is over.
    async fn next(
        &self,
        step: Option<usize>,
    ) -> Option<(Result<Bytes, Infallible>, Option<usize>)> {
        let i = step?;
        if let Some(frame) = (i < self.limit).then(|| self.script.frame(i)).flatten() {
            if let Some(d) = self.delay {
                let precise = match &self.timer {
                    Some(t) => t.sleep(d).await.is_ok(),
                    None => false,
                };
                if !precise {
                    tokio::time::sleep(d).await;
                }
            }
            return Some((Ok(frame), Some(i + 1)));
        }
        match self.end {
            End::Done => self.script.last.clone().map(|b| (Ok(b), None)),
            End::Cut => {
                // Let the frames already handed to hyper reach the socket first.
                tokio::time::sleep(Duration::from_millis(1)).await;
                self.kill.notify_one();
                pending().await
            }
            End::Stall => pending().await,
        }
    }
}

/// The opening of the huge OpenAI answer: a valid chat completion up to its padding string.
pub(super) const CHAT_HUGE_HEAD: &[u8] =
    br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"big"}}],"pad":""#;

/// `n` bytes of a valid chat completion padded with spaces, streamed in 64 KiB frames.
pub(super) fn huge_body(n: usize) -> Body {
    padded_body(n, CHAT_HUGE_HEAD)
}

/// `n` bytes (never fewer than `head` and the end): `head`, which opens a JSON string, then
/// spaces, then the end closing that string and the object; streamed in 64 KiB frames and
/// never built whole.
pub(super) fn padded_body(n: usize, head: &'static [u8]) -> Body {
    const FRAME: usize = 64 << 10;
    let tail: &'static [u8] = br#""}"#;
    let pad = n.saturating_sub(head.len() + tail.len());
    let frames = futures_util::stream::iter(
        std::iter::once(Bytes::from_static(head))
            .chain((0..pad.div_ceil(FRAME)).map(move |i| {
                let len = FRAME.min(pad - i * FRAME);
                Bytes::from(vec![b' '; len])
            }))
            .chain(std::iter::once(Bytes::from_static(tail)))
            .map(Ok::<_, Infallible>),
    );
    Body::from_stream(frames)
}
