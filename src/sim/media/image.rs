//! Images: a small valid PNG (4×4, one colour) per image asked for, as base64 or as a
//! `data:` URL (so no client ever fetches anything from anywhere), for generations (JSON)
//! and for edits and variations (an upload holding the picture).

use base64::Engine as _;
use serde_json::{json, Value};

use super::form::Form;
use super::{refuse, Refusal};

/// The PNG every image is: 4×4 pixels, 8-bit RGB, one colour; CRCs and zlib stream valid.
pub(in crate::sim) const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\
\x00\x00\x00\x0dIHDR\x00\x00\x00\x04\x00\x00\x00\x04\x08\x02\x00\x00\x00\x26\x93\x09\x29\
\x00\x00\x00\x10IDAT\x78\xda\x63\xd0\x88\x3a\x01\x47\x0c\xc4\x71\x00\x0e\x92\x14\xa1\x9f\x82\xf7\x7c\
\x00\x00\x00\x00IEND\xae\x42\x60\x82";

/// The opening of the huge answer: one image, up to its padding.
pub(super) const HUGE_HEAD: &[u8] = br#"{"created":0,"data":[{"b64_json":"iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR42mPQiDoBRwzEcQAOkhShn4L3fAAAAABJRU5ErkJggg=="}],"pad":""#;

/// The most images one request may ask for (as OpenAI's API).
const N_MAX: u64 = 10;

/// How the images are sent.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    B64Json,
    Url,
}

/// The answer to `POST /v1/images/generations`: `prompt` is required.
pub(super) fn generate(request: &Value) -> Result<Value, Refusal> {
    let prompt = match request.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p.as_str(),
        _ => return refuse("prompt", "'prompt' is required: a non-empty string"),
    };
    let n = match request.get("n") {
        None | Some(Value::Null) => 1,
        Some(v) => n(v.as_u64())?,
    };
    let format = match request.get("response_format") {
        None | Some(Value::Null) => Format::B64Json,
        Some(v) => format(v.as_str())?,
    };
    Ok(images(n, format, Some(prompt)))
}

/// The answer to `POST /v1/images/edits`: an `image` (or `image[]`) file and a `prompt`.
pub(super) fn edit(form: &Form) -> Result<Value, Refusal> {
    picture(form)?;
    let prompt = match form.text("prompt") {
        Some(p) if !p.trim().is_empty() => p,
        _ => return refuse("prompt", "'prompt' is required: a non-empty text field"),
    };
    let (n, format) = options(form)?;
    Ok(images(n, format, Some(prompt)))
}

/// The answer to `POST /v1/images/variations`: an `image` file.
pub(super) fn vary(form: &Form) -> Result<Value, Refusal> {
    picture(form)?;
    let (n, format) = options(form)?;
    Ok(images(n, format, None))
}

/// Refuses an upload without a picture.
fn picture(form: &Form) -> Result<(), Refusal> {
    match form.files(&["image", "image[]"]).next() {
        Some(f) if !f.content.is_empty() => Ok(()),
        _ => refuse(
            "image",
            "'image' is required: a file part named image or image[]",
        ),
    }
}

/// An upload's `n` and `response_format` fields.
fn options(form: &Form) -> Result<(u64, Format), Refusal> {
    let n = match form.text("n") {
        None => 1,
        Some(t) => n(t.trim().parse().ok())?,
    };
    let format = match form.text("response_format") {
        None => Format::B64Json,
        Some(t) => format(Some(t.trim()))?,
    };
    Ok((n, format))
}

/// `n` if it is a whole number from 1 to [`N_MAX`].
fn n(value: Option<u64>) -> Result<u64, Refusal> {
    match value {
        Some(n) if (1..=N_MAX).contains(&n) => Ok(n),
        _ => refuse("n", format!("'n' must be a whole number from 1 to {N_MAX}")),
    }
}

/// The format `url` or `b64_json` names.
fn format(value: Option<&str>) -> Result<Format, Refusal> {
    match value {
        Some("b64_json") => Ok(Format::B64Json),
        Some("url") => Ok(Format::Url),
        _ => refuse(
            "response_format",
            "'response_format' must be 'url' or 'b64_json'",
        ),
    }
}

/// `n` images in `format`, each saying the prompt it was drawn from, if one.
fn images(n: u64, format: Format, prompt: Option<&str>) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let one = match format {
        Format::B64Json => json!({"b64_json": b64}),
        Format::Url => json!({"url": format!("data:image/png;base64,{b64}")}),
    };
    let data: Vec<Value> = (0..n)
        .map(|_| {
            let mut image = one.clone();
            if let (Some(obj), Some(p)) = (image.as_object_mut(), prompt) {
                obj.insert("revised_prompt".into(), p.into());
            }
            image
        })
        .collect();
    json!({"created": super::created(), "data": data})
}
