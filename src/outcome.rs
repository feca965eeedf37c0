//! The words for what happened, in one place: why a target did not serve ([`Reason`]), the
//! breaker's phase ([`Phase`]), whose fault it was ([`Fault`]), what the breaker records of
//! it ([`Effect`]), and one failed or skipped target as every view renders it
//! ([`Attempted`]). Headers, error bodies, metrics, the ledger, alerts, the digest, the
//! demo's narration and replay all read these types; none of them spells a reason, a phase
//! or a status by hand.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod attempted;
mod envelope;
pub mod ids;
pub mod phase;
pub mod task;
pub mod words;

pub use attempted::{Attempted, Effect, Fault, Held, Unserved};
pub use envelope::Envelope;
pub use ids::{MachineId, ModelId, RouteId};
pub use phase::Phase;
pub use task::{AttemptOutcome, Delivery, TaskCode, TaskStatus};
pub use words::words;

/// Which OpenAI endpoint a request is for; decides the path and what a valid answer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat = 0,
    Completions = 1,
    Embeddings = 2,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/chat/completions",
            Endpoint::Completions => "/completions",
            Endpoint::Embeddings => "/embeddings",
        }
    }
}

/// What an Ollama client called (SPEC §11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `POST /api/chat`
    Chat,
    /// `POST /api/generate`
    Generate,
    /// `POST /api/embed`
    Embed,
    /// `POST /api/embeddings` (the older single-vector form)
    Embeddings,
}

impl Call {
    /// The path on an Ollama server.
    pub fn path(self) -> &'static str {
        match self {
            Call::Chat => "/api/chat",
            Call::Generate => "/api/generate",
            Call::Embed => "/api/embed",
            Call::Embeddings => "/api/embeddings",
        }
    }

    /// Whether the call makes vectors (it never streams and never changes model).
    pub fn embeds(self) -> bool {
        matches!(self, Call::Embed | Call::Embeddings)
    }
}

/// What one attempt sends to a machine: an OpenAI endpoint (every machine), or an Ollama
/// call (an Ollama server, natively).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi(Endpoint),
    Ollama(Call),
}

impl From<Endpoint> for Wire {
    fn from(e: Endpoint) -> Wire {
        Wire::OpenAi(e)
    }
}

/// Every reason a target did not serve: a skip (nothing sent), a counted failure (a row of
/// SPEC §3.2 that counts) or an uncounted outcome. Its token (`as_str`, the serde name)
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
    /// 400/413/422 and other 4xx: the request's own fault, passed through.
    ClientError,
    /// The store could not be read at start: the breaker starts open (fail closed).
    StateUnreadable,
}

impl Reason {
    pub const ALL: [Reason; 21] = [
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
    use super::*;

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
