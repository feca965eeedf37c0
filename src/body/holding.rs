//! A response body that holds something until it is done: a request counted as in flight,
//! an upload's slot. It passes on the body's frames, its end and its size hint, so an answer
//! of known length still goes out with its Content-Length.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use hyper::body::{Frame, SizeHint};

pub struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T> Holding<T> {
    /// `body`, holding `held` until it is dropped.
    pub fn new(body: Body, held: T) -> Holding<T> {
        Holding { body, _held: held }
    }
}

impl<T: Unpin> hyper::body::Body for Holding<T> {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
