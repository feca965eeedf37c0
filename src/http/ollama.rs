//! Ollama's API in front (SPEC §11): the work endpoints go through the same route decision
//! and chain walk as the OpenAI ones; the model list, the loaded models and a model's card
//! are answered from the registry and the Ollama machines that are up.
//!
//! Errors on `/api/...` are Ollama's `{"error": "..."}` with the status the OpenAI side
//! would use: [`shape()`] rewrites every error answer on those paths, the guard's included.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::error::{AppError, Code};
use super::inference::{needs_model, read_body, wait_header};
use crate::fleet::Fleet;
use crate::ollama::translate::Request as OllamaRequest;
use crate::ollama::{Call, Ollama};
use crate::outcome::ModelId;
use crate::registry::Api;
use crate::route::{Routed, UnknownName};
use crate::service::Service;

/// The Ollama version `/api/version` reports: clients turn features on by it (Codex's
/// `--oss` mode refuses anything older than 0.13.4). It is the newest Ollama whose `/api/*`
/// labrouter speaks in full: 0.13's `logprobs`, `top_logprobs`, `truncate`, `shift`, tool
/// call ids and nested tool schemas included. 0.14.0 began keeping tool-call arguments in
/// the order the model wrote them, which labrouter does not promise, and 0.14.3 generates
/// images on `/api/generate`, which it does not translate.
pub const OLLAMA_VERSION: &str = "0.13.5";

mod load;
mod shape;

pub use shape::shape;

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
    let route = parts
        .headers
        .get("x-labrouter-route")
        .and_then(|v| v.to_str().ok());
    let decision = resolve(
        &fleet,
        route,
        asked.as_deref(),
        &request.text,
        request.has_image,
    )
    .map_err(|e| AppError::new(Code::ModelNotFound, e.to_string()))?;
    let asked = asked.unwrap_or_else(|| "auto".to_string());
    if let Some(load) = request.load() {
        return Ok(load::answer(&fleet, &decision, &request, &asked, load).await);
    }
    let limit = fleet.registry.server.max_upstream_body;
    let front = Ollama::new(request, asked, limit);
    Ok(crate::proxy::forward(fleet, front, decision, wait).await)
}

