//! The access log (README "Watching it"), as nginx keeps one: a line per request at `info`,
//! target `labrouter::access` — method, path, client, status, route, target, pick, skipped
//! targets with their reasons, the task, the time to the response head, and the bytes each
//! way where known. `--log-format json` makes it JSON as every other line;
//! `server.access_log: false` turns it off. The query string is never logged, and no header
//! but labrouter's own: keys and tokens stay out.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request};
use axum::http::header::{CONTENT_LENGTH, LOCATION};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use tokio::time::Instant;

use crate::text::bounded;

/// What the log line needs from the request, taken before it is handled.
pub(super) struct Access {
    method: Method,
    path: String,
    client: Option<SocketAddr>,
    request_bytes: Option<u64>,
    started: Instant,
}

impl Access {
    pub(super) fn of(req: &Request) -> Access {
        Access {
            method: req.method().clone(),
            path: bounded(req.uri().path()),
            client: req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
            request_bytes: length(req.headers()),
            started: Instant::now(),
        }
    }

    /// Logs the request with `resp`, its answer's head.
    pub(super) fn log(self, resp: &Response) {
        let h = resp.headers();
        let header = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("-");
        let location = h.get(LOCATION).and_then(|v| v.to_str().ok());
        let task = location
            .unwrap_or(&self.path)
            .strip_prefix("/v1/tasks/")
            .and_then(|rest| rest.split('/').next())
            .filter(|id| !id.is_empty())
            .unwrap_or("-");
        let status = resp.status().as_u16();
        let client = self
            .client
            .map_or_else(|| "-".to_string(), |c| c.ip().to_string());
        let bytes = |n: Option<u64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
        tracing::info!(
            target: "labrouter::access",
            method = %self.method,
            path = %self.path,
            client = %client,
            status,
            route = header("x-labrouter-route"),
            target = header("x-labrouter-target"),
            pick = header("x-labrouter-pick"),
            skipped = header("x-labrouter-skipped"),
            task,
            ms = self.started.elapsed().as_secs_f64() * 1000.0,
            request_bytes = %bytes(self.request_bytes),
            response_bytes = %bytes(length(h)),
            "{} {} {status}",
            self.method,
            self.path,
        );
    }
}

fn length(h: &HeaderMap) -> Option<u64> {
    h.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}
