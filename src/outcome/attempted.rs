//! One target's part in a request, built once per attempt, and what the client is told
//! when no target served (docs/api.md).

use std::time::Duration;

use axum::http::StatusCode;
use tokio::time::Instant;

use super::{words, AttemptOutcome, FailureKind, Phase, Reason, Skip};
use crate::outcome::ModelId;

/// Whose fault an attempt's end was, and so what the client sees if nothing else serves
/// (docs/api.md "Breaker classification"'s last column), after pingora's error source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Held back by a breaker or the bulkhead: nothing was sent.
    NotSent,
    /// The machine could not be reached, hung, or refused our credentials: 503.
    Unreachable,
    /// The machine answered, but badly (5xx, malformed, cut, 404): 502.
    BadAnswer,
    /// The machine asked us to wait (429).
    Throttled,
    /// The machine gave no complete answer within its own `timeouts.total`: 504.
    TooSlow,
    /// The request's own fault (400, 413, 422): the machine's answer goes back as is.
    Client,
    /// The request's deadline (the longest `total` of its chain) ran out: 504.
    Deadline,
}

impl Fault {
    /// The chain may try its next target: the request is neither at fault nor out of time.
    pub fn may_fail_over(self) -> bool {
        !matches!(self, Fault::Client | Fault::Deadline)
    }
}

/// What the machine's breaker records of an attempt (docs/api.md "Breaker classification"'s breaker
/// column).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Effect {
    /// Nothing: not sent, or no verdict on the machine (400, 404, the request's deadline).
    None,
    /// A qualifying failure.
    Counted(FailureKind),
    /// 429 whose Retry-After fits the deadline: skipped until then, not counted.
    Throttled(Instant),
    /// 401/403: the machine is paused until a reload or a reset.
    Paused,
}

/// What a breaker showed when it held a call back, read at that moment, so the words for
/// the skip say what the skip saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub phase: Phase,
    pub failures: u32,
    pub last_reason: Option<String>,
}

/// One target that did not serve, as headers, error bodies, metrics and narration show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempted {
    pub target: ModelId,
    pub reason: Reason,
    pub fault: Fault,
    pub effect: Effect,
    /// Plain words: "connection refused", "HTTP 500"; for a skip, the breaker as it was:
    /// "open (3 consecutive failures, last: HTTP 500, 41s left)".
    pub detail: String,
    /// When this target may admit again (a skip's cooldown, a machine's Retry-After).
    pub retry_after: Option<Duration>,
    /// The call was its machine's probe (the chain walk sets it).
    pub probe: bool,
    /// Its machine's breaker was still closed once the call ended (the chain walk sets it).
    pub closed_after: bool,
}

impl Attempted {
    /// A call that was sent and did not serve.
    pub fn failed(
        target: ModelId,
        reason: Reason,
        fault: Fault,
        effect: Effect,
        detail: impl Into<String>,
    ) -> Attempted {
        Attempted {
            target,
            reason,
            fault,
            effect,
            detail: detail.into(),
            retry_after: None,
            probe: false,
            closed_after: false,
        }
    }

    /// A qualifying failure of the machine, which the client sees as `fault`.
    pub fn counted(
        target: ModelId,
        kind: FailureKind,
        fault: Fault,
        detail: impl Into<String>,
    ) -> Attempted {
        Attempted::failed(target, kind.reason(), fault, Effect::Counted(kind), detail)
    }

    /// A call a breaker or the bulkhead held back.
    pub fn skipped(
        target: ModelId,
        skip: Skip,
        retry_after: Option<Duration>,
        held: &Held,
    ) -> Attempted {
        let last = held.last_reason.as_deref().unwrap_or("no reason recorded");
        let left = retry_after
            .map(|d| format!(", {} left", words(d)))
            .unwrap_or_default();
        let detail = match skip {
            Skip::CircuitOpen if held.failures > 0 && held.phase == Phase::Open => format!(
                "open ({} consecutive failures, last: {last}{left})",
                held.failures
            ),
            Skip::CircuitOpen => format!("open ({last}{left})"),
            Skip::ProbeInFlight => "probe in flight".to_string(),
            Skip::RateLimited => format!("rate limited by the machine{left}"),
            Skip::AuthFailed => format!("paused ({last})"),
            Skip::ForcedOpen => "opened by hand".to_string(),
            Skip::Busy => "busy (max_concurrency in use)".to_string(),
        };
        Attempted {
            target,
            reason: skip.reason(),
            fault: Fault::NotSent,
            effect: Effect::None,
            detail,
            retry_after,
            probe: false,
            closed_after: false,
        }
    }

    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Attempted {
        self.retry_after = retry_after;
        self
    }

