//! Reading a whole body within bounds (README "Safety"), for both sides of the proxy: a client's
//! request and a machine's non-stream answer. At most `max` bytes: refused on a declared
//! length over it, or as soon as its bytes pass it, so it is never held whole; optionally
//! no silence longer than `idle` between frames. A body of one frame is kept as it came;
//! only a second frame copies, a large body into memory of its own (`mapped`).
//! [`Holding`]: a response body that holds a guard (a request in flight, an upload's slot)
//! until it is done, its length kept.

use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

mod holding;
mod mapped;

pub use holding::Holding;
use mapped::{Mapped, MAPPED_MIN};

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
    // Within `max`, so it fits a `usize`.
    let declared = declared.and_then(|n| usize::try_from(n).ok());
    let mut frames = std::pin::pin!(frames);
    let mut held = Held::Frame(Bytes::new());
    // One timer for the whole read, made the first time a frame is not there at once and
    // moved on only when it fires: a frame just notes when it came, so a large body costs no
    // timer per frame, and one that is all there costs none.
    let mut last = Instant::now();
    let mut stall = std::pin::pin!(None::<tokio::time::Sleep>);
    loop {
        let next = match (idle, futures_util::poll!(frames.next())) {
            (_, Poll::Ready(frame)) => Some(frame),
            (None, Poll::Pending) => Some(frames.next().await),
            (Some(idle), Poll::Pending) => {
                if stall.as_mut().as_pin_mut().is_none() {
                    stall.set(Some(tokio::time::sleep_until(crate::clock::after(
                        last, idle,
                    ))));
                }
                match stall.as_mut().as_pin_mut() {
                    Some(timer) => tokio::select! {
                        biased;
                        frame = frames.next() => Some(frame),
                        () = timer => None,
                    },
                    None => Some(frames.next().await),
                }
            }
        };
        let Some(frame) = next else {
            // The timer fired: stalled, unless frames came meanwhile (then it moves on).
            let due = crate::clock::after(last, idle.unwrap_or_default());
            if Instant::now() >= due {
                return Err(Unread::Stalled);
            }
            if let Some(timer) = stall.as_mut().as_pin_mut() {
                timer.reset(due);
            }
            continue;
        };
        last = Instant::now();
        match frame {
            None => break,
            Some(Err(e)) => return Err(Unread::Broken(e)),
            Some(Ok(frame)) if held.len() + frame.len() > max => return Err(Unread::TooLarge),
            Some(Ok(frame)) => held.push(frame, declared, max),
        }
    }
    Ok(held.into_bytes())
}

/// A body's bytes so far: one frame kept as it came; from a second frame on, a buffer that
/// reserves the declared length once (no doubling, so a body is held once, not up to twice
/// while its buffer grows), or, for a large body ([`MAPPED_MIN`] declared or reached), a
/// mapping of its own ([`Mapped`]) as long as the declared length, else `max` (only what is
/// written is resident), so a chunked upload is not copied to grow either.
enum Held {
    Frame(Bytes),
    Vec(Vec<u8>),
    Mapped(Mapped),
}

impl Held {
    fn len(&self) -> usize {
        match self {
            Held::Frame(f) => f.len(),
            Held::Vec(v) => v.len(),
            Held::Mapped(m) => m.len(),
        }
    }

    fn push(&mut self, frame: Bytes, declared: Option<usize>, max: usize) {
        if matches!(self, Held::Frame(f) if f.is_empty()) {
            *self = Held::Frame(frame);
            return;
        }
        let whole = self.len() + frame.len();
        let large = declared.unwrap_or(whole) >= MAPPED_MIN;
        if large && !matches!(self, Held::Mapped(_)) {
            if let Some(mut m) = Mapped::new(declared.unwrap_or(max).max(whole)) {
                m.push(self.bytes());
                *self = Held::Mapped(m);
            }
        }
        match self {
            Held::Frame(f) => {
                let mut v = Vec::with_capacity(declared.unwrap_or(0).max(whole));
                v.extend_from_slice(f);
                v.extend_from_slice(&frame);
                *self = Held::Vec(v);
            }
            Held::Vec(v) => v.extend_from_slice(&frame),
            Held::Mapped(m) => {
                if !m.push(&frame) {
                    // Past the declared length (the transport allows no such thing): held
                    // in the heap rather than lost.
                    let mut v = Vec::with_capacity(whole);
                    v.extend_from_slice(m.as_ref());
                    v.extend_from_slice(&frame);
                    *self = Held::Vec(v);
                }
            }
        }
    }

    /// What is held so far, borrowed.
    fn bytes(&self) -> &[u8] {
        match self {
            Held::Frame(f) => f,
            Held::Vec(v) => v,
            Held::Mapped(m) => m.as_ref(),
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Held::Frame(f) => f,
            Held::Vec(v) => Bytes::from(v),
            Held::Mapped(m) => Bytes::from_owner(m),
        }
    }
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

    #[tokio::test]
    async fn a_large_body_is_held_whole_sized_or_chunked_and_refused_past_the_limit() {
        let frame: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
        let n = MAPPED_MIN / frame.len() + 3;
        let whole = frame.repeat(n);
        let stream = || {
            let frame = Bytes::from(frame.clone());
            futures_util::stream::iter((0..n).map(move |_| Ok::<_, ()>(frame.clone())))
        };
        for declared in [Some(whole.len() as u64), None] {
            let got = collect(stream(), declared, whole.len(), None)
                .await
                .unwrap();
            assert!(got[..] == whole[..], "declared {declared:?}");
            assert_eq!(&got.slice(5..9)[..], &whole[5..9]);
        }
        let over = collect(stream(), None, whole.len() - 1, None).await;
        assert!(matches!(over, Err(Unread::TooLarge)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_body_stalls() {
        let silent = futures_util::stream::pending::<Result<Bytes, ()>>();
        let got = collect(silent, None, 10, Some(Duration::from_secs(5))).await;
        assert!(matches!(got, Err(Unread::Stalled)));
    }

    #[tokio::test(start_paused = true)]
    async fn frames_closer_than_idle_never_stall_however_long_the_body_takes() {
        let slow = futures_util::stream::unfold(0, |i| async move {
            if i == 5 {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(4)).await;
            Some((Ok::<_, ()>(Bytes::from_static(b"ab")), i + 1))
        });
        let got = collect(slow, Some(10), 10, Some(Duration::from_secs(5))).await;
        assert_eq!(&got.unwrap()[..], b"ababababab");
        let stops = futures_util::stream::unfold(0, |i| async move {
            let wait = if i == 2 { 6 } else { 4 };
            tokio::time::sleep(Duration::from_secs(wait)).await;
            Some((Ok::<_, ()>(Bytes::from_static(b"ab")), i + 1))
        });
        let got = collect(stops, None, 100, Some(Duration::from_secs(5))).await;
        assert!(matches!(got, Err(Unread::Stalled)));
    }
}
