//! `/v1/tasks` on the pool's queue (`cluster.tasks: shared`, README "Several routers"): the
//! same submit body, checked by the same code, and the same task object; the task lives in
//! Redis, so any router of the pool shows, lists and cancels it. A 202 only once Redis
//! acknowledged the write; Redis away or slower than `cluster.task_timeout` is a 503
//! `queue_unavailable` with `Retry-After`.

use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::value::RawValue;

use super::{not_found, REPLAYED};
use crate::cluster::tasks::{Cancelled, Fetched, QueueError};
use crate::http::error::{AppError, Code};
use crate::outcome::TaskStatus;
use crate::store::tasks::Idem;
use crate::tasks::pooled::{PoolError, PoolQueue, Pooled};
use crate::tasks::submit::NewTask;
use crate::tasks::{Task, TaskId};

/// The pool's refusals: Redis away is a 503 the client may retry; a task that cannot be read
/// back is the router's trouble, logged.
impl From<PoolError> for AppError {
    fn from(e: PoolError) -> AppError {
        match e {
            PoolError::Queue(QueueError::Unavailable(why)) => AppError::new(
                Code::QueueUnavailable,
                format!("the shared task queue is unavailable ({why}); nothing was stored: try again shortly"),
            ),
            PoolError::Queue(QueueError::Full(n)) => AppError::new(
                Code::QueueFull,
                format!("the shared task queue holds {n} unfinished tasks, as many as tasks.max_queued allows; try again later"),
            ),
            PoolError::Queue(QueueError::KeyFull(max)) => AppError::new(
                Code::QueueFull,
                format!("your key has tasks.max_queued_per_key ({max}) unfinished tasks in the shared task queue; try again later"),
            ),
            PoolError::KeyReused => AppError::new(Code::IdempotencyKeyReused, e.to_string()),
            PoolError::After(e) => e.into(),
            PoolError::Queue(QueueError::Spoiled(_)) | PoolError::Vanished(_) => {
                tracing::error!(error = %e, "shared task queue: a task cannot be read back");
                AppError::new(
                    Code::TaskStoreFailed,
                    "a task in the shared queue cannot be read back; see the log",
                )
            }
        }
    }
}

/// A task with its request while it is unfinished.
fn whole(f: &Fetched) -> Response {
    let request = f
        .request
        .as_ref()
        .filter(|_| !f.task.status.is_finished())
        .and_then(|b| serde_json::from_slice::<&RawValue>(b).ok());
    Json(f.task.whole(request)).into_response()
}

/// `POST /v1/tasks`: 202 once Redis acknowledged the task; 200 and the task on a replay.
pub async fn submit(
    pq: &PoolQueue,
    owner: &str,
    new: NewTask,
    idem: Option<Idem>,
) -> Result<Response, AppError> {
    let request = new.request.clone();
    match pq.submit(owner, new, idem).await? {
        Pooled::New(task) => Ok(super::accepted(&task, &request)),
        Pooled::Replayed(f) => {
            let mut resp = whole(&f);
            resp.headers_mut()
                .insert(REPLAYED.clone(), HeaderValue::from_static("true"));
            Ok(resp)
        }
    }
}

/// `GET /v1/tasks/{id}`, with `?wait=`.
pub async fn show(
    pq: &PoolQueue,
    id: &TaskId,
    owner: &str,
    wait: Option<std::time::Duration>,
) -> Result<Response, AppError> {
    let got = match wait {
        Some(w) => pq.wait(id, Some(owner), w).await?,
        None => pq.get(id, Some(owner)).await?,
    };
    Ok(whole(&got.ok_or_else(|| not_found(id))?))
}

#[derive(Serialize)]
struct Page<'a> {
    object: &'static str,
    data: Vec<crate::task::Shown<'a>>,
    /// The id the next page starts before.
    next_before: Option<String>,
}

/// `GET /v1/tasks`: summaries, newest first; `next_before` is a task id here.
pub async fn list(
    pq: &PoolQueue,
    owner: &str,
    status: Option<TaskStatus>,
    before: Option<&str>,
    limit: u32,
) -> Result<Response, AppError> {
    let before = before
        .map(|b| {
            b.parse::<TaskId>().map_err(|e| {
                AppError::new(
                    Code::InvalidQuery,
                    format!("before: {e}; expected the next_before of the page before"),
                )
            })
        })
        .transpose()?;
    let page = pq
        .list(
            owner,
            status,
            before.as_ref().map(TaskId::as_str),
            limit as usize,
        )
        .await?;
    Ok(Json(Page {
        object: "list",
        data: page.tasks.iter().map(Task::summary).collect(),
        next_before: page.next_before,
    })
    .into_response())
}

/// `POST /v1/tasks/{id}/cancel`: any router of the pool cancels it; a running task's
/// router stops its walk at its next renew.
pub async fn cancel(pq: &PoolQueue, id: &TaskId, owner: &str) -> Result<Response, AppError> {
    match pq.cancel(id, owner).await? {
        Cancelled::Missing => Err(not_found(id)),
        Cancelled::AlreadyEnded(status) => Err(AppError::new(
            Code::TaskFinished,
            format!("{id} already finished ({status}); nothing to cancel"),
        )),
        Cancelled::From(_) => {
            let got = pq.get(id, Some(owner)).await?;
            Ok(whole(&got.ok_or_else(|| not_found(id))?))
        }
    }
}
