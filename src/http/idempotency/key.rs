//! The key and what it names: the header checked ([`key_of`]), the slot its answer lives
//! in (the owner and a hash of the key) and the request's fingerprint.

use axum::http::{HeaderMap, HeaderName};
use sha2::{Digest, Sha256};

use crate::http::error::{AppError, Code};
use crate::http::owner::{hex, Owner};

/// The request header.
pub static HEADER: HeaderName = HeaderName::from_static("idempotency-key");
/// The longest key, in characters.
pub const KEY_MAX: usize = 255;

/// The request's `Idempotency-Key`, checked; `None` when it sent none. A Structured Field
/// string (`"abc"`, as the IETF draft writes it) is the same key as its contents (`abc`).
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, AppError> {
    let mut values = headers.get_all(&HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let bad = |why: String| Err(AppError::new(Code::InvalidIdempotencyKey, why));
    if values.next().is_some() {
        return bad("send one Idempotency-Key header, not several".into());
    }
    let Ok(raw) = value.to_str() else {
        return bad("Idempotency-Key must be visible ASCII".into());
    };
    let key = unquote(raw.trim());
    if key.is_empty() {
        return bad("Idempotency-Key is empty: send a unique value (a UUID, say)".into());
    }
    if key.len() > KEY_MAX {
        return bad(format!(
            "Idempotency-Key is {} characters long; at most {KEY_MAX} are allowed",
            key.len()
        ));
    }
    Ok(Some(key))
}

/// `"a\"b"` → `a"b`; anything not a quoted string is taken as it is.
fn unquote(raw: &str) -> String {
    let Some(inner) = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| raw.len() >= 2)
    else {
        return raw.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// The error for a key sent on a streamed request: nothing sent is silently ignored.
pub fn streamed() -> AppError {
    AppError::new(
        Code::IdempotencyKeyOnStream,
        "Idempotency-Key is only for non-streamed requests: a stream cannot be replayed; drop the header or send \"stream\": false",
    )
}

pub(super) fn reused() -> AppError {
    AppError::new(
        Code::IdempotencyKeyReused,
        "this Idempotency-Key was already used with a different request: resend that request unchanged to get its answer, or use a new key",
    )
}

/// Where a keyed answer lives: its owner and the hash of its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Slot {
    pub(super) owner: String,
    pub(super) key: String,
}

/// A keyed request: its slot and its fingerprint.
#[derive(Clone, Debug)]
pub struct Keyed {
    pub(super) slot: Slot,
    pub(super) fingerprint: String,
}

impl Keyed {
    /// `key` sent by `owner` on `path` with `body` (the raw request bytes).
    pub fn new(owner: &Owner, key: &str, path: &str, body: &[u8]) -> Keyed {
        let digest = |parts: [&[u8]; 3]| {
            let mut h = Sha256::new();
            for p in parts {
                h.update(p);
            }
            hex(&h.finalize())
        };
        Keyed {
            slot: Slot {
                owner: owner.0.clone(),
                key: digest([owner.0.as_bytes(), b"\0", key.as_bytes()]),
            },
            fingerprint: digest([path.as_bytes(), b"\0", body]),
        }
    }

    /// The hash of the key, scoped by its owner: what the store keeps.
    pub fn key_hash(&self) -> &str {
        &self.slot.key
    }

    /// The fingerprint of the request.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HEADER.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn keys_are_checked_and_quoted_strings_unquoted() {
        assert_eq!(key_of(&headers(&[])).unwrap(), None);
        assert_eq!(key_of(&headers(&["abc"])).unwrap().as_deref(), Some("abc"));
        assert_eq!(
            key_of(&headers(&["\"abc\""])).unwrap().as_deref(),
            Some("abc")
        );
        assert_eq!(
            key_of(&headers(&[r#""a\"b""#])).unwrap().as_deref(),
            Some("a\"b")
        );
        let long = "k".repeat(KEY_MAX);
        assert_eq!(key_of(&headers(&[&long])).unwrap(), Some(long.clone()));
        for bad in [vec![""], vec!["\"\""], vec!["a", "b"]] {
            let e = key_of(&headers(&bad)).unwrap_err();
            assert_eq!(e.code, Code::InvalidIdempotencyKey, "{bad:?}");
        }
        let e = key_of(&headers(&[&format!("{long}k")])).unwrap_err();
        assert!(e.message.contains("256"), "{}", e.message);
    }

    #[test]
    fn the_key_is_scoped_by_owner_and_the_fingerprint_by_path() {
        let a = Keyed::new(&Owner::of_key("one"), "k", "/chat/completions", b"{}");
        let b = Keyed::new(&Owner::of_key("two"), "k", "/chat/completions", b"{}");
        let c = Keyed::new(&Owner::of_key("one"), "k", "/embeddings", b"{}");
        assert_ne!(a.slot, b.slot);
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.slot, c.slot);
        assert_ne!(a.fingerprint, c.fingerprint);
        assert_eq!(a.slot.key.len(), 64, "a hash, never the key");
    }
}
