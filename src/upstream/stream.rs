//! Relaying a stream after its first chunk: chunk by chunk as it arrives, never buffered.
//!
//! Once bytes reached the client there is nothing left to fail over (docs/api.md "Breaker
//! classification"): a cut or a hang mid-stream is recorded as a failure and the client gets an SSE
//! error event instead of a clean `[DONE]`. A client that goes away drops the relay, and with it
//! the lease, which counts as neither success nor failure.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{self, Stream};
use tokio::time::Instant;

use super::alive::Chunk;
use super::Upstream;
use crate::breaker::{Failure, FailureKind};
use crate::machines::Lease;
use crate::outcome::words;

struct Relay {
    first: Option<Bytes>,
    rest: super::Chunks,
    lease: Option<Lease>,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    framing: Framing,
}

/// How a stream's bytes reach the client: how its end is told, whether they are
/// translated on the way, and the event that ends it when it breaks.
pub struct Framing {
    /// What the machine's stream ends with when it finished.
    pub tail: Tail,
    /// The machine's bytes turned into the client's; `None`: passed on as they are.
    pub convert: Option<Box<dyn Convert>>,
    /// The last event of a stream that broke after reaching the client; `None` when the
    /// framing has no error event (audio bytes): the client's connection is cut instead.
    pub error: Option<fn(target: &str, failure: &Failure) -> Bytes>,
    /// What sees the stream's bytes go by and is told when it finished whole (a Response
    /// kept for its conversation); `None`: nothing is kept.
    pub keep: Option<Box<dyn Keep>>,
}

impl Framing {
    /// An OpenAI stream to an OpenAI client: SSE as it comes, ended by `[DONE]`.
    pub fn sse() -> Framing {
        Framing {
            tail: Tail::Sse(DoneTail::new()),
            convert: None,
            error: Some(error_event),
            keep: None,
        }
    }

    /// A Responses stream: typed SSE events as they come, ended by the event that finishes
    /// the Response (no `[DONE]`); a break after events reached the client is told with an
    /// `error` event, code `stream_cut`.
    pub fn responses(keep: Option<Box<dyn Keep>>) -> Framing {
        Framing {
            tail: Tail::Events(EventTail::new()),
            convert: None,
            error: Some(response_error_event),
            keep,
        }
    }
}

impl Framing {
    /// Bytes as they come (audio, a transcription's events): finished when the machine
    /// ends its body; a break after bytes reached the client cuts the client's connection
    /// (such a body has no error event, and a cut is what tells the client).
    pub fn bytes() -> Framing {
        Framing {
            tail: Tail::Bytes,
            convert: None,
            error: None,
            keep: None,
        }
    }
}

/// Sees a stream's bytes as they pass to the client, unchanged.
pub trait Keep: Send {
    fn observe(&mut self, chunk: &[u8]);
    /// The stream finished whole.
    fn finished(self: Box<Self>);
}

/// A stream translated on its way to the client, chunk by chunk.
pub trait Convert: Send {
    /// Appends to `out` the client's bytes for the machine's next bytes (split anywhere);
    /// nothing when they complete nothing yet. Err: the stream cannot be translated (said
    /// in plain words); `out` then holds what the bytes before the failure completed, which
    /// the client gets before the error event, however the stream was chunked.
    fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), String>;
}

/// How a finished stream is told from a cut one, by the framing the machine speaks.
#[derive(Clone, Debug)]
pub enum Tail {
    /// OpenAI's SSE: `data: [DONE]`.
    Sse(DoneTail),
    /// Ollama's NDJSON: a last line with `"done": true`.
    Ndjson(DoneLine),
    /// The Responses API's events: `response.completed`, `.incomplete` or `.failed`.
    Events(EventTail),
    /// No end marker: a body the machine ended is whole.
    Bytes,
}

impl Tail {
    fn observe(&mut self, chunk: &[u8]) {
        match self {
            Tail::Sse(t) => t.observe(chunk),
            Tail::Ndjson(t) => t.observe(chunk),
            Tail::Events(t) => t.observe(chunk),
            Tail::Bytes => {}
        }
    }

    fn finished(&self) -> bool {
        match self {
            Tail::Sse(t) => t.finished(),
            Tail::Ndjson(t) => t.finished(),
            Tail::Events(t) => t.finished(),
            Tail::Bytes => true,
        }
    }

