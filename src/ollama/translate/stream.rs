//! An OpenAI SSE stream as Ollama's NDJSON stream, chunk by chunk, within bounds.

use std::collections::BTreeMap;
use std::time::SystemTime;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::line::{self, Line, Metrics, Usage};
use super::Timing;
use crate::clock::Instant;
use crate::ollama::Call;

#[cfg(test)]
mod tests;

/// What one collected tool call costs besides its name and arguments, so that many empty
/// calls are bounded too.
const CALL_OVERHEAD: usize = 64;

/// SSE (OpenAI stream) -> NDJSON (Ollama stream), chunk by chunk.
pub struct Ndjson {
    /// Chat or Generate: which shape the lines take.
    call: Call,
    /// The name the client asked for, as sent.
    model: String,
    /// When the request arrived.
    started: Instant,
    /// The most bytes of one SSE line, of one event's data, and of the collected tool calls.
    max_line: usize,
    /// The unfinished SSE line so far.
    partial: Vec<u8>,
    /// The data of an event whose first `data:` line did not parse alone (a multi-line
    /// event), dispatched at the blank line that ends it.
    event: Vec<u8>,
    /// When the first content, reasoning or tool-call delta arrived.
    first: Option<Instant>,
    /// Choice 0's `finish_reason`, once sent.
    finish: Option<String>,
    /// The counts of the last `usage` seen (the include_usage chunk).
    usage: Usage,
    /// Tool calls collected per OpenAI `index`: id, name and argument fragments.
    tools: BTreeMap<u64, Collected>,
    /// What `tools` holds, in bytes (with [`CALL_OVERHEAD`] per call).
    tool_bytes: usize,
    /// Why the stream became unusable; every later push says it again.
    failed: Option<String>,
    /// Whether the last line has been produced.
    done: bool,
    /// The wall clock `created_at` reads (fixed in tests).
    wall: fn() -> SystemTime,
}

/// One tool call collected from its fragments.
#[derive(Default)]
struct Collected {
    id: String,
    name: String,
    arguments: String,
}

/// One complete SSE event's data.
enum Event {
    /// `data: [DONE]`
    Done,
    /// Any JSON: an OpenAI chunk when it is an object, ignored otherwise.
    Json(Value),
}

impl Ndjson {
    /// `call` is Chat or Generate; `model` as the client sent it; `started` when the request
    /// arrived (tokio's clock, so paused-clock tests work); `max_line` bounds any one SSE
    /// line and the collected tool-call arguments (bytes), so no upstream can grow memory
    /// without bound.
    pub fn new(call: Call, model: String, started: Instant, max_line: usize) -> Ndjson {
        Ndjson {
            call,
            model,
            started,
            max_line,
            partial: Vec::new(),
            event: Vec::new(),
            first: None,
            finish: None,
            usage: Usage::default(),
            tools: BTreeMap::new(),
            tool_bytes: 0,
            failed: None,
            done: false,
            wall: SystemTime::now,
        }
    }

