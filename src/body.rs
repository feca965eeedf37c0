//! Reading a whole body within bounds (README "Safety"), for both sides of the proxy: a client's
//! request and a machine's non-stream answer. At most `max` bytes: refused on a declared
//! length over it, or as soon as its bytes pass it, so it is never held whole; optionally
//! no silence longer than `idle` between frames. A body of one frame is kept as it came;
//! only a second frame copies.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum Unread<E> {
    /// Over the limit: declared so, or its bytes passed it.
    TooLarge,
    /// No frame for `idle`.
    Stalled,
    /// The transport failed.
    Broken(E),
}

/// Collects `frames` (declared to be `declared` bytes long, when known) into one buffer.
pub async fn collect<S, E>(
    frames: S,
    declared: Option<u64>,
    max: usize,
    idle: Option<Duration>,
) -> Result<Bytes, Unread<E>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Unread::TooLarge);
    }
    let mut frames = std::pin::pin!(frames);
    let mut first: Option<Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    loop {
        let next = frames.next();
        let frame = match idle {
            Some(idle) => tokio::time::timeout(idle, next)
                .await
                .map_err(|_| Unread::Stalled)?,
            None => next.await,
        };
        let frame = match frame {
            None => break,
            Some(Err(e)) => return Err(Unread::Broken(e)),
            Some(Ok(frame)) => frame,
        };
        let held = first.as_ref().map_or(0, Bytes::len) + more.len();
        if held + frame.len() > max {
            return Err(Unread::TooLarge);
        }
        match first.take() {
            None if more.is_empty() => first = Some(frame),
            Some(f) => {
                more.extend_from_slice(&f);
                more.extend_from_slice(&frame);
            }
            None => more.extend_from_slice(&frame),
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(more)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, ()>> {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn collects_within_the_limit_and_refuses_past_it() {
        let one = collect(frames(&[b"abc"]), None, 3, None).await.unwrap();
        assert_eq!(&one[..], b"abc");
        let many = collect(frames(&[b"ab", b"", b"cd", b"e"]), None, 5, None)
            .await
            .unwrap();
        assert_eq!(&many[..], b"abcde");
        assert!(matches!(
            collect(frames(&[b"ab", b"cd"]), None, 3, None).await,
            Err(Unread::TooLarge)
        ));
        assert!(matches!(
            collect(frames(&[]), Some(4), 3, None).await,
            Err(Unread::TooLarge)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_body_stalls() {
        let silent = futures_util::stream::pending::<Result<Bytes, ()>>();
        let got = collect(silent, None, 10, Some(Duration::from_secs(5))).await;
        assert!(matches!(got, Err(Unread::Stalled)));
    }
}
