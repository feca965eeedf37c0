//! An Ollama request read and checked once: what routing reads (model, text, images,
//! stream), and the body for an Ollama machine ([`Request::native`]). The body for an
//! OpenAI machine is in [`openai`].

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::ollama::Call;

mod openai;
#[cfg(test)]
mod tests;

/// The most alternatives per token `top_logprobs` may ask for, as Ollama and OpenAI allow.
const TOP_LOGPROBS_MAX: u64 = 20;

/// An Ollama request, read and checked once.
#[derive(Debug)]
pub struct Request {
    pub call: Call,
    /// The body as a JSON object.
    body: Map<String, Value>,
    /// `model` as sent (None if absent, null, or ""); may carry a tag like ":latest".
    pub model: Option<String>,
    /// What keyword routing reads: the last user message's content (chat), `prompt`
    /// (generate, embeddings), `input` strings joined with "\n" (embed).
    pub text: String,
    /// Any base64 image: a chat message's `images` or generate's `images`, non-empty.
    pub has_image: bool,
    /// Whether the client wants NDJSON: `stream` true or absent for chat/generate; always
    /// false for embed/embeddings.
    pub stream: bool,
}

impl Request {
    /// Reads a body; Err is a message for a 400 that says what was wrong and where, e.g.
    /// `messages[2].content: expected a string`, `'prompt' must be a string`, `body is not
    /// a JSON object: ...`. Checks the types of the fields labrouter reads or translates;
    /// unknown fields are allowed and ignored.
    pub fn read(call: Call, body: &[u8]) -> Result<Request, String> {
        let body = match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(other) => return Err(format!("body is not a JSON object: it is {}", a(&other))),
            Err(e) => return Err(format!("body is not a JSON object: {e}")),
        };
        let model = top(&body, "model", Value::is_string, "a string")?
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        top(
            &body,
            "keep_alive",
            |v| v.is_string() || v.is_number(),
            "a string or a number",
        )?;
        let options = top(&body, "options", Value::is_object, "an object")?;
        if let Some(options) = options.and_then(Value::as_object) {
            check_options(options)?;
        }
        let mut has_image = false;
        let text = match call {
            Call::Chat => {
                top(&body, "tools", Value::is_array, "an array")?;
                let messages = top(&body, "messages", Value::is_array, "an array")?;
                let messages = messages.and_then(Value::as_array).map_or(&[][..], |m| m);
                let mut text = String::new();
                for (i, m) in messages.iter().enumerate() {
                    let (role, content, images) = check_message(i, m)?;
                    has_image |= images;
                    if role == "user" {
                        text = content.to_string();
                    }
                }
                text
            }
            Call::Generate => {
                for key in ["suffix", "system"] {
                    top(&body, key, Value::is_string, "a string")?;
                }
                top(&body, "raw", Value::is_boolean, "true or false")?;
                has_image = images(field(&body, "images"), "images")?;
                prompt(&body)?
            }
            Call::Embed => {
                top(&body, "dimensions", Value::is_u64, "a positive integer")?;
                top(&body, "truncate", Value::is_boolean, "true or false")?;
                input(field(&body, "input"))?
            }
            Call::Embeddings => prompt(&body)?,
        };
        let mut stream = false;
        if !call.embeds() {
            let format = |v: &Value| v.is_object() || matches!(v.as_str(), Some("json" | ""));
            top(&body, "format", format, "\"json\" or a JSON schema object")?;
            let levels = "true, false, \"low\", \"medium\" or \"high\"";
            top(
                &body,
                "think",
                |v| v.is_boolean() || level(v).is_some(),
                levels,
            )?;
            stream = top(&body, "stream", Value::is_boolean, "true or false")?
                .and_then(Value::as_bool)
                .unwrap_or(true);
            for key in ["truncate", "shift", "logprobs"] {
                top(&body, key, Value::is_boolean, "true or false")?;
            }
            let top_logprobs = |v: &Value| v.as_u64().is_some_and(|n| n <= TOP_LOGPROBS_MAX);
            top(
                &body,
                "top_logprobs",
                top_logprobs,
                "an integer from 0 to 20",
            )?;
        }
        Ok(Request {
            call,
            body,
            model,
            text,
            has_image,
            stream,
        })
    }

    /// The body for an Ollama machine: the same object with `model` set to `backend`
    /// (other fields as sent, re-serialised).
    pub fn native(&self, backend: &str) -> Bytes {
        let mut body = self.body.clone();
        body.insert("model".into(), Value::String(backend.to_string()));
        Bytes::from(Value::Object(body).to_string())
    }

    /// The load or unload call this is, if it is one: it asks for no generation.
    pub fn load(&self) -> Option<super::Load> {
        super::load::of(self.call, &self.body)
    }

    /// A field of the body, None when absent or null.
    fn get(&self, key: &str) -> Option<&Value> {
        field(&self.body, key)
    }
}

