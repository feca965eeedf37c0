//! The failures that count toward opening a breaker: [`FailureKind`], the counted subset
//! of the reasons (written and read as their tokens), and [`Failure`], one of them with its
//! particulars.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::reason::{Reason, UnknownReason};

/// A qualifying failure's kind: the reasons that count toward opening a breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Reason", try_from = "Reason")]
pub enum FailureKind {
    Refused,
    Reset,
    Dns,
    Tls,
    ConnectTimeout,
    Hung,
    Timeout,
    Http5xx,
    Malformed,
    StreamCut,
    StreamHung,
    /// 429 whose Retry-After was missing or beyond the deadline.
    RateLimited,
    HealthCheck,
}

impl FailureKind {
    /// Every kind, for listing them (`labrouter replay`'s errors).
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

    pub fn reason(self) -> Reason {
        match self {
            FailureKind::Refused => Reason::Refused,
            FailureKind::Reset => Reason::Reset,
            FailureKind::Dns => Reason::Dns,
            FailureKind::Tls => Reason::Tls,
            FailureKind::ConnectTimeout => Reason::ConnectTimeout,
            FailureKind::Hung => Reason::Hung,
            FailureKind::Timeout => Reason::Timeout,
            FailureKind::Http5xx => Reason::Http5xx,
            FailureKind::Malformed => Reason::Malformed,
            FailureKind::StreamCut => Reason::StreamCut,
            FailureKind::StreamHung => Reason::StreamHung,
            FailureKind::RateLimited => Reason::RateLimited,
            FailureKind::HealthCheck => Reason::HealthCheck,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.reason().as_str()
    }
}

impl From<FailureKind> for Reason {
    fn from(k: FailureKind) -> Reason {
        k.reason()
    }
}

impl TryFrom<Reason> for FailureKind {
    type Error = String;

    fn try_from(r: Reason) -> Result<FailureKind, String> {
        Ok(match r {
            Reason::Refused => FailureKind::Refused,
            Reason::Reset => FailureKind::Reset,
            Reason::Dns => FailureKind::Dns,
            Reason::Tls => FailureKind::Tls,
            Reason::ConnectTimeout => FailureKind::ConnectTimeout,
            Reason::Hung => FailureKind::Hung,
            Reason::Timeout => FailureKind::Timeout,
            Reason::Http5xx => FailureKind::Http5xx,
            Reason::Malformed => FailureKind::Malformed,
            Reason::StreamCut => FailureKind::StreamCut,
            Reason::StreamHung => FailureKind::StreamHung,
            Reason::RateLimited => FailureKind::RateLimited,
            Reason::HealthCheck => FailureKind::HealthCheck,
            other => return Err(format!("'{other}' is not a failure that counts")),
        })
    }
}

impl FromStr for FailureKind {
    type Err = String;

    fn from_str(s: &str) -> Result<FailureKind, String> {
        let reason: Reason = s.parse().map_err(|e: UnknownReason| e.to_string())?;
        FailureKind::try_from(reason)
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

    /// A failure with only its kind, in the kind's plain words (replay traces).
    pub fn of_kind(kind: FailureKind) -> Self {
        Failure::new(kind, kind.reason().describe())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::FailureKind;
    use crate::outcome::reason::{Reason, Skip};

    #[test]
    fn failure_kinds_are_the_reasons_that_count() {
        for r in Reason::ALL {
            if let Ok(k) = FailureKind::try_from(r) {
                assert_eq!(k.reason(), r);
                assert_eq!(r.as_str().parse::<FailureKind>(), Ok(k));
            }
        }
        assert!("busy".parse::<FailureKind>().is_err());
        assert_eq!(
            serde_json::to_string(&FailureKind::Http5xx).unwrap(),
            "\"http_5xx\""
        );
        assert_eq!(
            serde_json::to_string(&Skip::ProbeInFlight).unwrap(),
            "\"probe_in_flight\""
        );
    }
}
