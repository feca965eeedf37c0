//! What reached the simulated machine: requests per path, when work arrived, the last work body.
//!
//! Work means every path but /v1/models (the health probe), so tests can tell traffic the
//! router routed from its own checks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

use super::lock;

/// The most work-request arrival times a sim remembers (a soak of hours stays bounded).
pub const HIT_LOG_MAX: usize = 1 << 22;

/// The path that is not work: the model list a health check asks for.
const MODELS: &str = "/v1/models";

#[derive(Default)]
pub(super) struct Counts {
    hits: Mutex<HashMap<String, u64>>,
    /// Wall-clock arrival of each work request, oldest first, at most [`HIT_LOG_MAX`] of them.
    hit_log: Mutex<Vec<SystemTime>>,
    last_body: Mutex<Option<Bytes>>,
}

impl Counts {
    /// Counts one request on `path` (a work request also logs its arrival time).
    pub(super) fn count(&self, path: &str) {
        *lock(&self.hits).entry(path.to_owned()).or_insert(0) += 1;
        if path != MODELS {
            let mut log = lock(&self.hit_log);
            if log.len() < HIT_LOG_MAX {
                log.push(SystemTime::now());
            }
        }
    }

    pub(super) fn hits(&self, path: &str) -> u64 {
        lock(&self.hits).get(path).copied().unwrap_or(0)
    }

    pub(super) fn work_hits(&self) -> u64 {
        let hits = lock(&self.hits);
        hits.iter()
            .filter(|(p, _)| p.as_str() != MODELS)
            .map(|(_, n)| n)
            .sum()
    }

    pub(super) fn hit_times(&self) -> Vec<SystemTime> {
        lock(&self.hit_log).clone()
    }

    pub(super) fn keep_body(&self, body: Bytes) {
        *lock(&self.last_body) = Some(body);
    }

    pub(super) fn last_body(&self) -> Option<Bytes> {
        lock(&self.last_body).clone()
    }

    pub(super) fn reset(&self) {
        lock(&self.hits).clear();
        lock(&self.hit_log).clear();
        *lock(&self.last_body) = None;
    }
}
