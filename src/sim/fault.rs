//! The fault vocabulary: every way a simulated machine can misbehave.

use std::time::Duration;

/// How the simulated machine misbehaves; switch it at any time with [`Sim::set`].
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
    /// including /v1/models).
    Hang,
    /// Read the request (count it), then reset the TCP connection, no response bytes.
    Reset,
    /// Answer every work request with this HTTP status and an OpenAI-style JSON error body;
    /// `retry_after` (if Some) is sent verbatim as Retry-After. /v1/models still answers 200.
    Status {
        code: u16,
        retry_after: Option<String>,
    },
    /// 200 with content-type application/json whose body is not JSON, for work requests.
    Malformed,
    /// Normal answer, but response headers are delayed by this long (a slow generation);
    /// /v1/models answers at once: the machine is alive.
    SlowFirstByte(Duration),
    /// Streams: send each SSE content chunk with this delay before it (the first chunk too);
    /// non-stream answers normally. /v1/models answers at once.
    Drip(Duration),
    /// Streams: send headers and N chunks, then cut the connection with a TCP reset (no [DONE],
    /// no chunked terminator). N = 0 cuts before any body byte. Non-stream: headers then cut.
    CutAfter(usize),
    /// Streams: send headers and N chunks, then go silent forever with the connection open;
    /// meanwhile the whole machine is frozen (/v1/models hangs too). Non-stream: like Hang.
    StallAfter(usize),
    /// 200 application/json whose body is this many bytes (never fewer than the opening and the
    /// end), sent in 64 KiB frames and never built whole: a valid completion's opening, then
    /// spaces, then its end.
    Huge(usize),
}
