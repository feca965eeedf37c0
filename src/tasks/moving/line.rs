//! One task as a line of an export file: every field the task has, its request and its
//! idempotency key, and read back as outside input (SPEC §7): parsed strictly, every value
//! checked, the error saying which field is wrong.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::outcome::TaskStatus;
use crate::store::tasks::moving::Moved;
use crate::store::tasks::Idem;
use crate::task::{
    endpoint_from, endpoint_name, Accept, AttemptRecord, Callback, Task, TaskError, TaskId,
    TaskResult,
};

/// An owner (a hash of an API key) at most, in characters.
const OWNER_MAX: usize = 256;

/// A task's line.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Line {
    id: TaskId,
    status: TaskStatus,
    owner: String,
    endpoint: String,
    route: Option<String>,
    accept: Accept,
    priority: i32,
    after: Vec<TaskId>,
    metadata: BTreeMap<String, String>,
    created_ms: i64,
    started_ms: Option<i64>,
    finished_ms: Option<i64>,
    deadline_ms: i64,
    attempts_used: u32,
    max_attempts: u32,
    interrupted: u32,
    attempts: Vec<AttemptRecord>,
    waiting_for: Option<String>,
    /// The request body as it was sent (JSON, verbatim); `null` once the task finished.
    request: Option<Box<RawValue>>,
    result: Option<TaskResult>,
    error: Option<TaskError>,
    callback: Option<Callback>,
    idempotency: Option<Key>,
}

/// An Idempotency-Key as the queues keep it: hashes, never the key or the body.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Key {
    key: String,
    fingerprint: String,
}

impl Line {
    /// `m` as a line; an error names the task whose request is not JSON text.
    pub(super) fn of(m: &Moved) -> Result<Line, String> {
        let t = &m.task;
        let request = match &m.request {
            None => None,
            Some(b) => Some(
                std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| RawValue::from_string(s.to_string()).ok())
                    .ok_or_else(|| format!("task {}: its request is not JSON", t.id))?,
            ),
        };
        Ok(Line {
            id: t.id.clone(),
            status: t.status,
            owner: t.owner.clone(),
            endpoint: endpoint_name(t.endpoint).to_string(),
            route: t.route.clone(),
            accept: t.accept,
            priority: t.priority,
            after: t.after.clone(),
            metadata: t.metadata.clone(),
            created_ms: t.created_ms,
            started_ms: t.started_ms,
            finished_ms: t.finished_ms,
            deadline_ms: t.deadline_ms,
            attempts_used: t.attempts_used,
            max_attempts: t.max_attempts,
            interrupted: t.interrupted,
            attempts: t.attempts.clone(),
            waiting_for: t.waiting_for.clone(),
            request,
            result: t.result.clone(),
            error: t.error.clone(),
            callback: t.callback.clone(),
            idempotency: m.idem.as_ref().map(|i| Key {
                key: i.key.clone(),
                fingerprint: i.fingerprint.clone(),
            }),
        })
    }

    /// The task this line holds, checked; the error says what is wrong (the caller adds
    /// where).
    pub(super) fn moved(self) -> Result<Moved, String> {
        let endpoint = endpoint_from(&self.endpoint).ok_or_else(|| {
            format!(
                "endpoint '{}' is no task endpoint",
                crate::text::bounded(&self.endpoint)
            )
        })?;
        if self.owner.chars().count() > OWNER_MAX {
            return Err(format!("owner is longer than {OWNER_MAX} characters"));
        }
        let finished = self.status.is_finished();
        if finished != self.finished_ms.is_some() {
            return Err(format!(
                "status {} with finished_ms {}: a task has finished_ms exactly when it finished",
                self.status,
                self.finished_ms.map_or("null".into(), |ms| ms.to_string())
            ));
        }
        if !finished && self.request.is_none() {
            return Err(format!(
                "an unfinished ({}) task needs its request",
                self.status
            ));
        }
        let idem = match self.idempotency {
            None => None,
            Some(k) => {
                for (what, v) in [("key", &k.key), ("fingerprint", &k.fingerprint)] {
                    if !is_digest(v) {
                        return Err(format!(
                            "idempotency.{what} is not a SHA-256 digest (64 lowercase hex digits)"
                        ));
                    }
                }
                Some(Idem {
                    key: k.key,
                    fingerprint: k.fingerprint,
                })
            }
        };
        let task = Task {
            seq: 0,
            id: self.id,
            owner: self.owner,
            status: self.status,
            endpoint,
            route: self.route,
            accept: self.accept,
            priority: self.priority,
            after: self.after,
            metadata: self.metadata,
            created_ms: self.created_ms,
            started_ms: self.started_ms,
            finished_ms: self.finished_ms,
            deadline_ms: self.deadline_ms,
            attempts_used: self.attempts_used,
            max_attempts: self.max_attempts,
            interrupted: self.interrupted,
            attempts: self.attempts,
            waiting_for: self.waiting_for,
            result: self.result,
            error: self.error,
            callback: self.callback,
        };
        task.checked()?;
        if task.interrupted > 2 {
            return Err(format!(
                "interrupted {}: a task is failed at its second interruption",
                task.interrupted
            ));
        }
        // A finished task keeps no request, in either queue.
        let request = match finished {
            true => None,
            false => self.request.map(|r| Bytes::from(r.get().to_string())),
        };
        Ok(Moved {
            task,
            request,
            idem,
        })
    }
}

fn is_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
