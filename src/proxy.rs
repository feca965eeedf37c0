//! The chain walk: skip what a breaker holds back, attempt the next target, classify,
//! record, and move on while nothing has reached the client. Every attempt's outcome is
//! kept, in order, for the response headers and for the error when nothing served.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use tokio::time::Instant;

use crate::fleet::Fleet;
use crate::machines::Rejected;
use crate::outcome::{Attempted, MachineId, ModelId, Wire};
use crate::registry::Api;
use crate::request::Parsed;
use crate::route::Routed;
use crate::upstream::{relay, Answer, Endpoint, Framing, Payload};

mod failure;
mod walk;

pub use failure::nothing_served;
pub use walk::{Gate, Open, Walk, Walked};

pub static ROUTE: HeaderName = HeaderName::from_static("x-labrouter-route");
pub static TARGET: HeaderName = HeaderName::from_static("x-labrouter-target");
pub static SKIPPED: HeaderName = HeaderName::from_static("x-labrouter-skipped");
/// Why a tier's pick chose the target (docs/registry.md "routes:").
pub static PICK: HeaderName = HeaderName::from_static("x-labrouter-pick");

/// A response extension on a machine's whole answer (served, or its client error passed
/// through); never on the router's own errors nor on a relayed stream. What an
/// `Idempotency-Key` may keep (docs/api.md "Tasks").
#[derive(Clone, Copy, Debug)]
pub struct MachineAnswer;

/// A response extension on every answer of a chain walk: the time the request spent
/// waiting on machines (attempts, and x-labrouter-wait's waits for a breaker). The guard
/// subtracts it from the request's whole time for `labrouter_overhead_seconds`.
#[derive(Clone, Copy, Debug)]
pub struct Waited(pub Duration);

/// What a client asked, as each target is sent it and its answers are given back: the
/// OpenAI side ([`OpenAi`]) passes both as they are; the Ollama side (`crate::ollama`)
/// translates for machines that speak only OpenAI's API.
pub trait Front: Send + Sync + 'static {
    /// What to send a target called `backend` on a machine speaking `api`.
    fn request(&self, backend: &str, api: Api) -> (Wire, Payload);
    /// Whether the request makes vectors: it falls back only to the same backend model
    /// (docs/api.md).
    fn embeds(&self) -> bool;
    /// A machine's whole answer to `wire` as the client's body, with its content type
    /// when it changed. Err: it cannot be given (the attempt counts as malformed).
    fn answer(
        &self,
        wire: Wire,
        body: Bytes,
        started: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String>;
    /// How a machine's stream from `wire` reaches the client, and its content type when it
    /// changes.
    fn framing(&self, wire: Wire, started: Instant) -> (Framing, Option<HeaderValue>);
    /// Whether a streamed answer can be given; a caller that keeps answers whole (a task)
    /// counts a stream as a malformed answer.
    fn takes_stream(&self) -> bool {
        true
    }
}

/// An OpenAI request to OpenAI's API: only `model` is rewritten, answers pass as they are.
pub struct OpenAi {
    pub endpoint: Endpoint,
    pub parsed: Parsed,
}

impl Front for OpenAi {
    fn request(&self, backend: &str, _: Api) -> (Wire, Payload) {
        (
            Wire::OpenAi(self.endpoint),
            self.parsed.body_for(backend).into(),
        )
    }

    fn embeds(&self) -> bool {
        self.endpoint == Endpoint::Embeddings
    }

    fn answer(
        &self,
        _: Wire,
        body: Bytes,
        _: Instant,
    ) -> Result<(Bytes, Option<HeaderValue>), String> {
        Ok((body, None))
    }

    fn framing(&self, _: Wire, _: Instant) -> (Framing, Option<HeaderValue>) {
        match self.endpoint {
            // Audio bytes, a transcription's events: as they come, no end marker.
            Endpoint::AudioSpeech | Endpoint::AudioTranscriptions | Endpoint::AudioTranslations => {
                (Framing::bytes(), None)
            }
            _ => (Framing::sse(), None),
        }
    }
}

