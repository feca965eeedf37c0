//! A task's status (docs/api.md "Tasks"), as the API, the store, `/status`, metrics and the CLI
//! name it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Its `after` tasks have not all succeeded.
    Blocked,
    /// Ready, waiting for a free slot.
    Queued,
    /// Every target it accepts is held back by a breaker.
    Waiting,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Expired,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 8] = [
        TaskStatus::Blocked,
        TaskStatus::Queued,
        TaskStatus::Waiting,
        TaskStatus::Running,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
        TaskStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Blocked => "blocked",
            TaskStatus::Queued => "queued",
            TaskStatus::Waiting => "waiting",
            TaskStatus::Running => "running",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Expired => "expired",
        }
    }

    /// A terminal status: nothing changes a finished task again.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded
                | TaskStatus::Failed
                | TaskStatus::Cancelled
                | TaskStatus::Expired
        )
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no task status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown task status '{0}'; expected one of: blocked, queued, waiting, running, succeeded, failed, cancelled, expired")]
pub struct UnknownStatus(pub String);

impl FromStr for TaskStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<TaskStatus, UnknownStatus> {
        TaskStatus::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownStatus(crate::text::bounded(s)))
    }
}

/// What happened to one target in one walk of a task, as `attempts[].outcome` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Held back by a breaker, the bulkhead or the task slots: nothing was sent.
    Skipped,
    /// Sent, and it did not serve.
    Failed,
    /// The router stopped uncleanly while the task was running.
    Interrupted,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Skipped => "skipped",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Interrupted => "interrupted",
        }
    }
}

impl FromStr for AttemptOutcome {
    type Err = String;

    fn from_str(s: &str) -> Result<AttemptOutcome, String> {
        [
            AttemptOutcome::Skipped,
            AttemptOutcome::Failed,
            AttemptOutcome::Interrupted,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| {
            format!(
                "unknown attempt outcome '{}'; expected skipped, failed or interrupted",
                crate::text::bounded(s)
            )
        })
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a task's callback stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    Pending,
    Delivered,
    /// Retried for 24 h without a 2xx.
    Failed,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Pending => "pending",
            Delivery::Delivered => "delivered",
            Delivery::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Delivery> {
        [Delivery::Pending, Delivery::Delivered, Delivery::Failed]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

/// Why a task ended without an answer, as its `error.code` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskCode {
    /// Every attempt it may use failed.
    AttemptsExhausted,
    /// The machine refused the request itself (400, 413, 422).
    RequestRejected,
    /// Its deadline passed.
    DeadlineExceeded,
    /// Cancelled by its owner.
    Cancelled,
    /// A task in its `after` failed, was cancelled or expired.
    DependencyFailed,
    /// A task in its `after` gave no usable text (none, or cut off).
    DependencyUnusable,
    /// It was running when the router stopped, twice.
    Interrupted,
    /// Its request could not be made ready to send (e.g. no route after substitution).
    InvalidRequest,
}

impl TaskCode {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskCode::AttemptsExhausted => "attempts_exhausted",
            TaskCode::RequestRejected => "request_rejected",
            TaskCode::DeadlineExceeded => "deadline_exceeded",
            TaskCode::Cancelled => "cancelled",
            TaskCode::DependencyFailed => "dependency_failed",
            TaskCode::DependencyUnusable => "dependency_unusable",
            TaskCode::Interrupted => "interrupted",
            TaskCode::InvalidRequest => "invalid_request",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_back_and_match_serde() {
        for s in TaskStatus::ALL {
            assert_eq!(s.as_str().parse::<TaskStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert!("done".parse::<TaskStatus>().is_err());
        assert!(TaskStatus::Expired.is_finished() && !TaskStatus::Waiting.is_finished());
        assert_eq!(
            serde_json::to_string(&TaskCode::DependencyFailed).unwrap(),
            "\"dependency_failed\""
        );
    }
}
