//! An Ollama request on the chain walk: sent natively to Ollama servers, translated for
//! machines that speak only OpenAI's API, and their answers translated back.

use axum::body::Bytes;
use axum::http::HeaderValue;
use tokio::time::Instant;

use super::translate::{self, Ndjson, Request, Timing};
use crate::breaker::Failure;
use crate::outcome::Wire;
use crate::proxy::Front;
use crate::registry::Api;
use crate::upstream::{Convert, DoneLine, DoneTail, Framing, Payload, Tail};

/// Ollama's stream content type.
const NDJSON: &str = "application/x-ndjson";

/// One Ollama client's request, as the walk sends it to each target.
pub struct Ollama {
    req: Request,
    /// The model as the client named it: translated answers carry it back.
    asked: String,
    /// `server.max_upstream_body`: bounds one SSE line and a call's collected arguments.
    max_line: usize,
}

impl Ollama {
    pub fn new(req: Request, asked: String, max_line: usize) -> Ollama {
        Ollama {
            req,
            asked,
            max_line,
        }
    }
}

impl Front for Ollama {
    fn request(&self, backend: &str, api: Api) -> (Wire, Payload) {
        match api {
            Api::Ollama => (Wire::Ollama(self.req.call), self.req.native(backend).into()),
            Api::OpenAi => {
                let (endpoint, body) = self.req.openai(backend);
                (Wire::OpenAi(endpoint), body.into())
            }
        }
    }

    fn embeds(&self) -> bool {
        self.req.call.embeds()
    }

    fn answer(
        &self,
        wire: Wire,
        body: Bytes,
        started: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String> {
        if let Wire::Ollama(_) = wire {
            return Ok((body, None));
        }
        let took = started.elapsed();
        let timing = Timing {
            total: took,
            first_token: took,
        };
        let answer = translate::answer(self.req.call, &body, &self.asked, timing)?;
        if self.req.stream {
            // A client that asked for a stream gets one line: a whole answer is a stream
            // of one.
            let mut line = Vec::with_capacity(answer.len() + 1);
            line.extend_from_slice(&answer);
            line.push(b'\n');
            return Ok((Bytes::from(line), Some(HeaderValue::from_static(NDJSON))));
        }
        Ok((answer, Some(HeaderValue::from_static("application/json"))))
    }

    fn framing(&self, wire: Wire, started: Instant) -> (Framing, Option<HeaderValue>) {
        match wire {
            Wire::Ollama(_) => (
                Framing {
                    tail: Tail::Ndjson(DoneLine::new()),
                    convert: None,
                    error: Some(error_line),
                    keep: None,
                },
                None,
            ),
            Wire::OpenAi(_) => (
                Framing {
                    tail: Tail::Sse(DoneTail::new()),
                    convert: Some(Box::new(Ndjson::new(
                        self.req.call,
                        self.asked.clone(),
                        started,
                        self.max_line,
                    ))),
                    error: Some(error_line),
                    keep: None,
                },
                Some(HeaderValue::from_static(NDJSON)),
            ),
        }
    }
}

impl Convert for Ndjson {
    fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        Ndjson::push_into(self, chunk, out)
    }
}

/// The NDJSON line that ends a broken stream: Ollama's `{"error": ...}`, never `done`.
fn error_line(target: &str, failure: &Failure) -> Bytes {
    translate::error_line(&format!("{target} failed mid-stream: {failure}"))
}
