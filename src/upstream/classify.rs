//! SPEC §3.2 in code: reading transport errors, Retry-After and answers into decisions.

use std::error::Error as _;
use std::time::Duration;

use reqwest::header::HeaderValue;
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::Endpoint;
use crate::breaker::failure::words;
use crate::breaker::{Failure, FailureKind};

/// A failed `send`: the request never got response headers.
pub fn send_error(e: &reqwest::Error, connect_timeout: Duration) -> Failure {
    let chain = chain_text(e);
    if e.is_connect() {
        if e.is_timeout() || chain.contains("timed out") {
            return Failure::new(
                FailureKind::ConnectTimeout,
                format!("connect timeout after {}", words(connect_timeout)),
            );
        }
        if io_kind(e) == Some(std::io::ErrorKind::ConnectionRefused) {
            return Failure::new(FailureKind::Refused, "connection refused");
        }
        if chain.contains("dns error") || chain.contains("failed to lookup") {
            return Failure::new(FailureKind::Dns, format!("DNS lookup failed: {}", root(e)));
        }
        if chain.contains("tls") || chain.contains("certificate") || chain.contains("handshake") {
            return Failure::new(FailureKind::Tls, format!("TLS failure: {}", root(e)));
        }
        return Failure::new(FailureKind::Refused, format!("connect failed: {}", root(e)));
    }
    Failure::new(FailureKind::Reset, format!("connection reset: {}", root(e)))
}

fn io_kind(e: &reqwest::Error) -> Option<std::io::ErrorKind> {
    let mut src = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        src = s.source();
    }
    None
}

fn chain_text(e: &reqwest::Error) -> String {
    let mut out = String::new();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(&s.to_string().to_lowercase());
        out.push(' ');
        src = s.source();
    }
    out
}

/// The innermost cause, which names what happened without the request URL.
pub fn root(e: &reqwest::Error) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

/// The longest `Retry-After` believed (SPEC §7): a machine that asks for more is clamped.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(86_400);

/// `Retry-After` as delta-seconds (the form LLM servers send, also with a fraction) or an
/// HTTP date, clamped to [`RETRY_AFTER_MAX`]; nonsense (negative, not finite, unreadable)
/// is `None`, as if the header were absent. Never panics, whatever the machine sent.
pub fn retry_after(v: &HeaderValue) -> Option<Duration> {
    retry_after_str(v.to_str().ok()?)
}

/// [`retry_after`] on the header's text.
pub fn retry_after_str(s: &str) -> Option<Duration> {
    let s = s.trim();
    let max = RETRY_AFTER_MAX;
    if let Ok(secs) = s.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(max));
    }
    if let Ok(secs) = s.parse::<f64>() {
        let ok = secs.is_finite() && secs >= 0.0;
        return ok.then(|| Duration::from_secs_f64(secs.min(max.as_secs_f64())));
    }
    let when = jiff::fmt::rfc2822::parse(s).ok()?.timestamp();
    let left = when.duration_since(jiff::Timestamp::now());
    // A date in the past means "now"; one beyond a day is clamped like any other value.
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO).min(max))
}

#[derive(Deserialize)]
struct Completion {
    #[allow(dead_code)]
    choices: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
struct Embeddings {
    #[allow(dead_code)]
    data: Vec<IgnoredAny>,
}

/// A 200 must be a real completion: JSON with `choices` (or `data` for embeddings).
pub fn valid_completion(endpoint: Endpoint, body: &[u8]) -> Result<(), String> {
    let parsed = match endpoint {
        Endpoint::Chat | Endpoint::Completions => {
            serde_json::from_slice::<Completion>(body).map(|_| ())
        }
        Endpoint::Embeddings => serde_json::from_slice::<Embeddings>(body).map(|_| ()),
    };
    parsed.map_err(|e| {
        let what = if endpoint == Endpoint::Embeddings {
            "data"
        } else {
            "choices"
        };
        format!("expected JSON with '{what}' ({e})")
    })
}