/// Serves one request along `decision`'s chain. `wait` is `x-labrouter-wait`.
pub async fn forward<F: Front>(
    fleet: Arc<Fleet>,
    front: F,
    decision: Routed,
    wait: Option<Duration>,
) -> Response {
    let reg = &fleet.registry;
    let chain = decision.chain(reg);
    let started = Instant::now();
    let longest = chain
        .iter()
        .map(|&m| reg.machines[reg.models[m].machine].timeouts.total)
        .max()
        .unwrap_or(Duration::from_secs(600));
    let deadline = crate::clock::after(started, longest);
    let wait_until = wait.map(|w| crate::clock::after(started, w).min(deadline));
    let label: &str = decision.label(reg);
    let walk = Walk {
        fleet: &fleet,
        label,
        started,
        deadline,
        waited: Default::default(),
    };
    // Time spent waiting for a breaker to admit (x-labrouter-wait): not labrouter's own.
    let mut held = Duration::ZERO;
    loop {
        // With x-labrouter-wait, registered before the walk, so that a change during the
        // walk is not missed; without, not at all: it takes the bus's lock twice.
        let changed = wait_until.map(|_| fleet.machines.changed());
        let mut changed = std::pin::pin!(changed);
        if let Some(changed) = changed.as_mut().as_pin_mut() {
            changed.enable();
        }
        let walked = walk.run(chain, &front, &mut Open).await;
        let attempts = match respond(&walk, &front, walked) {
            Ok(mut resp) => {
                resp.extensions_mut().insert(Waited(walk.waited() + held));
                return resp;
            }
            Err(attempts) => attempts,
        };
        // Nothing served. With x-labrouter-wait, and when nothing was even tried, wait for
        // the earliest breaker to admit a probe, then walk again.
        let all_skipped = attempts.iter().all(|a| !a.was_sent());
        if let (true, Some(until)) = (all_skipped, wait_until) {
            let now = Instant::now();
            if now < until {
                let soonest = attempts
                    .iter()
                    .filter_map(|a| a.retry_after)
                    .min()
                    .map_or(until, |d| crate::clock::after(now, d).min(until));
                let changed = async {
                    match changed.as_mut().as_pin_mut() {
                        Some(changed) => changed.await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep_until(soonest) => {}
                    () = changed => {}
                }
                held += now.elapsed();
                continue;
            }
        }
        fleet.record_duration(label, started.elapsed().as_secs_f64());
        let mut resp = nothing_served(&fleet, label, &attempts);
        label_headers(resp.headers_mut(), &fleet, label, None, &attempts);
        resp.extensions_mut().insert(Waited(walk.waited() + held));
        return resp;
    }
}

/// The client's response to a walk that ended with a machine's answer; the attempts when
/// nothing served.
fn respond<F: Front>(
    walk: &Walk<'_>,
    front: &F,
    walked: Walked,
) -> Result<Response, Vec<Attempted>> {
    let pick = walked.pick();
    let mut resp = answer(walk, front, walked)?;
    if let Some(why) = pick {
        resp.headers_mut()
            .insert(PICK.clone(), HeaderValue::from_static(why.as_str()));
    }
    Ok(resp)
}

/// [`respond`] without the pick's header.
fn answer<F: Front>(
    walk: &Walk<'_>,
    front: &F,
    walked: Walked,
) -> Result<Response, Vec<Attempted>> {
    let (fleet, label) = (walk.fleet, walk.label);
    match walked {
        Walked::Full {
            target,
            status,
            content_type,
            body,
            attempts,
            ..
        } => Ok(whole(
            fleet,
            label,
            status,
            content_type,
            body,
            Some(target),
            &attempts,
        )),
        Walked::Stream {
            target,
            wire,
            status,
            content_type,
            first,
            rest,
            lease,
            attempts,
            ..
        } => {
            let reg = &fleet.registry;
            let upstream = Arc::clone(&fleet.upstreams[reg.models[target].machine]);
            let (framing, translated) = front.framing(wire, walk.started);
            let target_name = reg.target_name(target);
            let body = relay(
                first,
                rest,
                lease,
                upstream,
                walk.deadline,
                target_name,
                framing,
            );
            let mut resp = Response::new(Body::from_stream(body));
            *resp.status_mut() = status;
            let h = resp.headers_mut();
            if let Some(ct) = translated.or(content_type) {
                h.insert(axum::http::header::CONTENT_TYPE, ct);
            }
            h.insert(
                axum::http::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            );
            label_headers(h, fleet, label, Some(target), &attempts);
            Ok(resp)
        }
        // The request's own fault: the machine's answer goes back as is.
        Walked::Refused {
            status,
            content_type,
            body,
            attempts,
        } => {
            fleet.record_duration(label, walk.started.elapsed().as_secs_f64());
            Ok(whole(
                fleet,
                label,
                status,
                content_type,
                body,
                None,
                &attempts,
            ))
        }
        Walked::Unserved { attempts } => Err(attempts),
    }
}

/// A machine's whole answer (served, or its refusal passed through) as the client's
/// response, marked as a machine's answer for `Idempotency-Key`.
fn whole(
    fleet: &Fleet,
    label: &str,
    status: axum::http::StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
    served: Option<ModelId>,
    attempts: &[Attempted],
) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.extensions_mut().insert(MachineAnswer);
    if let Some(ct) = content_type {
        resp.headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, ct);
    }
    label_headers(resp.headers_mut(), fleet, label, served, attempts);
    resp
}

