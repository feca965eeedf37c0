//! What reached the simulated machine: requests per path, when work arrived, the last work body.
//!
//! Work means every path but the metadata ones ([`METADATA`]: the model lists, the version,
//! the banner a health probe asks for), so tests can tell traffic the router routed from its
//! own checks.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

use super::lock;

/// The most work-request arrival times a sim remembers (a soak of hours stays bounded).
pub const HIT_LOG_MAX: usize = 1 << 22;

/// The paths that are not work: OpenAI's model list and Ollama's model lists, model card,
/// version and banner, whatever API the sim speaks.
const METADATA: [&str; 6] = [
    "/v1/models",
    "/api/tags",
    "/api/ps",
    "/api/version",
    "/api/show",
    "/",
];

/// Whether a request on `path` is work (anything but [`METADATA`]).
fn is_work(path: &str) -> bool {
    !METADATA.contains(&path)
}

#[derive(Default)]
pub(super) struct Counts {
    hits: Mutex<HashMap<String, u64>>,
    /// Wall-clock arrival of each work request, oldest first, at most [`HIT_LOG_MAX`] of them.
    hit_log: Mutex<Vec<SystemTime>>,
    last_body: Mutex<Option<Bytes>>,
    /// Work requests being answered now, and the most at once since the last reset.
    at_once: Mutex<(u64, u64)>,
}

/// A work request being answered: counted at once until dropped (its answer is on its way,
/// or it was cut).
pub(super) struct Answering<'a>(&'a Counts);

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        let mut n = lock(&self.0.at_once);
        n.0 = n.0.saturating_sub(1);
    }
}

impl Counts {
    /// Counts one request on `path` (a work request also logs its arrival time).
    pub(super) fn count(&self, path: &str) {
        *lock(&self.hits).entry(path.to_owned()).or_insert(0) += 1;
        if is_work(path) {
            let mut log = lock(&self.hit_log);
            if log.len() < HIT_LOG_MAX {
                log.push(crate::clock::wall());
            }
        }
    }

    /// A work request is being answered until the guard drops.
    pub(super) fn answering(&self) -> Answering<'_> {
        let mut n = lock(&self.at_once);
        n.0 += 1;
        n.1 = n.1.max(n.0);
        Answering(self)
    }

    pub(super) fn most_at_once(&self) -> u64 {
        lock(&self.at_once).1
    }

    pub(super) fn hits(&self, path: &str) -> u64 {
        lock(&self.hits).get(path).copied().unwrap_or(0)
    }

    pub(super) fn work_hits(&self) -> u64 {
        let hits = lock(&self.hits);
        hits.iter()
            .filter(|(p, _)| is_work(p))
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
        let mut n = lock(&self.at_once);
        n.1 = n.0;
    }
}
