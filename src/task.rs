//! A task as data (docs/api.md "Tasks"): its id, what it asks, where it stands, as the store keeps
//! it and the API shows it. The queue that runs tasks is [`crate::tasks`].

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::outcome::Endpoint;
use crate::outcome::{AttemptOutcome, Delivery, Reason, TaskCode, TaskStatus};

/// `tsk_` and 26 characters: 10 of creation time (ms, so ids sort by age), 16 random.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

impl TaskId {
    /// A fresh id. Unique within the process (a counter) and across processes (time and
    /// the process's random hasher keys); ids are not secrets: tasks are owned.
    pub fn new() -> TaskId {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        let random = h.finish();
        let mut out = String::with_capacity(30);
        out.push_str("tsk_");
        for i in (0..10).rev() {
            out.push(ALPHABET[((ms >> (i * 5)) & 31) as usize] as char);
        }
        let mut r = u128::from(random) << 16 | u128::from(COUNTER.load(Ordering::Relaxed) & 0xffff);
        for _ in 0..16 {
            out.push(ALPHABET[(r & 31) as usize] as char);
            r >>= 5;
        }
        TaskId(out)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for TaskId {
    fn default() -> Self {
        TaskId::new()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for TaskId {
    type Error = String;

    fn try_from(s: String) -> Result<TaskId, String> {
        let ok =
            s.len() == 30 && s.starts_with("tsk_") && s[4..].bytes().all(|b| ALPHABET.contains(&b));
        if ok {
            Ok(TaskId(s))
        } else {
            Err(format!(
                "'{}' is not a task id (expected tsk_ and 26 lowercase letters or digits)",
                crate::text::bounded(&s)
            ))
        }
    }
}

impl std::str::FromStr for TaskId {
    type Err = String;

    fn from_str(s: &str) -> Result<TaskId, String> {
        TaskId::try_from(s.to_string())
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

/// Which targets of its route a task accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accept {
    /// Any target of the route: degrade rather than stall.
    #[default]
    Chain,
    /// Only targets with the first target's backend name.
    SameModel,
}

impl Accept {
    pub fn as_str(self) -> &'static str {
        match self {
            Accept::Chain => "chain",
            Accept::SameModel => "same_model",
        }
    }
}

/// The endpoints a task may call. Uploads and speech are not among them: an upload is
/// held only while its client waits, and speech is a stream.
pub const TASK_ENDPOINTS: [Endpoint; 6] = [
    Endpoint::Chat,
    Endpoint::Completions,
    Endpoint::Embeddings,
    Endpoint::Responses,
    Endpoint::ImagesGenerations,
    Endpoint::Rerank,
];

/// The name a task gives its endpoint: its path after `/v1/` (`chat/completions`,
/// `images/generations`, `rerank`, ...).
pub fn endpoint_name(e: Endpoint) -> &'static str {
    &e.client_path()["/v1/".len()..]
}

/// A task endpoint by its name.
pub fn endpoint_from(s: &str) -> Option<Endpoint> {
    TASK_ENDPOINTS.into_iter().find(|&e| endpoint_name(e) == s)
}

/// One target's part in one walk, as `attempts[]` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// RFC 3339.
    pub at: String,
    pub target: String,
    pub outcome: AttemptOutcome,
    pub reason: Option<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether this walk used one of the task's attempts (set on the walk's last record).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub charged: bool,
}

/// What a succeeded task keeps of its answer: the machine's status, who served, and the
/// body as the machine sent it (JSON, kept as text: it is shown, never edited).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskResult {
    pub status: u16,
    pub target: String,
    pub body: Box<RawValue>,
}

impl TaskResult {
    /// A machine's answer; a body that is not JSON is kept as `null` (a served answer was
    /// checked to be JSON before it counted as served).
    pub fn new(status: u16, target: String, body: &[u8]) -> TaskResult {
        let body = std::str::from_utf8(body)
            .ok()
            .and_then(|t| RawValue::from_string(t.to_string()).ok())
            .unwrap_or_else(|| RawValue::NULL.to_owned());
        TaskResult {
            status,
            target,
            body,
        }
    }
}

impl PartialEq for TaskResult {
    fn eq(&self, other: &TaskResult) -> bool {
        self.status == other.status
            && self.target == other.target
            && self.body.get() == other.body.get()
    }
}

/// A task's error, OpenAI-style.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskError {
    #[serde(rename = "type")]
    pub kind: String,
    pub code: TaskCode,
    pub message: String,
    /// The machine's answer when it refused the request itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Box<RawValue>>,
}

impl PartialEq for TaskError {
    fn eq(&self, other: &TaskError) -> bool {
        self.kind == other.kind
            && self.code == other.code
            && self.message == other.message
            && self.upstream.as_ref().map(|r| r.get()) == other.upstream.as_ref().map(|r| r.get())
    }
}

/// The callback's delivery, as the task shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Callback {
    pub url: String,
    pub state: Delivery,
    pub attempts: u32,
    pub last_error: Option<String>,
}

