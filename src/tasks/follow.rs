//! What a parent gives its follow-ups (docs/api.md "Tasks"): its output text, put where a
//! follow-up's request says `{{after.N}}` — in one pass, only inside message content and `prompt`,
//! as an edit of JSON string values (never by splicing text into JSON).

use bytes::Bytes;
use serde_json::Value;

use crate::outcome::TaskCode;
use crate::task::{Task, TaskId};
use crate::upstream::Endpoint;

/// A finished parent's text, or why it has none a follow-up could use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Text(String),
    Unusable(String),
}

/// The output text of a parent's answer body: chat, the first choice's message content;
/// completions, its text; a Response, the text of its output messages. Cut off
/// (`finish_reason: length`, a Response `incomplete`) or without text is unusable.
pub fn output(endpoint: Endpoint, body: &[u8]) -> Output {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Output::Unusable("its answer is not JSON".into());
    };
    if endpoint == Endpoint::Responses {
        return response_text(&v);
    }
    let choice = &v["choices"][0];
    if choice["finish_reason"] == "length" {
        return Output::Unusable("its answer was cut off (finish_reason: length)".into());
    }
    let text = match endpoint {
        Endpoint::Chat => &choice["message"]["content"],
        Endpoint::Completions => &choice["text"],
        Endpoint::Embeddings => return Output::Unusable("embeddings have no text".into()),
        Endpoint::ImagesGenerations | Endpoint::ImagesEdits | Endpoint::ImagesVariations => {
            return Output::Unusable("an image has no text".into())
        }
        _ => return Output::Unusable("its answer has no text".into()),
    };
    match text.as_str() {
        Some(t) => Output::Text(t.to_string()),
        None => Output::Unusable("its answer has no text".into()),
    }
}

/// A Response's output text: every `output_text` part of its output messages, in order.
fn response_text(v: &Value) -> Output {
    if v["status"] == "incomplete" {
        return Output::Unusable("its answer was cut off (status: incomplete)".into());
    }
    let texts: Vec<&str> = v["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter(|part| part["type"] == "output_text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    if texts.is_empty() {
        return Output::Unusable("its answer has no text".into());
    }
    Output::Text(texts.concat())
}

/// Why a follow-up's request could not be filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfilled {
    /// Filled in, it would be `size` bytes, more than `max` (`tasks.max_request_body`).
    TooLarge { size: usize, max: usize },
    /// It is not the JSON it was when it was submitted.
    Bad(String),
}

impl std::fmt::Display for Unfilled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfilled::TooLarge { size, max } => write!(
                f,
                "with its parents' text filled in, its request would be {size} bytes, larger than tasks.max_request_body ({max} bytes)"
            ),
            Unfilled::Bad(why) => f.write_str(why),
        }
    }
}

/// Whether a request holds a `{{after.N}}` placeholder.
pub fn has_placeholder(request: &[u8]) -> bool {
    request.windows(8).any(|w| w == b"{{after.")
}

/// Whether `task`'s request needs its parents' text: it has parents, and a placeholder.
pub fn needs_parents(task: &Task, request: &[u8]) -> bool {
    !task.after.is_empty() && has_placeholder(request)
}

/// The output text of each of a task's parents, in `after` order (`parents[i]`: `after[i]`
/// as found, `None` when gone); the first without usable text cancels the follow-up with
/// `dependency_unusable`, naming it.
pub fn outputs(
    after: &[TaskId],
    parents: &[Option<Task>],
) -> Result<Vec<String>, (TaskCode, String)> {
    let mut outputs = Vec::with_capacity(after.len());
    for (i, p) in after.iter().enumerate() {
        let answer = parents
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|t| t.result.as_ref().map(|r| (t.endpoint, r)));
        let out = match answer {
            Some((endpoint, r)) => output(endpoint, r.body.get().as_bytes()),
            None => Output::Unusable("it has no answer".into()),
        };
        match out {
            Output::Text(t) => outputs.push(t),
            Output::Unusable(why) => {
                let why = format!("after[{i}] {p}: {why}");
                return Err((TaskCode::DependencyUnusable, why));
            }
        }
    }
    Ok(outputs)
}

/// `task`'s request with its parents' text filled in (`parents` as [`outputs`] reads
/// them), within `max` bytes; or how the task ends instead.
pub fn filled(
    task: &Task,
    request: &[u8],
    parents: &[Option<Task>],
    max: usize,
) -> Result<Bytes, (TaskCode, String)> {
    let outputs = outputs(&task.after, parents)?;
    substitute(task.endpoint, request, &outputs, max)
        .map_err(|e| (TaskCode::InvalidRequest, e.to_string()))
}