    /// Takes the next bytes of the upstream SSE body, split anywhere (mid-line, mid-UTF-8);
    /// returns the NDJSON lines they complete, each ending "\n" (empty if none yet). Each
    /// OpenAI content chunk becomes one NDJSON line as soon as its `data:` line is
    /// complete. Err(message) when the stream is unusable (a line longer than `max_line`,
    /// an OpenAI error event `data: {"error":...}`, data that is not JSON); the caller then
    /// ends the client's stream with [`super::error_line`]. Bytes after `[DONE]` are ignored.
    /// On Err the lines `chunk` completed before the failure are lost: [`Ndjson::push_into`]
    /// keeps them.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Bytes, String> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out)?;
        Ok(Bytes::from(out))
    }

    /// [`Ndjson::push`], appending the lines to `out`; on Err too, so that the client gets
    /// what came before the failure whatever the chunking: a content line and an error
    /// event in one chunk give the same lines as in two.
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let result = self.lines(chunk, out);
        if let Err(why) = &result {
            self.failed = Some(why.clone());
        }
        result
    }

    /// Whether the final `done: true` line has been produced (after `data: [DONE]`).
    pub fn done(&self) -> bool {
        self.done
    }

    /// Splits `chunk` into lines, each handled as soon as it is complete.
    fn lines(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let mut rest = chunk;
        while !self.done {
            let Some(nl) = rest.iter().position(|&c| c == b'\n') else {
                self.fits(self.partial.len(), rest.len())?;
                self.partial.extend_from_slice(rest);
                break;
            };
            let (head, tail) = rest.split_at(nl);
            rest = tail.get(1..).unwrap_or_default();
            self.fits(self.partial.len(), head.len())?;
            if self.partial.is_empty() {
                self.line(head, out)?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line, out)?;
            }
        }
        Ok(())
    }

    /// Err when `have + more` bytes would exceed `max_line`.
    fn fits(&self, have: usize, more: usize) -> Result<(), String> {
        if have.saturating_add(more) > self.max_line {
            return Err(format!(
                "the machine's stream sent a line longer than {} bytes",
                self.max_line
            ));
        }
        Ok(())
    }

    /// One SSE line, without its "\n": `data:` is read; a blank line ends a multi-line
    /// event; comments (`:`), `event:`, `id:`, `retry:` and anything else are ignored.
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.event.is_empty() {
                return Ok(());
            }
            let data = std::mem::take(&mut self.event);
            let event = parse(&data).ok_or_else(|| not_json(&data))?;
            return self.dispatch(event, out);
        }
        let Some(data) = line.strip_prefix(b"data:") else {
            return Ok(());
        };
        let data = data.strip_prefix(b" ").unwrap_or(data);
        if self.event.is_empty() {
            if data.trim_ascii().is_empty() {
                return Ok(());
            }
            if let Some(event) = parse(data) {
                return self.dispatch(event, out);
            }
        } else {
            self.fits(self.event.len(), data.len().saturating_add(1))?;
            self.event.push(b'\n');
        }
        self.event.extend_from_slice(data);
        Ok(())
    }

    /// One complete event.
    fn dispatch(&mut self, event: Event, out: &mut Vec<u8>) -> Result<(), String> {
        match event {
            Event::Done => {
                self.finish(out);
                Ok(())
            }
            Event::Json(Value::Object(chunk)) => self.chunk(&chunk, out),
            Event::Json(_) => Ok(()),
        }
    }

    /// One OpenAI chunk: an error, `usage`, and choice 0's delta.
    fn chunk(&mut self, chunk: &Map<String, Value>, out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error.get("message").and_then(Value::as_str);
            let message = message.or(error.as_str()).map(str::to_string);
            let message = message.unwrap_or_else(|| error.to_string());
            return Err(format!(
                "the machine's stream failed: {}",
                crate::text::bounded(&message)
            ));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let read = Usage::read(Some(usage));
            self.usage.prompt = read.prompt.or(self.usage.prompt);
            self.usage.completion = read.completion.or(self.usage.completion);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        let first = choices
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        match first {
            Some(choice) => self.choice(choice, out),
            None => Ok(()),
        }
    }

    /// Choice 0 of a chunk: content and reasoning at once, tool-call fragments collected,
    /// the finish reason remembered (and the collected tool calls sent with it).
    fn choice(&mut self, choice: &Map<String, Value>, out: &mut Vec<u8>) -> Result<(), String> {
        let delta = choice.get("delta").and_then(Value::as_object);
        let content = match delta {
            Some(d) => d.get("content").and_then(Value::as_str),
            // A text completion (generate via /completions).
            None => choice.get("text").and_then(Value::as_str),
        };
        let content = content.unwrap_or_default();
        let thinking = delta.and_then(line::reasoning);
        let logprobs = line::logprobs(choice);
        if !content.is_empty() || thinking.is_some() || logprobs.is_some() {
            self.first.get_or_insert_with(Instant::now);
            let created = line::created_at((self.wall)());
            let mut text = Line::text(self.call, &self.model, &created, content, thinking);
            text.logprobs = logprobs;
            emit(out, &text);
        }
        let calls = delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array);
        if self.call == Call::Chat {
            for (position, call) in calls.into_iter().flatten().enumerate() {
                self.collect(position, call)?;
            }
        }
        if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(finish.to_string());
            self.flush_tools(out);
        }
        Ok(())
    }

    /// One tool-call fragment: the id and name once, argument pieces appended, within
    /// `max_line`.
    fn collect(&mut self, position: usize, call: &Value) -> Result<(), String> {
        let index = call.get("index").and_then(Value::as_u64);
        let index = index.unwrap_or(position as u64);
        let function = call.get("function");
        let text = |key: &str| {
            let value = function.and_then(|f| f.get(key)).and_then(Value::as_str);
            value.unwrap_or_default()
        };
        let (name, arguments) = (text("name"), text("arguments"));
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let new = !self.tools.contains_key(&index);
        let cost = id.len() + name.len() + arguments.len();
        let cost = cost + if new { CALL_OVERHEAD } else { 0 };
        self.tool_bytes = self.tool_bytes.saturating_add(cost);
        if self.tool_bytes > self.max_line {
            return Err(format!(
                "the machine's tool calls are longer than {} bytes",
                self.max_line
            ));
        }
        self.first.get_or_insert_with(Instant::now);
        let have = self.tools.entry(index).or_default();
        // OpenAI sends the id and name in the first fragment; some servers repeat them.
        if have.id.is_empty() {
            have.id.push_str(id);
        }
        if have.name.is_empty() {
            have.name.push_str(name);
        }
        have.arguments.push_str(arguments);
        Ok(())
    }

    /// The collected tool calls, if any, as one chat line (arguments parsed to objects).
    fn flush_tools(&mut self, out: &mut Vec<u8>) {
        if self.tools.is_empty() {
            return;
        }
        let tools = std::mem::take(&mut self.tools);
        self.tool_bytes = 0;
        let calls = tools
            .into_values()
            .enumerate()
            .map(|(index, c)| {
                let arguments = Value::String(c.arguments);
                line::tool_call(index, Some(&c.id), &c.name, Some(&arguments))
            })
            .collect();
        let created = line::created_at((self.wall)());
        let mut text = Line::text(Call::Chat, &self.model, &created, "", None);
        if let Some(message) = text.message.as_mut() {
            message.tool_calls = Some(calls);
        }
        emit(out, &text);
    }

    /// `[DONE]`: any tool calls still collected, then the last line with counts and times.
    fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush_tools(out);
        let now = Instant::now();
        let total = now.saturating_duration_since(self.started);
        let first = self
            .first
            .map(|f| f.saturating_duration_since(self.started));
        let timing = Timing {
            total,
            first_token: first.unwrap_or(total),
        };
        let created = line::created_at((self.wall)());
        let mut last = Line::text(self.call, &self.model, &created, "", None);
        last.done = true;
        last.done_reason = Some(line::done_reason(self.finish.as_deref()));
        last.metrics = Some(Metrics::new(timing, self.usage));
        emit(out, &last);
        self.done = true;
    }
}

/// Appends `line` and its "\n".
fn emit(out: &mut Vec<u8>, line: &Line<'_>) {
    out.extend_from_slice(&line.to_vec());
    out.push(b'\n');
}

/// An event's data: `[DONE]`, or JSON; None when neither (yet).
fn parse(data: &[u8]) -> Option<Event> {
    if data.trim_ascii() == b"[DONE]" {
        return Some(Event::Done);
    }
    serde_json::from_slice(data).ok().map(Event::Json)
}

/// Why an event's data was refused, with the start of it.
fn not_json(data: &[u8]) -> String {
    let start = String::from_utf8_lossy(data.get(..100).unwrap_or(data));
    format!(
        "the machine's stream sent data that is not JSON: {}",
        crate::text::bounded(&start)
    )
}
