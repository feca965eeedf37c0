//! Why a target did not serve, as one vocabulary: [`Reason`] and its token (what headers,
//! attempt lists, SSE error events, metrics labels and replay traces carry), its plain words,
//! and [`Skip`], the reasons a call is held back with before anything is sent.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Every reason a target did not serve: a skip (nothing sent), a counted failure (one the
/// breaker counts; docs/api.md has the classification table) or an uncounted outcome. Its token (`as_str`, the serde name)
/// is what `x-labrouter-skipped`, `attempts[].reason`, SSE error events, metrics labels and
/// replay traces carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    // Skips: a breaker or the bulkhead held the call back; never the machine's failure.
    CircuitOpen,
    ProbeInFlight,
    ForcedOpen,
    /// `max_concurrency` in use.
    Busy,
    // Counted failures.
    Refused,
    Reset,
    Dns,
    Tls,
    ConnectTimeout,
    /// First-byte timeout whose liveness check failed.
    Hung,
    /// No complete answer within `timeouts.total` (the machine's, or the request's).
    Timeout,
    #[serde(rename = "http_5xx")]
    Http5xx,
    Malformed,
    StreamCut,
    StreamHung,
    HealthCheck,
    // Both: a 429 is a skip while its Retry-After runs, uncounted when it fits the
    // deadline and counted when it does not; 401/403 pauses the machine.
    RateLimited,
    AuthFailed,
    // Uncounted.
    /// 404: the model is not on that machine (a registry problem).
    NotFound,
    /// 501, 405: the machine does not serve that endpoint (a registry problem).
    Unsupported,
    /// 400/413/422 and other 4xx: the request's own fault, passed through.
    ClientError,
    /// The store could not be read at start: the breaker starts open (fail closed).
    StateUnreadable,
}

impl Reason {
    pub const ALL: [Reason; 22] = [
        Reason::CircuitOpen,
        Reason::ProbeInFlight,
        Reason::ForcedOpen,
        Reason::Busy,
        Reason::Refused,
        Reason::Reset,
        Reason::Dns,
        Reason::Tls,
        Reason::ConnectTimeout,
        Reason::Hung,
        Reason::Timeout,
        Reason::Http5xx,
        Reason::Malformed,
        Reason::StreamCut,
        Reason::StreamHung,
        Reason::HealthCheck,
        Reason::RateLimited,
        Reason::AuthFailed,
        Reason::NotFound,
        Reason::Unsupported,
        Reason::ClientError,
        Reason::StateUnreadable,
    ];

    /// The token (the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CircuitOpen => "circuit_open",
            Reason::ProbeInFlight => "probe_in_flight",
            Reason::ForcedOpen => "forced_open",
            Reason::Busy => "busy",
            Reason::Refused => "refused",
            Reason::Reset => "reset",
            Reason::Dns => "dns",
            Reason::Tls => "tls",
            Reason::ConnectTimeout => "connect_timeout",
            Reason::Hung => "hung",
            Reason::Timeout => "timeout",
            Reason::Http5xx => "http_5xx",
            Reason::Malformed => "malformed",
            Reason::StreamCut => "stream_cut",
            Reason::StreamHung => "stream_hung",
            Reason::HealthCheck => "health_check",
            Reason::RateLimited => "rate_limited",
            Reason::AuthFailed => "auth_failed",
            Reason::NotFound => "not_found",
            Reason::Unsupported => "unsupported",
            Reason::ClientError => "client_error",
            Reason::StateUnreadable => "state_unreadable",
        }
    }

    /// A failure that says the machine is down rather than that the request is at fault:
    /// it could not be reached, or hung. A task whose walk met only these uses no attempt.
    pub fn means_down(self) -> bool {
        matches!(
            self,
            Reason::Refused
                | Reason::Reset
                | Reason::Dns
                | Reason::Tls
                | Reason::ConnectTimeout
                | Reason::Hung
        )
    }

    /// The reason in plain words, without particulars: "connection refused".
    pub fn describe(self) -> &'static str {
        match self {
            Reason::CircuitOpen => "breaker open, skipped without a connection",
            Reason::ProbeInFlight => "half-open, another request is the probe",
            Reason::ForcedOpen => "opened by hand",
            Reason::Busy => "all its slots busy",
            Reason::Refused => "connection refused",
            Reason::Reset => "connection reset",
            Reason::Dns => "DNS lookup failed",
            Reason::Tls => "TLS handshake failed",
            Reason::ConnectTimeout => "connect timeout",
            Reason::Hung => "no answer, liveness check failed",
            Reason::Timeout => "timeout",
            Reason::Http5xx => "HTTP 5xx",
            Reason::Malformed => "malformed response",
            Reason::StreamCut => "stream cut",
            Reason::StreamHung => "stream went silent and liveness check failed",
            Reason::HealthCheck => "health check failed",
            Reason::RateLimited => "HTTP 429",
            Reason::AuthFailed => "the machine refused our credentials",
            Reason::NotFound => "model not found on the machine",
            Reason::Unsupported => "the machine does not serve this endpoint",
            Reason::ClientError => "the machine refused the request",
            Reason::StateUnreadable => "stored state unreadable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token that names no reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason '{0}'")]
pub struct UnknownReason(pub String);

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(s: &str) -> Result<Reason, UnknownReason> {
        Reason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(crate::text::bounded(s)))
    }
}

/// Why a call was not sent to a machine: the reasons a breaker or the bulkhead skips with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "Reason")]
pub enum Skip {
    CircuitOpen,
    ProbeInFlight,
    RateLimited,
    AuthFailed,
    ForcedOpen,
    /// The machine's `max_concurrency` is in use (decided outside the pure breaker).
    Busy,
}

impl Skip {
    /// Every skip, in declaration order: `Skip::ALL[s as usize] == s`.
    pub const ALL: [Skip; 6] = [
        Skip::CircuitOpen,
        Skip::ProbeInFlight,
        Skip::RateLimited,
        Skip::AuthFailed,
        Skip::ForcedOpen,
        Skip::Busy,
    ];

    pub fn reason(self) -> Reason {
        match self {
            Skip::CircuitOpen => Reason::CircuitOpen,
            Skip::ProbeInFlight => Reason::ProbeInFlight,
            Skip::RateLimited => Reason::RateLimited,
            Skip::AuthFailed => Reason::AuthFailed,
            Skip::ForcedOpen => Reason::ForcedOpen,
            Skip::Busy => Reason::Busy,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.reason().as_str()
    }
}

impl From<Skip> for Reason {
    fn from(s: Skip) -> Reason {
        s.reason()
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn every_skip_is_at_its_own_index_of_all() {
        for (i, s) in super::Skip::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i, "{s:?}");
        }
    }

    #[test]
    fn every_reason_parses_back_from_its_token_and_its_serde_name() {
        for r in Reason::ALL {
            assert_eq!(r.as_str().parse::<Reason>(), Ok(r));
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), r);
        }
        assert!("nope".parse::<Reason>().is_err());
    }
}