/// A whole task as the store holds it (without its request body, which stays on disk).
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub seq: i64,
    pub id: TaskId,
    pub owner: String,
    pub status: TaskStatus,
    pub endpoint: Endpoint,
    pub route: Option<String>,
    pub accept: Accept,
    pub priority: i32,
    pub after: Vec<TaskId>,
    pub metadata: BTreeMap<String, String>,
    pub created_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub deadline_ms: i64,
    pub attempts_used: u32,
    pub max_attempts: u32,
    pub interrupted: u32,
    pub attempts: Vec<AttemptRecord>,
    pub waiting_for: Option<String>,
    pub result: Option<TaskResult>,
    pub error: Option<TaskError>,
    pub callback: Option<Callback>,
}

/// The task object of the API; `request` and `result` only in [`Task::whole`].
#[derive(Serialize)]
pub struct Shown<'a> {
    pub id: &'a TaskId,
    pub object: &'static str,
    pub status: TaskStatus,
    pub endpoint: &'static str,
    pub route: Option<&'a str>,
    pub accept: Accept,
    pub priority: i32,
    pub after: &'a [TaskId],
    pub metadata: &'a BTreeMap<String, String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub deadline: String,
    pub attempts_used: u32,
    pub max_attempts: u32,
    pub waiting_for: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<&'a [AttemptRecord]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<Option<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Option<&'a TaskResult>>,
    pub error: Option<&'a TaskError>,
    pub callback: Option<&'a Callback>,
}

/// What an `interrupted` attempt says, in either queue: a task moved between them keeps
/// its records word for word.
pub const INTERRUPTED: &str = "the router stopped while this task was running";

/// Timestamps a task may carry (unix ms): up to the end of year 9999.
pub const MS_MAX: i64 = 253_402_300_799_999;
/// Attempt records a task read back may list.
const RECORDS_MAX: usize = 10_000;

fn at(ms: i64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    crate::clock::rfc3339(t)
}

impl Task {
    /// Whether its values are ones a task can hold (times, priority, counts), for a task
    /// read back from outside (Redis, an export file); the error says which is not.
    pub fn checked(&self) -> Result<(), String> {
        let stamps = [
            Some(self.created_ms),
            self.started_ms,
            self.finished_ms,
            Some(self.deadline_ms),
        ];
        if stamps
            .into_iter()
            .flatten()
            .any(|ms| !(0..=MS_MAX).contains(&ms))
        {
            return Err("a time is out of range".into());
        }
        if !(-100..=100).contains(&self.priority) {
            return Err(format!("priority {} is outside -100..100", self.priority));
        }
        if self.metadata.len() > 16 || self.after.len() > 1000 || self.attempts.len() > RECORDS_MAX
        {
            return Err("more metadata, after or attempts than a task holds".into());
        }
        if self.max_attempts > 1000 || self.attempts_used > self.max_attempts {
            return Err(format!(
                "attempts_used {} of max_attempts {}",
                self.attempts_used, self.max_attempts
            ));
        }
        Ok(())
    }

    /// The whole task (`GET /v1/tasks/{id}`, callbacks): attempts, request and result. A
    /// finished task's request is `null`: its body is dropped when it ends.
    pub fn whole<'a>(&'a self, request: Option<&'a RawValue>) -> Shown<'a> {
        let mut s = self.summary();
        s.attempts = Some(&self.attempts);
        s.request = Some(request);
        s.result = Some(self.result.as_ref());
        s
    }

    /// A summary (`GET /v1/tasks`): no request or result bodies, no attempt list.
    pub fn summary(&self) -> Shown<'_> {
        Shown {
            id: &self.id,
            object: "task",
            status: self.status,
            endpoint: endpoint_name(self.endpoint),
            route: self.route.as_deref(),
            accept: self.accept,
            priority: self.priority,
            after: &self.after,
            metadata: &self.metadata,
            created_at: at(self.created_ms),
            started_at: self.started_ms.map(at),
            finished_at: self.finished_ms.map(at),
            deadline: at(self.deadline_ms),
            attempts_used: self.attempts_used,
            max_attempts: self.max_attempts,
            waiting_for: self.waiting_for.as_deref(),
            attempts: None,
            request: None,
            result: None,
            error: self.error.as_ref(),
            callback: self.callback.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_well_formed_and_sort_by_age() {
        let a = TaskId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ids: Vec<TaskId> = (0..1000).map(|_| TaskId::new()).collect();
        let set: std::collections::HashSet<&TaskId> = ids.iter().collect();
        assert_eq!(set.len(), 1000);
        for id in &ids {
            assert_eq!(id.as_str().parse::<TaskId>().as_ref(), Ok(id));
            assert!(a.as_str()[..14] <= id.as_str()[..14]);
        }
        assert!("tsk_short".parse::<TaskId>().is_err());
        assert!("job_0123456789abcdefghjkmnpqrs".parse::<TaskId>().is_err());
    }
}
