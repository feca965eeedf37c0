//! multipart/form-data (RFC 7578) read from a body held whole: where each part is, and
//! which one is `model` — so an upload can go to any machine of the chain with only its
//! model rewritten (added when it had none), every other part byte for byte and in order,
//! and nothing copied: the body is sent as slices around the new name. The delimiters are
//! found as the body arrives ([`Scan`]), each frame searched while it is still in the
//! cache, so the body is not read a second time from memory once held.

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

/// Where the delimiters (`--boundary`) of a body are, found frame by frame as it arrives:
/// every occurrence, in order, overlapping ones included, wherever frames split them. Only
/// the first [`FOUND_MAX`] are kept; past them the held body is searched instead.
pub struct Scan {
    boundary: String,
    finder: memmem::Finder<'static>,
    /// The start of every occurrence that starts before `covered`.
    found: Vec<usize>,
    covered: usize,
    /// Bytes fed so far.
    seen: usize,
    /// The last bytes fed, fewer than the delimiter: where an occurrence may start that the
    /// next frame completes.
    carry: Vec<u8>,
    /// Past [`FOUND_MAX`]: nothing more is looked at (`covered` stays where it is).
    full: bool,
}

/// The most delimiter positions a scan keeps, give or take a delimiter's length (a body with
/// more is searched past them once held): a hostile body of delimiters costs a few KB, not
/// a multiple of its size.
const FOUND_MAX: usize = 1024;

impl Scan {
    /// A scan for the delimiters of the multipart/form-data `content_type` says.
    pub fn new(content_type: &HeaderValue) -> Result<Scan, BadUpload> {
        let boundary = boundary(content_type)?;
        let finder = memmem::Finder::new(format!("--{boundary}").as_bytes()).into_owned();
        Ok(Scan {
            boundary,
            finder,
            found: Vec::new(),
            covered: 0,
            seen: 0,
            carry: Vec::new(),
            full: false,
        })
    }

    /// Takes the body's next bytes.
    pub fn feed(&mut self, frame: &[u8]) {
        if self.full {
            self.seen += frame.len();
            return;
        }
        let keep = self.finder.needle().len() - 1;
        // Occurrences that start in the carry and end in this frame: none lies wholly in
        // the carry, and none found here can be found again (one that starts in the next
        // carry is not whole yet).
        let mut edge = std::mem::take(&mut self.carry);
        let from_carry = edge.len();
        edge.extend_from_slice(&frame[..frame.len().min(keep)]);
        for at in all(&self.finder, &edge).take_while(|&at| at < from_carry) {
            self.found.push(self.covered + at);
        }
        let (seen, before) = (self.seen, self.found.len());
        let room = FOUND_MAX.saturating_sub(before);
        let in_frame = all(&self.finder, frame).map(|at| seen + at);
        self.found.extend(in_frame.take(room + 1));
        self.seen += frame.len();
        if let Some(&past) = self.found.get(before + room) {
            // One more than there is room for: the scan stops before it.
            self.found.truncate(before + room);
            self.covered = past;
            self.full = true;
            return;
        }
        self.carry = if frame.len() >= keep {
            frame[frame.len() - keep..].to_vec()
        } else {
            edge.split_off(edge.len().saturating_sub(keep))
        };
        self.covered = self.seen - self.carry.len();
    }

    /// The delimiters of `body`, which this scan was fed (one fed a different number of
    /// bytes is not trusted: `body` is searched instead).
    fn delimiters(self, body: &[u8]) -> Delimiters {
        let (found, covered) = match self.seen == body.len() {
            true => (self.found, self.covered),
            false => (Vec::new(), 0),
        };
        Delimiters {
            finder: self.finder,
            found: found.into_iter().peekable(),
            covered,
        }
    }
}

/// A scan's delimiters, looked up in order as the held body is read.
struct Delimiters {
    finder: memmem::Finder<'static>,
    found: std::iter::Peekable<std::vec::IntoIter<usize>>,
    /// Every delimiter that starts before this is in `found`.
    covered: usize,
}

impl Delimiters {
    /// The first delimiter of `body` at or after `from`: one the scan found, or one searched
    /// for past what it covered.
    fn from(&mut self, body: &[u8], from: usize) -> Option<usize> {
        while self.found.next_if(|&at| at < from).is_some() {}
        self.found.peek().copied().or_else(|| {
            let from = from.max(self.covered);
            self.finder.find(body.get(from..)?).map(|i| from + i)
        })
    }

    fn len(&self) -> usize {
        self.finder.needle().len()
    }
}

/// Every occurrence of `finder`'s needle in `hay`, overlapping ones included.
fn all<'a>(finder: &'a memmem::Finder<'static>, hay: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        let at = from + finder.find(hay.get(from..)?)?;
        from = at + 1;
        Some(at)
    })
}

impl Upload {
    /// Reads `body` as the multipart/form-data `content_type` says.
    pub fn read(content_type: &HeaderValue, body: Bytes) -> Result<Upload, BadUpload> {
        Upload::scanned(content_type, body, Scan::new(content_type)?)
    }

    /// Reads `body` as the multipart/form-data `content_type` says, with the delimiters
    /// `scan` found as it was fed exactly the body, frame by frame (a scan fed a different
    /// number of bytes is not used).
    pub fn scanned(
        content_type: &HeaderValue,
        body: Bytes,
        scan: Scan,
    ) -> Result<Upload, BadUpload> {
        let boundary = scan.boundary.clone();
        let mut delimiters = scan.delimiters(&body);
        let Some(mut at) = delimiters.from(&body, 0) else {
            return bad(format!(
                "no part: the boundary '{boundary}' is nowhere in the body"
            ));
        };
        let (mut model, mut parts) = (None, 0usize);
        loop {
            let after = at + delimiters.len();
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
            let Some(next) = delimiters.from(&body, start) else {
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
