//! Ollama's own answers, shaped like a real Ollama server's: whole chat, generate and
//! embedding answers, the NDJSON scripts of streams, the huge answers' openings, and the
//! `{"error": ...}` body. `meta` has the metadata routes (model lists, model card, version).

use std::time::SystemTime;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::ask::{thinking, Ask, ToolCall};
use super::feed::Script;
use super::routes::NativeWork;

pub(super) mod meta;

/// The durations (nanoseconds) every finished answer reports.
const TOTAL_NS: u64 = 3_000_000;
const LOAD_NS: u64 = 1_000_000;
const PROMPT_EVAL_NS: u64 = 500_000;
const EVAL_NS: u64 = 1_500_000;

/// The vector every embedding is.
const VECTOR: [f64; 3] = [0.1, 0.2, 0.3];

/// An Ollama error body.
pub(super) fn error_body(message: &str) -> Value {
    json!({ "error": message })
}

/// "Now" as Ollama writes `created_at` (UTC, RFC 3339).
pub(super) fn now() -> String {
    crate::clock::rfc3339(SystemTime::now())
}

/// The opening of a huge answer for `work`: a valid answer up to its padding string.
pub(super) fn huge_head(work: NativeWork) -> &'static [u8] {
    match work {
        NativeWork::Chat => {
            br#"{"model":"sim-model","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"big"},"done":true,"done_reason":"stop","pad":""#
        }
        NativeWork::Generate => {
            br#"{"model":"sim-model","created_at":"2026-01-01T00:00:00Z","response":"big","done":true,"done_reason":"stop","pad":""#
        }
        NativeWork::Embed => br#"{"model":"sim-model","embeddings":[[0.1,0.2,0.3]],"pad":""#,
        NativeWork::Embeddings => br#"{"embedding":[0.1,0.2,0.3],"pad":""#,
    }
}

/// What a chat or generate answer says, and how.
pub(super) struct Reply<'a> {
    /// `/api/chat` (a `message`) or `/api/generate` (a `response`).
    pub(super) chat: bool,
    pub(super) model: &'a str,
    pub(super) name: &'a str,
    pub(super) created_at: &'a str,
    pub(super) ask: &'a Ask,
}

impl Reply<'_> {
    /// The fields every line opens with.
    fn opening(&self) -> Map<String, Value> {
        let mut v = Map::new();
        v.insert("model".into(), self.model.into());
        v.insert("created_at".into(), self.created_at.into());
        v
    }

    /// A line or answer carrying `content`, `thinking` and `tool` as chat or generate puts
    /// them, with `done`.
    fn line(
        &self,
        content: &str,
        thinking: Option<String>,
        tool: Option<&ToolCall>,
        done: bool,
    ) -> Map<String, Value> {
        let mut v = self.opening();
        if self.chat {
            let mut message = Map::new();
            message.insert("role".into(), "assistant".into());
            message.insert("content".into(), content.into());
            if let Some(t) = thinking {
                message.insert("thinking".into(), t.into());
            }
            if let Some(call) = tool {
                let call = json!({"function":{"name":call.name,"arguments":call.arguments}});
                message.insert("tool_calls".into(), Value::Array(vec![call]));
            }
            v.insert("message".into(), message.into());
        } else {
            v.insert("response".into(), content.into());
            if let Some(t) = thinking {
                v.insert("thinking".into(), t.into());
            }
        }
        v.insert("done".into(), done.into());
        v
    }

    /// `line` finished: done, why, and the counts and durations.
    fn finished(mut v: Map<String, Value>, eval_count: usize) -> Value {
        let stats = [
            ("done_reason", json!("stop")),
            ("total_duration", json!(TOTAL_NS)),
            ("load_duration", json!(LOAD_NS)),
            ("prompt_eval_count", json!(1)),
            ("prompt_eval_duration", json!(PROMPT_EVAL_NS)),
            ("eval_count", json!(eval_count)),
            ("eval_duration", json!(EVAL_NS)),
        ];
        v.extend(stats.into_iter().map(|(k, s)| (k.to_owned(), s)));
        Value::Object(v)
    }

    /// The tool this answer calls (chat only).
    fn tool(&self) -> Option<&ToolCall> {
        self.ask.tool.as_ref().filter(|_| self.chat)
    }

    /// The thinking this answer carries, if asked.
    fn thinking(&self) -> Option<String> {
        self.ask.think.then(|| thinking(self.name))
    }

    /// The whole answer; `text` is the answer's text when it calls no tool.
    pub(super) fn whole(&self, text: &str) -> Value {
        let content = match self.tool() {
            Some(_) => "",
            None => text,
        };
        let v = self.line(content, self.thinking(), self.tool(), true);
        Reply::finished(v, 3)
    }

    /// The NDJSON script of a stream: a thinking line if asked, then a tool call line, one
    /// fixed text line, or `pieces` lines `NAME-i `; then the done line.
    pub(super) fn script(&self, pieces: usize) -> Script {
        let mut head = Vec::new();
        if let Some(t) = self.thinking() {
            head.push(ndjson(self.line("", Some(t), None, false)));
        }
        let fixed = self.ask.fixed_text(self.name);
        if let Some(call) = self.tool() {
            head.push(ndjson(self.line("", None, Some(call), false)));
        } else if let Some(text) = &fixed {
            head.push(ndjson(self.line(text, None, None, false)));
        }
        let pieces = match self.tool().is_some() || fixed.is_some() {
            true => 0,
            false => pieces,
        };
        let done = Reply::finished(self.line("", None, None, true), head.len() + pieces);
        let piece = self.line("", None, None, false);
        let name = self.name.to_owned();
        Script {
            head,
            pieces,
            piece: Box::new(move |i| {
                let mut line = piece.clone();
                set_content(&mut line, format!("{name}-{i} "));
                ndjson(line)
            }),
            tail: vec![Bytes::from(format!("{done}\n"))],
            last: None,
        }
    }
}

/// Puts `content` where a line carries its text (`message.content` or `response`).
fn set_content(line: &mut Map<String, Value>, content: String) {
    if let Some(Value::Object(message)) = line.get_mut("message") {
        message.insert("content".into(), content.into());
    } else {
        line.insert("response".into(), content.into());
    }
}

/// One NDJSON line.
fn ndjson(v: Map<String, Value>) -> Bytes {
    Bytes::from(format!("{}\n", Value::Object(v)))
}

/// The `/api/embed` answer: one vector per input (a string, or an array of strings);
/// `Err` with a message when the input is neither.
pub(super) fn embed(model: &str, request: &Value) -> Result<Value, String> {
    let inputs = match request.get("input") {
        None | Some(Value::Null) => 0,
        Some(Value::String(_)) => 1,
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items.len(),
        Some(_) => return Err("invalid input type".to_owned()),
    };
    Ok(json!({"model":model,"embeddings":vec![VECTOR; inputs],
        "total_duration":TOTAL_NS,"load_duration":LOAD_NS,"prompt_eval_count":1}))
}

/// The `/api/embeddings` answer (the older single-vector form).
pub(super) fn embeddings() -> Value {
    json!({ "embedding": VECTOR })
}