    /// What an unfinished stream lacked, for the failure's detail.
    fn missing(&self) -> &'static str {
        match self {
            Tail::Sse(_) => "stream ended without [DONE]",
            Tail::Ndjson(_) => "stream ended without its \"done\": true line",
            Tail::Events(_) => "stream ended without response.completed",
            Tail::Bytes => "stream cut",
        }
    }
}

/// Whether an NDJSON stream's last line says `"done":true`, in constant space: each line
/// is scanned as it goes by, whitespace aside, for the key and its value among the bytes of
/// the line's own object. Inside a JSON string the quotes would be escaped, so text cannot
/// fake it; inside a nested object (a tool call's arguments) it does not count.
#[derive(Clone, Debug, Default)]
pub struct DoneLine {
    /// The current line's last non-blank bytes of its own object, oldest first.
    window: [u8; DONE.len()],
    len: usize,
    /// The current line has non-blank bytes / has said it is done.
    current: bool,
    current_done: bool,
    /// The last complete non-blank line said it is done.
    last_done: bool,
    /// Where the current line's scan is: how deep in objects and arrays, inside a string,
    /// right after a backslash in one.
    depth: usize,
    string: bool,
    escaped: bool,
}

/// What a finished Ollama stream's last line holds, whitespace removed.
const DONE: &[u8] = b"\"done\":true";

impl DoneLine {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn observe(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                if self.current {
                    self.last_done = self.current_done;
                }
                *self = DoneLine {
                    last_done: self.last_done,
                    ..DoneLine::default()
                };
                continue;
            }
            if b.is_ascii_whitespace() {
                continue;
            }
            self.current = true;
            let outer = self.depth == 1;
            self.scan(b);
            if !(outer && self.depth == 1) {
                // Not the line's own object: its opening, its end, or something nested.
                self.len = 0;
                continue;
            }
            if self.len == DONE.len() {
                self.window.copy_within(1.., 0);
                self.len -= 1;
            }
            self.window[self.len] = b;
            self.len += 1;
            if self.window[..self.len] == *DONE {
                self.current_done = true;
            }
        }
    }

    /// Follows strings, objects and arrays through one non-blank byte.
    fn scan(&mut self, b: u8) {
        if self.string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.string = false,
                _ => {}
            }
            return;
        }
        match b {
            b'"' => self.string = true,
            b'{' | b'[' => self.depth = self.depth.saturating_add(1),
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }

    /// Whether the last non-blank line said `"done": true`.
    pub fn finished(&self) -> bool {
        if self.current {
            self.current_done
        } else {
            self.last_done
        }
    }
}

/// How many of a stream's last bytes [`DoneTail`] keeps.
const TAIL: usize = 32;

/// The end of a stream as it went by, to tell a finished one (`data: [DONE]`) from a cut
/// one. Chunk boundaries don't matter: after any split of the same bytes, [`finished`]
/// gives the same answer as for the whole stream seen at once.
///
/// [`finished`]: DoneTail::finished
#[derive(Clone, Debug, Default)]
pub struct DoneTail {
    /// The stream's last `len` bytes (at most [`TAIL`]), oldest first.
    buf: [u8; TAIL],
    len: usize,
}

impl DoneTail {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in the next chunk of the stream; an empty chunk changes nothing.
    pub fn observe(&mut self, chunk: &[u8]) {
        let keep = &chunk[chunk.len().saturating_sub(TAIL)..];
        // Old bytes that still fit before `keep`, moved to the front, then `keep`.
        let old = self.len.min(TAIL - keep.len());
        self.buf.copy_within(self.len - old..self.len, 0);
        self.buf[old..old + keep.len()].copy_from_slice(keep);
        self.len = old + keep.len();
    }

    /// Whether `[DONE]` is among the stream's last bytes.
    pub fn finished(&self) -> bool {
        self.buf[..self.len].windows(6).any(|w| w == b"[DONE]")
    }
}