    pub fn was_sent(&self) -> bool {
        self.fault != Fault::NotSent
    }

    /// `skipped` or `failed`, as `attempts[].outcome` says it.
    pub fn outcome(&self) -> AttemptOutcome {
        if self.was_sent() {
            AttemptOutcome::Failed
        } else {
            AttemptOutcome::Skipped
        }
    }

    /// Whether this try costs a task one of its attempts: it failed on a machine that stayed
    /// closed after it, was not a probe, and says nothing of the machine being down — the
    /// machine is healthy enough, so the request may be at fault. A machine that is down,
    /// a failure on which a breaker opened and a failed probe cost nothing: the task waits.
    pub fn charges_task(&self) -> bool {
        self.was_sent()
            && self.closed_after
            && !self.probe
            && !self.reason.means_down()
            && self.fault != Fault::Deadline
    }

    /// Whether this try was its machine's probe, and the probe failed.
    pub fn failed_probe(&self) -> bool {
        self.probe && matches!(self.effect, Effect::Counted(_))
    }

    /// The target in plain words: "coder-gpu@gpu-box failed (HTTP 500)".
    pub fn describe(&self, target: &str) -> String {
        if self.was_sent() {
            format!("{target} failed ({})", self.detail)
        } else {
            format!("{target} {}", self.detail)
        }
    }
}

/// Why a request got no answer when no target served, by docs/api.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unserved {
    /// 504: a deadline ran out.
    Timeout,
    /// 429: every target asked us to wait.
    RateLimited,
    /// 502: a target was tried and answered badly.
    BadGateway,
    /// 503: targets were tried and could not be reached.
    Unavailable,
    /// 503: the only reason left is a probe under way.
    ProbeInFlight,
    /// 503: every target was skipped by a breaker.
    CircuitOpen,
}

impl Unserved {
    /// What happened to every target decides the answer.
    pub fn of(attempts: &[Attempted]) -> Unserved {
        let sent = || attempts.iter().filter(|a| a.was_sent());
        let held = || attempts.iter().filter(|a| !a.was_sent());
        if sent().any(|a| matches!(a.fault, Fault::TooSlow | Fault::Deadline)) {
            return Unserved::Timeout;
        }
        let throttled = sent().all(|a| a.fault == Fault::Throttled)
            && held().all(|a| a.reason == Reason::RateLimited);
        if throttled && !attempts.is_empty() {
            return Unserved::RateLimited;
        }
        if sent().next().is_some() {
            if sent().any(|a| a.fault == Fault::BadAnswer) {
                return Unserved::BadGateway;
            }
            return Unserved::Unavailable;
        }
        if held().next().is_some() && held().all(|a| a.reason == Reason::ProbeInFlight) {
            return Unserved::ProbeInFlight;
        }
        Unserved::CircuitOpen
    }

    pub fn status(self) -> StatusCode {
        match self {
            Unserved::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Unserved::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Unserved::BadGateway => StatusCode::BAD_GATEWAY,
            Unserved::Unavailable | Unserved::ProbeInFlight | Unserved::CircuitOpen => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// The error body's `type`.
    pub fn kind(self) -> &'static str {
        match self {
            Unserved::Timeout => "timeout",
            Unserved::RateLimited => "rate_limited",
            Unserved::BadGateway | Unserved::Unavailable => "upstream_error",
            Unserved::ProbeInFlight => "probe_in_flight",
            Unserved::CircuitOpen => "circuit_open",
        }
    }

    /// The error body's `code`.
    pub fn code(self) -> &'static str {
        match self {
            Unserved::Timeout => "deadline_exceeded",
            Unserved::RateLimited => "rate_limited",
            _ => "no_target_available",
        }
    }
}
