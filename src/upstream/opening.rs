//! A stream's opening: its first chunk is what makes a streamed attempt served (and the
//! machine vouched for); a stream that ends, is cut, falls silent or opens with Ollama's
//! error line before then is the machine's failure, and the chain may still move on.

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::alive::Chunk;
use super::{Attempt, Chunks, Upstream};
use crate::breaker::FailureKind;
use crate::machines::Lease;
use crate::outcome::{words, Attempted, Fault, Wire};

impl Upstream {
    /// The first chunk of a 2xx stream and the rest of its body, or why there is none.
    pub(super) async fn first_chunk(
        &self,
        at: &Attempt,
        wire: Wire,
        resp: hyper::Response<Incoming>,
        lease: &Lease,
    ) -> Result<(Bytes, Chunks), Attempted> {
        let mut rest: Chunks = resp.into_body().into_data_stream().boxed();
        let cut = |detail: String| at.counted(FailureKind::StreamCut, Fault::BadAnswer, detail);
        match self.next_chunk(&mut rest, at.deadline, lease).await {
            // Ollama says a failure before its first token as an `{"error": ...}` line.
            Chunk::Data(first) if matches!(wire, Wire::Ollama(_)) && error_line(&first) => {
                Err(cut(format!(
                    "stream's first line is an error: {}",
                    crate::text::bounded(&String::from_utf8_lossy(&first))
                )))
            }
            Chunk::Data(first) => {
                lease.vouch();
                Ok((first, rest))
            }
            Chunk::End => Err(cut("stream ended before its first chunk".into())),
            Chunk::Cut(detail) => Err(cut(format!("stream cut before its first chunk: {detail}"))),
            Chunk::Hung => Err(at.counted(
                FailureKind::StreamHung,
                Fault::BadAnswer,
                format!(
                    "stream silent for {} (liveness check failed)",
                    words(self.timeouts.idle)
                ),
            )),
            Chunk::Deadline => Err(at.past_deadline()),
        }
    }
}

/// Whether a stream's first bytes are Ollama's `{"error": ...}` line.
fn error_line(first: &[u8]) -> bool {
    let start = first
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(first.len());
    let line = &first[start..];
    line.starts_with(b"{\"error\"")
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn an_ollama_stream_that_opens_with_an_error_is_told() {
        assert!(error_line(b"{\"error\":\"model failed to load\"}\n"));
        assert!(error_line(b"\n  {\"error\": \"x\"}"));
        assert!(!error_line(
            b"{\"model\":\"m\",\"message\":{\"content\":\"{\\\"error\\\"\"}}"
        ));
        assert!(!error_line(b""));
    }
}
