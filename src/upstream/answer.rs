//! Whole answers: a 2xx body read within `server.max_upstream_body` and the attempt's
//! deadline, then checked to be a valid completion; and a non-2xx answer classified, its
//! body read to be passed back when the client's request was at fault.

use super::hot::Reply;
use bytes::Bytes;
use http_body_util::BodyExt;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use tokio::time::Instant;

use super::{classify, Answer, Attempt, Upstream};
use crate::body::Unread;
use crate::breaker::FailureKind;
use crate::outcome::{Attempted, Fault, ModelId, Wire};

impl Upstream {
    /// A 2xx answer's whole body, or why the machine failed to give a valid one.
    pub(super) async fn whole(
        &self,
        at: &Attempt,
        wire: Wire,
        resp: hyper::Response<Reply>,
    ) -> Result<Bytes, Attempted> {
        let body = match tokio::time::timeout_at(at.deadline, self.read_whole(resp)).await {
            Ok(Ok(body)) => body,
            Ok(Err(Unread::TooLarge)) => {
                let detail = format!(
                    "malformed answer: larger than server.max_upstream_body ({} bytes)",
                    self.max_body
                );
                return Err(at.counted(FailureKind::Malformed, Fault::BadAnswer, detail));
            }
            Ok(Err(Unread::Broken(e))) => {
                let detail = format!("answer cut while reading: {}", classify::root(&e));
                return Err(at.counted(FailureKind::Reset, Fault::BadAnswer, detail));
            }
            // No idle bound is asked of the reader: only the deadline stops a silent answer.
            Ok(Err(Unread::Stalled)) | Err(_) => return Err(at.past_deadline()),
        };
        if let Err(why) = classify::valid_answer(wire, &body) {
            let detail = format!("malformed answer: {why}");
            return Err(at.counted(FailureKind::Malformed, Fault::BadAnswer, detail));
        }
        Ok(body)
    }

    /// A non-2xx answer, classified (`classify::refusal`: whose fault, what the breaker
    /// records); a client error's answer is read to be passed back.
    pub(super) async fn refusal(
        &self,
        target: ModelId,
        resp: hyper::Response<Reply>,
        deadline: Instant,
    ) -> Result<Answer, Attempted> {
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(classify::retry_after);
        let attempted = classify::refusal(target, status.as_u16(), retry_after, deadline);
        match attempted.reason {
            crate::outcome::Reason::NotFound => {
                tracing::warn!(machine = %self.name, "HTTP 404: the model is not on this machine; check registry.yaml")
            }
            crate::outcome::Reason::Unsupported => {
                tracing::warn!(machine = %self.name, status = status.as_u16(), "the machine does not serve this endpoint; check registry.yaml")
            }
            _ => {}
        }
        if attempted.fault != Fault::Client {
            return Err(attempted);
        }
        let content_type = resp.headers().get(CONTENT_TYPE).cloned();
        let body = tokio::time::timeout_at(deadline, self.read_whole(resp))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Ok(Answer::Refused {
            status,
            content_type,
            body,
            attempted,
        })
    }

    /// A whole answer, read up to `server.max_upstream_body` and never further; the caller's
    /// deadline bounds the time.
    async fn read_whole(
        &self,
        resp: hyper::Response<Reply>,
    ) -> Result<Bytes, Unread<hyper::Error>> {
        let declared = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let frames = resp.into_body().into_data_stream();
        crate::body::collect(frames, declared, self.max_body, None).await
    }
}
