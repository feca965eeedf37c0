//! `/v1/responses`: the Responses API along the chain, and the conversations labrouter
//! keeps so that any machine can continue one.
//!
//! A machine's `previous_response_id` means nothing to the next machine of a chain (and
//! Ollama's Responses are stateless), so labrouter keeps each Response it passed — this
//! turn's input items and the machine's output items — and sends a request that continues
//! a kept one with the whole conversation in `input` instead (`expand`). An id it does not
//! keep, or keeps for another API key, is passed through unchanged.
//!
//! - `expand`: a turn read, and a conversation put in front of it (pure).
//! - `keep`: the front that sends it, and what keeps a Response, whole or streamed.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::{AppError, Code};
use super::inference::{asked_route, read_body, wait_header};
use super::owner::Owner;
use crate::proxy::MachineAnswer;
use crate::request::Parsed;
use crate::service::Service;
use crate::store::responses::{self as kept, KeptResponse};
use crate::upstream::Endpoint;

mod expand;
mod keep;

use expand::Turn;
use keep::{Keeper, Responses};

fn owner_of(parts: &axum::http::request::Parts) -> String {
    parts
        .extensions
        .get::<Owner>()
        .map(|o| o.0.clone())
        .unwrap_or_default()
}

/// `POST /v1/responses`: routed like chat (the last user input, `input_image` parts as
/// images), sent along the chain, kept unless `"store": false`.
pub async fn create(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    let fleet = svc.fleet();
    let (parts, body) = req.into_parts();
    let server = &fleet.registry.server;
    let bytes = read_body(server, &parts.headers, body).await?;
    let owner = owner_of(&parts);
    let mut turn = Turn::read(&bytes)?;
    let earlier = match (&turn.previous, svc.shared_store()) {
        (Some(previous), Some(store)) => {
            conversation(store, &owner, previous, server.max_body).await?
        }
        _ => None,
    };
    let continued = earlier.is_some();
    let body = turn.body(earlier, server.max_body)?;
    let parsed = Parsed::new(Endpoint::Responses, body)?;
    let wait = wait_header(&parts.headers)?;
    let ask = crate::route::Ask {
        kind: Endpoint::Responses.kind(),
        path: Endpoint::Responses.client_path(),
        header: asked_route(&parts.headers),
        model: parsed.model.as_deref(),
        text: &parsed.text,
        has_image: parsed.has_image,
    };
    let (fleet, decision) = crate::discover::decide(&svc, Arc::clone(&fleet), &ask).await?;
    let keeper = match (turn.store, svc.store()) {
        (true, Some(store)) => Some(Keeper {
            writer: store.sender(),
            owner,
            previous: turn.previous.clone().filter(|_| continued),
            echo: turn.previous.take(),
            input: std::mem::take(&mut turn.input),
        }),
        _ => None,
    };
    let limit = fleet.registry.server.max_upstream_body;
    let front = Responses::new(parsed, keeper.clone());
    let resp = crate::proxy::forward(fleet, front, decision, wait).await;
    whole(resp, keeper, limit).await
}

/// A machine's whole Response on its way to the client: kept, and `previous_response_id`
/// echoed as the client sent it. Anything else (a stream, an error) passes unchanged.
async fn whole(resp: Response, keeper: Option<Keeper>, limit: usize) -> Result<Response, AppError> {
    let served = resp.status().is_success() && resp.extensions().get::<MachineAnswer>().is_some();
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_none_or(|v| !v.as_bytes().starts_with(b"text/event-stream"));
    let Some(keeper) = keeper.filter(|_| served && json) else {
        return Ok(resp);
    };
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return Err(AppError::new(
            Code::AnswerTooLarge,
            "the machine's Response could not be read whole",
        ));
    };
    let Ok(mut response) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Response::from_parts(parts, Body::from(bytes)));
    };
    keeper.keep(&mut response);
    let out = serde_json::to_vec(&response).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Body::from(out)))
}

