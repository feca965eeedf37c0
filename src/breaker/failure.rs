//! What went wrong with a machine, in the words of SPEC §3.2 and in plain words for people.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A qualifying failure's kind: one row of the SPEC §3.2 table that counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Refused,
    Reset,
    Dns,
    Tls,
    ConnectTimeout,
    /// First-byte timeout whose liveness check failed.
    Hung,
    /// A timeout without more detail (the `total` deadline, or a replay trace's `timeout`).
    Timeout,
    #[serde(rename = "http_5xx")]
    Http5xx,
    Malformed,
    StreamCut,
    StreamHung,
    /// 429 whose Retry-After was missing or beyond the deadline.
    RateLimited,
    HealthCheck,
}

impl FailureKind {
    /// Every kind, for parsing the tokens back (`labrouter replay`).
    pub const ALL: [FailureKind; 13] = [
        FailureKind::Refused,
        FailureKind::Reset,
        FailureKind::Dns,
        FailureKind::Tls,
        FailureKind::ConnectTimeout,
        FailureKind::Hung,
        FailureKind::Timeout,
        FailureKind::Http5xx,
        FailureKind::Malformed,
        FailureKind::StreamCut,
        FailureKind::StreamHung,
        FailureKind::RateLimited,
        FailureKind::HealthCheck,
    ];

    /// The short token naming the kind in `x-labrouter-skipped`, `attempts[].reason`,
    /// SSE error events and replay traces (the same as its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Refused => "refused",
            FailureKind::Reset => "reset",
            FailureKind::Dns => "dns",
            FailureKind::Tls => "tls",
            FailureKind::ConnectTimeout => "connect_timeout",
            FailureKind::Hung => "hung",
            FailureKind::Timeout => "timeout",
            FailureKind::Http5xx => "http_5xx",
            FailureKind::Malformed => "malformed",
            FailureKind::StreamCut => "stream_cut",
            FailureKind::StreamHung => "stream_hung",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::HealthCheck => "health_check",
        }
    }
}

/// One qualifying failure: its kind, plain words for people, and any Retry-After.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    pub detail: String,
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// A failure with only its kind, worded generically (replay traces).
    pub fn of_kind(kind: FailureKind) -> Self {
        let detail = match kind {
            FailureKind::Refused => "connection refused",
            FailureKind::Reset => "connection reset",
            FailureKind::Dns => "DNS lookup failed",
            FailureKind::Tls => "TLS handshake failed",
            FailureKind::ConnectTimeout => "connect timeout",
            FailureKind::Hung => "no response and liveness check failed",
            FailureKind::Timeout => "timeout",
            FailureKind::Http5xx => "HTTP 5xx",
            FailureKind::Malformed => "malformed response",
            FailureKind::StreamCut => "stream cut",
            FailureKind::StreamHung => "stream went silent and liveness check failed",
            FailureKind::RateLimited => "HTTP 429",
            FailureKind::HealthCheck => "health check failed",
        };
        Failure::new(kind, detail)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// A duration as people say it: `250ms`, `5s`, `1m30s`, `15m`.
pub fn words(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if !ms.is_multiple_of(1000) {
        return format!("{:.1}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    if s >= 86_400 && s.is_multiple_of(86_400) {
        return format!("{}d", s / 86_400);
    }
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}
