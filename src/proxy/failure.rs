//! The answer when no target in the chain served (docs/api.md): OpenAI's error envelope
//! ([`Envelope`]) plus why, per target, in order; `Retry-After` when a breaker knows when it
//! will admit again. Everything here renders what the walk recorded; nothing reads a
//! breaker again.

use std::borrow::Cow;

use axum::http::header::RETRY_AFTER;
use axum::http::HeaderValue;
use axum::response::Response;
use serde::Serialize;

use crate::fleet::Fleet;
use crate::outcome::{Attempted, Envelope, Reason, Unserved};

/// What the answer adds to OpenAI's envelope: the route, the soonest a breaker admits
/// again, and every target in order.
#[derive(Serialize)]
struct Chain<'a> {
    route: &'a str,
    retry_after_ms: Option<u64>,
    attempts: Vec<Entry<'a>>,
}

/// One target in `attempts`.
#[derive(Serialize)]
struct Entry<'a> {
    target: Cow<'a, str>,
    outcome: crate::outcome::AttemptOutcome,
    reason: Reason,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    retry_after_ms: Option<u64>,
}

pub fn nothing_served(fleet: &Fleet, route: &str, attempts: &[Attempted]) -> Response {
    let unserved = Unserved::of(attempts);
    let retry_after = attempts.iter().filter_map(|a| a.retry_after).min();
    let name = |a: &Attempted| fleet.target_name(a.target);
    let parts: Vec<String> = attempts.iter().map(|a| a.describe(&name(a))).collect();
    let message = if parts.is_empty() {
        format!("route '{route}': no target available")
    } else {
        format!("route '{route}': {}", parts.join("; "))
    };
    let ms = |d: std::time::Duration| d.as_millis().try_into().unwrap_or(u64::MAX);
    let more = Chain {
        route,
        retry_after_ms: retry_after.map(ms),
        attempts: attempts
            .iter()
            .map(|a| Entry {
                target: name(a),
                outcome: a.outcome(),
                reason: a.reason,
                detail: a.was_sent().then_some(a.detail.as_str()),
                retry_after_ms: a.retry_after.map(ms),
            })
            .collect(),
    };
    let mut resp =
        Envelope::new(unserved.kind(), unserved.code(), &message, more).respond(unserved.status());
    if let Some(ra) = retry_after {
        let secs = ra.as_millis().div_ceil(1000).max(1);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(RETRY_AFTER, v);
        }
    }
    resp
}
