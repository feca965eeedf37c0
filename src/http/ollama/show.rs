//! `POST /api/show`: a model's card. The chain the name routes to is tried in order, as
//! work would be, through the same breakers (a machine they hold back is skipped, not
//! asked): an Ollama server that has the model answers with its own card; an
//! OpenAI-compatible server that answers gets labrouter's card for it, with what its model
//! list says. A machine that does not have the model (Ollama's 404) or does not answer
//! passes to the next target.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::ask::{ask, Asked};
use super::list::{since_boot, UNKNOWN};
use super::named;
use crate::fleet::Fleet;
use crate::http::error::{AppError, Code};
use crate::ollama::{capabilities, Report};
use crate::outcome::ModelId;
use crate::service::Service;

/// Answers with the first card a target of the chain gives; when none has one, labrouter's
/// own card for the first target that did not answer, or 404 when every target answered
/// that it does not have the model.
pub async fn show(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    let (fleet, name, chain) = named(&svc, req).await?;
    let reg = &fleet.registry;
    let mut silent: Option<ModelId> = None;
    for &target in &chain {
        match ask(&fleet, target).await {
            Asked::Card(body, _) => return Ok(passed(body)),
            Asked::Listed(report) => {
                return Ok(own(&svc, &fleet, &name, target, report.as_ref()));
            }
            Asked::Down => {
                silent.get_or_insert(target);
            }
            Asked::Unknown => {}
        }
    }
    match silent {
        Some(target) => Ok(own(&svc, &fleet, &name, target, None)),
        None => {
            let asked: Vec<String> = chain
                .iter()
                .map(|&m| {
                    let backend = &reg.models[m].backend;
                    format!("{} does not have '{backend}'", reg.target_name(m))
                })
                .collect();
            Err(AppError::new(
                Code::NotFound,
                format!(
                    "model '{}' not found on any machine of its chain: {}",
                    crate::text::bounded(&name),
                    asked.join("; ")
                ),
            ))
        }
    }
}

/// An Ollama server's card, passed on as it came.
fn passed(body: Bytes) -> Response {
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// What labrouter knows of `target`, which `name` routed to: the family unknown, the
/// context length and capabilities as its machine's `report` gives them.
fn own(
    svc: &Service,
    fleet: &Fleet,
    name: &str,
    target: ModelId,
    report: Option<&Report>,
) -> Response {
    let reg = &fleet.registry;
    let model = &reg.models[target];
    let mut info = serde_json::Map::new();
    info.insert("general.architecture".into(), json!(""));
    info.insert("general.basename".into(), json!(model.backend));
    if let Some(n) = report.and_then(|r| r.context) {
        info.insert("general.context_length".into(), json!(n));
    }
    Json(json!({
        "modelfile": format!("# {}: served by labrouter as {}\n", crate::text::bounded(name), reg.target_name(target)),
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": UNKNOWN,
        "model_info": info,
        "capabilities": capabilities(target, reg, report),
        "modified_at": since_boot(svc),
    }))
    .into_response()
}