/// The kept conversation that `previous` ends, read off the request's thread; `None` when
/// labrouter does not keep it for this owner (the id is then passed through).
async fn conversation(
    store: Arc<crate::store::Store>,
    owner: &str,
    previous: &str,
    max_body: usize,
) -> Result<Option<Vec<(String, String)>>, AppError> {
    let (owner, previous) = (owner.to_string(), previous.to_string());
    let read = tokio::task::spawn_blocking(move || {
        // The turn before may have been answered a moment ago: its Response on its way
        // to the disk is read too.
        store.flush(std::time::Duration::from_secs(5));
        store.read(|c| kept::conversation(c, &owner, &previous, max_body))
    })
    .await;
    match read {
        Ok(Ok(Some(turns))) if turns.is_empty() => Ok(None),
        Ok(Ok(Some(turns))) => Ok(Some(turns)),
        Ok(Ok(None)) => Err(AppError::new(
            Code::RequestTooLarge,
            format!("the conversation this request continues is larger than server.max_body ({max_body} bytes)"),
        )),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read a kept conversation; passing the id through");
            Ok(None)
        }
        Err(_) => Ok(None),
    }
}

/// `GET /v1/responses/{id}`: a Response labrouter keeps, for the key that made it.
pub async fn show(
    State(svc): State<Arc<Service>>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, AppError> {
    let (parts, _) = req.into_parts();
    let found = read_kept(&svc, owner_of(&parts), id.clone()).await?;
    let Some(response) = found else {
        return Err(not_kept(&id));
    };
    let mut resp = Response::new(Body::from(response));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// `DELETE /v1/responses/{id}`: forgets a Response labrouter keeps.
pub async fn forget(
    State(svc): State<Arc<Service>>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, AppError> {
    let (parts, _) = req.into_parts();
    let owner = owner_of(&parts);
    if read_kept(&svc, owner.clone(), id.clone()).await?.is_none() {
        return Err(not_kept(&id));
    }
    if let Some(store) = svc.store() {
        let _ = store.sender().send(crate::store::Msg::ForgetResponse {
            owner,
            id: id.clone(),
        });
    }
    let body = serde_json::json!({"id": id, "object": "response", "deleted": true});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

async fn read_kept(svc: &Service, owner: String, id: String) -> Result<Option<String>, AppError> {
    let Some(store) = svc.shared_store() else {
        return Ok(None);
    };
    tokio::task::spawn_blocking(move || {
        store.flush(std::time::Duration::from_secs(5));
        store.read(|c| kept::response(c, &owner, &id))
    })
    .await
    .ok()
    .and_then(Result::ok)
    .map(|found| Ok(found.map(|(response, _)| response)))
    .unwrap_or_else(|| {
        Err(AppError::new(
            Code::TaskStoreFailed,
            "the store of kept Responses cannot be read; see the log",
        ))
    })
}

fn not_kept(id: &str) -> AppError {
    AppError::new(
        Code::ResponseNotFound,
        format!(
            "no Response '{}' is kept for this key (kept for server.keep_responses, unless sent with \"store\": false)",
            crate::text::bounded(id)
        ),
    )
}

impl Keeper {
    /// Keeps `response` (echoing `previous_response_id` as the client sent it), unless it
    /// has no id or is larger than [`kept::MAX_KEPT`].
    fn keep(&self, response: &mut Value) {
        if let (Some(echo), Some(obj)) = (&self.echo, response.as_object_mut()) {
            obj.insert("previous_response_id".into(), Value::String(echo.clone()));
        }
        let Some(id) = response["id"].as_str().map(str::to_string) else {
            return;
        };
        let kept = KeptResponse {
            owner: self.owner.clone(),
            id,
            previous: self.previous.clone(),
            input: self.input.to_string(),
            output: response["output"].to_string(),
            response: response.to_string(),
            created_ms: crate::store::ms(crate::clock::wall()),
        };
        if kept.size() > kept::MAX_KEPT {
            tracing::debug!(
                bytes = kept.size(),
                "a Response larger than 1MiB is not kept"
            );
            return;
        }
        let _ = self
            .writer
            .send(crate::store::Msg::Response(Box::new(kept)));
    }
}
