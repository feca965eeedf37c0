//! The chain walk: skip what a breaker holds back, attempt the next target, classify,
//! record, and move on while nothing has reached the client. Every attempt's outcome is
//! kept, in order, for the response headers and for the error when nothing served.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use crate::breaker::Skip;
use crate::lab::Lab;
use crate::machines::Outcome;
use crate::request::Parsed;
use crate::route::Decision;
use crate::upstream::{relay, Answer, Endpoint, Seen};

mod failure;

pub use failure::nothing_served;

pub static ROUTE: HeaderName = HeaderName::from_static("x-labrouter-route");
pub static TARGET: HeaderName = HeaderName::from_static("x-labrouter-target");
pub static SKIPPED: HeaderName = HeaderName::from_static("x-labrouter-skipped");

/// One target's part in a request, in chain order.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub model: usize,
    pub kind: AttemptKind,
}

#[derive(Clone, Debug)]
pub enum AttemptKind {
    /// Not sent: a breaker (or the bulkhead) held it back.
    Skipped {
        skip: Skip,
        retry_after: Option<Duration>,
    },
    /// Sent and failed.
    Failed {
        seen: Seen,
        reason: &'static str,
        detail: String,
        retry_after: Option<Duration>,
    },
}

/// Serves one parsed request along `decision`'s chain. `wait` is `x-labrouter-wait`.
pub async fn forward(
    lab: Arc<Lab>,
    endpoint: Endpoint,
    parsed: Parsed,
    decision: Decision,
    wait: Option<Duration>,
) -> Response {
    let reg = &lab.registry;
    let chain = decision.chain(reg);
    let started = Instant::now();
    let longest = chain
        .iter()
        .map(|&m| reg.machines[reg.models[m].machine].timeouts.total)
        .max()
        .unwrap_or(Duration::from_secs(600));
    let deadline = crate::clock::after(started, longest);
    let wait_until = wait.map(|w| crate::clock::after(started, w).min(deadline));
    let label = decision.label(reg).to_string();
    let first_backend = chain
        .first()
        .map_or("", |&m| reg.models[m].backend.as_str());
    let mut attempts: Vec<Attempt> = Vec::new();

    loop {
        // Registered before the walk, so a change during the walk is not missed.
        let changed = lab.machines.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();

        for &model in chain {
            // Embeddings fall back only to the same backend model: vectors of another model
            // would corrupt the client's index without a word (SPEC §4).
            if endpoint == Endpoint::Embeddings && reg.models[model].backend != first_backend {
                continue;
            }
            let machine = reg.models[model].machine;
            let lease = match lab.machines.admit(machine) {
                Ok(lease) => lease,
                Err(rej) => {
                    metrics::counter!("labrouter_local_rejections_total",
                        "machine" => reg.machines[machine].name.clone(), "reason" => rej.skip.as_str())
                    .increment(1);
                    attempts.push(Attempt {
                        model,
                        kind: AttemptKind::Skipped {
                            skip: rej.skip,
                            retry_after: rej.retry_after,
                        },
                    });
                    continue;
                }
            };
            let body = parsed.body_for(&reg.models[model].backend);
            let upstream = &lab.upstreams[machine];
            match upstream.attempt(endpoint, body, deadline).await {
                Ok(Answer::Full {
                    status,
                    content_type,
                    body,
                }) => {
                    lease.finish(Outcome::Success);
                    served(&lab, &label, model, &attempts, started);
                    let mut resp = Response::new(Body::from(body));
                    *resp.status_mut() = status;
                    if let Some(ct) = content_type {
                        resp.headers_mut()
                            .insert(axum::http::header::CONTENT_TYPE, ct);
                    }
                    mark(resp.headers_mut(), &lab, &label, Some(model), &attempts);
                    return resp;
                }
                Ok(Answer::Stream {
                    status,
                    content_type,
                    first,
                    rest,
                }) => {
                    served(&lab, &label, model, &attempts, started);
                    let target = reg.target_name(model);
                    let body = relay(first, rest, lease, Arc::clone(upstream), deadline, target);
                    let mut resp = Response::new(Body::from_stream(body));
                    *resp.status_mut() = status;
                    let h = resp.headers_mut();
                    if let Some(ct) = content_type {
                        h.insert(axum::http::header::CONTENT_TYPE, ct);
                    }
                    h.insert(
                        axum::http::header::CACHE_CONTROL,
                        HeaderValue::from_static("no-cache"),
                    );
                    mark(h, &lab, &label, Some(model), &attempts);
                    return resp;
                }
                Err(e) => {
                    metrics::counter!("labrouter_upstream_attempts_total",
                        "machine" => reg.machines[machine].name.clone(), "outcome" => e.reason)
                    .increment(1);
                    lease.finish(e.outcome.clone());
                    let move_on = e.may_move_on();
                    attempts.push(Attempt {
                        model,
                        kind: AttemptKind::Failed {
                            seen: e.seen,
                            reason: e.reason,
                            detail: e.detail,
                            retry_after: e.retry_after,
                        },
                    });
                    if !move_on {
                        break;
                    }
                }
            }
        }

        // Nothing served. With x-labrouter-wait, and when nothing was even tried, wait for
        // the earliest breaker to admit a probe, then walk again.
        let all_skipped = attempts
            .iter()
            .all(|a| matches!(a.kind, AttemptKind::Skipped { .. }));
        if let (true, Some(until)) = (all_skipped, wait_until) {
            let now = Instant::now();
            if now < until {
                let soonest = attempts
                    .iter()
                    .filter_map(|a| match a.kind {
                        AttemptKind::Skipped { retry_after, .. } => retry_after,
                        AttemptKind::Failed { .. } => None,
                    })
                    .min()
                    .map_or(until, |d| crate::clock::after(now, d).min(until));
                tokio::select! {
                    () = tokio::time::sleep_until(soonest) => {}
                    () = &mut changed => {}
                }
                attempts.clear();
                continue;
            }
        }
        metrics::histogram!("labrouter_request_duration_seconds", "route" => label.clone())
            .record(started.elapsed().as_secs_f64());
        let mut resp = nothing_served(&lab, &label, &attempts);
        mark(resp.headers_mut(), &lab, &label, None, &attempts);
        return resp;
    }
}

