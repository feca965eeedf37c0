//! What one attempt sends a machine: a JSON body (one piece), or a held upload sent as the
//! pieces it was cut into around its rewritten `model` — the upload's bytes are shared,
//! never copied, however many machines of the chain are sent it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::HeaderValue;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// A request body and its content type.
#[derive(Debug)]
pub struct Payload {
    pieces: VecDeque<Bytes>,
    len: u64,
    content_type: HeaderValue,
}

impl Payload {
    /// A JSON body.
    pub fn json(body: Bytes) -> Payload {
        Payload::of(vec![body], HeaderValue::from_static("application/json"))
    }

    /// A body of `pieces`, sent one after the other, as `content_type`.
    pub fn of(pieces: Vec<Bytes>, content_type: HeaderValue) -> Payload {
        let len = pieces.iter().map(|p| p.len() as u64).sum();
        Payload {
            pieces: pieces.into_iter().filter(|p| !p.is_empty()).collect(),
            len,
            content_type,
        }
    }

    pub fn content_type(&self) -> &HeaderValue {
        &self.content_type
    }

    /// The whole body in one piece (a copy when it has several): for tests and logs.
    pub fn to_bytes(&self) -> Bytes {
        match self.pieces.len() {
            0 => Bytes::new(),
            1 => self.pieces[0].clone(),
            _ => Bytes::from(
                self.pieces
                    .iter()
                    .flat_map(|p| p.iter().copied())
                    .collect::<Vec<u8>>(),
            ),
        }
    }
}

impl From<Bytes> for Payload {
    fn from(body: Bytes) -> Payload {
        Payload::json(body)
    }
}

impl Body for Payload {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.pieces.pop_front().map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}
