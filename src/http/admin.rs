//! The ledger and the admin endpoints: `GET /status/events`, manual breaker control and
//! reloads.

use std::str::FromStr;
use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::error::{AppError, Code};
use crate::breaker::{Event, Phase};
use crate::service::{Reloaded, Service};
use crate::store::LedgerRow;

/// Query of `GET /status/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    machine: Option<String>,
    /// RFC 3339 time or unix milliseconds.
    since: Option<String>,
    /// A `seq` from the previous page: events older than it.
    before: Option<i64>,
    limit: Option<u32>,
}

/// A page of the ledger.
#[derive(Serialize)]
pub struct Events {
    events: Vec<LedgerRow>,
    /// The `before` of the next (older) page, when this one was full.
    next_before: Option<i64>,
}

/// The ledger, newest first, paginated with `before`.
pub async fn events(
    State(svc): State<Arc<Service>>,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<Events>, AppError> {
    let q = query
        .map_err(|e| {
            AppError::new(
                Code::InvalidQuery,
                format!("/status/events: {e}; expected machine, since, before, limit"),
            )
        })?
        .0;
    let store = svc.store().ok_or_else(|| {
        AppError::new(
            Code::NoLedger,
            "this router keeps no ledger (no state_dir store)",
        )
    })?;
    let since_ms = q
        .since
        .as_deref()
        .map(parse_since)
        .transpose()
        .map_err(|e| AppError::new(Code::InvalidQuery, e))?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let path = store.path().to_path_buf();
    let (machine, before) = (q.machine, q.before);
    let events = crate::heap::spawn_blocking(move || {
        crate::store::events(&path, machine.as_deref(), since_ms, before, limit)
    })
    .await
    .map_err(|_| AppError::new(Code::LedgerUnreadable, "the ledger read was cancelled"))?
    .map_err(|e| {
        tracing::error!(error = %e, "cannot read the ledger");
        AppError::new(
            Code::LedgerUnreadable,
            "the ledger could not be read; see the log",
        )
    })?;
    let next_before = (events.len() == limit as usize)
        .then(|| events.last().map(|e| e.seq))
        .flatten();
    Ok(Json(Events {
        events,
        next_before,
    }))
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

/// A manual breaker action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Open,
    Close,
    Reset,
}

impl FromStr for Action {
    type Err = AppError;

    fn from_str(s: &str) -> Result<Action, AppError> {
        match s {
            "open" => Ok(Action::Open),
            "close" => Ok(Action::Close),
            "reset" => Ok(Action::Reset),
            _ => Err(AppError::new(
                Code::UnknownAction,
                format!(
                    "unknown action '{}'; expected open, close or reset",
                    crate::text::bounded(s)
                ),
            )),
        }
    }
}

/// Who and why, from the optional JSON body.
#[derive(Default, Deserialize)]
struct Note {
    by: Option<String>,
    why: Option<String>,
}

/// The answer to a manual action: the breaker's state after it.
#[derive(Serialize)]
pub struct Breaker {
    machine: String,
    state: Phase,
}

/// `POST /admin/breakers/{machine}/open|close|reset`, with optional `x-labrouter-by` / JSON
/// who/why.
pub async fn breaker(
    State(svc): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Json<Breaker>, AppError> {
    let Path((machine, action)) = path.map_err(|e| {
        AppError::new(
            Code::InvalidPath,
            format!(
                "/admin/breakers/{{machine}}/{{action}}: {}",
                crate::text::bounded(&e.body_text())
            ),
        )
    })?;
    let fleet = svc.fleet();
    let i = fleet.registry.machine_index(&machine).ok_or_else(|| {
        let known: Vec<&str> = fleet
            .registry
            .machines
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        AppError::new(
            Code::MachineNotFound,
            format!(
                "machine '{}' does not exist; expected one of: {}",
                crate::text::bounded(&machine),
                known.join(", ")
            ),
        )
    })?;
    let body = super::inference::read_body(&fleet.registry.server, &headers, body).await?;
    let note: Note = if body.is_empty() {
        Note::default()
    } else {
        // Any JSON object; fields other than by and why are ignored, as before.
        match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&body) {
            Ok(map) => Note {
                by: map.get("by").and_then(|v| v.as_str()).map(str::to_string),
                why: map.get("why").and_then(|v| v.as_str()).map(str::to_string),
            },
            Err(_) => {
                return Err(AppError::new(
                    Code::InvalidJson,
                    "admin body must be a JSON object like {\"by\": \"alice\", \"why\": \"maintenance\"}",
                ))
            }
        }
    };
    // Outside text bound for the log and the ledger: short, no control characters.
    let by = note
        .by
        .as_deref()
        .or_else(|| headers.get("x-labrouter-by").and_then(|v| v.to_str().ok()))
        .map(crate::text::bounded);
    let why = note.why.as_deref().map(crate::text::bounded);
    let act: Action = action.parse()?;
    let words = match (by, why) {
        (Some(b), Some(w)) => format!("manual {action} by {b}: {w}"),
        (Some(b), None) => format!("manual {action} by {b}"),
        (None, Some(w)) => format!("manual {action}: {w}"),
        (None, None) => format!("manual {action}"),
    };
    let event = match act {
        Action::Open => Event::ForceOpen(words),
        Action::Close => Event::ForceClose(words),
        Action::Reset => Event::Reset(words),
    };
    fleet.machines.step(i, event);
    Ok(Json(Breaker {
        state: fleet.machines.phase(i),
        machine,
    }))
}

/// What a reload did.
#[derive(Serialize)]
pub struct Reload {
    reloaded: Reloaded,
}

/// `POST /admin/reload`: read registry.yaml again; 200 with what changed, or 422 with why
/// not (the old registry keeps serving).
pub async fn reload(State(svc): State<Arc<Service>>) -> Result<Json<Reload>, AppError> {
    let report = crate::heap::spawn_blocking(move || svc.reload())
        .await
        .map_err(|_| AppError::new(Code::ReloadFailed, "the reload task failed"))?
        .map_err(|e| {
            AppError::new(
                Code::RegistryRejected,
                format!("registry not reloaded, the old one keeps serving: {e}"),
            )
        })?;
    Ok(Json(Reload { reloaded: report }))
}