/// The client's body for a stream whose first chunk is `first`.
pub fn relay(
    first: Bytes,
    rest: super::Chunks,
    lease: Lease,
    upstream: Arc<Upstream>,
    deadline: Instant,
    target: String,
    framing: Framing,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let deadline = deadline.min(crate::clock::from_now(upstream.timeouts.total));
    let relay = Relay {
        first: Some(first),
        rest,
        lease: Some(lease),
        upstream,
        deadline,
        target,
        framing,
    };
    stream::unfold(relay, |mut r| async move {
        let lease = r.lease.take()?;
        // What a chunk that broke the conversion completed before it broke.
        let mut before = Vec::new();
        let failure = loop {
            let chunk = match r.first.take() {
                Some(b) => Chunk::Data(b),
                None => r.upstream.next_chunk(&mut r.rest, r.deadline, &lease).await,
            };
            let b = match chunk {
                Chunk::Data(b) => b,
                Chunk::End if r.framing.tail.finished() => {
                    lease.succeed();
                    if let Some(keep) = r.framing.keep.take() {
                        keep.finished();
                    }
                    return None;
                }
                other => break ended(other, &r.upstream, &r.framing.tail),
            };
            r.framing.tail.observe(&b);
            if let Some(keep) = r.framing.keep.as_mut() {
                keep.observe(&b);
            }
            let out = match r.framing.convert.as_mut() {
                None => Ok(b),
                Some(c) => c
                    .push(&b, &mut before)
                    .map(|()| Bytes::from(std::mem::take(&mut before))),
            };
            match out {
                // Nothing for the client yet: read on.
                Ok(out) if out.is_empty() => continue,
                Ok(out) => {
                    r.lease = Some(lease);
                    return Some((Ok(out), r));
                }
                Err(why) => {
                    break Failure::new(FailureKind::Malformed, format!("stream unusable: {why}"))
                }
            }
        };
        tracing::warn!(target_model = %r.target, reason = %failure, "stream broke after reaching the client");
        let Some(error) = r.framing.error else {
            // No error event: the client learns of the break by the cut.
            let cut = std::io::Error::other(failure.to_string());
            lease.fail(failure);
            return Some((Err(cut), r));
        };
        before.extend_from_slice(&error(&r.target, &failure));
        lease.fail(failure);
        Some((Ok(Bytes::from(before)), r))
    })
}

/// Why a stream that reached the client did not finish: its next read was not data.
fn ended(chunk: Chunk, upstream: &Upstream, tail: &Tail) -> Failure {
    match chunk {
        Chunk::Data(_) | Chunk::End => Failure::new(FailureKind::StreamCut, tail.missing()),
        Chunk::Cut(detail) => Failure::new(FailureKind::StreamCut, format!("stream cut: {detail}")),
        Chunk::Hung => Failure::new(
            FailureKind::StreamHung,
            format!(
                "stream silent for {} (liveness check failed)",
                words(upstream.timeouts.idle)
            ),
        ),
        Chunk::Deadline => Failure::new(
            FailureKind::Timeout,
            "stream did not finish before its deadline",
        ),
    }
}

/// The SSE event that ends a broken stream: OpenAI's error envelope, never `[DONE]`.
pub fn error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({"error": {
        "type": crate::outcome::Unserved::BadGateway.kind(),
        "code": failure.kind.as_str(),
        "message": format!("{target} failed mid-stream: {failure}"),
        "target": target,
    }});
    Bytes::from(format!("data: {body}\n\n"))
}

/// The event that ends a broken Responses stream: `event: error` with code `stream_cut`
/// (a hang or a deadline is a cut too, to the client: the stream stopped short).
pub fn response_error_event(target: &str, failure: &Failure) -> Bytes {
    let body = serde_json::json!({
        "type": "error",
        "code": "stream_cut",
        "message": format!("{target} failed mid-stream: {failure}"),
        "param": null,
    });
    Bytes::from(format!("event: error\ndata: {body}\n\n"))
}

/// How many bytes of each line an [`EventTail`] looks at: an event's name, or its data's
/// `"type"`, comes first.
const EVENT_HEAD: usize = 96;

/// Whether a Responses stream finished: an event that ends the Response went by — named by
/// its `event:` line or by the `"type"` at the start of its `data:` line — in constant
/// space, however the stream is chunked.
#[derive(Clone, Debug, Default)]
pub struct EventTail {
    /// The current line's first bytes.
    head: Vec<u8>,
    finished: bool,
}

