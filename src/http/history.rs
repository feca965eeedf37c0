//! `GET /status/history?days=N` (SPEC §16: per machine and per day, trips, time open and
//! counts) and `GET /status/hourly` (the last 24 h by the hour, for the dashboard), read
//! from the store off the request's thread. Same auth as `/status`.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;

use super::error::{AppError, Code};
use crate::history::{self, History};
use crate::service::Service;
use crate::store::{Store, StoreError};

/// Query of `GET /status/history`: `days` as text, so a wrong one is named in the error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    days: Option<String>,
}

/// `days`: 1 to [`history::MAX_DAYS`], [`history::DEFAULT_DAYS`] when absent.
fn parse_days(days: Option<&str>) -> Result<u32, String> {
    let Some(text) = days else {
        return Ok(history::DEFAULT_DAYS);
    };
    match text.parse::<u32>() {
        Ok(n) if (1..=history::MAX_DAYS).contains(&n) => Ok(n),
        _ => Err(format!(
            "/status/history: days must be a whole number from 1 to {}, got '{}'",
            history::MAX_DAYS,
            crate::text::bounded(text)
        )),
    }
}

/// The store and the registry's machine names, or 404 without a store.
fn store_and_machines(svc: &Service) -> Result<(Arc<Store>, Vec<String>), AppError> {
    let store = svc.shared_store().ok_or_else(|| {
        AppError::new(
            Code::NoLedger,
            "this router keeps no history (no state_dir store)",
        )
    })?;
    let fleet = svc.fleet();
    let machines = fleet
        .registry
        .machines
        .iter()
        .map(|m| m.name.clone())
        .collect();
    Ok((store, machines))
}

/// Runs a store read on the blocking pool; a failure is logged and answered 500.
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, AppError> {
    let unreadable = || {
        AppError::new(
            Code::LedgerUnreadable,
            "the history could not be read; see the log",
        )
    };
    crate::heap::spawn_blocking(read)
        .await
        .map_err(|_| unreadable())?
        .map_err(|e| {
            tracing::error!(error = %e, "cannot read the history");
            unreadable()
        })
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::try_from(crate::clock::wall()).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// The last `days` days, in `telegram.timezone` when set, else UTC.
pub async fn history(
    State(svc): State<Arc<Service>>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<History>, AppError> {
    let q = query
        .map_err(|e| {
            AppError::new(
                Code::InvalidQuery,
                format!("/status/history: {e}; expected days"),
            )
        })?
        .0;
    let days = parse_days(q.days.as_deref()).map_err(|e| AppError::new(Code::InvalidQuery, e))?;
    let (store, machines) = store_and_machines(&svc)?;
    let tz = svc
        .fleet()
        .registry
        .telegram
        .as_ref()
        .and_then(|t| jiff::tz::TimeZone::get(&t.timezone).ok())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    let now = now();
    let h = blocking(move || history::read(store.path(), &machines, &tz, days, now)).await?;
    Ok(Json(h))
}

/// The last 24 hours by the hour (no query).
pub async fn hourly(
    State(svc): State<Arc<Service>>,
) -> Result<Json<history::hourly::Hourly>, AppError> {
    let (store, machines) = store_and_machines(&svc)?;
    let now = now();
    let h = blocking(move || history::hourly::read(store.path(), &machines, now)).await?;
    Ok(Json(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_is_one_to_ninety_and_thirty_by_default() {
        assert_eq!(parse_days(None), Ok(30));
        assert_eq!(parse_days(Some("1")), Ok(1));
        assert_eq!(parse_days(Some("90")), Ok(90));
        for bad in ["0", "91", "abc", "", "-1", "2.5", "99999999999"] {
            let e = parse_days(Some(bad)).unwrap_err();
            assert!(e.contains("from 1 to 90") && e.contains(bad), "{e}");
        }
    }
}
