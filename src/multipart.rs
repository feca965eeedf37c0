//! multipart/form-data (RFC 7578) read from a body held whole: where each part is, and
//! which one is `model` — so an upload can go to any machine of the chain with only its
//! model rewritten (added when it had none), every other part byte for byte and in order,
//! and nothing copied: the body is sent as slices around the new name.

use std::ops::Range;

use axum::http::HeaderValue;
use bytes::Bytes;
use memchr::memmem;

use crate::upstream::Payload;

/// A boundary is at most this long (RFC 2046).
const BOUNDARY_MAX: usize = 70;
/// A part's headers are at most this long.
const HEADERS_MAX: usize = 8 * 1024;

/// Why a body is not the multipart/form-data it says it is, with where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("multipart/form-data: {0}")]
pub struct BadUpload(pub String);

fn bad<T>(why: impl Into<String>) -> Result<T, BadUpload> {
    Err(BadUpload(why.into()))
}

/// An upload, read: its body, the boundary, and the `model` part if it had one.
#[derive(Clone, Debug)]
pub struct Upload {
    body: Bytes,
    content_type: HeaderValue,
    boundary: String,
    /// The `model` part's value: its bytes in `body`, and the name it says.
    model: Option<(Range<usize>, String)>,
    /// Where the closing delimiter (`--boundary--`) starts.
    close: usize,
    /// How many parts it has.
    pub parts: usize,
}

impl Upload {
    /// Reads `body` as the multipart/form-data `content_type` says.
    pub fn read(content_type: &HeaderValue, body: Bytes) -> Result<Upload, BadUpload> {
        let boundary = boundary(content_type)?;
        let delimiter = format!("--{boundary}");
        let finder = memmem::Finder::new(delimiter.as_bytes());
        let Some(mut at) = finder.find(&body) else {
            return bad(format!(
                "no part: the boundary '{boundary}' is nowhere in the body"
            ));
        };
        let (mut model, mut parts) = (None, 0usize);
        loop {
            let after = at + delimiter.len();
            if body[after..].starts_with(b"--") {
                return Ok(Upload {
                    body,
                    content_type: content_type.clone(),
                    boundary,
                    model,
                    close: at,
                    parts,
                });
            }
            let Some(start) = after
                .checked_add(2)
                .filter(|_| body[after..].starts_with(b"\r\n"))
            else {
                return bad(format!(
                    "part {} at byte {after}: expected a line break after the boundary",
                    parts + 1
                ));
            };
            let Some(next) = finder.find(&body[start..]).map(|i| start + i) else {
                return bad(format!(
                    "part {} at byte {start}: no closing boundary '--{boundary}--'",
                    parts + 1
                ));
            };
            // The part's content ends at the CRLF before the next delimiter.
            let Some(end) = next
                .checked_sub(2)
                .filter(|&e| e >= start && &body[e..next] == b"\r\n")
            else {
                return bad(format!(
                    "part {} at byte {start}: expected a line break before the next boundary",
                    parts + 1
                ));
            };
            parts += 1;
            let part = Part::read(&body, start..end, parts)?;
            if part.name == "model" && model.is_none() {
                let name =
                    String::from_utf8(body[part.content.clone()].to_vec()).map_err(|_| {
                        BadUpload(format!("part {parts} ('model'): expected UTF-8 text"))
                    })?;
                model = Some((part.content, name.trim().to_string()));
            }
            at = next;
        }
    }

    /// The model the upload names, if it has a `model` part.
    pub fn model(&self) -> Option<&str> {
        self.model
            .as_ref()
            .map(|(_, m)| m.as_str())
            .filter(|m| !m.is_empty())
    }

    /// The upload with `model` set to `backend`: its bytes shared, not copied.
    pub fn for_backend(&self, backend: &str) -> Payload {
        let b = &self.body;
        let pieces = match &self.model {
            Some((at, _)) => vec![
                b.slice(..at.start),
                Bytes::copy_from_slice(backend.as_bytes()),
                b.slice(at.end..),
            ],
            None => vec![
                b.slice(..self.close),
                Bytes::from(format!(
                    "--{}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{backend}\r\n",
                    self.boundary
                )),
                b.slice(self.close..),
            ],
        };
        Payload::of(pieces, self.content_type.clone())
    }
}

/// One part: its name, and where its content is.
struct Part {
    name: String,
    content: Range<usize>,
}

impl Part {
    fn read(body: &[u8], at: Range<usize>, n: usize) -> Result<Part, BadUpload> {
        let bytes = &body[at.clone()];
        let Some(split) = memmem::find(&bytes[..bytes.len().min(HEADERS_MAX + 4)], b"\r\n\r\n")
        else {
            return bad(format!("part {n} at byte {}: its headers do not end (a blank line) within {HEADERS_MAX} bytes", at.start));
        };
        let headers = std::str::from_utf8(&bytes[..split]).map_err(|_| {
            BadUpload(format!(
                "part {n} at byte {}: its headers are not text",
                at.start
            ))
        })?;
        let disposition = headers
            .split("\r\n")
            .find_map(|line| {
                let (k, v) = line.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            })
            .ok_or_else(|| {
                BadUpload(format!(
                    "part {n} at byte {}: no Content-Disposition header",
                    at.start
                ))
            })?;
        let name = param(disposition, "name").ok_or_else(|| {
            BadUpload(format!(
                "part {n} at byte {}: its Content-Disposition has no name",
                at.start
            ))
        })?;
        Ok(Part {
            name,
            content: at.start + split + 4..at.end,
        })
    }
}

/// The `boundary` of a multipart/form-data content type.
fn boundary(content_type: &HeaderValue) -> Result<String, BadUpload> {
    let ct = content_type
        .to_str()
        .map_err(|_| BadUpload("the content type is not text".into()))?;
    let (mime, _) = ct.split_once(';').unwrap_or((ct, ""));
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return bad(format!(
            "expected content type multipart/form-data, got '{}'",
            crate::text::bounded(mime.trim())
        ));
    }
    let Some(b) = param(ct, "boundary") else {
        return bad("the content type has no boundary");
    };
    if b.is_empty() || b.len() > BOUNDARY_MAX || b.contains(['\r', '\n']) {
        return bad(format!(
            "the boundary must be 1 to {BOUNDARY_MAX} characters on one line"
        ));
    }
    Ok(b)
}

/// A `key=value` or `key="value"` parameter of a header value.
pub(crate) fn param(value: &str, key: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case(key) {
            return None;
        }
        let v = v.trim();
        Some(
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
                .to_string(),
        )
    })
}

#[cfg(test)]
mod tests;