/// `request` with each `{{after.N}}` inside message content (strings and text parts) and
/// `prompt` replaced by `outputs[N]`; text put in is never scanned again. What it would
/// cost is counted first (placeholders × their texts' lengths as JSON), so a request that
/// would grow past `max` bytes is refused before anything is built.
pub fn substitute(
    endpoint: Endpoint,
    request: &[u8],
    outputs: &[String],
    max: usize,
) -> Result<Bytes, Unfilled> {
    let mut v: Value = serde_json::from_slice(request)
        .map_err(|e| Unfilled::Bad(format!("request is not JSON: {e}")))?;
    let escaped: Vec<usize> = outputs.iter().map(|o| json_len(o)).collect();
    let mut grow: i128 = 0;
    let mut found = false;
    each_target(endpoint, &mut v, &mut |s| {
        for (n, at) in placeholders(s, outputs.len()) {
            found = true;
            grow += escaped[n] as i128 - at as i128;
        }
    });
    if !found {
        return Ok(Bytes::copy_from_slice(request));
    }
    let size = (request.len() as i128 + grow).max(0);
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    if size > max {
        return Err(Unfilled::TooLarge { size, max });
    }
    each_target(endpoint, &mut v, &mut |s| fill(s, outputs));
    let out = serde_json::to_vec(&v)
        .map_err(|e| Unfilled::Bad(format!("cannot write the request: {e}")))?;
    if out.len() > max {
        return Err(Unfilled::TooLarge {
            size: out.len(),
            max,
        });
    }
    Ok(Bytes::from(out))
}

/// Calls `f` on every string a placeholder may sit in: message content (strings and text
/// parts) for chat, `prompt` (a string or a list of strings) for completions, `input` (a
/// string, or its items' content strings and text parts) for a Response.
fn each_target(endpoint: Endpoint, v: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match endpoint {
        Endpoint::Chat => {
            let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) else {
                return;
            };
            for m in messages {
                match m.get_mut("content") {
                    Some(Value::String(s)) => f(s),
                    Some(Value::Array(parts)) => {
                        for p in parts {
                            if p.get("type").and_then(Value::as_str) == Some("text") {
                                if let Some(Value::String(s)) = p.get_mut("text") {
                                    f(s);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Endpoint::Completions => match v.get_mut("prompt") {
            Some(Value::String(s)) => f(s),
            Some(Value::Array(items)) => {
                for item in items {
                    if let Value::String(s) = item {
                        f(s);
                    }
                }
            }
            _ => {}
        },
        Endpoint::Responses => match v.get_mut("input") {
            Some(Value::String(s)) => f(s),
            Some(Value::Array(items)) => {
                for item in items {
                    match item.get_mut("content") {
                        Some(Value::String(s)) => f(s),
                        Some(Value::Array(parts)) => {
                            for p in parts {
                                let kind = p.get("type").and_then(Value::as_str);
                                if matches!(kind, Some("input_text" | "text")) {
                                    if let Some(Value::String(s)) = p.get_mut("text") {
                                        f(s);
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        },
        Endpoint::ImagesGenerations => {
            if let Some(Value::String(s)) = v.get_mut("prompt") {
                f(s);
            }
        }
        _ => {}
    }
}

/// The placeholders of `s` that name one of `outputs` outputs, as (N, the placeholder's
/// length), left to right.
fn placeholders(s: &str, outputs: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut rest = s;
    std::iter::from_fn(move || loop {
        let i = rest.find("{{after.")?;
        let tail = &rest[i + 8..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n = tail[..digits]
            .parse::<usize>()
            .ok()
            .filter(|&n| n < outputs);
        if let (Some(n), true) = (n, tail[digits..].starts_with("}}")) {
            rest = &tail[digits + 2..];
            return Some((n, 8 + digits + 2));
        }
        rest = tail;
    })
}

/// The bytes `s` takes inside a JSON string, escapes included.
fn json_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum()
}

/// Replaces `{{after.N}}` in `s` (one pass, left to right).
fn fill(s: &mut String, outputs: &[String]) {
    if !s.contains("{{after.") {
        return;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find("{{after.") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 8..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n = tail[..digits].parse::<usize>().ok();
        match (
            n.and_then(|n| outputs.get(n)),
            tail[digits..].starts_with("}}"),
        ) {
            (Some(text), true) => {
                out.push_str(text);
                rest = &tail[digits + 2..];
            }
            _ => {
                out.push_str("{{after.");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    *s = out;
}

#[cfg(test)]
mod tests;
