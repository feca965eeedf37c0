//! How a finished stream is told from a cut one: `[DONE]` for SSE, Ollama's `"done":true`
//! line for NDJSON, the event that ends a Response for Responses streams; each in constant
//! space, however the stream is chunked.

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
    pub(super) fn observe(&mut self, chunk: &[u8]) {
        match self {
            Tail::Sse(t) => t.observe(chunk),
            Tail::Ndjson(t) => t.observe(chunk),
            Tail::Events(t) => t.observe(chunk),
            Tail::Bytes => {}
        }
    }

    pub(super) fn finished(&self) -> bool {
        match self {
            Tail::Sse(t) => t.finished(),
            Tail::Ndjson(t) => t.finished(),
            Tail::Events(t) => t.finished(),
            Tail::Bytes => true,
        }
    }

    /// What an unfinished stream lacked, for the failure's detail.
    pub(super) fn missing(&self) -> &'static str {
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
pub(super) const TAIL: usize = 32;

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