/// A name as Ollama reads it: `coder` and `coder:latest` are one model.
fn untagged(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// Routes by the name as sent, else by it with `:latest` dropped or added; the error is
/// the one for the name as sent.
fn resolve(
    fleet: &Fleet,
    route: Option<&str>,
    model: Option<&str>,
    text: &str,
    has_image: bool,
) -> Result<Routed, UnknownName> {
    let reg = &fleet.registry;
    let decide = |m: Option<&str>| fleet.matcher.decide(reg, route, m, text, has_image);
    let first = decide(model);
    let Some(name) = model.filter(|_| first.is_err()) else {
        return first;
    };
    let other = match name.strip_suffix(":latest") {
        Some(bare) => bare.to_string(),
        None if !name.contains(':') => format!("{name}:latest"),
        None => return first,
    };
    decide(Some(&other)).or(first)
}

/// Every name a client may pick, in Ollama's spelling: `auto`, the routes, the logical
/// models, and the backend names that name one model.
fn names(fleet: &Fleet) -> Vec<(String, Option<ModelId>)> {
    let reg = &fleet.registry;
    let mut out: Vec<(String, Option<ModelId>)> = vec![("auto".into(), None)];
    out.extend(
        reg.routes
            .iter()
            .map(|r| (r.name.clone(), r.chain.first().copied())),
    );
    out.extend(
        reg.models
            .enumerate()
            .map(|(i, m)| (m.name.clone(), Some(i))),
    );
    for (i, m) in reg.models.enumerate() {
        let sharing = reg.models.iter().filter(|o| o.backend == m.backend).count();
        if sharing == 1 {
            out.push((m.backend.clone(), Some(i)));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(n, _)| seen.insert(tagged(n)));
    out
}

/// A name with Ollama's tag: `:latest` added when it has none.
fn tagged(name: &str) -> String {
    if name.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

#[derive(Serialize)]
struct Details {
    parent_model: &'static str,
    format: &'static str,
    family: &'static str,
    families: Option<Vec<String>>,
    parameter_size: &'static str,
    quantization_level: &'static str,
}

/// What labrouter knows of a model's make: nothing; the machine knows.
const UNKNOWN: Details = Details {
    parent_model: "",
    format: "",
    family: "",
    families: None,
    parameter_size: "",
    quantization_level: "",
};

#[derive(Serialize)]
struct Tag {
    name: String,
    model: String,
    modified_at: String,
    size: u64,
    digest: String,
    details: Details,
}

/// `GET /api/tags`: every name a client may pick, in Ollama's list shape.
pub async fn tags(State(svc): State<Arc<Service>>) -> Json<Value> {
    let fleet = svc.fleet();
    let modified_at = since_boot(&svc);
    let models: Vec<Tag> = names(&fleet)
        .into_iter()
        .map(|(name, _)| {
            let name = tagged(&name);
            Tag {
                digest: hex(&Sha256::digest(name.as_bytes())),
                model: name.clone(),
                name,
                modified_at: modified_at.clone(),
                size: 0,
                details: UNKNOWN,
            }
        })
        .collect();
    Json(json!({ "models": models }))
}

/// The service's start, as the models' `modified_at`.
fn since_boot(svc: &Service) -> String {
    let boot = UNIX_EPOCH + Duration::from_millis(u64::try_from(svc.boot_ms()).unwrap_or(0));
    crate::clock::rfc3339(boot)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `GET /api/ps`: the models loaded on the Ollama machines that are up, merged; a machine
/// a breaker holds back is left out, and none is waited on past its `first_byte`.
pub async fn ps(State(svc): State<Arc<Service>>) -> Json<Value> {
    let fleet = svc.fleet();
    let up: Vec<_> = fleet
        .machines
        .phases()
        .zip(fleet.upstreams.iter())
        .filter(|((_, phase), u)| !phase.is_down() && u.api == Api::Ollama)
        .map(|(_, u)| u.native("/api/ps", None))
        .collect();
    let mut models = Vec::new();
    for answer in join_all(up).await {
        let Ok((status, body)) = answer else { continue };
        if !status.is_success() {
            continue;
        }
        if let Ok(Value::Object(mut o)) = serde_json::from_slice::<Value>(&body) {
            if let Some(Value::Array(list)) = o.remove("models") {
                models.extend(list);
            }
        }
    }
    Json(json!({ "models": models }))
}

/// `POST /api/show` and `/api/pull` name a model as `model` (or, older, `name`).
#[derive(Deserialize)]
struct Named {
    model: Option<String>,
    name: Option<String>,
    stream: Option<bool>,
}

/// Reads a `{"model": ...}` body and finds the target it names (a route's first).
async fn named(svc: &Service, req: Request) -> Result<(Arc<Fleet>, String, ModelId), AppError> {
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
    let decision = resolve(&fleet, None, Some(&name), "", false)?;
    let first = decision.chain(&fleet.registry).first().copied();
    let target = first
        .ok_or_else(|| AppError::new(Code::ModelNotFound, format!("'{name}' names no target")))?;
    Ok((fleet, name, target))
}

/// `POST /api/show`: the model's machine answers when it is an Ollama server that is up;
/// otherwise what labrouter knows (the family unknown, the context length when an OpenAI
/// machine's model list says it).
pub async fn show(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    let (fleet, name, target) = named(&svc, req).await?;
    let reg = &fleet.registry;
    let model = &reg.models[target];
    let upstream = &fleet.upstreams[model.machine];
    let down = fleet.machines.phase(model.machine).is_down();
    if upstream.api == Api::Ollama && !down {
        let body = json!({ "model": model.backend }).to_string();
        if let Ok((status, body)) = upstream.native("/api/show", Some(body.into())).await {
            if status.is_success() || status == StatusCode::NOT_FOUND {
                let mut resp = Response::new(Body::from(body));
                *resp.status_mut() = status;
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return Ok(resp);
            }
        }
    }
    let context = if down {
        None
    } else {
        upstream.context_length(&model.backend).await
    };
    let mut info = serde_json::Map::new();
    info.insert("general.architecture".into(), json!(""));
    info.insert("general.basename".into(), json!(model.backend));
    if let Some(n) = context {
        info.insert("general.context_length".into(), json!(n));
    }
    let vision = reg
        .routes
        .iter()
        .any(|r| r.images && r.chain.contains(&target));
    let mut capabilities = vec!["completion", "tools"];
    if vision {
        capabilities.push("vision");
    }
    Ok(Json(json!({
        "modelfile": format!("# {name}: served by labrouter as {}\n", reg.target_name(target)),
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": UNKNOWN,
        "model_info": info,
        "capabilities": capabilities,
        "modified_at": since_boot(&svc),
    }))
    .into_response())
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
