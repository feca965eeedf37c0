//! The `tasks` block of `/status` (docs/api.md "Tasks", "Seen everywhere"): the queue's live counts
//! from the scheduler, the last 24 h and the latest failures from the store.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::rfc3339;
use crate::outcome::{TaskCode, TaskStatus};
use crate::service::Service;
use crate::store::tasks::{self as stored, Failure};
use crate::store::{from_ms, ms};
use crate::tasks::scheduler::Counts;
use crate::tasks::{Task, TaskId};

/// The window of the `_24h` counts.
pub const DAY: Duration = Duration::from_secs(24 * 3600);

/// How many failed or expired tasks `/status` lists.
pub const RECENT_FAILURES: u32 = 5;

/// Tasks now and over the last 24 h. Keys in sorted order, as the rest of `/status`;
/// missing keys read as defaults, so `labrouter status` reads older and newer routers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TasksView {
    /// Waiting on `after` tasks that have not all succeeded.
    pub blocked: u64,
    pub cancelled_24h: u64,
    pub expired_24h: u64,
    pub failed_24h: u64,
    /// The task waiting longest, and what holds it back.
    pub oldest_waiting: Option<OldestWaiting>,
    /// Seconds since the task waiting longest was submitted.
    pub oldest_waiting_s: Option<u64>,
    pub queued: u64,
    /// The latest failed or expired tasks, newest first (at most [`RECENT_FAILURES`]).
    pub recent_failures: Vec<TaskFailure>,
    pub running: u64,
    pub succeeded_24h: u64,
    /// Every target they accept is held back by a breaker.
    pub waiting: u64,
}

/// The task waiting longest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OldestWaiting {
    pub id: TaskId,
    /// When it was submitted, RFC 3339 UTC: it has waited since (a waiting task never ran).
    pub since: String,
    /// Plain words: what holds each target back.
    pub waiting_for: Option<String>,
}

/// A task that failed or expired.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskFailure {
    pub code: Option<TaskCode>,
    /// RFC 3339 UTC.
    pub finished_at: String,
    pub id: TaskId,
    pub message: Option<String>,
    pub status: TaskStatus,
}

impl TasksView {
    /// The view of the live `counts` and `oldest` waiting task, the store's `finished`
    /// counts of the last 24 h and its latest `failures`.
    pub fn of(
        counts: &Counts,
        oldest: Option<&Task>,
        finished: &[(TaskStatus, u64)],
        failures: &[Failure],
    ) -> TasksView {
        let done = |s: TaskStatus| {
            finished
                .iter()
                .filter(|(t, _)| *t == s)
                .map(|(_, n)| n)
                .sum()
        };
        TasksView {
            blocked: counts.blocked,
            cancelled_24h: done(TaskStatus::Cancelled),
            expired_24h: done(TaskStatus::Expired),
            failed_24h: done(TaskStatus::Failed),
            oldest_waiting: oldest.map(|t| OldestWaiting {
                id: t.id.clone(),
                since: rfc3339(from_ms(t.created_ms)),
                waiting_for: t.waiting_for.clone(),
            }),
            oldest_waiting_s: counts.oldest_waiting_s,
            queued: counts.queued,
            recent_failures: failures.iter().map(TaskFailure::of).collect(),
            running: counts.running,
            succeeded_24h: done(TaskStatus::Succeeded),
            waiting: counts.waiting,
        }
    }

    /// The view of `svc`'s task queue for `owner` (counts are the router's; task ids and
    /// messages only the owner's own); `None` without a queue (no store, no tasks). One
    /// store read (on the blocking pool) for the 24 h counts and the failures; if it fails,
    /// the live counts are shown alone and the error logged.
    pub async fn read(svc: &Arc<Service>, owner: &str) -> Option<TasksView> {
        let scheduler = svc.tasks()?;
        let oldest = scheduler.oldest_waiting(Some(owner));
        let counts = scheduler.counts();
        let since = ms(crate::clock::wall()) - DAY.as_millis() as i64;
        let owned = Arc::clone(svc);
        let owner = owner.to_string();
        let read = crate::heap::spawn_blocking(move || {
            owned.store().map(|st| {
                st.read(|c| {
                    Ok((
                        stored::finished_since(c, since)?,
                        stored::failures(c, Some(&owner), i64::MIN, RECENT_FAILURES)?,
                    ))
                })
            })
        })
        .await;
        let (finished, failures) = match read {
            Ok(Some(Ok(got))) => got,
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, "/status: cannot read the finished tasks");
                Default::default()
            }
            Ok(None) | Err(_) => Default::default(),
        };
        Some(TasksView::of(
            &counts,
            oldest.as_ref(),
            &finished,
            &failures,
        ))
    }

    /// The one line `labrouter status` prints.
    pub fn line(&self) -> String {
        let mut out = format!(
            "tasks: {} queued, {} waiting, {} running, {} blocked; last 24 h: {} succeeded, {} failed, {} expired, {} cancelled",
            self.queued,
            self.waiting,
            self.running,
            self.blocked,
            self.succeeded_24h,
            self.failed_24h,
            self.expired_24h,
            self.cancelled_24h,
        );
        if let Some(s) = self.oldest_waiting_s {
            let words = crate::outcome::words::rounded(Duration::from_secs(s));
            match &self.oldest_waiting {
                Some(o) => out.push_str(&format!("; oldest waiting {words} ({})", o.id)),
                None => out.push_str(&format!("; oldest waiting {words}")),
            }
        }
        out
    }
}

impl TaskFailure {
    fn of(f: &Failure) -> TaskFailure {
        TaskFailure {
            code: f.error.as_ref().map(|e| e.code),
            finished_at: rfc3339(from_ms(f.finished_ms)),
            id: f.id.clone(),
            // The router's own words (the machine's answer stays in the task), bounded.
            message: f.error.as_ref().map(|e| crate::text::bounded(&e.message)),
            status: f.status,
        }
    }
}
