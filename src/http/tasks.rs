//! `/v1/tasks` (docs/api.md "Tasks"): submit, show (with `?wait=`), list, cancel.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::{AppError, Code};
use super::Owner;
use crate::outcome::TaskStatus;
use crate::service::Service;
use crate::store::tasks::Idem;
use crate::tasks::scheduler::{SubmitError, Submitted};
use crate::tasks::submit::{self, Invalid};
use crate::tasks::{Scheduler, Task, TaskId};

mod pooled;

/// The header on an idempotent replay (docs/api.md "Tasks").
pub static REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The longest `?wait=` a show may hold the answer for.
const WAIT_MAX: Duration = Duration::from_secs(600);

fn scheduler(svc: &Service) -> Result<&Arc<Scheduler>, AppError> {
    svc.tasks().ok_or_else(|| {
        AppError::new(
            Code::NoTaskStore,
            "this router keeps no tasks: tasks need a store (server.state_dir) to survive restarts",
        )
    })
}

/// Who a request acts for: tasks belong to the API key that submitted them.
fn owner(req: &axum::http::request::Parts) -> String {
    req.extensions
        .get::<Owner>()
        .map(|o| o.0.clone())
        .unwrap_or_default()
}

/// The queue's refusals in its own words; a store that failed is the router's, logged.
impl From<SubmitError> for AppError {
    fn from(e: SubmitError) -> AppError {
        let code = match &e {
            SubmitError::UnknownAfter { .. } => Code::InvalidTask,
            SubmitError::QueueFull { .. } | SubmitError::KeyFull { .. } => Code::QueueFull,
            SubmitError::KeyReused => Code::IdempotencyKeyReused,
            SubmitError::Store(why) => {
                tracing::error!(error = %why, "task store failed");
                return AppError::new(Code::TaskStoreFailed, "the task store failed; see the log");
            }
        };
        AppError::new(code, e.to_string())
    }
}

/// A submit body that is not a task: 400, or 413 over `tasks.max_request_body`.
impl From<Invalid> for AppError {
    fn from(e: Invalid) -> AppError {
        match e {
            Invalid::Bad(m) => AppError::new(Code::InvalidTask, m),
            Invalid::TooLarge(m) => AppError::new(Code::RequestTooLarge, m),
        }
    }
}

/// A task and, for the whole view, its request and result bodies.
async fn shown(s: &Scheduler, task: &Task, whole: bool) -> Result<Response, AppError> {
    if !whole {
        return Ok(Json(task.summary()).into_response());
    }
    // A finished task's request was dropped when it ended: `null`.
    let request = match task.status.is_finished() {
        true => None,
        false => s.request(&task.id).await?,
    };
    let request = request.and_then(|b| {
        serde_json::from_slice::<&RawValue>(&b)
            .ok()
            .map(|r| r.to_owned())
    });
    Ok(Json(task.whole(request.as_deref())).into_response())
}

/// `POST /v1/tasks`: 202 and the task once it is committed; 200 and the existing task on
/// an idempotent replay.
pub async fn submit(State(svc): State<Arc<Service>>, req: Request) -> Result<Response, AppError> {
    if svc.pooled().is_none() {
        scheduler(&svc)?;
    }
    let (parts, body) = req.into_parts();
    let fleet = svc.fleet();
    let bytes = super::inference::read_body(&fleet.registry.server, &parts.headers, body).await?;
    let new = submit::read(&bytes, &fleet.registry, crate::clock::wall())?;
    let owner = owner(&parts);
    // The same key rules as on completions; stored as hashes, never the key or the body.
    let idem = super::idempotency::key_of(&parts.headers)?.map(|key| {
        let keyed =
            super::idempotency::Keyed::new(&Owner(owner.clone()), &key, "/v1/tasks", &bytes);
        Idem {
            key: keyed.key_hash().to_string(),
            fingerprint: keyed.fingerprint().to_string(),
        }
    });
    if let Some(pq) = svc.pooled() {
        return pooled::submit(pq, &owner, new, idem).await;
    }
    let s = scheduler(&svc)?;
    let request = new.request.clone();
    let submitted = s.submit(&owner, new, idem).await?;
    let mut resp = match submitted {
        Submitted::New(task) => accepted(&task, &request),
        Submitted::Replayed(task) => shown(s, &task, true).await?,
    };
    let replayed = resp.status() != StatusCode::ACCEPTED;
    if replayed {
        resp.headers_mut()
            .insert(REPLAYED.clone(), HeaderValue::from_static("true"));
    }
    Ok(resp)
}

