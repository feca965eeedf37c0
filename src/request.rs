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
    #[serde(default, borrow, deserialize_with = "written")]
    model: Option<&'a RawValue>,
    stream: Option<bool>,
    #[serde(borrow)]
    messages: Option<Messages<'a>>,
    #[serde(borrow)]
    prompt: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

/// A value as written, `null` included (serde reads a `null` Option as absent). A
/// `"model": null` routes like no model at all, but `body_for` must still replace those
/// bytes rather than add a second `model` key.
fn written<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

mod read;
use read::Messages;

impl Parsed {
    pub fn new(endpoint: Endpoint, body: Bytes) -> Result<Parsed, BadBody> {
        // serde reads a struct from a JSON array too (`["gpt-4o", true, ...]`); a body
        // must be an object, or `body_for` would write `model` into whatever `{` came first.
        let first = body
            .iter()
            .find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
        if first != Some(&b'{') {
            return Err(BadBody(
                "request body is not a valid JSON object: expected '{' first".into(),
            ));
        }
        let peek: Peek<'_> = serde_json::from_slice(&body)
            .map_err(|e| BadBody(format!("request body is not a valid JSON object: {e}")))?;
        let (model, model_at) = match peek.model {
            None => (None, None),
            Some(raw) => {
                let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
                let at = Some(start..start + raw.get().len());
                if raw.get() == "null" {
                    (None, at)
                } else {
                    let name: String = serde_json::from_str(raw.get()).map_err(|_| {
                        BadBody(format!("'model' must be a string, got {}", raw.get()))
                    })?;
                    (Some(name), at)
                }
            }
        };
        let mut has_image = false;
        let text = match endpoint {
            Endpoint::Chat => {
                let messages = peek.messages.ok_or_else(|| {
                    BadBody("'messages' is required for /v1/chat/completions".into())
                })?;
                has_image = messages.has_image;
                messages.last_user_text()
            }
            Endpoint::Completions => strings(peek.prompt),
            Endpoint::Embeddings => strings(peek.input),
            Endpoint::Responses => {
                let (text, image) = responses_input(peek.input)?;
                has_image = image;
                text
            }
            // Routed by their kind's default route or the model they name, never by text.
            _ => String::new(),
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
        let b = &self.body[..];
        let mut out = Vec::with_capacity(b.len() + backend.len() + 12);
        // A string always writes (the escaped name, quoted); writing to a Vec cannot fail.
        let name = |out: &mut Vec<u8>| {
            let _ = serde_json::to_writer(&mut *out, backend);
        };
        match &self.model_at {
            Some(at) => {
                out.extend_from_slice(&b[..at.start]);
                name(&mut out);
                out.extend_from_slice(&b[at.end..]);
            }
            None => {
                // No `model` key: add one right after the opening brace.
                let open = b.iter().position(|&c| c == b'{').map_or(0, |i| i + 1);
                let empty = b[open..].iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'}');
                out.extend_from_slice(&b[..open]);
                out.extend_from_slice(b"\"model\":");
                name(&mut out);
                if !empty {
                    out.push(b',');
                }
                out.extend_from_slice(&b[open..]);
            }
        }
        Bytes::from(out)
    }
}

/// A Responses `input`: a string is the user's text; a list of items is read like chat
/// messages — the last user item's text (its `input_text` parts joined), and whether any
/// item carries an image part (`input_image`). `instructions` are never read: routing is
/// by what the user asked.
fn responses_input(raw: Option<&RawValue>) -> Result<(String, bool), BadBody> {
    let Some(raw) = raw else {
        return Err(BadBody("'input' is required for /v1/responses".into()));
    };
    if let Ok(s) = serde_json::from_str::<Cow<'_, str>>(raw.get()) {
        return Ok((s.into_owned(), false));
    }
    let items: Messages<'_> = serde_json::from_str(raw.get()).map_err(|e| {
        BadBody(format!(
            "'input' must be a string or a list of input items: {e}"
        ))
    })?;
    Ok((items.last_user_text(), items.has_image))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Parsed, BadBody> {
        Parsed::new(Endpoint::Chat, Bytes::from(body.to_string()))
    }

    /// Found by tests/fuzz.rs: a `null` model was read as absent, and `body_for` then added
    /// a second `model` key in front of it, a body no JSON reader takes as meant.
    #[test]
    fn null_model_is_replaced_not_duplicated() {
        let p = parse(r#"{"messages": [], "model" : null}"#).expect("a null model reads as none");
        assert_eq!(p.model, None);
        let out = p.body_for("qwen3:4b");
        assert_eq!(&out[..], br#"{"messages": [], "model" : "qwen3:4b"}"#);
        let again = Parsed::new(Endpoint::Chat, out).expect("the rewritten body reads");
        assert_eq!(again.model.as_deref(), Some("qwen3:4b"));
    }

    /// Found by tests/fuzz.rs: serde reads a struct from a JSON array, so an array body
    /// was accepted and `body_for` wrote `"model":` in front of it.
    #[test]
    fn array_body_is_rejected() {
        for body in [
            r#"["gpt-4o", true, [], "p", "i"]"#,
            r#" [null, null, null, null, {"a": 1}]"#,
        ] {
            let e = Parsed::new(Endpoint::Completions, Bytes::from(body)).expect_err(body);
            assert!(e.0.contains("not a valid JSON object"), "{e}");
        }
        assert!(parse(" \n{\"messages\": []}").is_ok());
    }
}
