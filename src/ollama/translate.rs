//! Ollama requests read and translated to OpenAI's; OpenAI answers translated back. Pure:
//! no HTTP, no I/O.
//!
//! - [`Request`]: an Ollama body read and checked once; [`Request::native`] for an Ollama
//!   machine, [`Request::openai`] for one that speaks only OpenAI's API.
//! - [`answer()`]: an OpenAI whole answer as Ollama's.
//! - [`Ndjson`]: an OpenAI SSE stream as Ollama's NDJSON, chunk by chunk.
//! - [`error_line`]: the last line of a stream that broke.
//! - [`Load`], [`loaded`]: Ollama's load and unload calls, and its answer to them.

use std::time::Duration;

use bytes::Bytes;

mod answer;
mod line;
mod load;
mod request;
mod stream;

pub use answer::answer;
pub use load::{loaded, Load};
pub use request::Request;
pub use stream::Ndjson;

/// Times a translated answer reports (Ollama gives durations in nanoseconds).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// From the request's arrival to the end of the answer.
    pub total: Duration,
    /// From the request's arrival to the first token (Ollama's prompt evaluation).
    pub first_token: Duration,
}

/// The last NDJSON line of a stream that broke after reaching the client: `{"error":"..."}\n`.
pub fn error_line(message: &str) -> Bytes {
    let mut out = serde_json::json!({ "error": message }).to_string();
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_is_one_escaped_object_and_a_newline() {
        assert_eq!(
            &error_line("upstream said \"no\"\n")[..],
            b"{\"error\":\"upstream said \\\"no\\\"\\n\"}\n"
        );
    }
}