/// A new task's 202: the whole task, shown with the request just read (no need to read it
/// back), and `Location`.
fn accepted(task: &Task, request: &[u8]) -> Response {
    let raw = serde_json::from_slice::<&RawValue>(request).ok();
    let mut resp = Json(task.whole(raw)).into_response();
    *resp.status_mut() = StatusCode::ACCEPTED;
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/tasks/{}", task.id)) {
        resp.headers_mut()
            .insert(axum::http::header::LOCATION, location);
    }
    resp
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    wait: Option<String>,
}

fn task_id(path: Result<Path<String>, PathRejection>) -> Result<TaskId, AppError> {
    let Path(id) = path.map_err(|e| AppError::new(Code::InvalidPath, e.body_text()))?;
    id.parse()
        .map_err(|e: String| AppError::new(Code::TaskNotFound, e))
}

fn not_found(id: &TaskId) -> AppError {
    AppError::new(Code::TaskNotFound, format!("no task {id} (of yours)"))
}

/// `GET /v1/tasks/{id}`: the whole task; `?wait=30s` holds the answer until it finished.
pub async fn show(
    State(svc): State<Arc<Service>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ShowQuery>, QueryRejection>,
    req: Request,
) -> Result<Response, AppError> {
    let id = task_id(path)?;
    let q = query
        .map_err(|e| {
            AppError::new(
                Code::InvalidQuery,
                format!("/v1/tasks/{{id}}: {e}; expected wait"),
            )
        })?
        .0;
    let wait = q
        .wait
        .as_deref()
        .map(|w| crate::registry::parse_duration_max(w, WAIT_MAX))
        .transpose()
        .map_err(|e| AppError::new(Code::InvalidQuery, format!("wait: {e}")))?;
    let (parts, _) = req.into_parts();
    let owner = owner(&parts);
    if let Some(pq) = svc.pooled() {
        return pooled::show(pq, &id, &owner, wait).await;
    }
    let s = scheduler(&svc)?;
    let task = match wait {
        Some(w) => s.wait(&id, Some(&owner), w).await,
        None => s.get(&id, Some(&owner)).await,
    }?
    .ok_or_else(|| not_found(&id))?;
    shown(s, &task, true).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    limit: Option<u32>,
    /// A whole number (the local queue's `next_before`) or a task id (the shared queue's).
    before: Option<String>,
}

#[derive(Serialize)]
pub struct Page<'a> {
    object: &'static str,
    data: Vec<crate::task::Shown<'a>>,
    next_before: Option<i64>,
}

/// `GET /v1/tasks`: summaries, newest first, with `next_before` for the next page.
pub async fn list(
    State(svc): State<Arc<Service>>,
    query: Result<Query<ListQuery>, QueryRejection>,
    req: Request,
) -> Result<Response, AppError> {
    let q = query
        .map_err(|e| {
            AppError::new(
                Code::InvalidQuery,
                format!("/v1/tasks: {e}; expected status, limit, before"),
            )
        })?
        .0;
    let status = q
        .status
        .as_deref()
        .map(str::parse::<TaskStatus>)
        .transpose()
        .map_err(|e| AppError::new(Code::InvalidQuery, format!("status: {e}")))?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let (parts, _) = req.into_parts();
    let owner = owner(&parts);
    if let Some(pq) = svc.pooled() {
        return pooled::list(pq, &owner, status, q.before.as_deref(), limit).await;
    }
    let s = scheduler(&svc)?;
    let before = q
        .before
        .as_deref()
        .map(str::parse::<i64>)
        .transpose()
        .map_err(|_| {
            AppError::new(
                Code::InvalidQuery,
                "before: expected the next_before of the page before, a whole number",
            )
        })?;
    let tasks = s.list(Some(&owner), status, before, limit).await?;
    let next_before = (tasks.len() == limit as usize)
        .then(|| tasks.last().map(|t| t.seq))
        .flatten();
    Ok(Json(Page {
        object: "list",
        data: tasks.iter().map(Task::summary).collect(),
        next_before,
    })
    .into_response())
}

/// `POST /v1/tasks/{id}/cancel`: cancels an unfinished task and its follow-ups.
pub async fn cancel(
    State(svc): State<Arc<Service>>,
    path: Result<Path<String>, PathRejection>,
    req: Request,
) -> Result<Response, AppError> {
    let id = task_id(path)?;
    let (parts, _) = req.into_parts();
    let owner = owner(&parts);
    if let Some(pq) = svc.pooled() {
        return pooled::cancel(pq, &id, &owner).await;
    }
    let s = scheduler(&svc)?;
    let before = s
        .get(&id, Some(&owner))
        .await?
        .ok_or_else(|| not_found(&id))?;
    if before.status.is_finished() {
        return Err(AppError::new(
            Code::TaskFinished,
            format!(
                "{id} already finished ({}); nothing to cancel",
                before.status
            ),
        ));
    }
    let task = s
        .cancel(&id, Some(&owner))
        .await?
        .ok_or_else(|| not_found(&id))?;
    shown(s, &task, true).await
}
