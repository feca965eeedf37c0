//! Ollama's API in front (docs/api.md "The Ollama endpoints"): the work endpoints go through the
//! same route decision and chain walk as the OpenAI ones; the model list, the loaded models and a
//! model's card are answered from the registry and the machines that are up.
//!
//! - `list.rs`: `/api/tags` (every name, its capabilities and digest) and `/api/ps`.
//! - `show.rs`: `/api/show`, along the chain the name routes to.
//! - `ask.rs`: asking machines for a model's card or their model list (never work).
//! - `load.rs`: load and unload calls, answered without generating.
//! - `shape.rs`: error answers in Ollama's shape.
//!
//! Errors on `/api/...` are Ollama's `{"error": "..."}` with the status the OpenAI side
//! would use: [`shape()`] rewrites every error answer on those paths, the guard's included.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{AppError, Code};
use super::inference::{asked_route, needs_model, read_body, wait_header};
use crate::fleet::Fleet;
use crate::ollama::translate::Request as OllamaRequest;
use crate::ollama::{resolve, resolve_any, untagged, Call, Ollama};
use crate::outcome::{Kind, ModelId};
use crate::route::Ask;
use crate::service::Service;

/// The Ollama version `/api/version` reports: clients turn features on by it (Codex's
/// `--oss` mode refuses anything older than 0.13.4). It is the newest Ollama whose `/api/*`
/// labrouter speaks in full: 0.13's `logprobs`, `top_logprobs`, `truncate`, `shift`, tool
/// call ids and nested tool schemas included. 0.14.0 began keeping tool-call arguments in
/// the order the model wrote them, which labrouter does not promise, and 0.14.3 generates
/// images on `/api/generate`, which it does not translate.
pub const OLLAMA_VERSION: &str = "0.13.5";

mod ask;
mod list;
mod load;
mod shape;
mod show;

pub use list::{ps, tags};
pub use shape::shape;
pub use show::show;

pub async fn chat(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    work(&svc, Call::Chat, req).await
}

pub async fn generate(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    work(&svc, Call::Generate, req).await
}

pub async fn embed(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    work(&svc, Call::Embed, req).await
}

pub async fn embeddings(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    work(&svc, Call::Embeddings, req).await
}

/// A work call: read and checked once, routed like an OpenAI request (a name may carry
/// `:latest`), walked along its chain.
async fn work(svc: &Service, call: Call, req: Request) -> Result<Response, AppError> {
    let fleet = svc.fleet();
    let (parts, body) = req.into_parts();
    let bytes = read_body(&fleet.registry.server, &parts.headers, body).await?;
    let request =
        OllamaRequest::read(call, &bytes).map_err(|e| AppError::new(Code::InvalidJson, e))?;
    let wait = wait_header(&parts.headers)?;
    let asked = request.model.clone();
    if call.embeds() && matches!(asked.as_deref().map(untagged), None | Some("auto")) {
        return Err(needs_model(&fleet));
    }
    let route = asked_route(&parts.headers);
    let kind = if call.embeds() {
        Kind::Embed
    } else {
        Kind::Chat
    };
    let ask = Ask {
        kind,
        path: call.path(),
        header: route,
        model: asked.as_deref(),
        text: &request.text,
        has_image: request.has_image,
    };
    let (fleet, decision) = crate::discover::decide_by(svc, fleet, route.is_some(), |f| {
        resolve(&f.matcher, &f.registry, ask)
    })
    .await?;
    let asked = asked.unwrap_or_else(|| "auto".to_string());
    if let Some(load) = request.load() {
        return Ok(load::answer(&fleet, &decision, &request, &asked, load).await);
    }
    let limit = fleet.registry.server.max_upstream_body;
    let front = Ollama::new(request, asked, limit);
    Ok(crate::proxy::forward(fleet, front, decision, wait).await)
}

/// `POST /api/show` and `/api/pull` name a model as `model` (or, older, `name`).
#[derive(Deserialize)]
struct Named {
    model: Option<String>,
    name: Option<String>,
    stream: Option<bool>,
}

/// Reads a `{"model": ...}` body and finds the chain it names (a model's: itself alone).
async fn named(
    svc: &Service,
    req: Request,
) -> Result<(Arc<Fleet>, String, Vec<ModelId>), AppError> {
    let fleet = svc.fleet();
    let (parts, body) = req.into_parts();
    let bytes = read_body(&fleet.registry.server, &parts.headers, body).await?;
    let named: Named = serde_json::from_slice(&bytes).map_err(|e| {
        AppError::new(
            Code::InvalidJson,
            format!("request body is not a JSON object with 'model': {e}"),
        )
    })?;
    let Some(name) = named.model.or(named.name).filter(|n| !n.is_empty()) else {
        return Err(AppError::new(
            Code::ModelRequired,
            "'model' is required: name one of /api/tags",
        ));
    };
    let decision = resolve_any(&fleet.matcher, &fleet.registry, "/api/show", &name)?;
    let chain = decision.chain(&fleet.registry).to_vec();
    if chain.is_empty() {
        return Err(AppError::new(
            Code::ModelNotFound,
            format!("'{}' names no target", crate::text::bounded(&name)),
        ));
    }
    Ok((fleet, name, chain))
}

/// `POST /api/pull` of a name labrouter knows: success at once (Home Assistant pulls the
/// names it does not see in `/api/tags`); the machines keep their own models.
pub async fn pull(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    let stream = {
        let fleet = svc.fleet();
        let (parts, body) = req.into_parts();
        let bytes = read_body(&fleet.registry.server, &parts.headers, body).await?;
        let stream = serde_json::from_slice::<Named>(&bytes)
            .ok()
            .and_then(|n| n.stream)
            .unwrap_or(true);
        let again = Request::from_parts(parts, Body::from(bytes));
        named(&svc, again).await?;
        stream
    };
    if stream {
        return Ok((
            [(header::CONTENT_TYPE, "application/x-ndjson")],
            "{\"status\":\"success\"}\n",
        )
            .into_response());
    }
    Ok(Json(json!({"status": "success"})).into_response())
}

/// `push`, `create`, `copy`, `delete` and blobs: labrouter manages no models.
pub async fn manage(req: Request) -> AppError {
    let what = req
        .uri()
        .path()
        .trim_start_matches("/api/")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    AppError::new(
        Code::NotImplemented,
        format!(
            "labrouter routes work to the lab's machines and manages no models: {} them on the machine itself",
            crate::text::bounded(&what)
        ),
    )
}

/// `GET /api/version`.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": OLLAMA_VERSION, "labrouter": env!("CARGO_PKG_VERSION") }))
}

/// Ollama's greeting on `GET /` for anything but a browser (the dashboard owns `/`).
pub(super) fn greeting() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Ollama is running",
    )
        .into_response()
}
