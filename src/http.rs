//! The HTTP face (SPEC §4): handlers, bearer auth, body limits, and client errors in the
//! OpenAI envelope. Bad input is answered here and never reaches a machine or a breaker.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::body::Unread;
use crate::breaker::{Event, Phase};
use crate::lab::Lab;
use crate::proxy::{self, client_error};
use crate::registry::parse_duration_max;
use crate::request::Parsed;
use crate::service::Service;
use crate::upstream::Endpoint;

mod guard;

/// The router of the whole service, for `serve` and for tests without a socket.
pub fn app(svc: Arc<Service>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .route("/status", get(status))
        .route("/status/events", get(events))
        .route("/admin/breakers/{machine}/{action}", post(admin_breaker))
        .route("/admin/reload", post(admin_reload))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/", get(dashboard))
        .route("/metrics", get(prometheus))
        .fallback(|| async {
            client_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "not_found",
                "no such endpoint".into(),
            )
        })
        .layer(middleware::from_fn_with_state(
            Arc::clone(&svc),
            guard::guard,
        ))
        .with_state(svc)
}

async fn chat(State(svc): State<Arc<Service>>, req: Request) -> Response {
    completion(svc.lab(), Endpoint::Chat, req).await
}

async fn completions(State(svc): State<Arc<Service>>, req: Request) -> Response {
    completion(svc.lab(), Endpoint::Completions, req).await
}

async fn embeddings(State(svc): State<Arc<Service>>, req: Request) -> Response {
    completion(svc.lab(), Endpoint::Embeddings, req).await
}

/// The longest `x-labrouter-wait` a request may ask for; the request's deadline bounds it
/// further.
const WAIT_MAX: Duration = Duration::from_secs(86_400);

fn bad_request(code: &str, message: String) -> Response {
    client_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        code,
        message,
    )
}

async fn completion(lab: Arc<Lab>, endpoint: Endpoint, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let max = lab.registry.server.max_body;
    let too_large = || {
        client_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("request body is larger than server.max_body ({max} bytes)"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let idle = lab.registry.server.idle_timeout;
    let bytes = match crate::body::collect(body.into_data_stream(), declared, max, Some(idle)).await
    {
        Ok(b) => b,
        Err(Unread::TooLarge) => return too_large(),
        Err(Unread::Stalled) => {
            return client_error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                "request_timeout",
                format!(
                    "the request body stalled for {} (server.idle_timeout)",
                    crate::breaker::failure::words(idle)
                ),
            )
        }
        Err(Unread::Broken(e)) => {
            return bad_request(
                "unreadable_body",
                format!("could not read the request body: {e}"),
            )
        }
    };
    let parsed = match Parsed::new(endpoint, bytes) {
        Ok(p) => p,
        Err(e) => return bad_request("invalid_json", e.0),
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let wait = match header("x-labrouter-wait").map(|v| parse_duration_max(v, WAIT_MAX)) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => return bad_request("invalid_header", format!("x-labrouter-wait: {e}")),
    };
    // A vector store must never get vectors from a model it did not ask for (SPEC §4).
    if endpoint == Endpoint::Embeddings && matches!(parsed.model.as_deref(), None | Some("auto")) {
        let names: Vec<&str> = lab
            .registry
            .models
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        return bad_request(
            "model_required",
            format!(
                "embeddings need a model: keyword routing ('auto') could embed with a different model each time; name one of: {}",
                names.join(", ")
            ),
        );
    }
    let decision = match lab.router.decide(
        &lab.registry,
        header("x-labrouter-route"),
        parsed.model.as_deref(),
        &parsed.text,
        parsed.has_image,
    ) {
        Ok(d) => d,
        Err(e) => return bad_request("model_not_found", e.to_string()),
    };
    proxy::forward(lab, endpoint, parsed, decision, wait).await
}

/// Logical models and routes, in OpenAI's list shape.
async fn models(State(svc): State<Arc<Service>>) -> Json<Value> {
    let lab = svc.lab();
    let reg = &lab.registry;
    let mut data: Vec<Value> =
        vec![json!({"id": "auto", "object": "model", "owned_by": "labrouter", "kind": "route"})];
    data.extend(reg.routes.iter().map(|r| {
        json!({"id": r.name, "object": "model", "owned_by": "labrouter", "kind": "route",
               "chain": r.chain.iter().map(|&m| reg.target_name(m)).collect::<Vec<_>>()})
    }));
    data.extend(reg.models.iter().enumerate().map(|(i, m)| {
        json!({"id": m.name, "object": "model", "owned_by": reg.machines[m.machine].name,
               "kind": "model", "backend": m.backend, "target": reg.target_name(i)})
    }));
    Json(json!({"object": "list", "data": data}))
}

/// Breakers, counters and routes, read live.
async fn status(State(svc): State<Arc<Service>>) -> Json<Value> {
    let mut v = status_json(&svc.lab());
    v["host"] = crate::host::stats();
    Json(v)
}

/// `GET /`: the dashboard, one self-contained page.
async fn dashboard() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        include_str!("dashboard.html"),
    )
        .into_response()
}

/// `GET /metrics`: Prometheus text.
async fn prometheus() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::telemetry::render(),
    )
        .into_response()
}