/// A field of an object, None when absent or null (Ollama reads a null as absent).
fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// A top-level field, checked: "'key' must be WHAT".
fn top<'a>(
    body: &'a Map<String, Value>,
    key: &str,
    ok: impl Fn(&Value) -> bool,
    what: &str,
) -> Result<Option<&'a Value>, String> {
    match field(body, key) {
        Some(v) if !ok(v) => Err(format!("'{key}' must be {what}")),
        v => Ok(v),
    }
}

/// A nested field, checked: "PATH.key: expected WHAT".
fn at<'a>(
    o: &'a Map<String, Value>,
    path: &str,
    key: &str,
    ok: impl Fn(&Value) -> bool,
    what: &str,
) -> Result<Option<&'a Value>, String> {
    match field(o, key) {
        Some(v) if !ok(v) => Err(format!("{path}.{key}: expected {what}")),
        v => Ok(v),
    }
}

/// A value's kind with its article, for messages.
fn a(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `think` level: "low", "medium" or "high".
fn level(v: &Value) -> Option<&str> {
    v.as_str()
        .filter(|s| matches!(*s, "low" | "medium" | "high"))
}

/// `prompt`, checked: the text keyword routing reads.
fn prompt(body: &Map<String, Value>) -> Result<String, String> {
    let p = top(body, "prompt", Value::is_string, "a string")?;
    Ok(p.and_then(Value::as_str).unwrap_or_default().to_string())
}

/// Embed's `input`: a string or an array of strings, joined with "\n".
fn input(v: Option<&Value>) -> Result<String, String> {
    match v {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(items)) => {
            let mut texts = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                texts.push(
                    item.as_str()
                        .ok_or_else(|| format!("input[{i}]: expected a string"))?,
                );
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err("'input' must be a string or an array of strings".into()),
    }
}

/// `images` at `path`: an array of base64 strings (no `data:` prefix, as Ollama takes
/// them). Whether there is any.
fn images(v: Option<&Value>, path: &str) -> Result<bool, String> {
    let Some(v) = v else { return Ok(false) };
    let list = v
        .as_array()
        .ok_or_else(|| format!("{path}: expected an array"))?;
    for (i, image) in list.iter().enumerate() {
        if !image.as_str().is_some_and(base64) {
            return Err(format!("{path}[{i}]: expected a base64 string"));
        }
    }
    Ok(!list.is_empty())
}

/// Whether `s` is written in base64's alphabet (standard or URL-safe, padded or not).
fn base64(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// `options`: the fields translated for an OpenAI machine have the right types.
fn check_options(o: &Map<String, Value>) -> Result<(), String> {
    for key in openai::NUMERIC_OPTIONS.iter().chain(&["num_predict"]) {
        at(o, "options", key, Value::is_number, "a number")?;
    }
    let stop =
        |v: &Value| v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    at(
        o,
        "options",
        "stop",
        stop,
        "a string or an array of strings",
    )?;
    Ok(())
}

/// Message `i` of a chat, checked: its role, its content ("" when absent or null), and
/// whether it carries images.
fn check_message(i: usize, m: &Value) -> Result<(&str, &str, bool), String> {
    let path = format!("messages[{i}]");
    let m = m
        .as_object()
        .ok_or_else(|| format!("{path}: expected an object"))?;
    let role = at(m, &path, "role", Value::is_string, "a string")?
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{path}.role: expected a string"))?;
    let content = at(m, &path, "content", Value::is_string, "a string")?
        .and_then(Value::as_str)
        .unwrap_or_default();
    for key in ["tool_name", "tool_call_id"] {
        at(m, &path, key, Value::is_string, "a string")?;
    }
    let has_image = images(field(m, "images"), &format!("{path}.images"))?;
    if let Some(calls) = at(m, &path, "tool_calls", Value::is_array, "an array")? {
        for (k, call) in calls.as_array().map_or(&[][..], |c| c).iter().enumerate() {
            check_tool_call(&format!("{path}.tool_calls[{k}]"), call)?;
        }
    }
    Ok((role, content, has_image))
}

/// One of an assistant message's `tool_calls`: `{"id"?, "function":{"name","arguments"}}`,
/// the arguments an object (or, as OpenAI-style clients send them, a JSON string).
fn check_tool_call(path: &str, call: &Value) -> Result<(), String> {
    let call = call
        .as_object()
        .ok_or_else(|| format!("{path}: expected an object"))?;
    at(call, path, "id", Value::is_string, "a string")?;
    let function = at(call, path, "function", Value::is_object, "an object")?
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{path}.function: expected an object"))?;
    let path = format!("{path}.function");
    at(function, &path, "name", Value::is_string, "a string")?
        .ok_or_else(|| format!("{path}.name: expected a string"))?;
    let args = |v: &Value| v.is_object() || v.is_string();
    at(function, &path, "arguments", args, "an object")?;
    Ok(())
}
