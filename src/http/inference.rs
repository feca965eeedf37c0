//! The OpenAI endpoints: read a request once, check it, route it, hand it to the walk (or,
//! with an `Idempotency-Key`, to its single flight).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::error::{AppError, Code};
use super::idempotency::{self, Keyed};
use super::owner::Owner;
use crate::body::Unread;
use crate::fleet::Fleet;
use crate::ollama::{resolve_any, untagged};
use crate::outcome::Kind;
use crate::registry::{parse_duration_max, Server};
use crate::request::Parsed;
use crate::service::Service;
use crate::text::bounded;
use crate::upstream::Endpoint;

pub async fn chat(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    completion(&svc, Endpoint::Chat, req).await
}

pub async fn completions(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    completion(&svc, Endpoint::Completions, req).await
}

pub async fn embeddings(
    State(svc): State<Arc<Service>>,
    req: Request,
) -> Result<Response, AppError> {
    completion(&svc, Endpoint::Embeddings, req).await
}

/// The longest `x-labrouter-wait` a request may ask for; the request's deadline bounds it
/// further.
const WAIT_MAX: Duration = Duration::from_secs(86_400);

/// A request body, read whole within `server.max_body`, with no silence longer than
/// `server.idle_timeout`, and all of it within `server.body_timeout`.
pub(super) async fn read_body(
    server: &Server,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, AppError> {
    let (max, idle, whole) = (server.max_body, server.idle_timeout, server.body_timeout);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let read = crate::body::collect(body.into_data_stream(), declared, max, Some(idle));
    let Ok(read) = tokio::time::timeout(whole, read).await else {
        return Err(AppError::new(
            Code::RequestTimeout,
            format!(
                "the request body did not arrive whole within {} (server.body_timeout)",
                crate::outcome::words(whole)
            ),
        ));
    };
    read.map_err(|e| match e {
        Unread::TooLarge => AppError::new(
            Code::RequestTooLarge,
            format!("request body is larger than server.max_body ({max} bytes)"),
        ),
        Unread::Stalled => AppError::new(
            Code::RequestTimeout,
            format!(
                "the request body stalled for {} (server.idle_timeout)",
                crate::outcome::words(idle)
            ),
        ),
        Unread::Broken(e) => AppError::new(
            Code::UnreadableBody,
            format!("could not read the request body: {e}"),
        ),
    })
}

/// `x-labrouter-wait`, named once (a name given as text is parsed at every lookup).
static WAIT: HeaderName = HeaderName::from_static("x-labrouter-wait");

/// `x-labrouter-route`: the route a request asks for by name, if it names one.
pub(super) fn asked_route(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(&crate::proxy::ROUTE)
        .and_then(|v| v.to_str().ok())
}

/// `x-labrouter-wait`: how long a request may wait for a machine to come back.
pub(super) fn wait_header(headers: &HeaderMap) -> Result<Option<Duration>, AppError> {
    headers
        .get(&WAIT)
        .map(|v| {
            v.to_str()
                .map_err(|_| "expected a duration such as 30s".to_string())
                .and_then(|v| parse_duration_max(v, WAIT_MAX).map_err(|e| e.to_string()))
        })
        .transpose()
        .map_err(|e| AppError::new(Code::InvalidHeader, format!("x-labrouter-wait: {e}")))
}

/// Embeddings must name their model (docs/api.md): a vector store must never get vectors from
/// a model it did not ask for, and keyword routing could pick a different one each time.
pub(super) fn needs_model(fleet: &crate::fleet::Fleet) -> AppError {
    let names: Vec<&str> = fleet
        .registry
        .models
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    AppError::new(
        Code::ModelRequired,
        format!(
            "embeddings need a model: keyword routing ('auto') could embed with a different model each time; name one of: {}",
            names.join(", ")
        ),
    )
}

pub(super) async fn completion(
    svc: &Service,
    endpoint: Endpoint,
    req: Request,
) -> Result<Response, AppError> {
    let fleet = svc.fleet();
    let (parts, body) = req.into_parts();
    let key = idempotency::key_of(&parts.headers)?;
    let bytes = read_body(&fleet.registry.server, &parts.headers, body).await?;
    let parsed = Parsed::new(endpoint, bytes)?;
    // Embeddings never stream, whatever their body says.
    if key.is_some() && parsed.stream && endpoint != Endpoint::Embeddings {
        return Err(idempotency::streamed());
    }
    let wait = wait_header(&parts.headers)?;
    // A vector store must never get vectors from a model it did not ask for (docs/api.md).
    // Routing reads a missing, empty or `auto` model alike: as "route by content".
    if endpoint == Endpoint::Embeddings
        && matches!(parsed.model.as_deref(), None | Some("auto") | Some(""))
    {
        return Err(needs_model(&fleet));
    }
    let ask = crate::route::Ask {
        kind: endpoint.kind(),
        path: endpoint.client_path(),
        header: asked_route(&parts.headers),
        model: parsed.model.as_deref(),
        text: &parsed.text,
        has_image: parsed.has_image,
    };
    let (fleet, decision) = crate::discover::decide(svc, fleet, &ask).await?;
    let keyed = key.map(|key| {
        let owner = parts.extensions.get::<Owner>().cloned().unwrap_or_default();
        Keyed::new(&owner, &key, endpoint.path(), &parsed.body)
    });
    let server = &fleet.registry.server;
    let limit = server.max_upstream_body;
    let Some(keyed) = keyed else {
        let front = crate::proxy::OpenAi { endpoint, parsed };
        return Ok(crate::proxy::forward(fleet, front, decision, wait).await);
    };
    let detach = idempotency::Detach::new(server, parsed.body.len(), wait.is_some());
    let front = detach.noting(crate::proxy::OpenAi { endpoint, parsed });
    let work = crate::proxy::forward(Arc::clone(&fleet), front, decision, wait);
    // Boxed: a keyed request's future holds the walk's and its own, and would make every
    // request's future as large (each move of it a copy).
    Box::pin(idempotency::of(svc).answer(keyed, limit, detach, work)).await
}

/// `GET /v1/models`: logical models and routes, in OpenAI's list shape.
#[derive(Serialize)]
pub struct ModelList {
    data: Vec<ModelEntry>,
    object: &'static str,
}

/// One entry; fields in key order, as the list always rendered them.
#[derive(Serialize)]
pub struct ModelEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chain: Option<Vec<String>>,
    /// When the entry came to be, in Unix seconds, as OpenAI's `Model` has it: the
    /// service's start (the registry says nothing of when a model was added).
    created: u64,
    /// What it is: a `route` (with its chain) or a `model` (with its machine).
    entry: &'static str,
    id: String,
    /// The kind of work it does (`chat` for `auto`).
    kind: &'static str,
    object: &'static str,
    owned_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

pub async fn models(State(svc): State<Arc<Service>>) -> Json<ModelList> {
    Json(ModelList {
        data: entries(&svc, &svc.fleet()),
        object: "list",
    })
}

/// `GET /v1/models/{id}` (the `openai` libraries' `models.retrieve`): the entry of
/// `/v1/models` that `id` names, read as a request's `model` is (a route, a logical model,
/// or a backend name that names one model, which answers with that model's entry; a
/// `:latest` tag ignored, as on the Ollama side). Unknown: 404 `model_not_found`, as
/// OpenAI answers it.
pub async fn model(
    State(svc): State<Arc<Service>>,
    Path(id): Path<String>,
) -> Result<Json<ModelEntry>, Response> {
    let fleet = svc.fleet();
    let reg = &fleet.registry;
    let want = if untagged(&id) == "auto" {
        Ok("auto")
    } else {
        resolve_any(&fleet.matcher, reg, "/v1/models", &id).map(|r| r.label(reg))
    };
    let not_found = |message: String| {
        let mut resp = AppError::new(Code::ModelNotFound, message).into_response();
        *resp.status_mut() = StatusCode::NOT_FOUND;
        resp
    };
    let want = want.map_err(|e| not_found(e.to_string()))?;
    entries(&svc, &fleet)
        .into_iter()
        .find(|e| e.id == want)
        .map(Json)
        .ok_or_else(|| not_found(format!("model '{}' does not exist", bounded(&id))))
}

/// Every entry of `/v1/models`: `auto`, the routes, the logical models.
fn entries(svc: &Service, fleet: &Fleet) -> Vec<ModelEntry> {
    let reg = &fleet.registry;
    let created = u64::try_from(svc.boot_ms() / 1000).unwrap_or(0);
    let route = |id: &str, kind: Kind, chain: Option<Vec<String>>| ModelEntry {
        backend: None,
        chain,
        created,
        entry: "route",
        id: id.to_string(),
        kind: kind.as_str(),
        object: "model",
        owned_by: "labrouter".into(),
        target: None,
    };
    let mut data = vec![route("auto", Kind::Chat, None)];
    data.extend(reg.routes.enumerate().map(|(id, r)| {
        let mut entry = route(
            &r.name,
            r.kind,
            Some(r.chain.iter().map(|&m| reg.target_name(m)).collect()),
        );
        // A name found on the machines: once, with the machines that serve it.
        if reg.is_found_route(id) {
            let machines = r
                .chain
                .iter()
                .map(|&m| reg.machines[reg.models[m].machine].name.as_str());
            entry.owned_by = machines.collect::<Vec<_>>().join(",");
        }
        entry
    }));
    let file_models = reg.models.enumerate().filter(|(i, _)| !reg.is_found(*i));
    data.extend(file_models.map(|(i, m)| ModelEntry {
        backend: Some(m.backend.clone()),
        chain: None,
        created,
        entry: "model",
        id: m.name.clone(),
        kind: m.kind.as_str(),
        object: "model",
        owned_by: reg.machines[m.machine].name.clone(),
        target: Some(reg.target_name(i)),
    }));
    data
}
