//! Waiting on a machine without taking slow for dead: while an answer is pending, each
//! stretch of silence asks the machine whether it is alive; one that answers is slow (and
//! vouched for), one that does not is hung. Used for an attempt's headers (sent here) and
//! for each chunk of a stream.

use std::time::Duration;

use super::hot::Reply;
use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use tokio::time::Instant;

use super::{classify, Attempt, Chunks, Payload, Upstream};
use crate::breaker::FailureKind;
use crate::machines::Lease;
use crate::outcome::{words, Attempted, Fault, Wire};

/// How the wait for a stream's next chunk ended.
pub(super) enum Chunk {
    Data(Bytes),
    End,
    Cut(String),
    Hung,
    Deadline,
}

/// How a wait ended.
pub(super) enum Waited<T> {
    Done(T),
    /// The liveness check failed while the answer was pending.
    Hung,
    Deadline,
}

impl Upstream {
    /// Sends `body` to `wire`'s endpoint and waits for the response headers, at most
    /// `first_byte` of silence at a time and never past the attempt's deadline.
    pub(super) async fn headers(
        &self,
        at: &Attempt,
        wire: Wire,
        body: Payload,
        lease: &Lease,
    ) -> Result<hyper::Response<Reply>, Attempted> {
        let content_type = body.content_type().clone();
        let mut req = hyper::Request::new(body);
        *req.method_mut() = hyper::Method::POST;
        *req.uri_mut() = self.url(wire).clone();
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, content_type);
        if let Some(auth) = &self.auth {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        let send = self.hot.request(req);
        match self
            .wait_alive(send, self.timeouts.first_byte, at.deadline, lease)
            .await
        {
            Waited::Done(Ok(resp)) => Ok(resp),
            Waited::Done(Err(e)) => {
                let f = classify::send_error(&e, e.is_connect(), false, self.timeouts.connect);
                Err(at.counted(f.kind, Fault::Unreachable, f.detail))
            }
            Waited::Hung => {
                let detail = format!(
                    "timeout after {} (liveness check failed)",
                    words(self.timeouts.first_byte)
                );
                Err(at.counted(FailureKind::Hung, Fault::Unreachable, detail))
            }
            Waited::Deadline => Err(at.past_deadline()),
        }
    }

    /// Waits for `fut`; each `every` of silence, asks the machine whether it is alive. A
    /// machine that answers is slow, not dead: that vouches for `lease`.
    pub(super) async fn wait_alive<F: std::future::Future>(
        &self,
        fut: F,
        every: Duration,
        deadline: Instant,
        lease: &Lease,
    ) -> Waited<F::Output> {
        tokio::pin!(fut);
        loop {
            let check_at = crate::clock::from_now(every).min(deadline);
            // The answer first: one already there registers no timer.
            tokio::select! {
                biased;
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

    /// The stream's next non-empty chunk, waiting at most `idle` of silence at a time.
    pub(super) async fn next_chunk(
        &self,
        rest: &mut Chunks,
        deadline: Instant,
        lease: &Lease,
    ) -> Chunk {
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
