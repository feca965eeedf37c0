//! The fault vocabulary: every way a simulated machine can misbehave.

use std::time::Duration;

/// How the simulated machine misbehaves; switch it at any time with [`Sim::set`].
///
/// Work routes are OpenAI's (/v1/chat/completions, /v1/completions, /v1/embeddings,
/// /v1/responses, the images, audio and rerank routes) and, on an Ollama sim, Ollama's
/// (/api/chat, /api/generate, /api/embed, /api/embeddings). Metadata
/// routes (/v1/models; Ollama's /api/tags, /api/ps, /api/version, /api/show and `/`) only
/// freeze (Hang, StallAfter) or reset (Reset, Refuse); every other fault spares them.
/// A stream frame is an SSE chunk on OpenAI's routes (one event of a Responses stream or
/// of a streamed transcript), an NDJSON line on Ollama's; speech streams its WAV header,
/// then one frame per chunk of samples.
///
/// [`Sim::set`]: super::Sim::set
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer normally.
    Ok,
    /// Nothing listens: the listener is closed (connection refused) and every open connection is
    /// dropped with a TCP reset. Switching back to any other fault rebinds the same port.
    Refuse,
    /// Hard freeze: accept connections and read requests, never answer anything (every path,
    /// metadata routes included).
    Hang,
    /// Read the request (count it), then reset the TCP connection, no response bytes.
    Reset,
    /// Answer every work request with this HTTP status and a JSON error body shaped like its
    /// API's (OpenAI's; `{"error":"..."}` on Ollama's routes); `retry_after` (if Some) is sent
    /// verbatim as Retry-After. Metadata routes still answer 200.
    Status {
        code: u16,
        retry_after: Option<String>,
    },
    /// 200 with content-type application/json whose body is not JSON (so not a completion
    /// nor a Response), for work requests.
    Malformed,
    /// Normal answer, but response headers are delayed by this long (a slow generation);
    /// metadata routes answer at once: the machine is alive.
    SlowFirstByte(Duration),
    /// Streams: send each frame with this delay before it (the first too; on OpenAI's routes
    /// not `[DONE]`, on Ollama's the final done line too); non-stream answers normally.
    /// Metadata routes answer at once.
    Drip(Duration),
    /// Streams: send headers and N frames, then cut the connection with a TCP reset (no `[DONE]`
    /// or done line, no chunked terminator). N = 0 cuts before any body byte. Non-stream:
    /// headers then cut.
    CutAfter(usize),
    /// Streams: send headers and N frames, then go silent forever with the connection open;
    /// meanwhile the whole machine is frozen (metadata routes hang too). Non-stream: like Hang.
    StallAfter(usize),
    /// 200 application/json whose body is this many bytes (never fewer than the opening and the
    /// end), sent in 64 KiB frames and never built whole: a valid answer's opening (a chat
    /// completion; a Response on /v1/responses; an image, a transcript or rerank results on
    /// theirs; on Ollama's routes that route's own answer), then spaces, then its end.
    /// Speech answers a WAV of this many bytes instead.
    Huge(usize),
}
