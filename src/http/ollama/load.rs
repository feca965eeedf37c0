//! Ollama's load and unload calls at the front door (`/api/generate` without a prompt,
//! `/api/chat` without messages): they ask for no generation, so none is made. The name is
//! routed as any request's is; when the target that would serve it first is an Ollama
//! machine, the call goes there natively (Ollama loads or unloads the model); otherwise it
//! is answered here at once, as Ollama answers it, and reaches no machine.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::Response;

use crate::fleet::Fleet;
use crate::ollama::translate::{loaded, Load, Request};
use crate::registry::Api;
use crate::route::Routed;

/// Answers the load call `request` (routed to `decision`) for `asked`, the name as sent.
pub(super) async fn answer(
    fleet: &Fleet,
    decision: &Routed,
    request: &Request,
    asked: &str,
    load: Load,
) -> Response {
    let reg = &fleet.registry;
    let label = decision.label(reg);
    // Where the next request for this name would go first: the first target that is up.
    let first_up = decision
        .chain(reg)
        .iter()
        .copied()
        .find(|&m| !fleet.machines.phase(reg.models[m].machine).is_down());
    if let Some(model) = first_up {
        let m = &reg.models[model];
        let upstream = &fleet.upstreams[m.machine];
        if upstream.api == Api::Ollama {
            let path = request.call.path();
            match upstream
                .native(path, Some(request.native(&m.backend)))
                .await
            {
                Ok((status, body)) if status.is_success() => {
                    let target = reg.target_name(model);
                    return respond(body, "application/json", label, Some(&target));
                }
                Ok((status, _)) => {
                    tracing::debug!(target = %reg.target_name(model), %status, "a load call refused natively: answered here");
                }
                Err(e) => {
                    tracing::debug!(target = %reg.target_name(model), error = %e, "a load call failed natively: answered here");
                }
            }
        }
    }
    let answer = loaded(request.call, asked, load, crate::clock::wall());
    if request.stream {
        // A stream of one line, as every whole answer to a streaming client is.
        let mut line = Vec::with_capacity(answer.len() + 1);
        line.extend_from_slice(&answer);
        line.push(b'\n');
        return respond(Bytes::from(line), "application/x-ndjson", label, None);
    }
    respond(answer, "application/json", label, None)
}

fn respond(body: Bytes, content_type: &'static str, label: &str, target: Option<&str>) -> Response {
    let mut resp = Response::new(Body::from(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(label) {
        h.insert(crate::proxy::ROUTE.clone(), v);
    }
    if let Some(v) = target.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(crate::proxy::TARGET.clone(), v);
    }
    resp
}
