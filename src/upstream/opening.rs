//! A stream's opening: its first chunk is what makes a streamed attempt served (and the
//! machine vouched for); a stream that ends, is cut, falls silent or opens with Ollama's
//! error line before then is the machine's failure, and the chain may still move on.

use super::hot::Reply;
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;

use super::alive::Chunk;
use super::{Attempt, Chunks, Upstream};
use crate::breaker::FailureKind;
use crate::machines::Lease;
use crate::outcome::{words, Attempted, Endpoint, Fault, Wire};

impl Upstream {
    /// The first chunk of a 2xx stream and the rest of its body, or why there is none.
    pub(super) async fn first_chunk(
        &self,
        at: &Attempt,
        wire: Wire,
        resp: hyper::Response<Reply>,
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
            // A Responses stream opens with a `response.*` event; anything else (an `error`
            // event, a JSON body sent as a stream) is no Response.
            Chunk::Data(first) if wire == Wire::OpenAi(Endpoint::Responses) => {
                match opens_response(&first) {
                    Ok(()) => {
                        lease.vouch();
                        Ok((first, rest))
                    }
                    Err(why) => Err(at.counted(
                        FailureKind::Malformed,
                        Fault::BadAnswer,
                        format!("malformed answer: {why}"),
                    )),
                }
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

/// Whether a stream's first bytes open a Responses stream: its first line an SSE comment, or
/// an `event:` or `data:` line naming a `response.*` event.
fn opens_response(first: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(&first[..first.len().min(256)]);
    let line = text.trim_start().lines().next().unwrap_or("");
    let shown = || crate::text::bounded(line);
    if line.starts_with(':') {
        return Ok(());
    }
    let name = if let Some(name) = line.strip_prefix("event:") {
        name.trim().to_string()
    } else if let Some(data) = line.strip_prefix("data:") {
        let v: serde_json::Value = match serde_json::from_str(data.trim()) {
            Ok(v) => v,
            // A long first event may be cut in this chunk: its type is read where it starts.
            Err(_) => {
                return typed_prefix(data)
                    .ok_or_else(|| format!("a stream that opens with '{}'", shown()))
            }
        };
        v["type"].as_str().unwrap_or_default().to_string()
    } else {
        return Err(format!(
            "a stream that is no SSE: it opens with '{}'",
            shown()
        ));
    };
    if name.starts_with("response.") {
        Ok(())
    } else {
        Err(format!(
            "a Responses stream that opens with event '{}'",
            crate::text::bounded(&name)
        ))
    }
}

/// `Ok` when a cut `data:` payload's `"type"` names a `response.*` event.
fn typed_prefix(data: &str) -> Option<()> {
    let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    let at = compact.find("\"type\":\"")?;
    compact[at + 8..].starts_with("response.").then_some(())
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
    use super::{error_line, opens_response};

    #[test]
    fn a_responses_stream_must_open_with_a_response_event() {
        assert!(opens_response(
            b"event: response.created\ndata: {\"type\":\"response.created\"}\n\n"
        )
        .is_ok());
        assert!(
            opens_response(b"data: {\"type\":\"response.created\",\"response\":{\"id\":\"r")
                .is_ok()
        );
        assert!(opens_response(b": keep-alive\n\n").is_ok());
        assert!(opens_response(b"event: error\ndata: {\"type\":\"error\"}\n\n").is_err());
        assert!(opens_response(b"data: {\"choices\":[]}\n\n").is_err());
        assert!(opens_response(b"{\"object\":\"response\"}").is_err());
    }

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