/// A whole answer as the client gets it (streams are translated as they go, by their
/// framing); one that cannot be given is a malformed answer.
pub(crate) fn given<F: Front>(
    front: &F,
    model: ModelId,
    wire: Wire,
    answer: Answer,
    started: Instant,
) -> Result<Answer, Attempted> {
    let Answer::Full {
        status,
        content_type,
        body,
    } = answer
    else {
        return Ok(answer);
    };
    match front.answer(wire, body, started) {
        Ok((body, ct)) => Ok(Answer::Full {
            status,
            content_type: ct.or(content_type),
            body,
        }),
        Err(why) => Err(Attempted::counted(
            model,
            crate::breaker::FailureKind::Malformed,
            crate::outcome::Fault::BadAnswer,
            format!("malformed answer: {why}"),
        )),
    }
}

/// A target a breaker or the bulkhead held back: counted, and recorded as the walk saw it.
pub(crate) fn skipped(fleet: &Fleet, model: ModelId, rej: &Rejected) -> Attempted {
    let machine = fleet.registry.models[model].machine;
    fleet.upstreams[machine].meters().skipped[rej.skip as usize].increment(1);
    Attempted::skipped(model, rej.skip, rej.retry_after, &rej.held)
}

/// Counts a sent attempt that did not serve, by its reason.
pub(crate) fn count_attempt(fleet: &Fleet, machine: MachineId, a: &Attempted) {
    metrics::counter!("labrouter_upstream_attempts_total",
        "machine" => fleet.registry.machines[machine].name.clone(), "outcome" => a.reason.as_str())
    .increment(1);
}

/// Counts a served request: its machine's success, its duration, and a fallback if the
/// chain's first target did not serve.
pub(crate) fn count_served(
    fleet: &Fleet,
    route: &str,
    model: ModelId,
    attempts: &[Attempted],
    started: Instant,
) {
    let reg = &fleet.registry;
    fleet.upstreams[reg.models[model].machine]
        .meters()
        .served
        .increment(1);
    fleet.record_duration(route, started.elapsed().as_secs_f64());
    if let Some(first) = attempts.first() {
        metrics::counter!("labrouter_fallbacks_total",
            "route" => route.to_string(), "from" => reg.target_name(first.target), "to" => reg.target_name(model))
        .increment(1);
        // Each machine passed over counts once, however many of its models the chain named.
        let to = reg.models[model].machine;
        let mut passed: Vec<MachineId> = Vec::with_capacity(attempts.len());
        for a in attempts {
            let m = reg.models[a.target].machine;
            if m != to && !passed.contains(&m) {
                passed.push(m);
                fleet.machines.note_rerouted(m);
            }
        }
    }
}

/// Adds the x-labrouter headers: the route, the target that served, what was passed over.
fn label_headers(
    h: &mut HeaderMap,
    fleet: &Fleet,
    label: &str,
    served: Option<ModelId>,
    attempts: &[Attempted],
) {
    if let Ok(v) = HeaderValue::from_str(label) {
        h.insert(ROUTE.clone(), v);
    }
    if let Some(v) = served.and_then(|m| fleet.targets[m].clone()) {
        h.insert(TARGET.clone(), v);
    }
    if !attempts.is_empty() {
        let mut list = String::with_capacity(attempts.len() * 40);
        for (i, a) in attempts.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            list.push_str(&fleet.target_name(a.target));
            list.push('=');
            list.push_str(a.reason.as_str());
        }
        if let Ok(v) = HeaderValue::from_str(&list) {
            h.insert(SKIPPED.clone(), v);
        }
    }
}
