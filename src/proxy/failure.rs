//! The answer when no target in the chain served (SPEC §4): the OpenAI error envelope plus
//! why, per target, in order; `Retry-After` when a breaker knows when it will admit again.

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{Attempt, AttemptKind};
use crate::breaker::failure::words;
use crate::breaker::{Phase, Skip};
use crate::lab::Lab;
use crate::upstream::Seen;

pub fn nothing_served(lab: &Lab, route: &str, attempts: &[Attempt]) -> Response {
    // A client error or a spent deadline ends the walk and decides the answer.
    if let Some(last) = attempts.last() {
        if let AttemptKind::Failed {
            seen:
                Seen::PassThrough {
                    status,
                    content_type,
                    body,
                },
            ..
        } = &last.kind
        {
            let mut resp = Response::new(Body::from(body.clone()));
            *resp.status_mut() = *status;
            if let Some(ct) = content_type {
                resp.headers_mut().insert(CONTENT_TYPE, ct.clone());
            }
            return resp;
        }
    }
    let (status, kind) = verdict(attempts);
    let retry_after = attempts
        .iter()
        .filter_map(|a| match &a.kind {
            AttemptKind::Skipped { retry_after, .. } | AttemptKind::Failed { retry_after, .. } => {
                *retry_after
            }
        })
        .min();
    let parts: Vec<String> = attempts.iter().map(|a| describe(lab, a)).collect();
    let message = if parts.is_empty() {
        format!("route '{route}': no target available")
    } else {
        format!("route '{route}': {}", parts.join("; "))
    };
    let list: Vec<Value> = attempts
        .iter()
        .map(|a| {
            let target = lab.registry.target_name(a.model);
            match &a.kind {
                AttemptKind::Skipped { skip, retry_after } => json!({
                    "target": target, "outcome": "skipped", "reason": skip.as_str(),
                    "retry_after_ms": retry_after.map(|d| d.as_millis() as u64),
                }),
                AttemptKind::Failed {
                    reason,
                    detail,
                    retry_after,
                    ..
                } => json!({
                    "target": target, "outcome": "failed", "reason": reason, "detail": detail,
                    "retry_after_ms": retry_after.map(|d| d.as_millis() as u64),
                }),
            }
        })
        .collect();
    let code = match kind {
        "timeout" => "deadline_exceeded",
        "rate_limited" => "rate_limited",
        _ => "no_target_available",
    };
    let body = json!({"error": {
        "type": kind, "code": code, "message": message, "route": route,
        "retry_after_ms": retry_after.map(|d| d.as_millis() as u64),
        "attempts": list,
    }});
    let mut resp = (status, axum::Json(body)).into_response();
    if let Some(ra) = retry_after {
        let secs = ra.as_millis().div_ceil(1000).max(1);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(RETRY_AFTER, v);
        }
    }
    resp
}

/// Status and error type from what happened to every target.
fn verdict(attempts: &[Attempt]) -> (StatusCode, &'static str) {
    let failed: Vec<&Seen> = attempts
        .iter()
        .filter_map(|a| match &a.kind {
            AttemptKind::Failed { seen, .. } => Some(seen),
            AttemptKind::Skipped { .. } => None,
        })
        .collect();
    let skips: Vec<Skip> = attempts
        .iter()
        .filter_map(|a| match a.kind {
            AttemptKind::Skipped { skip, .. } => Some(skip),
            AttemptKind::Failed { .. } => None,
        })
        .collect();
    if failed.iter().any(|s| **s == Seen::Timeout) {
        return (StatusCode::GATEWAY_TIMEOUT, "timeout");
    }
    let rate_limited = failed.iter().all(|s| **s == Seen::RateLimited)
        && skips.iter().all(|s| *s == Skip::RateLimited);
    if rate_limited && !attempts.is_empty() {
        return (StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    }
    if !failed.is_empty() {
        if failed.iter().any(|s| **s == Seen::BadGateway) {
            return (StatusCode::BAD_GATEWAY, "upstream_error");
        }
        return (StatusCode::SERVICE_UNAVAILABLE, "upstream_error");
    }
    if !skips.is_empty() && skips.iter().all(|s| *s == Skip::ProbeInFlight) {
        return (StatusCode::SERVICE_UNAVAILABLE, "probe_in_flight");
    }
    (StatusCode::SERVICE_UNAVAILABLE, "circuit_open")
}

/// One target in plain words: "coder-gpu@gpu-box open (3 consecutive failures, last: ...)".
fn describe(lab: &Lab, a: &Attempt) -> String {
    let target = lab.registry.target_name(a.model);
    match &a.kind {
        AttemptKind::Failed { detail, .. } => format!("{target} failed ({detail})"),
        AttemptKind::Skipped { skip, retry_after } => {
            let machine = lab.registry.models[a.model].machine;
            let b = lab.machines.snapshot(machine).breaker;
            let last = b.last_reason.as_deref().unwrap_or("no reason recorded");
            let left = retry_after
                .map(|d| format!(", {} left", words(d)))
                .unwrap_or_default();
            match skip {
                Skip::CircuitOpen if b.failures > 0 && b.phase == Phase::Open => {
                    format!(
                        "{target} open ({} consecutive failures, last: {last}{left})",
                        b.failures
                    )
                }
                Skip::CircuitOpen => format!("{target} open ({last}{left})"),
                Skip::ProbeInFlight => format!("{target} probe in flight"),
                Skip::RateLimited => format!("{target} rate limited by the machine{left}"),
                Skip::AuthFailed => {
                    format!("{target} paused: the machine refused our credentials ({last})")
                }
                Skip::ForcedOpen => format!("{target} opened by hand"),
                Skip::Busy => format!("{target} busy (max_concurrency in use)"),
            }
        }
    }
}