pub fn status_json(lab: &Lab) -> Value {
    let reg = &lab.registry;
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut machines = serde_json::Map::new();
    for i in 0..lab.machines.len() {
        let s = lab.machines.snapshot(i);
        let b = &s.breaker;
        let cooldown_left = match b.phase {
            Phase::Open => b.open_until.map(|u| u.saturating_duration_since(now)),
            _ => None,
        };
        let opened_at = b
            .opened_at
            .map(|t| rfc3339(wall - now.saturating_duration_since(t)));
        let rate_limited_ms = b
            .rate_limited_until
            .map(|u| millis(u.saturating_duration_since(now)));
        machines.insert(
            s.name.clone(),
            json!({
                "state": b.phase.as_str(),
                "consecutive_failures": b.failures,
                "cooldown_left_ms": cooldown_left.map_or(0, millis),
                "cooldown_ms": millis(b.cooldown),
                "last_reason": b.last_reason,
                "opened_at": opened_at,
                "rate_limited_ms": rate_limited_ms,
                "in_flight": s.inflight,
                "remote_attempts": s.remote_attempts,
                "local_rejections": s.local_rejections,
                "rerouted": s.rerouted,
                "url": reg.machines[i].url,
            }),
        );
    }
    let routes: Vec<Value> = reg
        .routes
        .iter()
        .map(|r| json!({"name": r.name, "chain": r.chain.iter().map(|&m| reg.target_name(m)).collect::<Vec<_>>()}))
        .collect();
    json!({"machines": machines, "routes": routes, "registry_version": reg.version})
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

/// UTC, to the second: `2026-11-30T14:02:11Z`.
pub fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|ts| ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Query of `GET /status/events`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    machine: Option<String>,
    /// RFC 3339 time or unix milliseconds.
    since: Option<String>,
    /// A `seq` from the previous page: events older than it.
    before: Option<i64>,
    limit: Option<u32>,
}

/// The ledger, newest first, paginated with `before`.
async fn events(
    State(svc): State<Arc<Service>>,
    query: Result<axum::extract::Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query {
        Ok(q) => q.0,
        Err(e) => {
            return bad_request(
                "invalid_query",
                format!("/status/events: {e}; expected machine, since, before, limit"),
            )
        }
    };
    let Some(store) = svc.store() else {
        return client_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "no_ledger",
            "this router keeps no ledger (no state_dir store)".into(),
        );
    };
    let since_ms = match q.since.as_deref().map(parse_since) {
        None => None,
        Some(Ok(ms)) => Some(ms),
        Some(Err(e)) => return bad_request("invalid_query", e),
    };
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let path = store.path().to_path_buf();
    let machine = q.machine.clone();
    let before = q.before;
    let read = tokio::task::spawn_blocking(move || {
        crate::store::events(&path, machine.as_deref(), since_ms, before, limit)
    })
    .await;
    match read {
        Ok(Ok(events)) => {
            let next_before = (events.len() == limit as usize)
                .then(|| events.last().map(|e| e.seq))
                .flatten();
            Json(json!({"events": events, "next_before": next_before})).into_response()
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot read the ledger");
            client_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "ledger_unreadable",
                "the ledger could not be read; see the log".into(),
            )
        }
        Err(_) => client_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "ledger_unreadable",
            "the ledger read was cancelled".into(),
        ),
    }
}

fn parse_since(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|e| {
            format!("since: expected an RFC 3339 time or unix milliseconds, got '{s}' ({e})")
        })
}

/// `POST /admin/breakers/{machine}/open|close|reset`, with optional `?by=` / JSON who/why.
async fn admin_breaker(
    State(svc): State<Arc<Service>>,
    Path((machine, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let lab = svc.lab();
    let Some(i) = lab.registry.machine_index(&machine) else {
        let known: Vec<&str> = lab
            .registry
            .machines
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        return client_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "machine_not_found",
            format!(
                "machine '{}' does not exist; expected one of: {}",
                crate::text::bounded(&machine),
                known.join(", ")
            ),
        );
    };
    let note: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return bad_request("invalid_json", "admin body must be a JSON object like {\"by\": \"alice\", \"why\": \"maintenance\"}".into()),
        }
    };
    // Outside text bound for the log and the ledger: short, no control characters.
    let by = note
        .get("by")
        .and_then(Value::as_str)
        .or_else(|| headers.get("x-labrouter-by").and_then(|v| v.to_str().ok()))
        .map(crate::text::bounded);
    let why = note
        .get("why")
        .and_then(Value::as_str)
        .map(crate::text::bounded);
    let words = match (by, why) {
        (Some(b), Some(w)) => format!("manual {action} by {b}: {w}"),
        (Some(b), None) => format!("manual {action} by {b}"),
        (None, Some(w)) => format!("manual {action}: {w}"),
        (None, None) => format!("manual {action}"),
    };
    let event = match action.as_str() {
        "open" => Event::ForceOpen(words),
        "close" => Event::ForceClose(words),
        "reset" => Event::Reset(words),
        _ => {
            return client_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "unknown_action",
                format!(
                    "unknown action '{}'; expected open, close or reset",
                    crate::text::bounded(&action)
                ),
            )
        }
    };
    lab.machines.step(i, event);
    let state = lab.machines.phase(i);
    (
        StatusCode::OK,
        Json(json!({"machine": machine, "state": state.as_str()})),
    )
        .into_response()
}

/// `POST /admin/reload`: read registry.yaml again; 200 with what changed, or 422 with why
/// not (the old registry keeps serving).
async fn admin_reload(State(svc): State<Arc<Service>>) -> Response {
    let outcome = tokio::task::spawn_blocking(move || svc.reload()).await;
    match outcome {
        Ok(Ok(report)) => Json(json!({"reloaded": report})).into_response(),
        Ok(Err(e)) => client_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "registry_rejected",
            format!("registry not reloaded, the old one keeps serving: {e}"),
        ),
        Err(_) => client_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "reload_failed",
            "the reload task failed".into(),
        ),
    }
}
