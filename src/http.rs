//! The HTTP face (docs/api.md): the router of every endpoint, built by [`app`]. Bad input is
//! answered here, as an [`AppError`], and never reaches a machine or a breaker.
//!
//! - [`inference`]: the OpenAI endpoints.
//! - [`ollama`]: Ollama's endpoints (docs/api.md "The Ollama endpoints"), on the same walk.
//! - [`admin`]: the ledger, manual breaker control, reloads.
//! - [`history`]: `/status/history` and `/status/hourly`, the month and the day at a glance.
//! - [`guard`]: Host, Origin and key checks in front of everything (README "Safety"); it tags each
//!   request with its [`Owner`].
//! - [`idempotency`]: `Idempotency-Key` on completions and embeddings (docs/api.md "Tasks").
//! - [`error`]: [`AppError`], rendered in OpenAI's error envelope.
//! - [`dashboard`]: `GET /` and `HEAD /`: the dashboard for a browser, Ollama's greeting
//!   for anything else.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::service::Service;
use crate::upstream::Endpoint;

mod access;
mod admin;
mod dashboard;
pub mod error;
mod guard;
mod history;
pub mod idempotency;
mod inference;
mod media;
mod ollama;
mod owner;
mod responses;
mod tasks;

pub use error::{AppError, Code};
pub use owner::Owner;

/// The router of the whole service, for `serve` and for tests without a socket.
pub fn app(svc: Arc<Service>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(inference::chat))
        .route("/v1/completions", post(inference::completions))
        .route("/v1/embeddings", post(inference::embeddings))
        .route("/v1/responses", post(responses::create))
        .route("/v1/images/generations", post(media::images_generations))
        .route("/v1/images/edits", post(media::images_edits))
        .route("/v1/images/variations", post(media::images_variations))
        .route("/v1/audio/transcriptions", post(media::transcriptions))
        .route("/v1/audio/translations", post(media::translations))
        .route("/v1/audio/speech", post(media::speech))
        .route("/v1/rerank", post(media::rerank))
        .route("/v1/reranking", post(media::rerank))
        .route("/rerank", post(media::rerank))
        .route(
            "/v1/responses/{id}",
            get(responses::show).delete(responses::forget),
        )
        .route("/v1/models", get(inference::models))
        .route("/v1/models/{*id}", get(inference::model))
        .route("/v1/tasks", post(tasks::submit).get(tasks::list))
        .route("/v1/tasks/{id}", get(tasks::show))
        .route("/v1/tasks/{id}/cancel", post(tasks::cancel))
        .route("/status", get(status))
        .route("/status/events", get(admin::events))
        .route("/status/history", get(history::history))
        .route("/status/hourly", get(history::hourly))
        .route("/admin/breakers/{machine}/{action}", post(admin::breaker))
        .route("/admin/reload", post(admin::reload))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/api/embed", post(ollama::embed))
        .route("/api/embeddings", post(ollama::embeddings))
        .route("/api/tags", get(ollama::tags))
        .route("/api/ps", get(ollama::ps))
        .route("/api/show", post(ollama::show))
        .route("/api/pull", post(ollama::pull))
        .route("/api/version", get(ollama::version))
        .route("/api/push", post(ollama::manage))
        .route("/api/create", post(ollama::manage))
        .route("/api/copy", post(ollama::manage))
        .route("/api/delete", axum::routing::delete(ollama::manage))
        .route(
            "/api/blobs/{digest}",
            axum::routing::head(ollama::manage).post(ollama::manage),
        )
        .route("/", get(dashboard::root))
        .route("/metrics", get(prometheus))
        .fallback(|uri: axum::http::Uri| async move {
            AppError::new(
                Code::NotFound,
                format!("no such endpoint: {}", crate::text::bounded(uri.path())),
            )
        })
        .method_not_allowed_fallback(
            |method: axum::http::Method, uri: axum::http::Uri| async move {
                AppError::new(
                    Code::MethodNotAllowed,
                    format!(
                        "{method} is not allowed on {}; the Allow header lists what is",
                        crate::text::bounded(uri.path())
                    ),
                )
            },
        )
        .layer(middleware::from_fn_with_state(
            Arc::clone(&svc),
            guard::guard,
        ))
        .with_state(svc)
}

/// The hot POSTs, which the server answers without the router's walk ([`hot`]), by path.
pub fn hot_endpoint(method: &axum::http::Method, path: &str) -> Option<Endpoint> {
    if method != axum::http::Method::POST {
        return None;
    }
    [Endpoint::Chat, Endpoint::Completions, Endpoint::Embeddings]
        .into_iter()
        .find(|e| e.client_path() == path)
}

/// A hot POST ([`hot_endpoint`]) served as the router would serve it — the same guard, the
/// same handler — without its walk: the path match, the method router, the middleware's
/// boxing and their futures cost ~4,000 instructions a request (README "Performance").
pub async fn hot(svc: Arc<Service>, endpoint: Endpoint, req: axum::extract::Request) -> Response {
    // The handler's future is the large one: boxed once, as the router boxes it, so that
    // the futures around it stay small to move.
    let own = Arc::clone(&svc);
    let handler = move |req| {
        Box::pin(async move {
            match inference::completion(&own, endpoint, req).await {
                Ok(resp) => resp,
                Err(e) => e.into_response(),
            }
        })
    };
    guard::guarded(&svc, req, handler).await
}

/// Breakers, counters and routes, read live; the task queue's counts (one store read), with
/// the caller's own tasks named.
async fn status(
    State(svc): State<Arc<Service>>,
    owner: Option<axum::Extension<Owner>>,
) -> Json<crate::status::View> {
    let owner = owner.map(|o| o.0 .0).unwrap_or_default();
    let tasks = crate::status::TasksView::read(&svc, &owner).await;
    Json(
        crate::status::View::of(&svc.fleet())
            .with_host(crate::host::stats())
            .with_detached(idempotency::of(&svc).detached())
            .with_tasks(tasks)
            .with_shared_queue(svc.pooled().map(|p| {
                let s = p.state();
                crate::status::SharedQueueView {
                    last_error: s.last_error,
                    pool: crate::status::PoolCountsView {
                        due: s.pool.due,
                        later: s.pool.later,
                        running: s.pool.running,
                        unfinished: s.pool.unfinished,
                    },
                    running_here: s.running_here,
                    state: s.state.to_string(),
                }
            })),
    )
}

/// `GET /metrics`: Prometheus text; the task and detached-flight gauges are set as it
/// renders.
async fn prometheus(State(svc): State<Arc<Service>>) -> Response {
    let tasks: Vec<(crate::outcome::TaskStatus, u64)> = svc
        .tasks()
        .map(|t| t.counts().by_status())
        .unwrap_or_default();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::telemetry::render_with(&tasks, idempotency::of(&svc).detached()),
    )
        .into_response()
}