impl EventTail {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn observe(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                self.line_ended();
                continue;
            }
            if self.head.len() < EVENT_HEAD {
                self.head.push(b);
            }
        }
    }

    fn line_ended(&mut self) {
        let line = std::mem::take(&mut self.head);
        let ends = |name: &[u8]| {
            [
                &b"response.completed"[..],
                b"response.incomplete",
                b"response.failed",
            ]
            .iter()
            .any(|end| name.starts_with(end))
        };
        if let Some(name) = line.strip_prefix(b"event:") {
            let name = name.trim_ascii_start();
            if ends(name) {
                self.finished = true;
            }
        } else if let Some(data) = line.strip_prefix(b"data:") {
            let data: Vec<u8> = data
                .iter()
                .copied()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            if let Some(at) = data.windows(8).position(|w| w == b"\"type\":\"") {
                if ends(&data[at + 8..]) {
                    self.finished = true;
                }
            }
        }
        self.head = line;
        self.head.clear();
    }

    pub fn finished(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> bool {
        let mut t = EventTail::new();
        for c in chunks {
            t.observe(c);
        }
        t.finished()
    }

    #[test]
    fn a_responses_stream_is_finished_by_the_event_that_ends_the_response() {
        let done = b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{}}\n\n";
        assert!(events(&[b"event: response.created\ndata: {}\n\n", done]));
        // Split anywhere.
        for cut in 1..done.len() {
            assert!(events(&[&done[..cut], &done[cut..]]), "split at {cut}");
        }
        // Named by its data alone (no event: lines), or incomplete, or failed.
        assert!(events(&[b"data: {\"type\": \"response.incomplete\"}\n\n"]));
        assert!(events(&[b"event: response.failed\n"]));
        // Deltas, or a text that says the words, do not finish it.
        assert!(!events(&[b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"response.completed\"}\n\n"]));
        assert!(!events(&[b"data: {\"type\":\"response.created\"}\n\n"]));
        assert!(!events(&[]));
    }

    fn finished(chunks: &[&[u8]]) -> bool {
        let mut t = DoneTail::new();
        for c in chunks {
            t.observe(c);
        }
        t.finished()
    }

    fn done_line(chunks: &[&[u8]]) -> bool {
        let mut t = DoneLine::new();
        for c in chunks {
            t.observe(c);
        }
        t.finished()
    }

    #[test]
    fn an_ndjson_stream_is_done_when_its_last_line_says_so() {
        let last = br#"{"model":"m","done":true,"done_reason":"stop","eval_count":3}"#;
        assert!(done_line(&[b"{\"done\":false}\n", last, b"\n"]));
        assert!(
            done_line(&[b"{\"done\":false}\n", last]),
            "no newline after it"
        );
        assert!(done_line(&[b"{\"do", b"ne\": ", b"tr", b"ue}\n\n  \n"]));
        // A done line followed by anything else (an error line) is not done.
        assert!(!done_line(&[last, b"\n{\"error\":\"boom\"}\n"]));
        assert!(!done_line(&[b"{\"done\":false}\n{\"done\":tr"]));
        // Text cannot fake it: inside a string the quotes are escaped.
        assert!(!done_line(&[
            br#"{"response":"\"done\":true","done":false}"#
        ]));
        assert!(!done_line(&[]));
    }

    #[test]
    fn a_last_line_done_at_its_top_level_finishes_an_ndjson_stream() {
        assert!(done_line(&[
            b"{\"response\":\"a\"}\n{\"done\": ",
            b"true, \"x\":1}\n\n"
        ]));
        assert!(done_line(&[
            b"{\"message\":{\"content\":\"}{\"},\"done\":true}"
        ]));
        assert!(!done_line(&[b"{\"done\":true}\n{\"done\":false}\n"]));
        assert!(!done_line(&[b"{\"response\":\"\\\"done\\\":true\"}\n"]));
        assert!(!done_line(&[]));
    }

    /// Found by tests/fuzz.rs: `{"done": true}` as a tool call's arguments, on a line that
    /// says `"done": false`, was read as a finished stream.
    #[test]
    fn a_tool_calls_arguments_done_true_do_not_finish_a_stream() {
        let line = br#"{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"done":true}}}]},"done":false}"#;
        assert!(!done_line(&[line, b"\n"]));
        assert!(!done_line(&[&line[..60], &line[60..]]));
        let last = br#"{"message":{"tool_calls":[{"function":{"arguments":{"done":false}}}]},"done":true}"#;
        assert!(done_line(&[line, b"\n", last]));
    }

    #[test]
    fn done_split_across_chunks_still_counts() {
        assert!(finished(&[b"data: {}\n\ndata: [DO", b"", b"NE]\n\n"]));
        assert!(finished(&[b"data: [", b"D", b"O", b"N", b"E", b"]"]));
        assert!(!finished(&[b"data: [DONE]", &[b'x'; TAIL]]));
        assert!(!finished(&[b"data: {\"cut\": tr", b"ue}"]));
        assert!(!finished(&[]));
    }
}
