//! Bodies that take time or space: scripted SSE streams (dripped, cut, stalled) and the huge
//! JSON answer, each produced frame by frame.

use std::convert::Infallible;
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use serde_json::json;
use tokio::sync::Notify;

use super::respond::Route;

/// How a [`Feed`] ends after its chunks.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum End {
    Done,
    Cut,
    Stall,
}

/// A scripted body: `chunks` SSE chunks (each its own frame), then [DONE], a reset, or silence.
pub(super) struct Feed {
    pub(super) route: Route,
    pub(super) model: String,
    pub(super) name: String,
    pub(super) chunks: usize,
    pub(super) delay: Option<Duration>,
    pub(super) end: End,
    /// Notified to reset the connection (End::Cut).
    pub(super) kill: Arc<Notify>,
}

impl Feed {
    fn chunk(&self, i: usize) -> Bytes {
        let piece = format!("{}-{i} ", self.name);
        let v = match self.route {
            Route::Chat => json!({"id":"chatcmpl-sim","object":"chat.completion.chunk","created":0,
                "model":self.model,"choices":[{"index":0,"delta":{"content":piece},"finish_reason":null}]}),
            _ => json!({"id":"cmpl-sim","object":"text_completion","created":0,"model":self.model,
                "choices":[{"index":0,"text":piece,"finish_reason":null}]}),
        };
        Bytes::from(format!("data: {v}\n\n"))
    }

    pub(super) fn into_body(self) -> Body {
        let feed = Arc::new(self);
        Body::from_stream(futures_util::stream::unfold(0usize, move |i| {
            let feed = feed.clone();
            async move {
                if i < feed.chunks {
                    if let Some(d) = feed.delay {
                        tokio::time::sleep(d).await;
                    }
                    return Some((Ok::<_, Infallible>(feed.chunk(i)), i + 1));
                }
                match feed.end {
                    End::Done if i == feed.chunks => {
                        Some((Ok(Bytes::from_static(b"data: [DONE]\n\n")), i + 1))
                    }
                    End::Done => None,
                    End::Cut => {
                        // Let the chunks already handed to hyper reach the socket first.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        feed.kill.notify_one();
                        pending().await
                    }
                    End::Stall => pending().await,
                }
            }
        }))
    }
}

/// `n` bytes of a valid chat completion padded with spaces, streamed in 64 KiB frames.
pub(super) fn huge_body(n: usize) -> Body {
    const FRAME: usize = 64 << 10;
    let head: &'static [u8] =
        br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"big"}}],"pad":""#;
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
