//! The shared queue's connection to Redis: made at start and checked durable, made again
//! (and checked again) by the first operation after it dropped, and every operation bounded
//! by `cluster.task_timeout`.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::{durable, millis, QueueError, SharedQueue, CONNECT_MAX};
use crate::cluster::Endpoint;

impl SharedQueue {
    /// The connection, made again (bounded by `cluster.task_timeout`) if it dropped.
    pub(super) async fn conn(&self) -> Result<MultiplexedConnection, QueueError> {
        if let Some(c) = lock(&self.conn).clone() {
            return Ok(c);
        }
        let opened = tokio::time::timeout(
            self.timeout,
            open(&self.endpoint, self.timeout, self.assume_durable),
        )
        .await
        .map_err(|_| {
            QueueError::Unavailable(format!(
                "no answer from Redis at {} within cluster.task_timeout",
                self.endpoint.host()
            ))
        })?
        .map_err(|e| QueueError::Unavailable(e.why()))?;
        tracing::info!(redis = %self.endpoint.host(), "shared task queue: connected to Redis");
        *lock(&self.conn) = Some(opened.clone());
        Ok(opened)
    }

    /// One operation, at most `cluster.task_timeout`.
    pub(super) async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, QueueError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error() {
                    *lock(&self.conn) = None;
                }
                Err(QueueError::Unavailable(crate::text::bounded(
                    &self.endpoint.hide(&e.to_string()),
                )))
            }
            Err(_) => Err(QueueError::Unavailable(format!(
                "no answer within cluster.task_timeout ({} ms)",
                millis(self.timeout)
            ))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why no connection was made.
#[derive(Debug)]
pub(super) enum Refused {
    /// Redis did not answer: it may come back.
    Unreachable(String),
    /// Redis answered, but does not write every change to disk (or would not say).
    NotDurable(String),
}

impl Refused {
    pub(super) fn why(self) -> String {
        match self {
            Refused::Unreachable(why) | Refused::NotDurable(why) => why,
        }
    }
}

/// A connection to Redis, checked to be durable (or `assume`d so).
pub(super) async fn open(
    endpoint: &Endpoint,
    bound: Duration,
    assume: bool,
) -> Result<MultiplexedConnection, Refused> {
    let opts = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_MAX))
        .set_response_timeout(Some(bound));
    let connecting = endpoint
        .client()
        .get_multiplexed_async_connection_with_config(&opts);
    let mut conn = tokio::time::timeout(CONNECT_MAX, connecting)
        .await
        .map_err(|_| {
            Refused::Unreachable(format!(
                "no answer from Redis at {} within {CONNECT_MAX:?}",
                endpoint.host()
            ))
        })?
        .map_err(|e| {
            Refused::Unreachable(format!(
                "cannot reach Redis at {}: {}",
                endpoint.host(),
                endpoint.hide(&e.to_string())
            ))
        })?;
    durable::check(&mut conn, assume)
        .await
        .map_err(Refused::NotDurable)?;
    Ok(conn)
}
