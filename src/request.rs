//! Reading a client's request body once: what it names, what it says, whether it streams;
//! and rewriting its `model` for a target while leaving every other byte as sent.

use std::borrow::Cow;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::upstream::Endpoint;

/// The parts of a request labrouter reads. The body itself is forwarded untouched but
/// for `model`.
#[derive(Debug)]
pub struct Parsed {
    pub body: Bytes,
    pub model: Option<String>,
    /// Byte range of the `model` value (with its quotes) in `body`.
    model_at: Option<Range<usize>>,
    pub stream: bool,
    /// The text keyword routing reads: the last user message (chat), the prompt, the input.
    pub text: String,
    pub has_image: bool,
}

/// Why a body could not be read, said for the client.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadBody(pub String);

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    stream: Option<bool>,
    #[serde(borrow)]
    messages: Option<Vec<Message<'a>>>,
    #[serde(borrow)]
    prompt: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<Content<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content<'a> {
    #[serde(borrow)]
    Text(Cow<'a, str>),
    #[serde(borrow)]
    Parts(Vec<Part<'a>>),
    #[allow(dead_code)]
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

impl Parsed {
    pub fn new(endpoint: Endpoint, body: Bytes) -> Result<Parsed, BadBody> {
        let peek: Peek<'_> = serde_json::from_slice(&body)
            .map_err(|e| BadBody(format!("request body is not a valid JSON object: {e}")))?;
        let (model, model_at) = match peek.model {
            None => (None, None),
            Some(raw) => {
                let name: String = serde_json::from_str(raw.get())
                    .map_err(|_| BadBody(format!("'model' must be a string, got {}", raw.get())))?;
                let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
                (Some(name), Some(start..start + raw.get().len()))
            }
        };
        let mut has_image = false;
        let text = match endpoint {
            Endpoint::Chat => {
                let messages = peek.messages.ok_or_else(|| {
                    BadBody("'messages' is required for /v1/chat/completions".into())
                })?;
                for m in &messages {
                    if let Some(Content::Parts(parts)) = &m.content {
                        has_image |= parts
                            .iter()
                            .any(|p| p.kind.as_deref().is_some_and(|k| k.contains("image")));
                    }
                }
                let last_user = messages
                    .iter()
                    .rev()
                    .find(|m| m.role.as_deref() == Some("user"));
                match last_user.and_then(|m| m.content.as_ref()) {
                    Some(Content::Text(t)) => t.to_string(),
                    Some(Content::Parts(parts)) => {
                        let texts: Vec<&str> =
                            parts.iter().filter_map(|p| p.text.as_deref()).collect();
                        texts.join("\n")
                    }
                    _ => String::new(),
                }
            }
            Endpoint::Completions => strings(peek.prompt),
            Endpoint::Embeddings => strings(peek.input),
        };
        Ok(Parsed {
            model,
            model_at,
            stream: peek.stream.unwrap_or(false),
            text,
            has_image,
            body,
        })
    }

    /// The body with `model` set to `backend`; every other byte as the client sent it.
    pub fn body_for(&self, backend: &str) -> Bytes {
        let name = serde_json::Value::String(backend.to_string()).to_string();
        let b = &self.body[..];
        let mut out = Vec::with_capacity(b.len() + name.len() + 10);
        match &self.model_at {
            Some(at) => {
                out.extend_from_slice(&b[..at.start]);
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(&b[at.end..]);
            }
            None => {
                // No `model` key: add one right after the opening brace.
                let open = b.iter().position(|&c| c == b'{').map_or(0, |i| i + 1);
                let empty = b[open..].iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'}');
                out.extend_from_slice(&b[..open]);
                out.extend_from_slice(b"\"model\":");
                out.extend_from_slice(name.as_bytes());
                if !empty {
                    out.push(b',');
                }
                out.extend_from_slice(&b[open..]);
            }
        }
        Bytes::from(out)
    }
}

/// A prompt or input: a string, or the strings of an array, joined.
fn strings(raw: Option<&RawValue>) -> String {
    let Some(raw) = raw else {
        return String::new();
    };
    if let Ok(s) = serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        return s.into_owned();
    }
    serde_json::from_str::<Vec<serde_json::Value>>(raw.get())
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}