/// Counts a served request: its machine's success, its duration, and a fallback if the
/// chain's first target did not serve.
fn served(lab: &Lab, route: &str, model: usize, attempts: &[Attempt], started: Instant) {
    let reg = &lab.registry;
    let machine = reg.machines[reg.models[model].machine].name.clone();
    metrics::counter!("labrouter_upstream_attempts_total", "machine" => machine, "outcome" => "success").increment(1);
    metrics::histogram!("labrouter_request_duration_seconds", "route" => route.to_string())
        .record(started.elapsed().as_secs_f64());
    if let Some(first) = attempts.first() {
        metrics::counter!("labrouter_fallbacks_total",
            "route" => route.to_string(), "from" => reg.target_name(first.model), "to" => reg.target_name(model))
        .increment(1);
        // Each machine passed over counts once, however many of its models the chain named.
        let to = reg.models[model].machine;
        let mut seen: Vec<usize> = Vec::with_capacity(attempts.len());
        for a in attempts {
            let m = reg.models[a.model].machine;
            if m != to && !seen.contains(&m) {
                seen.push(m);
                lab.machines.note_rerouted(m);
            }
        }
    }
}

/// Adds the x-labrouter headers: the route, the target that served, what was passed over.
fn mark(h: &mut HeaderMap, lab: &Lab, label: &str, served: Option<usize>, attempts: &[Attempt]) {
    if let Ok(v) = HeaderValue::from_str(label) {
        h.insert(ROUTE.clone(), v);
    }
    if let Some(m) = served {
        if let Ok(v) = HeaderValue::from_str(&lab.registry.target_name(m)) {
            h.insert(TARGET.clone(), v);
        }
    }
    if !attempts.is_empty() {
        let list: Vec<String> = attempts
            .iter()
            .map(|a| {
                let why = match &a.kind {
                    AttemptKind::Skipped { skip, .. } => skip.as_str(),
                    AttemptKind::Failed { reason, .. } => reason,
                };
                format!("{}={why}", lab.registry.target_name(a.model))
            })
            .collect();
        if let Ok(v) = HeaderValue::from_str(&list.join(",")) {
            h.insert(SKIPPED.clone(), v);
        }
    }
}

/// An OpenAI-style error response for a request that never reached the proxy walk.
pub fn client_error(status: StatusCode, kind: &str, code: &str, message: String) -> Response {
    let body = serde_json::json!({"error": {"type": kind, "code": code, "message": message, "param": null}});
    (status, axum::Json(body)).into_response()
}
